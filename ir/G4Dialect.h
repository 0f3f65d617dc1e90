// The `g4` MLIR dialect: Gemma 4 decoder graphs (see G4Dialect.td, G4Ops.td).
#pragma once

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "ir/G4Dialect.h.inc"

#define GET_ATTRDEF_CLASSES
#include "ir/G4Attrs.h.inc"

#define GET_OP_CLASSES
#include "ir/G4Ops.h.inc"

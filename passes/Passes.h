// Passes over the `g4` dialect (declared in Passes.td).
#pragma once

#include <memory>

#include "ir/G4Dialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace g4c::passes {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

}  // namespace g4c::passes

// Small helpers shared by the g4 passes (no pass lives here).
#pragma once

#include <cstdint>
#include <optional>

#include "ir/G4Dialect.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringSet.h"
#include "mlir/IR/BuiltinOps.h"

namespace g4c::passes {

// Discardable attribute the frontend puts on every op of decoder layer i.
inline constexpr const char* kLayerAttr = "g4.layer";

inline std::optional<int64_t> layerOf(mlir::Operation* op) {
  if (auto a = op->getAttrOfType<mlir::IntegerAttr>(kLayerAttr)) return a.getInt();
  return std::nullopt;
}

// Copies the layer tag of `from` onto `to` (fused ops keep their layer).
inline void copyLayer(mlir::Operation* from, mlir::Operation* to) {
  if (auto a = from->getAttr(kLayerAttr)) to->setAttr(kLayerAttr, a);
}

// The single function of a g4 module (the decoder step), or null.
inline mlir::Operation* decoderFunction(mlir::ModuleOp module) {
  for (mlir::Operation& op : module.getBody()->getOperations())
    if (op.getName().getStringRef() == "func.func") return &op;
  return nullptr;
}

inline int64_t i64Attr(mlir::DictionaryAttr dict, llvm::StringRef name, int64_t fallback = 0) {
  if (!dict) return fallback;
  if (auto a = dict.getAs<mlir::IntegerAttr>(name)) return a.getInt();
  return fallback;
}

}  // namespace g4c::passes

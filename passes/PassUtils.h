// Small helpers shared by the g4 passes (no pass lives here).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

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

// A layer's weight by its name within the layer: "layers.3.mlp.up_proj" → "mlp.up_proj"; none
// when the weight is not named after `layer`.
inline std::optional<std::string> layerLocalName(g4::WeightOp w, int64_t layer) {
  const std::string prefix = "layers." + std::to_string(layer) + ".", name = w.getSymName().str();
  if (name.rfind(prefix, 0) != 0) return std::nullopt;
  return name.substr(prefix.size());
}

inline int64_t i64Attr(mlir::DictionaryAttr dict, llvm::StringRef name, int64_t fallback = 0) {
  if (!dict) return fallback;
  if (auto a = dict.getAs<mlir::IntegerAttr>(name)) return a.getInt();
  return fallback;
}

}  // namespace g4c::passes

// Frontend: builds the g4 graph of one decoding step of a Gemma 4 text model
// from its config and its checkpoint's tensor headers (no weight data read).
//
// The graph is the unfused form of DESIGN.md §2: dequant and matmul are
// separate ops, attention is kv_write, kv_read -> qk -> mask -> softmax -> pv,
// full layers with k_eq_v take V from the raw k projection. Every op of layer i
// carries the discardable attribute `g4.layer = i`.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "models/config.h"
#include "models/dtype.h"

namespace g4c::frontend {

struct Int4Storage {
  int group_size = 128;
  bool symmetric = true;
  int64_t padded_in = 0;
  DType scale_dtype = DType::F16;
};

// One weight as the graph sees it: logical shape, stored dtype, optional INT4 storage.
struct WeightInfo {
  std::vector<int64_t> shape;
  DType dtype = DType::BF16;
  std::optional<Int4Storage> int4;
  std::string source;  // checkpoint key (BF16) or manifest module name (INT4)
};

// Keyed by graph name: the checkpoint name without prefix and without ".weight",
// e.g. "embed_tokens", "layers.3.self_attn.q_proj", "layers.3.layer_scalar", "norm".
using WeightTable = std::map<std::string, WeightInfo>;

// The weights a config implies, all BF16 (used for synthetic graphs and as the
// reference the checkpoint is checked against).
WeightTable expected_weights(const models::ModelConfig& cfg);
// Reads the checkpoint's safetensors headers (and manifest.json for INT4
// checkpoints) and checks every expected weight is there with its shape.
// Throws g4c::Error naming the directory and the tensor.
WeightTable checkpoint_weights(const models::ModelConfig& cfg, const std::filesystem::path& dir);

struct FrontendOptions {
  bool bf16_activations = false;  // activations in BF16 (CUDA) rather than f32 (CPU reference)
};

// Registers the dialects the frontend emits (g4, func).
void load_dialects(mlir::MLIRContext& ctx);

// The decoder step: func.func @decode(%ids: tensor<?xi32>, %positions: tensor<?xi32>)
// -> tensor<?xVOCABxf32> (logits of the last token of each sequence).
// The module carries `g4.config` (the model's geometry, for codegen and tests).
mlir::OwningOpRef<mlir::ModuleOp> build_decoder(mlir::MLIRContext& ctx, const models::ModelConfig& cfg,
                                                const WeightTable& weights, const FrontendOptions& opts = {});

// load_model_config(dir) + checkpoint_weights + build_decoder.
mlir::OwningOpRef<mlir::ModuleOp> build_from_model_dir(mlir::MLIRContext& ctx, const std::filesystem::path& dir,
                                                       const FrontendOptions& opts = {});

}  // namespace g4c::frontend

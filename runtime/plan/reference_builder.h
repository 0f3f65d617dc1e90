// Reference plan builder: emits the Gemma 4 program of KERNELS.md for a ModelConfig
// directly with flatbuffers, WITHOUT MLIR.
//
// Why it exists: codegen (MLIR g4 graph -> plan) is the production path for `g4c compile`;
// this builder is the independent C++ statement of the same program. It lets the runtime,
// its golden tests and `g4c run --model DIR` (when codegen is not linked) work on their own,
// and codegen's plan is tested step for step against it (tests/codegen).
//
// Weights are taken from the checkpoint: a Linear with `<name>.qweight` is bound as INT4
// (group size, padded_in, symmetric derived from the qweight/scales/zeros tensors), else dense.
#pragma once

#include <vector>

#include "runtime/plan/plan.h"

namespace g4c::plan {

struct ReferenceOptions {
  bool fused = true;            // fused kernel set (production) or the unfused elementwise form
  int max_chunk_tokens = 256;   // most tokens a sequence feeds per step (ring capacity = W-1+this)
  int kv_block_size = 16;       // tokens per paged block (full layers)
  // Sliding layers' KV as g4-plan-kv's sliding-kv: "ring", or "paged" / "auto" (blocks of the
  // window pool, returned as they leave the window).
  std::string sliding_kv = "auto";
  // KV storage type as g4-plan-kv's kv-dtype: "auto" (F32, the CPU reference), "bf16", or
  // "fp8" (F8E4M3 codes with a scale per token and head; plan.fbs KvLayer.dtype).
  std::string kv_dtype = "auto";
  // The tied embedding / LM head table: "bf16" (the checkpoint's dense tensor) or "int8" (codes
  // and a scale per row, quantized at load: plan.fbs WeightFormat Int8Rows).
  std::string table_dtype = "bf16";
  int max_seq_len = 2048;
  std::vector<int> bucket_tokens = {16, 64, 256, 1024};  // prefill shape buckets (tokens per step)
  std::vector<int> decode_buckets = {1, 2, 4, 8, 16, 32, 64};  // decode batch-size buckets (CUDA graphs)
  int graph_max_tokens = 256;  // prefill buckets up to this many tokens are CUDA graphs too
};

Plan build_reference_plan(const models::ModelConfig& cfg, const models::Checkpoint& ckpt,
                          const ReferenceOptions& opts = {});

}  // namespace g4c::plan

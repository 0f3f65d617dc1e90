// The default `g4c compile` pipeline: fusion, then planning, with optional
// dumps of the module after every pass (one readable .mlir file per pass).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mlir/IR/BuiltinOps.h"

namespace g4c::passes {

struct PipelineOptions {
  int64_t budget_mib = 9984;     // device budget (the 1g.10gb MIG slice)
  int64_t max_seqs = 4;          // sequences alive at once (decode batch)
  int64_t max_chunk = 256;       // prefill chunk, tokens per sequence per step
  int64_t max_seq_len = 2048;    // prompt + generated
  int64_t kv_block_size = 16;    // paged block size of full layers
  int64_t graph_max_tokens = 256;  // largest prefill bucket replayed as a CUDA graph (g4-plan-buckets)
  std::string sliding_kv = "auto";  // sliding layers' KV: ring | paged | auto (g4-plan-kv)
  std::string kv_dtype = "auto";    // KV storage: auto | bf16 | fp8 (g4-plan-kv kv-dtype)
  std::string table_dtype = "bf16";  // embedding / LM head table: bf16 | int8 (g4-quantize-table)
  bool fuse_gate_up = true;
  int64_t context_mib = 512, workspace_mib = 64, graph_pool_mib = 32;
  // Extra passes (textual, e.g. "g4-quantize-rtn{group-size=128}") run on the
  // frontend's graph before fusion.
  std::vector<std::string> pre_passes;
};

// The pass list, each entry a textual pipeline element ("g4-plan-kv{max-seqs=4 ...}").
std::vector<std::string> pipeline_passes(const PipelineOptions& opts);

// Registers the g4 passes once (safe to call repeatedly).
void register_passes_once();

// Runs the pipeline pass by pass. With a non-empty dump_dir, writes
// 00-frontend.mlir and NN-<pass>.mlir after each pass (created if needed).
// On failure returns false and puts the diagnostics in *diagnostics.
bool run_pipeline(mlir::ModuleOp module, const PipelineOptions& opts, const std::string& dump_dir,
                  std::string* diagnostics);

}  // namespace g4c::passes

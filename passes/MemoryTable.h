// The device memory table of a planned g4 module (weights, KV, activations,
// workspaces, graph pools, context vs budget). Filled by g4-plan-offload into
// the module attribute `g4.memory_table`; printed by `g4c compile`.
#pragma once

#include <cstdint>
#include <string>

#include "mlir/IR/BuiltinOps.h"

namespace g4c::passes {

struct MemoryTable {
  int64_t weights_resident = 0;  // device bytes of resident weights
  int64_t weights_streamed = 0;  // bytes kept in pinned host memory, streamed per layer
  int64_t staging = 0;           // device double buffer for streamed layers
  int64_t kv = 0;                // all KV buffers (g4.kv pool_bytes)
  int64_t activations = 0;       // activation arena at the largest bucket
  int64_t workspaces = 0;
  int64_t graph_pools = 0;
  int64_t context = 0;           // CUDA context + runtime before any buffer
  int64_t budget = 0;
  int64_t streamed_layers = 0;
  int64_t total() const {
    return weights_resident + staging + kv + activations + workspaces + graph_pools + context;
  }
};

// Reads `g4.memory_table`; false if the module has not been through g4-plan-offload.
bool readMemoryTable(mlir::ModuleOp module, MemoryTable* out);
void writeMemoryTable(mlir::ModuleOp module, const MemoryTable& table);
// A human-readable table (MiB with two decimals, and bytes).
std::string formatMemoryTable(const MemoryTable& table);

}  // namespace g4c::passes

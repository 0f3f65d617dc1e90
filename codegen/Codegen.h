// Codegen: lowers a planned g4 module (after the `g4c compile` pipeline) to the
// runtime's executable plan (runtime/plan/plan.fbs; kernel contract in
// runtime/plan/KERNELS.md). One g4 op becomes one plan step; every SSA value
// becomes one plan value whose per-bucket arena offsets come from g4-plan-memory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mlir/IR/BuiltinOps.h"
#include "models/config.h"

namespace g4c::codegen {

struct CodegenOptions {
  uint32_t format_version = 0;   // the runtime's kPlanFormatVersion (passed in: codegen links no runtime code)
  uint64_t fingerprint = 0;      // checkpoint fingerprint (runtime plan::checkpoint_fingerprint)
  std::string fingerprint_text;
  bool kv_bf16 = false;          // KV storage BF16 (GPU plans) or F32 (CPU reference)
  std::string generator = "g4c codegen 0.1";
};

// The plan as flatbuffers bytes (file identifier "G4CP"). Throws g4c::Error naming the
// op when the module holds an op without a kernel in KERNELS.md.
std::vector<uint8_t> emit_plan(mlir::ModuleOp module, const models::ModelConfig& cfg, const CodegenOptions& opts);

}  // namespace g4c::codegen

// In-process compilation of a checkpoint to an executable plan:
// frontend::build_decoder → passes::run_pipeline → codegen::emit_plan.
// `g4c compile -o` and `g4c run` without --plan share it.
#pragma once

#include <string>

#include "passes/Pipeline.h"
#include "runtime/plan/plan.h"

namespace g4c::cli {

// Throws g4c::Error (naming the model dir) when the graph cannot be built or the
// plan does not fit opts.budget_mib (the message carries the memory table).
plan::Plan compile_plan(const std::string& model_dir, const passes::PipelineOptions& opts,
                        bool bf16_activations = false, const std::string& dump_dir = "");

}  // namespace g4c::cli

// g4-awq-scale with its calibration executor (as passes/GPTQ.h: the pass reaches the runtime only
// through quant::CalibrationExecutor, which tools/ implements).
#pragma once

#include <memory>

#include "mlir/Pass/Pass.h"
#include "passes/quant/awq.h"

namespace g4c::passes {

struct AwqPassConfig {
  quant::CalibrationExecutor* executor = nullptr;  // not owned; must outlive the pass
  quant::AwqDriverOptions driver;                  // spec, clip, α grid, threads, callbacks
};

// The pass with an executor: folds the searched scales into the executor's weights, layer by
// layer, then restarts it (CalibrationExecutor::restart) so that a g4-gptq pass after it sees the
// scaled model from layer 0. Its options are taken from config.driver.awq.
std::unique_ptr<mlir::Pass> createAwqScalePass(const AwqPassConfig& config);

}  // namespace g4c::passes

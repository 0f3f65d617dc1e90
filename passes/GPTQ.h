// g4-gptq with its calibration executor (the pass reaches the runtime only through
// quant::CalibrationExecutor, which tools/ implements; passes/ never sees runtime/).
#pragma once

#include <memory>

#include "mlir/Pass/Pass.h"
#include "passes/quant/calibration.h"

namespace g4c::passes {

struct GptqPassConfig {
  quant::CalibrationExecutor* executor = nullptr;  // not owned; must outlive the pass
  quant::GptqDriverOptions driver;                 // spec, damp, block, act-order, threads, callbacks
};

// The pass with an executor: quantizes every Linear weight of the graph, layer by
// layer, and marks it INT4 (#g4.int4). Its options are taken from config.driver.gptq.
std::unique_ptr<mlir::Pass> createGptqPass(const GptqPassConfig& config);

}  // namespace g4c::passes

// GPTQ's Hessians and solves on the GPU (`g4c quantize --device cuda`): passes/quant's
// HessianStore over passes/quant/cuda/gptq_device (the same arithmetic as the host store;
// see passes/quant/cuda/gptq_kernels.cuh for what is bitwise equal and what is not).
#pragma once

#include "passes/quant/calibration.h"
#include "runtime/backend.h"

namespace g4c::tools {

// Stores on the CUDA backend `b` (its stream, inside its budget); `b` must outlive them.
// Throws when g4c was built without the CUDA backend.
quant::HessianStoreFactory gpu_hessian_stores(const runtime::Backend& b);

// Throws g4c::Error when the GPU solve cannot take these options (--block-size vs --group-size).
void check_gpu_gptq_options(const quant::GptqOptions& opt);

}  // namespace g4c::tools

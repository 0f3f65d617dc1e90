// One row's sampling parameters for the device sampler (cuda::sample_rows in fused.cuh): plain C++,
// shared by the kernel source (sample_kernel.cuh) and its CPU emulation test.
#pragma once

namespace g4c::cuda {

// Sampling parameters (runtime::SamplingParams) and the row's uniform draw u ∈ [0, 1)
// (runtime::sample_draw).
struct SampleRow {
  float temperature;  // ≤ 0: argmax
  int top_k;          // ≤ 0 or ≥ n: no top-k
  float top_p;        // ≥ 1: no nucleus
  int pad_;
  double u;
};

}  // namespace g4c::cuda

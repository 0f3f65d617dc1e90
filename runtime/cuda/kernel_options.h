// The kernel choices of one CUDA backend instance (runtime::CudaOptions::kernels), passed to each
// launch that depends on them. Nothing here is process-wide: two backends with different options
// run side by side in one process.
#pragma once

namespace g4c::cuda {

struct KernelOptions {
  // Programmatic dependent launch of the decode-step kernels: the decode GEMMs (m ≤ 32), the
  // decode attention and its split combine, rmsnorm, add_rmsnorm and qk_norm_rope_kv_write may
  // start while the kernel before them in the stream finishes; each reads only weights or
  // already-cached keys before it waits for that kernel. Only for weights nothing in flight
  // writes (the CUDA backend turns it off while weights stream).
  bool pdl = false;
  // Decode GEMMs (m ≤ 32) sum the parts of each output tile in a fixed order, so a run's outputs
  // repeat bitwise for the same inputs, batch and SM count (`g4c run --deterministic`). Size
  // workspaces (w4a16_workspace_bytes) with the same options: the mode needs more.
  bool deterministic = false;
};

}  // namespace g4c::cuda

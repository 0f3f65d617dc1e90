// A deliberately late producer for the PDL test (test_gemm_decode.cpp): one block sleeps for
// `sleep_ns`, then copies `bytes` (a multiple of 16) from src to dst.
#include <cuda_runtime.h>

#include <cstddef>

namespace {
__global__ void slow_copy_kernel(const uint4* src, uint4* dst, size_t n, unsigned sleep_ns) {
  if (threadIdx.x == 0)
    for (unsigned t = 0; t < sleep_ns; t += 1000) __nanosleep(1000);
  __syncthreads();
  for (size_t i = threadIdx.x; i < n; i += blockDim.x) dst[i] = src[i];
}
}  // namespace

cudaError_t slow_copy(const void* src, void* dst, size_t bytes, unsigned sleep_ns, cudaStream_t stream) {
  slow_copy_kernel<<<1, 256, 0, stream>>>(static_cast<const uint4*>(src), static_cast<uint4*>(dst), bytes / 16,
                                          sleep_ns);
  return cudaGetLastError();
}

// A late producer that lets the kernel after it launch at once (for the attention PDL test,
// test_attention.cpp): every block allows its dependents to launch (griddepcontrol), block 0's
// thread 0 sleeps for `sleep_ns`, then chunk i of src (16 bytes) is written to dst[i].
namespace {
__global__ void slow_scatter_kernel(const uint4* src, uint4* const* dst, size_t n, unsigned sleep_ns) {
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  if (threadIdx.x == 0)
    for (unsigned t = 0; t < sleep_ns; t += 1000) __nanosleep(1000);
  __syncthreads();
  for (size_t i = threadIdx.x; i < n; i += blockDim.x) *dst[i] = src[i];
}
}  // namespace

cudaError_t slow_scatter(const void* src, void* const* dst, size_t chunks, unsigned sleep_ns, cudaStream_t stream) {
  slow_scatter_kernel<<<1, 256, 0, stream>>>(static_cast<const uint4*>(src), reinterpret_cast<uint4* const*>(dst),
                                             chunks, sleep_ns);
  return cudaGetLastError();
}

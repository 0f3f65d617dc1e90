// Copy kernel for the bandwidth ceiling of the benchmark (16-byte loads/stores, grid-stride).
#include <cuda_runtime.h>

namespace {
__global__ void copy16_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    dst[i] = src[i];
}
}  // namespace

cudaError_t bench_copy16(const void* src, void* dst, size_t bytes, cudaStream_t stream) {
  int sms = 132, dev = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  copy16_kernel<<<sms * 8, 512, 0, stream>>>(static_cast<const uint4*>(src), static_cast<uint4*>(dst), bytes / 16);
  return cudaGetLastError();
}

// Read-bandwidth probe for the decode GEMM: what the decode kernels' access pattern can
// reach with no math, so a decode kernel's shortfall can be split into "pattern / bytes in
// flight" and "everything else". Usage: g4c_gpu_stream_bench [--green N].
//
// Kernels (all read-only, 16-byte loads, result folded into one word so nothing is elided):
//  - empty: one block that does nothing (per-launch cost of a graph node);
//  - grid: grid-stride loop, 8 loads per thread in flight (the copy kernel's pattern, no stores);
//  - warp<NW, D>: one block per SM of NW warps; each warp reads one contiguous range in 512-byte
//    chunks with D loads per lane in flight, refilled one by one as consumed (the register-direct
//    decode kernel's pattern); evict-first L2 policy and no L1 allocation, as that kernel.
// Timing as g4c_gpu_decode_bench: a graph of ≥ 20 launches rotating over buffers totalling
// ≥ 400 MB, CUDA events, median of 9 replays.
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "runtime/cuda/gemm_decode_common.cuh"
#include "bench/cuda/bench_util.h"

using namespace g4c::gpubench;

namespace {

__global__ void empty_kernel() {}

__global__ void grid_read(const uint4* __restrict__ src, size_t n, unsigned* out) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  unsigned acc = 0;
  size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  for (; i + 7 * stride < n; i += 8 * stride) {
    uint4 v[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = __ldg(src + i + j * stride);
#pragma unroll
    for (int j = 0; j < 8; ++j) acc ^= v[j].x ^ v[j].y ^ v[j].z ^ v[j].w;
  }
  for (; i < n; i += stride) {
    const uint4 v = __ldg(src + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) out[0] = acc;
}

// `work`: dummy dependent ALU ops per chunk per lane (0: pure read).
template <int D>
__global__ void __launch_bounds__(1024, 1) warp_read(const uint4* __restrict__ src, long chunks, int work, unsigned* out) {
  const int nw = gridDim.x * (blockDim.x >> 5);
  const int wi = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
  const long a = chunks * wi / nw, b = chunks * (wi + 1) / nw;
  const uint64_t pol = g4c::cuda::detail::evict_first_policy();
  const uint4* p = src + lane;
  uint4 r[D];
#pragma unroll
  for (int c = 0; c < D; ++c)
    if (a + c < b) r[c] = g4c::cuda::detail::ldg_stream(p + (a + c) * 32, pol);
  unsigned acc = 0;
  for (long base = a; base < b; base += D) {
#pragma unroll
    for (int c = 0; c < D; ++c) {
      if (base + c < b) {
        unsigned v = r[c].x ^ r[c].y ^ r[c].z ^ r[c].w;
        if (base + D + c < b) r[c] = g4c::cuda::detail::ldg_stream(p + (base + D + c) * 32, pol);
        for (int k = 0; k < work; ++k) v = v * 0x01000193u + (v >> 7);
        acc ^= v;
      }
    }
  }
  if (acc == 0x9e3779b9u) out[0] = acc;
}

template <int D>
void warp_case(const char* tag, int warps, int bps, int sms, char* pool, size_t pool_bytes, size_t bytes,
               int work, unsigned* out) {
  const int nbuf = int(pool_bytes / bytes);
  const long chunks = long(bytes / 512);
  const double ms = time_graph([&](int i) {
    warp_read<D><<<sms * bps, warps * 32, 0, g_stream>>>(
        reinterpret_cast<const uint4*>(pool + size_t(i % nbuf) * bytes), chunks, work, out);
  }, std::max(20, std::min(nbuf, 200)));
  std::printf("%-34s %8.1f MB %8.2f us %8.0f GB/s\n", tag, bytes / 1e6, ms * 1e3, bytes / (ms * 1e-3) / 1e9);
}

}  // namespace

int main(int argc, char** argv) {
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    std::printf("no CUDA device: benchmark skipped\n");
    return 77;
  }
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--green") {
      std::printf("--green: not supported by this probe (whole GPU only)\n");
      return 2;
    }
  CK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const size_t pool_bytes = size_t(512) << 20;
  char* pool;
  unsigned* out;
  CK(dmalloc(&pool, pool_bytes));
  CK(dmalloc(&out, 64));
  fill_random(pool, pool_bytes, 3, false);
  std::printf("== read probe, %d SMs\n", sms);
  {
    const double ms = time_graph([&](int) { empty_kernel<<<1, 32, 0, g_stream>>>(); }, 50);
    std::printf("%-34s %8s    %8.2f us (per graph node)\n", "empty kernel", "-", ms * 1e3);
  }
  const size_t sizes[] = {size_t(8) << 20, size_t(31) << 20, size_t(61) << 20, size_t(256) << 20};
  for (size_t bytes : sizes) {
    const int nbuf = int(pool_bytes / bytes);
    const double ms = time_graph([&](int i) {
      grid_read<<<sms * 8, 512, 0, g_stream>>>(reinterpret_cast<const uint4*>(pool + size_t(i % nbuf) * bytes),
                                               bytes / 16, out);
    }, std::max(20, std::min(nbuf, 200)));
    std::printf("%-34s %8.1f MB %8.2f us %8.0f GB/s\n", "grid-stride, 8/thread", bytes / 1e6, ms * 1e3,
                bytes / (ms * 1e-3) / 1e9);
    warp_case<8>("warp 16x1 D8", 16, 1, sms, pool, pool_bytes, bytes, 0, out);
    warp_case<8>("warp 16x1 D8 work 40", 16, 1, sms, pool, pool_bytes, bytes, 40, out);
    warp_case<16>("warp 16x1 D16", 16, 1, sms, pool, pool_bytes, bytes, 0, out);
    warp_case<8>("warp 32x1 D8", 32, 1, sms, pool, pool_bytes, bytes, 0, out);
    warp_case<8>("warp 8x2 D8", 8, 2, sms, pool, pool_bytes, bytes, 0, out);
    warp_case<4>("warp 16x1 D4", 16, 1, sms, pool, pool_bytes, bytes, 0, out);
    warp_case<16>("warp 32x1 D16", 32, 1, sms, pool, pool_bytes, bytes, 0, out);
  }
  CK(cudaFree(pool));
  CK(cudaFree(out));
  return 0;
}

// Timing, data and green-context helpers of the GPU microbenchmarks (bench_kernels.cpp,
// bench_decode.cpp, bench_stream.cu): host C++ over the CUDA runtime API; each benchmark is its
// own executable.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#define CK(x)                                                                              \
  do {                                                                                     \
    cudaError_t e_ = (x);                                                                  \
    if (e_ != cudaSuccess) {                                                               \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                        \
    }                                                                                      \
  } while (0)

namespace g4c::gpubench {

inline cudaStream_t g_stream;  // the stream every benchmark launches on

template <class T>
cudaError_t dmalloc(T** p, size_t bytes) { return cudaMalloc(reinterpret_cast<void**>(p), bytes); }

// Median ms per call of `launch(i)` for i = 0..calls-1, captured in one graph.
inline double time_graph(const std::function<void(int)>& launch, int calls, int samples = 9) {
  for (int i = 0; i < std::min(calls, 3); ++i) launch(i);  // warm-up (and lazy init) eagerly
  CK(cudaStreamSynchronize(g_stream));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CK(cudaStreamBeginCapture(g_stream, cudaStreamCaptureModeRelaxed));
  for (int i = 0; i < calls; ++i) launch(i);
  CK(cudaStreamEndCapture(g_stream, &graph));
  CK(cudaGraphInstantiate(&exec, graph, 0));
  CK(cudaGraphLaunch(exec, g_stream));  // warm-up replay
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  std::vector<double> ms;
  for (int s = 0; s < samples; ++s) {
    CK(cudaEventRecord(a, g_stream));
    CK(cudaGraphLaunch(exec, g_stream));
    CK(cudaEventRecord(b, g_stream));
    CK(cudaEventSynchronize(b));
    float t = 0;
    CK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t / calls);
  }
  CK(cudaGetLastError());
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// A driver API entry point through the runtime (the benchmarks do not link libcuda).
template <class F>
F drv_entry(const char* name) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult st{};
  if (cudaGetDriverEntryPointByVersion(name, &p, CUDA_VERSION, cudaEnableDefault, &st) != cudaSuccess ||
      st != cudaDriverEntryPointSuccess || !p) {
    std::fprintf(stderr, "driver entry point %s missing\n", name);
    std::exit(1);
  }
  return reinterpret_cast<F>(p);
}
#define G4C_BENCH_DRV(name, ...)                               \
  do {                                                         \
    static const auto fn_ = drv_entry<decltype(&name)>(#name); \
    if (fn_(__VA_ARGS__) != CUDA_SUCCESS) {                    \
      std::fprintf(stderr, "%s failed\n", #name);              \
      std::exit(1);                                            \
    }                                                          \
  } while (0)
// A green context of `sms` SMs made current and a stream on it (--green N: the 1g.10gb slice's
// SM share, as runtime/cuda_backend/device.cpp makes it).
inline cudaStream_t make_green_stream(int sms) {
  CK(cudaFree(nullptr));
  CUdevice dev;
  G4C_BENCH_DRV(cuDeviceGet, &dev, 0);
  CUdevResource all{}, part{}, rest{};
  G4C_BENCH_DRV(cuDeviceGetDevResource, dev, &all, CU_DEV_RESOURCE_TYPE_SM);
  unsigned groups = 1;
  G4C_BENCH_DRV(cuDevSmResourceSplitByCount, &part, &groups, &all, &rest, 0u, unsigned(sms));
  CUdevResourceDesc desc{};
  G4C_BENCH_DRV(cuDevResourceGenerateDesc, &desc, &part, 1u);
  CUgreenCtx g{};
  G4C_BENCH_DRV(cuGreenCtxCreate, &g, desc, dev, unsigned(CU_GREEN_CTX_DEFAULT_STREAM));
  CUcontext ctx{};
  G4C_BENCH_DRV(cuCtxFromGreenCtx, &ctx, g);
  G4C_BENCH_DRV(cuCtxSetCurrent, ctx);
  CUstream st{};
  G4C_BENCH_DRV(cuGreenCtxStreamCreate, &st, g, unsigned(CU_STREAM_NON_BLOCKING), 0);
  return reinterpret_cast<cudaStream_t>(st);
}

// Random bytes (or N(0,1) bf16): at most 16 MiB drawn on the host, then tiled on the device.
inline void fill_random(void* d, size_t bytes, uint64_t seed, bool bf16_normal) {
  const size_t chunk = std::min(bytes, size_t(16) << 20);
  std::vector<uint16_t> h((chunk + 1) / 2);
  std::mt19937_64 rng(seed);
  if (bf16_normal) {
    std::normal_distribution<float> nd(0.f, 1.f);
    for (auto& v : h) {
      float f = nd(rng);
      uint32_t u;
      std::memcpy(&u, &f, 4);
      v = uint16_t(u >> 16);
    }
  } else {
    for (size_t i = 0; i < h.size(); i += 4) {
      uint64_t r = rng();
      for (size_t j = 0; j < 4 && i + j < h.size(); ++j) h[i + j] = uint16_t(r >> (16 * j));
    }
  }
  CK(cudaMemcpy(d, h.data(), chunk, cudaMemcpyHostToDevice));
  for (size_t off = chunk; off < bytes; off += chunk)
    CK(cudaMemcpy(static_cast<char*>(d) + off, d, std::min(chunk, bytes - off), cudaMemcpyDeviceToDevice));
}

// The small fused ops (bench_fused.cpp).
void bench_fused();

}  // namespace g4c::gpubench

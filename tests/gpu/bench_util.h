// Timing and data helpers of the GPU microbenchmarks (bench_kernels.cpp, bench_decode.cpp):
// host C++ over the CUDA runtime API; each benchmark is its own executable.
#pragma once

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

}  // namespace g4c::gpubench

// Helpers for the GPU kernel tests and benchmarks (host C++; CUDA runtime API only).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "runtime/cuda/kernel_options.h"

// Deliberately late producers for the PDL tests (slow_copy.cu).
cudaError_t slow_copy(const void* src, void* dst, size_t bytes, unsigned sleep_ns, cudaStream_t stream);
cudaError_t slow_scatter(const void* src, void* const* dst, size_t chunks, unsigned sleep_ns, cudaStream_t stream);

namespace g4c::gputest {

using bf16 = __nv_bfloat16;

#define G4C_CUDA_OK(expr)                                                           \
  do {                                                                              \
    cudaError_t _e = (expr);                                                        \
    ASSERT_EQ(_e, cudaSuccess) << #expr << ": " << cudaGetErrorString(_e);          \
  } while (0)

// True when a CUDA device is usable; tests GTEST_SKIP() otherwise (CI has no GPU).
inline bool have_gpu() {
  static int ok = -1;
  if (ok < 0) {
    int n = 0;
    ok = (cudaGetDeviceCount(&n) == cudaSuccess && n > 0) ? 1 : 0;
  }
  return ok == 1;
}
#define G4C_REQUIRE_GPU() \
  if (!::g4c::gputest::have_gpu()) GTEST_SKIP() << "no CUDA device"

// A fresh seed per process (printed so a failure can be replayed with G4C_SEED=...).
inline uint64_t test_seed() {
  static uint64_t s = [] {
    const char* e = std::getenv("G4C_SEED");
    uint64_t v = e ? std::strtoull(e, nullptr, 10) : std::random_device{}();
    std::fprintf(stderr, "[gpu tests] seed %llu\n", (unsigned long long)v);
    return v;
  }();
  return s;
}

inline float bf(bf16 v) { return __bfloat162float(v); }
inline bf16 tobf(float v) { return __float2bfloat16(v); }
inline float rbf(float v) { return bf(tobf(v)); }

// Device buffer (owning).
template <class T>
struct DevBuf {
  T* p = nullptr;
  size_t n = 0;
  DevBuf() = default;
  explicit DevBuf(size_t count) : n(count) {
    if (count && cudaMalloc(reinterpret_cast<void**>(&p), count * sizeof(T)) != cudaSuccess) p = nullptr;
  }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  ~DevBuf() { if (p) cudaFree(p); }
  explicit DevBuf(const std::vector<T>& h) : DevBuf(h.size()) { put(h); }
  size_t bytes() const { return n * sizeof(T); }
  void put(const std::vector<T>& h) {
    if (!h.empty() && p) cudaMemcpy(p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice);
  }
  std::vector<T> get() const {
    std::vector<T> h(n);
    if (n && p) cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost);
    return h;
  }
};
template <class T>
inline std::vector<T> download(const T* d, size_t n) {
  std::vector<T> h(n);
  if (n) cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost);
  return h;
}
// Poison: every byte 0xFF (a NaN in bf16, fp16 and fp32; -1 as int).
inline void poison(void* d, size_t bytes) { cudaMemset(d, 0xFF, bytes); }

inline std::vector<bf16> rand_bf16(std::mt19937_64& rng, size_t n, float stddev) {
  std::normal_distribution<float> nd(0.f, stddev);
  std::vector<bf16> v(n);
  for (auto& x : v) x = tobf(nd(rng));
  return v;
}

// ‖got − ref‖ / ‖ref‖ over entries; NaN/inf in got → +inf. `count_bad` gets non-finite count.
inline double rel_err(const std::vector<double>& ref, const std::vector<float>& got,
                      size_t* count_bad = nullptr) {
  double num = 0, den = 0;
  size_t bad = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(got[i])) { ++bad; continue; }
    const double d = double(got[i]) - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
  }
  if (count_bad) *count_bad = bad;
  if (bad) return INFINITY;
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

inline std::vector<float> to_float(const std::vector<bf16>& v) {
  std::vector<float> f(v.size());
  for (size_t i = 0; i < v.size(); ++i) f[i] = bf(v[i]);
  return f;
}

// A lab-format INT4 weight on the host (DESIGN.md §3) with random codes, scales (fp16 or bf16
// bits) and zeros; w() is its dequantized value.
struct Int4Src {
  int n, k, kp, group;
  bool asym, sbf16;
  std::vector<uint8_t> q, z;
  std::vector<uint16_t> s;  // raw fp16 or bf16 bits
  double w(int row, int col) const {
    const int code = (q[size_t(row) * (kp / 2) + col / 2] >> (4 * (col & 1))) & 15;
    const size_t gi = size_t(row) * (kp / group) + col / group;
    const double zero = asym ? z[gi] : 8;
    return (code - zero) * scale(gi);
  }
  double scale(size_t gi) const {
    if (sbf16) { bf16 b; std::memcpy(&b, &s[gi], 2); return bf(b); }
    __half h; std::memcpy(&h, &s[gi], 2); return __half2float(h);
  }
};

inline Int4Src make_int4(std::mt19937_64& rng, int n, int k, int group, bool asym, bool sbf16) {
  Int4Src w{n, k, (k + group - 1) / group * group, group, asym, sbf16, {}, {}, {}};
  std::uniform_int_distribution<int> byte(0, 255), nib(0, 15);
  std::uniform_real_distribution<float> sd(0.002f, 0.02f);
  w.q.resize(size_t(n) * w.kp / 2);
  for (auto& b : w.q) b = uint8_t(byte(rng));
  const size_t ng = size_t(n) * (w.kp / group);
  w.s.resize(ng);
  for (auto& v : w.s) {
    const float f = sd(rng);
    if (sbf16) { bf16 b = tobf(f); std::memcpy(&v, &b, 2); }
    else { __half h = __float2half(f); std::memcpy(&v, &h, 2); }
  }
  if (asym) { w.z.resize(ng); for (auto& v : w.z) v = uint8_t(nib(rng)); }
  return w;
}

// PDL tests: launch(s, ko) on a fresh non-blocking stream right after a late producer of its
// inputs that lets it launch at once (slow_scatter: 200 µs of sleep, then 16-byte chunk i of src
// to dst[i]); ko.pdl is set for that launch. A kernel that read its inputs before its
// griddepcontrol.wait would see whatever dst held before (the tests poison it).
template <class Launch>
void launch_after_late_scatter(const std::vector<bf16>& src, const std::vector<void*>& dst, Launch&& launch) {
  DevBuf<bf16> dsrc(src);
  DevBuf<void*> ddst(dst);
  cudaStream_t s;
  G4C_CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  G4C_CUDA_OK(cudaDeviceSynchronize());
  cuda::KernelOptions ko;
  ko.pdl = true;
  const cudaError_t producer = slow_scatter(dsrc.p, ddst.p, dst.size(), 200000, s);
  const cudaError_t e = producer == cudaSuccess ? launch(s, ko) : producer;
  G4C_CUDA_OK(e);
  G4C_CUDA_OK(cudaStreamSynchronize(s));
  G4C_CUDA_OK(cudaStreamDestroy(s));
}

}  // namespace g4c::gputest

// A CPU emulation of the small part of CUDA that runtime/cuda/sample_kernel.cuh and
// gemv_bf16_kernel.cuh use, so their kernel sources run here (no GPU in CI): one std::thread per
// CUDA thread, blocks one after another; __syncthreads is a block-wide std::barrier, warp shuffles
// and mma.sync (m16n8k16 bf16, the PTX fragment layout) exchange through per-warp buffers between
// two warp barriers, shared-memory atomics are std::atomic_ref, `__shared__` variables are
// function statics (one block runs at a time). What it checks is the kernel's
// logic (indexing, the histogram / radix / scan steps, barrier placement that a thread-per-thread
// run can deadlock on); not the device's math (expf is the host's) nor its memory model.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

namespace cuda_emu {

struct Dim3 {
  unsigned x = 0, y = 0, z = 0;
};

struct BlockState {
  explicit BlockState(int n) : bar(n), xchg(static_cast<size_t>(n)), mma(static_cast<size_t>(n)) {
    for (int w = 0; 32 * w < n; ++w) warp.push_back(std::make_unique<std::barrier<>>(std::min(32, n - 32 * w)));
  }
  std::barrier<> bar;
  std::vector<std::unique_ptr<std::barrier<>>> warp;
  std::vector<uint64_t> xchg;
  std::vector<std::array<uint32_t, 10>> mma;  // a lane's mma.sync operands (A 4, B 2, C 4 words)
};

inline thread_local Dim3 tl_thread, tl_block, tl_grid;
inline thread_local BlockState* tl_state = nullptr;

// Runs fn() as `grid` blocks of `threads` CUDA threads.
inline void launch(int grid, int threads, const std::function<void()>& fn) {
  for (int b = 0; b < grid; ++b) {
    BlockState st(threads);
    std::vector<std::thread> ts;
    ts.reserve(static_cast<size_t>(threads));
    for (int t = 0; t < threads; ++t)
      ts.emplace_back([&st, &fn, t, b, grid] {
        tl_thread = {unsigned(t), 0, 0};
        tl_block = {unsigned(b), 0, 0};
        tl_grid = {unsigned(grid), 1, 1};
        tl_state = &st;
        fn();
      });
    for (auto& t : ts) t.join();
  }
}

inline float bf16_lo(uint32_t v) {  // element 0 of a bf16 pair (the low half)
  const uint32_t u = v << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline float bf16_hi(uint32_t v) {
  const uint32_t u = v & 0xFFFF0000u;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32, d += a·b, with the PTX ISA's fragment
// layout (g = lane / 4, t = lane % 4): a0 (row g, k 2t, 2t+1), a1 (row g+8, the same k), a2 (row g,
// k 2t+8, 2t+9), a3 (row g+8, k 2t+8, 2t+9); b0 (k 2t, 2t+1; column g), b1 (k 2t+8, 2t+9; column
// g); c0, c1 (row g, columns 2t, 2t+1), c2, c3 (row g+8, the same columns). The warp's operands
// meet in shared scratch between two warp barriers; sums in double (the device's internal order
// and rounding are unspecified, so tests bound the difference).
inline void mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  BlockState& st = *tl_state;
  const unsigned self = tl_thread.x, w = self >> 5;
  auto& mine = st.mma[self];
  mine = {a[0], a[1], a[2], a[3], b0, b1, 0, 0, 0, 0};
  for (int i = 0; i < 4; ++i) std::memcpy(&mine[6 + i], &d[i], 4);
  st.warp[w]->arrive_and_wait();
  float A[16][16], B[16][8], C[16][8];
  for (unsigned l = 0; l < 32; ++l) {
    const auto& s = st.mma[(w << 5) | l];
    const unsigned g = l >> 2, t = l & 3;
    for (int h = 0; h < 2; ++h) {
      auto e = [&](uint32_t v) { return h ? bf16_hi(v) : bf16_lo(v); };
      A[g][2 * t + h] = e(s[0]);
      A[g + 8][2 * t + h] = e(s[1]);
      A[g][2 * t + 8 + h] = e(s[2]);
      A[g + 8][2 * t + 8 + h] = e(s[3]);
      B[2 * t + h][g] = e(s[4]);
      B[2 * t + 8 + h][g] = e(s[5]);
    }
    std::memcpy(&C[g][2 * t], &s[6], 4);
    std::memcpy(&C[g][2 * t + 1], &s[7], 4);
    std::memcpy(&C[g + 8][2 * t], &s[8], 4);
    std::memcpy(&C[g + 8][2 * t + 1], &s[9], 4);
  }
  st.warp[w]->arrive_and_wait();
  const unsigned g = (self & 31) >> 2, t = self & 3;
  for (int i = 0; i < 4; ++i) {
    const unsigned row = g + (i >= 2 ? 8 : 0), col = 2 * t + (i & 1);
    double v = C[row][col];
    for (int k = 0; k < 16; ++k) v += double(A[row][k]) * double(B[k][col]);
    d[i] = float(v);
  }
}

template <class T>
T exchange(T v, unsigned src_lane_of_self) {
  BlockState& st = *tl_state;
  const unsigned t = tl_thread.x, w = t >> 5;
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  st.xchg[t] = bits;
  st.warp[w]->arrive_and_wait();
  const uint64_t o = st.xchg[(w << 5) | src_lane_of_self];
  st.warp[w]->arrive_and_wait();
  T r;
  std::memcpy(&r, &o, sizeof(T));
  return r;
}

}  // namespace cuda_emu

#define threadIdx (::cuda_emu::tl_thread)
#define blockIdx (::cuda_emu::tl_block)
#define gridDim (::cuda_emu::tl_grid)
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static

inline void __syncthreads() { cuda_emu::tl_state->bar.arrive_and_wait(); }
template <class T>
T __shfl_xor_sync(unsigned, T v, int mask) {
  return cuda_emu::exchange(v, (threadIdx.x & 31u) ^ unsigned(mask));
}
template <class T>
T __shfl_up_sync(unsigned, T v, unsigned delta) {  // lanes below delta keep their own value
  const unsigned lane = threadIdx.x & 31u;
  return cuda_emu::exchange(v, lane >= delta ? lane - delta : lane);
}
inline uint32_t atomicAdd(uint32_t* p, uint32_t v) { return std::atomic_ref<uint32_t>(*p).fetch_add(v); }
inline double atomicAdd(double* p, double v) { return std::atomic_ref<double>(*p).fetch_add(v); }
inline uint32_t __float_as_uint(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
template <class T>
T min(T a, T b) { return b < a ? b : a; }
template <class T>
T max(T a, T b) { return a < b ? b : a; }
using std::isfinite;

// The operations runtime/cuda/gemv_bf16_kernel.cuh leaves to its includer.
inline void g4c_mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  cuda_emu::mma_bf16_16816(d, a, b0, b1);
}
template <class U4>
U4 g4c_ld_stream16(const U4* p) { return *p; }

// A CPU emulation of the small part of CUDA that runtime/cuda/sample_kernel.cuh uses, so its
// kernel source runs here (no GPU in CI): one std::thread per CUDA thread, blocks one after
// another; __syncthreads is a block-wide std::barrier, warp shuffles exchange through a per-warp
// buffer between two warp barriers, shared-memory atomics are std::atomic_ref, `__shared__`
// variables are function statics (one block runs at a time). What it checks is the kernel's
// logic (indexing, the histogram / radix / scan steps, barrier placement that a thread-per-thread
// run can deadlock on); not the device's math (expf is the host's) nor its memory model.
#pragma once

#include <algorithm>
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
  explicit BlockState(int n) : bar(n), xchg(static_cast<size_t>(n)) {
    for (int w = 0; 32 * w < n; ++w) warp.push_back(std::make_unique<std::barrier<>>(std::min(32, n - 32 * w)));
  }
  std::barrier<> bar;
  std::vector<std::unique_ptr<std::barrier<>>> warp;
  std::vector<uint64_t> xchg;
};

inline thread_local Dim3 tl_thread, tl_block;
inline thread_local BlockState* tl_state = nullptr;

// Runs fn() as `grid` blocks of `threads` CUDA threads.
inline void launch(int grid, int threads, const std::function<void()>& fn) {
  for (int b = 0; b < grid; ++b) {
    BlockState st(threads);
    std::vector<std::thread> ts;
    ts.reserve(static_cast<size_t>(threads));
    for (int t = 0; t < threads; ++t)
      ts.emplace_back([&st, &fn, t, b] {
        tl_thread = {unsigned(t), 0, 0};
        tl_block = {unsigned(b), 0, 0};
        tl_state = &st;
        fn();
      });
    for (auto& t : ts) t.join();
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

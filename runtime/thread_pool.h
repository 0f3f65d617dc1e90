// A small persistent thread pool (the CPU backend's kernels, the scheduler's sampled rows, the
// quantization executor): parallel_for over an index range.
// The calling thread takes part; calls must not nest.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace g4c::runtime {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  int size() const { return int(workers_.size()) + 1; }
  // Calls fn(begin, end) on disjoint chunks covering [0, n), at least `grain` items each
  // (except the last), and returns when all chunks are done.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void worker_loop();
  void run_chunks();
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_, done_;
  uint64_t generation_ = 0;
  bool stop_ = false;
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0, chunk_ = 1;
  std::atomic<int64_t> next_{0};
  int busy_ = 0;  // workers that finished the current generation
};

// fn(begin, end) over contiguous chunks of [0, n), at most `threads` of them (≤ 0: up to 8 of the
// hardware threads) and each at least `min_chunk` items, on short-lived threads — for bulk
// element-wise conversions outside any pool (weight loading). The calling thread runs the first
// chunk; fn must not throw.
void parallel_chunks(int64_t n, int threads, int64_t min_chunk, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace g4c::runtime

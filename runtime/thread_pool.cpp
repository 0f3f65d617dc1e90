#include "runtime/thread_pool.h"

#include <algorithm>

namespace g4c::runtime {

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = int(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_chunks() {
  for (;;) {
    int64_t begin = next_.fetch_add(chunk_);
    if (begin >= n_) return;
    (*fn_)(begin, std::min(n_, begin + chunk_));
  }
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    run_chunks();
    {
      // Every worker reports every generation, so no worker can still be inside an old
      // job (with a dangling fn_) when parallel_for returns.
      std::lock_guard lock(mu_);
      if (++busy_ == int(workers_.size())) done_.notify_all();
    }
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  if (workers_.empty() || n <= grain) {
    fn(0, n);
    return;
  }
  // About 4 chunks per thread balances uneven rows without much atomic traffic.
  int64_t chunk = std::max(grain, (n + 4 * size() - 1) / (4 * size()));
  {
    std::lock_guard lock(mu_);
    fn_ = &fn;
    n_ = n;
    chunk_ = chunk;
    next_.store(0);
    busy_ = 0;
    ++generation_;
  }
  wake_.notify_all();
  run_chunks();
  std::unique_lock lock(mu_);
  done_.wait(lock, [&] { return busy_ == int(workers_.size()); });
}

void parallel_chunks(int64_t n, int threads, int64_t min_chunk, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (threads <= 0) threads = int(std::min(8u, std::max(1u, std::thread::hardware_concurrency())));
  const int64_t nt = std::clamp<int64_t>(threads, 1, std::max<int64_t>(1, n / std::max<int64_t>(1, min_chunk)));
  const int64_t per = (n + nt - 1) / nt;
  std::vector<std::thread> pool;
  for (int64_t t = 1; t < nt; ++t) pool.emplace_back(fn, std::min(n, t * per), std::min(n, (t + 1) * per));
  fn(0, std::min(n, per));
  for (auto& th : pool) th.join();
}

}  // namespace g4c::runtime

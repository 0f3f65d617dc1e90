// StagedUpload (staging.h): pinned double-buffered host → device copies.
#include "runtime/cuda_backend/staging.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "models/error.h"
#include "models/progress.h"
#include "runtime/cuda_backend/device.h"

namespace g4c::cudart {
namespace {

// memcpy of large blocks by `threads` threads (page faults of a cold mmap and the copy itself
// both scale with threads); small blocks on the calling thread.
void parallel_memcpy(void* dst, const void* src, size_t n, int threads) {
  constexpr size_t kPerThreadMin = size_t(4) << 20;
  const int t = int(std::min<size_t>(size_t(std::max(1, threads)), std::max<size_t>(1, n / kPerThreadMin)));
  if (t <= 1) {
    std::memcpy(dst, src, n);
    return;
  }
  const size_t part = (n + t - 1) / t;
  std::vector<std::thread> pool;
  for (int i = 1; i < t; ++i) {
    const size_t b = std::min(n, size_t(i) * part), e = std::min(n, b + part);
    pool.emplace_back([=] { std::memcpy(static_cast<char*>(dst) + b, static_cast<const char*>(src) + b, e - b); });
  }
  std::memcpy(dst, src, std::min(n, part));
  for (auto& th : pool) th.join();
}

}  // namespace

StagedUpload::StagedUpload(cudaStream_t stream, Progress* progress, size_t chunk_bytes, int threads)
    : stream_(stream), progress_(progress), chunk_(std::max<size_t>(chunk_bytes, 1 << 20)), threads_(threads) {
  for (int i = 0; i < 2; ++i) {
    if (cudaHostAlloc(&buf_[i], chunk_, cudaHostAllocDefault) != cudaSuccess ||
        cudaEventCreateWithFlags(&done_[i], cudaEventDisableTiming) != cudaSuccess) {
      cudaGetLastError();  // clear; fall back to plain synchronous copies
      for (int j = 0; j <= i; ++j) {
        if (buf_[j]) cudaFreeHost(buf_[j]);
        if (done_[j]) cudaEventDestroy(done_[j]);
        buf_[j] = nullptr;
        done_[j] = nullptr;
      }
      return;
    }
  }
}

StagedUpload::~StagedUpload() {
  try {
    finish();
  } catch (...) {
  }
  for (int i = 0; i < 2; ++i) {
    if (done_[i]) cudaEventDestroy(done_[i]);
    if (buf_[i]) cudaFreeHost(buf_[i]);
  }
}

void StagedUpload::copy(void* dst, const void* src, size_t bytes, const char* what) {
  if (!bytes) return;
  if (!pinned()) {
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_), what);
    check(cudaStreamSynchronize(stream_), what);  // pageable source: must be read before return
  } else {
    for (size_t off = 0; off < bytes; off += chunk_) {
      const size_t n = std::min(chunk_, bytes - off);
      const int i = next_;
      next_ ^= 1;
      if (busy_[i]) check(cudaEventSynchronize(done_[i]), what);  // the DMA out of this buffer is done
      parallel_memcpy(buf_[i], static_cast<const char*>(src) + off, n, threads_);
      check(cudaMemcpyAsync(static_cast<char*>(dst) + off, buf_[i], n, cudaMemcpyHostToDevice, stream_), what);
      check(cudaEventRecord(done_[i], stream_), what);
      busy_[i] = true;
    }
  }
  bytes_ += bytes;
  if (progress_) progress_->add(bytes);
}

void StagedUpload::finish() {
  for (int i = 0; i < 2; ++i)
    if (busy_[i]) {
      busy_[i] = false;
      check(cudaEventSynchronize(done_[i]), "weight upload");
    }
  if (!pinned()) check(cudaStreamSynchronize(stream_), "weight upload");
}

}  // namespace g4c::cudart

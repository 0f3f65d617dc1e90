// Host → device weight copies through a pinned double buffer (not a public header).
//
// The checkpoint is mmap'd (pageable, page cache): cudaMemcpy from it stages through the
// driver's small pinned bounce buffer and returns only when the DMA is done, so one tensor at
// a time with a synchronize after each ran at ~0.25 GB/s for the 12B load. Here chunks of up to
// `chunk_bytes` are copied by a few host threads into one of two pinned buffers while the DMA of
// the previous chunk runs from the other; copies are ordered on `stream` (kernels enqueued after
// a copy on the same stream see its data) and the host waits only before reusing a buffer.
//
//   StagedUpload up(stream, &progress);
//   up.copy(dev_ptr, host_ptr, bytes);   // host_ptr may be reused / unmapped on return
//   ...
//   up.finish();                          // every copy landed
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace g4c {
class Progress;
}

namespace g4c::cudart {

class StagedUpload {
 public:
  explicit StagedUpload(cudaStream_t stream, Progress* progress = nullptr, size_t chunk_bytes = size_t(32) << 20,
                        int threads = 4);
  ~StagedUpload();  // finish() (errors ignored), then frees the pinned buffers
  StagedUpload(const StagedUpload&) = delete;
  StagedUpload& operator=(const StagedUpload&) = delete;

  // Enqueues the copy of `bytes` from host `src` to device `dst` on the stream; returns once
  // `src` has been read (the DMA may still run). Throws g4c::Error naming `what` on a CUDA error.
  void copy(void* dst, const void* src, size_t bytes, const char* what);
  void finish();                          // waits for every copy enqueued so far
  size_t bytes() const { return bytes_; }  // copied so far
  bool pinned() const { return buf_[0] != nullptr; }  // false: cudaHostAlloc failed, plain copies

 private:
  cudaStream_t stream_;
  Progress* progress_;
  size_t chunk_;
  int threads_;
  void* buf_[2] = {nullptr, nullptr};
  cudaEvent_t done_[2] = {nullptr, nullptr};  // recorded after the DMA out of buf_[i]
  bool busy_[2] = {false, false};
  int next_ = 0;
  size_t bytes_ = 0;
};

}  // namespace g4c::cudart

// The CUDA device the backend runs on: context (plain, or a green context of N SMs for
// `--emulate 1g.10gb`), the compute stream, and the process memory budget measured with
// cudaMemGetInfo (every byte the device holds: context, workspaces, weights, KV, graphs).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>

namespace g4c::cudart {

// Throws g4c::Error "cuda backend: <what>: <error string>" unless e == cudaSuccess.
void check(cudaError_t e, const char* what);

// Device allocations are rounded up to 256 bytes; byte counts in messages as rounded MiB.
inline size_t align256(size_t b) { return (b + 255) & ~size_t(255); }
inline std::string mib(size_t b) { return std::to_string((b + (1 << 19)) >> 20) + " MiB"; }

struct DeviceOptions {
  int device = 0;
  int green_sms = 0;          // > 0: run in a green context of at least this many SMs
  size_t budget_bytes = 0;    // 0: no budget
  std::string emulation;      // label for the summary ("1g.10gb") or empty
};

class Device {
 public:
  explicit Device(const DeviceOptions& o);  // creates the context(s) and the stream
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  cudaStream_t stream() const { return stream_; }
  cudaStream_t copy_stream() const { return copy_stream_; }
  const DeviceOptions& options() const { return opts_; }
  int sms() const { return sms_; }            // SMs the work runs on
  const std::string& name() const { return name_; }
  size_t total_bytes() const { return total_; }
  size_t context_bytes() const { return context_bytes_; }  // in use right after context creation

  // Bytes in use on the device now (total − free). Updates the peak.
  size_t used_bytes();
  size_t peak_bytes() const { return peak_; }
  // Measures, and throws g4c::Error naming `where` and the breakdown when over the budget.
  void check_budget(const char* where, const std::string& breakdown = "");
  // Throws before an allocation of `bytes` that would take the process over the budget.
  void reserve(size_t bytes, const char* what, const std::string& breakdown = "");
  // One line for the run summary.
  std::string describe() const;

 private:
  DeviceOptions opts_;
  cudaStream_t stream_ = nullptr;
  cudaStream_t copy_stream_ = nullptr;
  void* green_ = nullptr;  // CUgreenCtx
  void* prev_ctx_ = nullptr;  // CUcontext current before the green one (restored at destruction)
  int sms_ = 0;
  std::string name_;
  size_t total_ = 0, context_bytes_ = 0, peak_ = 0;
};

}  // namespace g4c::cudart

// The CUDA backend: runs a plan's program with the kernels of runtime/cuda on one
// device. Plain C++ header (no CUDA include) so tools can use it; the library that defines it,
// g4c_cuda_backend, exists only when CUDA is built (G4C_HAVE_CUDA_BACKEND is then defined for
// whoever links it).
//
//   auto backend = runtime::make_cuda_backend({.model_dir = dir, .emulate = "1g.10gb"});
//   auto engine = runtime::Engine::open(dir, std::nullopt, options, std::move(backend));
//
// Device state: weights in device memory (dense → BF16; INT4 Linears read raw from the
// checkpoint and repacked at load by cuda::int4_repack; gate/up pairs fused into one weight),
// BF16 activations (fp32 logits), ring + paged KV in BF16 with device block tables. Steps replay
// a CUDA graph per bucket of the plan (g4-plan-buckets: every decode batch-size bucket and the
// prefill buckets up to graph-max-tokens), padded up to it and captured the second time its
// shape is seen; a step no graph bucket holds runs eagerly (graph_buckets.h).
// Memory: every device byte the process holds (cudaMemGetInfo: total − free, so context,
// library workspaces and graph pools included) is checked against the budget after each
// allocation and step; exceeding it throws g4c::Error with the breakdown.
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <string>

#include "runtime/backend.h"
#include "runtime/cuda/kernel_options.h"  // plain C++

namespace g4c::runtime {

struct CudaOptions {
  std::filesystem::path model_dir;      // INT4 Linears are read raw from here; empty → dense BF16 from the store
  // Fault injection for tests (runtime/backend.h): asked before each device allocation with its
  // rounded size and purpose; true makes it fail as cudaErrorMemoryAllocation would.
  AllocationFault alloc_fault;
  int device = 0;
  std::string emulate;                  // "" (whole device) or "1g.10gb" (16-SM green context, 9984 MiB cap)
  size_t budget_bytes = 9984ull << 20;  // whole-process device bytes; 0 = no budget
  std::string trace_path;               // Chrome-trace JSON written at destruction ("" = none)
  bool graphs = true;                   // CUDA graphs for the plan's graph buckets (graph_buckets.h)
  // Kernel choices of this backend's launches (runtime/cuda/kernel_options.h): programmatic
  // dependent launch of the decode-step kernels (on; off while weights stream: launch_options),
  // deterministic decode GEMMs (off; `g4c run --deterministic`). Per instance: two backends with
  // different choices run side by side in one process.
  cuda::KernelOptions kernels{.pdl = true, .deterministic = false};
  int max_tokens = 512;                 // token rows of the activation arena allocated up front (grows on demand)
  // Sibling Linears (q/k/v sharing one input) as one GEMM over concatenated weights. Off for
  // GPTQ, which replaces q/k/v one at a time.
  bool fuse_siblings = true;
  // Greedy rows take their token from an argmax on the device (Backend::argmax_rows): a step
  // copies R token ids instead of R × vocab fp32 logits, and the host does not scan them.
  bool device_argmax = true;
  // Sampled rows (temperature > 0) take their token from cuda::sample_rows on the device
  // (Backend::sample_rows, runtime/sampler.h's definition): only token ids are copied back.
  bool device_sample = true;
  // Activation values in one arena placed by lifetime: -1 when that is >= 4x smaller than one
  // buffer per value (compiled plans), 0 never, 1 always (tests compare the two bitwise).
  int share_values = -1;
  // Weight streaming: Linears of layers the plan marks Streamed live in pinned host memory and
  // are copied into one of two device slots on the copy stream while the layer before runs
  // (decode steps then run eagerly, not as CUDA graphs). > 0 additionally streams the last N
  // layers (tests compare it bitwise with resident weights).
  int stream_last_layers = 0;
};

std::unique_ptr<Backend> make_cuda_backend(const CudaOptions& options);

// The kernel options a backend with `options` launches with: options.kernels, with programmatic
// dependent launch off when weights stream (a kernel started early could read a streamed weight
// before its copy lands).
inline cuda::KernelOptions launch_options(const CudaOptions& options, bool weights_stream) {
  cuda::KernelOptions k = options.kernels;
  k.pdl = k.pdl && !weights_stream;
  return k;
}

// True when a CUDA device can be used (false on machines without a GPU or driver).
bool cuda_device_available();

// Parses "9984", "9984MiB", "9.75GiB", "10GB" → bytes (plain numbers are MiB). Throws g4c::Error.
size_t parse_budget(const std::string& text);

// What the summary reports about a CUDA backend (throws when `b` is not one).
struct CudaInfo {
  std::string device;            // "NVIDIA H200, 16 SMs (green context, emulating 1g.10gb), budget …"
  std::string emulation;         // "" or "1g.10gb"
  int sms = 0;
  size_t budget_bytes = 0;
  size_t peak_device_bytes = 0;  // whole process, cudaMemGetInfo
  size_t context_bytes = 0;      // in use after context creation
  size_t weight_bytes = 0, kv_bytes = 0, arena_bytes = 0, workspace_bytes = 0;
  size_t load_bytes = 0;     // host → device bytes of the weight load (checkpoint tensors as read)
  double load_seconds = 0;   // wall time of the weight load (reads, copies, repacks)
  int graphs_captured = 0;
  int streamed_layers = 0;       // layers whose Linears stream from pinned host memory
  size_t streamed_bytes = 0;     // their bytes (host)
  long streamed_copies = 0;      // layer copies issued so far
  long graph_replays = 0, eager_steps = 0;
  long prefill_graph_replays = 0;  // of graph_replays: prefill / mixed steps
  size_t graph_bytes = 0;          // device bytes of the captured graphs (measured at upload)
};
CudaInfo cuda_info(const Backend& b);

// The CUDA backend's stream (a cudaStream_t; in its green context under --emulate), and its
// budget check (throws g4c::Error naming `where` when the process is over --budget; updates the
// reported peak). Both throw when `b` is not the CUDA backend. For work beside the plan's
// (GPTQ's solves, passes/quant/cuda/gptq_device.h).
void* cuda_stream(const Backend& b);
void cuda_check_budget(const Backend& b, const std::string& where);

}  // namespace g4c::runtime

// Backend selection from CLI flags (--device, --emulate, --budget, --trace, --deterministic), header-only so
// tools compile with or without CUDA: G4C_HAVE_CUDA_BACKEND is defined for whoever links
// g4c_cuda_backend (runtime/cuda_backend/CMakeLists.txt).
//
//   runtime::DeviceFlags dev;  (CLI options fill it)
//   auto engine = Engine::open(dir, plan, options, runtime::backend_for_flags(dev, dir));
//   runtime::add_device_summary(engine->backend(), summary_json);
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "models/error.h"
#include "runtime/backend.h"
#ifdef G4C_HAVE_CUDA_BACKEND
#include "runtime/cuda_backend/cuda_backend.h"
#endif

namespace g4c::runtime {

struct DeviceFlags {
  std::string device = "cpu";     // cpu | cuda
  std::string emulate;            // "" | 1g.10gb (cuda only)
  std::string budget = "9984MiB"; // whole-process device bytes (cuda only); "0" = none
  std::string trace;              // Chrome-trace JSON path (cuda only)
  bool deterministic = false;     // --deterministic sets CudaOptions::kernels.deterministic (cuda only)
  // Set by commands, not flags (cuda only): CudaOptions::fuse_siblings (g4c quantize turns it off:
  // GPTQ replaces q/k/v one at a time), stream_last_layers, share_values.
  bool fuse_siblings = true;
  int stream_last_layers = 0;
  int share_values = -1;
};

// Tokens per step: `asked` (--max-num-batched-tokens) when given, else 1024 on the GPU (the INT4
// GEMMs run at a higher rate at M = 1024 than 512), else 0 (the engine's max(512, batch)) on the CPU.
inline int step_token_budget(const DeviceFlags& f, int asked) {
  return asked > 0 ? asked : f.device == "cuda" ? 1024 : 0;
}

// Prefill tokens of a step that also decodes (SchedulerOptions::mixed_prefill_tokens): `asked`
// (--mixed-prefill-tokens) when not negative, else the device's default: no cap (0).
inline int step_mixed_prefill_tokens(const DeviceFlags& f, int asked) {
  (void)f;
  return asked >= 0 ? asked : 0;
}

// nullptr for the CPU backend (Engine::open's default).
inline std::unique_ptr<Backend> backend_for_flags(const DeviceFlags& f, const std::filesystem::path& model_dir) {
  if (f.device == "cpu") {
    if (!f.emulate.empty()) throw Error("--emulate needs --device cuda");
    if (!f.trace.empty()) throw Error("--trace is implemented for --device cuda only");
    return nullptr;
  }
  if (f.device != "cuda") throw Error("--device: expected cpu or cuda, got '" + f.device + "'");
#ifdef G4C_HAVE_CUDA_BACKEND
  CudaOptions co;
  co.model_dir = model_dir;
  co.emulate = f.emulate;
  co.budget_bytes = parse_budget(f.budget);
  co.trace_path = f.trace;
  co.stream_last_layers = f.stream_last_layers;
  co.share_values = f.share_values;
  co.fuse_siblings = f.fuse_siblings;
  co.kernels.deterministic = f.deterministic;
  return make_cuda_backend(co);
#else
  (void)model_dir;
  throw Error("--device cuda: this g4c was built without the CUDA backend");
#endif
}

// Adds the device fields to a run summary (peak device bytes of the whole process, device,
// emulation, graphs) when `b` is the CUDA backend; nothing otherwise.
inline void add_device_summary(const Backend& b, nlohmann::json& summary) {
#ifdef G4C_HAVE_CUDA_BACKEND
  if (std::string(b.name()) != "cuda") return;
  const CudaInfo i = cuda_info(b);
  summary["peak_device_bytes"] = i.peak_device_bytes;
  summary["device"] = i.device;
  summary["emulation"] = i.emulation.empty() ? nlohmann::json(nullptr) : nlohmann::json(i.emulation);
  summary["budget_bytes"] = i.budget_bytes;
  summary["weight_streaming"] = {{"layers", i.streamed_layers}, {"host_bytes", i.streamed_bytes},
                                 {"layer_copies", i.streamed_copies}};
  summary["weight_load"] = {{"bytes", i.load_bytes},
                            {"seconds", i.load_seconds},
                            {"gb_per_s", i.load_seconds > 0 ? i.load_bytes / i.load_seconds / 1e9 : 0.0}};
  summary["cuda_graphs"] = {{"captured", i.graphs_captured},
                            {"replays", i.graph_replays},
                            {"prefill_replays", i.prefill_graph_replays},
                            {"eager_steps", i.eager_steps},
                            {"device_bytes", i.graph_bytes}};
#else
  (void)b;
  (void)summary;
#endif
}

}  // namespace g4c::runtime

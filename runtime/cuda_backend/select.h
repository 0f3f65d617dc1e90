// Backend selection from CLI flags (--device, --emulate, --budget, --trace), header-only so
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
  bool pdl = true;                // --no-pdl clears CudaOptions::decode_pdl (cuda only)
  bool fuse_siblings = true;      // --no-fuse-siblings clears CudaOptions::fuse_siblings (cuda only)
  bool deterministic = false;     // --deterministic sets CudaOptions::deterministic (cuda only)
  bool whole_tiles = true;        // --no-whole-tiles clears CudaOptions::decode_whole_tiles (cuda only)
  bool device_argmax = true;      // --no-device-argmax clears CudaOptions::device_argmax (cuda only)
  bool device_sample = true;      // --no-device-sample clears CudaOptions::device_sample (cuda only)
  int prefill_attention = -1;     // --prefill-attention sets CudaOptions::prefill_attention (cuda only)
  bool decode_ims = false;        // --decode-ims sets CudaOptions::decode_ims (cuda only)
  bool lm_head_rd = false;        // --lm-head-rd sets CudaOptions::lm_head_rd (cuda only)
  // Set by commands, not flags (cuda only): CudaOptions::stream_last_layers / share_values.
  int stream_last_layers = 0;
  int share_values = -1;
};

// Tokens per step: `asked` (--max-num-batched-tokens) when given, else 1024 on the GPU (measured
// on the H200, 12B INT4, performance_public, 2026-12-02: prefill 1.04 s in 512-token steps,
// 0.73 s in 1024-token steps — the INT4 GEMMs at M = 1024 run at a higher rate), else 0 (the
// engine's max(512, batch)) on the CPU.
inline int step_token_budget(const DeviceFlags& f, int asked) {
  return asked > 0 ? asked : f.device == "cuda" ? 1024 : 0;
}

// nullptr for the CPU backend (Engine::open's default).
inline std::unique_ptr<Backend> backend_for_flags(const DeviceFlags& f, const std::filesystem::path& model_dir) {
  if (f.device == "cpu") {
    if (!f.emulate.empty()) throw Error("--emulate needs --device cuda");
    if (!f.trace.empty()) throw Error("--trace is implemented for --device cuda only");
    if (f.prefill_attention != -1) throw Error("--prefill-attention needs --device cuda");
    if (f.decode_ims) throw Error("--decode-ims needs --device cuda");
    if (f.lm_head_rd) throw Error("--lm-head-rd needs --device cuda");
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
  co.decode_pdl = f.pdl;
  co.fuse_siblings = f.fuse_siblings;
  co.deterministic = f.deterministic;
  co.decode_whole_tiles = f.whole_tiles;
  co.device_argmax = f.device_argmax;
  co.device_sample = f.device_sample;
  co.prefill_attention = f.prefill_attention;
  co.decode_ims = f.decode_ims;
  co.lm_head_rd = f.lm_head_rd;
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
  summary["cuda_graphs"] = {{"captured", i.graphs_captured}, {"replays", i.graph_replays}, {"eager_steps", i.eager_steps}};
#else
  (void)b;
  (void)summary;
#endif
}

}  // namespace g4c::runtime

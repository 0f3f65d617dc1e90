// The model / engine / device options of the subcommands that load one model and serve it
// interactively (`g4c serve`, `g4c chat`): the same names, meanings and defaults as `g4c run`
// (tools/cmd_run.cpp), registered in one place, and the engine they open.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "models/error.h"
#include "runtime/cuda_backend/select.h"
#include "runtime/engine.h"
#include "tools/compile_plan.h"
#include "tools/cuda_switches.h"

namespace g4c::cli {

struct EngineArgs {
  std::string model, plan;
  int batch_size = 8;
  int max_seq_len = 2048;
  int threads = 0;
  int kv_blocks = 0;
  int token_budget = 0;
  int chunk = 0;
  bool reference_plan = false;
  runtime::DeviceFlags dev;
};

inline void add_engine_options(CLI::App* cmd, EngineArgs& a) {
  cmd->add_option("--model", a.model, "model directory (config.json, safetensors, tokenizer.json)")->required();
  cmd->add_option("--plan", a.plan, "compiled plan (.g4p); default: built for the model");
  cmd->add_option("--batch-size", a.batch_size, "running sequences at once")->capture_default_str();
  cmd->add_option("--max-sequence-length", a.max_seq_len, "longest prompt + generation")->capture_default_str();
  cmd->add_option("--threads", a.threads, "CPU threads (0: all)")->capture_default_str();
  cmd->add_option("--kv-blocks", a.kv_blocks, "paged KV pool blocks (0: enough for every sequence)");
  cmd->add_option("--max-num-batched-tokens", a.token_budget,
                  "token budget per step (0: 1024 on cuda, max(512, batch) on cpu)");
  cmd->add_option("--chunk-size", a.chunk, "prefill tokens per sequence per step (0: plan maximum)");
  cmd->add_flag("--reference-plan", a.reference_plan,
                "without --plan: run the runtime's reference plan instead of compiling the checkpoint");
  cmd->add_option("--device", a.dev.device, "cpu or cuda")->capture_default_str();
  cmd->add_option("--emulate", a.dev.emulate, "cuda: run in a green context emulating a MIG slice (1g.10gb)");
  add_cuda_switches(cmd, a.dev);
  cmd->add_option("--budget", a.dev.budget,
                  "cuda: device memory budget of the whole process (MiB, or 10GB/9.75GiB; 0 = none)")
      ->capture_default_str();
  cmd->add_option("--trace", a.dev.trace, "cuda: write a Chrome-trace JSON (Perfetto) of steps, kernels, copies, graphs");
}

// The engine `g4c run` would open with the same options (plan: --plan, the reference plan, or
// the checkpoint compiled in process with the chunk the engine uses).
inline std::unique_ptr<runtime::Engine> open_engine(const EngineArgs& a) {
  std::optional<plan::Plan> plan;
  if (!a.plan.empty()) {
    plan = plan::Plan::load_file(a.plan);
  } else if (!a.reference_plan) {
    passes::PipelineOptions po;
    const int tokens = runtime::step_token_budget(a.dev, a.token_budget);
    const int budget = tokens > 0 ? tokens : std::max(512, a.batch_size);
    po.max_seqs = a.batch_size;
    po.max_chunk = std::max(256, std::min(a.max_seq_len, budget));
    po.max_seq_len = a.max_seq_len;
    if (a.dev.device == "cpu") po.budget_mib = int64_t(1) << 40;
    plan = compile_plan(a.model, po);
  }
  runtime::EngineOptions eo;
  eo.max_sequences = a.batch_size;
  eo.max_seq_len = a.max_seq_len;
  eo.threads = a.threads;
  eo.kv_blocks = a.kv_blocks;
  eo.token_budget = runtime::step_token_budget(a.dev, a.token_budget);
  eo.chunk_tokens = a.chunk;
  return runtime::Engine::open(a.model, std::move(plan), eo, runtime::backend_for_flags(a.dev, a.model));
}

}  // namespace g4c::cli

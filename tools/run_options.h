// The options `g4c run` and `g4c bench` share, registered on both by one function, and what
// both derive from them: the engine's options and the plan that runs (--plan FILE, else the
// checkpoint compiled in process, as `g4c compile` would).
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <string>

#include "runtime/cuda_backend/select.h"
#include "runtime/engine.h"
#include "runtime/plan/plan.h"

namespace g4c::cli {

struct RunOptions {
  std::string model;  // checkpoint directory
  std::string plan;   // compiled plan (.g4p); empty: compile the checkpoint in process
  int batch_size = 0;  // 0: as many as the KV pools hold (EngineOptions::max_sequences)
  int max_seq_len = 0;  // the command sets its default before registering
  int max_new_tokens = 32;
  bool ignore_eos = false;
  int threads = 0;
  int kv_blocks = 0;
  int token_budget = 0;
  int chunk = 0;
  int mixed_prefill = -1;  // -1: the device's default (step_mixed_prefill_tokens)
  std::string kv_dtype = "auto";  // KV storage of the plan compiled in process (cli::resolve_kv_dtype)
  std::string table_dtype = "auto";  // its embedding / LM head table (cli::resolve_table_dtype)
  runtime::DeviceFlags dev;  // --device, --emulate, --budget, --trace, --deterministic
};

// Registers the options of every command that opens an engine (run, bench, serve, chat):
// --model, --plan, --batch-size, --max-sequence-length (help: max_seq_len_help), --threads,
// --kv-blocks, --max-num-batched-tokens, --chunk-size, --kv-dtype, --table-dtype, --device, --emulate,
// --deterministic, --budget and --trace.
void add_engine_options(CLI::App* cmd, RunOptions& o, const std::string& max_seq_len_help);

// add_engine_options and the batch commands' request defaults: --max-new-tokens, --ignore-eos.
void add_run_options(CLI::App* cmd, RunOptions& o, const std::string& max_seq_len_help);

// The engine's options for a run whose longest request needs `max_seq_len` tokens.
runtime::EngineOptions engine_options(const RunOptions& o, int max_seq_len);

// The plan to run: --plan FILE, or the checkpoint compiled in process (frontend → passes →
// codegen, tools/compile_plan.h) for this batch, sequence length and the chunk the engine will
// use, so the ring capacity (W−1+chunk) matches the run.
plan::Plan plan_for(const RunOptions& o, int max_seq_len);

// The engine these options describe, with its plan (plan_for) and backend (--device).
std::unique_ptr<runtime::Engine> open_engine(const RunOptions& o, int max_seq_len);

}  // namespace g4c::cli

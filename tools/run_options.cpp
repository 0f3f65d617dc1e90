// Shared options of `g4c run` and `g4c bench` (tools/run_options.h).
#include "tools/run_options.h"

#include <algorithm>

#include "models/error.h"
#include "tools/cli.h"
#include "tools/compile_plan.h"

namespace g4c::cli {

void add_engine_options(CLI::App* cmd, RunOptions& o, const std::string& max_seq_len_help) {
  cmd->add_option("--model", o.model, "model directory (config.json, safetensors, tokenizer.json)");
  cmd->add_option("--plan", o.plan, "compiled plan (.g4p, g4c compile); default: compile the model in process");
  cmd->add_option("--batch-size", o.batch_size, "running sequences at once (0: as many as the KV pools hold, reported in the summary)")->capture_default_str();
  cmd->add_option("--max-sequence-length", o.max_seq_len, max_seq_len_help)->capture_default_str();
  cmd->add_option("--threads", o.threads, "CPU threads (0: all)")->capture_default_str();
  cmd->add_option("--kv-blocks", o.kv_blocks, "paged KV pool blocks (0: enough for every sequence)");
  cmd->add_option("--max-num-batched-tokens", o.token_budget,
                  "token budget per step (0: 1024 on cuda, max(512, batch) on cpu)");
  cmd->add_option("--chunk-size", o.chunk, "prefill tokens per sequence per step (0: plan maximum)");
  cmd->add_option("--mixed-prefill-tokens", o.mixed_prefill,
                  "prefill tokens of a step that also decodes, bounding how long a decode waits "
                  "(0: --max-num-batched-tokens; -1: the device's default)")
      ->capture_default_str();
  cli::add_kv_dtype_option(cmd, o.kv_dtype, "of the plan compiled in process: F32 on the cpu, FP8 on cuda");
  cli::add_table_dtype_option(cmd, o.table_dtype, "of the plan compiled in process: int8 on cuda, bf16 on cpu");
  cmd->add_option("--device", o.dev.device, "cpu or cuda")->capture_default_str();
  cmd->add_option("--emulate", o.dev.emulate, "cuda: run in a 16-SM green context emulating a MIG slice (1g.10gb)");
  cmd->add_flag("--deterministic", o.dev.deterministic,
                "cuda: decode GEMMs sum their parts in a fixed order, so a run's tokens and logits repeat exactly");
  cmd->add_option("--budget", o.dev.budget,
                  "cuda: device memory budget of the whole process (MiB, or 10GB/9.75GiB; 0 = none)")
      ->capture_default_str();
  cmd->add_option("--trace", o.dev.trace, "cuda: write a Chrome-trace JSON (Perfetto) of steps, kernels, copies, graphs");
}

void add_run_options(CLI::App* cmd, RunOptions& o, const std::string& max_seq_len_help) {
  add_engine_options(cmd, o, max_seq_len_help);
  cmd->add_option("--max-new-tokens", o.max_new_tokens, "default when a request has none")->capture_default_str();
  cmd->add_flag("--ignore-eos", o.ignore_eos, "do not stop on the model's EOS ids");
}

runtime::EngineOptions engine_options(const RunOptions& o, int max_seq_len) {
  runtime::EngineOptions eo;
  eo.max_sequences = o.batch_size;
  eo.max_seq_len = max_seq_len;
  eo.threads = o.threads;
  eo.kv_blocks = o.kv_blocks;
  eo.token_budget = runtime::step_token_budget(o.dev, o.token_budget);
  eo.chunk_tokens = o.chunk;
  eo.mixed_prefill_tokens = runtime::step_mixed_prefill_tokens(o.dev, o.mixed_prefill);
  return eo;
}

plan::Plan plan_for(const RunOptions& o, int max_seq_len) {
  if (!o.plan.empty()) {
    if (o.kv_dtype != "auto")
      throw Error("--kv-dtype " + o.kv_dtype + " applies to the plan compiled in process; --plan " + o.plan +
                  " has its own KV storage (g4c compile --kv-dtype)");
    if (o.table_dtype != "auto")
      throw Error("--table-dtype " + o.table_dtype + " applies to the plan compiled in process; --plan " + o.plan +
                  " has its own table storage (g4c compile --table-dtype)");
    return plan::Plan::load_file(o.plan);
  }
  passes::PipelineOptions po;
  const int tokens = runtime::step_token_budget(o.dev, o.token_budget);
  const int budget = tokens > 0 ? tokens : std::max(512, o.batch_size);
  po.max_seqs = o.batch_size > 0 ? o.batch_size : runtime::kMaxAutoBatch;
  po.max_chunk = std::max(256, std::min(max_seq_len, budget));  // as Engine::open's default
  po.max_seq_len = max_seq_len;
  po.kv_dtype = cli::resolve_kv_dtype(o.kv_dtype, o.dev.device == "cuda");
  po.table_dtype = cli::resolve_table_dtype(o.table_dtype, o.dev.device == "cuda");
  // The device budget constrains device plans; the CPU backend holds everything in host memory.
  if (o.dev.device == "cpu") po.budget_mib = int64_t(1) << 40;
  return compile_plan(o.model, po);
}

std::unique_ptr<runtime::Engine> open_engine(const RunOptions& o, int max_seq_len) {
  return runtime::Engine::open(o.model, plan_for(o, max_seq_len), engine_options(o, max_seq_len),
                               runtime::backend_for_flags(o.dev, o.model));
}

}  // namespace g4c::cli

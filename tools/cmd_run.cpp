// g4c run — serve a requests jsonl with the continuous-batching engine and write the lab's
// outputs jsonl and summary JSON (DESIGN.md §3). Exit status 1 when any request failed
// (each failed request still gets its output line with finish_reason "error").
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>

#include "models/error.h"
#include "models/progress.h"
#include "models/tokenizer.h"
#include "runtime/engine.h"
#include "runtime/serving.h"
#include "runtime/cuda_backend/select.h"
#include "tools/cli.h"
#include "tools/compile_plan.h"
#include "tools/cuda_switches.h"

namespace g4c::cli {
namespace {

struct RunArgs {
  std::string model, plan, input, output, summary, save_plan;
  int batch_size = 0;  // 0: auto (EngineOptions::max_sequences)
  int max_seq_len = 2048;
  int max_new_tokens = 32;
  bool ignore_eos = false;
  int threads = 0;
  int kv_blocks = 0;
  int token_budget = 0;
  int chunk = 0;
  bool reference_plan = false;  // use the MLIR-free reference builder instead of compiling
  bool kv_shared = false;       // K=V stored once on k_eq_v layers
  runtime::DeviceFlags dev;  // --device/--emulate/--budget/--trace (runtime/cuda_backend/select.h)
};

// The plan to run: --plan FILE, or the checkpoint compiled in process (frontend →
// passes → codegen, tools/compile_plan.h) with the chunk the engine will use, so the
// ring capacity (W−1+chunk) matches this run. --reference-plan instead uses the runtime's
// MLIR-free reference builder (runtime/plan/reference_builder.h), which tests compare
// codegen against step for step.
std::optional<plan::Plan> plan_for(const RunArgs& a) {
  if (!a.plan.empty()) return plan::Plan::load_file(a.plan);
  if (a.reference_plan) return std::nullopt;  // Engine::open builds the reference plan
  passes::PipelineOptions po;
  const int tokens = runtime::step_token_budget(a.dev, a.token_budget);
  const int budget = tokens > 0 ? tokens : std::max(512, a.batch_size);
  po.max_seqs = a.batch_size > 0 ? a.batch_size : runtime::kMaxAutoBatch;
  po.max_chunk = std::max(256, std::min(a.max_seq_len, budget));  // as Engine::open's default
  po.max_seq_len = a.max_seq_len;
  po.kv_shared = a.kv_shared;
  // The device budget constrains device plans; the CPU backend holds everything in host memory.
  if (a.dev.device == "cpu") po.budget_mib = int64_t(1) << 40;
  return compile_plan(a.model, po);
}

void run(const RunArgs& a) {
  const std::filesystem::path dir = a.model;
  std::ifstream requests(a.input);
  if (!requests) throw Error(a.input + ": cannot open requests file");
  std::unique_ptr<models::Tokenizer> tokenizer;
  if (std::filesystem::exists(dir / "tokenizer.json")) tokenizer = models::Tokenizer::load(dir / "tokenizer.json");

  runtime::EngineOptions eo;
  eo.max_sequences = a.batch_size;
  eo.max_seq_len = a.max_seq_len;
  eo.threads = a.threads;
  eo.kv_blocks = a.kv_blocks;
  eo.token_budget = runtime::step_token_budget(a.dev, a.token_budget);
  eo.chunk_tokens = a.chunk;
  eo.reference_kv_shared = a.kv_shared;
  if (a.kv_shared && !a.plan.empty())
    throw Error("--kv-shared is a compile option: pass it to g4c compile, not with --plan");
  auto engine = runtime::Engine::open(dir, plan_for(a), eo, runtime::backend_for_flags(a.dev, dir));
  if (!a.save_plan.empty()) engine->plan().save(a.save_plan);

  std::ofstream out(a.output);
  if (!out) throw Error(a.output + ": cannot write outputs file");
  runtime::ServeOptions so;
  so.default_max_new_tokens = a.max_new_tokens;
  so.ignore_eos = a.ignore_eos;
  so.device = std::string(engine->backend().name()) + " (" + engine->plan()->generator()->str() + ")";

  // Count the request lines for the progress bar's total.
  uint64_t total = 0;
  {
    std::ifstream count(a.input);
    std::string line;
    while (std::getline(count, line)) total += line.find_first_not_of(" \t\r") != std::string::npos;
  }
  Progress bar("run " + std::filesystem::path(a.input).filename().string(), total);
  auto summary = runtime::serve_jsonl(*engine, tokenizer.get(), requests, a.input, out,
                                      so, [&](const runtime::GenerationResult&) { bar.add(1); });
  bar.finish();
  runtime::add_device_summary(engine->backend(), summary.json);
  if (!a.summary.empty()) {
    std::ofstream s(a.summary);
    if (!s) throw Error(a.summary + ": cannot write summary file");
    s << summary.json.dump(2) << "\n";
  }
  std::fprintf(stderr, "%d requests, %lld generated tokens in %.2f s (%.1f tok/s)\n", summary.requests,
               (long long)summary.generated_tokens, summary.json["elapsed_s"].get<double>(),
               summary.json["generated_tokens_per_s"].get<double>());
  if (summary.failed > 0)
    throw Error(std::to_string(summary.failed) + " of " + std::to_string(summary.requests) + " requests failed (see " +
                a.output + ")");
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  auto* cmd = app.add_subcommand("run", "serve a requests jsonl (continuous batching) and write outputs + summary");
  cmd->add_option("--model", args->model, "model directory (config.json, safetensors, tokenizer.json)")->required();
  cmd->add_option("--plan", args->plan, "compiled plan (.g4p); default: built for the model");
  cmd->add_option("--input", args->input, "requests jsonl")->required();
  cmd->add_option("--output", args->output, "outputs jsonl")->required();
  cmd->add_option("--summary", args->summary, "summary JSON");
  cmd->add_option("--batch-size", args->batch_size, "running sequences at once (0: as many as the KV pools hold, reported in the summary)")
      ->capture_default_str();
  cmd->add_option("--max-sequence-length", args->max_seq_len, "longest prompt + generation")->capture_default_str();
  cmd->add_option("--max-new-tokens", args->max_new_tokens, "default when a request has none")->capture_default_str();
  cmd->add_flag("--ignore-eos", args->ignore_eos, "do not stop on the model's EOS ids");
  cmd->add_option("--threads", args->threads, "CPU threads (0: all)")->capture_default_str();
  cmd->add_option("--kv-blocks", args->kv_blocks, "paged KV pool blocks (0: enough for every sequence)");
  cmd->add_option("--max-num-batched-tokens", args->token_budget, "token budget per step (0: 1024 on cuda, max(512, batch) on cpu)");
  cmd->add_option("--chunk-size", args->chunk, "prefill tokens per sequence per step (0: plan maximum)");
  cmd->add_flag("--reference-plan", args->reference_plan,
                "without --plan: run the runtime's reference plan instead of compiling the checkpoint");
  cmd->add_flag("--kv-shared", args->kv_shared,
                "store K=V once on k_eq_v layers: V only in the cache, the attention recomputes K (halves their KV)");
  cmd->add_option("--save-plan", args->save_plan, "write the plan that runs (e.g. the reference plan) to this file");
  cmd->add_option("--device", args->dev.device, "cpu or cuda")->capture_default_str();
  cmd->add_option("--emulate", args->dev.emulate, "cuda: run in a green context emulating a MIG slice (1g.10gb)");
  add_cuda_switches(cmd, args->dev);
  cmd->add_option("--budget", args->dev.budget, "cuda: device memory budget of the whole process (MiB, or 10GB/9.75GiB; 0 = none)")
      ->capture_default_str();
  cmd->add_option("--trace", args->dev.trace, "cuda: write a Chrome-trace JSON (Perfetto) of steps, kernels, copies, graphs");
  cmd->callback([args] { run(*args); });
}

}  // namespace g4c::cli

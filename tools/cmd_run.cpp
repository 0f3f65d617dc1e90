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
#include "tools/run_options.h"

namespace g4c::cli {
namespace {

// The options shared with `g4c bench` (tools/run_options.h) and run's own.
struct RunArgs : RunOptions {
  std::string input, output, summary, save_plan;
  RunArgs() { max_seq_len = 2048; }
};

void run(const RunArgs& a) {
  const std::filesystem::path dir = a.model;
  std::ifstream requests(a.input);
  if (!requests) throw Error(a.input + ": cannot open requests file");
  std::unique_ptr<models::Tokenizer> tokenizer;
  if (std::filesystem::exists(dir / "tokenizer.json")) tokenizer = models::Tokenizer::load(dir / "tokenizer.json");

  const runtime::EngineOptions eo = engine_options(a, a.max_seq_len);
  auto engine = runtime::Engine::open(dir, plan_for(a, a.max_seq_len), eo, runtime::backend_for_flags(a.dev, dir));
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
  add_run_options(cmd, *args, "longest prompt + generation");
  cmd->get_option("--model")->required();
  cmd->add_option("--input", args->input, "requests jsonl")->required();
  cmd->add_option("--output", args->output, "outputs jsonl")->required();
  cmd->add_option("--summary", args->summary, "summary JSON");
  cmd->add_option("--save-plan", args->save_plan, "write the plan that runs to this file");
  cmd->callback([args] { run(*args); });
}

}  // namespace g4c::cli

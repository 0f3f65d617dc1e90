// g4c run — serve a requests jsonl with the continuous-batching engine and write the lab's
// outputs jsonl and summary JSON (DESIGN.md §3). Exit status 1 when any request failed
// (each failed request still gets its output line with finish_reason "error").
//
// Files: the output lines are written (and flushed) as requests finish, in request order; a
// write error on --output or --summary is an error (exit 1), as is an output path naming the
// input (refused before anything is opened for writing). SIGINT stops serving at the next
// finished request: the lines written so far stay whole, the summary says "interrupted", exit 130.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <optional>

#include "models/config.h"
#include "models/error.h"
#include "models/input_file.h"
#include "models/progress.h"
#include "models/safetensors.h"
#include "models/tensor_check.h"
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

// Set by SIGINT while run() serves; a signal handler can reach nothing but a static. The
// handler is installed only around serving and the previous one restored after.
std::atomic<bool> g_interrupted{false};
extern "C" void on_sigint(int) {
  g_interrupted.store(true);
  std::signal(SIGINT, SIG_DFL);  // a second Ctrl-C ends the process at once
}

struct SigintScope {
  using Handler = void (*)(int);
  Handler previous;
  SigintScope() : previous(std::signal(SIGINT, on_sigint)) { g_interrupted.store(false); }
  ~SigintScope() { std::signal(SIGINT, previous); }
};

// The longest sequence the run may size its KV for: the model's context (config.json).
void check_sequence_length(const std::filesystem::path& dir, int max_seq_len) {
  const auto cfg = models::load_model_config(dir);
  if (max_seq_len < 2) throw Error("--max-sequence-length must be at least 2, not " + std::to_string(max_seq_len));
  if (cfg.max_position_embeddings > 0 && max_seq_len > cfg.max_position_embeddings)
    throw Error("--max-sequence-length " + std::to_string(max_seq_len) + " exceeds the model's context of " +
                std::to_string(cfg.max_position_embeddings) + " tokens (max_position_embeddings in " +
                (dir / "config.json").string() + ")");
}

// NaN/inf in the embedding make every logit NaN and every generated token 0, silently: say so.
// (The embedding is mapped, not copied: one pass over its bytes.)
void warn_nonfinite_embedding(const std::filesystem::path& dir) {
  const auto ckpt = models::Checkpoint::open(dir);
  const std::string name = "embed_tokens.weight";
  if (!ckpt->has(name)) return;
  const auto view = ckpt->get(name);
  if (const int64_t bad = models::count_nonfinite(view); bad > 0)
    std::fprintf(stderr, "warning: %s: tensor '%s' holds %lld non-finite values (NaN/inf): its tokens' logits are NaN\n",
                 view.info->file.c_str(), view.info->name.c_str(), (long long)bad);
}

void run(const RunArgs& a) {
  const std::filesystem::path dir = a.model;
  // Refuse before anything is opened for writing (an --output naming --input would truncate it).
  models::check_input_path(a.input, "requests file");
  models::check_output_distinct(a.output, "--output", a.input, "--input");
  if (!a.summary.empty()) {
    models::check_output_distinct(a.summary, "--summary", a.input, "--input");
    models::check_output_distinct(a.summary, "--summary", a.output, "--output");
    if (a.summary == a.output) throw Error(a.summary + ": --summary names the same file as --output");
  }
  if (!a.save_plan.empty()) {
    models::check_output_distinct(a.save_plan, "--save-plan", a.input, "--input");
    if (!a.plan.empty()) models::check_output_distinct(a.save_plan, "--save-plan", a.plan, "--plan");
  }
  check_sequence_length(dir, a.max_seq_len);
  std::ifstream requests(a.input, std::ios::binary);
  if (!requests) throw Error(a.input + ": cannot open requests file");
  std::unique_ptr<models::Tokenizer> tokenizer;
  if (std::filesystem::exists(dir / "tokenizer.json")) tokenizer = models::Tokenizer::load(dir / "tokenizer.json");

  const runtime::EngineOptions eo = engine_options(a, a.max_seq_len);
  auto engine = runtime::Engine::open(dir, plan_for(a, a.max_seq_len), eo, runtime::backend_for_flags(a.dev, dir));
  warn_nonfinite_embedding(dir);
  if (!a.save_plan.empty()) engine->plan().save(a.save_plan);

  runtime::ServeOptions so;
  so.default_max_new_tokens = a.max_new_tokens;
  so.ignore_eos = a.ignore_eos;
  so.device = std::string(engine->backend().name()) + " (" + engine->plan()->generator()->str() + ")";
  so.output_name = a.output;
  so.interrupt = &g_interrupted;

  // Count the request lines for the progress bar's total (bounded as the serving read is; a
  // stream that cannot be read twice, such as a FIFO, counts as unknown).
  uint64_t total = 0;
  if (std::filesystem::is_regular_file(a.input)) {
    std::ifstream count(a.input, std::ios::binary);
    models::LineReader lines(count, so.max_line_bytes, so.max_input_bytes);
    std::string line;
    for (auto st = lines.next(line); st == models::LineReader::Status::Line || st == models::LineReader::Status::TooLong;
         st = lines.next(line))
      total += st == models::LineReader::Status::TooLong || line.find_first_not_of(" \t\r") != std::string::npos;
  }
  std::ofstream out(a.output, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(a.output + ": cannot write outputs file");
  Progress bar("run " + std::filesystem::path(a.input).filename().string(), total);
  runtime::ServeSummary summary;
  {
    SigintScope sigint;
    summary = runtime::serve_jsonl(*engine, tokenizer.get(), requests, a.input, out, so,
                                   [&](const runtime::GenerationResult&) { bar.add(1); });
  }
  bar.finish();
  out.close();
  if (!out) throw Error(a.output + ": write failed when closing the outputs file");
  runtime::add_device_summary(engine->backend(), summary.json);
  if (!a.summary.empty()) {
    std::ofstream s(a.summary, std::ios::binary | std::ios::trunc);
    if (!s) throw Error(a.summary + ": cannot write summary file");
    s << summary.json.dump(2) << "\n";
    s.close();
    if (!s) throw Error(a.summary + ": write failed (disk full or I/O error): the summary is not written");
  }
  std::fprintf(stderr, "%d requests, %lld generated tokens in %.2f s (%.1f tok/s)\n", summary.requests,
               (long long)summary.generated_tokens, summary.json["elapsed_s"].get<double>(),
               summary.json["generated_tokens_per_s"].get<double>());
  if (summary.interrupted) {
    std::fprintf(stderr, "error: interrupted: %d requests written to %s\n", summary.requests, a.output.c_str());
    std::exit(130);
  }
  if (!summary.input_error.empty()) throw Error(summary.input_error);
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

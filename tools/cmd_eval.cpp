// g4c eval — token-weighted next-token NLL of a model on a jsonl text set, written as the
// lab's quality JSON (schema_version 2, DESIGN.md §3).
//
// Each {"text": ...} line is tokenized with BOS by DIR/tokenizer.json, cut at
// --max-sequence-length, fed in chunks of --chunk-size through the KV cache, and every
// next token is scored with an fp32 log-softmax of the soft-capped logits. Sequences
// are bucketed by their token length (smallest of 128, 256, … ≥ the length). Each sequence's
// NLL sum and token count are kept (`sequence_nll`, `sequence_tokens`), so that a --reference
// written the same way gives ΔNLL a paired standard error over the sequences.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "models/error.h"
#include "models/manifest.h"
#include "models/progress.h"
#include "models/tokenizer.h"
#include "tools/cli.h"
#include "tools/quant_executor.h"
#include "tools/sha256.h"

namespace g4c::cli {

namespace {

struct EvalArgs {
  std::string model, dataset, output, reference;
  int chunk = 128;
  int max_len = 2048;
  int threads = 0;
  int limit = 0;
  std::string kv_dtype = "auto";
  std::string table_dtype = "auto";
};

struct Agg {
  double nll = 0.0;
  int64_t tokens = 0, seqs = 0;
};

nlohmann::json agg_json(const Agg& a) {
  nlohmann::json j;
  j["nll_sum"] = a.nll;
  j["token_count"] = a.tokens;
  j["sequence_count"] = a.seqs;
  const double mean = a.tokens ? a.nll / double(a.tokens) : 0.0;
  j["mean_nll"] = mean;
  j["perplexity"] = std::exp(mean);
  return j;
}

void add_reference(nlohmann::json& j, const nlohmann::json& ref) {
  if (!ref.contains("mean_nll")) return;
  const double r = ref["mean_nll"].get<double>(), m = j["mean_nll"].get<double>();
  j["reference_mean_nll"] = r;
  j["delta_nll"] = m - r;
  j["perplexity_ratio"] = std::exp(m - r);
}

// ΔNLL = Σd / Σn over sequences i, d_i = nll_i − reference nll_i and n_i tokens: a ratio
// estimator over the sequences as sampled clusters. Its standard error (delta method, the paired
// sequences the unit): sqrt(N/(N−1) · Σ (d_i − ΔNLL·n_i)²) / Σn. Added with a 95 % interval
// (± 1.96 SE) when the reference holds the same sequences (same token counts), else nothing.
void add_paired_error(nlohmann::json& out, const std::vector<double>& nll, const std::vector<int64_t>& tokens,
                      const nlohmann::json& ref) {
  if (!ref.contains("sequence_nll") || !ref.contains("sequence_tokens") || nll.size() < 2) return;
  const auto rn = ref["sequence_nll"].get<std::vector<double>>();
  const auto rt = ref["sequence_tokens"].get<std::vector<int64_t>>();
  if (rn.size() != nll.size() || rt != tokens) return;
  double dsum = 0, nsum = 0;
  for (size_t i = 0; i < nll.size(); ++i) dsum += nll[i] - rn[i], nsum += double(tokens[i]);
  const double r = dsum / nsum;
  double ss = 0;
  for (size_t i = 0; i < nll.size(); ++i) {
    const double e = (nll[i] - rn[i]) - r * double(tokens[i]);
    ss += e * e;
  }
  const double n = double(nll.size()), se = std::sqrt(n / (n - 1) * ss) / nsum;
  out["delta_nll_se"] = se;
  out["delta_nll_ci95"] = {r - 1.96 * se, r + 1.96 * se};
  out["paired_sequences"] = nll.size();
}

void run_eval(const EvalArgs& a) {
  const auto t0 = std::chrono::steady_clock::now();
  const int threads = a.threads > 0 ? a.threads : int(std::max(1u, std::thread::hardware_concurrency()));
  if (a.max_len < 2) throw Error("eval: --max-sequence-length must be at least 2");
  std::ifstream in(a.dataset, std::ios::binary);
  if (!in) throw Error("eval: cannot open dataset " + a.dataset);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string data = ss.str();
  const std::string sha = tools::sha256_hex(data);

  // One single-threaded Engine per worker; the workers take whole sequences.
  std::vector<std::unique_ptr<tools::EngineScorer>> engines;
  const std::string table_dtype = cli::resolve_table_dtype(a.table_dtype, false);
  for (int t = 0; t < threads; ++t)
    engines.push_back(std::make_unique<tools::EngineScorer>(a.model, a.max_len, 1, a.kv_dtype, table_dtype));
  const bool is_int4 = models::Int4Checkpoint::is_int4_dir(a.model);
  auto tok = models::Tokenizer::load(std::filesystem::path(a.model) / "tokenizer.json");

  std::vector<std::vector<int32_t>> seqs;
  {
    std::istringstream lines(data);
    std::string line;
    int64_t lineno = 0;
    while (std::getline(lines, line)) {
      ++lineno;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(line);
      } catch (const std::exception& e) {
        throw Error("eval: " + a.dataset + " line " + std::to_string(lineno) + ": " + e.what());
      }
      std::vector<int32_t> ids;
      if (j.contains("text") && j["text"].is_string())
        ids = tok->encode(j["text"].get<std::string>(), true);
      else if (j.contains("input_ids") && j["input_ids"].is_array())
        ids = j["input_ids"].get<std::vector<int32_t>>();
      else
        throw Error("eval: " + a.dataset + " line " + std::to_string(lineno) + " has neither \"text\" nor \"input_ids\"");
      if (int64_t(ids.size()) > a.max_len) ids.resize(size_t(a.max_len));
      if (ids.size() >= 2) seqs.push_back(std::move(ids));
      if (a.limit > 0 && int64_t(seqs.size()) >= a.limit) break;
    }
  }
  if (seqs.empty()) throw Error("eval: " + a.dataset + " holds no sequence of at least 2 tokens");

  std::vector<int64_t> buckets;
  for (int64_t b = 128;; b *= 2) {
    buckets.push_back(b);
    if (b >= a.max_len) break;
  }
  std::vector<int64_t> seq_tokens;  // scored tokens per sequence
  int64_t total_tokens = 0;
  for (const auto& s : seqs) total_tokens += seq_tokens.emplace_back(int64_t(s.size()) - 1);
  std::vector<double> nll(seqs.size(), 0.0);
  {
    Progress bar("eval " + std::to_string(seqs.size()) + " sequences", uint64_t(total_tokens));
    std::atomic<size_t> next{0};
    std::vector<std::thread> pool;
    std::exception_ptr err;
    std::mutex mu;
    for (int t = 0; t < std::min<int>(threads, int(seqs.size())); ++t)
      pool.emplace_back([&, t] {
        for (size_t i; (i = next.fetch_add(1)) < seqs.size();) {
          try {
            nll[i] = engines[size_t(t)]->score_sequence(seqs[i], a.chunk);
            bar.add(uint64_t(seqs[i].size() - 1));
          } catch (...) {
            std::lock_guard<std::mutex> lk(mu);
            if (!err) err = std::current_exception();
          }
        }
      });
    for (auto& th : pool) th.join();
    if (err) std::rethrow_exception(err);
    bar.finish();
  }
  Agg all;
  std::map<int64_t, Agg> by;
  for (size_t i = 0; i < seqs.size(); ++i) {  // summed in dataset order: deterministic
    const int64_t len = int64_t(seqs[i].size());
    const int64_t b = *std::lower_bound(buckets.begin(), buckets.end(), len);
    for (Agg* g : {&all, &by[b]}) {
      g->nll += nll[i];
      g->tokens += len - 1;
      g->seqs += 1;
    }
  }
  nlohmann::json ref;
  if (!a.reference.empty()) {
    std::ifstream rf(a.reference);
    if (!rf) throw Error("eval: cannot open reference " + a.reference);
    try {
      rf >> ref;
    } catch (const std::exception& e) {
      throw Error("eval: reference " + a.reference + " is not JSON: " + e.what());
    }
    if (!ref.contains("mean_nll") || !ref["mean_nll"].is_number())
      throw Error("eval: reference " + a.reference + " has no numeric mean_nll");
  }
  nlohmann::json out;
  out["schema_version"] = 2;
  out["model"] = a.model;
  out["linear_backend"] = is_int4 ? "int4_dequant_fp32" : "fp32";
  out["backend"] = "runtime-cpu";
  out["dataset"] = a.dataset;
  out["dataset_sha256"] = sha;
  out["chunk_size"] = a.chunk;
  out["kv_dtype"] = a.kv_dtype;
  out["table_dtype"] = table_dtype;
  out["max_sequence_length"] = a.max_len;
  out["bucket_lengths"] = buckets;
  const nlohmann::json totals = agg_json(all);
  for (auto& [k, v] : totals.items()) out[k] = v;
  nlohmann::json jb = nlohmann::json::object();
  for (const auto& [b, g] : by) {
    nlohmann::json e = agg_json(g);
    const std::string key = std::to_string(b);
    if (ref.contains("by_bucket") && ref["by_bucket"].contains(key)) add_reference(e, ref["by_bucket"][key]);
    jb[key] = e;
  }
  out["by_bucket"] = jb;
  out["sequence_nll"] = nll;
  out["sequence_tokens"] = seq_tokens;
  if (!a.reference.empty()) {
    out["reference"] = a.reference;
    add_reference(out, ref);
    add_paired_error(out, nll, seq_tokens, ref);
  }
  out["elapsed_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out["threads"] = threads;
  std::ofstream of(a.output);
  if (!of) throw Error("eval: cannot write " + a.output);
  of << out.dump(2) << "\n";
  std::string delta;
  if (out.contains("delta_nll")) {
    char buf[96];
    std::snprintf(buf, sizeof buf, ", ΔNLL %.6f", out["delta_nll"].get<double>());
    delta = buf;
    if (out.contains("delta_nll_se")) {
      std::snprintf(buf, sizeof buf, " ± %.6f (95 %%, %d paired sequences)", 1.96 * out["delta_nll_se"].get<double>(),
                    out["paired_sequences"].get<int>());
      delta += buf;
    }
  }
  std::fprintf(stderr, "eval: %zu sequences, %lld tokens, mean NLL %.6f, perplexity %.4f%s\n", seqs.size(),
               (long long)all.tokens, out["mean_nll"].get<double>(), out["perplexity"].get<double>(), delta.c_str());
}

}  // namespace

void add_eval_command(CLI::App& app) {
  auto a = std::make_shared<EvalArgs>();
  auto* cmd = app.add_subcommand("eval", "next-token NLL / perplexity of a model on a jsonl text set (quality JSON)");
  cmd->add_option("--model", a->model, "model directory (BF16 or INT4 checkpoint)")->required();
  cmd->add_option("--dataset", a->dataset, "jsonl with {\"text\"} (or {\"input_ids\"}) per line")->required();
  cmd->add_option("--output,-o", a->output, "quality JSON to write")->required();
  cmd->add_option("--reference", a->reference, "quality JSON to take ΔNLL against");
  cmd->add_option("--chunk-size", a->chunk, "tokens fed per step through the KV cache")->check(CLI::PositiveNumber);
  cmd->add_option("--max-sequence-length", a->max_len, "tokens kept per text (BOS included)");
  cmd->add_option("--threads", a->threads, "worker threads (default: all cores)");
  cmd->add_option("--limit", a->limit, "evaluate only the first N sequences (0: all)");
  cli::add_kv_dtype_option(cmd, a->kv_dtype, "fp32");
  cli::add_table_dtype_option(cmd, a->table_dtype, "bf16");
  cmd->callback([a] { run_eval(*a); });
}

}  // namespace g4c::cli

// g4c loadgen — the server benchmark: sends a requests jsonl (the `g4c run` format: prompt or
// input_ids, max_new_tokens, sampling_params; or OpenAI chat `messages`) to a running
// `g4c serve` (or any OpenAI-compatible server) at a Poisson request rate or a fixed
// concurrency, and reports TTFT, TPOT, ITL and end-to-end latency (mean, p50, p99), request and
// token throughput, in a report JSON shaped like `g4c bench`'s (elapsed_s, generated_tokens_per_s,
// ttft/tpot percentiles).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "models/error.h"
#include "models/progress.h"
#include "tools/cli.h"
#include "tools/serve/http_client.h"

namespace g4c::cli {
namespace {

using nlohmann::json;

struct LoadArgs {
  std::string url, input, report, label = "serve";
  int concurrency = 1;
  double rate = 0;  // requests/s (Poisson); 0: as fast as the concurrency allows
  bool stream = true;
  int max_new_tokens = 32;
  bool ignore_eos = false;
  std::string model;
  double timeout_s = 600;
  uint64_t seed = 0;
};

// A lab-format request line → an OpenAI body and its path.
std::pair<std::string, json> to_openai(const json& line, const LoadArgs& a, const std::string& where) {
  if (!line.is_object()) throw Error(where + ": a request must be a JSON object");
  json b = json::object();
  std::string path = "/v1/completions";
  if (line.contains("messages")) {
    path = "/v1/chat/completions";
    b["messages"] = line["messages"];
  } else if (line.contains("input_ids")) {
    b["prompt"] = line["input_ids"];
  } else if (line.contains("prompt")) {
    b["prompt"] = line["prompt"];
  } else {
    throw Error(where + ": neither \"prompt\", \"input_ids\" nor \"messages\"");
  }
  b["max_tokens"] = line.value("max_new_tokens", line.value("max_tokens", a.max_new_tokens));
  b["temperature"] = 0.0;  // the lab format's default: greedy
  if (line.contains("sampling_params") && line["sampling_params"].is_object())
    for (const char* k : {"temperature", "top_p", "top_k", "seed"})
      if (line["sampling_params"].contains(k)) b[k] = line["sampling_params"][k];
  if (a.ignore_eos) b["ignore_eos"] = true;
  if (!a.model.empty()) b["model"] = a.model;
  b["stream"] = a.stream;
  if (a.stream) b["stream_options"] = {{"include_usage", true}};
  return {path, b};
}

json stats(std::vector<double> v) {
  if (v.empty()) return {{"mean", 0.0}, {"p50", 0.0}, {"p99", 0.0}, {"n", 0}};
  std::sort(v.begin(), v.end());
  auto pct = [&](double p) {
    const double pos = p / 100.0 * double(v.size() - 1);
    const size_t lo = size_t(pos), hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (pos - double(lo));
  };
  double sum = 0;
  for (double x : v) sum += x;
  return {{"mean", sum / double(v.size())}, {"p50", pct(50)}, {"p99", pct(99)}, {"n", v.size()}};
}

void run_loadgen(const LoadArgs& a) {
  std::string host;
  int port = 0;
  serve::split_url(a.url, &host, &port);
  std::ifstream in(a.input);
  if (!in) throw Error(a.input + ": cannot open requests file");
  std::vector<std::pair<std::string, json>> reqs;
  std::string line;
  for (int no = 1; std::getline(in, line); ++no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = a.input + ":" + std::to_string(no);
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded()) throw Error(where + ": malformed JSON");
    reqs.push_back(to_openai(j, a, where));
  }
  if (reqs.empty()) throw Error(a.input + ": no requests");
  const int n = int(reqs.size());
  std::vector<serve::ClientResult> results(n);
  // Arrival times: Poisson (exponential gaps) at --rate, else all at once (the concurrency bounds them).
  std::vector<double> arrival(n, 0.0);
  if (a.rate > 0) {
    std::mt19937_64 rng(a.seed);
    std::exponential_distribution<double> gap(a.rate);
    double t = 0;
    for (int i = 0; i < n; ++i) arrival[i] = (t += i ? gap(rng) : 0);
  }
  Progress bar("loadgen " + a.url, uint64_t(n));
  std::mutex bar_m;
  std::atomic<int> next{0};
  const auto start = std::chrono::steady_clock::now();
  auto worker = [&] {
    for (int i; (i = next.fetch_add(1)) < n;) {
      std::this_thread::sleep_until(start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                std::chrono::duration<double>(arrival[i])));
      results[i] = serve::post_openai(host, port, reqs[i].first, reqs[i].second, a.timeout_s);
      std::lock_guard<std::mutex> lock(bar_m);
      bar.add(1);
    }
  };
  const int workers = a.rate > 0 ? std::max(a.concurrency, std::min(n, 256)) : std::max(1, a.concurrency);
  std::vector<std::thread> pool;
  for (int w = 0; w < std::min(workers, n); ++w) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  bar.finish();
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::vector<double> ttft, tpot, itl, e2e;
  int failed = 0;
  int64_t gen = 0, prompt = 0;
  json errors = json::array();
  for (const auto& r : results) {
    if (r.status != 200) {
      ++failed;
      if (errors.size() < 10) errors.push_back(r.error);
      continue;
    }
    gen += r.completion_tokens;
    prompt += r.prompt_tokens;
    ttft.push_back(r.ttft_s);
    e2e.push_back(r.e2e_s);
    for (double d : r.itl_s) itl.push_back(d);
    if (r.completion_tokens > 1) tpot.push_back((r.e2e_s - r.ttft_s) / double(r.completion_tokens - 1));
  }
  json rep = {{"label", a.label},
              {"url", a.url},
              {"input", a.input},
              {"mode", a.rate > 0 ? "poisson" : "concurrency"},
              {"concurrency", a.concurrency},
              {"request_rate", a.rate},
              {"stream", a.stream},
              {"requests", n},
              {"failed_requests", failed},
              {"errors", errors},
              {"prompt_tokens", prompt},
              {"generated_tokens", gen},
              {"elapsed_s", {{"median", elapsed}, {"min", elapsed}, {"max", elapsed}, {"runs", {elapsed}}}},
              {"requests_per_s", n / elapsed},
              {"generated_tokens_per_s", double(gen) / elapsed},
              {"total_tokens_per_s", double(gen + prompt) / elapsed},
              {"ttft_s", stats(ttft)},
              {"tpot_s", stats(tpot)},
              {"itl_s", stats(itl)},
              {"e2e_s", stats(e2e)}};
  rep["ttft_p50_s"] = rep["ttft_s"]["p50"];
  rep["ttft_p99_s"] = rep["ttft_s"]["p99"];
  rep["tpot_p50_s"] = rep["tpot_s"]["p50"];
  rep["tpot_p99_s"] = rep["tpot_s"]["p99"];
  if (!a.report.empty()) {
    std::ofstream f(a.report);
    if (!f) throw Error(a.report + ": cannot write report");
    f << rep.dump(2) << "\n";
  }
  std::fprintf(stderr,
               "%s: %d requests (%d failed) in %.3f s, %.2f req/s, %.1f tok/s; TTFT p50 %.1f ms p99 %.1f ms; "
               "TPOT p50 %.2f ms; ITL p50 %.2f ms p99 %.2f ms; e2e p50 %.3f s p99 %.3f s\n",
               a.label.c_str(), n, failed, elapsed, n / elapsed, double(gen) / elapsed,
               1e3 * rep["ttft_s"]["p50"].get<double>(), 1e3 * rep["ttft_s"]["p99"].get<double>(),
               1e3 * rep["tpot_s"]["p50"].get<double>(), 1e3 * rep["itl_s"]["p50"].get<double>(),
               1e3 * rep["itl_s"]["p99"].get<double>(), rep["e2e_s"]["p50"].get<double>(),
               rep["e2e_s"]["p99"].get<double>());
  if (failed > 0) throw Error(std::to_string(failed) + " of " + std::to_string(n) + " requests failed");
}

}  // namespace

void add_loadgen_command(CLI::App& app) {
  auto a = std::make_shared<LoadArgs>();
  auto* cmd = app.add_subcommand("loadgen", "benchmark a running server: send a requests jsonl at a rate or concurrency");
  cmd->add_option("--url", a->url, "server, http://HOST:PORT")->required();
  cmd->add_option("--input", a->input, "requests jsonl (g4c run format, or chat messages)")->required();
  cmd->add_option("--report", a->report, "report JSON to write");
  cmd->add_option("--label", a->label, "configuration name in the report")->capture_default_str();
  cmd->add_option("--concurrency", a->concurrency, "requests in flight at once")->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--rate", a->rate, "requests per second, Poisson arrivals (0: send at the concurrency)")
      ->capture_default_str();
  cmd->add_flag("--stream,!--no-stream", a->stream, "stream answers (SSE; needed for TTFT/ITL)")->capture_default_str();
  cmd->add_option("--max-new-tokens", a->max_new_tokens, "default when a request has none")->capture_default_str();
  cmd->add_flag("--ignore-eos", a->ignore_eos, "generate max tokens (ignore_eos in every request)");
  cmd->add_option("--model", a->model, "model name sent in requests (default: none, the server's)");
  cmd->add_option("--timeout", a->timeout_s, "seconds per request")->capture_default_str();
  cmd->add_option("--seed", a->seed, "seed of the Poisson arrivals")->capture_default_str();
  cmd->callback([a] { run_loadgen(*a); });
}

}  // namespace g4c::cli

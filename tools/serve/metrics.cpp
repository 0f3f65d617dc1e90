// Prometheus text of the server's counters and histograms (see metrics.h).
#include "tools/serve/metrics.h"

#include <cstdio>

namespace g4c::serve {
namespace {

std::string num(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%.17g", v);
  return b;
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void Histogram::render(std::string& out, const std::string& name) const {
  uint64_t cum = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cum += counts_[i];
    out += name + "_bucket{le=\"" + num(bounds_[i]) + "\"} " + std::to_string(cum) + "\n";
  }
  cum += counts_.back();
  out += name + "_bucket{le=\"+Inf\"} " + std::to_string(cum) + "\n";
  out += name + "_sum " + num(sum_) + "\n";
  out += name + "_count " + std::to_string(count_) + "\n";
}

// Latency buckets (seconds): 1 ms to 60 s, about ×2.5 apart.
Metrics::Metrics()
    : ttft_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}),
      itl_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}),
      e2e_({0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}) {}

void Metrics::observe(const runtime::GenerationResult& r) {
  std::lock_guard<std::mutex> lock(m_);
  ++finished_[r.finish_reason];
  prompt_tokens_ += uint64_t(r.prompt_tokens);
  generated_tokens_ += r.tokens.size();
  if (r.tokens.empty()) return;
  ttft_.observe(r.prefill_latency_s);
  for (double d : r.decode_latencies_s) itl_.observe(d);
  e2e_.observe(r.total_latency_s);
}

void Metrics::count_request(const std::string& endpoint, const std::string& outcome) {
  std::lock_guard<std::mutex> lock(m_);
  ++requests_[{endpoint, outcome}];
}

std::string Metrics::render(const runtime::FrontStats& s) const {
  std::lock_guard<std::mutex> lock(m_);
  std::string o;
  o += "# HELP g4c_requests_total HTTP requests answered, by endpoint and outcome.\n# TYPE g4c_requests_total counter\n";
  for (const auto& [k, v] : requests_)
    o += "g4c_requests_total{endpoint=\"" + k.first + "\",outcome=\"" + k.second + "\"} " + std::to_string(v) + "\n";
  o += "# HELP g4c_generations_total Generations finished by the engine, by finish reason.\n# TYPE g4c_generations_total counter\n";
  for (const auto& [k, v] : finished_) o += "g4c_generations_total{finish_reason=\"" + k + "\"} " + std::to_string(v) + "\n";
  o += "# HELP g4c_prompt_tokens_total Prompt tokens of finished generations.\n# TYPE g4c_prompt_tokens_total counter\n";
  o += "g4c_prompt_tokens_total " + std::to_string(prompt_tokens_) + "\n";
  o += "# HELP g4c_generation_tokens_total Generated tokens.\n# TYPE g4c_generation_tokens_total counter\n";
  o += "g4c_generation_tokens_total " + std::to_string(generated_tokens_) + "\n";
  o += "# HELP g4c_time_to_first_token_seconds Queued to first token.\n# TYPE g4c_time_to_first_token_seconds histogram\n";
  ttft_.render(o, "g4c_time_to_first_token_seconds");
  o += "# HELP g4c_inter_token_latency_seconds Between consecutive tokens of a sequence.\n# TYPE g4c_inter_token_latency_seconds histogram\n";
  itl_.render(o, "g4c_inter_token_latency_seconds");
  o += "# HELP g4c_e2e_request_latency_seconds Queued to last token.\n# TYPE g4c_e2e_request_latency_seconds histogram\n";
  e2e_.render(o, "g4c_e2e_request_latency_seconds");
  auto gauge = [&](const char* name, const char* help, double v) {
    o += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " gauge\n" + name + " " + num(v) + "\n";
  };
  gauge("g4c_num_requests_running", "Sequences in the running batch.", s.running);
  gauge("g4c_num_requests_waiting", "Requests queued, not yet running.", s.waiting);
  gauge("g4c_kv_blocks_used", "Paged KV blocks in use.", s.kv_blocks_used);
  gauge("g4c_kv_blocks_free", "Paged KV blocks free.", s.kv_blocks_total - s.kv_blocks_used);
  o += "# HELP g4c_preemptions_total Sequences preempted for KV space.\n# TYPE g4c_preemptions_total counter\n";
  o += "g4c_preemptions_total " + std::to_string(s.preemptions) + "\n";
  o += "# HELP g4c_engine_steps_total Engine steps run.\n# TYPE g4c_engine_steps_total counter\n";
  o += "g4c_engine_steps_total " + std::to_string(s.steps) + "\n";
  return o;
}

}  // namespace g4c::serve

// The server's Prometheus metrics (text exposition format 0.0.4): requests by outcome,
// prompt / generated tokens, TTFT, inter-token and end-to-end latency histograms (from the
// scheduler's own per-request timings, the numbers `g4c run` reports), and the engine gauges
// (running / waiting sequences, KV blocks used / free, preemptions).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/request_front.h"
#include "runtime/scheduler.h"

namespace g4c::serve {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double v);
  // "name_bucket{le=...} n" lines, then _sum and _count.
  void render(std::string& out, const std::string& name) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative); last = +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  Metrics();
  // A finished generation (engine thread): tokens and latencies.
  void observe(const runtime::GenerationResult& r);
  // An answered HTTP request: outcome is "ok", "client_error", "queue_full", "cancelled",
  // "server_error", "unavailable".
  void count_request(const std::string& endpoint, const std::string& outcome);
  std::string render(const runtime::FrontStats& engine) const;

 private:
  mutable std::mutex m_;
  std::map<std::pair<std::string, std::string>, uint64_t> requests_;
  std::map<std::string, uint64_t> finished_;  // by finish_reason
  uint64_t prompt_tokens_ = 0, generated_tokens_ = 0;
  Histogram ttft_, itl_, e2e_;
};

}  // namespace g4c::serve

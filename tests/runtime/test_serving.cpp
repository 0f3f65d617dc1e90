// Serving formats and bad input: every bad request gets finish_reason "error" with a message,
// the others are served, and the summary counts the failures.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>

#include <nlohmann/json.hpp>

#include "models/tokenizer.h"
#include "runtime/serving.h"
#include "tests/runtime/support.h"

using namespace g4c;
using nlohmann::json;

namespace {

struct Served {
  runtime::ServeSummary summary;
  std::vector<json> lines;
};

runtime::Engine& engine() {
  static auto e = runtime::Engine::open(test::tiny_model_dir(), std::nullopt, {.max_sequences = 4, .max_seq_len = 64});
  return *e;
}

const models::Tokenizer& tokenizer() {
  static auto t = models::Tokenizer::load(test::tiny_model_dir() / "tokenizer.json");
  return *t;
}

Served serve(const std::string& requests, runtime::ServeOptions opts = {}) {
  std::istringstream in(requests);
  std::ostringstream out;
  Served s;
  s.summary = runtime::serve_jsonl(engine(), &tokenizer(), in, "requests.jsonl", out, opts);
  std::istringstream lines(out.str());
  for (std::string l; std::getline(lines, l);) s.lines.push_back(json::parse(l));
  return s;
}

}  // namespace

TEST(Serving, BadRequestsFailAloneAndOthersAreServed) {
  const std::string good = R"({"input_ids": [2, 818, 2050, 6510], "max_new_tokens": 5})";
  std::string long_prompt = R"({"input_ids": [2)";
  for (int i = 0; i < 70; ++i) long_prompt += ", 818";  // 71 tokens > --max-sequence-length 64
  long_prompt += "]}";
  const std::string requests = good + "\n" +
                               "{this is not json\n" +                                  // 1 malformed
                               long_prompt + "\n" +                                     // 2 too long
                               R"({"prompt": ""})" + "\n" +                             // 3 empty prompt
                               R"({"input_ids": []})" + "\n" +                          // 4 empty ids
                               R"({"input_ids": [2, 99999]})" + "\n" +                  // 5 unknown id
                               R"({"input_ids": [2, -3]})" + "\n" +                     // 6 negative id
                               R"({"input_ids": [2, 818], "max_new_tokens": -1})" + "\n" +  // 7
                               R"({"max_new_tokens": 3})" + "\n" +                      // 8 no prompt
                               R"({"prompt": "Hello", "max_new_tokens": 3})" + "\n";    // 9 good text
  auto s = serve(requests);
  ASSERT_EQ(s.lines.size(), 10u);
  EXPECT_EQ(s.summary.requests, 10);
  EXPECT_EQ(s.summary.failed, 8);
  const char* expect_in_error[] = {nullptr, "requests.jsonl:2", "maximum sequence length", "empty prompt",
                                   "empty prompt", "outside the vocabulary", "outside the vocabulary",
                                   "negative max_new_tokens", "neither", nullptr};
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(s.lines[i]["request_id"], i);
    if (!expect_in_error[i]) {
      EXPECT_EQ(s.lines[i]["finish_reason"], "length") << s.lines[i].dump();
      continue;
    }
    EXPECT_EQ(s.lines[i]["finish_reason"], "error") << i;
    EXPECT_NE(s.lines[i]["error"].get<std::string>().find(expect_in_error[i]), std::string::npos)
        << i << ": " << s.lines[i]["error"];
  }
  EXPECT_EQ(s.lines[0]["generated_tokens"], 5);
  EXPECT_EQ(s.lines[9]["generated_tokens"], 3);
  EXPECT_EQ(s.summary.generated_tokens, 8);
  // All KV back after a run with failures.
  EXPECT_EQ(engine().block_pool()->num_free(), engine().block_pool()->num_blocks());
  EXPECT_EQ(engine().ring_slots().num_free(), 4);
}

TEST(Serving, OutputAndSummaryHaveTheLabFields) {
  auto s = serve(R"({"prompt": "The kernel", "max_new_tokens": 4})"
                 "\n\n"  // a blank line is not a request
                 R"({"input_ids": [2, 818, 2050], "stop_token_ids": [], "sampling_params": {"temperature": 0}})");
  ASSERT_EQ(s.lines.size(), 2u);
  for (const auto& l : s.lines) {
    for (const char* k : {"request_id", "token_ids", "text", "prompt_tokens", "generated_tokens", "finish_reason", "metrics"})
      EXPECT_TRUE(l.contains(k)) << k;
    for (const char* k : {"prefill_latency_s", "decode_latencies_s", "total_latency_s", "peak_allocated_bytes",
                          "peak_reserved_bytes"})
      EXPECT_TRUE(l["metrics"].contains(k)) << k;
  }
  EXPECT_EQ(s.lines[0]["generated_tokens"], 4);
  EXPECT_EQ(s.lines[0]["metrics"]["decode_latencies_s"].size(), 3u);
  EXPECT_EQ(s.lines[1]["generated_tokens"], 32);  // default --max-new-tokens
  EXPECT_EQ(s.lines[0]["prompt_tokens"], int(tokenizer().encode("The kernel", true).size()));
  EXPECT_EQ(s.lines[0]["text"], tokenizer().decode(s.lines[0]["token_ids"].get<std::vector<int32_t>>(), true));
  for (const char* k : {"requests", "generated_tokens", "elapsed_s", "requests_per_s", "generated_tokens_per_s",
                        "batch_size", "peak_device_bytes", "ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s",
                        "itl_p50_s", "itl_p99_s", "device"})
    EXPECT_TRUE(s.summary.json.contains(k)) << k;
  // TPOT is per request (its mean interval between tokens, as vLLM's benchmarks define it), ITL per
  // interval; both percentiles linear between the two nearest ranks (numpy's default). Recomputed
  // here from the output lines' own intervals, which the JSON carries at full double precision: the
  // only difference is the order of the sums, so 1e-12 relative.
  std::vector<double> tpot, itl;
  for (const auto& l : s.lines) {
    auto d = l["metrics"]["decode_latencies_s"].get<std::vector<double>>();
    tpot.push_back(std::accumulate(d.begin(), d.end(), 0.0) / double(d.size()));
    itl.insert(itl.end(), d.begin(), d.end());
  }
  auto pct = [](std::vector<double> v, double p) {
    std::sort(v.begin(), v.end());
    const double pos = p / 100 * double(v.size() - 1);
    const size_t lo = size_t(std::floor(pos)), hi = std::min(lo + 1, v.size() - 1);
    return v[lo] * (1 - (pos - double(lo))) + v[hi] * (pos - double(lo));
  };
  auto near = [](double a, double b) { return std::abs(a - b) <= 1e-12 * std::max(std::abs(a), std::abs(b)); };
  EXPECT_TRUE(near(s.summary.json["tpot_p50_s"], (tpot[0] + tpot[1]) / 2));
  EXPECT_TRUE(near(s.summary.json["tpot_p99_s"], pct(tpot, 99)));
  EXPECT_TRUE(near(s.summary.json["itl_p50_s"], pct(itl, 50)));
  EXPECT_TRUE(near(s.summary.json["itl_p99_s"], pct(itl, 99)));
  EXPECT_EQ(itl.size(), 3u + 31u);
  EXPECT_EQ(s.summary.json["requests"], 2);
  EXPECT_EQ(s.summary.json["generated_tokens"], 36);
  EXPECT_EQ(s.summary.json["batch_size"], 4);
}

TEST(Serving, StopTokensAndEos) {
  // Greedy continuation of this prompt, computed once, then replayed with a stop id.
  const std::string ids = R"([2, 818, 2050, 6510, 7750, 327])";
  auto free_run = serve(R"({"input_ids": )" + ids + R"(, "max_new_tokens": 6})");
  auto toks = free_run.lines[0]["token_ids"].get<std::vector<int32_t>>();
  ASSERT_EQ(toks.size(), 6u);
  auto stopped = serve(R"({"input_ids": )" + ids + R"(, "max_new_tokens": 6, "stop_token_ids": [)" +
                       std::to_string(toks[2]) + "]}");
  auto got = stopped.lines[0]["token_ids"].get<std::vector<int32_t>>();
  // Stops at the first occurrence of the stop id (which may come before index 2), included.
  size_t first = std::find(toks.begin(), toks.end(), toks[2]) - toks.begin();
  EXPECT_EQ(got, std::vector<int32_t>(toks.begin(), toks.begin() + first + 1));
  EXPECT_EQ(stopped.lines[0]["finish_reason"], "stop");
}

TEST(Serving, NegativeAndNonIntegerFieldsAreErrors) {
  auto s = serve(R"({"input_ids": [2, 818], "max_new_tokens": 2.5})"
                 "\n"
                 R"({"input_ids": "2 818"})"
                 "\n"
                 R"({"input_ids": [2, 818], "sampling_params": {"temperature": -1}})"
                 "\n"
                 R"([1, 2, 3])");
  ASSERT_EQ(s.lines.size(), 4u);
  for (const auto& l : s.lines) EXPECT_EQ(l["finish_reason"], "error") << l.dump();
  EXPECT_EQ(s.summary.failed, 4);
}

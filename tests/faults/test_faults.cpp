// Faults the runtime must survive with a clear outcome (issue: nothing lost, nothing hidden):
//  - an allocation that fails mid-run (injected through the CPU backend's AllocationFault hook):
//    a g4c::Error naming it, the outputs finished before it written whole;
//  - KV exhaustion under load: preemption, every request finishes with the tokens it has when
//    KV is ample (greedy decoding is deterministic, so the ample run is the reference);
//  - a request the whole KV pool can never hold, and one longer than the maximum sequence
//    length: that request fails with a message, every other request is served;
//  - the thread pool under many small parallel_for calls (run under ThreadSanitizer too).
#include <gtest/gtest.h>

#include <atomic>
#include <numeric>
#include <sstream>

#include "models/error.h"
#include "runtime/engine.h"
#include "runtime/serving.h"
#include "runtime/thread_pool.h"
#include "tests/runtime/support.h"

namespace g4c::runtime {
namespace {

std::unique_ptr<Engine> open_tiny(const EngineOptions& o, AllocationFault fault = {}) {
  return Engine::open(test::tiny_model_dir(), std::nullopt, o, make_cpu_backend(2, std::move(fault)));
}

std::vector<GenerationRequest> requests(int n, int prompt_len, int new_tokens) {
  std::vector<GenerationRequest> rs;
  for (int i = 0; i < n; ++i) {
    GenerationRequest r;
    r.id = std::to_string(i);
    r.prompt.push_back(2);
    for (int t = 1; t < prompt_len; ++t) r.prompt.push_back(100 + (i * 37 + t * 11) % 5000);
    r.max_new_tokens = new_tokens;
    r.ignore_eos = true;
    rs.push_back(std::move(r));
  }
  return rs;
}

TEST(Faults, AllocationFailureMidRunIsAClearErrorAndKeepsWrittenOutputs) {
  // Fails every growth of the step values once `armed` is set (after open(), before serving):
  // the first step of the run fails, after the output line of the malformed request is written.
  std::atomic<bool> armed{false};
  std::atomic<int> faults{0};
  auto e = open_tiny({.max_sequences = 4}, [&](size_t, const char* what) {
    if (armed.load() && std::string(what) == "step values") {
      ++faults;
      return true;
    }
    return false;
  });
  // A jsonl whose first request is a parse error (written before any step runs), then four good.
  std::stringstream in;
  in << "not json\n";
  for (int i = 0; i < 4; ++i) in << R"({"input_ids": [2, 818, 2050, )" << 100 + i << R"(], "max_new_tokens": 4})" << "\n";
  std::stringstream out;
  ServeOptions so;
  so.ignore_eos = true;
  armed = true;
  try {
    serve_jsonl(*e, nullptr, in, "faults.jsonl", out, so);
    FAIL() << "an injected allocation failure went unnoticed";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("out of memory"), std::string::npos) << err.what();
    EXPECT_NE(std::string(err.what()).find("step values"), std::string::npos) << err.what();
  }
  EXPECT_GE(faults.load(), 1);
  // What was written is whole jsonl lines: the parse error of line 1.
  std::string line;
  int lines = 0;
  while (std::getline(out, line)) {
    auto j = nlohmann::json::parse(line);  // throws (fails the test) on a cut line
    EXPECT_EQ(j["finish_reason"], "error");
    ++lines;
  }
  EXPECT_EQ(lines, 1);
}

TEST(Faults, KvAllocationFailureAtOpenIsAClearError) {
  try {
    open_tiny({.max_sequences = 2}, [](size_t, const char* what) { return std::string(what).rfind("KV cache", 0) == 0; });
    FAIL() << "an injected KV allocation failure went unnoticed";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("KV cache"), std::string::npos) << err.what();
  }
}

TEST(Faults, KvExhaustionUnderLoadPreemptsAndLosesNothing) {
  // 8 sequences of 24 + 40 tokens need 8 * 64 = 512 tokens of full-layer KV; 20 blocks (of the
  // plan's block size, 16 tokens: 320 tokens) hold about five of them at full length.
  auto rs = requests(8, 24, 40);
  auto ample = open_tiny({.max_sequences = 8});
  const auto want = ample->generate(rs);
  // Admission without reservation: sequences outgrow the pool and the newest are preempted
  // (recomputed later).
  auto tight = open_tiny({.max_sequences = 8, .kv_blocks = 20, .reserve_generation = false});
  const auto got = tight->generate(rs);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_GT(tight->stats().preemptions, 0) << "the pool was not exhausted: the test does not test preemption";
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].finish_reason, "length") << got[i].error;
    EXPECT_EQ(got[i].tokens, want[i].tokens) << "request " << i;
  }
  // Admission reserving each request's life (the default): requests wait instead, none preempted.
  auto reserved = open_tiny({.max_sequences = 8, .kv_blocks = 20});
  const auto got2 = reserved->generate(rs);
  EXPECT_EQ(reserved->stats().preemptions, 0);
  EXPECT_LT(reserved->stats().max_running, 8);
  for (size_t i = 0; i < got2.size(); ++i) EXPECT_EQ(got2[i].tokens, want[i].tokens) << "request " << i;
}

TEST(Faults, RequestLargerThanThePoolOrTheSequenceLengthFailsAloneOthersServed) {
  auto e = open_tiny({.max_sequences = 4, .max_seq_len = 256, .kv_blocks = 4});  // 4 blocks: 64 tokens
  auto rs = requests(4, 8, 4);
  rs[1].prompt.resize(100, 7);   // 100 + 4 tokens: more blocks than the pool holds
  rs[2].prompt.resize(300, 7);   // longer than max_seq_len 256
  const auto got = e->generate(rs);
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0].finish_reason, "length");
  EXPECT_EQ(got[3].finish_reason, "length");
  EXPECT_EQ(got[0].tokens.size(), 4u);
  EXPECT_EQ(got[1].finish_reason, "error");
  EXPECT_NE(got[1].error.find("KV blocks"), std::string::npos) << got[1].error;
  EXPECT_EQ(got[2].finish_reason, "error");
  EXPECT_NE(got[2].error.find("maximum sequence length"), std::string::npos) << got[2].error;
}

TEST(Faults, InterruptStopsServingWithWholeLinesAndSaysSo) {
  auto e = open_tiny({.max_sequences = 1});
  std::stringstream in;
  for (int i = 0; i < 5; ++i) in << R"({"input_ids": [2, 818, )" << 100 + i << R"(], "max_new_tokens": 3})" << "\n";
  std::stringstream out;
  std::atomic<bool> stop{false};
  ServeOptions so;
  so.ignore_eos = true;
  so.interrupt = &stop;
  int finished = 0;
  auto s = serve_jsonl(*e, nullptr, in, "r.jsonl", out, so, [&](const GenerationResult&) {
    if (++finished == 2) stop = true;  // as SIGINT would, while request 2 finishes
  });
  EXPECT_TRUE(s.interrupted);
  EXPECT_EQ(s.json["interrupted"], true);
  EXPECT_EQ(s.requests, 2);
  std::string line;
  int lines = 0;
  while (std::getline(out, line)) {
    EXPECT_EQ(nlohmann::json::parse(line)["finish_reason"], "length");
    ++lines;
  }
  EXPECT_EQ(lines, 2);
}

TEST(Faults, WriteErrorOnTheOutputsIsAnError) {
  auto e = open_tiny({.max_sequences = 2});
  std::stringstream in(R"({"input_ids": [2, 818], "max_new_tokens": 2})" "\n");
  std::stringstream out;
  out.setstate(std::ios::badbit);  // as a full disk leaves an ofstream after a failed flush
  ServeOptions so;
  so.output_name = "full.jsonl";
  try {
    serve_jsonl(*e, nullptr, in, "r.jsonl", out, so);
    FAIL() << "a failed write went unnoticed";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("full.jsonl: write failed"), std::string::npos) << err.what();
  }
}

TEST(Faults, ThreadPoolManySmallParallelFors) {
  // Disjoint chunks covering [0, n) exactly once, call after call (ThreadSanitizer checks the
  // hand-over between generations).
  ThreadPool pool(4);
  for (int round = 0; round < 300; ++round) {
    const int64_t n = 1 + round % 97;
    std::vector<int> hits(size_t(n), 0);
    pool.parallel_for(n, 1 + round % 5, [&](int64_t b, int64_t en) {
      for (int64_t i = b; i < en; ++i) ++hits[size_t(i)];
    });
    ASSERT_EQ(std::count(hits.begin(), hits.end(), 1), n) << "round " << round;
  }
}

}  // namespace
}  // namespace g4c::runtime

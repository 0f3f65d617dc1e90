// The engine loop and request front on the tiny model (reference plan): concurrent greedy
// requests through the loop give exactly Engine::generate's tokens (streamed tokens == the
// result's); a cancelled request finishes "cancelled" with its KV freed; the bounded inbox
// refuses past max_waiting; a closed front refuses everything.
#include <gtest/gtest.h>

#include <thread>

#include "runtime/engine_loop.h"
#include "tests/runtime/support.h"

namespace g4c::runtime {
namespace {

std::vector<GenerationRequest> requests() {
  std::vector<GenerationRequest> rs;
  for (int i = 0; i < 6; ++i) {
    GenerationRequest r;
    r.id = std::to_string(i);
    r.prompt = {2};
    for (int k = 0; k < 3 + 4 * i; ++k) r.prompt.push_back(100 + 37 * k + 11 * i);
    r.max_new_tokens = 5 + i;
    r.ignore_eos = true;
    rs.push_back(r);
  }
  return rs;
}

// Reads a sink to its end: (streamed tokens, result).
std::pair<std::vector<int32_t>, GenerationResult> drain(RequestSink& s) {
  std::vector<int32_t> toks;
  for (;;) {
    auto u = s.wait(std::chrono::milliseconds(1000));
    toks.insert(toks.end(), u.tokens.begin(), u.tokens.end());
    if (u.result) return {toks, *u.result};
  }
}

TEST(EngineLoop, ConcurrentGreedyEqualsGenerate) {
  auto e = Engine::open(test::tiny_model_dir(), std::nullopt, {.max_sequences = 3, .max_seq_len = 64, .threads = 2});
  const auto want = e->generate(requests());
  RequestFront front(64);
  EngineLoop loop(*e, front);
  std::vector<std::shared_ptr<RequestSink>> sinks;
  for (auto& r : requests()) {
    auto s = front.submit(r);
    ASSERT_EQ(s.status, RequestFront::Status::kQueued);
    sinks.push_back(s.sink);
  }
  for (size_t i = 0; i < sinks.size(); ++i) {
    auto [streamed, result] = drain(*sinks[i]);
    EXPECT_EQ(result.finish_reason, "length");
    EXPECT_EQ(result.tokens, want[i].tokens) << "request " << i;
    EXPECT_EQ(streamed, result.tokens) << "request " << i;
  }
  // The loop publishes its stats after the step that delivered the last tokens: wait for them
  // (at most 10 s; a step of the tiny model takes milliseconds).
  for (int i = 0; i < 1000 && front.stats().running + front.stats().kv_blocks_used > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const FrontStats st = front.stats();
  EXPECT_EQ(st.running, 0);
  EXPECT_EQ(st.waiting, 0);
  EXPECT_EQ(st.kv_blocks_used, 0);
}

TEST(EngineLoop, CancelFreesTheSequence) {
  auto e = Engine::open(test::tiny_model_dir(), std::nullopt, {.max_sequences = 2, .max_seq_len = 512, .threads = 2});
  RequestFront front(8);
  EngineLoop loop(*e, front);
  GenerationRequest r = requests()[3];
  r.max_new_tokens = 400;
  auto s = front.submit(r);
  ASSERT_TRUE(s.sink);
  // Wait for the first token, then give up.
  std::vector<int32_t> got;
  while (got.empty()) {
    auto u = s.sink->wait(std::chrono::milliseconds(1000));
    ASSERT_FALSE(u.result) << "finished before it could be cancelled";
    got = u.tokens;
  }
  s.sink->cancel();
  auto [rest, result] = drain(*s.sink);
  EXPECT_EQ(result.finish_reason, "cancelled");
  EXPECT_LT(result.tokens.size(), 400u);
  // The next publish shows it gone; a later request runs normally.
  GenerationRequest r2 = requests()[0];
  auto s2 = front.submit(r2);
  auto [t2, res2] = drain(*s2.sink);
  EXPECT_EQ(res2.finish_reason, "length");
  for (int i = 0; i < 100 && front.stats().running + front.stats().kv_blocks_used > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(front.stats().running, 0);
  EXPECT_EQ(front.stats().kv_blocks_used, 0);
}

TEST(RequestFront, BoundedInboxAndClose) {
  RequestFront front(2);  // no engine thread: nothing leaves the inbox
  GenerationRequest r;
  r.prompt = {2, 3};
  EXPECT_EQ(front.submit(r).status, RequestFront::Status::kQueued);
  EXPECT_EQ(front.submit(r).status, RequestFront::Status::kQueued);
  EXPECT_EQ(front.submit(r).status, RequestFront::Status::kQueueFull);
  EXPECT_EQ(front.stats().waiting, 2);
  front.close();
  EXPECT_EQ(front.submit(r).status, RequestFront::Status::kClosed);
}

TEST(EngineLoop, StopFinishesEverySink) {
  auto e = Engine::open(test::tiny_model_dir(), std::nullopt, {.max_sequences = 1, .max_seq_len = 512, .threads = 2});
  RequestFront front(16);
  std::vector<std::shared_ptr<RequestSink>> sinks;
  {
    EngineLoop loop(*e, front);
    for (int i = 0; i < 4; ++i) {
      GenerationRequest r = requests()[i];
      r.max_new_tokens = 300;
      sinks.push_back(front.submit(r).sink);
    }
    loop.drain(std::chrono::milliseconds(50));  // then cancels the rest
  }
  for (auto& s : sinks) {
    auto [t, res] = drain(*s);
    EXPECT_TRUE(res.finish_reason == "cancelled" || res.finish_reason == "length") << res.finish_reason;
  }
  EXPECT_EQ(e->block_pool() ? e->block_pool()->num_free() : 0, e->block_pool() ? e->block_pool()->num_blocks() : 0);
}

}  // namespace
}  // namespace g4c::runtime

// KV managers and scheduler policy without a model: fake logits pick the next token.
#include <gtest/gtest.h>

#include "models/error.h"
#include <cmath>

#include "runtime/kv.h"
#include "runtime/scheduler.h"

using namespace g4c;
using namespace g4c::runtime;

TEST(RingSlots, AllocateFreeReuse) {
  RingSlots r(3);
  int a = r.allocate(), b = r.allocate(), c = r.allocate();
  EXPECT_FALSE(r.can_allocate());
  EXPECT_THROW(r.allocate(), Error);
  EXPECT_NE(a, b);
  EXPECT_NE(b, c);
  r.free(b);
  EXPECT_EQ(r.allocate(), b);  // a freed ring is reused at once
  r.free(a);
  EXPECT_THROW(r.free(a), Error);  // double free
  EXPECT_EQ(r.num_free(), 1);
}

TEST(BlockPool, GrowsByBlocksAndReturnsEverything) {
  BlockPool pool(5, 16);
  EXPECT_EQ(pool.blocks_for(0), 0);
  EXPECT_EQ(pool.blocks_for(1), 1);
  EXPECT_EQ(pool.blocks_for(16), 1);
  EXPECT_EQ(pool.blocks_for(17), 2);
  EXPECT_TRUE(pool.can_allocate(80));   // 5 blocks
  EXPECT_FALSE(pool.can_allocate(81));  // 6 blocks
  BlockTable a, b;
  pool.append(a, 17);  // 2 blocks
  EXPECT_EQ(a.size(), 2u);
  pool.append(a, 32);  // still 2
  EXPECT_EQ(a.size(), 2u);
  EXPECT_TRUE(pool.can_append(a, 80));
  EXPECT_FALSE(pool.can_append(a, 81));
  pool.append(b, 48);  // 3 blocks: pool empty
  EXPECT_EQ(pool.num_free(), 0);
  EXPECT_THROW(pool.append(a, 33), Error);
  const int32_t last_of_b = b.back();
  pool.free(b);
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(pool.num_free(), 3);
  pool.append(a, 33);
  EXPECT_EQ(a.back(), last_of_b);  // freed blocks are reused first
  pool.free(a);
  EXPECT_EQ(pool.num_free(), 5);
}

namespace {

constexpr int kVocab = 8;

// Logits rows whose argmax is `next` for every row that needs one.
std::vector<float> logits_for(const std::vector<ScheduledChunk>& chunks, int next) {
  std::vector<float> l;
  for (const auto& c : chunks)
    if (c.needs_logits) {
      std::vector<float> row(kVocab, 0.0f);
      row[next] = 1.0f;
      l.insert(l.end(), row.begin(), row.end());
    }
  return l;
}

GenerationRequest req(const std::string& id, int prompt_len, int max_new) {
  GenerationRequest r;
  r.id = id;
  r.prompt.assign(prompt_len, 3);
  r.max_new_tokens = max_new;
  return r;
}

}  // namespace

TEST(Scheduler, DecodeFirstThenChunkedPrefillUnderBudget) {
  RingSlots rings(2);
  BlockPool blocks(100, 4);
  Scheduler s({.max_sequences = 2, .token_budget = 6, .chunk_tokens = 4, .max_seq_len = 64, .eos_token_ids = {1}},
              &rings, &blocks);
  auto now = Scheduler::Clock::now();
  s.add(req("A", 9, 2), 0, now);
  s.add(req("B", 3, 2), 1, now);
  auto c1 = s.schedule();  // A: 4 tokens (chunk cap), B: 2 tokens (budget 6 - 4)
  ASSERT_EQ(c1.size(), 2u);
  EXPECT_EQ(c1[0].num_tokens, 4);
  EXPECT_FALSE(c1[0].needs_logits);
  EXPECT_EQ(c1[1].num_tokens, 2);
  EXPECT_EQ(c1[1].position, 0);
  s.complete(c1, logits_for(c1, 5).data(), kVocab, now);
  // B's last prompt token counts as "decode" (one token, needs logits) and goes first;
  // A continues its prefill with 4 more tokens.
  auto c2 = s.schedule();
  ASSERT_EQ(c2.size(), 2u);
  EXPECT_EQ(c2[0].seq, 1);
  EXPECT_EQ(c2[0].num_tokens, 1);
  EXPECT_EQ(c2[0].position, 2);
  EXPECT_TRUE(c2[0].needs_logits);
  EXPECT_EQ(c2[1].seq, 0);
  EXPECT_EQ(c2[1].num_tokens, 4);
  EXPECT_EQ(c2[1].position, 4);
  EXPECT_FALSE(c2[1].needs_logits);
  s.complete(c2, logits_for(c2, 5).data(), kVocab, now);
  // Both now feed one token, in admission order: A's last prompt token, B's sampled token.
  auto c3 = s.schedule();
  ASSERT_EQ(c3.size(), 2u);
  EXPECT_EQ(c3[0].seq, 0);
  EXPECT_EQ(c3[0].position, 8);
  EXPECT_EQ(c3[1].seq, 1);
  EXPECT_EQ(c3[1].num_tokens, 1);
  EXPECT_EQ(c3[1].tokens[0], 5);  // the token sampled last step is fed back
  s.complete(c3, logits_for(c3, 6).data(), kVocab, now);
  // B has its 2 tokens: finished and its ring is free in the same step.
  auto done = s.take_finished();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].id, "B");
  EXPECT_EQ(done[0].tokens, (std::vector<int32_t>{5, 6}));
  EXPECT_EQ(done[0].finish_reason, "length");
  EXPECT_EQ(rings.num_free(), 1);
}

TEST(Scheduler, StopsOnEosUnlessIgnored) {
  RingSlots rings(2);
  BlockPool blocks(100, 4);
  Scheduler s({.max_sequences = 2, .token_budget = 16, .chunk_tokens = 8, .max_seq_len = 64, .eos_token_ids = {1}},
              &rings, &blocks);
  auto now = Scheduler::Clock::now();
  auto ignoring = req("ignore", 2, 3);
  ignoring.ignore_eos = true;
  s.add(req("eos", 2, 3), 0, now);
  s.add(ignoring, 1, now);
  while (!s.done()) {
    auto c = s.schedule();
    s.complete(c, logits_for(c, 1).data(), kVocab, now);
  }
  auto r = s.take_finished();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].finish_reason, "stop");
  EXPECT_EQ(r[0].tokens, (std::vector<int32_t>{1}));
  EXPECT_EQ(r[1].finish_reason, "length");
  EXPECT_EQ(r[1].tokens.size(), 3u);
  EXPECT_EQ(blocks.num_free(), 100);
}

TEST(Scheduler, PreemptsTheNewestWhenBlocksRunOut) {
  RingSlots rings(3);
  BlockPool blocks(6, 2);  // 12 tokens of KV in all
  Scheduler s({.max_sequences = 3, .token_budget = 16, .chunk_tokens = 8, .max_seq_len = 64, .eos_token_ids = {1}},
              &rings, &blocks);
  auto now = Scheduler::Clock::now();
  for (int i = 0; i < 3; ++i) s.add(req("r" + std::to_string(i), 3, 4), i, now);  // each ends at 7 tokens
  int steps = 0;
  while (!s.done() && steps < 100) {
    auto c = s.schedule();
    ASSERT_FALSE(c.empty());
    s.complete(c, logits_for(c, 4).data(), kVocab, now);
    ++steps;
  }
  EXPECT_GT(s.total_preemptions(), 0);
  auto r = s.take_finished();
  ASSERT_EQ(r.size(), 3u);
  for (const auto& x : r) {
    EXPECT_EQ(x.finish_reason, "length") << x.error;
    EXPECT_EQ(x.tokens, (std::vector<int32_t>{4, 4, 4, 4}));
  }
  EXPECT_EQ(blocks.num_free(), 6);
  EXPECT_EQ(rings.num_free(), 3);
}

TEST(Scheduler, ZeroMaxNewTokensFinishesAtOnce) {
  RingSlots rings(1);
  Scheduler s({.max_sequences = 1, .token_budget = 8, .chunk_tokens = 8}, &rings, nullptr);
  s.add(req("z", 4, 0), 0, Scheduler::Clock::now());
  EXPECT_TRUE(s.done());
  auto r = s.take_finished();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_TRUE(r[0].tokens.empty());
  EXPECT_EQ(r[0].finish_reason, "length");
}


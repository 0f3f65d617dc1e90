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

TEST(BlockPool, ReleasesBlocksThatLeftTheWindow) {
  BlockPool pool(6, 4);
  BlockTable t;
  pool.append(t, 12);                   // blocks of positions 0-3, 4-7, 8-11
  EXPECT_EQ(pool.release_before(t, 7), 1);  // only 0-3 lies wholly before 7
  EXPECT_EQ(t[0], kReleasedBlock);
  EXPECT_EQ(BlockPool::held(t), 2);
  EXPECT_EQ(pool.num_free(), 4);
  EXPECT_EQ(pool.release_before(t, 8), 1);  // 4-7 now too
  EXPECT_EQ(pool.release_before(t, 8), 0);  // released entries are not released twice
  EXPECT_EQ(pool.release_before(t, -5), 0);
  EXPECT_TRUE(pool.can_append(t, 12 + 4 * 5));  // the table keeps its logical length: 5 more fit
  EXPECT_FALSE(pool.can_append(t, 12 + 4 * 5 + 1));
  pool.free(t);  // skips the released entries
  EXPECT_EQ(pool.num_free(), 6);
  EXPECT_EQ(BlockPool::window_blocks_for(8, 4, 4), 4);  // 11 key positions over at most 4 blocks
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

// mixed_prefill_tokens caps the prefill of a step that also decodes; a step without decodes
// prefills the whole budget.
TEST(Scheduler, MixedPrefillTokensBoundThePrefillBesideADecode) {
  RingSlots rings(2);
  BlockPool blocks(100, 4);
  Scheduler s({.max_sequences = 2, .token_budget = 16, .chunk_tokens = 16, .mixed_prefill_tokens = 3,
               .max_seq_len = 64, .eos_token_ids = {1}},
              &rings, &blocks);
  auto now = Scheduler::Clock::now();
  s.add(req("A", 2, 4), 0, now);
  auto c1 = s.schedule();  // no decode yet: A's whole prompt
  ASSERT_EQ(c1.size(), 1u);
  EXPECT_EQ(c1[0].num_tokens, 2);
  s.complete(c1, logits_for(c1, 5).data(), kVocab, now);
  s.add(req("B", 20, 2), 1, now);
  auto c2 = s.schedule();  // A decodes: B gets 3 prefill tokens, not 15
  ASSERT_EQ(c2.size(), 2u);
  EXPECT_EQ(c2[0].seq, 0);
  EXPECT_EQ(c2[0].num_tokens, 1);
  EXPECT_EQ(c2[1].seq, 1);
  EXPECT_EQ(c2[1].num_tokens, 3);
  s.complete(c2, logits_for(c2, 5).data(), kVocab, now);
  auto c3 = s.schedule();
  ASSERT_EQ(c3.size(), 2u);
  EXPECT_EQ(c3[1].num_tokens, 3);
  EXPECT_EQ(c3[1].position, 3);
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
  // Admission by known tokens only: all three start, and their growth must preempt.
  Scheduler s({.max_sequences = 3, .token_budget = 16, .chunk_tokens = 8, .max_seq_len = 64, .eos_token_ids = {1},
               .reserve_generation = false},
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

// A window pool: at every step a sequence holds exactly the blocks that cover the keys its next
// chunk reads — from its first query's position − (W − 1) to its last token — and the full
// pool every block of its length.
TEST(Scheduler, WindowPoolHoldsExactlyTheWindow) {
  constexpr int kW = 8, kBlock = 4, kChunk = 5;
  RingSlots rings(2);
  BlockPool full(64, kBlock), window(64, kBlock);
  Scheduler s({.max_sequences = 2, .token_budget = 16, .chunk_tokens = kChunk, .max_seq_len = 128,
               .eos_token_ids = {1}, .window = kW},
              &rings, &full, &window);
  auto now = Scheduler::Clock::now();
  s.add(req("long", 23, 30), 0, now);
  s.add(req("short", 2, 3), 1, now);
  int steps = 0, most = 0;
  while (!s.done() && steps < 200) {
    auto chunks = s.schedule();
    ASSERT_FALSE(chunks.empty());
    for (const auto& c : chunks) {
      const int first_key = std::max(0, c.position - kW + 1), end = c.position + c.num_tokens;
      const int want = (end + kBlock - 1) / kBlock - first_key / kBlock;
      EXPECT_EQ(BlockPool::held(*c.window_blocks), want) << "seq " << c.seq << " at " << c.position;
      EXPECT_EQ(int(c.window_blocks->size()), (end + kBlock - 1) / kBlock);
      for (int b = first_key / kBlock; b < int(c.window_blocks->size()); ++b) EXPECT_NE((*c.window_blocks)[b], kReleasedBlock);
      EXPECT_EQ(int(c.blocks->size()), (end + kBlock - 1) / kBlock);
      EXPECT_EQ(BlockPool::held(*c.blocks), int(c.blocks->size()));
      most = std::max(most, BlockPool::held(*c.window_blocks));
    }
    s.complete(chunks, logits_for(chunks, 4).data(), kVocab, now);
    ++steps;
  }
  EXPECT_EQ(most, window.window_blocks(kW, kChunk));  // the bound is reached and never passed
  auto r = s.take_finished();
  ASSERT_EQ(r.size(), 2u);
  for (const auto& x : r) EXPECT_EQ(x.finish_reason, "length") << x.error;
  EXPECT_EQ(window.num_free(), 64);
  EXPECT_EQ(full.num_free(), 64);
  EXPECT_EQ(s.total_preemptions(), 0);
}

// Admission reserves a request's whole life: the pool of 12 tokens holds two 3+4-token requests
// (6 tokens of KV each: the last token is sampled, never fed) at once, the third waits for one
// to finish — nobody is preempted and every output is whole.
TEST(Scheduler, ReservedAdmissionNeverPreempts) {
  RingSlots rings(3);
  BlockPool blocks(6, 2);
  Scheduler s({.max_sequences = 3, .token_budget = 16, .chunk_tokens = 8, .max_seq_len = 64, .eos_token_ids = {1}},
              &rings, &blocks);
  auto now = Scheduler::Clock::now();
  for (int i = 0; i < 3; ++i) s.add(req("r" + std::to_string(i), 3, 4), i, now);
  int steps = 0;
  while (!s.done() && steps < 100) {
    auto c = s.schedule();
    ASSERT_FALSE(c.empty());
    s.complete(c, logits_for(c, 4).data(), kVocab, now);
    ++steps;
  }
  EXPECT_EQ(s.total_preemptions(), 0);
  EXPECT_EQ(s.max_running(), 2);
  auto r = s.take_finished();
  ASSERT_EQ(r.size(), 3u);
  for (const auto& x : r) EXPECT_EQ(x.tokens, (std::vector<int32_t>{4, 4, 4, 4})) << x.error;
  EXPECT_EQ(blocks.num_free(), 6);
}

// A prefilling sequence reserves the window of its chunk, a decoding one the window of one token:
// W = 8, blocks of 4, chunks of 8 — a prefill holds up to 5 blocks, a decode 3. An 8-block window
// pool runs two 20-token prompts at once as soon as the first decodes (3 + 5 blocks); reserving
// the prefill peak for a sequence's whole life would run them one after the other. Nobody is
// preempted and every output is whole.
TEST(Scheduler, WindowPoolReservesThePrefillPeakOnlyWhilePrefilling) {
  constexpr int kW = 8, kBlock = 4, kChunk = 8;
  RingSlots rings(2);
  BlockPool full(64, kBlock), window(8, kBlock);
  ASSERT_EQ(window.window_blocks(kW, kChunk), 5);
  ASSERT_EQ(window.window_blocks(kW, 1), 3);
  Scheduler s({.max_sequences = 2, .token_budget = 16, .chunk_tokens = kChunk, .max_seq_len = 128,
               .eos_token_ids = {1}, .window = kW},
              &rings, &full, &window);
  auto now = Scheduler::Clock::now();
  s.add(req("a", 20, 12), 0, now);
  s.add(req("b", 20, 12), 1, now);
  int steps = 0;
  while (!s.done() && steps < 200) {
    auto chunks = s.schedule();
    ASSERT_FALSE(chunks.empty());
    EXPECT_LE(window.num_blocks() - window.num_free(), 8);
    s.complete(chunks, logits_for(chunks, 4).data(), kVocab, now);
    ++steps;
  }
  EXPECT_EQ(s.max_running(), 2);
  EXPECT_EQ(s.total_preemptions(), 0);
  auto r = s.take_finished();
  ASSERT_EQ(r.size(), 2u);
  for (const auto& x : r) EXPECT_EQ(x.tokens, std::vector<int32_t>(12, 4)) << x.error;
  EXPECT_EQ(window.num_free(), 8);
}

// A request whose life is longer than the whole pool still runs when it is alone and its prompt
// fits (it may finish early on a stop token).
TEST(Scheduler, ReservationLongerThanThePoolRunsAlone) {
  RingSlots rings(2);
  BlockPool blocks(4, 2);  // 8 tokens
  Scheduler s({.max_sequences = 2, .token_budget = 16, .chunk_tokens = 8, .max_seq_len = 64, .eos_token_ids = {1}},
              &rings, &blocks);
  auto now = Scheduler::Clock::now();
  s.add(req("long", 3, 40), 0, now);
  auto c = s.schedule();
  ASSERT_EQ(c.size(), 1u);
  s.complete(c, logits_for(c, 1).data(), kVocab, now);  // EOS at once
  auto r = s.take_finished();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].finish_reason, "stop");
  EXPECT_EQ(blocks.num_free(), 4);
}

// Liveness-shared value placement (runtime/plan/value_arena.h): the invariants the CUDA backend
// relies on when it puts a plan's values in one arena — values whose lifetimes intersect never
// share a byte (so a step's outputs never alias its inputs), host-read values live to the end —
// checked on random lifetimes against a brute-force check and on the tiny reference plan.
#include <gtest/gtest.h>

#include <random>

#include "models/config.h"
#include "models/safetensors.h"
#include "runtime/plan/reference_builder.h"
#include "runtime/plan/value_arena.h"
#include "tests/runtime/support.h"

using namespace g4c;
namespace fb = g4c::plan::fb;

TEST(ValueArena, RandomLifetimesNeverOverlapWhileLive) {
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    const int n = 1 + int(rng() % 60), steps = 1 + int(rng() % 40);
    std::vector<plan::Lifetime> life(n);
    std::vector<size_t> size(n);
    size_t sum = 0;
    for (int v = 0; v < n; ++v) {
      const int a = int(rng() % steps), b = int(rng() % steps);
      life[v] = {std::min(a, b), std::max(a, b)};
      if (rng() % 10 == 0) life[v] = {-1, -1};  // never touched: not placed
      size[v] = rng() % 5 == 0 ? 0 : 1 + rng() % 5000;
      if (life[v].first >= 0 && size[v]) sum += (size[v] + 255) / 256 * 256;
    }
    auto a = plan::place_values(life, size);
    ASSERT_TRUE(plan::arena_is_consistent(life, size, a)) << "round " << round;
    EXPECT_LE(a.bytes, sum);  // never worse than one buffer per value
    // Lower bound: at every step the live values must fit side by side.
    for (int s = 0; s < steps; ++s) {
      size_t live = 0;
      for (int v = 0; v < n; ++v)
        if (size[v] && life[v].first >= 0 && life[v].first <= s && s <= life[v].last) live += size[v];
      EXPECT_GE(a.bytes, live);
    }
  }
}

TEST(ValueArena, TouchingLifetimesDoNotShare) {
  // A value last used at step 3 and one first written at step 3 (an input and an output of the
  // same step) must not share bytes; one first written at step 4 may.
  std::vector<plan::Lifetime> life = {{0, 3}, {3, 5}, {4, 6}};
  std::vector<size_t> size = {1024, 1024, 1024};
  auto a = plan::place_values(life, size);
  EXPECT_NE(a.offset[0], a.offset[1]);
  EXPECT_EQ(a.offset[2], a.offset[0]);
  EXPECT_EQ(a.bytes, 2048u);
}

TEST(ValueArena, TinyReferencePlanLifetimes) {
  const auto cfg = models::load_model_config(test::tiny_model_dir());
  auto ckpt = models::Checkpoint::open(test::tiny_model_dir());
  auto p = plan::build_reference_plan(cfg, *ckpt);
  auto life = plan::value_lifetimes(p);
  const int n = int(p->program()->size());
  ASSERT_EQ(life.size(), p->values()->size());
  // Every step's inputs and outputs are live at that step.
  for (int i = 0; i < n; ++i) {
    const auto* st = p->program()->Get(i);
    for (int v : *st->inputs()) EXPECT_TRUE(life[v].first <= i && i <= life[v].last);
    for (int v : *st->outputs()) EXPECT_TRUE(life[v].first <= i && i <= life[v].last);
  }
  EXPECT_EQ(life[p->logits_value()].last, n);  // read by the host after the run
  std::vector<size_t> size(life.size());
  size_t separate = 0;
  for (size_t v = 0; v < size.size(); ++v) {
    size[v] = size_t(p->values()->Get(int(v))->cols()) * 512 * 2;
    separate += size[v];
  }
  auto a = plan::place_values(life, size);
  EXPECT_TRUE(plan::arena_is_consistent(life, size, a));
  EXPECT_LE(a.bytes, separate);
  std::printf("[ measured ] tiny reference plan: %zu values, one buffer each %zu KiB, shared arena %zu KiB\n",
              size.size(), separate >> 10, a.bytes >> 10);
}

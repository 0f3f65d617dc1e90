// The token sampler (runtime/sampler.h) against its definition, written out by brute force here
// (every row fully sorted, sums taken in that order), against hand-computed distributions, and
// the scheduler's parallel rows against one-row-at-a-time sampling.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "runtime/kv.h"
#include "runtime/sampler.h"
#include "runtime/scheduler.h"

using namespace g4c::runtime;

namespace {

// sampler.h's definition, literally: the tokens fully sorted (higher logit first, lower index on
// ties, NaN as −inf), the first top_k, w = exp((l − max) / T) in float (NaN logits 0), the shortest
// prefix in that order with Σw ≥ top_p · Σ_C w (at least one), then the first token in index
// order whose running sum exceeds u · Σ_K w (or, rounding, the last with positive weight).
// O(V log V) per row.
struct Reference {
  const std::vector<float>& l;
  std::vector<int32_t> order;
  explicit Reference(const std::vector<float>& logits) : l(logits), order(logits.size()) {
    std::iota(order.begin(), order.end(), 0);
    auto key = [](float v) { return std::isnan(v) ? -INFINITY : v; };
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return key(l[a]) > key(l[b]); });
  }
  int32_t operator()(const SamplingParams& p, double u) const {
    const int V = int(l.size());
    if (p.temperature <= 0.0f || !std::isfinite(l[order[0]])) return order[0];
    const float mx = l[order[0]], inv_t = 1.0f / p.temperature;
    const int k = p.top_k > 0 && p.top_k < V ? p.top_k : V;
    std::vector<float> w(static_cast<size_t>(k), 0.0f);
    double z = 0;
    for (int j = 0; j < k; ++j) {
      const float x = (mx - l[order[j]]) * inv_t;
      z += w[j] = std::isnan(x) ? 0.0f : std::exp(-x);
    }
    int n = k;
    if (p.top_p < 1.0f) {
      double acc = 0;
      n = 0;
      while (n < k && acc < double(p.top_p) * z) acc += w[n++];
      n = std::max(n, 1);
    }
    std::vector<std::pair<int32_t, float>> kept;
    for (int j = 0; j < n; ++j) kept.push_back({order[j], w[j]});
    std::sort(kept.begin(), kept.end());
    double s = 0;
    for (const auto& e : kept) s += e.second;
    double run = 0;
    int32_t last = kept.front().first;
    for (const auto& e : kept) {
      if (e.second == 0.0f) continue;
      last = e.first;
      if ((run += e.second) > u * s) return last;
    }
    return last;
  }
};

// Rows of the shapes a model gives and a few it should not: Gaussian logits at several scales,
// softcapped ones (Gemma 4's 30·tanh(x/30)), heavy ties, −inf entries, a NaN.
std::vector<float> make_row(int kind, int V, std::mt19937_64& g) {
  std::vector<float> l(static_cast<size_t>(V));
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int i = 0; i < V; ++i) {
    const float x = nd(g);
    switch (kind % 5) {
      case 0: l[i] = 3.0f * x; break;
      case 1: l[i] = 30.0f * std::tanh(8.0f * x / 30.0f); break;
      case 2: l[i] = std::round(2.0f * x); break;  // integers: many exact ties
      case 3: l[i] = (i % 7 == 3) ? -INFINITY : 0.5f * x; break;
      default: l[i] = 12.0f * x; break;
    }
  }
  if (kind % 5 == 4 && V > 2) l[size_t(V / 2)] = std::numeric_limits<float>::quiet_NaN();
  return l;
}

}  // namespace

TEST(Sampler, GreedyTopKTopPAndTemperature) {
  const float logits[4] = {1.0f, 3.0f, 2.0f, 3.0f};
  std::mt19937_64 rng(7);
  EXPECT_EQ(argmax(logits, 4), 1);  // lowest index on ties
  EXPECT_EQ(sample(logits, 4, {}, rng), 1);  // temperature 0: greedy
  for (int i = 0; i < 50; ++i) {
    // top_k 1 keeps only the (tie-broken) best; a tiny top_p keeps only the first of the sorted list.
    EXPECT_EQ(sample(logits, 4, {.temperature = 1.0f, .top_k = 1}, rng), 1);
    EXPECT_EQ(sample(logits, 4, {.temperature = 1.0f, .top_p = 1e-3f}, rng), 1);
    // top_k 3 never returns the smallest logit.
    EXPECT_NE(sample(logits, 4, {.temperature = 2.0f, .top_k = 3}, rng), 0);
  }
  // Frequencies follow softmax(logits / T): T = 1 over {1, 3, 2, 3}.
  const int n = 20000;
  int count[4] = {};
  for (int i = 0; i < n; ++i) ++count[sample(logits, 4, {.temperature = 1.0f}, rng)];
  double z = std::exp(1.0) + 2 * std::exp(3.0) + std::exp(2.0);
  const double p[4] = {std::exp(1.0) / z, std::exp(3.0) / z, std::exp(2.0) / z, std::exp(3.0) / z};
  for (int k = 0; k < 4; ++k) {
    // 5 standard deviations of a binomial(n, p): fails by chance with probability < 1e-6.
    const double sd = std::sqrt(n * p[k] * (1 - p[k]));
    EXPECT_NEAR(count[k], n * p[k], 5 * sd) << "token " << k;
  }
}

TEST(Sampler, NucleusKeepsTheShortestHeadAndRenormalizes) {
  // Probabilities 0.5, 0.3, 0.15, 0.05 at T = 1, placed out of order in a vocabulary of 6 with two
  // tokens at −inf. top_p 0.75: 0.5 < 0.75 ≤ 0.8, so the head is {0.5, 0.3}, drawn as 5/8 and 3/8.
  const float logits[6] = {float(std::log(0.15)), -INFINITY, float(std::log(0.5)), float(std::log(0.05)),
                           -INFINITY, float(std::log(0.3))};
  std::mt19937_64 rng(11);
  const int n = 40000;
  int count[6] = {};
  for (int i = 0; i < n; ++i) ++count[sample(logits, 6, {.temperature = 1.0f, .top_p = 0.75f}, rng)];
  EXPECT_EQ(count[0] + count[1] + count[3] + count[4], 0);
  const double sd = std::sqrt(n * 0.625 * 0.375);  // binomial; 5 sd: chance failure < 1e-6
  EXPECT_NEAR(count[2], n * 0.625, 5 * sd);
  EXPECT_NEAR(count[5], n * 0.375, 5 * sd);
  // top_p 0.85 takes the third (0.8 < 0.85): 0.5 / 0.95 of the draws go to token 2.
  int c2 = 0, c0 = 0;
  for (int i = 0; i < n; ++i) {
    const int t = sample(logits, 6, {.temperature = 1.0f, .top_p = 0.85f}, rng);
    c2 += t == 2;
    c0 += t == 0;
    ASSERT_NE(t, 3);
  }
  const double p2 = 0.5 / 0.95, p0 = 0.15 / 0.95;
  EXPECT_NEAR(c2, n * p2, 5 * std::sqrt(n * p2 * (1 - p2)));
  EXPECT_NEAR(c0, n * p0, 5 * std::sqrt(n * p0 * (1 - p0)));
}

TEST(Sampler, MatchesTheDefinitionOnRandomRows) {
  // Same u, same token: the sampler's selections (bounded heap, histogram of the nucleus, walk in
  // index order) against the brute-force definition. Exact equality is expected: both compute the
  // same float weights and the same index-order sums for the draw; only where the nucleus's
  // running sum crosses top_p · Σw do the two add in different orders (by bins here), which can
  // move the boundary only if the crossing lies within ~1e-16 relative of the target.
  std::mt19937_64 g(20261205);
  std::uniform_real_distribution<double> uni(0.0, 1.0);
  const int sizes[] = {1, 2, 7, 33, 1000, 8192, 70001};
  const float temps[] = {0.25f, 0.8f, 1.0f, 3.0f};
  const float top_ps[] = {1.0f, 0.95f, 0.5f, 0.01f};
  int cases = 0, mismatches = 0;
  for (const int V : sizes)
    for (int kind = 0; kind < 5; ++kind) {
      const std::vector<float> l = make_row(kind, V, g);
      const Reference ref(l);
      const int top_ks[] = {-1, 1, 2, 40, 5000, V - 1, V, V + 5};
      for (const float t : temps)
        for (const int k : top_ks)
          for (const float tp : top_ps) {
            // (The reference sorts the kept set per case: fewer large-V cases, for the ASan build.)
            if (V > 8192 && (t == 0.25f || t == 1.0f || tp == 0.5f || (k != -1 && k != 40 && k != V))) continue;
            const SamplingParams p{.temperature = t, .top_k = k, .top_p = tp};
            for (const double u : {0.0, uni(g), uni(g), 1.0 - 0x1p-53}) {
              const int32_t got = sample_u(l.data(), V, p, u), want = ref(p, u);
              ++cases;
              if (got != want) {
                ++mismatches;
                ADD_FAILURE() << "V " << V << " kind " << kind << " T " << t << " top_k " << k << " top_p " << tp
                              << " u " << u << ": " << got << " vs " << want;
              }
            }
          }
    }
  EXPECT_EQ(mismatches, 0) << cases << " cases";
  EXPECT_GT(cases, 3000);
}

TEST(Sampler, DrawsOnlyWhenSampling) {
  std::vector<float> l = {0.1f, 0.7f, -0.2f, 0.4f};
  std::mt19937_64 a(3), b(3);
  EXPECT_EQ(sample_draw({}, a), 0.0);  // greedy: the generator is not touched
  EXPECT_EQ(a(), b());
  const SamplingParams p{.temperature = 0.9f};
  for (int i = 0; i < 100; ++i) {
    std::mt19937_64 c = a;
    const double u = sample_draw(p, c);
    EXPECT_EQ(sample(l.data(), 4, p, a), sample_u(l.data(), 4, p, u));
    EXPECT_EQ(a(), c());  // one draw per sampled row
  }
  // Rows whose best logit is not finite are greedy; NaN never wins argmax, even at index 0.
  const float inf_row[3] = {0.0f, INFINITY, 1.0f};
  EXPECT_EQ(sample_u(inf_row, 3, p, 0.5), 1);
  const float nan_row[3] = {std::numeric_limits<float>::quiet_NaN(), -1.0f, 2.0f};
  EXPECT_EQ(argmax(nan_row, 3), 2);
}

TEST(Sampler, SchedulerRowsInParallelEqualRowsOneAtATime) {
  // 6 sampled requests of a 65536-token vocabulary: 6 · 65536 ≥ 2^18, so complete() shares the
  // rows between threads. Their tokens must be those of sampling each row alone with the
  // request's own generator (seeded as the scheduler seeds it).
  const int V = 65536, R = 6, steps = 3;
  RingSlots rings(R);
  Scheduler s({.max_sequences = R, .token_budget = 64, .chunk_tokens = 8, .max_seq_len = 64}, &rings, nullptr);
  auto now = Scheduler::Clock::now();
  std::vector<SamplingParams> ps;
  for (int r = 0; r < R; ++r) {
    GenerationRequest q;
    q.id = "r" + std::to_string(r);
    q.prompt = {2, 3};
    q.max_new_tokens = steps;
    q.ignore_eos = true;
    q.sampling = {.temperature = 0.5f + 0.2f * r, .top_k = r % 2 ? 50 : -1, .top_p = r % 3 ? 0.9f : 1.0f,
                  .seed = 100 + uint64_t(r)};
    ps.push_back(q.sampling);
    s.add(q, r, now);
  }
  std::vector<std::mt19937_64> rngs;
  for (int r = 0; r < R; ++r) rngs.emplace_back(*ps[r].seed);
  std::mt19937_64 g(5);
  std::vector<std::vector<int32_t>> want(R);
  for (int step = 0; step < steps; ++step) {
    auto c = s.schedule();
    ASSERT_EQ(int(c.size()), R);
    std::vector<float> logits;
    for (int r = 0; r < R; ++r) {
      ASSERT_TRUE(c[r].needs_logits);
      auto row = make_row(step + r, V, g);
      want[c[r].seq].push_back(sample(row.data(), V, ps[c[r].seq], rngs[c[r].seq]));
      logits.insert(logits.end(), row.begin(), row.end());
    }
    s.complete(c, logits.data(), V, now);
  }
  auto done = s.take_finished();
  ASSERT_EQ(int(done.size()), R);
  for (const auto& d : done) EXPECT_EQ(d.tokens, want[std::stoi(d.id.substr(1))]) << d.id;
}

// Not a test: per-row times at the 262k vocabulary (run with --gtest_also_run_disabled_tests).
TEST(Sampler, DISABLED_TimesPerRow) {
  const int V = 262144;
  std::mt19937_64 g(1);
  std::vector<float> l = make_row(1, V, g);
  const SamplingParams cases[] = {{}, {.temperature = 1.0f}, {.temperature = 0.8f, .top_p = 0.9f},
                                  {.temperature = 0.8f, .top_k = 40, .top_p = 0.95f}};
  for (const auto& p : cases) {
    std::mt19937_64 rng(5);
    const auto t0 = std::chrono::steady_clock::now();
    int sink = 0;
    for (int i = 0; i < 50; ++i) sink += sample(l.data(), V, p, rng);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / 50;
    std::printf("T %.1f top_k %d top_p %.2f: %.3f ms per row (%d)\n", p.temperature, p.top_k, p.top_p, ms, sink);
  }
}

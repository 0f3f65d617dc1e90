// The stream-K schedule of the persistent prefill attention kernel (runtime/cuda/attention_sk.h,
// used on the device by attention_sm90_ws.cu variant 11), checked on the CPU against its
// contract for random and hand-made item lists: every key tile of every item is run exactly
// once; each item's first piece is the only one that writes its output (mode 0 or 2); a mode-2
// merge range names exactly the blocks holding the item's other pieces; a block's mode-1 piece
// is its first part and its mode-2 piece its last (no wait cycle); and the units are shared
// evenly (no block runs more than ⌈W/P⌉ units).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <vector>

#include "runtime/cuda/attention_sk.h"

namespace {

using g4c::cuda::sk::Part;
using g4c::cuda::sk::Walk;

struct Sched {
  std::vector<std::vector<Part>> parts;  // per block
  std::vector<long> pre;                 // first unit of each item
  long W = 0;
};

// Every block's parts, the start found from the prefix of units (as the kernel's scan does).
Sched schedule(const std::vector<int>& n, int P, int F) {
  const int N = int(n.size());
  std::vector<long> pre(N + 1, 0);
  for (int x = 0; x < N; ++x) pre[x + 1] = pre[x] + (n[x] > 0 ? F + n[x] : 0);
  Sched s;
  s.W = pre[N];
  s.pre = pre;
  s.parts.resize(P);
  auto tiles = [&](int x) { return n[x]; };
  for (int c = 0; c < P; ++c) {
    const long lo = g4c::cuda::sk::lo_of(s.W, P, c);
    int x0 = N;
    for (int x = 0; x < N; ++x)
      if (pre[x] <= lo && lo < pre[x + 1]) { x0 = x; break; }
    Walk w(s.W, P, c, F, N, x0, x0 < N ? pre[x0] : s.W);
    Part p;
    while (w.next(p, tiles)) s.parts[c].push_back(p);
  }
  return s;
}

void check(const std::vector<int>& n, int P, int F) {
  SCOPED_TRACE(::testing::Message() << "items " << n.size() << " P " << P << " F " << F);
  const Sched s = schedule(n, P, F);
  const int N = int(n.size());
  std::vector<std::vector<int>> runs(N);  // per item, per tile: times run
  for (int x = 0; x < N; ++x) runs[x].assign(std::max(0, n[x]), 0);
  std::vector<int> heads(N, 0);
  const long cap = (s.W + P - 1) / P;
  for (int c = 0; c < P; ++c) {
    const auto& ps = s.parts[c];
    long units = 0;
    for (size_t i = 0; i < ps.size(); ++i) {
      const Part& p = ps[i];
      ASSERT_TRUE(p.x >= 0 && p.x < N);
      ASSERT_TRUE(0 <= p.t0 && p.t0 < p.t1 && p.t1 <= n[p.x]) << p.x << " " << p.t0 << " " << p.t1;
      if (i > 0) EXPECT_GT(p.x, ps[i - 1].x) << "parts in item order";
      for (int t = p.t0; t < p.t1; ++t) ++runs[p.x][t];
      units += p.t1 - p.t0;
      EXPECT_EQ(p.mode, p.t0 > 0 ? 1 : (p.t1 < n[p.x] ? 2 : 0));
      if (p.mode == 1) EXPECT_EQ(i, 0u) << "a later piece is the block's first part";
      if (p.mode == 2) EXPECT_EQ(i + 1, ps.size()) << "a merging piece is the block's last part";
      if (p.t0 == 0) ++heads[p.x];
      if (p.mode == 2) {
        // The blocks (c, m_hi) with non-empty ranges are exactly those holding x's other pieces.
        std::set<int> named, holding;
        // The kernel finds this item as the one holding the block's last unit (its setup).
        const long hi_last = g4c::cuda::sk::lo_of(s.W, P, c + 1) - 1;
        EXPECT_TRUE(s.pre[p.x] <= hi_last && hi_last < p.end) << "block " << c;
        EXPECT_EQ(p.end, s.pre[p.x + 1]);
        const int m_hi = g4c::cuda::sk::merge_hi(s.W, P, c, p.end);
        for (int b = c + 1; b < m_hi; ++b)
          if (!g4c::cuda::sk::empty(s.W, P, b)) named.insert(b);
        for (int b = 0; b < P; ++b)
          for (const Part& q : s.parts[b])
            if (q.x == p.x && b != c) holding.insert(b);
        EXPECT_EQ(named, holding);
        for (int b : holding) EXPECT_EQ(s.parts[b].front().x, p.x);
      }
    }
    EXPECT_LE(units, cap) << "block " << c;  // tiles alone never exceed the even share
  }
  for (int x = 0; x < N; ++x) {
    for (int t = 0; t < n[x]; ++t) ASSERT_EQ(runs[x][t], 1) << "item " << x << " tile " << t;
    EXPECT_EQ(heads[x], n[x] > 0 ? 1 : 0) << "item " << x;
  }
}

// The 12B sliding layer at 2k tokens (hd 256, window 1024, 8 kv heads, G = 2: 64-token query
// blocks of 64-key tiles): items in the kernel's order (kv head major, query block minor).
std::vector<int> sliding_2k() {
  std::vector<int> n;
  for (int h = 0; h < 8; ++h)
    for (int qb = 0; qb < 32; ++qb) n.push_back(std::min(qb + 1, 17));
  return n;
}

TEST(AttnSchedule, SlidingLayer2kOnWholeAndSlicedGpu) {
  for (int P : {132, 16, 7, 1})
    for (int F : {0, 1, 2, 3}) check(sliding_2k(), P, F);
}

TEST(AttnSchedule, MoreBlocksThanUnits) {
  check({1, 0, 2}, 40, 0);  // W = 3 < P: most ranges empty, items spread one tile per block
  check({5}, 132, 1);
  check({0, 0, 0}, 4, 2);   // no queries anywhere: no parts
}

TEST(AttnSchedule, RandomItemLists) {
  std::mt19937 rng(20261204);
  for (int it = 0; it < 400; ++it) {
    const int N = 1 + int(rng() % 300);
    std::vector<int> n(N);
    for (int& v : n) v = (rng() % 8 == 0) ? 0 : 1 + int(rng() % 40);
    const int P = 1 + int(rng() % 200), F = int(rng() % 5);
    check(n, P, F);
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(AttnSchedule, EvenShareAt2k) {
  // At 2k the per-block load is the mean ± a unit, against 17 + 16 key tiles on the busiest SM
  // with one block per query block (the kernel's variant 5).
  const auto n = sliding_2k();
  const Sched s = schedule(n, 132, 1);
  long most = 0;
  for (const auto& ps : s.parts) {
    long u = 0;
    for (const Part& p : ps) u += p.t1 - p.t0 + (p.t0 == 0 ? 1 : 0);
    most = std::max(most, u);
  }
  EXPECT_EQ(s.W, 3264 + 256);  // Σ n_x = 3264 tiles, F = 1 per item
  EXPECT_LE(most, (s.W + 131) / 132 + 1);
}

}  // namespace

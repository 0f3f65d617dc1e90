// RTN group quantization against hand-computed codes, scales and zero points
// (the formulas of DESIGN.md §3 / models/gemma4-tiny/train.py).
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "models/dtype.h"
#include "passes/quant/linalg.h"
#include "passes/quant/quantizer.h"

using namespace g4c::quant;

TEST(QuantRtn, SymmetricHandComputedWithHalfEvenRoundingAndPadding) {
  // amax 7 → s = 1 exactly. w/s = 2.5 → 2, −3.5 → −4, 0.5 → 0, 1.5 → 2 (ties to even).
  const std::vector<float> w = {7.f, 2.5f, -3.5f, 0.5f, -7.f, 1.5f};
  QuantizedLinear q = quantize_rtn(w.data(), 1, 6, {8, true});
  EXPECT_EQ(q.padded_in, 8);
  ASSERT_EQ(q.scales.size(), 1u);
  EXPECT_EQ(q.scales[0], 1.f);
  EXPECT_EQ(q.zeros[0], 8);
  const std::vector<uint8_t> want = {15, 10, 4, 8, 1, 10, 8, 8};  // padding holds the zero point
  EXPECT_EQ(q.codes, want);
  const std::vector<float> deq = q.dequantized();
  const std::vector<float> want_deq = {7.f, 2.f, -4.f, 0.f, -7.f, 2.f};
  EXPECT_EQ(deq, want_deq);
}

TEST(QuantRtn, AsymmetricHandComputedWithClamp) {
  // mn −1.5, mx 13.5 → s = 1, z = round(1.5) = 2; 13.5 → 14 + 2 = 16 → clamped to 15.
  const std::vector<float> w = {-1.5f, 0.f, 6.f, 13.5f};
  QuantizedLinear q = quantize_rtn(w.data(), 1, 4, {4, false});
  EXPECT_EQ(q.scales[0], 1.f);
  EXPECT_EQ(q.zeros[0], 2);
  EXPECT_EQ(q.codes, (std::vector<uint8_t>{0, 2, 8, 15}));
  EXPECT_EQ(q.dequantized(), (std::vector<float>{-2.f, 0.f, 6.f, 13.f}));
}

TEST(QuantRtn, DequantizedOverThreadsIsTheSingleThreadedOne) {
  // 3 M values: two row chunks of ≥ 1M values (1501 rows, the second one row short); every row
  // written once, by the element formula (the single-threaded loop is the reference).
  const int64_t out = 1501, in = 2048;
  std::mt19937 rng(5);
  std::normal_distribution<float> g(0.f, 1.f);
  std::vector<float> w(size_t(out * in));
  for (auto& v : w) v = g(rng);
  const QuantizedLinear q = quantize_rtn(w.data(), out, in, {128, false});
  const std::vector<float> one = q.dequantized();
  EXPECT_EQ(q.dequantized(3), one);
  EXPECT_EQ(q.dequantized(7), one);
  EXPECT_EQ(one[size_t(out * in - 1)], q.dequant(out - 1, in - 1));
}

TEST(QuantRtn, AsymmetricRangeIncludesZeroAndScaleIsFp16) {
  // All positive: mn clamps to 0 → z = 0; s = 3/15 = 0.2 → fp16 0.199951171875.
  const std::vector<float> w = {1.f, 2.f, 3.f, 0.5f};
  QuantizedLinear q = quantize_rtn(w.data(), 1, 4, {4, false});
  EXPECT_EQ(q.scales[0], 0.199951171875f);
  EXPECT_EQ(q.zeros[0], 0);
  // 1/s = 5.0012 → 5, 10.002 → 10, 15.004 → 15, 2.5006 → 3
  EXPECT_EQ(q.codes, (std::vector<uint8_t>{5, 10, 15, 3}));
}

TEST(QuantRtn, GroupsAreIndependentPerRowAndGroup) {
  // Two rows × two groups of 2: each (row, group) gets its own scale.
  const std::vector<float> w = {0.7f, -0.35f, 14.f, 1.f, -0.07f, 0.f, 2.f, -1.f};
  QuantizedLinear q = quantize_rtn(w.data(), 2, 4, {2, true});
  ASSERT_EQ(q.groups(), 2);
  EXPECT_EQ(q.scales[0], g4c::f16_to_f32(g4c::f32_to_f16(0.7f / 7.f)));
  EXPECT_EQ(q.scales[1], 2.f);
  EXPECT_EQ(q.scales[2], g4c::f16_to_f32(g4c::f32_to_f16(0.07f / 7.f)));
  EXPECT_EQ(q.scales[3], g4c::f16_to_f32(g4c::f32_to_f16(2.f / 7.f)));
  EXPECT_EQ(q.codes[2], 15);  // 14 / 2 = 7
  EXPECT_EQ(q.codes[3], 8);   // 1 / 2 = 0.5 → 0 (even)
}

TEST(QuantRtn, ErrorBoundedByHalfAStep) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.f, 0.05f);
  const int64_t out = 16, in = 320;  // 320 = 2.5 groups of 128: padded_in 384
  std::vector<float> w(out * in);
  for (auto& v : w) v = nd(rng);
  for (bool sym : {true, false}) {
    QuantizedLinear q = quantize_rtn(w.data(), out, in, {128, sym});
    EXPECT_EQ(q.padded_in, 384);
    for (int64_t o = 0; o < out; ++o)
      for (int64_t i = 0; i < in; ++i) {
        GroupParams p = q.params(o, i / 128);
        // fp16 rounding of s (rel. 2^-11) can push max|w| up to ~half a step + 7·2^-11·s past the grid.
        EXPECT_LE(std::fabs(q.dequant(o, i) - w[o * in + i]), 0.5f * p.scale * (1.f + 16.f / 2048.f) + 1e-7f);
      }
    for (int64_t o = 0; o < out; ++o)
      for (int64_t i = in; i < q.padded_in; ++i) EXPECT_EQ(q.codes[o * q.padded_in + i], q.zeros[o * 3 + 2]);
  }
}

TEST(QuantLinalg, SgemmMatchesNaiveOnRaggedShapes) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> ud(-1.f, 1.f);
  for (auto [M, N, K] : {std::tuple<int, int, int>{7, 37, 300}, {33, 16, 5}, {4, 300, 513}, {64, 1000, 64}}) {
    std::vector<float> A(M * K), B(K * N), C(M * N, 0.5f);
    for (auto& v : A) v = ud(rng);
    for (auto& v : B) v = ud(rng);
    std::vector<double> ref(M * N, 0.5);
    for (int m = 0; m < M; ++m)
      for (int k = 0; k < K; ++k)
        for (int n = 0; n < N; ++n) ref[m * N + n] += double(A[m * K + k]) * B[k * N + n];
    sgemm_acc(M, N, K, A.data(), K, 1, B.data(), N, C.data(), N, 2);
    for (int i = 0; i < M * N; ++i) // fp32 sum of K products of magnitude ≤ 1: worst-case rounding ~K·2^-24·K, typically far less.
      EXPECT_NEAR(C[i], ref[i], 1e-5 * K) << M << "x" << N << "x" << K;
  }
}

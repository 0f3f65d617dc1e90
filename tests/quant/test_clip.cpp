// MSE-optimal clipping of group ranges (quant::ClipSearch) against a brute-force search written
// here from DESIGN.md §3's rule, and inside GPTQ (searched at each group's first column).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "models/dtype.h"
#include "passes/quant/gptq.h"
#include "passes/quant/quantizer.h"

using namespace g4c::quant;

namespace {

// The lab's rule for one candidate range, from the formulas (not the library's helpers).
struct Ref {
  float scale;
  int zero;
};
Ref ref_params(float amax, float mn, float mx, bool sym) {
  if (sym) {
    const float s = (amax < 1e-8f ? 1e-8f : amax) / 7.0f;
    return {g4c::f16_to_f32(g4c::f32_to_f16(s)), 8};
  }
  float s = (mx - mn) / 15.0f;
  s = s < 1e-8f ? 1e-8f : s;
  float z = std::nearbyint(-mn / s);
  z = z < 0.f ? 0.f : (z > 15.f ? 15.f : z);
  return {g4c::f16_to_f32(g4c::f32_to_f16(s)), int(z)};
}
// Σ (w − ŵ)² in float64 (ŵ the fp32 dequantized value of the fp32 code).
double ref_error(const std::vector<float>& w, Ref p) {
  double e = 0.0;
  for (const float v : w) {
    float c = p.scale == 0.f ? float(p.zero) : std::nearbyint(v / p.scale) + float(p.zero);
    c = c < 0.f ? 0.f : (c > 15.f ? 15.f : c);
    const float deq = (c - float(p.zero)) * p.scale;
    e += (double(v) - double(deq)) * (double(v) - double(deq));
  }
  return e;
}
// Every shrink 1 − i/grid, i < steps: the least error, the first on ties.
Ref brute_force(const std::vector<float>& w, bool sym, int grid, int steps, double* err) {
  float amax = 0.f, mn = 0.f, mx = 0.f;
  for (const float v : w) {
    amax = std::max(amax, std::fabs(v));
    mn = std::min(mn, v);
    mx = std::max(mx, v);
  }
  Ref best{};
  double be = INFINITY;
  for (int i = 0; i < steps; ++i) {
    const float p = 1.0f - float(i) / float(grid);
    const Ref r = ref_params(amax * p, mn * p, mx * p, sym);
    const double e = ref_error(w, r);
    if (e < be) {
      be = e;
      best = r;
    }
  }
  *err = be;
  return best;
}

std::vector<float> group_with_outliers(std::mt19937& rng, int n) {
  std::normal_distribution<float> nd(0.f, 0.02f);
  std::uniform_int_distribution<int> pick(0, n - 1);
  std::vector<float> w(static_cast<size_t>(n));
  for (float& v : w) v = nd(rng);
  w[size_t(pick(rng))] *= 8.f;  // a heavy tail: what clipping trades against
  if (rng() % 2) w[size_t(pick(rng))] = 0.1f + nd(rng);
  return w;
}

}  // namespace

TEST(QuantClip, MatchesBruteForceOverTheGrid) {
  std::mt19937 rng(7);
  int shrunk = 0;
  for (const bool sym : {true, false})
    for (int t = 0; t < 400; ++t) {
      const int n = t % 3 == 0 ? 64 : 128;
      const std::vector<float> w = group_with_outliers(rng, n);
      double want_err = 0.0;
      const Ref want = brute_force(w, sym, 100, 80, &want_err);
      const GroupParams got = group_params(w.data(), n, 1, sym, ClipSearch::mse());
      ASSERT_EQ(got.scale, want.scale) << "sym " << sym << " case " << t;
      ASSERT_EQ(got.zero, want.zero) << "sym " << sym << " case " << t;
      EXPECT_EQ(group_sq_error(w.data(), n, 1, got), want_err);
      // Never worse than the unclipped range (candidate 0), strictly better where it moved.
      const GroupParams plain = group_params(w.data(), n, 1, sym);
      const double plain_err = group_sq_error(w.data(), n, 1, plain);
      EXPECT_LE(want_err, plain_err);
      if (got.scale != plain.scale || got.zero != plain.zero) {
        EXPECT_LT(want_err, plain_err);
        ++shrunk;
      }
    }
  EXPECT_GT(shrunk, 400);  // the heavy-tailed groups do get clipped (the search is not a no-op)
}

TEST(QuantClip, HandSizedSymmetricGroups) {
  // {7, 0.4, 0.45, 0}: unclipped s = 1 (error 0.4² + 0.45² = 0.3625); rounding 0.45 up needs
  // s ≤ 0.9, which costs the 7 at least (7 − 6.3)² = 0.49: the full range stays.
  const std::vector<float> a = {7.f, 0.4f, 0.45f, 0.f};
  EXPECT_EQ(group_params(a.data(), 4, 1, true, ClipSearch::mse()).scale, 1.f);
  // {1, 0.8 × 7}: unclipped s = fp16(1/7) puts the 0.8s at 0.857 (error 7 · 0.057² ≈ 0.023);
  // s ≈ 0.133 (p ≈ 0.93) holds 0.8 = 6s and clips the 1 to 7s ≈ 0.93 (≈ 0.005 in all).
  const std::vector<float> b = {1.f, 0.8f, 0.8f, 0.8f, 0.8f, 0.8f, 0.8f, 0.8f};
  const GroupParams pb = group_params(b.data(), 8, 1, true, ClipSearch::mse());
  double want_err = 0.0;
  const Ref want = brute_force(b, true, 100, 80, &want_err);
  EXPECT_EQ(pb.scale, want.scale);
  EXPECT_GT(pb.scale, 0.125f);
  EXPECT_LT(pb.scale, 0.14f);
  EXPECT_LT(want_err, 0.01);
  EXPECT_GT(ref_error(b, ref_params(1.f, 0.f, 1.f, true)), 0.02);
}

TEST(QuantClip, RtnUsesTheClippedRangePerGroup) {
  std::mt19937 rng(3);
  const int64_t out = 5, in = 256;
  std::vector<float> W;
  for (int64_t o = 0; o < out * 2; ++o) {
    const std::vector<float> g = group_with_outliers(rng, 128);
    W.insert(W.end(), g.begin(), g.end());
  }
  for (const bool sym : {true, false}) {
    const QuantizedLinear q = quantize_rtn(W.data(), out, in, {128, sym}, ClipSearch::mse());
    const QuantizedLinear plain = quantize_rtn(W.data(), out, in, {128, sym});
    double e = 0.0, ep = 0.0;
    for (int64_t o = 0; o < out; ++o)
      for (int64_t g = 0; g < 2; ++g) {
        const float* w = W.data() + o * in + g * 128;
        const GroupParams want = group_params(w, 128, 1, sym, ClipSearch::mse());
        EXPECT_EQ(q.scales[size_t(o * 2 + g)], want.scale);
        EXPECT_EQ(q.zeros[size_t(o * 2 + g)], want.zero);
        for (int k = 0; k < 128; ++k) {
          const float v = w[k];
          e += std::pow(double(v) - double(q.dequant(o, g * 128 + k)), 2);
          ep += std::pow(double(v) - double(plain.dequant(o, g * 128 + k)), 2);
        }
      }
    EXPECT_LT(e, ep) << "sym " << sym;
  }
}

TEST(QuantClip, GptqWithADiagonalHessianIsClippedRtn) {
  // H = c·I couples no columns: GPTQ's error feedback is zero, so whether the clip is chosen
  // before the solve (act-order) or at each group's first column, its codes, scales and zeros
  // are exactly clipped RTN's.
  std::mt19937 rng(11);
  const int64_t out = 6, in = 256;
  std::vector<float> W;
  for (int64_t o = 0; o < out * 2; ++o) {
    const std::vector<float> g = group_with_outliers(rng, 128);
    W.insert(W.end(), g.begin(), g.end());
  }
  std::vector<double> H(size_t(in * in), 0.0);
  for (int64_t j = 0; j < in; ++j) H[size_t(j * in + j)] = 3.0 + double(j % 7);  // distinct for act-order
  for (const bool sym : {true, false})
    for (const bool act : {false, true}) {
      GptqOptions opt;
      opt.spec = {128, sym};
      opt.act_order = act;
      opt.clip = ClipSearch::mse();
      const GptqResult r = gptq_quantize(W.data(), out, in, H, opt);
      const QuantizedLinear want = quantize_rtn(W.data(), out, in, {128, sym}, ClipSearch::mse());
      EXPECT_EQ(r.q.scales, want.scales) << "sym " << sym << " act " << act;
      EXPECT_EQ(r.q.zeros, want.zeros) << "sym " << sym << " act " << act;
      EXPECT_EQ(r.q.codes, want.codes) << "sym " << sym << " act " << act;
    }
}

TEST(QuantClip, GptqClipsEachGroupWhenTheSolveReachesIt) {
  // A coupled Hessian: the solve moves the weights, and each group's (s, z) is the brute-force
  // clip of the group's error-updated weights at its first column — checked against an
  // unblocked column-by-column float64 GPTQ written here on the same factor of H⁻¹. The first
  // group has seen no updates (its clip is clipped RTN's); later groups' are not.
  std::mt19937 rng(5);
  const int64_t out = 4, in = 384, rows = 600;
  std::vector<float> W;
  for (int64_t o = 0; o < out * 3; ++o) {
    const std::vector<float> g = group_with_outliers(rng, 128);
    W.insert(W.end(), g.begin(), g.end());
  }
  std::normal_distribution<float> nd;
  std::vector<float> X(size_t(rows * in));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < in; ++j) X[size_t(r * in + j)] = nd(rng) + (j > 0 ? 0.6f * X[size_t(r * in + j - 1)] : 0.f);
  HessianAccumulator acc(in);
  acc.add(X.data(), rows, in);
  for (const bool sym : {true, false}) {
    GptqOptions opt;
    opt.spec = {128, sym};
    opt.clip = ClipSearch::mse();
    const PreparedHessian P = prepare_hessian(acc.hessian(), in, opt);
    const GptqResult r = gptq_quantize(W.data(), out, in, P, opt);
    // The reference: one column at a time, the clip searched at each group's first column.
    std::vector<double> Wd(W.begin(), W.end());
    std::vector<Ref> params(static_cast<size_t>(out * 3));
    std::vector<int> codes(static_cast<size_t>(out * in));
    for (int64_t i = 0; i < in; ++i)
      for (int64_t o = 0; o < out; ++o) {
        if (i % 128 == 0) {
          std::vector<float> g;
          for (int64_t k = i; k < i + 128; ++k) g.push_back(float(Wd[size_t(o * in + k)]));
          double e = 0.0;
          params[size_t(o * 3 + i / 128)] = brute_force(g, sym, 100, 80, &e);
        }
        const Ref p = params[size_t(o * 3 + i / 128)];
        const float w = float(Wd[size_t(o * in + i)]);
        float c = std::nearbyint(w / p.scale) + float(p.zero);
        c = c < 0.f ? 0.f : (c > 15.f ? 15.f : c);
        codes[size_t(o * in + i)] = int(c);
        const double err = (double(w) - double((c - float(p.zero)) * p.scale)) / P.hinv[size_t(i * in + i)];
        for (int64_t j = i + 1; j < in; ++j) Wd[size_t(o * in + j)] -= err * P.hinv[size_t(i * in + j)];
      }
    // Blocked + lazily updated vs unblocked: the same math in another summation order, so a
    // code or a clip choice can differ only at a rounding tie (none on these weights).
    for (int64_t o = 0; o < out; ++o)
      for (int64_t g = 0; g < 3; ++g) {
        EXPECT_EQ(r.q.scales[size_t(o * 3 + g)], params[size_t(o * 3 + g)].scale) << "sym " << sym << " row " << o << " group " << g;
        EXPECT_EQ(int(r.q.zeros[size_t(o * 3 + g)]), params[size_t(o * 3 + g)].zero) << "sym " << sym << " row " << o << " group " << g;
      }
    int64_t differ = 0;
    for (int64_t o = 0; o < out; ++o)
      for (int64_t i = 0; i < in; ++i) differ += int(r.q.codes[size_t(o * r.q.padded_in + i)]) != codes[size_t(o * in + i)];
    EXPECT_EQ(differ, 0) << "sym " << sym;
    // The first group is clipped RTN's; the error feedback changed some later group's range.
    const QuantizedLinear rtn = quantize_rtn(W.data(), out, in, {128, sym}, ClipSearch::mse());
    bool later_differs = false;
    for (int64_t o = 0; o < out; ++o) {
      EXPECT_EQ(r.q.scales[size_t(o * 3)], rtn.scales[size_t(o * 3)]) << "sym " << sym << " row " << o;
      for (int64_t g = 1; g < 3; ++g) later_differs |= r.q.scales[size_t(o * 3 + g)] != rtn.scales[size_t(o * 3 + g)];
    }
    EXPECT_TRUE(later_differs) << "sym " << sym;
  }
}

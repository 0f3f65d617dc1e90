// AWQ scales (passes/quant/awq.h): the search against a brute force written here, the folds on
// hand-sized cases (the folded float output equals the unfolded one), and the layer driver on a
// hand-sized executor.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <vector>

#include "models/dtype.h"
#include "models/error.h"
#include "passes/quant/awq.h"

using namespace g4c::quant;

namespace {

float bf16_round(float v) { return g4c::bf16_to_f32(g4c::f32_to_bf16(v)); }

// y = x · rms(x)⁻¹ · w per row (the CPU backend's rms_norm: float64 sum of squares).
std::vector<float> rms(const std::vector<float>& x, int64_t rows, const std::vector<float>& w) {
  const int64_t n = int64_t(w.size());
  std::vector<float> y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t c = 0; c < n; ++c) ss += double(x[r * n + c]) * x[r * n + c];
    const float inv = float(1.0 / std::sqrt(ss / double(n) + 1e-6));
    for (int64_t c = 0; c < n; ++c) y[r * n + c] = x[r * n + c] * inv * w[c];
  }
  return y;
}
// x [rows, in] · W [out, in]ᵀ, fp32 sums in order.
std::vector<float> matmul(const std::vector<float>& x, int64_t rows, const std::vector<float>& W, int64_t out) {
  const int64_t in = int64_t(x.size()) / rows;
  std::vector<float> y(size_t(rows * out), 0.f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      float s = 0.f;
      for (int64_t c = 0; c < in; ++c) s += x[r * in + c] * W[o * in + c];
      y[r * out + o] = s;
    }
  return y;
}
float gelu(float v) { return 0.5f * v * (1.f + std::tanh(0.7978845608f * (v + 0.044715f * v * v * v))); }
double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, double(std::fabs(x)));
  return m;
}
double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, double(std::fabs(a[i] - b[i])));
  return m;
}

// ---- folds, by hand ----

// input_layernorm → q/k: 1/s into the BF16 norm weight, t = w / w' into the columns.
TEST(AwqFold, NormFoldKeepsTheFloatOutput) {
  const int64_t rows = 3, n = 4;
  const std::vector<float> x = {1.f, -2.f, 0.5f, 3.f, 0.25f, 4.f, -1.f, 2.f, -3.f, 1.5f, 2.5f, -0.75f};
  std::vector<float> w = {0.75f, 1.5f, -0.5f, 0.f};  // BF16 values; a zero channel and a negative one
  const std::vector<float> q = {0.1f, -0.2f, 0.3f, 0.4f, 0.5f, 0.6f, -0.7f, 0.8f};  // [2, 4]
  const std::vector<float> k = {1.f, 2.f, 3.f, 4.f};                                   // [1, 4]
  const std::vector<float> yq = matmul(rms(x, rows, w), rows, q, 2), yk = matmul(rms(x, rows, w), rows, k, 1);
  const std::vector<float> s = {3.f, 0.3f, 1.7f, 2.f};
  std::vector<float> w2 = w, q2 = q, k2 = k;
  const std::vector<float> t = fold_into_norm(w2, s, bf16_round);
  for (size_t c = 0; c < w.size(); ++c) EXPECT_EQ(w2[c], bf16_round(w2[c])) << c;  // stored exactly in BF16
  EXPECT_EQ(w2[3], 0.f);
  EXPECT_EQ(t[3], 1.f);                    // a zero channel keeps its column
  EXPECT_NEAR(t[0], 3.f, 3.f / 256);       // t = s up to BF16's 2⁻⁹ relative rounding of w / s
  EXPECT_NEAR(t[1], 0.3f, 0.3f / 256);
  scale_columns(q2, 2, n, t);
  scale_columns(k2, 1, n, t);
  // Each output is a sum of 4 products, each changed by at most 3 fp32 roundings (w/w', W·t,
  // x·inv·w'): a few 2⁻²⁴ relative per term, well inside 1e-6 of the largest output.
  EXPECT_LE(max_diff(yq, matmul(rms(x, rows, w2), rows, q2, 2)), 1e-6 * max_abs(yq));
  EXPECT_LE(max_diff(yk, matmul(rms(x, rows, w2), rows, k2, 1)), 1e-6 * max_abs(yk));
}

// up → down: 1/s into up's rows, s into down's columns; gelu(gate) is untouched.
TEST(AwqFold, LinearFoldKeepsTheFloatOutput) {
  const int64_t rows = 2, in = 3, ffn = 4, out = 2;
  const std::vector<float> m = {0.5f, -1.f, 2.f, 1.5f, 0.25f, -0.5f};
  const std::vector<float> G = {0.1f, 0.2f, 0.3f, -0.4f, 0.5f, 0.6f, 0.7f, -0.8f, 0.9f, 1.f, 1.1f, -1.2f};
  std::vector<float> U = {1.f, -1.f, 0.5f, 0.25f, 2.f, -0.5f, 1.5f, 0.75f, -2.f, 0.1f, 0.2f, 0.3f};
  std::vector<float> D = {0.3f, -0.1f, 0.2f, 0.4f, -0.6f, 0.5f, 0.7f, -0.2f};
  auto mlp = [&](const std::vector<float>& Uw, const std::vector<float>& Dw) {
    std::vector<float> g = matmul(m, rows, G, ffn), u = matmul(m, rows, Uw, ffn);
    for (size_t i = 0; i < g.size(); ++i) g[i] = gelu(g[i]) * u[i];
    return matmul(g, rows, Dw, out);
  };
  const std::vector<float> before = mlp(U, D);
  const std::vector<float> s = {2.f, 0.5f, 3.f, 0.8f};
  divide_rows(U, ffn, in, s);
  scale_columns(D, out, ffn, s);
  // Per term: u/s and (g·u/s)·(D·s) add 3 fp32 roundings; 4 terms per output.
  EXPECT_LE(max_diff(before, mlp(U, D)), 1e-6 * max_abs(before));
}

TEST(AwqFold, BadShapesAreErrors) {
  std::vector<float> w(4, 1.f), W(8, 1.f);
  const std::vector<float> s3(3, 1.f), s0 = {1.f, 0.f, 1.f, 1.f};
  EXPECT_THROW(fold_into_norm(w, s3, {}), g4c::Error);
  EXPECT_THROW(fold_into_norm(w, s0, {}), g4c::Error);  // a zero scale has no inverse
  EXPECT_THROW(scale_columns(W, 2, 4, s3), g4c::Error);
  EXPECT_THROW(divide_rows(W, 2, 4, s3), g4c::Error);
}

// ---- the search ----

// Activations with a few salient channels (AWQ's premise) and random weights.
struct Toy {
  int64_t rows = 96, in = 32, out = 12;
  std::vector<float> X, W;
  Toy() {
    std::mt19937 rng(7);
    std::normal_distribution<float> nd;
    X.resize(size_t(rows * in));
    W.resize(size_t(out * in));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < in; ++c) X[size_t(r * in + c)] = nd(rng) * (c % 7 == 3 ? 12.f : 1.f);
    for (float& v : W) v = nd(rng) * 0.05f;
  }
};

// ‖X·(Q(W·diag(s))·diag(1/s) − W)ᵀ‖² over the rows, in float64: no Gram.
double brute_error(const Toy& t, const std::vector<float>& s, const QuantSpec& spec) {
  std::vector<float> ws(t.W.size());
  for (int64_t o = 0; o < t.out; ++o)
    for (int64_t c = 0; c < t.in; ++c) ws[size_t(o * t.in + c)] = t.W[size_t(o * t.in + c)] * s[size_t(c)];
  const std::vector<float> q = quantize_rtn(ws.data(), t.out, t.in, spec).dequantized();
  double e = 0;
  for (int64_t r = 0; r < t.rows; ++r)
    for (int64_t o = 0; o < t.out; ++o) {
      double y = 0;
      for (int64_t c = 0; c < t.in; ++c)
        y += double(t.X[size_t(r * t.in + c)]) *
             (double(q[size_t(o * t.in + c)] / s[size_t(c)]) - double(t.W[size_t(o * t.in + c)]));
      e += y * y;
    }
  return e;
}

TEST(AwqSearch, PicksTheBruteForceMinimum) {
  const Toy t;
  ActivationStats st(t.in);
  st.add(t.X.data(), 40, t.in);  // in two chunks, as the executor reports them
  st.add(t.X.data() + 40 * t.in, t.rows - 40, t.in);
  for (const bool sym : {true, false}) {
    AwqOptions opt;
    opt.spec = {8, sym};
    opt.grid = 10;
    opt.threads = 3;
    const float* w = t.W.data();
    const AwqChoice c = awq_search({&w, 1}, std::vector<int64_t>{t.out}, t.in, st, opt);
    // Brute force: every α of the grid, scales from the formula (m^α / √(max m^α · min m^α)).
    std::vector<double> m(size_t(t.in), 0.0);
    for (int64_t r = 0; r < t.rows; ++r)
      for (int64_t c = 0; c < t.in; ++c) m[size_t(c)] += std::fabs(t.X[size_t(r * t.in + c)]) / double(t.rows);
    double best = HUGE_VAL, best_alpha = -1, unscaled = 0;
    for (int i = 0; i <= opt.grid; ++i) {
      const double alpha = double(i) / opt.grid;
      std::vector<float> s(size_t(t.in));
      double mx = 0, mn = HUGE_VAL;
      for (double v : m) mx = std::max(mx, std::pow(v, alpha)), mn = std::min(mn, std::pow(v, alpha));
      for (int64_t c = 0; c < t.in; ++c) s[size_t(c)] = float(std::pow(m[size_t(c)], alpha) / std::sqrt(mx * mn));
      const double e = brute_error(t, s, opt.spec);
      if (i == 0) unscaled = e;
      if (e < best) best = e, best_alpha = alpha;
    }
    EXPECT_EQ(c.alpha, best_alpha) << "sym " << sym;
    // The search's E is tr(D·2XᵀX·Dᵀ) (the accumulator's 2·XᵀX): twice the brute force's, from an fp32 Gram and GEMM;
    // relative 1e-4 covers fp32 sums over 96 rows and 32 channels.
    EXPECT_NEAR(c.error, 2 * best, 2e-4 * best) << "sym " << sym;
    EXPECT_NEAR(c.error_unscaled, 2 * unscaled, 2e-4 * unscaled);
    EXPECT_LT(best, unscaled);  // the salient channels make some α > 0 better than none
    EXPECT_GT(c.alpha, 0.0);
  }
}

TEST(AwqSearch, AlphaZeroIsNoScaling) {
  const std::vector<double> m = {0.0, 1.0, 5.0, 1e-6};
  for (float s : awq_scales(m, 0.0)) EXPECT_EQ(s, 1.f);
  const std::vector<float> s = awq_scales(m, 1.0);  // m clamped to 1e-4: max·min = 5e-4 → normalised
  EXPECT_NEAR(double(s[2]) * double(s[0]), 1.0, 1e-6);
  EXPECT_FLOAT_EQ(s[0], s[3]);
}

TEST(AwqSearch, BadInputIsAnError) {
  const Toy t;
  ActivationStats st(t.in), empty(t.in);
  st.add(t.X.data(), t.rows, t.in);
  AwqOptions opt;
  opt.spec = {8, true};
  const float* w = t.W.data();
  EXPECT_THROW(awq_search({&w, 1}, std::vector<int64_t>{t.out}, t.in, empty, opt), g4c::Error);  // no rows
  EXPECT_THROW(awq_search({&w, 1}, std::vector<int64_t>{t.out}, t.in + 1, st, opt), g4c::Error);
  opt.grid = 0;
  EXPECT_THROW(awq_search({&w, 1}, std::vector<int64_t>{t.out}, t.in, st, opt), g4c::Error);
}

// ---- the driver on a hand-sized layer ----

// One "layer": a = rms(h, ln) → q, k; m = rms(h, pre) → gate, up; down(gelu(gate) ⊙ up). The
// outputs are (q, k, down); h is the same for every layer (no residual: only the folds matter).
class HandExecutor : public CalibrationExecutor {
 public:
  static constexpr int64_t kRows = 64, kH = 8, kF = 16;
  std::map<std::string, std::vector<float>> t;  // tensors of layer 0
  std::vector<float> h;
  HandExecutor() {
    std::mt19937 rng(3);
    std::normal_distribution<float> nd;
    h.resize(kRows * kH);
    for (int64_t r = 0; r < kRows; ++r)
      for (int64_t c = 0; c < kH; ++c) h[size_t(r * kH + c)] = nd(rng) * (c == 5 ? 10.f : 1.f);
    auto fill = [&](const std::string& n, int64_t size, float scale) {
      auto& v = t[n];
      v.resize(size_t(size));
      for (float& x : v) x = bf16_round(nd(rng) * scale + (n.find("layernorm") != std::string::npos ? 1.f : 0.f));
    };
    fill("input_layernorm", kH, 0.3f);
    fill("pre_feedforward_layernorm", kH, 0.3f);
    fill("self_attn.q_proj", 12 * kH, 0.2f);
    fill("self_attn.k_proj", 4 * kH, 0.2f);
    fill("mlp.gate_proj", kF * kH, 0.2f);
    fill("mlp.up_proj", kF * kH, 0.2f);
    fill("mlp.down_proj", kH * kF, 0.2f);
  }
  struct Outputs {
    std::vector<float> a, q, k, gu, d;
  };
  Outputs forward() const {
    Outputs o;
    o.a = rms(h, kRows, t.at("input_layernorm"));
    o.q = matmul(o.a, kRows, t.at("self_attn.q_proj"), 12);
    o.k = matmul(o.a, kRows, t.at("self_attn.k_proj"), 4);
    const std::vector<float> m = rms(h, kRows, t.at("pre_feedforward_layernorm"));
    std::vector<float> g = matmul(m, kRows, t.at("mlp.gate_proj"), kF), u = matmul(m, kRows, t.at("mlp.up_proj"), kF);
    o.gu = g;
    for (size_t i = 0; i < g.size(); ++i) o.gu[i] = gelu(g[i]) * u[i];
    o.d = matmul(o.gu, kRows, t.at("mlp.down_proj"), kH);
    o.a = m;  // (a is only needed as the gate/up input below)
    return o;
  }
  int num_layers() const override { return 1; }
  std::vector<LinearInfo> linears(int) const override {
    return {{"self_attn.q_proj", 12, kH}, {"self_attn.k_proj", 4, kH}, {"mlp.gate_proj", kF, kH},
            {"mlp.up_proj", kF, kH},      {"mlp.down_proj", kH, kF}};
  }
  void run_layer(int, const Observer& observe, bool) override {
    if (!observe) return;
    const Outputs o = forward();
    const std::vector<float> a = rms(h, kRows, t.at("input_layernorm"));
    observe({"self_attn.q_proj", "self_attn.k_proj"}, a.data(), kRows, kH);
    observe({"mlp.gate_proj", "mlp.up_proj"}, o.a.data(), kRows, kH);
    observe({"mlp.down_proj"}, o.gu.data(), kRows, kF);
  }
  std::vector<std::vector<std::string>> input_groups(int) const override { return {}; }
  void observe_group(int, int, const Observer&) override {}
  std::vector<float> weight(int, const std::string& n) const override { return t.at(n); }
  void set_weight(int, const std::string& n, std::span<const float> w) override {
    ASSERT_EQ(w.size(), t.at(n).size());
    t[n].assign(w.begin(), w.end());
  }
};

TEST(AwqDriver, FoldedHandLayerKeepsItsFloatOutput) {
  HandExecutor ex;
  const HandExecutor::Outputs before = ex.forward();
  const std::vector<float> ln = ex.t.at("input_layernorm");
  AwqDriverOptions opt;
  opt.awq.spec = {8, false};
  opt.awq.grid = 20;
  std::vector<std::string> rewritten;
  opt.on_tensor = [&](int, const std::string& n, const std::vector<float>&) { rewritten.push_back(n); };
  const std::vector<AwqSite> sites = {
      {"input_layernorm", false, {"self_attn.q_proj", "self_attn.k_proj"}, bf16_round},
      {"pre_feedforward_layernorm", false, {"mlp.gate_proj", "mlp.up_proj"}, bf16_round},
      {"mlp.up_proj", true, {"mlp.down_proj"}, {}}};
  const std::vector<AwqSiteReport> reps = awq_layer(ex, 0, sites, opt);
  ASSERT_EQ(reps.size(), 3u);
  for (const AwqSiteReport& r : reps) EXPECT_LE(r.error, r.error_unscaled) << r.producer;
  EXPECT_GT(reps[0].alpha, 0.0);  // channel 5 is salient: some scaling wins
  EXPECT_NE(ex.t.at("input_layernorm"), ln);
  for (float v : ex.t.at("input_layernorm")) EXPECT_EQ(v, bf16_round(v));
  EXPECT_EQ(rewritten.size(), 8u);  // ln, q, k; pre, gate, up (columns); up (rows), down
  const HandExecutor::Outputs after = ex.forward();
  // Float outputs before quantization: q/k through one norm fold, down through a norm fold and
  // the up → down fold (sums of 8 and 16 products, a few fp32 roundings each): 1e-5 relative.
  EXPECT_LE(max_diff(before.q, after.q), 1e-5 * max_abs(before.q));
  EXPECT_LE(max_diff(before.k, after.k), 1e-5 * max_abs(before.k));
  EXPECT_LE(max_diff(before.d, after.d), 1e-5 * max_abs(before.d));
}

TEST(AwqDriver, SiteThatIsNotAnExecutorGroupIsAnError) {
  HandExecutor ex;
  AwqDriverOptions opt;
  opt.awq.spec = {8, true};
  const std::vector<AwqSite> sites = {{"input_layernorm", false, {"self_attn.q_proj"}, {}}};  // k reads it too
  EXPECT_THROW(awq_layer(ex, 0, sites, opt), g4c::Error);
}

}  // namespace

// CPU attention over an FP8 E4M3 KV cache (runtime/cpu/attention.h) against float64
// attention over the dequantized rows (code · scale, exact in float64), for ring and paged
// layouts, a prefill chunk, a chunk over cached keys and a decode row in one batch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "runtime/cpu/attention.h"
#include "runtime/fp8.h"

using namespace g4c::runtime;

namespace {

constexpr int Hq = 4, Hkv = 2, D = 72;  // GQA 2:1; D = one 64-wide register block + 8
constexpr double kU = 0x1p-24;           // fp32 unit roundoff

struct Layout {
  const char* name;
  int window;
  bool ring;
};

TEST(CpuAttentionFp8, MatchesFloat64OverDequantizedRows) {
  // seq 0: a 70-row prefill chunk at 0..69 (two query blocks); seq 1: one decode row at 100
  // over 100 cached keys (the ring wraps); seq 2: a 5-row chunk at 40..44 over 40 cached keys.
  const int first[3] = {0, 100, 40}, rows[3] = {70, 1, 5}, max_chunk = 70, block = 16, max_pos = 101;
  BatchDesc b;
  std::vector<int32_t> tok(70, 5);
  std::vector<std::vector<int32_t>> tables(3);
  std::mt19937 g(23);
  const int blocks_per_seq = (max_pos + block - 1) / block;
  std::vector<int32_t> perm(size_t(3 * blocks_per_seq));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), g);  // blocks of a sequence scattered over the pool
  for (int s = 0; s < 3; ++s) {
    tables[s].assign(perm.begin() + s * blocks_per_seq, perm.begin() + (s + 1) * blocks_per_seq);
    b.add_sequence(tok.data(), rows[s], first[s], s, &tables[s], false, false);
  }
  const int T = b.num_tokens();

  // Source rows with magnitudes spread over two decades so the scales differ per row.
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::uniform_real_distribution<float> lmag(std::log(0.1f), std::log(10.0f));
  const size_t row = size_t(Hkv) * D;
  auto source = [&](std::vector<float>& x) {
    x.resize(size_t(3) * max_pos * row);
    for (size_t r = 0; r < x.size() / D; ++r) {
      const float m = std::exp(lmag(g));
      for (int e = 0; e < D; ++e) x[r * D + e] = n(g) * m;
    }
  };
  std::vector<float> Ksrc, Vsrc, q(size_t(T) * Hq * D);
  source(Ksrc);
  source(Vsrc);
  for (auto& x : q) x = n(g);
  // Dequantized rows (float64) and the codes/scales every layout stores.
  std::vector<uint8_t> Kc(Ksrc.size()), Vc(Vsrc.size());
  std::vector<float> Ks(Ksrc.size() / D), Vs(Vsrc.size() / D);
  std::vector<double> Kd(Ksrc.size()), Vd(Vsrc.size());
  for (size_t r = 0; r < Ks.size(); ++r) {
    Ks[r] = quantize_row_e4m3(&Ksrc[r * D], D, &Kc[r * D]);
    Vs[r] = quantize_row_e4m3(&Vsrc[r * D], D, &Vc[r * D]);
    for (int e = 0; e < D; ++e) {
      Kd[r * D + e] = double(fp8_e4m3_decode(Kc[r * D + e])) * Ks[r];
      Vd[r * D + e] = double(fp8_e4m3_decode(Vc[r * D + e])) * Vs[r];
    }
  }
  auto src_at = [&](int seq, int pos) { return (size_t(seq) * max_pos + pos) * row; };

  ThreadPool pool(2);
  for (const Layout& L : {Layout{"ring", 16, true}, Layout{"paged", 0, false}, Layout{"paged", 16, false}}) {
    // The cache as the backend lays it out: a ring of W - 1 + chunk slots per sequence
    // (position p at p mod capacity, written in position order so later positions overwrite
    // earlier ones), or blocks of 16 tokens through each sequence's block table.
    const int cap = L.window - 1 + max_chunk;
    const size_t units = L.ring ? size_t(3) * cap : perm.size() * block;
    auto index = [&](int seq, int pos) {
      return L.ring ? (size_t(seq) * cap + pos % cap) * row
                    : (size_t(tables[seq][pos / block]) * block + pos % block) * row;
    };
    std::vector<uint8_t> kc(units * row), vc(units * row);
    std::vector<float> ks(units * Hkv), vs(units * Hkv);
    for (int s = 0; s < 3; ++s)
      for (int p = 0; p < first[s] + rows[s]; ++p) {
        const size_t at = index(s, p), from = src_at(s, p);
        std::copy_n(&Kc[from], row, &kc[at]);
        std::copy_n(&Vc[from], row, &vc[at]);
        std::copy_n(&Ks[from / D], Hkv, &ks[at / D]);
        std::copy_n(&Vs[from / D], Hkv, &vs[at / D]);
      }
    cpu::KvRows kv{nullptr, nullptr, index, kc.data(), vc.data(), ks.data(), vs.data()};
    const float scale = 0.125f;
    std::vector<float> o(size_t(T) * Hq * D);
    cpu::attention(pool, b, q.data(), o.data(), Hq, Hkv, D, L.window, scale, kv);

    double worst = 0, largest_bound = 0, off_unquantized = 0;
    for (int r = 0; r < T; ++r)
      for (int h = 0; h < Hq; ++h) {
        const int seq = b.seq_of_row[r], t = b.positions[r], kh = h / (Hq / Hkv);
        const int lo = L.window > 0 ? std::max(0, t - L.window + 1) : 0, nk = t - lo + 1;
        const float* qr = &q[(size_t(r) * Hq + h) * D];
        std::vector<double> s, s_src;
        double delta = 0, vmax = 0;
        for (int j = lo; j <= t; ++j) {
          const size_t at = src_at(seq, j) + size_t(kh) * D;
          double d = 0, d_src = 0, abs_sum = 0;
          for (int e = 0; e < D; ++e) {
            d += double(qr[e]) * Kd[at + e];
            d_src += double(qr[e]) * Ksrc[at + e];
            abs_sum += std::fabs(double(qr[e]) * Kd[at + e]);
            vmax = std::max(vmax, std::fabs(Vd[at + e]));
          }
          s.push_back(d * scale);
          s_src.push_back(d_src * scale);
          // fp32 score: the decode product (1 rounding), D products and D − 1 sums, the scale.
          delta = std::max(delta, (D + 2) * kU * abs_sum * scale);
        }
        auto softmax = [](std::vector<double>& x) {
          const double mx = *std::max_element(x.begin(), x.end());
          double sum = 0;
          for (double& v : x) sum += (v = std::exp(v - mx));
          for (double& v : x) v /= sum;
          return mx;
        };
        const double mx = softmax(s), range = mx - *std::min_element(s.begin(), s.end());
        softmax(s_src);
        // Each weight's relative error: its score's (δ), the rounding of ŝ − max as the exp's
        // argument (u · range), the vector exp (1e-6, tests/runtime/test_kernels.cpp); a
        // normalised weight sees that of its own and of the sum, hence 2×. The weighted sum
        // of nk decoded values adds (nk + 3) roundings of Σ w·|v| ≤ max |v|. Doubled to cover
        // second-order terms.
        const double bound = 2 * vmax * (2 * (delta + kU * range + 1e-6) + (nk + 3) * kU);
        largest_bound = std::max(largest_bound, bound);
        for (int e = 0; e < D; ++e) {
          double ref = 0, ref_src = 0;
          for (int j = lo; j <= t; ++j) {
            const size_t at = src_at(seq, j) + size_t(kh) * D + e;
            ref += s[j - lo] * Vd[at];
            ref_src += s_src[j - lo] * Vsrc[at];
          }
          const double got = o[(size_t(r) * Hq + h) * D + e];
          worst = std::max(worst, std::fabs(got - ref) / bound);
          off_unquantized = std::max(off_unquantized, std::fabs(got - ref_src));
        }
      }
    EXPECT_LE(worst, 1.0) << L.name << " window " << L.window << ": error / bound";
    // The bound separates reading the codes from reading the unquantized rows: FP8's own
    // error (up to 2^-4 of an element) is far above it.
    EXPECT_GT(off_unquantized, 10 * largest_bound) << L.name << " window " << L.window;
  }
}

}  // namespace

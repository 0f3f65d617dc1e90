// Small fused ops vs CPU references that round to bf16 at the same points (fused.cuh).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "runtime/cuda/fused.cuh"
#include "runtime/fp8.h"
#include "runtime/sampler.h"
#include "tests/cuda_kernels/gpu_util.h"

namespace g4c::gputest {
namespace {

// Runs launch(stream), a fused kernel whose inputs are the (host, device) pairs `in`: plainly
// (inputs copied first, default stream), or under PDL (KernelOptions::pdl, as the CUDA backend
// runs decode steps): the inputs hold NaN and reach the device only through a late producer that
// lets the kernel after it launch at once (slow_scatter: 200 µs of sleep, then 16-byte chunks),
// so a kernel that read them before its griddepcontrol.wait would give non-finite or wrong outputs.
using Inputs = std::vector<std::pair<const std::vector<bf16>*, bf16*>>;
template <class F>
void run_fused(bool pdl, const Inputs& in, F&& launch) {
  if (!pdl) {
    for (const auto& [h, d] : in)
      G4C_CUDA_OK(cudaMemcpy(d, h->data(), h->size() * sizeof(bf16), cudaMemcpyHostToDevice));
    G4C_CUDA_OK(launch(cudaStream_t(nullptr), cuda::KernelOptions{}));
    G4C_CUDA_OK(cudaDeviceSynchronize());
    return;
  }
  std::vector<bf16> src;
  std::vector<void*> dst;
  for (const auto& [h, d] : in) {
    poison(d, h->size() * sizeof(bf16));
    src.insert(src.end(), h->begin(), h->end());
    for (size_t i = 0; i < h->size(); i += 8) dst.push_back(d + i);
  }
  launch_after_late_scatter(src, dst, launch);
}

// Outputs rounded to bf16 once from an fp32 value the reference computes in float64: the
// error is the bf16 rounding (RMS ≈ 1.1e-3 relative) plus rare 1-ulp flips; 3e-3 bounds it.
constexpr double kOneRounding = 3e-3;
// A reference that rounds to bf16 at the kernel's own rounding points (qk rope): what remains
// are rare 1-ulp flips where fp32 (rsqrtf, sincosf) and float64 fall on different sides of a
// bf16 boundary (≈1e-4 of the elements). One rounding point missing (e.g. cos/sin left fp32)
// costs ≈1e-3 RMS, so 6e-4 catches it.
constexpr double kSameRounding = 6e-4;

TEST(GpuFused, EmbedGatherScaleExact) {
  G4C_REQUIRE_GPU();
  std::mt19937_64 rng(test_seed() ^ 1);
  const int vocab = 1000, h = 264, t = 7;
  std::vector<bf16> table = rand_bf16(rng, size_t(vocab) * h, 0.05f);
  std::vector<int> ids = {3, 999, 0, 512, -1, 1000, 3};  // out of range → zero rows
  DevBuf<bf16> dt(table), out(size_t(t) * h);
  DevBuf<int> di(ids);
  poison(out.p, out.bytes());
  G4C_CUDA_OK(cuda::embed_gather_scale(di.p, t, dt.p, vocab, h, 62.0f, out.p, nullptr));
  G4C_CUDA_OK(cudaDeviceSynchronize());
  std::vector<bf16> got = out.get();
  size_t mism = 0;
  for (int i = 0; i < t; ++i)
    for (int c = 0; c < h; ++c) {
      const bool ok = ids[i] >= 0 && ids[i] < vocab;
      // bf16·62 is exact in fp32, so one rounding: results must match exactly.
      const float expect = ok ? rbf(bf(table[size_t(ids[i]) * h + c]) * 62.0f) : 0.f;
      if (!(bf(got[size_t(i) * h + c]) == expect)) ++mism;
    }
  EXPECT_EQ(mism, 0u);
}

TEST(GpuFused, RmsNormRowsAndHeads) {
  G4C_REQUIRE_GPU();
  std::mt19937_64 rng(test_seed() ^ 2);
  for (const bool pdl : {false, true}) {
    SCOPED_TRACE(pdl ? "pdl, late input" : "plain");
    // Per-row with a row selection (final norm of the logit rows).
    {
      const int n = 10, h = 3840;
      std::vector<bf16> x = rand_bf16(rng, size_t(n) * h, 3.f), w = rand_bf16(rng, h, 1.f);
      std::vector<int> rows = {7, 2, 9};
      DevBuf<bf16> dx(x), dw(w), out(rows.size() * h);
      DevBuf<int> dr(rows);
      poison(out.p, out.bytes());
      run_fused(pdl, {{&x, dx.p}},
                [&](cudaStream_t s, const cuda::KernelOptions& ko) { return cuda::rmsnorm(dx.p, h, dr.p, 3, h, h, dw.p, 1e-6f, out.p, h, s); });
      std::vector<double> ref(rows.size() * h);
      for (size_t i = 0; i < rows.size(); ++i) {
        double ss = 0;
        for (int c = 0; c < h; ++c) ss += std::pow(bf(x[size_t(rows[i]) * h + c]), 2);
        const double r = 1.0 / std::sqrt(ss / h + 1e-6);
        for (int c = 0; c < h; ++c) ref[i * h + c] = bf(x[size_t(rows[i]) * h + c]) * r * bf(w[c]);
      }
      size_t bad = 0;
      EXPECT_LT(rel_err(ref, to_float(out.get()), &bad), kOneRounding);
      EXPECT_EQ(bad, 0u);
    }
    // Per-head, no weight (v_norm shape), in place.
    {
      const int n = 5, d = 64, cols = 4 * d;
      std::vector<bf16> x = rand_bf16(rng, size_t(n) * cols, 0.7f);
      DevBuf<bf16> dx(x);
      run_fused(pdl, {{&x, dx.p}}, [&](cudaStream_t s, const cuda::KernelOptions& ko) {
        return cuda::rmsnorm(dx.p, cols, nullptr, n, cols, d, nullptr, 1e-6f, dx.p, cols, s, ko);
      });
      std::vector<double> ref(x.size());
      for (int i = 0; i < n * 4; ++i) {
        double ss = 0;
        for (int e = 0; e < d; ++e) ss += std::pow(bf(x[size_t(i) * d + e]), 2);
        const double r = 1.0 / std::sqrt(ss / d + 1e-6);
        for (int e = 0; e < d; ++e) ref[size_t(i) * d + e] = bf(x[size_t(i) * d + e]) * r;
      }
      size_t bad = 0;
      EXPECT_LT(rel_err(ref, to_float(dx.get()), &bad), kOneRounding);
      EXPECT_EQ(bad, 0u);
    }
  }
}

TEST(GpuFused, PostNormResidual) {
  G4C_REQUIRE_GPU();
  std::mt19937_64 rng(test_seed() ^ 3);
  const int n = 6, h = 3840;
  for (int variant = 0; variant < 4; ++variant) {  // 0: +w_next, no scalar; 1: scalar, no w_next; 2, 3: PDL
    SCOPED_TRACE(variant);
    const bool pdl = variant >= 2;
    std::vector<bf16> x = rand_bf16(rng, size_t(n) * h, 2.f), hh = rand_bf16(rng, size_t(n) * h, 5.f);
    std::vector<bf16> wp = rand_bf16(rng, h, 1.f), wn = rand_bf16(rng, h, 1.f);
    std::vector<bf16> ls = {tobf(0.37f)};
    DevBuf<bf16> dx(x), dh(hh), dwp(wp), dwn(wn), dls(ls), dout(size_t(n) * h);
    poison(dout.p, dout.bytes());
    run_fused(pdl, {{&x, dx.p}, {&hh, dh.p}}, [&](cudaStream_t s, const cuda::KernelOptions& ko) {
      return cuda::add_rmsnorm(dx.p, dwp.p, dh.p, variant & 1 ? dls.p : nullptr, variant & 1 ? nullptr : dwn.p, dout.p,
                               n, h, 1e-6f, s, ko);
    });
    std::vector<double> refh(size_t(n) * h), refo(size_t(n) * h);
    for (int i = 0; i < n; ++i) {
      double ss = 0;
      for (int c = 0; c < h; ++c) ss += std::pow(bf(x[size_t(i) * h + c]), 2);
      const double r = 1.0 / std::sqrt(ss / h + 1e-6);
      double ss2 = 0;
      for (int c = 0; c < h; ++c) {
        const float t = rbf(float(bf(x[size_t(i) * h + c]) * r * bf(wp[c])));
        float hn = rbf(bf(hh[size_t(i) * h + c]) + t);
        if (variant & 1) hn = rbf(hn * bf(ls[0]));
        refh[size_t(i) * h + c] = hn;
        ss2 += double(hn) * hn;
      }
      const double r2 = 1.0 / std::sqrt(ss2 / h + 1e-6);
      for (int c = 0; c < h; ++c) refo[size_t(i) * h + c] = refh[size_t(i) * h + c] * r2 * bf(wn[c]);
    }
    size_t bad = 0;
    // h: the same roundings as the reference; differences only from rare 1-ulp flips.
    EXPECT_LT(rel_err(refh, to_float(dh.get()), &bad), kOneRounding);
    EXPECT_EQ(bad, 0u);
    if (!(variant & 1)) {
      EXPECT_LT(rel_err(refo, to_float(dout.get()), &bad), kOneRounding);
      EXPECT_EQ(bad, 0u);
    }
  }
}

struct RopeCase {
  int hq, hkv, d, rotary_pairs;
  float theta;
  bool k_eq_v;
  int n = 5;  // tokens: the first five at the positions below, then (37 t) mod 8192
  bool pdl = false;  // q, k, v written late under PDL (run_fused)
};

void run_rope(const RopeCase& c) {
  char nm[96];
  std::snprintf(nm, sizeof nm, "hq=%d hkv=%d d=%d R=%d n=%d%s", c.hq, c.hkv, c.d, c.rotary_pairs, c.n,
                c.pdl ? " pdl" : "");
  SCOPED_TRACE(nm);
  std::mt19937_64 rng(test_seed() ^ (uint64_t(c.d) << 8) ^ c.rotary_pairs);
  const int n = c.n, nslots = 15 + n;
  const double eps = 1e-6;
  std::vector<bf16> q = rand_bf16(rng, size_t(n) * c.hq * c.d, 1.5f);
  std::vector<bf16> k = rand_bf16(rng, size_t(n) * c.hkv * c.d, 1.5f);
  std::vector<bf16> v = rand_bf16(rng, size_t(n) * c.hkv * c.d, 1.5f);
  std::vector<bf16> qw = rand_bf16(rng, c.d, 1.f), kw = rand_bf16(rng, c.d, 1.f);
  std::vector<int> pos = {0, 1, 4095, 8191, 77};
  std::vector<int64_t> slots = {13, 0, 19, 5, 6};
  for (int t = 5; t < n; ++t) {
    pos.push_back(37 * t % 8192);
    slots.push_back(20 + (t - 5));
  }
  DevBuf<bf16> dq(q), dk(k), dv(v), dqw(qw), dkw(kw);
  DevBuf<bf16> kc(size_t(nslots) * c.hkv * c.d), vc(size_t(nslots) * c.hkv * c.d);
  DevBuf<int> dpos(pos);
  DevBuf<int64_t> dsl(slots);
  poison(kc.p, kc.bytes());
  poison(vc.p, vc.bytes());
  run_fused(c.pdl, {{&q, dq.p}, {&k, dk.p}, {&v, dv.p}}, [&](cudaStream_t s, const cuda::KernelOptions& ko) {
    return cuda::qk_norm_rope_kv_write(dq.p, dk.p, c.k_eq_v ? nullptr : dv.p, dqw.p, dkw.p, dpos.p, dsl.p, n, c.hq,
                                       c.hkv, c.d, c.theta, c.rotary_pairs, float(eps), dq.p, kc.p, vc.p, s, ko);
  });
  // HF's bf16 rounding points (fused.cuh; tests/bf16/hf_bf16.h point 5), float64 in between.
  auto rb = [](double x) { return double(rbf(float(x))); };
  auto ref_head = [&](const bf16* x, const bf16* w, int p, bool rope, double* out) {
    double ss = 0;
    for (int e = 0; e < c.d; ++e) ss += std::pow(bf(x[e]), 2);
    const double r = 1.0 / std::sqrt(ss / c.d + eps);
    std::vector<double> y(c.d);
    for (int e = 0; e < c.d; ++e) y[e] = rb(bf(x[e]) * r * (w ? bf(w[e]) : 1.0));
    for (int j = 0; j < c.d / 2; ++j) {
      const double a = y[j], b = y[j + c.d / 2];
      if (!rope) {
        out[j] = a;
        out[j + c.d / 2] = b;
        continue;
      }
      double cs = 1, sn = 0;
      if (j < c.rotary_pairs) {
        const float inv = 1.f / float(std::pow(double(c.theta), double(float(2 * j) / float(c.d))));
        const float ang = float(p) * inv;
        cs = rb(std::cos(double(ang)));
        sn = rb(std::sin(double(ang)));
      }
      out[j] = rb(rb(a * cs) + rb(-b * sn));
      out[j + c.d / 2] = rb(rb(b * cs) + rb(a * sn));
    }
  };
  std::vector<double> rq(q.size()), rk(size_t(n) * c.hkv * c.d), rv(rk.size());
  for (int t = 0; t < n; ++t) {
    for (int h = 0; h < c.hq; ++h)
      ref_head(&q[(size_t(t) * c.hq + h) * c.d], qw.data(), pos[t], true, &rq[(size_t(t) * c.hq + h) * c.d]);
    for (int h = 0; h < c.hkv; ++h) {
      const size_t o = (size_t(t) * c.hkv + h) * c.d;
      ref_head(&k[o], kw.data(), pos[t], true, &rk[o]);
      ref_head(c.k_eq_v ? &k[o] : &v[o], nullptr, pos[t], false, &rv[o]);
    }
  }
  size_t bad = 0;
  EXPECT_LT(rel_err(rq, to_float(dq.get()), &bad), kSameRounding);
  EXPECT_EQ(bad, 0u);
  std::vector<bf16> hk = kc.get(), hv = vc.get();
  std::vector<float> gk(rk.size()), gv(rv.size());
  const size_t rowe = size_t(c.hkv) * c.d;
  for (int t = 0; t < n; ++t)
    for (size_t e = 0; e < rowe; ++e) {
      gk[t * rowe + e] = bf(hk[slots[t] * rowe + e]);
      gv[t * rowe + e] = bf(hv[slots[t] * rowe + e]);
    }
  EXPECT_LT(rel_err(rk, gk, &bad), kSameRounding);
  EXPECT_EQ(bad, 0u);
  EXPECT_LT(rel_err(rv, gv, &bad), kSameRounding);
  EXPECT_EQ(bad, 0u);
  // Slots not named in `slots` keep their poison: nothing else was written.
  size_t touched = 0;
  for (int s = 0; s < nslots; ++s) {
    if (std::find(slots.begin(), slots.end(), s) != slots.end()) continue;
    for (size_t e = 0; e < rowe; ++e) touched += std::isfinite(bf(hk[s * rowe + e])) ? 1 : 0;
  }
  EXPECT_EQ(touched, 0u);

  // The FP8 cache (Fp8Kv) from the same inputs: Q bit for bit as above, and each K / V row of
  // the written slots exactly runtime/fp8.h's quantize_row_e4m3 of the BF16 cache's row above
  // (every code and the scale's bits); the other slots keep their poison.
  DevBuf<bf16> dq8(q), dk8(k), dv8(v);
  DevBuf<uint8_t> kc8(size_t(nslots) * rowe), vc8(size_t(nslots) * rowe);
  DevBuf<float> ks8(size_t(nslots) * c.hkv), vs8(size_t(nslots) * c.hkv);
  for (void* b : {static_cast<void*>(kc8.p), static_cast<void*>(vc8.p)}) poison(b, size_t(nslots) * rowe);
  poison(ks8.p, ks8.bytes());
  poison(vs8.p, vs8.bytes());
  run_fused(c.pdl, {{&q, dq8.p}, {&k, dk8.p}, {&v, dv8.p}}, [&](cudaStream_t s, const cuda::KernelOptions& ko) {
    return cuda::qk_norm_rope_kv_write(dq8.p, dk8.p, c.k_eq_v ? nullptr : dv8.p, dqw.p, dkw.p, dpos.p, dsl.p, n,
                                       c.hq, c.hkv, c.d, c.theta, c.rotary_pairs, float(eps), dq8.p,
                                       cuda::Fp8Kv{kc8.p, vc8.p, ks8.p, vs8.p}, s, ko);
  });
  const std::vector<bf16> q16 = dq.get(), q8 = dq8.get();
  EXPECT_EQ(std::memcmp(q16.data(), q8.data(), q8.size() * sizeof(bf16)), 0);
  const std::vector<uint8_t> hk8 = kc8.get(), hv8 = vc8.get();
  const std::vector<float> hks = ks8.get(), hvs = vs8.get();
  size_t code_diff = 0, scale_diff = 0, written = 0;
  std::vector<float> x(c.d);
  std::vector<uint8_t> want(c.d);
  for (int t = 0; t < n; ++t)
    for (int h = 0; h < c.hkv; ++h)
      for (int kv = 0; kv < 2; ++kv) {
        const size_t o = size_t(slots[t]) * rowe + size_t(h) * c.d;
        for (int e = 0; e < c.d; ++e) x[e] = bf((kv ? hv : hk)[o + e]);
        const float sc = runtime::quantize_row_e4m3(x.data(), c.d, want.data());
        const float got = (kv ? hvs : hks)[size_t(slots[t]) * c.hkv + h];
        scale_diff += std::memcmp(&sc, &got, 4) != 0;
        for (int e = 0; e < c.d; ++e) code_diff += want[e] != (kv ? hv8 : hk8)[o + e];
      }
  for (int s = 0; s < nslots; ++s) {
    if (std::find(slots.begin(), slots.end(), s) != slots.end()) continue;
    for (size_t e = 0; e < rowe; ++e) written += (hk8[s * rowe + e] != 0xFF) + (hv8[s * rowe + e] != 0xFF);
    for (int h = 0; h < c.hkv; ++h)
      written += std::isfinite(hks[size_t(s) * c.hkv + h]) + std::isfinite(hvs[size_t(s) * c.hkv + h]);
  }
  EXPECT_EQ(code_diff, 0u);
  EXPECT_EQ(scale_diff, 0u);
  EXPECT_EQ(written, 0u);
}

// Each case also writes an FP8 cache (run_rope's second half: codes and scales exactly the host
// quantizer's on the BF16 rows).
TEST(GpuFused, QkNormRopeKvWrite) {
  G4C_REQUIRE_GPU();
  run_rope({4, 2, 64, 32, 1e4f, false});       // tiny sliding: default rope
  run_rope({4, 1, 128, 16, 1e6f, true});       // tiny full: proportional 0.25, k_eq_v
  run_rope({16, 8, 256, 128, 1e4f, false});    // 12B sliding
  run_rope({16, 1, 512, 64, 1e6f, true});      // 12B full: proportional, k_eq_v
  // More (token, head) items than the kernel's persistent grid has warps (4 blocks of 8 warps
  // per SM: 4224 on 132 SMs), so warps loop over several.
  run_rope({16, 8, 256, 128, 1e4f, false, 300});
  // Launched by PDL after a producer that writes q, k and v late (the decode step's order).
  run_rope({16, 8, 256, 128, 1e4f, false, 5, true});
  run_rope({16, 1, 512, 64, 1e6f, true, 300, true});
}

TEST(GpuFused, ArgmaxTiesLowestIndex) {
  G4C_REQUIRE_GPU();
  std::mt19937_64 rng(test_seed() ^ 5);
  const int m = 4, n = 262144;
  std::normal_distribution<float> nd(0.f, 3.f);
  std::vector<float> l(size_t(m) * n);
  for (auto& v : l) v = nd(rng);
  std::uniform_int_distribution<int> pick(0, n - 1);
  std::vector<int> expect(m);
  for (int i = 0; i < m; ++i) {
    int a = pick(rng), b = pick(rng);
    if (i == 1) b = n - 1;
    l[size_t(i) * n + a] = 100.f;
    l[size_t(i) * n + b] = 100.f;  // tie (or the same index)
    expect[i] = std::min(a, b);
  }
  DevBuf<float> dl(l);
  DevBuf<int> out(m);
  poison(out.p, out.bytes());
  G4C_CUDA_OK(cuda::argmax_rows(dl.p, m, n, n, out.p, nullptr));
  G4C_CUDA_OK(cudaDeviceSynchronize());
  EXPECT_EQ(out.get(), expect);
}

// The cluster form (argmax_rows splits a row over up to 8 blocks, merged through distributed
// shared memory) against runtime::argmax, exactly: row counts 1 … 40 (so the blocks per row vary
// 8 … 1), vocabularies from 1 to 262147 (chunks not a multiple of 4: the scalar tails), row
// strides n and n + 1 and a base 4 bytes off (the scalar scan), the maximum duplicated at the
// chunk boundaries (a later block must not win a tie), NaN, ±inf and all −inf rows.
TEST(GpuFused, ArgmaxRowsMatchTheHostOnEveryShape) {
  G4C_REQUIRE_GPU();
  std::mt19937_64 rng(test_seed() ^ 6);
  std::normal_distribution<float> nd(0.f, 3.f);
  int cases = 0;
  for (const int n : {1, 7, 8193, 16384, 65536, 65539, 262144, 262147})
    for (const int m : {1, 3, 16, 40})
      for (const int extra : {0, 1})    // row stride n + extra
        for (const int offset : {0, 1}) {  // base pointer + offset floats
          if (long(m) * n > (1L << 22) && (extra || offset)) continue;  // (time: the big rows once)
          const long ldl = n + extra;
          std::vector<float> l(size_t(offset) + size_t(m) * ldl, 7e30f);  // the gaps: larger than any row entry
          std::vector<int> expect(m);
          for (int i = 0; i < m; ++i) {
            float* row = l.data() + offset + size_t(i) * ldl;
            for (int j = 0; j < n; ++j) row[j] = nd(rng);
            std::uniform_int_distribution<int> pick(0, n - 1);
            switch (i % 6) {
              case 0: break;  // plain Gaussian
              case 1:         // the maximum at every eighth and quarter of the row (block boundaries)
                for (int k = 1; k < 8; ++k) row[size_t(n) * k / 8] = 50.f;
                row[pick(rng)] = 50.f;
                break;
              case 2: row[pick(rng)] = NAN; row[pick(rng)] = 40.f; row[pick(rng)] = NAN; break;
              case 3: for (int j = 0; j < n; ++j) row[j] = -INFINITY; break;
              case 4: row[pick(rng)] = INFINITY; row[pick(rng)] = INFINITY; break;
              case 5: row[n - 1] = 60.f; row[pick(rng)] = 60.f; break;  // the last entry ties
            }
            expect[i] = runtime::argmax(row, n);
          }
          DevBuf<float> dl(l);
          DevBuf<int> out(m);
          poison(out.p, out.bytes());
          G4C_CUDA_OK(cuda::argmax_rows(dl.p + offset, m, n, ldl, out.p, nullptr));
          G4C_CUDA_OK(cudaDeviceSynchronize());
          EXPECT_EQ(out.get(), expect) << "n " << n << " m " << m << " ldl " << ldl << " offset " << offset;
          ++cases;
        }
  EXPECT_GT(cases, 80);
}

// Device sampling against the host sampler (runtime::sample_u, itself tested against a brute-force
// implementation of sampler.h's definition): the same token for the same draw u. The device's
// weights come from expf (≤ 2 ulp: 2.4e-7 relative; glibc's ≤ 1), so every partial sum, and with
// it the draw's position u·s among them and the nucleus's crossing of top_p · z, can move by
// ≤ ~5e-7 relative (the sums' different association adds ~1e-15); a case is ambiguous (skipped,
// counted) when the host's token changes under u ± 1e-6 or top_p · (1 ± 1e-6), twice that. Flat
// rows of a large vocabulary (every token ~4e-6 of the mass) are then mostly ambiguous, so the
// small vocabularies get three times the rows. Rows: Gaussian logits at several scales,
// softcapped, integer (ties), −inf entries, a NaN; vocabularies 1 … 262144; greedy,
// temperature, top_k, top_p and both.
TEST(GpuFused, SampleRowsFollowTheHostSampler) {
  G4C_REQUIRE_GPU();
  std::mt19937_64 rng(test_seed() ^ 11);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::uniform_real_distribution<double> uni(0.0, 1.0);
  const float temps[] = {0.0f, 0.7f, 1.0f, 2.5f};
  const int top_ks[] = {-1, 1, 40, 5000};
  const float top_ps[] = {1.0f, 0.9f, 0.3f};
  int cases = 0, skipped = 0, mismatches = 0;
  for (const int n : {1, 7, 1000, 65536, 262144}) {
    // One launch per vocabulary: a row per (kind, T, top_k, top_p) combination (n ≥ 65536: a subset).
    std::vector<float> l;
    std::vector<cuda::SampleRow> rows;
    std::vector<runtime::SamplingParams> ps;
    int kind = 0, combo = 0;
    for (int rep = 0; rep < (n <= 1000 ? 3 : 1); ++rep)
      for (const float t : temps)
        for (const int k : top_ks)
          for (const float tp : top_ps) {
            if (n >= 65536 && t != 0.0f && combo++ % 3 != 0) continue;  // (the host's time per case)
            ++kind;
            const size_t at = l.size();
            l.resize(at + size_t(n));
            for (int i = 0; i < n; ++i) {
              const float x = nd(rng);
              switch (kind % 5) {
                case 0: l[at + i] = 3.0f * x; break;
                case 1: l[at + i] = 30.0f * std::tanh(8.0f * x / 30.0f); break;
                case 2: l[at + i] = std::round(2.0f * x); break;
                case 3: l[at + i] = (i % 7 == 3) ? -INFINITY : 0.5f * x; break;
                default: l[at + i] = 12.0f * x; break;
              }
            }
            if (kind % 5 == 4 && n > 2) l[at + size_t(n / 2)] = NAN;
            const double u = uni(rng);
            rows.push_back({t, k, tp, 0, u});
            ps.push_back({.temperature = t, .top_k = k, .top_p = tp});
          }
    const int m = int(rows.size());
    DevBuf<float> dl(l);
    DevBuf<cuda::SampleRow> dr(rows);
    DevBuf<int> out(static_cast<size_t>(m));
    poison(out.p, out.bytes());
    G4C_CUDA_OK(cuda::sample_rows(dl.p, m, n, n, dr.p, out.p, nullptr));
    G4C_CUDA_OK(cudaDeviceSynchronize());
    const std::vector<int> got = out.get();
    for (int r = 0; r < m; ++r) {
      const float* row = l.data() + size_t(r) * n;
      const auto& p = ps[size_t(r)];
      const double u = rows[size_t(r)].u;
      const int want = runtime::sample_u(row, n, p, u);
      ++cases;
      bool ambiguous = false;
      for (const double du : {-1e-6, 1e-6})
        ambiguous |= runtime::sample_u(row, n, p, std::clamp(u + du, 0.0, 1.0 - 0x1p-53)) != want;
      if (p.top_p < 1.0f)
        for (const float f : {1.0f - 1e-6f, 1.0f + 1e-6f}) {
          auto q = p;
          q.top_p = std::min(p.top_p * f, 0.99999994f);
          ambiguous |= runtime::sample_u(row, n, q, u) != want;
        }
      if (ambiguous) {
        ++skipped;
        continue;
      }
      if (got[size_t(r)] != want) {
        ++mismatches;
        ADD_FAILURE() << "n " << n << " row " << r << " T " << p.temperature << " top_k " << p.top_k << " top_p "
                      << p.top_p << " u " << u << ": device " << got[size_t(r)] << ", host " << want;
      }
    }
  }
  std::printf("sample_rows: %d cases, %d ambiguous (skipped)\n", cases, skipped);
  EXPECT_EQ(mismatches, 0);
  EXPECT_LE(skipped * 50, cases);  // ≤ 2%: the skip must not hide the comparison
}

}  // namespace
}  // namespace g4c::gputest

// GPTQ on the GPU (passes/quant/cuda/gptq_device.h) against the host implementation
// (passes/quant) and a scalar reference. Label "gpu": skips without a CUDA device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>

#include <cuda_runtime_api.h>
#include <cstring>

#include "models/error.h"
#include "passes/quant/gptq.h"
#include "passes/quant/cuda/gptq_device.h"

namespace g4c {
namespace {

bool gpu_present() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

#define REQUIRE_GPU() \
  if (!gpu_present()) GTEST_SKIP() << "no CUDA device"

uint64_t seed() {
  static const uint64_t s = [] {
    const char* e = std::getenv("G4C_SEED");
    const uint64_t v = e ? std::strtoull(e, nullptr, 10) : std::random_device{}();
    std::fprintf(stderr, "[gptq device tests] seed %llu\n", (unsigned long long)v);
    return v;
  }();
  return s;
}

// Calibration-like rows: per-column scales spread over two decades (as activations are), a
// shared low-rank part so columns correlate, and `zero_cols` columns that are always zero
// (dead columns).
std::vector<float> make_x(std::mt19937_64& rng, int64_t rows, int64_t n, int64_t ld, std::vector<int64_t> zero_cols = {}) {
  std::normal_distribution<float> g(0.f, 1.f);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> colscale(static_cast<size_t>(n));
  std::vector<float> x(static_cast<size_t>(rows * ld), 7.f);  // padding columns hold junk
  for (auto& s : colscale) s = std::pow(10.f, u(rng));
  std::vector<float> basis(size_t(4 * n));
  for (auto& b : basis) b = g(rng);
  for (int64_t r = 0; r < rows; ++r) {
    float c[4] = {g(rng), g(rng), g(rng), g(rng)};
    for (int64_t j = 0; j < n; ++j) {
      float v = g(rng);
      for (int k = 0; k < 4; ++k) v += 0.5f * c[k] * basis[size_t(k * n + j)];
      x[size_t(r * ld + j)] = v * colscale[size_t(j)];
    }
  }
  for (const int64_t z : zero_cols)
    for (int64_t r = 0; r < rows; ++r) x[size_t(r * ld + z)] = 0.f;
  return x;
}

std::vector<float> make_w(std::mt19937_64& rng, int64_t out, int64_t n) {
  std::normal_distribution<float> g(0.f, 0.02f);
  std::vector<float> w(size_t(out * n));
  for (auto& v : w) v = g(rng);
  return w;
}

// H of quant::HessianAccumulator::add with every partial one fp32 fma chain (std::fma) over its
// rows in order: the arithmetic the device Gram promises, computed independently here.
void reference_add(std::vector<double>& H, const float* x, int64_t rows, int64_t n, int64_t ld) {
  for (int64_t r0 = 0; r0 < rows; r0 += 8192) {
    const int64_t nr = std::min<int64_t>(8192, rows - r0);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = i; j < n; ++j) {
        float acc = 0.f;
        for (int64_t r = r0; r < r0 + nr; ++r) acc = std::fma(x[r * ld + i], x[r * ld + j], acc);
        const double v = 2.0 * double(acc);
        H[size_t(i * n + j)] += v;
        if (j != i) H[size_t(j * n + i)] += v;
      }
  }
}

TEST(GpuGptq, GramIsTheFmaChainBitwise) {
  REQUIRE_GPU();
  std::mt19937_64 rng(seed() ^ 11);
  quant::GptqDevice dev(nullptr);
  // 200 columns (two 128-tiles, the second ragged), ld > n; 3000 rows cross the 2048-row staging
  // (the chain continues across uploads); a second add of 9000 rows crosses an 8192-row partial.
  struct Case {
    int64_t n, ld, rows1, rows2;
  };
  for (const Case c : {Case{200, 210, 3000, 37}, Case{64, 64, 9000, 1}}) {
    std::vector<float> x1 = make_x(rng, c.rows1, c.n, c.ld), x2 = make_x(rng, c.rows2, c.n, c.ld);
    quant::DeviceHessian h(dev, c.n);
    h.add(x1.data(), c.rows1, c.ld);
    h.add(x2.data(), c.rows2, c.ld);
    EXPECT_EQ(h.rows(), c.rows1 + c.rows2);
    std::vector<double> ref(size_t(c.n * c.n), 0.0);
    reference_add(ref, x1.data(), c.rows1, c.n, c.ld);
    reference_add(ref, x2.data(), c.rows2, c.n, c.ld);
    const std::vector<double> got = h.hessian();
    size_t mism = 0;
    for (size_t k = 0; k < ref.size(); ++k) mism += !(got[k] == ref[k]);
    EXPECT_EQ(mism, 0u) << "n " << c.n << ": device H differs from the fp32 fma chain";
  }
}

// The tensor-core Gram of device bf16 rows against the float64 Gram of the same values. Each
// bf16 product is exact in fp32, so the only error is the fp32 summation of ≤ 8192 products per
// partial: at most (terms)·u·Σ|products| to first order, u = 2⁻²³ when the MMA aligns by
// truncation (2⁻²⁴ for round-to-nearest); the factor 2 covers the MMA's internal partial sums and
// the 2·partial of H is on both sides. The float64 partials are summed into H as the device does.
// The bound grows as rows²; on few rows (the 40-row case: ~10⁻³ of one product) it is far
// below what one row left out moves, which the last check shows, so it does catch a lost row.
TEST(GpuGptq, GramFromDeviceBf16RowsIsTheExactGramWithinFp32Summation) {
  REQUIRE_GPU();
  std::mt19937_64 rng(seed() ^ 15);
  quant::GptqDevice dev(nullptr);
  struct Case {
    int64_t n, ld, rows;
    bool probe;  // check that one row left out exceeds the bound
  };
  // 333 columns (ragged tiles), ld 340 (unaligned rows: the scalar loads), 4100 rows (a ragged
  // 32-row stage); 333 / 336: aligned rows whose last 16-byte chunk is partly past n (zero-filled
  // by the async copy); 256 / 256 with 9000 rows: the vector loads and two partials; 40 rows: the probe.
  for (const Case c : {Case{333, 340, 4100, false}, Case{333, 336, 700, false}, Case{256, 256, 9000, false},
                       Case{200, 200, 40, true}}) {
    std::vector<float> x = make_x(rng, c.rows, c.n, c.ld);
    std::vector<uint16_t> xb(x.size());
    for (size_t k = 0; k < x.size(); ++k) {  // round to bf16 (nearest even); x keeps the bf16 values
      uint32_t u;
      std::memcpy(&u, &x[k], 4);
      u = (u + 0x7fff + ((u >> 16) & 1)) & 0xffff0000u;
      std::memcpy(&x[k], &u, 4);
      xb[k] = uint16_t(u >> 16);
    }
    void* d = nullptr;
    ASSERT_EQ(cudaMalloc(&d, xb.size() * 2), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d, xb.data(), xb.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
    quant::DeviceHessian a(dev, c.n);
    a.add_device_bf16(d, c.rows, c.ld);
    cudaFree(d);
    EXPECT_EQ(a.rows(), c.rows);
    const std::vector<double> got = a.hessian();
    const int64_t n = c.n;
    std::vector<double> exact(size_t(n * n), 0.0), bound(size_t(n * n), 0.0), minus_one(size_t(n * n), 0.0);
    for (int64_t r0 = 0; r0 < c.rows; r0 += 8192) {
      const int64_t nr = std::min<int64_t>(8192, c.rows - r0);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = i; j < n; ++j) {
          double sum = 0.0, abs = 0.0;
          for (int64_t r = r0; r < r0 + nr; ++r) {
            const double p = double(x[size_t(r * c.ld + i)]) * double(x[size_t(r * c.ld + j)]);
            sum += p;
            abs += std::fabs(p);
          }
          const double last = double(x[size_t((r0 + nr - 1) * c.ld + i)]) * double(x[size_t((r0 + nr - 1) * c.ld + j)]);
          for (const auto& [k, v] : {std::pair{i * n + j, 0}, std::pair{j * n + i, 1}}) {
            if (v == 1 && i == j) continue;
            exact[size_t(k)] += 2.0 * sum;
            bound[size_t(k)] += 2.0 * (2.0 * double(nr) * std::ldexp(1.0, -23) * abs);
            minus_one[size_t(k)] += 2.0 * (sum - last);
          }
        }
    }
    size_t over = 0, caught = 0;
    double worst = 0.0;
    for (size_t k = 0; k < got.size(); ++k) {
      const double e = std::fabs(got[k] - exact[k]);
      over += !(e <= bound[k]);
      worst = std::max(worst, bound[k] > 0 ? e / bound[k] : e);
      caught += std::fabs(minus_one[k] - exact[k]) > bound[k];
    }
    EXPECT_EQ(over, 0u) << "n " << n << ": worst error / bound " << worst;
    size_t asym = 0;  // one partial value feeds H[i, j] and H[j, i]
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = i + 1; j < n; ++j) asym += got[size_t(i * n + j)] != got[size_t(j * n + i)];
    EXPECT_EQ(asym, 0u) << "n " << n << ": H is not exactly symmetric";
    // One row left out leaves the bound in nearly every entry (a single product can be ~0).
    if (c.probe) EXPECT_GT(double(caught), 0.9 * double(got.size())) << "n " << n;
  }
}

// The host's H for the factor/solve tests (HessianAccumulator: independent of the device Gram).
std::vector<double> host_h(const std::vector<float>& x, int64_t rows, int64_t n) {
  quant::HessianAccumulator acc(n);
  acc.add(x.data(), rows, n, 2);
  return acc.hessian();
}

TEST(GpuGptq, FactorMatchesTheHost) {
  REQUIRE_GPU();
  std::mt19937_64 rng(seed() ^ 12);
  quant::GptqDevice dev(nullptr);
  // n = 300: four full 64-blocks and a ragged one; two dead columns; both column orders.
  const int64_t n = 300, rows = 700;
  const std::vector<float> x = make_x(rng, rows, n, n, {5, 131});
  const std::vector<double> H = host_h(x, rows, n);
  for (const bool act : {false, true}) {
    quant::GptqOptions opt;
    opt.act_order = act;
    const quant::PreparedHessian P = quant::prepare_hessian(H, n, opt);
    quant::DeviceHessian h(dev, n);
    h.set_hessian(H, rows);
    const quant::DeviceHessian::Prepared got = h.prepare(opt.damp, act);
    EXPECT_EQ(got.dead_columns, P.dead_columns);
    EXPECT_EQ(got.damp_value, P.damp_value);  // same sum in the same order
    const std::vector<double> U = h.factor();
    double umax = 0, dmax = 0;
    for (size_t k = 0; k < U.size(); ++k) {
      umax = std::max(umax, std::fabs(P.hinv[k]));
      dmax = std::max(dmax, std::fabs(U[k] - P.hinv[k]));
    }
    // Blocked vs unblocked fp64 factorizations: forward error ≲ n·ε·κ(H). Damping at 1 % of the
    // mean diagonal bounds κ ≤ trace/damp = 100·n = 3e4, so ≤ 300·1.1e-16·3e4 ≈ 1e-9 relative.
    EXPECT_LE(dmax / umax, 1e-9) << "act_order " << act;
    std::printf("[ measured ] factor act_order=%d: max |dU| / max |U| = %.3g\n", int(act), dmax / umax);
  }
}

struct SolveCase {
  int64_t out, n;
  int group;
  bool sym, act;
  int block;
  bool clip = false;  // --clip mse: the range search at each group's first column (static with act)
};

void compare(const quant::GptqResult& ref, const quant::GptqSolved& got, const SolveCase& c, size_t* code_mism,
             double* loss_rel) {
  ASSERT_EQ(got.codes.size(), ref.q.codes.size());
  ASSERT_EQ(got.scales.size(), ref.q.scales.size());
  size_t cm = 0, sm = 0;
  for (size_t k = 0; k < got.codes.size(); ++k) cm += got.codes[k] != ref.q.codes[k];
  for (size_t k = 0; k < got.scales.size(); ++k)
    sm += !(got.scales[k] == ref.q.scales[k]) || got.zeros[k] != ref.q.zeros[k];
  double loss = 0;
  for (const double l : got.row_loss) loss += l;
  *code_mism = cm + sm;
  *loss_rel = std::fabs(loss - ref.predicted_loss) / ref.predicted_loss;
  (void)c;
}

const SolveCase kCases[] = {
    {77, 300, 128, true, false, 128},   // ragged rows (77 of 32-row CTAs), partial last group
    {130, 320, 64, false, false, 128},  // asymmetric, two groups per block
    {64, 300, 128, true, true, 128},    // act_order: static groups, permuted columns
    {40, 256, 64, false, true, 96},     // act_order with a block that is no multiple of the group
    {77, 300, 128, true, false, 128, true},   // clip: searched in the block kernel, partial last group
    {130, 320, 64, false, false, 128, true},  // clip, asymmetric: a group starting inside a block
    {64, 300, 128, false, true, 128, true},   // clip with act_order: static clipped groups
    // Wider than a superblock of kSolveErrBlocks blocks (512 columns): the columns after each
    // superblock take its errors in one update; two full superblocks and a ragged one.
    {48, 1100, 128, true, false, 128},
    {40, 1100, 64, false, true, 128, true},  // act_order + clip across superblocks
};

TEST(GpuGptq, SolveMatchesTheHostGivenItsFactor) {
  REQUIRE_GPU();
  std::mt19937_64 rng(seed() ^ 13);
  quant::GptqDevice dev(nullptr);
  for (const SolveCase& c : kCases) {
    const std::vector<float> x = make_x(rng, 600, c.n, c.n, {3});
    const std::vector<float> w = make_w(rng, c.out, c.n);
    const std::vector<double> H = host_h(x, 600, c.n);
    quant::GptqOptions opt{{c.group, c.sym}, 0.01, c.block, c.act, c.clip ? quant::ClipSearch::mse() : quant::ClipSearch{}, 2};
    const quant::PreparedHessian P = quant::prepare_hessian(H, c.n, opt);
    const quant::GptqResult ref = quant::gptq_quantize(w.data(), c.out, c.n, P, opt);
    quant::DeviceHessian h(dev, c.n);
    h.set_factor(P.hinv, std::vector<uint8_t>(P.dead.begin(), P.dead.end()), c.act ? P.perm : std::vector<int64_t>{});
    const quant::GptqSolved got =
        h.solve(w.data(), c.out, c.group, c.sym, c.block, opt.clip.grid, c.clip ? opt.clip.steps : 0);
    size_t mism = 0;
    double rel = 0;
    compare(ref, got, c, &mism, &rel);
    // Same factor; the in-block loop is the host's arithmetic, the update of the later columns
    // runs as fp64 FMA chains on the tensor cores, so the weights differ by a few ulps. Without a
    // flipped code the objective (a float64 sum over ≤ 320 columns per row) then agrees to far
    // better than 1e-12 relative; a code flips only where w/s lies within those ulps of a
    // boundary (expected ≈ 0 here), and then as in WholePipelineMatchesTheHost.
    const size_t total = got.codes.size() + got.scales.size();
    if (mism == 0) {
      EXPECT_LE(rel, 1e-12) << "out " << c.out << " n " << c.n << " g" << c.group << " act " << c.act;
    } else {
      EXPECT_LE(double(mism), 1e-3 * double(total)) << "out " << c.out << " n " << c.n << " act " << c.act;
      EXPECT_LE(rel, 1e-3);
    }
    std::printf("[ measured ] device solve vs host (same factor), out %lld n %lld g%d sym %d act %d clip %d: %zu "
                "of %zu codes/params differ, objective rel diff %.3g\n",
                (long long)c.out, (long long)c.n, c.group, int(c.sym), int(c.act), int(c.clip), mism, total, rel);
  }
}

TEST(GpuGptq, WholePipelineMatchesTheHost) {
  REQUIRE_GPU();
  std::mt19937_64 rng(seed() ^ 14);
  quant::GptqDevice dev(nullptr);
  for (const SolveCase& c : kCases) {
    const int64_t rows = 900;
    const std::vector<float> x = make_x(rng, rows, c.n, c.n, {7});
    const std::vector<float> w = make_w(rng, c.out, c.n);
    quant::GptqOptions opt{{c.group, c.sym}, 0.01, c.block, c.act, c.clip ? quant::ClipSearch::mse() : quant::ClipSearch{}, 2};
    const quant::GptqResult ref = quant::gptq_quantize(w.data(), c.out, c.n, host_h(x, rows, c.n), opt);
    quant::DeviceHessian h(dev, c.n);
    h.add(x.data(), rows, c.n);
    h.prepare(opt.damp, c.act);
    const quant::GptqSolved got =
        h.solve(w.data(), c.out, c.group, c.sym, c.block, opt.clip.grid, c.clip ? opt.clip.steps : 0);
    size_t mism = 0;
    double rel = 0;
    compare(ref, got, c, &mism, &rel);
    // The factors differ by ~1e-13 relative (previous test), so a code can flip only where
    // w/s lies that close to a rounding boundary — expected count ≈ 0 at these sizes. A flip
    // moves that row's later columns and the objective by ≲ 1/(codes) relative; the bounds
    // allow a few flips (0.1 % of codes, 1e-3 of the objective) and nothing systematic.
    const size_t total = got.codes.size() + got.scales.size();
    EXPECT_LE(double(mism), 1e-3 * double(total)) << "out " << c.out << " n " << c.n << " act " << c.act;
    EXPECT_LE(rel, 1e-3);
    std::printf("[ measured ] device GPTQ vs host, out %lld n %lld g%d sym %d act %d clip %d: %zu of %zu "
                "codes/params differ, objective rel diff %.3g\n",
                (long long)c.out, (long long)c.n, c.group, int(c.sym), int(c.act), int(c.clip), mism, total, rel);
  }
}

TEST(GpuGptq, ErrorsAreClear) {
  REQUIRE_GPU();
  quant::GptqDevice dev(nullptr);
  // Not positive definite: an indefinite H with no damping.
  quant::DeviceHessian h(dev, 2);
  h.set_hessian({1.0, 0.0, 0.0, -1.0}, 1);
  EXPECT_THROW(h.prepare(0.0, false), Error);
  // A block the device solve cannot take.
  quant::DeviceHessian h2(dev, 4);
  h2.set_hessian({2, 0, 0, 0, 0, 2, 0, 0, 0, 0, 2, 0, 0, 0, 0, 2}, 1);
  h2.prepare(0.01, false);
  const std::vector<float> w(8, 0.1f);
  EXPECT_THROW(h2.solve(w.data(), 2, 64, true, 96), Error);   // not a multiple of the group
  EXPECT_THROW(h2.solve(w.data(), 2, 64, true, 256), Error);  // over 128 columns
  // The budget check runs after each allocation and its error propagates.
  int calls = 0;
  quant::GptqDevice tight(nullptr, [&](const std::string& what) {
    ++calls;
    if (what.find("Hessian") != std::string::npos) throw Error("over budget: " + what);
  });
  EXPECT_THROW({ quant::DeviceHessian bad(tight, 100); }, Error);
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace g4c

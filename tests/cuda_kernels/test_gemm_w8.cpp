// Per-row INT8 table kernels (runtime/cuda/gemm_w8.cuh) vs float64 references formed from the
// same codes and scales: the LM head GEMM w8a16_gemm_f32 and the gather embed_gather_int8.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/cuda/gemm_w8.cuh"
#include "tests/cuda_kernels/gpu_util.h"

namespace g4c::gputest {
namespace {

// A table in the runtime/int8_rows.h format with random codes in [−127, 127] and scales, plus the
// rows the format can hold at the edges: row 0 the format's zero row (codes 0, scale 0), row 1
// random codes with scale 0, row 2 all +127, row 3 all −127, row 4 alternating ±127.
struct Int8Table {
  int n = 0, k = 0;
  std::vector<int8_t> q;
  std::vector<float> s;
  int code(int r, int c) const { return q[size_t(r) * k + c]; }
};

Int8Table make_table(std::mt19937_64& rng, int n, int k) {
  Int8Table t{n, k, std::vector<int8_t>(size_t(n) * k), std::vector<float>(n)};
  std::uniform_int_distribution<int> code(-127, 127);
  std::uniform_real_distribution<float> scale(1e-4f, 2e-2f);
  for (auto& c : t.q) c = int8_t(code(rng));
  for (auto& v : t.s) v = scale(rng);
  for (int c = 0; c < k; ++c) {
    t.q[c] = 0;
    t.q[size_t(2) * k + c] = 127;
    t.q[size_t(3) * k + c] = -127;
    t.q[size_t(4) * k + c] = int8_t(c & 1 ? -127 : 127);
  }
  t.s[0] = 0.f;
  t.s[1] = 0.f;
  return t;
}

struct DevTable {
  DevBuf<int8_t> q;
  DevBuf<float> s;
  explicit DevTable(const Int8Table& t) : q(t.q), s(t.s) {}
  cuda::Int8RowsWeight view(const Int8Table& t) const { return {q.p, s.p, t.n, t.k}; }
};

struct W8Case {
  int m, n, k;
};

// y = x · table^T in fp32 against a float64 reference from the same codes and scales, per element.
// Tolerance: bf16 · int8 products are exact in fp32 (8 + 8 significant bits), so the only errors
// are the fp32 accumulation — at most one rounding of the running sum per added term, each ≤
// 2^-23 relative if the tensor cores truncate instead of rounding, so ≤ 2·2^-24·k·Σ_k |x_k·q_k| —
// and one rounding of acc · scale (≤ 2^-24·|acc·scale|). Hence, with Σ = scale·Σ_k |x_k·q_k|:
//   |y − ref| ≤ (2k + 1)·2^-24·Σ  (+ 1e-30 for the exact-zero rows).
void run_w8(const W8Case& c, bool check_repeat = false) {
  SCOPED_TRACE("m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) + " k=" + std::to_string(c.k));
  std::mt19937_64 rng(test_seed() ^ (uint64_t(c.m) << 40) ^ (uint64_t(c.n) << 20) ^ uint64_t(c.k));
  const Int8Table t = make_table(rng, c.n, c.k);
  DevTable dt(t);
  const int ldx = c.k + 24;  // > k, % 8 == 0
  const long ldy = c.n + 5;  // > n, odd
  std::vector<bf16> x = rand_bf16(rng, size_t(c.m) * ldx, 1.f);
  DevBuf<bf16> dx(x);
  DevBuf<float> y(size_t(c.m) * ldy);
  poison(y.p, y.bytes());
  G4C_CUDA_OK(cuda::w8a16_gemm_f32(dx.p, c.m, ldx, dt.view(t), y.p, ldy, nullptr));
  G4C_CUDA_OK(cudaDeviceSynchronize());
  const std::vector<float> got = y.get();

  std::vector<double> xd(size_t(c.m) * c.k);
  for (int r = 0; r < c.m; ++r)
    for (int i = 0; i < c.k; ++i) xd[size_t(r) * c.k + i] = bf(x[size_t(r) * ldx + i]);
  std::vector<double> qd(c.k);
  size_t bad = 0;
  double worst = 0;  // largest |y − ref| / tolerance
  for (int j = 0; j < c.n; ++j) {
    for (int i = 0; i < c.k; ++i) qd[i] = t.code(j, i);
    const double s = t.s[j];
    for (int r = 0; r < c.m; ++r) {
      const double* xr = &xd[size_t(r) * c.k];
      double acc = 0, mag = 0;
      for (int i = 0; i < c.k; ++i) {
        acc += xr[i] * qd[i];
        mag += std::fabs(xr[i] * qd[i]);
      }
      const double ref = acc * s;
      const double tol = (2.0 * c.k + 1) * std::ldexp(s * mag, -24) + 1e-30;
      const double v = got[size_t(r) * ldy + j];
      const double err = std::fabs(v - ref);
      if (!(err <= tol)) {
        if (bad++ < 5) ADD_FAILURE() << "y[" << r << "][" << j << "] = " << v << ", ref " << ref << ", tol " << tol;
      } else {
        worst = std::max(worst, err / tol);
      }
    }
  }
  EXPECT_EQ(bad, 0u) << "elements outside the tolerance";
  // Columns n … ldy−1 are not written (still the 0xFF poison).
  size_t touched = 0;
  for (int r = 0; r < c.m; ++r)
    for (long j = c.n; j < ldy; ++j) {
      uint32_t u;
      std::memcpy(&u, &got[size_t(r) * ldy + j], 4);
      touched += u != 0xFFFFFFFFu;
    }
  EXPECT_EQ(touched, 0u) << "writes past n";
  std::fprintf(stderr, "  w8a16 m=%d n=%d k=%d: max |err| / tol = %.3g\n", c.m, c.n, c.k, worst);

  if (check_repeat) {  // fixed summation order: a second run, captured in a CUDA graph, is bit-identical
    DevBuf<float> y2(size_t(c.m) * ldy);
    poison(y2.p, y2.bytes());
    cudaStream_t st;
    G4C_CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    G4C_CUDA_OK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    const cudaError_t e = cuda::w8a16_gemm_f32(dx.p, c.m, ldx, dt.view(t), y2.p, ldy, st);
    G4C_CUDA_OK(cudaStreamEndCapture(st, &graph));
    G4C_CUDA_OK(e);
    G4C_CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    G4C_CUDA_OK(cudaGraphLaunch(exec, st));
    G4C_CUDA_OK(cudaStreamSynchronize(st));
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    G4C_CUDA_OK(cudaStreamDestroy(st));
    EXPECT_EQ(std::memcmp(y2.get().data(), got.data(), got.size() * 4), 0) << "graph replay differs from the eager run";
  }
}

TEST(GemmW8, DecodeRowsK256) {
  G4C_REQUIRE_GPU();
  for (int m : {1, 3, 16, 17, 33, 64, 65, 200})
    for (int n : {4100, 8192}) run_w8({m, n, 256});
}

TEST(GemmW8, LmHeadWidthK3840) {
  G4C_REQUIRE_GPU();
  for (int m : {1, 3, 16, 17, 33, 64, 65, 200}) run_w8({m, 4100, 3840});
  for (int m : {1, 17, 64}) run_w8({m, 8192, 3840});
}

TEST(GemmW8, DeterministicAndCapturable) {
  G4C_REQUIRE_GPU();
  run_w8({8, 4100, 3840}, true);
  run_w8({65, 4100, 256}, true);
}

TEST(GemmW8, RejectsBadArguments) {
  G4C_REQUIRE_GPU();
  DevBuf<int8_t> q(size_t(64) * 272);
  DevBuf<float> s(64), y(size_t(64) * 64);
  DevBuf<bf16> x(size_t(4) * 272);
  const cuda::Int8RowsWeight w{q.p, s.p, 64, 256};
  EXPECT_EQ(cuda::w8a16_gemm_f32(x.p, 0, 256, w, y.p, 64, nullptr), cudaSuccess);  // nothing to do
  EXPECT_EQ(cuda::w8a16_gemm_f32(x.p, 1, 260, w, y.p, 64, nullptr), cudaErrorInvalidValue);  // ldx % 8
  EXPECT_EQ(cuda::w8a16_gemm_f32(x.p, 1, 248, w, y.p, 64, nullptr), cudaErrorInvalidValue);  // ldx < k
  EXPECT_EQ(cuda::w8a16_gemm_f32(x.p, 1, 256, w, y.p, 63, nullptr), cudaErrorInvalidValue);  // ldy < n
  EXPECT_EQ(cuda::w8a16_gemm_f32(x.p, 1, 256, {q.p, s.p, 64, 264}, y.p, 64, nullptr), cudaErrorInvalidValue);  // k % 16
  EXPECT_EQ(cuda::w8a16_gemm_f32(x.p + 4, 1, 256, w, y.p, 64, nullptr), cudaErrorInvalidValue);  // x not 16-B aligned
  EXPECT_EQ(cuda::embed_gather_int8(nullptr, 0, w, 1.f, x.p, 256, nullptr), cudaSuccess);
  EXPECT_EQ(cuda::embed_gather_int8(reinterpret_cast<const int*>(s.p), 1, {q.p, s.p, 64, 252}, 1.f, x.p, 256, nullptr),
            cudaErrorInvalidValue);  // k % 8
  EXPECT_EQ(cuda::embed_gather_int8(reinterpret_cast<const int*>(s.p), 1, w, 1.f, x.p, 250, nullptr),
            cudaErrorInvalidValue);  // ldo
  G4C_CUDA_OK(cudaDeviceSynchronize());
}

// The gather: bit-exact against the host computing bf16_rn((float(code) · scale) · normalizer) in
// that fp32 order; ids outside [0, n) give +0 rows; columns k … ldo−1 stay untouched.
void run_embed(int n, int k, float normalizer) {
  SCOPED_TRACE("n=" + std::to_string(n) + " k=" + std::to_string(k) + " normalizer=" + std::to_string(normalizer));
  std::mt19937_64 rng(test_seed() ^ (uint64_t(n) << 32) ^ uint64_t(k));
  const Int8Table t = make_table(rng, n, k);
  DevTable dt(t);
  std::vector<int> ids = {0, 1, 2, 3, 4, n - 1, -1, n, 1 << 30, -(1 << 30)};
  std::uniform_int_distribution<int> id(0, n - 1);
  for (int i = 0; i < 54; ++i) ids.push_back(id(rng));
  const int tn = int(ids.size());
  const int ldo = k + 16;
  DevBuf<int> dids(ids);
  DevBuf<bf16> out(size_t(tn) * ldo);
  poison(out.p, out.bytes());
  G4C_CUDA_OK(cuda::embed_gather_int8(dids.p, tn, dt.view(t), normalizer, out.p, ldo, nullptr));
  G4C_CUDA_OK(cudaDeviceSynchronize());
  const std::vector<bf16> got = out.get();
  size_t bad = 0;
  for (int i = 0; i < tn; ++i) {
    const bool in = ids[i] >= 0 && ids[i] < n;
    for (int c = 0; c < ldo; ++c) {
      uint16_t want = 0xFFFFu;  // padding: poison
      if (c < k) {
        if (in) {
          const float v = float(t.code(ids[i], c)) * t.s[ids[i]];
          const bf16 o = tobf(v * normalizer);
          std::memcpy(&want, &o, 2);
        } else {
          want = 0;
        }
      }
      uint16_t g;
      std::memcpy(&g, &got[size_t(i) * ldo + c], 2);
      if (g != want && bad++ < 5) ADD_FAILURE() << "token " << i << " (id " << ids[i] << ") col " << c << ": 0x" << std::hex << g << " want 0x" << want;
    }
  }
  EXPECT_EQ(bad, 0u);
}

TEST(GemmW8, EmbedGatherBitExact) {
  G4C_REQUIRE_GPU();
  run_embed(1000, 3840, 62.f);  // Gemma-4-12B: hidden 3840, bf16(√3840) = 62
  run_embed(333, 256, 0.70710678f);
  run_embed(64, 8, 1.f);
}

}  // namespace
}  // namespace g4c::gputest

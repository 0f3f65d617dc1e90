// W4A16 / BF16 GEMM kernels vs float64 CPU references (DESIGN.md §3 INT4 math).
#include <algorithm>
#include <functional>
#include <memory>
#include <string>

#include "runtime/cuda/gemm.cuh"
#include "tests/cuda_kernels/gpu_util.h"

namespace g4c::gputest {
namespace {

using cuda::Epilogue;

struct DevInt4 {
  DevBuf<uint8_t> q, z;
  DevBuf<uint16_t> s;
  explicit DevInt4(const Int4Src& w) : q(w.q), z(w.z), s(w.s) {}
};

double gelu(double x) { return 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }

// Reference y (double) for Store/ResidualAdd (one weight) or GeluMul (gate, up).
std::vector<double> ref_linear(const std::vector<bf16>& x, int m, int k,
                               const std::function<double(int, int)>& w, int n) {
  std::vector<double> y(size_t(m) * n);
  std::vector<double> wr(k);
  for (int r = 0; r < n; ++r) {
    for (int c = 0; c < k; ++c) wr[c] = w(r, c);
    for (int i = 0; i < m; ++i) {
      double acc = 0;
      for (int c = 0; c < k; ++c) acc += double(bf(x[size_t(i) * k + c])) * wr[c];
      y[size_t(i) * n + r] = acc;
    }
  }
  return y;
}

struct Int4Case {
  int m, n, k, group;
  bool asym, sbf16;
  Epilogue ep;
  bool wgmma = false;  // w4a16_gemm_wgmma (the wgmma kernel at any m) instead of w4a16_gemm
};

std::string name(const Int4Case& c) {
  char b[160];
  std::snprintf(b, sizeof b, "m=%d n=%d k=%d g=%d %s %s ep=%d%s", c.m, c.n, c.k, c.group,
                c.asym ? "asym" : "sym", c.sbf16 ? "bf16-scales" : "fp16-scales", int(c.ep), c.wgmma ? " wgmma" : "");
  return b;
}

void run_int4(const Int4Case& c, double bound) {
  SCOPED_TRACE(name(c));
  std::mt19937_64 rng(test_seed() ^ (uint64_t(c.m) << 40) ^ (uint64_t(c.n) << 20) ^ c.k);
  const bool pair = c.ep == Epilogue::GeluMul;
  Int4Src ws = make_int4(rng, c.n, c.k, c.group, c.asym, c.sbf16);
  Int4Src wu = pair ? make_int4(rng, c.n, c.k, c.group, c.asym, c.sbf16) : Int4Src{};
  DevInt4 dg(ws);
  std::unique_ptr<DevInt4> du(pair ? new DevInt4(wu) : nullptr);
  DevBuf<uint8_t> packed(cuda::int4_repacked_bytes(pair ? 2 * c.n : c.n, c.k, c.group, c.asym));
  cuda::Int4Weight w = cuda::int4_repack(
      dg.q.p, dg.s.p, c.asym ? dg.z.p : nullptr, pair ? du->q.p : nullptr,
      pair ? du->s.p : nullptr, pair && c.asym ? du->z.p : nullptr, c.sbf16, c.n, c.k, c.group,
      packed.p, nullptr);
  G4C_CUDA_OK(cudaGetLastError());

  std::vector<bf16> x = rand_bf16(rng, size_t(c.m) * c.k, 1.f);
  DevBuf<bf16> dx(x);
  std::vector<double> ref = ref_linear(x, c.m, c.k, [&](int r, int col) { return ws.w(r, col); }, c.n);
  const bool resid = c.ep == Epilogue::ResidualAdd;
  std::vector<bf16> res = resid ? rand_bf16(rng, size_t(c.m) * c.n, 1.f) : std::vector<bf16>{};
  DevBuf<bf16> dres(res);
  for (size_t i = 0; i < res.size(); ++i) ref[i] += bf(res[i]);
  if (pair) {
    std::vector<double> up = ref_linear(x, c.m, c.k, [&](int r, int col) { return wu.w(r, col); }, c.n);
    for (size_t i = 0; i < ref.size(); ++i) ref[i] = gelu(ref[i]) * up[i];
  }
  DevBuf<bf16> y(size_t(c.m) * c.n);
  const size_t wsb = cuda::w4a16_workspace_bytes(c.m, w);
  DevBuf<uint8_t> wsbuf(std::max<size_t>(wsb, 1));
  G4C_CUDA_OK(cudaMemset(wsbuf.p, 0, wsbuf.bytes()));
  cuda::GemmOut o;
  o.y = y.p;
  o.ldy = c.n;
  o.residual = dres.p;
  o.ldr = c.n;
  for (int rep = 0; rep < 2; ++rep) {  // twice: split-K tickets must reset themselves
    poison(y.p, y.bytes());
    if (c.wgmma)
      G4C_CUDA_OK(cuda::w4a16_gemm_wgmma(dx.p, c.m, c.k, w, c.ep, o, nullptr));
    else
      G4C_CUDA_OK(cuda::w4a16_gemm(dx.p, c.m, c.k, w, c.ep, o, wsbuf.p, wsb, nullptr));
    G4C_CUDA_OK(cudaDeviceSynchronize());
    size_t bad = 0;
    const double err = rel_err(ref, to_float(y.get()), &bad);
    EXPECT_EQ(bad, 0u) << "non-finite outputs (unwritten or NaN), rep " << rep;
    EXPECT_LT(err, bound) << "rep " << rep;
    if (rep == 0) std::fprintf(stderr, "[w4a16] %s rel_err %.3e\n", name(c).c_str(), err);
  }

  // The repack round-trips exactly: dequantized bf16 == bf16((code−z)·bf16(s)).
  if (!pair) {
    DevBuf<bf16> dq(size_t(c.n) * c.k);
    poison(dq.p, dq.bytes());
    G4C_CUDA_OK(cuda::int4_dequantize(w, dq.p, nullptr));
    std::vector<bf16> h = dq.get();
    size_t mism = 0;
    for (int r = 0; r < c.n; ++r)
      for (int col = 0; col < c.k; ++col) {
        const size_t gi = size_t(r) * (ws.kp / c.group) + col / c.group;
        const double zero = c.asym ? ws.z[gi] : 8;
        const int code = (ws.q[size_t(r) * (ws.kp / 2) + col / 2] >> (4 * (col & 1))) & 15;
        const float expect = rbf(float(code - zero) * rbf(float(ws.scale(gi))));
        const float got = bf(h[size_t(r) * c.k + col]);
        if (!(got == expect)) ++mism;
      }
    EXPECT_EQ(mism, 0u) << "dequantized elements differing from the lab-format math";
  }
}

// Tolerance: outputs are bf16 (rounding ≤ 2^-9 relative, RMS ≈ 1.1e-3); the kernel also rounds
// each dequantized weight (code−z)·s to bf16 (same size, averaged over k) and fp16 scales to
// bf16 (≤ 2^-9 per group). Together ≈ 2e-3 RMS; 6e-3 leaves room for unlucky draws, far below
// what a wrong nibble, group or row (errors ≈ 1) would give.
constexpr double kInt4Bound = 6e-3;
// gelu(g)·u multiplies two such outputs and gelu's slope amplifies them near zero.
constexpr double kGeluBound = 1.2e-2;

TEST(GpuW4A16, DecodeShapesSymAsym) {
  G4C_REQUIRE_GPU();
  run_int4({1, 200, 328, 64, false, false, Epilogue::Store}, kInt4Bound);     // n, k tails
  run_int4({5, 512, 1000, 128, true, true, Epilogue::Store}, kInt4Bound);     // k % G != 0
  run_int4({16, 96, 3840, 128, true, false, Epilogue::Store}, kInt4Bound);    // two n8 tiles
  run_int4({9, 48, 776, 64, false, true, Epilogue::ResidualAdd}, kInt4Bound);
}

TEST(GpuW4A16, DecodeSplitK) {
  G4C_REQUIRE_GPU();
  // n small, k large → many k splits with the last-block reduction.
  run_int4({3, 64, 4096, 128, false, true, Epilogue::Store}, kInt4Bound);
  run_int4({8, 130, 15360, 128, true, false, Epilogue::Store}, kInt4Bound);
  run_int4({12, 72, 6000, 64, true, true, Epilogue::ResidualAdd}, kInt4Bound);  // G 64, k tail
}

TEST(GpuW4A16, DecodeGateUp) {
  G4C_REQUIRE_GPU();
  run_int4({13, 136, 520, 64, true, true, Epilogue::GeluMul}, kGeluBound);
  run_int4({1, 40, 256, 128, false, false, Epilogue::GeluMul}, kGeluBound);
}

void prefill_cases() {
  run_int4({77, 300, 776, 128, true, true, Epilogue::ResidualAdd}, kInt4Bound);  // m, n tails
  run_int4({130, 1024, 2048, 128, false, true, Epilogue::Store}, kInt4Bound);
  run_int4({17, 64, 200, 64, false, false, Epilogue::Store}, kInt4Bound);       // decode kernel, 32-token tiles
  // 17–32 rows with 2048 ≤ n ≤ 8192: the wgmma kernel on a whole GPU, the decode kernel in a slice
  // (w4a16_rows_take_wgmma)
  run_int4({24, 2048, 1000, 128, true, true, Epilogue::ResidualAdd}, kInt4Bound);
  // 32 < m < 64: the wgmma kernel's 64-token tile
  run_int4({33, 64, 200, 64, false, false, Epilogue::Store}, kInt4Bound);
  run_int4({48, 300, 776, 128, true, true, Epilogue::ResidualAdd}, kInt4Bound);
  run_int4({63, 136, 520, 64, true, false, Epilogue::GeluMul}, kGeluBound);
  run_int4({200, 264, 1024, 64, true, false, Epilogue::GeluMul}, kGeluBound);
  run_int4({64, 136, 328, 64, false, true, Epilogue::Store}, kInt4Bound);       // m = 64 exactly
  run_int4({300, 160, 8200, 128, true, false, Epilogue::Store}, kInt4Bound);    // long k
  // odd n and odd row strides: the paired bf16x2 stores must fall back to single elements
  run_int4({70, 301, 264, 64, true, true, Epilogue::ResidualAdd}, kInt4Bound);
  // whole 256-token and 128-row tiles next to tails: the register-A kernel's straight-line
  // epilogue (full tiles) and its tested one (the rest) in one launch, per epilogue kind
  run_int4({300, 264, 512, 64, true, false, Epilogue::ResidualAdd}, kInt4Bound);
  run_int4({260, 136, 384, 128, false, true, Epilogue::GeluMul}, kGeluBound);
}

TEST(GpuW4A16, PrefillTiles) {
  G4C_REQUIRE_GPU();
  prefill_cases();
}

// Split-K of the register-A kernel: rs_plan (gemm.cu) splits k over clusters of 2 / 4 blocks per
// tile when few tiles meet a long k — on 132 SMs these two shapes take 128 × 2 and 128 × 4 (4 and
// 4 tiles, 24 and 64 k chunks); partial tiles summed through distributed shared memory.
TEST(GpuW4A16, PrefillSplitK) {
  G4C_REQUIRE_GPU();
  run_int4({256, 256, 1536, 128, true, true, Epilogue::ResidualAdd}, kInt4Bound);
  run_int4({256, 256, 4096, 64, false, false, Epilogue::Store}, kInt4Bound);
  run_int4({200, 136, 4096, 128, true, false, Epilogue::GeluMul}, kGeluBound);
}

// The wgmma kernel's 32- and 64-token tiles (batches of ≤ 32 / ≤ 64 rows): rows past m in the
// tile (TMA zero fill, the tested epilogue), full tiles (the straight-line epilogue, each kind),
// split-K (n small, k long: clusters of 2 / 4 blocks), n and k tails.
TEST(GpuW4A16, NarrowWgmmaTiles) {
  G4C_REQUIRE_GPU();
  run_int4({1, 200, 328, 64, false, false, Epilogue::Store, true}, kInt4Bound);
  run_int4({17, 300, 776, 128, true, true, Epilogue::ResidualAdd, true}, kInt4Bound);
  run_int4({32, 256, 1024, 128, false, true, Epilogue::ResidualAdd, true}, kInt4Bound);
  run_int4({32, 136, 520, 64, true, false, Epilogue::GeluMul, true}, kGeluBound);
  run_int4({32, 512, 2048, 128, true, false, Epilogue::Store, true}, kInt4Bound);
  run_int4({33, 64, 4096, 128, false, true, Epilogue::Store, true}, kInt4Bound);
  run_int4({48, 130, 15360, 128, true, false, Epilogue::Store, true}, kInt4Bound);
  run_int4({64, 264, 1024, 64, true, false, Epilogue::GeluMul, true}, kGeluBound);
  run_int4({64, 384, 3840, 128, false, false, Epilogue::ResidualAdd, true}, kInt4Bound);
  run_int4({24, 72, 6000, 64, true, true, Epilogue::ResidualAdd, true}, kInt4Bound);
}

// More tiles than SMs (256 tiles of 128 × 128 on 132 SMs, more on the 16-SM slice): each block of
// the persistent grid loops over several tiles, so the stage ring and its barrier phases carry
// over from one tile to the next (k chunks per tile not a multiple of the stages).
TEST(GpuW4A16, PrefillPersistentLoop) {
  G4C_REQUIRE_GPU();
  run_int4({512, 8192, 264, 64, true, false, Epilogue::Store}, kInt4Bound);
}

// Small cases for compute-sanitizer memcheck (scripts/gpu/test.sh): tails, GeluMul, odd strides,
// one split-K shape.
TEST(GpuW4A16, SanitizerSmall) {
  G4C_REQUIRE_GPU();
  run_int4({77, 300, 776, 128, true, true, Epilogue::ResidualAdd}, kInt4Bound);
  run_int4({70, 301, 264, 64, false, false, Epilogue::Store}, kInt4Bound);
  run_int4({130, 72, 520, 64, true, false, Epilogue::GeluMul}, kGeluBound);
  run_int4({256, 256, 1536, 128, true, true, Epilogue::ResidualAdd}, kInt4Bound);
}

// ---------------------------------------------------------------- BF16 weights
struct Bf16Case {
  int m, n, k;
  Epilogue ep;
};

void run_bf16(const Bf16Case& c, double bound) {
  char nm[96];
  std::snprintf(nm, sizeof nm, "bf16 m=%d n=%d k=%d ep=%d", c.m, c.n, c.k, int(c.ep));
  SCOPED_TRACE(nm);
  std::mt19937_64 rng(test_seed() ^ 0xbf16 ^ (uint64_t(c.m) << 32) ^ c.n);
  const bool pair = c.ep == Epilogue::GeluMul;
  const int rows = pair ? 2 * c.n : c.n;
  std::vector<bf16> wg = rand_bf16(rng, size_t(c.n) * c.k, 0.05f);
  std::vector<bf16> wu = pair ? rand_bf16(rng, size_t(c.n) * c.k, 0.05f) : std::vector<bf16>{};
  std::vector<bf16> x = rand_bf16(rng, size_t(c.m) * c.k, 1.f);
  DevBuf<bf16> dwg(wg), dwu(wu), dx(x), dpair(pair ? size_t(rows) * c.k : 0);
  cuda::Bf16Weight w{dwg.p, c.n, c.k, c.k, false};
  if (pair) {
    cuda::interleave_gate_up_bf16(dwg.p, dwu.p, c.n, c.k, dpair.p, nullptr);
    w = cuda::Bf16Weight{dpair.p, rows, c.k, c.k, true};
  }
  auto wf = [&](const std::vector<bf16>& W) {
    return [&W, k = c.k](int r, int col) { return double(bf(W[size_t(r) * k + col])); };
  };
  std::vector<double> ref = ref_linear(x, c.m, c.k, wf(wg), c.n);
  if (pair) {
    std::vector<double> up = ref_linear(x, c.m, c.k, wf(wu), c.n);
    for (size_t i = 0; i < ref.size(); ++i) ref[i] = gelu(ref[i]) * up[i];
  }
  const float cap = 30.f;
  if (c.ep == Epilogue::SoftcapF32)
    for (auto& v : ref) v = cap * std::tanh(v / cap);
  const bool resid = c.ep == Epilogue::ResidualAdd;
  std::vector<bf16> res = resid ? rand_bf16(rng, size_t(c.m) * c.n, 1.f) : std::vector<bf16>{};
  DevBuf<bf16> dres(res);
  for (size_t i = 0; i < res.size(); ++i) ref[i] += bf(res[i]);
  const bool f32 = c.ep == Epilogue::SoftcapF32;
  DevBuf<float> yf(f32 ? size_t(c.m) * c.n : 0);
  DevBuf<bf16> yb(f32 ? 0 : size_t(c.m) * c.n);
  cuda::GemmOut o;
  o.y = f32 ? static_cast<void*>(yf.p) : static_cast<void*>(yb.p);
  o.ldy = c.n;
  o.softcap = cap;
  o.residual = dres.p;
  o.ldr = c.n;
  if (f32) poison(yf.p, yf.bytes()); else poison(yb.p, yb.bytes());
  G4C_CUDA_OK(cuda::bf16_gemm(dx.p, c.m, c.k, w, c.ep, o, nullptr));
  G4C_CUDA_OK(cudaDeviceSynchronize());
  size_t bad = 0;
  const double err = rel_err(ref, f32 ? yf.get() : to_float(yb.get()), &bad);
  EXPECT_EQ(bad, 0u);
  EXPECT_LT(err, bound);
  std::fprintf(stderr, "[bf16] %s rel_err %.3e\n", nm, err);
}

void bf16_cases();
// m ≤ 16 and 16 < m < 64: the mma.sync tile kernels; m ≥ 64: wgmma (128- and 256-token tiles by
// shape).
TEST(GpuBf16Gemm, ShapesAndEpilogues) {
  G4C_REQUIRE_GPU();
  bf16_cases();
}

void bf16_cases() {
  // bf16 products are exact in fp32; only fp32 accumulation (~k·2^-24) and the final bf16
  // rounding (RMS ≈ 1.1e-3) remain: 4e-3 for bf16 outputs.
  run_bf16({1, 1000, 264, Epilogue::Store}, 4e-3);
  run_bf16({16, 333, 136, Epilogue::Store}, 4e-3);
  run_bf16({150, 300, 200, Epilogue::Store}, 4e-3);
  run_bf16({70, 72, 520, Epilogue::GeluMul}, 1e-2);
  // fp32 logits: no output rounding; fp32 accumulation error ≤ ~1e-6 relative → 1e-4.
  run_bf16({3, 777, 264, Epilogue::SoftcapF32}, 1e-4);
  run_bf16({40, 2000, 64, Epilogue::SoftcapF32}, 1e-4);
  run_bf16({300, 520, 136, Epilogue::SoftcapF32}, 1e-4);  // m ≥ 64: wgmma path by default
  run_bf16({257, 136, 1000, Epilogue::Store}, 4e-3);
  // whole 256-token / 128-row tiles next to tails (the straight-line epilogue)
  run_bf16({300, 264, 136, Epilogue::ResidualAdd}, 4e-3);
  run_bf16({260, 136, 264, Epilogue::GeluMul}, 1e-2);
  run_bf16({260, 256, 8192, Epilogue::Store}, 4e-3);  // m ≥ 256, k ≥ 8192: 256-token tiles
}

}  // namespace
}  // namespace g4c::gputest

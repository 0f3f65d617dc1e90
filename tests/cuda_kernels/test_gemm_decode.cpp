// W4A16 decode streaming kernels (runtime/cuda/gemm_decode.cu), each variant, vs a float64 CPU
// reference of the lab-format INT4 math (DESIGN.md §3): awkward shapes (n, k tails, k not a
// multiple of the group), sym/asym, fp16/bf16 scales, group 64/128, all epilogues, output
// poisoned before each run, and grids forced small (many units and partial tiles per warp) and
// activation budgets forced small (many k splits through the fp32 workspace), in both
// summation modes. The deterministic mode must also give bitwise the same output
// run after run.
#include <algorithm>
#include <utility>
#include <cstring>
#include <functional>
#include <memory>
#include <string>

#include "runtime/cuda/gemm_decode.cuh"
#include "tests/cuda_kernels/gpu_util.h"

namespace g4c::gputest {
namespace {

using cuda::Epilogue;

std::vector<double> reference(const std::vector<bf16>& x, int m, const Int4Src& w) {
  std::vector<double> y(size_t(m) * w.n), wr(w.k);
  for (int r = 0; r < w.n; ++r) {
    for (int c = 0; c < w.k; ++c) wr[c] = w.w(r, c);
    for (int i = 0; i < m; ++i) {
      double acc = 0;
      for (int c = 0; c < w.k; ++c) acc += double(bf(x[size_t(i) * w.k + c])) * wr[c];
      y[size_t(i) * w.n + r] = acc;
    }
  }
  return y;
}

double gelu(double v) { return 0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))); }

struct Case {
  int m, n, k, group;
  bool asym, sbf16;
  Epilogue ep;
};

// Tolerances as tests/cuda_kernels/test_gemm.cpp: bf16 outputs (≤ 2^-9 relative each, RMS ≈ 1.1e-3)
// and fp16 → bf16 scale rounding (≤ 2^-9 per group); the (code − z) products are exact here
// and accumulate in fp32. 6e-3 leaves room for unlucky draws, far below a wrong nibble, group,
// row or split (errors ≈ 1). gelu(g)·u multiplies two such outputs: 1.2e-2.
constexpr double kBound = 6e-3;
constexpr double kGeluBound = 1.2e-2;

// One case on the device: source weights, repacked weight, input, residual and the reference.
struct Prepared {
  Case c;
  bool pair;
  Int4Src wg, wu;
  DevBuf<uint8_t> gq, gz, uq, uz;
  DevBuf<uint16_t> gs, us;
  DevBuf<uint8_t> packed;
  cuda::Int4Weight w;
  std::vector<bf16> x, res;
  DevBuf<bf16> dx, dres, y;
  std::vector<double> ref;
  cuda::GemmOut o;

  static Int4Src make(const Case& c, std::mt19937_64& rng, bool on) {
    return on ? make_int4(rng, c.n, c.k, c.group, c.asym, c.sbf16) : Int4Src{};
  }
  Prepared(const Case& cs, std::mt19937_64& rng)
      : c(cs), pair(cs.ep == Epilogue::GeluMul), wg(make(cs, rng, true)), wu(make(cs, rng, pair)),
        gq(wg.q), gz(wg.z), uq(wu.q), uz(wu.z), gs(wg.s), us(wu.s),
        packed(cuda::int4_repacked_bytes(pair ? 2 * cs.n : cs.n, cs.k, cs.group, cs.asym)),
        x(rand_bf16(rng, size_t(cs.m) * cs.k, 1.f)),
        res(cs.ep == Epilogue::ResidualAdd ? rand_bf16(rng, size_t(cs.m) * cs.n, 1.f) : std::vector<bf16>{}),
        dx(x), dres(res), y(size_t(cs.m) * cs.n) {
    w = cuda::int4_repack(gq.p, gs.p, c.asym ? gz.p : nullptr, pair ? uq.p : nullptr, pair ? us.p : nullptr,
                          pair && c.asym ? uz.p : nullptr, c.sbf16, c.n, c.k, c.group, packed.p, nullptr);
    ref = reference(x, c.m, wg);
    for (size_t i = 0; i < res.size(); ++i) ref[i] += bf(res[i]);
    if (pair) {
      const std::vector<double> up = reference(x, c.m, wu);
      for (size_t i = 0; i < ref.size(); ++i) ref[i] = gelu(ref[i]) * up[i];
    }
    o.y = y.p;
    o.ldy = c.n;
    o.residual = dres.p;
    o.ldr = c.n;
  }
  double bound() const { return pair ? kGeluBound : kBound; }
  // Error of the output y after a run; non-finite (unwritten, NaN) entries counted in `bad`.
  double error(size_t* bad) const { return rel_err(ref, to_float(y.get()), bad); }
};

std::string case_name(const Case& c) {
  char nm[160];
  std::snprintf(nm, sizeof nm, "m=%d n=%d k=%d g=%d %s %s ep=%d", c.m, c.n, c.k, c.group,
                c.asym ? "asym" : "sym", c.sbf16 ? "bf16-scales" : "fp16-scales", int(c.ep));
  return nm;
}
uint64_t case_seed(const Case& c) {
  return test_seed() ^ 0xdec0de ^ (uint64_t(c.m) << 40) ^ (uint64_t(c.n) << 20) ^ uint64_t(c.k);
}
// Workspace for every variant, both modes, under each of `tunings` (grid, activation budget).
template <size_t N>
size_t workspace_all(const cuda::Int4Weight& w, const cuda::DecodeTuning (&tunings)[N]) {
  size_t b = 0;
  for (cuda::DecodeTuning tu : tunings)
    for (tu.variant = 0; tu.variant < cuda::w4a16_decode_num_variants(); ++tu.variant)
      for (bool det : {false, true}) {
        tu.deterministic = det;
        b = std::max(b, cuda::w4a16_decode_workspace_bytes(w, tu));
      }
  return b;
}
cuda::DecodeTuning tuning(int sms, int xcap, bool det = false, bool no_block_sums = false) {
  cuda::DecodeTuning t;
  t.sms = sms;
  t.xcap = xcap;
  t.deterministic = det;
  t.no_block_sums = no_block_sums;
  t.whole_tiles = 0;  // arrival order when not det (the whole-tile rule picks the det kernels)
  return t;
}
bool all_zero(const DevBuf<uint8_t>& b) {
  const std::vector<uint8_t> h = b.get();
  return std::count(h.begin(), h.end(), uint8_t(0)) == std::ptrdiff_t(h.size());
}

void run_case(const Case& c) {
  const std::string nm = case_name(c);
  SCOPED_TRACE(nm);
  std::mt19937_64 rng(case_seed(c));
  Prepared p(c, rng);
  G4C_CUDA_OK(cudaGetLastError());
  // Grid tunings: the stream's SMs; 3 SMs (many units, tile changes and partial tiles per
  // warp); 2 SMs with a 4 KB activation budget (k cut into many splits); 40 SMs with an 8 KB
  // budget (tiles shared by several blocks in each of several splits); 3 SMs with every tile
  // through the workspace (what the kernel does when its block-local sums do not fit).
  // Each also in deterministic mode.
  const cuda::DecodeTuning tunings[] = {tuning(0, 0),          tuning(3, 0),          tuning(2, 4096),
                                        tuning(40, 8192),      tuning(3, 0, false, true), tuning(0, 0, true),
                                        tuning(3, 0, true),    tuning(2, 4096, true), tuning(40, 8192, true)};
  const size_t wsb = workspace_all(p.w, tunings);
  DevBuf<uint8_t> wsbuf(wsb);
  G4C_CUDA_OK(cudaMemset(wsbuf.p, 0, wsb));
  for (int v = 0; v < cuda::w4a16_decode_num_variants(); ++v) {
    if (c.m > cuda::w4a16_decode_variant_info(v).max_m) continue;  // the 16-warp variant: m <= 16
    for (cuda::DecodeTuning tu : tunings) {
      tu.variant = v;
      for (int rep = 0; rep < 2; ++rep) {  // twice: counters and partial sums must reset
        poison(p.y.p, p.y.bytes());
        G4C_CUDA_OK(cuda::w4a16_decode(p.dx.p, c.m, c.k, p.w, c.ep, p.o, wsbuf.p, wsb, tu, nullptr));
        G4C_CUDA_OK(cudaDeviceSynchronize());
        size_t bad = 0;
        const double err = p.error(&bad);
        EXPECT_EQ(bad, 0u) << "non-finite outputs (unwritten or NaN): variant " << v << " sms " << tu.sms
                           << " xcap " << tu.xcap << " det " << tu.deterministic << " rep " << rep;
        EXPECT_LT(err, p.bound()) << "variant " << v << " sms " << tu.sms << " xcap " << tu.xcap << " det "
                                  << tu.deterministic << " rep " << rep;
        if (rep == 0 && tu.sms == 0 && tu.xcap == 0 && !tu.deterministic)
          std::fprintf(stderr, "[w4dec] v%d %s rel_err %.3e\n", v, nm.c_str(), err);
      }
      // The workspace is left zero (the next GEMM sharing it relies on that).
      EXPECT_TRUE(all_zero(wsbuf)) << "workspace not left zero: variant " << v << " sms " << tu.sms
                                   << " xcap " << tu.xcap << " det " << tu.deterministic;
    }
  }
}

TEST(GpuW4Decode, ShapesSymAsym) {
  G4C_REQUIRE_GPU();
  run_case({1, 200, 328, 64, false, false, Epilogue::Store});    // n, k tails
  run_case({2, 64, 256, 128, true, true, Epilogue::Store});      // one group-128 per split
  run_case({4, 520, 1000, 128, true, true, Epilogue::Store});    // k % G != 0
  run_case({5, 512, 1000, 128, false, false, Epilogue::Store});
  run_case({16, 96, 3840, 128, true, false, Epilogue::Store});   // two n8 token tiles
  run_case({9, 48, 776, 64, false, true, Epilogue::ResidualAdd});
  run_case({17, 96, 3840, 128, true, false, Epilogue::Store});   // four n8 token tiles, 15 idle rows
  run_case({32, 520, 1000, 128, false, true, Epilogue::ResidualAdd});  // four full token tiles
}

TEST(GpuW4Decode, LongK) {
  G4C_REQUIRE_GPU();
  run_case({3, 64, 4096, 128, false, true, Epilogue::Store});
  run_case({8, 130, 15360, 128, true, false, Epilogue::Store});
  run_case({12, 72, 6000, 64, true, true, Epilogue::ResidualAdd});  // G 64, k tail
  run_case({32, 130, 15360, 128, true, false, Epilogue::Store});
}

TEST(GpuW4Decode, GateUp) {
  G4C_REQUIRE_GPU();
  run_case({13, 136, 520, 64, true, true, Epilogue::GeluMul});
  run_case({1, 40, 256, 128, false, false, Epilogue::GeluMul});
  run_case({8, 264, 3840, 128, false, true, Epilogue::GeluMul});
  run_case({24, 136, 520, 64, true, true, Epilogue::GeluMul});
}

// Units · blocks per split would pass 2^31 (the kernel's 32-bit range split): the plan takes
// fewer blocks per split there. 2^16 tiles of one group on a grid sized for 2^17 SMs: 2^33.
TEST(GpuW4Decode, WideRangeSplit) {
  G4C_REQUIRE_GPU();
  const Case c{1, 1 << 20, 128, 128, false, true, Epilogue::Store};
  std::mt19937_64 rng(case_seed(c));
  Prepared p(c, rng);
  const cuda::DecodeTuning tunings[] = {tuning(1 << 17, 0), tuning(1 << 17, 0, true)};
  const size_t wsb = workspace_all(p.w, tunings);
  DevBuf<uint8_t> wsbuf(wsb);
  G4C_CUDA_OK(cudaMemset(wsbuf.p, 0, wsb));
  for (int v = 0; v < cuda::w4a16_decode_num_variants(); ++v)
    for (cuda::DecodeTuning tu : tunings) {
      tu.variant = v;
      poison(p.y.p, p.y.bytes());
      G4C_CUDA_OK(cuda::w4a16_decode(p.dx.p, c.m, c.k, p.w, c.ep, p.o, wsbuf.p, wsb, tu, nullptr));
      G4C_CUDA_OK(cudaDeviceSynchronize());
      size_t bad = 0;
      const double err = p.error(&bad);
      EXPECT_EQ(bad, 0u) << "variant " << v << " det " << tu.deterministic;
      EXPECT_LT(err, p.bound()) << "variant " << v << " det " << tu.deterministic;
      EXPECT_TRUE(all_zero(wsbuf)) << "variant " << v << " det " << tu.deterministic;
    }
}

// The runtime shares one workspace (sized w4a16_workspace_bytes(kDecodeMaxRows, ·, its KernelOptions),
// zeroed once) between all INT4 GEMMs, and the kernels w4a16_gemm dispatches to by shape and
// mode each must leave it zero for the others. Launches through w4a16_gemm (arrival-order and
// deterministic mode) and forced small grids of each variant alternate on one workspace; every
// output is checked and the workspace must end zero.
TEST(GpuW4Decode, WorkspaceSharedByKernels) {
  G4C_REQUIRE_GPU();
  const Case ca{24, 130, 15360, 128, true, false, Epilogue::Store};      // many k splits, 32-token slots
  const Case cb{5, 520, 1000, 128, false, true, Epilogue::ResidualAdd};  // partial tiles
  std::mt19937_64 ra(case_seed(ca)), rb(case_seed(cb));
  Prepared a(ca, ra), b(cb, rb);
  cuda::KernelOptions det;
  det.deterministic = true;  // the runtime sizes its workspace in the mode it runs
  const size_t wsb = std::max(cuda::w4a16_workspace_bytes(cuda::kDecodeMaxRows, a.w, det),
                              cuda::w4a16_workspace_bytes(cuda::kDecodeMaxRows, b.w, det));
  DevBuf<uint8_t> ws(wsb);
  G4C_CUDA_OK(cudaMemset(ws.p, 0, wsb));
  cuda::DecodeTuning small;
  small.sms = 3;  // partial tiles through the workspace
  for (int rep = 0; rep < 6; ++rep) {
    small.variant = rep % cuda::w4a16_decode_num_variants();
    small.deterministic = rep % 2 == 1;
    {
      cuda::KernelOptions ko;
      ko.deterministic = rep % 2 == 0;
      poison(a.y.p, a.y.bytes());
      G4C_CUDA_OK(cuda::w4a16_gemm(a.dx.p, ca.m, ca.k, a.w, ca.ep, a.o, ws.p, wsb, nullptr, ko));
      G4C_CUDA_OK(cudaDeviceSynchronize());
      size_t bad = 0;
      EXPECT_LT(a.error(&bad), a.bound()) << "w4a16_gemm, rep " << rep;
      EXPECT_EQ(bad, 0u);
      EXPECT_TRUE(all_zero(ws)) << "w4a16_gemm left the workspace non-zero, rep " << rep;
    }
    poison(b.y.p, b.y.bytes());
    G4C_CUDA_OK(cuda::w4a16_decode(b.dx.p, cb.m, cb.k, b.w, cb.ep, b.o, ws.p, wsb, small, nullptr));
    G4C_CUDA_OK(cudaDeviceSynchronize());
    size_t bad = 0;
    EXPECT_LT(b.error(&bad), b.bound()) << "variant " << small.variant << ", rep " << rep;
    EXPECT_EQ(bad, 0u);
    EXPECT_TRUE(all_zero(ws)) << "variant " << small.variant << " left the workspace non-zero, rep " << rep;
  }
}

// w4a16_gemm's choice: a valid variant for every m in 1 … kDecodeMaxRows that runs m rows.
TEST(GpuW4Decode, DispatchChoice) {
  cuda::Int4Weight q;
  q.n = 4096; q.k = 3840; q.kp = 3840; q.group = 128;
  cuda::Int4Weight gu = q;
  gu.n = 30720;
  for (int m = 1; m <= cuda::kDecodeMaxRows; ++m)
    for (const cuda::Int4Weight& w : {q, gu})
      for (int sms : {16, 132}) {
        const int v = cuda::w4a16_decode_choice(m, w, sms);
        ASSERT_TRUE(v >= 0 && v < cuda::w4a16_decode_num_variants()) << m << " " << sms;
        EXPECT_LE(m, cuda::w4a16_decode_variant_info(v).max_m) << m << " " << sms;
      }
  // The measured rule (gemm_decode.cu): the 16-warp lean variant, except m > 8 on the whole GPU
  // for weights below 10^8 elements (the 12-warp one), and m > 16, which only the 12-warp one runs.
  EXPECT_EQ(cuda::w4a16_decode_choice(1, q, 132), cuda::kDecodeLean16);
  EXPECT_EQ(cuda::w4a16_decode_choice(8, gu, 132), cuda::kDecodeLean16);
  EXPECT_EQ(cuda::w4a16_decode_choice(9, q, 132), cuda::kDecodeLean12);
  EXPECT_EQ(cuda::w4a16_decode_choice(16, gu, 132), cuda::kDecodeLean16);
  EXPECT_EQ(cuda::w4a16_decode_choice(16, gu, 16), cuda::kDecodeLean16);
  cuda::Int4Weight down = q;
  down.n = 3840; down.k = down.kp = 15360;
  EXPECT_EQ(cuda::w4a16_decode_choice(16, down, 132), cuda::kDecodeLean12);
  EXPECT_EQ(cuda::w4a16_decode_choice(8, down, 16), cuda::kDecodeLean16);
  EXPECT_EQ(cuda::w4a16_decode_choice(17, q, 16), cuda::kDecodeLean12);
  EXPECT_EQ(cuda::w4a16_decode_choice(32, gu, 132), cuda::kDecodeLean12);
  EXPECT_EQ(cuda::w4a16_decode_choice(33, q, 132), -1);  // the tile kernel's
  EXPECT_EQ(cuda::w4a16_decode_choice(0, q, 132), -1);
}

// DecodeTuning::whole_tiles = -1 (the default): fixed-order whole-tile ranges on more than 32 SMs
// when a split's blocks get at most 4 tiles (gemm_decode.cuh). Plans computed here by hand for
// the dispatched variant (lean 16: xcap 96 KB, 16 warps; lean 12 at m > 8: 12 warps), 12B shapes,
// g128.
TEST(GpuW4Decode, WholeTilesRule) {
  cuda::Int4Weight q;
  q.n = 4096; q.k = 3840; q.kp = 3840; q.group = 128;  // 256 tiles, 30 groups
  cuda::Int4Weight gu = q, down = q;
  gu.n = 30720;                                          // 1920 tiles
  down.n = 3840; down.k = down.kp = 15360;               // 240 tiles, 120 groups
  const cuda::DecodeTuning rule;
  // m = 1: one split (x slice 2 · (7696 + 120) B fits 96 KB), 132 blocks: 256 <= 4 · 132.
  EXPECT_TRUE(cuda::w4a16_decode_whole_tiles(1, q, 132, rule));
  // m = 16 (lean 12): 17 · 7816 B > 96 KB, so 2 splits of 66 blocks: 256 <= 264.
  EXPECT_TRUE(cuda::w4a16_decode_whole_tiles(16, q, 132, rule));
  EXPECT_FALSE(cuda::w4a16_decode_whole_tiles(1, gu, 132, rule));  // 1920 > 528
  EXPECT_TRUE(cuda::w4a16_decode_whole_tiles(1, down, 132, rule)); // 240 <= 528
  // m = 8: 3 splits (9 · (10256 + 160) B fits, 2 splits' 140544 B do not), 44 blocks each: 240 > 176.
  EXPECT_FALSE(cuda::w4a16_decode_whole_tiles(8, down, 132, rule));
  for (int m : {1, 8, 16}) EXPECT_FALSE(cuda::w4a16_decode_whole_tiles(m, q, 16, rule)) << m;  // <= 32 SMs
  cuda::DecodeTuning never, always, det;
  never.whole_tiles = 0;
  always.whole_tiles = 1;
  det.deterministic = true;
  EXPECT_FALSE(cuda::w4a16_decode_whole_tiles(1, q, 132, never));
  EXPECT_TRUE(cuda::w4a16_decode_whole_tiles(1, gu, 16, always));
  EXPECT_TRUE(cuda::w4a16_decode_whole_tiles(1, gu, 16, det));
  EXPECT_FALSE(cuda::w4a16_decode_whole_tiles(33, q, 132, rule));
}

// Programmatic dependent launch: the GEMM may start while the kernel before it runs, and must
// not read x until that kernel has finished. The producer sleeps 200 µs before it writes x
// (poisoned NaN until then), so a GEMM that read x early would produce NaN.
TEST(GpuW4Decode, PdlWaitsForTheKernelThatWritesX) {
  G4C_REQUIRE_GPU();
  const Case c{8, 300, 3840, 128, false, true, Epilogue::Store};
  std::mt19937_64 rng(case_seed(c));
  Prepared p(c, rng);
  DevBuf<bf16> xsrc(p.x.size());
  G4C_CUDA_OK(cudaMemcpy(xsrc.p, p.dx.p, p.dx.bytes(), cudaMemcpyDeviceToDevice));
  const cuda::DecodeTuning dflt[] = {{}};
  const size_t wsb = workspace_all(p.w, dflt);
  DevBuf<uint8_t> wsbuf(wsb);
  G4C_CUDA_OK(cudaMemset(wsbuf.p, 0, wsb));
  cudaStream_t s;
  G4C_CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (int v = 0; v < cuda::w4a16_decode_num_variants(); ++v) {
    for (int whole : {0, 1}) {  // arrival-order and whole-tile (fixed-order) kernels
      poison(p.dx.p, p.dx.bytes());
      poison(p.y.p, p.y.bytes());
      G4C_CUDA_OK(cudaDeviceSynchronize());
      cuda::DecodeTuning tu;
      tu.variant = v;
      tu.pdl = true;
      tu.whole_tiles = whole;
      G4C_CUDA_OK(slow_copy(xsrc.p, p.dx.p, p.dx.bytes(), 200000, s));
      G4C_CUDA_OK(cuda::w4a16_decode(p.dx.p, c.m, c.k, p.w, c.ep, p.o, wsbuf.p, wsb, tu, s));
      G4C_CUDA_OK(cudaStreamSynchronize(s));
      size_t bad = 0;
      const double err = p.error(&bad);
      EXPECT_EQ(bad, 0u) << "variant " << v << " whole tiles " << whole;
      EXPECT_LT(err, p.bound()) << "variant " << v << " whole tiles " << whole;
    }
  }
  G4C_CUDA_OK(cudaStreamDestroy(s));
}

// Deterministic mode: the kernel sums the parts of a tile in a fixed order (warp order in a
// block, block order in a split, split order), so the same inputs give bitwise the same output in
// every run, whichever warp or block finishes first. Cases with tiles shared by many warps,
// blocks and k splits (the default mode adds them in arrival order, with red.add, and its output
// varies from run to run).
TEST(GpuW4Decode, LeanDeterministicModeIsBitwiseReproducible) {
  G4C_REQUIRE_GPU();
  const Case cases[] = {{16, 96, 3840, 128, true, false, Epilogue::Store},
                        {8, 130, 15360, 128, true, false, Epilogue::Store},
                        {1, 520, 1000, 128, false, true, Epilogue::ResidualAdd},
                        {12, 72, 6000, 64, true, true, Epilogue::GeluMul},
                        {32, 130, 15360, 128, true, false, Epilogue::Store}};
  const cuda::DecodeTuning tunings[] = {tuning(0, 0, true), tuning(3, 0, true), tuning(2, 4096, true),
                                        tuning(40, 8192, true)};
  for (const Case& c : cases) {
    SCOPED_TRACE(case_name(c));
    std::mt19937_64 rng(case_seed(c));
    Prepared p(c, rng);
    const size_t wsb = workspace_all(p.w, tunings);
    DevBuf<uint8_t> wsbuf(wsb);
    G4C_CUDA_OK(cudaMemset(wsbuf.p, 0, wsb));
    for (int v = 0; v < cuda::w4a16_decode_num_variants(); ++v)
      for (cuda::DecodeTuning tu : tunings) {
        if (c.m > cuda::w4a16_decode_variant_info(v).max_m) continue;
        tu.variant = v;
        std::vector<bf16> first;
        int differing = 0;
        for (int rep = 0; rep < 12; ++rep) {
          poison(p.y.p, p.y.bytes());
          G4C_CUDA_OK(cuda::w4a16_decode(p.dx.p, c.m, c.k, p.w, c.ep, p.o, wsbuf.p, wsb, tu, nullptr));
          G4C_CUDA_OK(cudaDeviceSynchronize());
          std::vector<bf16> y = p.y.get();
          if (rep == 0) {
            size_t bad = 0;
            EXPECT_LT(p.error(&bad), p.bound()) << "variant " << v << " sms " << tu.sms << " xcap " << tu.xcap;
            EXPECT_EQ(bad, 0u);
            first = y;
          } else if (std::memcmp(y.data(), first.data(), y.size() * sizeof(bf16)) != 0) {
            ++differing;
          }
        }
        EXPECT_EQ(differing, 0) << "runs differing from the first: variant " << v << " sms " << tu.sms << " xcap "
                                << tu.xcap;
        // The same runs in the default (arrival-order) mode, for the record: how often it differs.
        if (v != cuda::w4a16_decode_choice(c.m, p.w, 16)) continue;
        tu.deterministic = false;
        tu.whole_tiles = 0;
        int arrival_differing = 0;
        for (int rep = 0; rep < 12; ++rep) {
          G4C_CUDA_OK(cuda::w4a16_decode(p.dx.p, c.m, c.k, p.w, c.ep, p.o, wsbuf.p, wsb, tu, nullptr));
          G4C_CUDA_OK(cudaDeviceSynchronize());
          const std::vector<bf16> y = p.y.get();
          if (rep == 0) first = y;
          else arrival_differing += std::memcmp(y.data(), first.data(), y.size() * sizeof(bf16)) != 0;
        }
        std::printf("[ measured ] %s variant %d sms %d xcap %d: arrival-order mode, %d of 11 runs differ from the first\n",
                    case_name(c).c_str(), v, tu.sms, tu.xcap, arrival_differing);
      }
  }
}

TEST(GpuW4Decode, RejectsBadArguments) {
  G4C_REQUIRE_GPU();
  cuda::Int4Weight w;
  w.n = 32; w.k = 128; w.kp = 128; w.group = 128;
  const cuda::DecodeTuning modes[] = {tuning(0, 0), tuning(0, 0, true)};
  DevBuf<uint8_t> ws(workspace_all(w, modes));
  cuda::GemmOut o;
  EXPECT_EQ(cuda::w4a16_decode(nullptr, cuda::kDecodeMaxRows + 1, 128, w, Epilogue::Store, o, ws.p, ws.bytes(), {},
                               nullptr),
            cudaErrorInvalidValue);
  cuda::DecodeTuning lean16;
  lean16.variant = cuda::kDecodeLean16;  // runs at most 16 rows
  EXPECT_EQ(cuda::w4a16_decode(nullptr, 17, 128, w, Epilogue::Store, o, ws.p, ws.bytes(), lean16, nullptr),
            cudaErrorInvalidValue);
  // 4 bytes short of the variant's workspace (at its max_m the need is the bound: the most k
  // splits, the widest slots).
  for (int v : {cuda::kDecodeLean16, cuda::kDecodeLean12})
    for (bool det : {false, true}) {
      cuda::DecodeTuning t = tuning(0, 0, det);
      t.variant = v;
      EXPECT_EQ(cuda::w4a16_decode(nullptr, cuda::w4a16_decode_variant_info(v).max_m, 128, w, Epilogue::Store, o, ws.p,
                                   cuda::w4a16_decode_workspace_bytes(w, t) - 4, t, nullptr),
                cudaErrorInvalidValue) << v << " " << det;
    }
  cuda::DecodeTuning t;
  t.variant = cuda::w4a16_decode_num_variants();
  EXPECT_EQ(cuda::w4a16_decode(nullptr, 1, 128, w, Epilogue::Store, o, ws.p, ws.bytes(), t, nullptr),
            cudaErrorInvalidValue);
}

}  // namespace
}  // namespace g4c::gputest

// The register-direct BF16 GEMM kernel source (runtime/cuda/gemv_bf16_kernel.cuh: the decode LM
// head, opt-in) run on the CPU under tests/runtime/cuda_emu.h — its mma.sync with the PTX fragment
// layout — against a float64 reference: the k permutation that lets 16-byte loads be the mma
// fragments, row and token tails, the persistent tile loop, a chunk count that is not a multiple
// of the kernel's unroll, the softcap. GpuBf16Gemm.RegisterDirectLmHead runs it on the device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "tests/runtime/cuda_emu.h"
// (after the emulator)
#include "runtime/cuda/gemv_bf16_kernel.cuh"

namespace {

using g4c::cuda::gemv_detail::GemvArgs;

uint16_t to_bf16(float f) {  // round to nearest even
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return uint16_t((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
double from_bf16(uint16_t b) {
  const uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

struct Case {
  int m, n, k, ldx_pad, ldy_pad, blocks;
  float softcap;
};

void run_case(const Case& c, std::mt19937_64& g) {
  SCOPED_TRACE("m " + std::to_string(c.m) + " n " + std::to_string(c.n) + " k " + std::to_string(c.k));
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int ldx = c.k + c.ldx_pad, ldy = c.n + c.ldy_pad;
  std::vector<uint16_t> w(size_t(c.n) * c.k), x(size_t(c.m) * ldx);
  for (auto& v : w) v = to_bf16(0.05f * nd(g));
  for (auto& v : x) v = to_bf16(nd(g));
  std::vector<float> y(size_t(c.m) * ldy, std::numeric_limits<float>::quiet_NaN());
  const GemvArgs a{x.data(), c.m, ldx, w.data(), c.n, c.k, y.data(), ldy, c.softcap};
  const int mt2 = c.m > 8;
  cuda_emu::launch(c.blocks, g4c::cuda::gemv_detail::kGemvWarps * 32, [&] {
    if (mt2) g4c::cuda::gemv_detail::gemv_bf16_kernel<2>(a);
    else g4c::cuda::gemv_detail::gemv_bf16_kernel<1>(a);
  });
  double num = 0, den = 0;
  int nan_in = 0, written_out = 0;
  for (int t = 0; t < c.m; ++t)
    for (int r = 0; r < ldy; ++r) {
      const float got = y[size_t(t) * ldy + r];
      if (r >= c.n) {  // past the rows: untouched
        written_out += !std::isnan(got);
        continue;
      }
      double ref = 0;
      for (int j = 0; j < c.k; ++j) ref += from_bf16(w[size_t(r) * c.k + j]) * from_bf16(x[size_t(t) * ldx + j]);
      if (c.softcap > 0) ref = c.softcap * std::tanh(ref / c.softcap);
      nan_in += !std::isfinite(got);
      num += (got - ref) * (got - ref);
      den += ref * ref;
    }
  EXPECT_EQ(nan_in, 0);
  EXPECT_EQ(written_out, 0);
  // bf16 products are exact; each mma rounds its fp32 accumulator once (2 per 32 columns), so
  // ‖Δ‖/‖ref‖ stays ~1e-7·sqrt(k/16); 1e-5 bounds it (a wrong fragment or k order gives ~1).
  EXPECT_LT(std::sqrt(num / den), 1e-5);
}

}  // namespace

TEST(GemvKernelEmulation, MatchesFloat64Reference) {
  std::mt19937_64 g(20261205);
  const Case cases[] = {
      {1, 16, 32, 0, 0, 1, 0.0f},      // one tile, one chunk
      {3, 40, 96, 8, 5, 1, 30.0f},     // rows past n (40 = 2.5 tiles), padded strides, softcap
      {8, 200, 256, 0, 3, 2, 0.0f},    // 13 tiles on 8 warps: the persistent loop
      {9, 33, 64, 0, 0, 1, 30.0f},     // two token tiles, the second with one token
      {16, 48, 320, 16, 0, 1, 0.0f},   // 10 chunks: a partial unroll of 8
  };
  for (const Case& c : cases) run_case(c, g);
}

// The device sampler's kernel source (runtime/cuda/sample_kernel.cuh) run on the CPU under
// tests/runtime/cuda_emu.h (1024 threads per row), against the host sampler (runtime::sample_u,
// itself tested against a brute-force implementation of sampler.h's definition). Under the
// emulation the kernel's weights are the host's own (expf of the same float x), so only the
// association of the double sums differs (~1e-16 relative); a case is skipped as ambiguous when
// the host's token changes under u ± 1e-12 or top_p · (1 ± 1e-6) (a float top_p cannot move by
// less; the crossing's own error is ~1e-16), and there must be few of those.
// GpuFused.SampleRowsFollowTheHostSampler runs the same kernel on the device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "tests/runtime/cuda_emu.h"
// (after the emulator)
#include "runtime/cuda/sample_kernel.cuh"
#include "runtime/sampler.h"

using g4c::cuda::SampleRow;

namespace {

int run_kernel(const std::vector<float>& l, const SampleRow& row) {
  int out = -2;
  const int n = int(l.size());
  cuda_emu::launch(1, g4c::cuda::sample_detail::kST,
                   [&] { g4c::cuda::sample_detail::sample_kernel(l.data(), n, n, &row, &out, true); });
  return out;
}

std::vector<float> make_row(int kind, int n, std::mt19937_64& g) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> l(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    const float x = nd(g);
    switch (kind % 5) {
      case 0: l[i] = 3.0f * x; break;
      case 1: l[i] = 30.0f * std::tanh(8.0f * x / 30.0f); break;
      case 2: l[i] = std::round(2.0f * x); break;  // integers: ties
      case 3: l[i] = (i % 7 == 3) ? -INFINITY : 2.0f * x; break;
      default: l[i] = 12.0f * x; break;
    }
  }
  if (kind % 5 == 4 && n > 2) l[static_cast<size_t>(n / 2)] = NAN;
  return l;
}

}  // namespace

// Built twice (tests/runtime/CMakeLists.txt): as is, and with an 8-entry candidate list
// (G4C_SAMPLE_KERNEL_CANDIDATES), whose radix descents mostly take full passes.
#ifndef G4C_SAMPLE_EMU_SUITE
#define G4C_SAMPLE_EMU_SUITE SampleKernelEmulation
#endif

TEST(G4C_SAMPLE_EMU_SUITE, MatchesTheHostSampler) {
  std::mt19937_64 g(20261205);
  std::uniform_real_distribution<double> uni(0.0, 1.0);
  struct Case {
    int n, kind;
    g4c::runtime::SamplingParams p;
  };
  const std::vector<Case> cases = {
      {1, 0, {.temperature = 1.0f}},
      {5, 2, {.temperature = 0.8f, .top_k = 2}},
      {300, 1, {}},  // greedy
      {300, 2, {.temperature = 1.0f, .top_p = 0.5f}},  // ties at the nucleus boundary
      {300, 3, {.temperature = 0.7f, .top_k = 40, .top_p = 0.9f}},
      {3000, 4, {.temperature = 1.5f, .top_p = 0.95f}},  // a NaN
      {3000, 0, {.temperature = 0.6f, .top_k = 2999}},
      {3000, 1, {.temperature = 1.0f}},
      {20000, 1, {.temperature = 0.8f, .top_k = 50, .top_p = 0.95f}},
      {20000, 2, {.temperature = 2.0f, .top_k = 1000}},  // many ties at the k-th
      {20000, 0, {.temperature = 1.0f, .top_p = 0.3f}},
      {20000, 3, {.temperature = 0.25f, .top_p = 0.99f}},
      {20000, 0, {.temperature = 2.0f, .top_k = 100, .top_p = 0.5f}},  // top-k keeps a small part of the mass
  };
  int skipped = 0, checked = 0;
  for (const Case& c : cases) {
    const std::vector<float> l = make_row(c.kind, c.n, g);
    for (int rep = 0; rep < 2; ++rep) {
      const double u = uni(g);
      const SampleRow row{c.p.temperature, c.p.top_k, c.p.top_p, 0, u};
      const int want = g4c::runtime::sample_u(l.data(), c.n, c.p, u);
      bool ambiguous = false;
      for (const double du : {-1e-12, 1e-12})
        ambiguous |= g4c::runtime::sample_u(l.data(), c.n, c.p, std::clamp(u + du, 0.0, 1.0 - 0x1p-53)) != want;
      if (c.p.top_p < 1.0f)
        for (const float f : {1.0f - 1e-6f, 1.0f + 1e-6f}) {
          auto q = c.p;
          q.top_p = std::min(c.p.top_p * f, 0.99999994f);
          ambiguous |= g4c::runtime::sample_u(l.data(), c.n, q, u) != want;
        }
      if (ambiguous) {
        ++skipped;
        continue;
      }
      ++checked;
      EXPECT_EQ(run_kernel(l, row), want) << "n " << c.n << " kind " << c.kind << " T " << c.p.temperature
                                          << " top_k " << c.p.top_k << " top_p " << c.p.top_p << " u " << u;
    }
  }
  EXPECT_LE(skipped, 2) << checked << " checked";
  // Rows whose best logit is not finite are argmax, as on the host.
  std::vector<float> inf_row = {0.0f, 1.0f, INFINITY, 2.0f, INFINITY};
  EXPECT_EQ(run_kernel(inf_row, {1.0f, -1, 0.9f, 0, 0.5}), 2);
  std::vector<float> nan_row = {NAN, -1.0f, 3.0f, 3.0f};
  EXPECT_EQ(run_kernel(nan_row, {0.0f, -1, 1.0f, 0, 0.5}), 2);
}

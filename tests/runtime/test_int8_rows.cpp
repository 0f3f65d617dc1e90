// The per-row INT8 table quantizer (runtime/int8_rows.h) against a float64 brute force: the scale
// is amax / 127 in fp32, every code is the integer in [−127, 127] nearest to w / scale (ties to
// even), an all-zero row gets scale 0 and codes 0.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "runtime/int8_rows.h"

namespace g4c::runtime {
namespace {

// Checks codes/scale of row w against the brute force. The quantizer divides in fp32 (one
// rounding, ≤ 2^-24 relative), so where w / scale lies within that rounding of a half-integer the
// code may be either neighbour; everywhere else it must be the unique minimizer of |w − c·scale|,
// and an exact tie (w / scale a half-integer in float64) must go to the even code.
void check_row(const std::vector<float>& w, const std::vector<int8_t>& codes, float scale) {
  float amax = 0.f;
  for (float v : w) amax = std::fmax(amax, std::fabs(v));
  ASSERT_EQ(scale, amax / 127.f);
  if (amax == 0.f) {
    for (int8_t c : codes) ASSERT_EQ(c, 0);
    return;
  }
  for (size_t i = 0; i < w.size(); ++i) {
    const double s = scale, x = w[i];
    int best = 0;
    double best_err = INFINITY;
    bool tie = false;
    for (int c = -127; c <= 127; ++c) {
      const double err = std::fabs(x - c * s);
      if (err < best_err) {
        best = c, best_err = err, tie = false;
      } else if (err == best_err) {
        tie = true;
        if (c % 2 == 0) best = c;  // ties to even
      }
    }
    const double q = x / s, frac = std::fabs(q - std::floor(q) - 0.5);
    if (!tie && frac <= std::ldexp(std::fabs(q), -23)) {
      EXPECT_LE(std::abs(codes[i] - best), 1) << "element " << i << " = " << x << " (near tie)";
      continue;
    }
    EXPECT_EQ(codes[i], best) << "element " << i << " = " << x << ", scale " << scale;
  }
}

TEST(Int8Rows, MatchesBruteForceOnRandomRows) {
  std::mt19937_64 rng(20);
  for (int row = 0; row < 24; ++row) {
    const size_t n = row % 3 == 0 ? 3840 : 257;
    // Spread of magnitudes: the 12B embedding's rows, and tiny / huge rows (the scale is relative).
    std::normal_distribution<float> nd(0.f, std::ldexp(1.f, row % 8 * 9 - 40));
    std::vector<float> w(n);
    for (auto& v : w) v = nd(rng);
    std::vector<int8_t> codes(n);
    const float s = quantize_row_int8(w.data(), n, codes.data());
    check_row(w, codes, s);
  }
}

TEST(Int8Rows, TiesGoToEvenAndAmaxIsFull) {
  // amax 127 gives scale exactly 1: k + 0.5 is an exact tie between k and k + 1.
  const std::vector<float> w = {127.f, 0.5f, 1.5f, 2.5f, -2.5f, -3.5f, 126.5f, -126.5f, -127.f, 0.f, 3.25f};
  const std::vector<int8_t> want = {127, 0, 2, 2, -2, -4, 126, -126, -127, 0, 3};
  std::vector<int8_t> codes(w.size());
  const float s = quantize_row_int8(w.data(), w.size(), codes.data());
  EXPECT_EQ(s, 1.f);
  EXPECT_EQ(codes, want);
  check_row(w, codes, s);
}

TEST(Int8Rows, ZeroRowHasZeroScaleAndCodes) {
  std::vector<float> w(64, 0.f);
  w[5] = -0.f;
  std::vector<int8_t> codes(64, 7);
  EXPECT_EQ(quantize_row_int8(w.data(), w.size(), codes.data()), 0.f);
  for (int8_t c : codes) EXPECT_EQ(c, 0);
}

TEST(Int8Rows, Bf16RowsAndRoundTripAgree) {
  std::mt19937_64 rng(21);
  std::normal_distribution<float> nd(0.f, 0.03f);
  const size_t rows = 5, cols = 384;
  std::vector<float> w(rows * cols);
  std::vector<uint16_t> bits(w.size());
  for (size_t i = 0; i < w.size(); ++i) {
    uint32_t u;
    const float v = nd(rng);
    std::memcpy(&u, &v, 4);
    bits[i] = uint16_t(u >> 16);  // truncated to bf16: w holds exactly the bf16 values
    u = uint32_t(bits[i]) << 16;
    std::memcpy(&w[i], &u, 4);
  }
  std::vector<float> rt = w;
  std::vector<int8_t> scratch(cols);
  round_trip_rows_int8(rt.data(), rows, cols, scratch.data());
  for (size_t r = 0; r < rows; ++r) {
    std::vector<int8_t> a(cols), b(cols);
    const float sa = quantize_row_int8(&w[r * cols], cols, a.data());
    const float sb = quantize_row_int8_bf16(&bits[r * cols], cols, b.data());
    EXPECT_EQ(sa, sb);
    EXPECT_EQ(a, b);
    for (size_t i = 0; i < cols; ++i) EXPECT_EQ(rt[r * cols + i], float(a[i]) * sa);
  }
}

}  // namespace
}  // namespace g4c::runtime

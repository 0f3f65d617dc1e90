// The E4M3 scalars and row quantizer of runtime/fp8.h against independent statements of the
// format: every code's value from its bit fields in float64, and encode against the nearest
// code found by brute force over all finite codes.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "runtime/fp8.h"

using namespace g4c::runtime;

namespace {

// Value of an E4M3 code from its fields (OCP FP8 spec): NaN for S.1111.111.
double e4m3_value(int c) {
  const int s = c >> 7, e = (c >> 3) & 15, m = c & 7;
  if (e == 15 && m == 7) return std::numeric_limits<double>::quiet_NaN();
  const double mag = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
  return s ? -mag : mag;
}

// Nearest finite code to x by brute force; ties go to the even code (mantissa LSB 0); beyond
// ±448 saturates; the sign of zero is kept.
uint8_t nearest_code(float x) {
  const double a = std::fabs(double(x));
  int best = 0;
  double best_d = std::numeric_limits<double>::infinity();
  for (int c = 0; c <= 0x7e; ++c) {
    const double d = std::fabs(e4m3_value(c) - a);
    if (d < best_d || (d == best_d && (c & 1) == 0)) best = c, best_d = d;
  }
  if (a >= 448.0) best = 0x7e;
  return uint8_t((std::signbit(x) ? 0x80 : 0) | best);
}

TEST(Fp8E4M3, EveryCodeDecodesToItsBitFields) {
  for (int c = 0; c < 256; ++c) {
    const double want = e4m3_value(c);
    const float got = fp8_e4m3_decode(uint8_t(c));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << "code " << c;
      continue;
    }
    EXPECT_EQ(double(got), want) << "code " << c;
    EXPECT_EQ(std::signbit(got), bool(c & 0x80)) << "code " << c;
  }
  EXPECT_EQ(fp8_e4m3_decode(0x7e), 448.0f);
  EXPECT_EQ(fp8_e4m3_decode(0x01), 0.001953125f);  // 2^-9
}

TEST(Fp8E4M3, EncodeIsTheNearestCodeTiesToEven) {
  std::vector<float> xs = {0.0f, -0.0f, 448.0f, -448.0f, 449.0f, 464.0f, 479.0f, 480.0f, 1e6f, -1e30f,
                           std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                           std::ldexp(1.0f, -10),      // half the smallest subnormal: tie to 0
                           std::ldexp(3.0f, -10),      // between 2^-9 and 2^-8: tie to 2^-8 (even)
                           std::ldexp(1.0f, -6),       // smallest normal
                           std::ldexp(15.0f, -10),     // between the largest subnormal and 2^-6
                           std::numeric_limits<float>::denorm_min(), 1e-40f, -1e-12f};
  // Every midpoint between neighbouring finite codes (a tie), and one fp32 ulp either side.
  for (int c = 0; c < 0x7e; ++c) {
    const float mid = float((e4m3_value(c) + e4m3_value(c + 1)) / 2);  // exact: 5 significant bits
    for (float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f)}) {
      xs.push_back(x);
      xs.push_back(-x);
    }
  }
  std::mt19937 g(7);
  std::uniform_real_distribution<float> log2mag(-14.0f, 10.0f);
  for (int i = 0; i < 20000; ++i) xs.push_back((i & 1 ? -1.0f : 1.0f) * std::exp2(log2mag(g)));
  for (float x : xs) EXPECT_EQ(int(fp8_e4m3_encode(x)), int(nearest_code(x))) << "x = " << x;
  EXPECT_EQ(fp8_e4m3_encode(std::numeric_limits<float>::quiet_NaN()), 0x7f);
  EXPECT_EQ(fp8_e4m3_encode(-std::numeric_limits<float>::quiet_NaN()), 0x7f);
}

TEST(Fp8E4M3, RoundTripErrorIsHalfAStep) {
  std::mt19937 g(11);
  std::uniform_real_distribution<float> u(-448.0f, 448.0f);
  std::uniform_real_distribution<float> small(-1.0f / 64, 1.0f / 64);
  for (int i = 0; i < 100000; ++i) {
    const float x = i & 1 ? u(g) : small(g);
    const double err = std::fabs(double(fp8_e4m3_decode(fp8_e4m3_encode(x))) - x);
    // Normal range: 3 mantissa bits, half a step is 2^-4 of the binade's base (≤ |x|).
    // Subnormals: steps of 2^-9, half a step 2^-10.
    if (std::fabs(x) >= std::ldexp(1.0, -6))
      EXPECT_LE(err, std::ldexp(std::fabs(x), -4)) << x;
    else
      EXPECT_LE(err, std::ldexp(1.0, -10)) << x;
  }
}

TEST(Fp8E4M3, RowQuantizerScalesByAmax) {
  std::mt19937 g(3);
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (int d : {1, 7, 64, 256}) {
    std::vector<float> x(static_cast<size_t>(d));
    for (auto& v : x) v = n(g) * 3.0f;
    std::vector<uint8_t> codes(static_cast<size_t>(d));
    const float scale = quantize_row_e4m3(x.data(), d, codes.data());
    float amax = 0;
    for (float v : x) amax = std::max(amax, std::fabs(v));
    EXPECT_EQ(scale, amax / 448.0f);
    bool hit_max = false;
    for (int i = 0; i < d; ++i) {
      EXPECT_EQ(codes[i], fp8_e4m3_encode(x[i] / scale));
      hit_max |= (codes[i] & 0x7f) == 0x7e;
      // Half a step of the code (2^-4 relative, or 2^-10 of the scale below 2^-6) plus the
      // fp32 division x / scale and the decode product (one rounding each, 2^-24 relative).
      const double err = std::fabs(double(fp8_e4m3_decode(codes[i])) * scale - x[i]);
      EXPECT_LE(err, std::max(std::ldexp(std::fabs(double(x[i])), -4), std::ldexp(double(scale), -10)) * (1 + 1e-6) + 1e-30);
    }
    EXPECT_TRUE(hit_max) << "the amax element maps to ±448";
  }
  std::vector<float> zero(16, 0.0f);
  std::vector<uint8_t> codes(16, 0xAA);
  EXPECT_EQ(quantize_row_e4m3(zero.data(), 16, codes.data()), 0.0f);
  for (uint8_t c : codes) EXPECT_EQ(c, 0);
}

}  // namespace

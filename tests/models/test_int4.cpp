// INT4 format (DESIGN.md §3) against hand-computed bytes, RTN error bounds, and the
// manifest / Int4Checkpoint round trip.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "models/error.h"
#include "models/int4.h"
#include "models/manifest.h"
#include "models/safetensors.h"

using namespace g4c;
using namespace g4c::models;
namespace fs = std::filesystem;

TEST(Int4, NibbleOrder) {
  // element 2j → low nibble of byte j, 2j+1 → high nibble.
  std::vector<uint8_t> codes{1, 2, 3, 4, 15, 0};
  auto packed = int4::pack_codes(codes, 1, 6);
  EXPECT_EQ(packed, (std::vector<uint8_t>{0x21, 0x43, 0x0F}));
  EXPECT_EQ(int4::unpack_codes(packed, 1, 6), codes);
  EXPECT_THROW(int4::pack_codes(std::vector<uint8_t>{16, 0}, 1, 2), Error);
}

TEST(Int4, SymmetricHandComputed) {
  // out 2, in 6, G 4 → padded_in 8, 2 groups per row.
  // Row 0 group 0: max|w| 0.7, s = 0.1 → fp16 0x2E66 = 0.0999755859375;
  //   0.7/s = 7.0017 → q 7 → code 15; -0.35/s = -3.5009 → -4 → 4; 0 → 8; 0.14/s = 1.4003 → 1 → 9.
  // Row 0 group 1: max|w| 2.8, s = 0.4 → fp16 0x3666 = 0.39990234375;
  //   1.4/s = 3.5009 → 4 → 12; -2.8/s = -7.0017 → -7 → 1; two padding columns → code of 0 = 8.
  // Row 1 is all zero: scale 0, every code 8.
  std::vector<float> w{0.7f, -0.35f, 0.0f, 0.14f, 1.4f, -2.8f, 0, 0, 0, 0, 0, 0};
  auto q = int4::quantize_rtn(w, 2, 6, {4, true, DType::F16});
  EXPECT_EQ(q.padded_in, 8);
  EXPECT_EQ(q.qweight, (std::vector<uint8_t>{0x4F, 0x98, 0x1C, 0x88, 0x88, 0x88, 0x88, 0x88}));
  EXPECT_EQ(q.scales, (std::vector<uint16_t>{0x2E66, 0x3666, 0x0000, 0x0000}));
  EXPECT_TRUE(q.zeros.empty());
  auto d = int4::dequantize(q);
  const double s0 = 0.0999755859375, s1 = 0.39990234375;
  std::vector<double> expect{7 * s0, -4 * s0, 0, 1 * s0, 4 * s1, -7 * s1, 0, 0, 0, 0, 0, 0};
  ASSERT_EQ(d.size(), expect.size());
  for (size_t i = 0; i < d.size(); ++i) EXPECT_FLOAT_EQ(d[i], float(expect[i])) << i;
}

TEST(Int4, AsymmetricHandComputed) {
  // out 3, in 4, G 4.
  // Row 0 [-1, 0.5, 2, 0]: s = 3/15 = 0.2 → fp16 0x3266 = 0.199951171875, z = round(1/s = 5.0012) = 5;
  //   codes: -5.0012→-5+5=0; 2.5006→3+5=8; 10.0024→10+5=15; 0→5 → bytes 0x80, 0x5F.
  // Row 1 max==min [0.5 ×4]: range with 0 is [0, 0.5], s = 0.5/15 → fp16 0x2844 = 0.033325195,
  //   z = 0, 0.5/s = 15.0037 → 15 → bytes 0xFF 0xFF.
  // Row 2 max==min [-0.5 ×4]: range [-0.5, 0], same s, z = round(15.0037) = 15, codes 0.
  std::vector<float> w{-1.0f, 0.5f, 2.0f, 0.0f, 0.5f, 0.5f, 0.5f, 0.5f, -0.5f, -0.5f, -0.5f, -0.5f};
  auto q = int4::quantize_rtn(w, 3, 4, {4, false, DType::F16});
  EXPECT_EQ(q.qweight, (std::vector<uint8_t>{0x80, 0x5F, 0xFF, 0xFF, 0x00, 0x00}));
  EXPECT_EQ(q.scales, (std::vector<uint16_t>{0x3266, 0x2844, 0x2844}));
  EXPECT_EQ(q.zeros, (std::vector<uint8_t>{5, 0, 15}));
  auto d = int4::dequantize(q);
  const double s = 0.199951171875, t = 0.033325195;
  std::vector<double> expect{-5 * s, 3 * s, 10 * s, 0, 15 * t, 15 * t, 15 * t, 15 * t, -15 * t, -15 * t, -15 * t, -15 * t};
  for (size_t i = 0; i < d.size(); ++i) EXPECT_NEAR(d[i], expect[i], 1e-7) << i;  // t is given to 9 digits
}

TEST(Int4, AsymmetricPaddingIsZeroCode) {
  // in 3, G 4: the padding column gets the code of 0 (= z) and dequantizes to 0.
  // [-1, 0.5, 2] as above: z 5 → byte1 = 15 | 5<<4 = 0x5F.
  auto q = int4::quantize_rtn(std::vector<float>{-1.0f, 0.5f, 2.0f}, 1, 3, {4, false, DType::F16});
  EXPECT_EQ(q.qweight, (std::vector<uint8_t>{0x80, 0x5F}));
}

TEST(Int4, Bf16Scales) {
  // 0.7/7 = 0.1 → bf16 0x3DCD (0.10009765625).
  auto q = int4::quantize_rtn(std::vector<float>{0.7f, 0.0f}, 1, 2, {2, true, DType::BF16});
  EXPECT_EQ(q.scales, std::vector<uint16_t>{0x3DCD});
  EXPECT_EQ(q.qweight, std::vector<uint8_t>{0x8F});  // 0.7/0.1001 = 6.993 → 7 → 15; 0 → 8
}

TEST(Int4, RtnErrorBound) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 0.05f);
  const int64_t out = 16, in = 300;  // 300 is not a multiple of 128: exercises padding
  std::vector<float> w(size_t(out * in));
  for (float& x : w) x = nd(rng);
  for (bool sym : {true, false}) {
    auto q = int4::quantize_rtn(w, out, in, {128, sym, DType::F16});
    auto d = int4::dequantize(q);
    for (int64_t r = 0; r < out; ++r)
      for (int64_t c = 0; c < in; ++c) {
        double s = q.scale(r, c / 128);
        double lo = 0, hi = 0;
        for (int64_t k = c / 128 * 128; k < std::min(in, c / 128 * 128 + 128); ++k) {
          lo = std::min(lo, double(w[r * in + k]));
          hi = std::max(hi, double(w[r * in + k]));
        }
        // Rounding to the grid costs at most s/2; the fp16-rounded scale can make the
        // grid's end fall short of the extreme by at most the range's relative fp16 error.
        // Asymmetric: the integer zero z = round(-min/s) shifts the grid by |z*s + min|
        // (≤ s/2), which the clamped ends of the range can add to the error.
        double zshift = 0;
        if (!sym) zshift = std::fabs(q.zeros[size_t(r * q.groups() + c / 128)] * s + lo);
        double range = sym ? std::max(-lo, hi) : hi - lo;
        double bound = 0.5 * s + zshift + range * 1e-3;
        ASSERT_LE(std::fabs(double(d[r * in + c]) - w[r * in + c]), bound) << r << "," << c << " sym=" << sym;
      }
  }
}

TEST(Int4, ManifestAndCheckpointRoundTrip) {
  fs::path d = fs::temp_directory_path() / ("g4c_test_int4_" + std::to_string(::getpid()));
  fs::remove_all(d);
  std::mt19937 rng(3);
  std::normal_distribution<float> nd;
  Manifest m;
  m.method_name = "rtn";
  std::map<std::string, std::vector<float>> expect;
  {
    SafetensorsWriter w(d, "");
    for (bool sym : {true, false}) {
      std::string name = sym ? "layers.0.self_attn.q_proj" : "layers.0.mlp.down_proj";
      const int64_t out = 8, in = 20;
      std::vector<float> wt(size_t(out * in));
      for (float& x : wt) x = nd(rng);
      int4::Params p{8, sym, DType::F16};
      auto q = int4::quantize_rtn(wt, out, in, p);
      QuantModule mod = QuantModule::make(name, out, in, p);
      w.add(mod.qweight_key, DType::U8, {out, mod.padded_in / 2}, q.qweight);
      w.add(mod.scales_key, DType::F16, {out, mod.groups()},
            {reinterpret_cast<const uint8_t*>(q.scales.data()), q.scales.size() * 2});
      if (!sym) w.add(mod.zeros_key, DType::U8, {out, mod.groups()}, q.zeros);
      m.add(mod);
      expect[name] = int4::dequantize(q);
    }
    w.finish();
  }
  write_manifest(m, d / "manifest.json");
  auto ck = Int4Checkpoint::open(d);
  EXPECT_EQ(ck->manifest().modules.size(), 2u);
  const QuantModule* down = ck->manifest().find("layers.0.mlp.down_proj");
  ASSERT_NE(down, nullptr);
  EXPECT_FALSE(down->symmetric);
  EXPECT_EQ(down->padded_in, 24);
  EXPECT_EQ(down->zeros_key, "layers.0.mlp.down_proj.zeros");
  for (auto& [name, e] : expect) EXPECT_EQ(ck->dequantized(name), e) << name;
  EXPECT_EQ(ck->linear("layers.0.self_attn.q_proj").zeros.data, nullptr);

  auto qc = quantization_config_json(m);
  EXPECT_EQ(qc["bits"], 4);
  // A manifest whose shape disagrees with its own fields is refused, naming the module's field.
  nlohmann::json j = manifest_to_json(m);
  j["modules"]["layers.0.mlp.down_proj"]["shape"] = {8, 40};
  std::ofstream(d / "manifest.json") << j.dump();
  try {
    Int4Checkpoint::open(d);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("modules.layers.0.mlp.down_proj.in_features"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("manifest.json"), std::string::npos) << e.what();
  }
  fs::remove_all(d);
}

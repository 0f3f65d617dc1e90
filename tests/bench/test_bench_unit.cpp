// `g4c bench` pieces: the FLOP/byte work model against hand-computed counts (tiny config read
// from models/gemma4-tiny, 12B preset), percentiles, and the PNG writer's layout (chunk CRCs
// re-checked with an independent bitwise CRC; the image data inflated back to the canvas).
// check_bench_cli.py decodes the PNG of `g4c bench --plot` end to end.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdlib>
#include <string>

#include "models/config.h"
#include "tools/bench_png.h"
#include "tools/bench_roofline.h"

namespace {

using namespace g4c;

std::filesystem::path tiny_dir() {
  const char* s = std::getenv("G4C_SOURCE_DIR");
  return std::filesystem::path(s ? s : ".") / "models/gemma4-tiny";
}

// Hand-computed for gemma4-tiny (H 256, 4 q heads; sliding: 2 kv × 64, window 128; full
// layers 5 and 11: 1 kv × 128, k_eq_v; FFN 1024; vocab 8192):
//   sliding layer Linears: q 256·256 + k 256·128 + v 256·128 + o 256·256 + 3·256·1024 = 983040
//   full layer:            q 256·512 + k 256·128 + o 512·256 + 3·256·1024            = 1081344
//   all: 10·983040 + 2·1081344 = 11993088; tied head 256·8192 = 2097152.
//   KV per token and layer (BF16, K and V): sliding 2·64·2·2 = 512, full 1·128·2·2 = 512.
constexpr double kLinear = 11993088, kHead = 2097152;

TEST(BenchWork, TinyOneShortRequestByHand) {
  const auto cfg = models::load_model_config(tiny_dir());
  // P = 3 prompt tokens, G = 2 generated: prefill feeds t = 0..2, decode feeds t = 3.
  const auto w = bench::count_work(cfg, 1000.0, {{3, 2}}, {512, 256, 2});
  EXPECT_EQ(w.prefill.tokens, 3);
  EXPECT_EQ(w.decode.tokens, 1);
  EXPECT_DOUBLE_EQ(w.prefill.linear_flops, 2 * kLinear * 3 + 2 * kHead);
  EXPECT_DOUBLE_EQ(w.decode.linear_flops, 2 * (kLinear + kHead));
  // attention 4·Hq·hd·visible: prefill visible 1+2+3 = 6, decode visible 4.
  EXPECT_DOUBLE_EQ(w.prefill.attention_flops, 10 * 4 * 4 * 64 * 6.0 + 2 * 4 * 4 * 128 * 6.0);
  EXPECT_DOUBLE_EQ(w.decode.attention_flops, 10 * 4 * 4 * 64 * 4.0 + 2 * 4 * 4 * 128 * 4.0);
  // KV: prefill writes 3 and reads the 3 visible once; decode reads 4 and writes 1, × 12 layers × 512 B.
  EXPECT_DOUBLE_EQ(w.prefill.kv_bytes, 12 * 512 * 6.0);
  EXPECT_DOUBLE_EQ(w.decode.kv_bytes, 12 * 512 * 5.0);
  // One prefill step (3 ≤ budget), measured 2 steps → 1 decode step; 1000 weight bytes each.
  EXPECT_EQ(w.prefill.steps, 1);
  EXPECT_EQ(w.decode.steps, 1);
  EXPECT_DOUBLE_EQ(w.prefill.weight_bytes, 1000);
  EXPECT_DOUBLE_EQ(w.decode.weight_bytes, 1000);
}

// KV bytes as the backend holds them (ScheduleShape::kv_token_bytes, from plan::kv_token_bytes):
// FP8 codes + an fp32 scale per head, sliding 2·2·(64 + 4) = 272, full 2·1·(128 + 4) = 264.
TEST(BenchWork, KvBytesFollowThePlansStorage) {
  const auto cfg = models::load_model_config(tiny_dir());
  bench::ScheduleShape sched{512, 256, 2};
  for (const auto& g : cfg.layers) sched.kv_token_bytes.push_back(g.head_dim == 64 ? 272.0 : 264.0);
  const auto w = bench::count_work(cfg, 1000.0, {{3, 2}}, sched);
  EXPECT_DOUBLE_EQ(w.prefill.kv_bytes, (10 * 272.0 + 2 * 264.0) * 6.0);
  EXPECT_DOUBLE_EQ(w.decode.kv_bytes, (10 * 272.0 + 2 * 264.0) * 5.0);
  EXPECT_DOUBLE_EQ(w.prefill.linear_flops, 2 * kLinear * 3 + 2 * kHead);  // only the KV bytes change
}

TEST(BenchWork, SlidingWindowCapsVisibleKeys) {
  const auto cfg = models::load_model_config(tiny_dir());
  // P = 200 > W = 128: sliding Σ min(t+1, 128) = 128·129/2 + 72·128 = 17472; full Σ (t+1) = 20100.
  const auto w = bench::count_work(cfg, 0.0, {{200, 1}}, {64, 256, 0});
  EXPECT_DOUBLE_EQ(w.prefill.attention_flops, 10 * 4 * 4 * 64 * 17472.0 + 2 * 4 * 4 * 128 * 20100.0);
  EXPECT_EQ(w.decode.tokens, 0);
  EXPECT_DOUBLE_EQ(w.decode.flops(), 0);
  // 200 tokens at a budget of 64 per step: 4 steps; decode gets none (measured 0 → longest D = 0).
  EXPECT_EQ(w.prefill.steps, 4);
  EXPECT_EQ(w.decode.steps, 0);
  // Sliding reads its last 128 keys, full all 200: 512·(200 + 128)·10 + 512·(200 + 200)·2.
  EXPECT_DOUBLE_EQ(w.prefill.kv_bytes, 512.0 * 328 * 10 + 512.0 * 400 * 2);
  // With the prefill-only run's measured steps (7) they replace the model; decode gets the rest.
  const auto m = bench::count_work(cfg, 10.0, {{200, 5}}, {64, 256, 12, 7});
  EXPECT_EQ(m.prefill.steps, 7);
  EXPECT_EQ(m.decode.steps, 5);
  EXPECT_DOUBLE_EQ(m.decode.weight_bytes, 50);
}

// One batch size's pure decode steps (the engine's DecodeBatchStats summed): 2 steps of 3 rows
// whose rows see 1098 keys in the full layers and 1056 in the sliding ones (window 128).
TEST(BenchWork, DecodeBatchByHand) {
  const auto cfg = models::load_model_config(tiny_dir());
  bench::DecodeBatch b;
  b.rows_lo = b.rows_hi = 3;
  b.steps = 2;
  b.rows = 6;
  b.seconds = 0.5;
  b.keys = 1098;
  b.window_keys = 1056;
  const auto w = bench::decode_batch_work(cfg, 1000.0, b, {});
  EXPECT_EQ(w.tokens, 6);
  EXPECT_EQ(w.steps, 2);
  EXPECT_DOUBLE_EQ(w.linear_flops, 2 * (kLinear + kHead) * 6);
  EXPECT_DOUBLE_EQ(w.attention_flops, 10 * 4 * 4 * 64 * 1056.0 + 2 * 4 * 4 * 128 * 1098.0);
  // K/V read for every visible key and written for every row: 512 B per token and layer.
  EXPECT_DOUBLE_EQ(w.kv_bytes, 10 * 512 * (1056.0 + 6) + 2 * 512 * (1098.0 + 6));
  EXPECT_DOUBLE_EQ(w.weight_bytes, 2000);
  bench::Ceilings c;
  c.flops_per_s = 1e12;
  c.bytes_per_s = 1e9;  // memory-bound here: roofline time = bytes / 1e9
  const auto j = bench::decode_batch_json(cfg, 1000.0, b, {}, c);
  EXPECT_DOUBLE_EQ(j["ms_per_step"].get<double>(), 250.0);
  EXPECT_DOUBLE_EQ(j["mean_rows"].get<double>(), 3.0);
  EXPECT_DOUBLE_EQ(j["roofline_fraction"].get<double>(), (w.weight_bytes + w.kv_bytes) / 1e9 / 0.5);
}

TEST(BenchWork, Gemma12BLinearCount) {
  const auto cfg = models::preset("gemma4-12b");
  // sliding layer: 3840·4096 + 2·3840·2048 + 4096·3840 + 3·3840·15360 = 224133120
  // full layer:    3840·8192 + 3840·512 + 8192·3840 + 3·3840·15360    = 241827840
  // 40 sliding + 8 full = 10899947520; head 3840·262144 = 1006632960.
  const auto w = bench::count_work(cfg, 0.0, {{1, 1}}, {512, 256, 1});
  EXPECT_DOUBLE_EQ(w.prefill.linear_flops, 2 * 10899947520.0 + 2 * 1006632960.0);
  // Sliding KV 8·256·2·2 = 8 KiB/layer (320 KiB over 40 layers, DESIGN.md §2); full 1·512·2·2 = 2 KiB.
  EXPECT_DOUBLE_EQ(w.prefill.kv_bytes, 2 * (40 * 8192.0 + 8 * 2048.0));
}

TEST(BenchStats, Percentile) {
  EXPECT_DOUBLE_EQ(bench::percentile({4, 1, 3, 2}, 50), 2.5);
  EXPECT_DOUBLE_EQ(bench::percentile({4, 1, 3, 2}, 0), 1);
  EXPECT_DOUBLE_EQ(bench::percentile({4, 1, 3, 2}, 100), 4);
  EXPECT_DOUBLE_EQ(bench::percentile({10, 20}, 99), 19.9);
  EXPECT_DOUBLE_EQ(bench::percentile({}, 50), 0);
}

TEST(BenchPhase, RooflineFractionIsBoundTimeOverElapsed) {
  bench::PhaseWork w;
  w.linear_flops = 4e9;   // 4 ms at 1 TFLOP/s
  w.weight_bytes = 1e9;   // 10 ms at 100 GB/s -> memory bound
  const auto j = bench::phase_json(w, 0.02, {1e12, 1e11, "", ""});
  EXPECT_EQ(j["bound"], "memory");
  EXPECT_DOUBLE_EQ(j["roofline_time_s"].get<double>(), 0.01);
  EXPECT_DOUBLE_EQ(j["roofline_fraction"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(j["arithmetic_intensity"].get<double>(), 4.0);
}

// The real-slice projection by hand: a decode phase of 64 steps over 7.6 GB of weights measured
// at 1.0 s in the 16-SM emulation. 14 SMs: 1.0 × 16/14 = 1.142857 s; through 3.35/8 = 0.41875
// TB/s the 4.864e11 bytes alone take 1.16155 s (18.1 ms a step), so the slice is memory-bound.
TEST(BenchPhase, RealSliceProjectionIsTheLargerOfFewerSmsAndTheSlicesBandwidth) {
  const auto slice = bench::real_slice_1g10gb();
  EXPECT_EQ(slice.sms, 14);
  EXPECT_EQ(slice.emulated_sms, 16);
  EXPECT_DOUBLE_EQ(slice.bytes_per_s, 3.35e12 / 8);
  EXPECT_DOUBLE_EQ(slice.flops_per_s, 110e12 * 14 / 16);
  bench::PhaseWork decode;
  decode.weight_bytes = 7.6e9 * 64;
  decode.linear_flops = 2 * 12e9 * 8 * 64;  // 12 B parameters, 8 rows a step: far below the FLOP floor
  auto j = bench::project_phase(decode, 1.0, slice);
  EXPECT_DOUBLE_EQ(j["sm_scaled_s"].get<double>(), 16.0 / 14.0);
  EXPECT_NEAR(j["memory_s"].get<double>(), 4.864e11 / 4.1875e11, 1e-12);  // 1.16155 s
  EXPECT_NEAR(j["compute_s"].get<double>(), 1.2288e13 / 9.625e13, 1e-12);  // 128 ms
  EXPECT_DOUBLE_EQ(j["projected_s"].get<double>(), j["memory_s"].get<double>());  // memory-bound in the slice
  EXPECT_DOUBLE_EQ(j["projected_upper_s"].get<double>(), 16.0 / 14.0 + j["memory_s"].get<double>());
  // A compute-heavy prefill measured at 2 s: fewer SMs dominate.
  bench::PhaseWork prefill;
  prefill.weight_bytes = 7.6e9 * 20;
  prefill.linear_flops = 2 * 12e9 * 5000;  // 1.247 s at 96.25 TFLOP/s; bytes 0.363 s
  j = bench::project_phase(prefill, 2.0, slice);
  EXPECT_DOUBLE_EQ(j["projected_s"].get<double>(), 2.0 * 16 / 14);
}

uint32_t be32(const uint8_t* p) { return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3]; }

uint32_t bitwise_crc(const uint8_t* p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return ~c;
}

TEST(BenchPng, ChunksAndHeader) {
  bench::Canvas c(37, 11);
  c.fill_rect(3, 2, 10, 5, {200, 10, 10});
  c.text(1, 1, "Ab1%", {0, 0, 0}, 1);
  const auto png = bench::encode_png(c);
  ASSERT_GT(png.size(), 8u + 25 + 12 + 12);
  const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  EXPECT_TRUE(std::equal(sig, sig + 8, png.begin()));
  size_t off = 8;
  std::vector<std::string> types;
  std::vector<uint8_t> idat;
  while (off + 12 <= png.size()) {
    const uint32_t len = be32(&png[off]);
    ASSERT_LE(off + 12 + len, png.size());
    types.emplace_back(reinterpret_cast<const char*>(&png[off + 4]), 4);
    EXPECT_EQ(be32(&png[off + 8 + len]), bitwise_crc(&png[off + 4], len + 4)) << types.back();
    if (types.back() == "IDAT") idat.insert(idat.end(), &png[off + 8], &png[off + 8 + len]);
    if (types.back() == "IHDR") {
      EXPECT_EQ(be32(&png[off + 8]), 37u);
      EXPECT_EQ(be32(&png[off + 12]), 11u);
      EXPECT_EQ(png[off + 16], 8);  // bit depth
      EXPECT_EQ(png[off + 17], 2);  // RGB
    }
    off += 12 + len;
  }
  EXPECT_EQ(off, png.size());
  EXPECT_EQ(types, (std::vector<std::string>{"IHDR", "IDAT", "IEND"}));
  // The image data inflates to the canvas: per row, filter byte 0 then the RGB pixels.
  std::vector<uint8_t> raw(size_t(11) * (1 + 37 * 3));
  uLongf n = raw.size();
  ASSERT_EQ(uncompress(raw.data(), &n, idat.data(), uLong(idat.size())), Z_OK);
  ASSERT_EQ(n, raw.size());
  for (int y = 0; y < 11; ++y) {
    const uint8_t* row = &raw[size_t(y) * (1 + 37 * 3)];
    EXPECT_EQ(row[0], 0) << "row " << y;
    EXPECT_TRUE(std::equal(row + 1, row + 1 + 37 * 3, c.pixels().begin() + size_t(y) * 37 * 3)) << "row " << y;
  }
}

}  // namespace

// g4c synth (models/synth.cpp): synthetic checkpoints have exactly the tensors of the
// real HF checkpoint, load back, are deterministic, and the 12B INT4 header-only
// checkpoint has the sizes DESIGN.md §4 states.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <lzma.h>

#include "models/config.h"
#include "models/error.h"
#include "models/manifest.h"
#include "models/safetensors.h"
#include "models/synth.h"

using namespace g4c;
using namespace g4c::models;
namespace fs = std::filesystem;

namespace {

fs::path source_dir() {
  const char* s = std::getenv("G4C_SOURCE_DIR");
  return fs::path(s ? s : ".");
}

fs::path temp_dir(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("g4c_test_synth_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  return p;
}

SynthOptions opts(const std::string& preset, const fs::path& out) {
  SynthOptions o;
  o.preset = preset;
  o.out_dir = out;
  o.seed = 1234;
  o.threads = 2;
  o.progress = false;
  return o;
}

std::string file_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

TEST(Synth, TinyBf16MatchesRealCheckpointLayout) {
  fs::path d = temp_dir("tiny");
  SynthOptions o = opts("gemma4-tiny", d);
  o.tokenizer = default_tokenizer("gemma4-tiny", source_dir());
  SynthResult r = synthesize(o);
  EXPECT_EQ(r.tensors, 168u);
  auto real = Checkpoint::open(source_dir() / "models" / "gemma4-tiny");
  auto syn = Checkpoint::open(d);
  EXPECT_EQ(syn->prefix(), "model.");
  ASSERT_EQ(syn->names(), real->names());  // same tensor names, HF layout
  for (const std::string& n : real->names()) {
    EXPECT_EQ(syn->info(n).shape, real->info(n).shape) << n;
    EXPECT_EQ(syn->info(n).dtype, real->info(n).dtype) << n;
  }
  // config.json parses to the preset; the tokenizer is a byte copy.
  ModelConfig c = load_model_config(d);
  EXPECT_EQ(c.num_layers, 12);
  EXPECT_EQ(c.global_head_dim, 128);
  EXPECT_EQ(file_bytes(d / "tokenizer.json"), file_bytes(o.tokenizer));

  // Scales: Linear std 1/sqrt(in) and embedding std H^(-1/4) within 3% (N ≥ 65k
  // samples: sampling error of a std is ~1/sqrt(2N) < 0.3%; the rest is bf16 rounding).
  auto stddev = [&](const std::string& n) {
    TensorView v = syn->get(n);
    double s = 0;
    int64_t k = v.info->numel();
    for (int64_t i = 0; i < k; ++i) s += std::pow(double(bf16_to_f32(v.as<uint16_t>()[i])), 2);
    return std::sqrt(s / double(k));
  };
  EXPECT_NEAR(stddev("layers.0.mlp.down_proj.weight"), 1.0 / 32.0, 0.03 / 32.0);  // in = 1024
  EXPECT_NEAR(stddev("layers.3.self_attn.q_proj.weight"), 1.0 / 16.0, 0.03 / 16.0);  // in = 256
  EXPECT_NEAR(stddev("embed_tokens.weight"), 0.25, 0.03 * 0.25);  // 256^(-1/4)
  TensorView norm = syn->get("layers.2.input_layernorm.weight");
  for (int i = 0; i < 256; ++i) {
    float x = bf16_to_f32(norm.as<uint16_t>()[i]);
    EXPECT_GT(x, 0.7f);  // 1 + 0.05 N(0,1), and the Irwin–Hall normal is bounded by ±2√3
    EXPECT_LT(x, 1.3f);
  }
  fs::remove_all(d);
}

// A .xz tokenizer is decompressed with liblzma, whatever characters its path holds (quotes
// and spaces broke a shell pipe); a file that is not .xz data is an error naming it.
TEST(Synth, XzTokenizerFromAPathWithQuotes) {
  const fs::path d = temp_dir("xz");
  const fs::path src_dir = d / "it's a \"quoted\" dir";
  fs::create_directories(src_dir);
  const std::string plain = file_bytes(default_tokenizer("gemma4-tiny", source_dir()));
  std::string packed(lzma_stream_buffer_bound(plain.size()), '\0');
  size_t packed_size = 0;
  ASSERT_EQ(lzma_easy_buffer_encode(6, LZMA_CHECK_CRC64, nullptr, reinterpret_cast<const uint8_t*>(plain.data()),
                                    plain.size(), reinterpret_cast<uint8_t*>(packed.data()), &packed_size,
                                    packed.size()),
            LZMA_OK);
  packed.resize(packed_size);
  const fs::path xz = src_dir / "tokenizer.json.xz";
  std::ofstream(xz, std::ios::binary) << packed;

  SynthOptions o = opts("gemma4-tiny", d / "out");
  o.tokenizer = xz;
  synthesize(o);
  EXPECT_EQ(file_bytes(d / "out" / "tokenizer.json"), plain);

  std::ofstream(xz, std::ios::binary | std::ios::trunc) << plain;  // not .xz data
  o.out_dir = d / "out2";
  try {
    synthesize(o);
    ADD_FAILURE() << "a plain file named .xz was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(xz.string()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("not in the .xz format"), std::string::npos) << e.what();
  }
  fs::remove_all(d);
}

TEST(Synth, DeterministicAcrossThreadCounts) {
  fs::path a = temp_dir("det_a"), b = temp_dir("det_b"), c = temp_dir("det_c");
  SynthOptions oa = opts("gemma4-tiny", a), ob = opts("gemma4-tiny", b), oc = opts("gemma4-tiny", c);
  ob.threads = 1;
  oc.seed = 99;
  synthesize(oa);
  synthesize(ob);
  synthesize(oc);
  for (const char* f : {"model-00001-of-00001.safetensors", "model.safetensors.index.json", "config.json"})
    EXPECT_EQ(file_bytes(a / f), file_bytes(b / f)) << f;
  EXPECT_NE(file_bytes(a / "model-00001-of-00001.safetensors"), file_bytes(c / "model-00001-of-00001.safetensors"));
  for (auto& p : {a, b, c}) fs::remove_all(p);
}

TEST(Synth, TinyInt4MatchesBf16Weights) {
  fs::path q = temp_dir("int4"), f = temp_dir("bf16");
  SynthOptions oq = opts("gemma4-tiny", q), of = opts("gemma4-tiny", f);
  oq.int4 = true;
  oq.int4_params = {64, false, DType::F16};
  SynthResult r = synthesize(oq);
  synthesize(of);
  EXPECT_EQ(r.quantized_linears, 10u * 7 + 2 * 6);  // no v_proj on the 2 full layers
  auto ck = Int4Checkpoint::open(q);
  EXPECT_EQ(ck->tensors().prefix(), "");  // INT4 keys drop the prefix
  EXPECT_TRUE(ck->tensors().has("embed_tokens.weight"));
  EXPECT_EQ(ck->tensors().info("layers.0.layer_scalar").dtype, DType::BF16);
  auto bf = Checkpoint::open(f);
  // Same seed → the INT4 weights are the RTN of the same values the bf16 file holds.
  for (const std::string name : {"layers.5.self_attn.q_proj", "layers.0.mlp.down_proj"}) {
    const QuantModule& m = *ck->manifest().find(name);
    std::vector<float> deq = ck->dequantized(name);
    TensorView ref = bf->get(name + ".weight");
    auto parts = ck->linear(name);
    for (int64_t row = 0; row < m.out; ++row)
      for (int64_t col = 0; col < m.in; ++col) {
        double s = f16_to_f32(parts.scales.as<uint16_t>()[row * m.groups() + col / m.group_size]);
        double w = bf16_to_f32(ref.as<uint16_t>()[row * m.in + col]);
        // Asymmetric RTN error ≤ s: s/2 from rounding to the grid, plus up to s/2 at the
        // ends of the range because the integer zero z = round(-min/s) shifts the grid;
        // the bf16 reference itself is off by ≤ 2^-8 |w| (half
        // an ulp of an 8-bit significand); fp16 scale rounding can pull
        // the grid's end in by ≤ 15 s 2^-11.
        ASSERT_LE(std::fabs(deq[size_t(row * m.in + col)] - w), s + std::fabs(w) / 256 + 15 * s / 2048 + 1e-7)
            << name << " " << row << "," << col;
      }
  }
  fs::remove_all(q);
  fs::remove_all(f);
}

TEST(Synth, Gemma12BInt4HeaderOnly) {
  fs::path d = temp_dir("12b");
  SynthOptions o = opts("gemma4-12b", d);
  o.int4 = true;
  o.header_only = true;
  o.int4_params = {128, true, DType::F16};
  auto t0 = std::chrono::steady_clock::now();
  SynthResult r = synthesize(o);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(secs, 5.0);  // headers only: no 7.6 GB of data is generated
  EXPECT_EQ(r.quantized_linears, 328u);  // 40*7 + 8*6, DESIGN.md §3
  // Linear parameters, by hand: sliding layer 3840*(4096+2048+2048+4096) + 3*15360*3840
  // = 224,133,120; full layer 3840*(8192+512+8192) + 3*15360*3840 = 241,827,840;
  // 40*224,133,120 + 8*241,827,840 = 10,899,947,520.
  const uint64_t linear_params = 10899947520ull;
  EXPECT_EQ(r.qweight_bytes, linear_params / 2);        // ≈ 5.45 GB (DESIGN.md §4)
  EXPECT_EQ(r.scale_bytes, linear_params / 128 * 2);    // ≈ 0.17 GB
  EXPECT_EQ(r.zero_bytes, 0u);                          // symmetric
  // BF16: embedding 262144*3840*2 = 2,013,265,920 (≈ 2.01 GB) + norms/scalars:
  // 48 layers * (4*3840 + 2*head_dim + 1) * 2 B + final norm 3840*2 B.
  const uint64_t small = (40ull * (4 * 3840 + 2 * 256 + 1) + 8ull * (4 * 3840 + 2 * 512 + 1) + 3840) * 2;
  EXPECT_EQ(r.bf16_bytes, 2013265920ull + small);
  auto ck = Int4Checkpoint::open(d, /*header_only=*/true);
  EXPECT_EQ(ck->manifest().modules.size(), 328u);
  EXPECT_FALSE(ck->tensors().has("layers.47.self_attn.v_proj.qweight"));
  EXPECT_TRUE(ck->tensors().has("layers.46.self_attn.v_proj.qweight"));
  EXPECT_EQ(ck->tensors().info("layers.47.self_attn.q_proj.qweight").shape, (std::vector<int64_t>{8192, 1920}));
  EXPECT_THROW(ck->linear("layers.0.mlp.up_proj"), Error);  // no data in a header-only checkpoint
  uint64_t on_disk = 0;
  for (auto& e : fs::directory_iterator(d)) on_disk += fs::file_size(e.path());
  EXPECT_LT(on_disk, 2u << 20);  // headers + JSON only
  ModelConfig c = load_model_config(d);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int>{1, 106}));
  fs::remove_all(d);
}

TEST(Synth, CliTinyInt4Asymmetric) {
  const char* b = std::getenv("G4C_BINARY_DIR");
  fs::path exe = fs::path(b ? b : ".") / "bin" / "g4c";
  if (!fs::exists(exe)) GTEST_SKIP() << "g4c not built (G4C_ENABLE_MLIR=OFF)";
  fs::path d = temp_dir("cli");
  std::string cmd = exe.string() + " synth --preset gemma4-tiny --dtype int4 --group-size 64 --asymmetric --seed 5 -o " +
                    d.string() + " --no-progress 2>/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  auto ck = Int4Checkpoint::open(d);
  EXPECT_EQ(ck->manifest().modules.size(), 82u);
  EXPECT_FALSE(ck->manifest().modules.begin()->second.symmetric);
  EXPECT_TRUE(fs::exists(d / "tokenizer.json"));
  std::string bad = exe.string() + " synth --preset gemma4-7b -o " + d.string() + " 2>/dev/null";
  EXPECT_NE(std::system(bad.c_str()), 0);
  fs::remove_all(d);
}

// Full-size 12B synth, run by hand on a big machine (G4C_SYNTH_BIG_DIR=/path/with/40GB):
// BF16 (24 GB) and INT4 g128 (7.6 GB), timed; skipped otherwise.
TEST(Synth, Gemma12BFullSize) {
  const char* big = std::getenv("G4C_SYNTH_BIG_DIR");
  if (!big) GTEST_SKIP() << "set G4C_SYNTH_BIG_DIR to run the full-size 12B synth";
  for (bool int4 : {true, false}) {
    fs::path d = fs::path(big) / (int4 ? "g4c-12b-int4" : "g4c-12b-bf16");
    fs::remove_all(d);
    SynthOptions o = opts("gemma4-12b", d);
    o.threads = 0;
    o.progress = true;
    o.int4 = int4;
    SynthResult r = synthesize(o);
    std::printf("12B %s: %.2f GB in %.1f s (%.2f GB/s)\n", int4 ? "int4 g128" : "bf16", r.data_bytes / 1e9, r.seconds,
                r.data_bytes / 1e9 / r.seconds);
    auto ck = Checkpoint::open(d);
    uint64_t sum = 0;
    for (const std::string& n : ck->names()) sum += ck->info(n).nbytes;
    EXPECT_EQ(sum, r.data_bytes);
    // Embedding std 3840^(-1/4) = 0.1276 on the first 1M values (3%: sampling + bf16).
    TensorView e = ck->get("embed_tokens.weight");
    double s = 0;
    for (int i = 0; i < (1 << 20); ++i) s += std::pow(double(bf16_to_f32(e.as<uint16_t>()[i])), 2);
    EXPECT_NEAR(std::sqrt(s / (1 << 20)), std::pow(3840.0, -0.25), 0.03 * std::pow(3840.0, -0.25));
    if (int4) {
      auto q = Int4Checkpoint::open(d);
      EXPECT_EQ(q->manifest().modules.size(), 328u);
      std::vector<float> w = q->dequantized("layers.47.mlp.down_proj");
      double ss = 0;
      for (float x : w) ss += double(x) * x;
      // N(0,1)/sqrt(15360) → std 0.00807; RTN g128 adds ~s/sqrt(12) noise, well within 5%.
      EXPECT_NEAR(std::sqrt(ss / double(w.size())), 1.0 / std::sqrt(15360.0), 0.05 / std::sqrt(15360.0));
    }
    fs::remove_all(d);
  }
}

// Safetensors reader (real tiny checkpoint, a hand-written file) and writer round trips.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "models/config.h"
#include "models/error.h"
#include "models/safetensors.h"

using namespace g4c;
using namespace g4c::models;
namespace fs = std::filesystem;

namespace {

fs::path tiny_dir() {
  const char* s = std::getenv("G4C_SOURCE_DIR");
  return fs::path(s ? s : ".") / "models" / "gemma4-tiny";
}

fs::path temp_dir(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("g4c_test_st_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

void write_file(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary) << bytes;
}

// Pads the header with spaces to a multiple of 8, as safetensors writers do, so the
// data section (and the F32/I64 values in it) is aligned.
std::string with_len(std::string header, const std::string& data) {
  while (header.size() % 8) header.push_back(' ');
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = char((n >> (8 * i)) & 0xff);
  return out + header + data;
}

}  // namespace

TEST(Safetensors, TinyCheckpoint) {
  auto ck = Checkpoint::open(tiny_dir());
  EXPECT_EQ(ck->names().size(), 168u);  // 12 layers: 10*14 + 2*13 + embedding + final norm
  EXPECT_EQ(ck->files().size(), 3u);
  EXPECT_EQ(ck->prefix(), "model.");
  const TensorInfo& e = ck->info("embed_tokens.weight");
  EXPECT_EQ(e.dtype, DType::BF16);
  EXPECT_EQ(e.shape, (std::vector<int64_t>{8192, 256}));
  EXPECT_EQ(e.nbytes, 8192u * 256 * 2);
  EXPECT_FALSE(ck->has("layers.5.self_attn.v_proj.weight"));  // k_eq_v full layer
  EXPECT_TRUE(ck->has("layers.4.self_attn.v_proj.weight"));
  EXPECT_EQ(ck->info("layers.5.self_attn.q_proj.weight").shape, (std::vector<int64_t>{512, 256}));
  // Every tensor's shape matches what the config predicts.
  ModelConfig cfg = load_model_config(tiny_dir());
  for (const LinearShape& l : linear_shapes(cfg))
    EXPECT_EQ(ck->info(l.name + ".weight").shape, (std::vector<int64_t>{l.out, l.in})) << l.name;
  // The tiny README: layer_scalar is fixed per layer in 0.55–0.95.
  for (int i = 0; i < 12; ++i) {
    TensorView v = ck->get("layers." + std::to_string(i) + ".layer_scalar");
    float s = bf16_to_f32(v.as<uint16_t>()[0]);
    EXPECT_GE(s, 0.55f);
    EXPECT_LE(s, 0.95f);
  }
  EXPECT_THROW(ck->info("layers.99.mlp.up_proj.weight"), Error);
}

TEST(Safetensors, HandWrittenFile) {
  fs::path d = temp_dir("hand");
  // Two F32 values 1.5, -2 then one I64 7; little-endian bytes written by hand.
  std::string data("\x00\x00\xc0\x3f\x00\x00\x00\xc0\x07\x00\x00\x00\x00\x00\x00\x00", 16);
  write_file(d / "model.safetensors",
             with_len(R"({"b":{"dtype":"I64","shape":[],"data_offsets":[8,16]},)"
                      R"("__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                      data));
  auto ck = Checkpoint::open(d);
  EXPECT_EQ(ck->prefix(), "");
  TensorView a = ck->get("a");
  EXPECT_EQ(a.as<float>()[0], 1.5f);
  EXPECT_EQ(a.as<float>()[1], -2.0f);
  EXPECT_EQ(ck->get("b").as<int64_t>()[0], 7);
  EXPECT_EQ(ck->info("b").numel(), 1);
  fs::remove_all(d);
}

TEST(Safetensors, WriterAddShardsRoundTrip) {
  fs::path d = temp_dir("add");
  std::vector<std::vector<uint8_t>> blobs;
  {
    // 100-byte shard cap with 64-byte tensors: one tensor per shard.
    SafetensorsWriter w(d, "model.language_model.", 100);
    for (int i = 0; i < 3; ++i) {
      std::vector<uint8_t> b(64);
      for (size_t j = 0; j < b.size(); ++j) b[j] = uint8_t(i * 64 + j);
      w.add("layers." + std::to_string(i) + ".w", DType::BF16, {4, 8}, b);
      blobs.push_back(b);
    }
    auto files = w.finish();
    EXPECT_EQ(files.size(), 4u);  // 3 shards + index
  }
  EXPECT_TRUE(fs::exists(d / "model-00003-of-00003.safetensors"));
  auto ck = Checkpoint::open(d);
  EXPECT_EQ(ck->prefix(), "model.language_model.");
  EXPECT_EQ(ck->files().size(), 3u);
  for (int i = 0; i < 3; ++i) {
    TensorView v = ck->get("layers." + std::to_string(i) + ".w");
    EXPECT_EQ(std::vector<uint8_t>(v.bytes().begin(), v.bytes().end()), blobs[i]);
    EXPECT_EQ(v.info->offset % 8, 0u);  // header padded to 8 bytes
  }
  fs::remove_all(d);
}

TEST(Safetensors, WriterPlannedThreadedAndHeaderOnly) {
  fs::path d = temp_dir("planned");
  const int kTensors = 16;
  {
    SafetensorsWriter w(d, "model.", 3000);
    for (int i = 0; i < kTensors; ++i) w.declare("t" + std::to_string(i), DType::F32, {int64_t(100 + i)});
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([&, t] {
        for (int i = kTensors - 1 - t; i >= 0; i -= 4) {  // out of declaration order
          std::vector<float> v(size_t(100 + i));
          for (size_t j = 0; j < v.size(); ++j) v[j] = float(i * 1000 + int(j));
          w.write("t" + std::to_string(i), {reinterpret_cast<const uint8_t*>(v.data()), v.size() * 4});
        }
      });
    for (auto& th : threads) th.join();
    w.finish();
  }
  auto ck = Checkpoint::open(d);
  EXPECT_GT(ck->files().size(), 1u);
  for (int i = 0; i < kTensors; ++i) {
    TensorView v = ck->get("t" + std::to_string(i));
    ASSERT_EQ(v.info->numel(), 100 + i);
    for (int j = 0; j < 100 + i; ++j) ASSERT_EQ(v.as<float>()[j], float(i * 1000 + j));
  }

  fs::path h = temp_dir("headeronly");
  {
    SafetensorsWriter w(h, "model.");
    w.add_header_only("big", DType::BF16, {262144, 3840});
    w.finish(true);
  }
  EXPECT_LT(fs::file_size(h / "model-00001-of-00001.safetensors"), 1000u);
  try {
    Checkpoint::open(h);
    FAIL() << "a header-only file must not open as a full checkpoint";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("header-only"), std::string::npos) << e.what();
  }
  auto hk = Checkpoint::open(h, /*header_only=*/true);
  EXPECT_EQ(hk->info("big").nbytes, 262144ull * 3840 * 2);
  EXPECT_THROW(hk->get("big"), Error);
  fs::remove_all(d);
  fs::remove_all(h);
}

TEST(Safetensors, WriterMisuse) {
  fs::path d = temp_dir("misuse");
  SafetensorsWriter w(d, "");
  w.declare("x", DType::U8, {4});
  std::vector<uint8_t> three(3);
  EXPECT_THROW(w.write("x", three), Error);  // wrong size
  EXPECT_THROW(w.write("y", three), Error);  // not declared
  EXPECT_THROW(w.add("z", DType::U8, {3}, three), Error);  // modes mixed
  EXPECT_THROW(w.finish(), Error);  // x never written
  fs::remove_all(d);
}

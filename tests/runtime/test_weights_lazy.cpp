// The lazy weight store (WeightStore::load_lazy, used for device backends): nothing converted
// until asked, then exactly the eager store's values; replace() works on a never-read weight.
#include <gtest/gtest.h>

#include <cstring>

#include "models/config.h"
#include "models/error.h"
#include "models/safetensors.h"
#include "runtime/plan/reference_builder.h"
#include "runtime/weights.h"
#include "tests/runtime/support.h"

using namespace g4c;

namespace {

// The tiny model's checkpoint and reference plan, from which each test opens its stores (the plan
// outlives them: a lazy store reads it).
struct Tiny {
  std::shared_ptr<const models::Checkpoint> ckpt = models::Checkpoint::open(test::tiny_model_dir());
  plan::Plan plan = plan::build_reference_plan(models::load_model_config(test::tiny_model_dir()), *ckpt);
  std::unique_ptr<runtime::WeightStore> lazy() const { return runtime::WeightStore::load_lazy(plan, ckpt); }
  std::unique_ptr<runtime::WeightStore> eager(int threads) const { return runtime::WeightStore::load(plan, *ckpt, threads); }
};

}  // namespace

TEST(WeightStore, LazyConvertsOnFirstUseAndEqualsEager) {
  const Tiny t;
  auto eager = t.eager(2);
  auto lazy = t.lazy();
  ASSERT_EQ(lazy->size(), eager->size());
  EXPECT_EQ(lazy->loaded(), 0);
  for (int i = 0; i < lazy->size(); ++i) {
    EXPECT_EQ(lazy->numel(i), eager->numel(i)) << lazy->name(i);  // shapes only: still nothing loaded
    EXPECT_EQ(lazy->name(i), eager->name(i));
  }
  EXPECT_EQ(lazy->loaded(), 0);
  const int w = lazy->find("norm.weight");
  ASSERT_GE(w, 0);
  EXPECT_EQ(std::memcmp(lazy->data(w), eager->data(w), eager->numel(w) * 4), 0);
  EXPECT_EQ(lazy->loaded(), 1);
  // replace() of a weight never read: takes the new values (without loading the old ones).
  const int e = lazy->find("embed_tokens.weight");
  ASSERT_GE(e, 0);
  std::vector<float> ones(lazy->numel(e), 1.0f);
  lazy->replace(e, ones);
  EXPECT_EQ(lazy->data(e)[lazy->numel(e) - 1], 1.0f);
  EXPECT_EQ(lazy->loaded(), 2);
  for (int i = 0; i < lazy->size(); ++i)
    if (i != e) EXPECT_EQ(std::memcmp(lazy->data(i), eager->data(i), eager->numel(i) * 4), 0) << lazy->name(i);
  EXPECT_EQ(lazy->loaded(), lazy->size());
}

// overwrite(): the weight's own array, written in place. A weight never read gets an array
// without loading the old values; one already converted is written where data() points.
TEST(WeightStore, OverwriteWritesTheOwnArrayInPlace) {
  const Tiny t;
  auto lazy = t.lazy();
  const int e = lazy->find("embed_tokens.weight"), n = lazy->find("norm.weight");
  ASSERT_GE(e, 0);
  ASSERT_GE(n, 0);
  const float* converted = lazy->data(n);
  EXPECT_EQ(lazy->loaded(), 1);
  const std::span<float> we = lazy->overwrite(e);
  ASSERT_EQ(we.size(), lazy->numel(e));
  EXPECT_EQ(lazy->loaded(), 2);  // counted as there, its checkpoint values never converted
  std::fill(we.begin(), we.end(), 2.0f);
  EXPECT_EQ(lazy->data(e), we.data());
  EXPECT_EQ(lazy->data(e)[lazy->numel(e) - 1], 2.0f);
  EXPECT_TRUE(lazy->checkpoint_bf16(e).empty());
  const std::span<float> wn = lazy->overwrite(n);
  EXPECT_EQ(wn.data(), converted) << "in place, not a new array";
  std::fill(wn.begin(), wn.end(), 3.0f);
  EXPECT_EQ(lazy->data(n)[lazy->numel(n) - 1], 3.0f);
}

// release(): the values are gone for good — data() and overwrite() throw naming the weight, the
// checkpoint's bits are not offered in their place, the shape stays; a never-read weight is
// never loaded afterwards.
TEST(WeightStore, ReleasedWeightsAreGoneNotReloaded) {
  const Tiny t;
  auto lazy = t.lazy();
  const int q = lazy->find("layers.0.self_attn.q_proj.weight"), k = lazy->find("layers.0.self_attn.k_proj.weight");
  ASSERT_GE(q, 0);
  ASSERT_GE(k, 0);
  const size_t nq = lazy->numel(q);
  std::fill_n(lazy->overwrite(q).data(), nq, 0.5f);
  lazy->release(q);
  lazy->release(k);  // never read
  EXPECT_TRUE(lazy->released(q));
  EXPECT_FALSE(lazy->released(lazy->find("norm.weight")));
  EXPECT_EQ(lazy->numel(q), nq);
  EXPECT_EQ(lazy->loaded(), 2);
  EXPECT_THROW(lazy->data(q), Error);
  EXPECT_THROW(lazy->data(k), Error);
  EXPECT_THROW(lazy->overwrite(q), Error);
  EXPECT_TRUE(lazy->checkpoint_bf16(k).empty());
  try {
    lazy->data(k);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layers.0.self_attn.k_proj.weight"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(lazy->checkpoint_bf16(lazy->find("norm.weight")).empty());  // the others untouched
}

// checkpoint_bf16: the checkpoint's own BF16 bits of a dense weight of a lazy store (what the
// CUDA backend uploads without converting), equal to the converted values; none once replaced,
// none from an eager store.
TEST(WeightStore, CheckpointBf16IsTheUnreplacedCheckpointTensor) {
  const Tiny t;
  auto lazy = t.lazy();
  auto eager = t.eager(1);
  int seen = 0;
  for (int i = 0; i < lazy->size(); ++i) {
    EXPECT_TRUE(eager->checkpoint_bf16(i).empty());
    const std::span<const uint16_t> raw = lazy->checkpoint_bf16(i);
    ASSERT_EQ(raw.size(), lazy->numel(i)) << lazy->name(i);  // the tiny checkpoint is all BF16 dense
    const auto view = t.ckpt->get(t.plan->weights()->Get(i)->checkpoint_key()->str());
    EXPECT_EQ(static_cast<const void*>(raw.data()), static_cast<const void*>(view.data)) << "not a copy";
    const float* f = lazy->data(i);
    for (size_t k = 0; k < raw.size(); k += 97) ASSERT_EQ(bf16_to_f32(raw[k]), f[k]) << lazy->name(i);
    ++seen;
  }
  EXPECT_GT(seen, 100);
  const int e = lazy->find("embed_tokens.weight");
  std::vector<float> ones(lazy->numel(e), 1.0f);
  lazy->replace(e, ones);
  EXPECT_TRUE(lazy->checkpoint_bf16(e).empty());
  EXPECT_FALSE(lazy->checkpoint_bf16(lazy->find("norm.weight")).empty());
}

// tensor_to_f32 over threads: every value once, by the scalar conversion (bf16_to_f32 /
// f16_to_f32 / memcpy are the reference), for 9M + 3 values (two chunks of ≥ 4M, the second ragged).
TEST(WeightStore, TensorToF32OverThreadsIsTheScalarConversion) {
  const int64_t n = (int64_t(9) << 20) + 3;
  std::vector<uint16_t> bits(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) bits[size_t(i)] = uint16_t(((i * 2654435761u) >> 7) & 0x3fff);  // finite in both
  for (DType dt : {DType::BF16, DType::F16}) {
    models::TensorInfo info;
    info.name = "w";
    info.dtype = dt;
    info.shape = {n};
    info.nbytes = uint64_t(n) * 2;
    const models::TensorView v{&info, reinterpret_cast<const uint8_t*>(bits.data())};
    std::vector<float> got(size_t(n), -1.f);
    runtime::tensor_to_f32(v, got.data(), 4);
    size_t bad = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float want = dt == DType::BF16 ? bf16_to_f32(bits[size_t(i)]) : f16_to_f32(bits[size_t(i)]);
      bad += std::memcmp(&want, &got[size_t(i)], 4) != 0;
    }
    EXPECT_EQ(bad, 0u) << dtype_name(dt);
  }
  models::TensorInfo info;
  info.name = "q";
  info.dtype = DType::I32;
  info.shape = {4};
  info.nbytes = 16;
  const models::TensorView v{&info, reinterpret_cast<const uint8_t*>(bits.data())};
  float out[4];
  EXPECT_THROW(runtime::tensor_to_f32(v, out, 2), g4c::Error);
}

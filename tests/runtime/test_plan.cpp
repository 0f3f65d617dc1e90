// Plan schema and loader: the reference program's structure, round trip through a file,
// and the clear errors for truncated plans, other versions, deprecated fields and other
// checkpoints.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "models/config.h"
#include "models/error.h"
#include "models/safetensors.h"
#include "runtime/plan/plan.h"
#include "runtime/plan/reference_builder.h"
#include "tests/runtime/support.h"

using namespace g4c;
namespace fb = g4c::plan::fb;

namespace {

struct Tiny {
  models::ModelConfig cfg = models::load_model_config(test::tiny_model_dir());
  std::unique_ptr<models::Checkpoint> ckpt = models::Checkpoint::open(test::tiny_model_dir());
};

std::vector<uint8_t> read_all(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

int count(const plan::Plan& p, fb::KernelId k) {
  int n = 0;
  for (const auto* s : *p->program()) n += s->kernel() == k;
  return n;
}

}  // namespace

TEST(Plan, ReferenceProgramHasTheGemma4Structure) {
  Tiny t;
  auto p = plan::build_reference_plan(t.cfg, *t.ckpt);
  EXPECT_EQ(p->format_version(), plan::kPlanFormatVersion);
  EXPECT_EQ(p->model()->num_layers(), 12);
  // 12 layers: q,k linears each, v only on the 10 sliding layers (full layers are k_eq_v),
  // o, gate/up, down: 12*5 + 10 = 70 Linear steps.
  EXPECT_EQ(count(p, fb::KernelId::Linear), 70);
  EXPECT_EQ(count(p, fb::KernelId::Attention), 12);
  EXPECT_EQ(count(p, fb::KernelId::PostNormResidual), 24);
  EXPECT_EQ(count(p, fb::KernelId::LmHead), 1);
  // Sliding layers paged from the window pool (their window set), full layers paged with none.
  int windowed = 0, paged = 0;
  for (const auto* k : *p->kv()) {
    EXPECT_EQ(k->kind(), fb::KvKind::Paged);
    EXPECT_EQ(k->capacity(), 0);
    if (k->window() > 0) {
      ++windowed;
      EXPECT_EQ(k->window(), 128);
    } else {
      ++paged;
      EXPECT_EQ(k->head_dim(), 128);
      EXPECT_EQ(k->num_kv_heads(), 1);
    }
  }
  EXPECT_EQ(windowed, 10);
  EXPECT_EQ(paged, 2);
  // sliding_kv "ring": rings of capacity W-1+max_chunk for the sliding layers.
  plan::ReferenceOptions ring;
  ring.sliding_kv = "ring";
  auto r = plan::build_reference_plan(t.cfg, *t.ckpt, ring);
  int rings = 0;
  for (const auto* k : *r->kv())
    if (k->kind() == fb::KvKind::Ring) {
      ++rings;
      EXPECT_EQ(k->capacity(), 128 - 1 + r->max_chunk_tokens());
    }
  EXPECT_EQ(rings, 10);
  // Layer 5 is full: proportional RoPE with p=0.25 over D=128 rotates int(0.25*64) = 16 pairs.
  for (const auto* s : *p->program())
    if (s->kernel() == fb::KernelId::QkNormRopeKvWrite && s->layer() == 5) {
      EXPECT_EQ(s->attrs()->rotary_pairs(), 16);
      EXPECT_TRUE(s->attrs()->v_from_k());
      EXPECT_DOUBLE_EQ(s->attrs()->rope_theta(), 1e6);
    }
  EXPECT_NE(plan::describe(p).find("QkNormRopeKvWrite"), std::string::npos);
}

TEST(Plan, RoundTripsThroughAFile) {
  Tiny t;
  auto p = plan::build_reference_plan(t.cfg, *t.ckpt);
  auto dir = test::temp_dir("plan");
  p.save(dir / "tiny.g4p");
  auto q = plan::Plan::load_file(dir / "tiny.g4p");
  EXPECT_EQ(q.bytes(), p.bytes());
  EXPECT_NO_THROW(plan::verify_plan_matches(q, t.cfg, *t.ckpt));
}

TEST(Plan, TruncatedPlanIsAClearError) {
  Tiny t;
  auto bytes = plan::build_reference_plan(t.cfg, *t.ckpt).bytes();
  for (size_t keep : {size_t(0), size_t(7), bytes.size() / 2, bytes.size() - 1}) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + keep);
    try {
      plan::Plan::from_bytes(cut, "cut.g4p");
      ADD_FAILURE() << "a plan cut to " << keep << " bytes was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("cut.g4p"), std::string::npos) << e.what();
    }
  }
  std::vector<uint8_t> junk(4096, 0x5a);
  EXPECT_THROW(plan::Plan::from_bytes(junk, "junk.g4p"), Error);
}

// A plan the fuzzer found (tests/fuzz/corpus/plan/misaligned_shape_vector.g4p): it passes the
// flatbuffers verifier, which checks a vector's length field but not that its 8-byte elements
// are 8-byte aligned, and weight shapes ([long]) start 4 bytes off; reading them was undefined
// behaviour. The loader refuses it.
TEST(Plan, MisalignedVectorDataIsRefused) {
  const auto path = test::tiny_model_dir().parent_path().parent_path() / "tests" / "fuzz" / "corpus" / "plan" / "misaligned_shape_vector.g4p";
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in) << path;
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  try {
    plan::Plan::from_bytes(bytes, "fuzzed.g4p");
    FAIL() << "a plan with misaligned vector data was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fuzzed.g4p: plan file is corrupt (misaligned 64-bit vector data)"),
              std::string::npos)
        << e.what();
  }
}

TEST(Plan, OtherFormatVersionIsRefused) {
  Tiny t;
  auto bytes = plan::build_reference_plan(t.cfg, *t.ckpt).bytes();
  // Patch format_version in place (same buffer layout, only the scalar changes).
  auto* root = fb::GetMutablePlan(bytes.data());
  ASSERT_TRUE(root->mutate_format_version(plan::kPlanFormatVersion + 1));
  try {
    plan::Plan::from_bytes(bytes, "v2.g4p");
    FAIL() << "a plan of another version was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("version"), std::string::npos) << e.what();
  }
}

TEST(Plan, PlanForAnotherCheckpointIsRefused) {
  Tiny t;
  auto p = plan::build_reference_plan(t.cfg, *t.ckpt);
  // A checkpoint that differs in one tensor shape: write a copy with the final norm cut.
  auto dir = test::temp_dir("other_ckpt");
  {
    models::SafetensorsWriter w(dir, "model.");
    for (const auto& n : t.ckpt->names()) {
      auto v = t.ckpt->get(n);
      auto shape = v.info->shape;
      size_t bytes = v.info->nbytes;
      if (n == "norm.weight") {
        shape[0] -= 1;
        bytes -= 2;
      }
      w.add(n, v.info->dtype, shape, {v.data, bytes});
    }
    w.finish();
  }
  std::filesystem::copy_file(test::tiny_model_dir() / "config.json", dir / "config.json",
                             std::filesystem::copy_options::overwrite_existing);
  auto other = models::Checkpoint::open(dir);
  auto cfg = models::load_model_config(dir);
  try {
    plan::verify_plan_matches(p, cfg, *other);
    FAIL() << "a plan for another checkpoint was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("another checkpoint"), std::string::npos) << e.what();
  }
}

TEST(Plan, StepsThatDisagreeWithTheirBindingsAreRefused) {
  Tiny t;
  plan::ReferenceOptions ro;
  ro.sliding_kv = "ring";  // sliding layers in rings (the default pages them), for the ring case
  const auto good = plan::build_reference_plan(t.cfg, *t.ckpt, ro).bytes();
  auto expect_refused = [&](auto&& edit, const char* what) {
    auto bytes = good;
    auto* root = fb::GetMutablePlan(bytes.data());
    edit(*root);
    try {
      plan::Plan::from_bytes(bytes, "edited.g4p");
      ADD_FAILURE() << what << ": accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("inconsistent plan"), std::string::npos) << what << ": " << e.what();
    }
  };
  auto first = [](fb::Plan& p, fb::KernelId k) {
    for (unsigned i = 0; i < p.program()->size(); ++i)
      if (p.program()->Get(i)->kernel() == k) return p.mutable_program()->GetMutableObject(i);
    return static_cast<fb::Step*>(nullptr);
  };
  // A q_proj bound to the embedding ([8192, 256] instead of [256, 256]).
  expect_refused([&](fb::Plan& p) { first(p, fb::KernelId::Linear)->mutable_weights()->Mutate(0, 0); }, "wrong weight");
  // The full layer 5's attention (q of 4 heads x 128) reading h (256 wide).
  expect_refused([&](fb::Plan& p) {
    for (unsigned i = 0; i < p.program()->size(); ++i) {
      auto* st = p.mutable_program()->GetMutableObject(i);
      if (st->kernel() == fb::KernelId::Attention && st->layer() == 5)
        st->mutable_inputs()->Mutate(0, first(p, fb::KernelId::Embed)->outputs()->Get(0));
    }
  }, "attention on h");
  // More rotary pairs than head_dim/2.
  expect_refused([&](fb::Plan& p) { first(p, fb::KernelId::QkNormRopeKvWrite)->mutable_attrs()->mutate_rotary_pairs(33); },
                 "rotary pairs");
  // A ring too small for the window plus a chunk.
  expect_refused([&](fb::Plan& p) { p.mutable_kv()->GetMutableObject(0)->mutate_capacity(128); }, "ring capacity");
  // A KV element type the backends do not store (F32, BF16 and F8E4M3 are the KV types).
  expect_refused([&](fb::Plan& p) { ASSERT_TRUE(p.mutable_kv()->GetMutableObject(0)->mutate_dtype(fb::DType::I8)); },
                 "kv dtype");
  // The LM head writing token rows.
  expect_refused([&](fb::Plan& p) {
    auto* st = first(p, fb::KernelId::LmHead);
    st->mutable_outputs()->Mutate(0, st->inputs()->Get(0));
  }, "lm head rows");
}

// KvLayer.kv_shared and Attrs.k_from_v (K=V stored once) are deprecated: a plan that sets either
// is refused with an error naming the field. A minimal hand-built plan (one paged full-attention
// cache, one Attention step) with both flags clear loads, so the refusals come from the flags.
TEST(Plan, DeprecatedKvSharedFieldsAreRefused) {
  auto build = [](bool kv_shared, bool k_from_v) {
    flatbuffers::FlatBufferBuilder b;
    const std::vector<flatbuffers::Offset<fb::LayerConfig>> no_layers;
    const auto layers = b.CreateVector(no_layers);  // before the table that refers to it
    fb::ModelConfigBuilder mb(b);
    mb.add_layers(layers);
    const auto model = mb.Finish();
    const std::vector<flatbuffers::Offset<fb::Weight>> weights;
    const std::vector<flatbuffers::Offset<fb::KvLayer>> kv = {
        fb::CreateKvLayer(b, /*layer=*/0, fb::KvKind::Paged, /*num_kv_heads=*/1, /*head_dim=*/8, /*window=*/0,
                          /*capacity=*/0, /*block_size=*/16, kv_shared, fb::DType::F32)};
    const std::vector<flatbuffers::Offset<fb::Value>> values = {fb::CreateValueDirect(b, "q", fb::DType::F32, 8),
                                                                fb::CreateValueDirect(b, "o", fb::DType::F32, 8)};
    const std::vector<int32_t> in = {0}, out = {1};
    const auto attrs = fb::CreateAttrs(b, 0, 0, /*window=*/0, /*num_q_heads=*/1, /*num_kv_heads=*/1, /*head_dim=*/8, 0,
                                       0, 0, /*scale=*/1.f, fb::Epilogue::None, /*kv_layer=*/0, false, k_from_v);
    const std::vector<flatbuffers::Offset<fb::Step>> program = {
        fb::CreateStepDirect(b, fb::KernelId::Attention, 0, &in, &out, nullptr, attrs)};
    b.Finish(fb::CreatePlanDirect(b, plan::kPlanFormatVersion, "test", 0, nullptr, model, &weights, &kv,
                                  /*kv_block_size=*/16, /*max_chunk_tokens=*/1, &values, nullptr, &program,
                                  /*logits_value=*/1),
             fb::PlanIdentifier());
    return std::vector<uint8_t>(b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize());
  };
  EXPECT_NO_THROW(plan::Plan::from_bytes(build(false, false), "stored.g4p"));
  auto expect_refused = [&](bool kv_shared, bool k_from_v, const char* field) {
    try {
      plan::Plan::from_bytes(build(kv_shared, k_from_v), "kv_shared.g4p");
      ADD_FAILURE() << field << ": accepted";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("kv_shared.g4p"), std::string::npos) << what;
      EXPECT_NE(what.find(std::string("deprecated ") + field), std::string::npos) << what;
    }
  };
  expect_refused(true, false, "KvLayer.kv_shared");
  expect_refused(false, true, "Attrs.k_from_v");
  expect_refused(true, true, "KvLayer.kv_shared");  // the caches are checked before the steps
}

// Frontend on the bundled gemma4-tiny checkpoint: the unfused graph of DESIGN.md §2.
// Expected numbers come from the tiny config.json (12 layers, full at 5 and 11, k_eq_v,
// head_dim 64 / full 128, 2 / 1 kv heads, partial_rotary_factor 0.25, window 128).
#include <gtest/gtest.h>

#include <cmath>

#include "frontend/Frontend.h"
#include "models/error.h"
#include "passes/Pipeline.h"
#include "tests/compiler/test_util.h"

namespace g4c {
namespace {

using namespace mlir;

class TinyFrontend : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = test::source_dir() / "models" / "gemma4-tiny";
    if (!std::filesystem::exists(dir / "config.json")) GTEST_SKIP() << "no " << dir;
    module = frontend::build_from_model_dir(ctx, dir);
  }
  std::filesystem::path dir;
  MLIRContext ctx;
  OwningOpRef<ModuleOp> module;
};

TEST_F(TinyFrontend, UnfusedOpCounts) {
  auto n = test::op_counts(*module);
  // 10 sliding layers x 7 Linears + 2 full (k_eq_v, no v_proj) x 6.
  EXPECT_EQ(n["g4.dequant"], 82);
  EXPECT_EQ(n["g4.matmul"], 82);
  for (const char* op : {"g4.kv_write", "g4.kv_read", "g4.qk", "g4.mask", "g4.softmax", "g4.pv", "g4.scale"})
    EXPECT_EQ(n[op], 12) << op;
  // Per layer: input, q_norm, k_norm, v (no weight), post_attn, pre_ffn, post_ffn; plus the final norm.
  EXPECT_EQ(n["g4.rms_norm"], 12 * 7 + 1);
  EXPECT_EQ(n["g4.rope"], 24);  // q and k of every layer; V never gets RoPE
  EXPECT_EQ(n["g4.embed"], 1);
  EXPECT_EQ(n["g4.logits"], 1);
  EXPECT_EQ(n["g4.softcap"], 1);
  // Every linear weight of the checkpoint: 82 Linears + embedding + 12 x (4 norms, q/k norm, scalar) + norm.
  EXPECT_EQ(n["g4.weight"], 82 + 1 + 12 * 7 + 1);
}

TEST_F(TinyFrontend, LayerGeometryAndRope) {
  const double sqrt_h_bf16 = 16.0;  // sqrt(256) = 16 exactly, also in bf16
  module->walk([&](g4::EmbedOp op) { EXPECT_EQ(op.getScale().convertToDouble(), sqrt_h_bf16); });
  module->walk([&](g4::MaskOp op) {
    int64_t layer = op->getAttrOfType<IntegerAttr>("g4.layer").getInt();
    const bool full = layer == 5 || layer == 11;
    EXPECT_EQ(op.getWindowAttr().getInt(), full ? 0 : 128) << "layer " << layer;
  });
  module->walk([&](g4::RopeOp op) {
    int64_t layer = op->getAttrOfType<IntegerAttr>("g4.layer").getInt();
    if (layer == 5 || layer == 11) {
      // proportional: D = 128, int(0.25 * 128 / 2) = 16 rotated pairs, theta 1e6
      EXPECT_EQ(op.getHeadDimAttr().getInt(), 128);
      EXPECT_EQ(op.getRotaryPairsAttr().getInt(), 16);
      EXPECT_EQ(op.getTheta().convertToDouble(), 1e6);
      EXPECT_EQ(op.getRopeType(), "proportional");
    } else {
      EXPECT_EQ(op.getHeadDimAttr().getInt(), 64);
      EXPECT_EQ(op.getRotaryPairsAttr().getInt(), 32);
      EXPECT_EQ(op.getTheta().convertToDouble(), 1e4);
      EXPECT_EQ(op.getRopeType(), "default");
    }
  });
  module->walk([&](g4::QKOp op) {
    int64_t layer = op->getAttrOfType<IntegerAttr>("g4.layer").getInt();
    const bool full = layer == 5 || layer == 11;
    EXPECT_EQ(op.getNumHeadsAttr().getInt(), 4);
    EXPECT_EQ(op.getNumKvHeadsAttr().getInt(), full ? 1 : 2);
  });
}

TEST_F(TinyFrontend, KEqVTakesVFromTheRawKProjection) {
  int checked = 0;
  module->walk([&](g4::KVWriteOp write) {
    auto vnorm = write.getValue().getDefiningOp<g4::RmsNormOp>();
    ASSERT_TRUE(vnorm);
    EXPECT_FALSE(vnorm.getWeightAttr()) << "V's per-head norm has no scale";
    auto vproj = vnorm.getInput().getDefiningOp<g4::MatmulOp>();
    ASSERT_TRUE(vproj);
    auto weight = vproj.getWeight().getDefiningOp<g4::DequantOp>().getWeight().str();
    const int64_t layer = write.getLayerAttr().getInt();
    const std::string expected = "layers." + std::to_string(layer) + ((layer == 5 || layer == 11) ? ".self_attn.k_proj" : ".self_attn.v_proj");
    EXPECT_EQ(weight, expected);
    // The key goes through rope(rms(., k_norm)) of the same projection on k_eq_v layers.
    auto rope = write.getKey().getDefiningOp<g4::RopeOp>();
    ASSERT_TRUE(rope);
    auto knorm = rope.getInput().getDefiningOp<g4::RmsNormOp>();
    ASSERT_TRUE(knorm);
    if (layer == 5 || layer == 11) EXPECT_EQ(knorm.getInput(), vnorm.getInput());
    ++checked;
  });
  EXPECT_EQ(checked, 12);
}

TEST_F(TinyFrontend, FusedGraphHasOneKernelPerProjection) {
  std::string diag;
  passes::PipelineOptions opts;
  ASSERT_TRUE(passes::run_pipeline(*module, opts, "", &diag)) << diag;
  auto n = test::op_counts(*module);
  for (const char* gone : {"g4.dequant", "g4.matmul", "g4.qk", "g4.mask", "g4.softmax", "g4.pv", "g4.kv_read",
                           "g4.gelu_tanh", "g4.mul", "g4.add", "g4.scale", "g4.kv_write", "g4.rope", "g4.logits",
                           "g4.softcap"})
    EXPECT_EQ(n[gone], 0) << gone;
  EXPECT_EQ(n["g4.attention"], 12);
  EXPECT_EQ(n["g4.gate_up"], 12);
  EXPECT_EQ(n["g4.linear"], 10 * 5 + 2 * 4);  // q, k, [v], o, down
  EXPECT_EQ(n["g4.norm_residual"], 24);       // two per layer (the last one without a next norm)
  EXPECT_EQ(n["g4.rms_norm"], 1);             // layer 0's input norm; q/k/v norms are in qk_norm_rope_kv_write
  EXPECT_EQ(n["g4.qk_norm_rope_kv_write"], 12);
  EXPECT_EQ(n["g4.lm_head"], 1);
  EXPECT_EQ(n["g4.kv_buffer"], 12);
}

TEST(Frontend, Gemma31BPresetBuildsAndFuses) {
  // The 31B geometry straight from the preset (no checkpoint): every layer gets one
  // attention and one kv buffer of its kind, every Linear exactly one kernel.
  const models::ModelConfig cfg = models::preset("gemma4-31b");
  MLIRContext ctx;
  auto module = frontend::build_decoder(ctx, cfg, frontend::expected_weights(cfg));
  passes::PipelineOptions opts;
  opts.budget_mib = 1 << 20;  // 1 TiB: residency is not what this test is about
  opts.sliding_kv = "ring";   // auto would page the sliding layers at max_seq_len 2048 (plan-kv.mlir)
  std::string diag;
  ASSERT_TRUE(passes::run_pipeline(*module, opts, "", &diag)) << diag;
  auto n = test::op_counts(*module);
  EXPECT_EQ(n["g4.attention"], cfg.num_layers);
  EXPECT_EQ(n["g4.kv_buffer"], cfg.num_layers);
  EXPECT_EQ(n["g4.gate_up"], cfg.num_layers);
  EXPECT_EQ(size_t(n["g4.linear"] + 2 * n["g4.gate_up"]), models::linear_shapes(cfg).size());
  module->walk([&](g4::KVBufferOp b) {
    const int64_t layer = b.getLayerAttr().getInt();
    EXPECT_EQ(b.getKind(), cfg.is_full(int(layer)) ? "paged" : "ring") << "layer " << layer;
    EXPECT_EQ(b.getHeadDimAttr().getInt(), cfg.layers[layer].head_dim);
    EXPECT_EQ(b.getNumKvHeadsAttr().getInt(), cfg.layers[layer].num_kv_heads);
  });
  auto kv = (*module)->getAttrOfType<DictionaryAttr>("g4.kv");
  EXPECT_EQ(size_t(kv.getAs<IntegerAttr>("sliding_bytes_per_token").getInt()),
            cfg.kv_bytes_per_token(models::LayerKind::Sliding));
  EXPECT_EQ(size_t(kv.getAs<IntegerAttr>("full_bytes_per_token").getInt()), cfg.kv_bytes_per_token(models::LayerKind::Full));
}

TEST(Frontend, MissingTensorNamesTheCheckpoint) {
  // A config whose checkpoint lacks tensors: the error names the directory and the tensor.
  auto tmp = std::filesystem::temp_directory_path() / "g4c_frontend_missing";
  std::filesystem::remove_all(tmp);
  std::filesystem::create_directories(tmp);
  const auto tiny = test::source_dir() / "models" / "gemma4-tiny";
  if (!std::filesystem::exists(tiny / "config.json")) GTEST_SKIP();
  std::filesystem::copy_file(tiny / "config.json", tmp / "config.json");
  // One shard of three: the index is missing too, so open() fails or a tensor is absent.
  std::filesystem::copy_file(tiny / "model-00001-of-00003.safetensors", tmp / "model.safetensors");
  MLIRContext ctx;
  try {
    frontend::build_from_model_dir(ctx, tmp);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(tmp.string()), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(tmp);
}

}  // namespace
}  // namespace g4c

// g4-awq-scale on models/gemma4-tiny through the calibration executor: the graph's exact sites
// (24 RMSNorm folds, 12 up → down folds, o_proj never), and the folded model's float logits
// against the unfolded model's, before any quantization.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <random>

#include "frontend/Frontend.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "passes/AWQScale.h"
#include "runtime/engine.h"
#include "tools/quant_executor.h"

namespace {

std::filesystem::path tiny() {
  const char* src = std::getenv("G4C_SOURCE_DIR");
  return std::filesystem::path(src ? src : ".") / "models" / "gemma4-tiny";
}

std::vector<int32_t> tokens(int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> id(3, 8191);
  std::vector<int32_t> t{2};  // BOS
  while (int(t.size()) < n) t.push_back(id(rng));
  return t;
}

std::vector<float> logits(const std::map<std::string, std::vector<float>>& replaced, std::span<const int32_t> ids) {
  g4c::runtime::EngineOptions o;
  o.max_sequences = 1;
  o.max_seq_len = int(ids.size());
  o.threads = 2;
  auto e = g4c::runtime::Engine::open(tiny(), std::nullopt, o);
  for (const auto& [name, values] : replaced) e->replace_weight(name, values);
  return e->logits(ids);
}

TEST(AwqModel, FoldedTinyModelKeepsItsFloatLogits) {
  const int len = 64;
  const std::vector<std::vector<int32_t>> calib = {tokens(len, 1), tokens(len, 2), tokens(len, 3)};
  g4c::tools::EngineCalibrationExecutor exec(tiny(), calib, len, /*threads=*/2, /*batch=*/2);
  mlir::MLIRContext ctx;
  g4c::frontend::load_dialects(ctx);
  auto module = g4c::frontend::build_from_model_dir(ctx, tiny());
  g4c::passes::AwqPassConfig cfg{&exec, {}};
  cfg.driver.awq.spec = {128, false};
  cfg.driver.threads = 2;
  std::map<std::string, std::vector<float>> rewritten;
  cfg.driver.on_tensor = [&](int layer, const std::string& name, const std::vector<float>& v) {
    rewritten["layers." + std::to_string(layer) + "." + name + ".weight"] = v;
  };
  int sites = 0;
  double alpha_sum = 0;
  cfg.driver.on_site = [&](const g4c::quant::AwqSiteReport& r) {
    ++sites;
    alpha_sum += r.alpha;
    EXPECT_LE(r.error, r.error_unscaled) << r.layer << " " << r.producer;
    EXPECT_EQ(r.calibration_rows, 3 * len);
  };
  mlir::PassManager pm(&ctx);
  pm.addPass(g4c::passes::createAwqScalePass(cfg));
  ASSERT_TRUE(mlir::succeeded(pm.run(*module)));
  auto attr = (*module)->getAttrOfType<mlir::DictionaryAttr>("g4.awq");
  ASSERT_TRUE(attr);
  // 12 layers: input_layernorm → q/k(/v) and pre_feedforward_layernorm → gate/up each, up → down
  // each; o_proj (attention over a weightless V norm) has no exact fold.
  EXPECT_EQ(attr.getAs<mlir::IntegerAttr>("norm_folds").getInt(), 24);
  EXPECT_EQ(attr.getAs<mlir::IntegerAttr>("linear_folds").getInt(), 12);
  EXPECT_EQ(attr.getAs<mlir::IntegerAttr>("unscaled_linears").getInt(), 12);
  EXPECT_EQ(sites, 36);
  EXPECT_GT(alpha_sum, 0.0);  // not every site kept s = 1: the comparison below is not vacuous
  EXPECT_EQ(rewritten.count("layers.0.self_attn.o_proj.weight"), 0u);
  EXPECT_EQ(rewritten.count("layers.5.input_layernorm.weight"), 1u);

  const std::vector<int32_t> ids = tokens(48, 9);
  const std::vector<float> before = logits({}, ids), after = logits(rewritten, ids);
  ASSERT_EQ(before.size(), after.size());
  double diff = 0, mx = 0;
  for (size_t i = 0; i < before.size(); ++i) {
    diff = std::max(diff, double(std::fabs(before[i] - after[i])));
    mx = std::max(mx, double(std::fabs(before[i])));
  }
  // Exact in real arithmetic; in fp32 each fold adds a few roundings per product (w / w', the
  // column scale, the scaled activation), which 12 layers of norms, attention and residual adds
  // carry to the soft-capped logits (|z| ≤ 30) as ~1e-5: 1e-3 absolute leaves room, and is two
  // orders below what INT4 moves them.
  EXPECT_LE(diff, 1e-3) << "largest |logit| " << mx;
  std::printf("AWQ folds: max |Δ logit| %.3g (largest |logit| %.3g)\n", diff, mx);

  // The executor starts over from the embeddings with the folded weights: a later pass sees the
  // scaled q/k/v inputs of layer 0 (= the unfolded ones / t).
  int observed = 0;
  exec.run_layer(0, [&](const std::vector<std::string>&, const float*, int64_t rows, int64_t) { observed += rows; },
                 /*advance=*/false);
  EXPECT_EQ(observed, 4 * 3 * len);  // q/k/v, o, gate/up, down inputs of every calibration token
}

}  // namespace

// Codegen against the runtime's hand-written reference plan builder
// (runtime/plan/reference_builder.cpp, no MLIR): for the tiny model the compiled
// plan must have the same program step for step — kernel ids, layers, labels,
// weight bindings (by name), attributes, value shapes and data flow — and its
// arena must never place two live values on the same bytes.
#include <gtest/gtest.h>

#include <map>
#include <tuple>

#include "codegen/Codegen.h"
#include "frontend/Frontend.h"
#include "models/error.h"
#include "models/safetensors.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "passes/Pipeline.h"
#include "runtime/plan/plan.h"
#include "runtime/plan/reference_builder.h"
#include "tests/compiler/test_util.h"

namespace g4c {
namespace {

namespace fb = plan::fb;

class TinyCodegen : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = test::source_dir() / "models" / "gemma4-tiny";
    if (!std::filesystem::exists(dir / "config.json")) GTEST_SKIP() << "no " << dir;
    cfg = models::load_model_config(dir);
    ckpt = models::Checkpoint::open(dir, /*header_only=*/true);
  }
  plan::Plan compiled(const passes::PipelineOptions& popts = {}) {
    mlir::MLIRContext ctx;
    auto module = frontend::build_from_model_dir(ctx, dir);
    std::string diag;
    EXPECT_TRUE(passes::run_pipeline(*module, popts, "", &diag)) << diag;
    codegen::CodegenOptions o;
    o.format_version = plan::kPlanFormatVersion;
    o.fingerprint = plan::checkpoint_fingerprint(cfg, *ckpt, &o.fingerprint_text);
    return plan::Plan::from_bytes(codegen::emit_plan(*module, cfg, o), "<codegen plan>");
  }
  std::filesystem::path dir;
  models::ModelConfig cfg;
  std::unique_ptr<models::Checkpoint> ckpt;
};

std::pair<int, fb::RowSpace> shape_of_logits(const plan::Plan& p) {
  const fb::Value* v = p->values()->Get(p->logits_value());
  return {v->cols(), v->rows()};
}

std::string weight_name(const plan::Plan& p, int id) { return id < 0 ? "-" : p->weights()->Get(id)->name()->str(); }

// For every input of every step: the index of the step that last wrote it (-1: none).
std::vector<std::vector<int>> producers(const plan::Plan& p) {
  std::map<int, int> last_writer;
  std::vector<std::vector<int>> out;
  for (unsigned s = 0; s < p->program()->size(); ++s) {
    const fb::Step* step = p->program()->Get(s);
    std::vector<int> row;
    for (int v : *step->inputs()) row.push_back(last_writer.count(v) ? last_writer[v] : -1);
    out.push_back(row);
    for (int v : *step->outputs()) last_writer[v] = int(s);
  }
  return out;
}

TEST_F(TinyCodegen, MatchesTheReferenceBuilderStepForStep) {
  plan::Plan ours = compiled();
  plan::Plan ref = plan::build_reference_plan(cfg, *ckpt);
  ASSERT_EQ(ours->program()->size(), ref->program()->size());
  EXPECT_EQ(ours->fingerprint(), ref->fingerprint());
  const auto ours_prod = producers(ours), ref_prod = producers(ref);
  for (unsigned i = 0; i < ref->program()->size(); ++i) {
    const fb::Step* a = ours->program()->Get(i);
    const fb::Step* b = ref->program()->Get(i);
    SCOPED_TRACE("step " + std::to_string(i) + " " + b->label()->str());
    EXPECT_EQ(a->kernel(), b->kernel());
    EXPECT_EQ(a->layer(), b->layer());
    EXPECT_EQ(a->label()->str(), b->label()->str());
    ASSERT_EQ(a->weights()->size(), b->weights()->size());
    for (unsigned w = 0; w < b->weights()->size(); ++w)
      EXPECT_EQ(weight_name(ours, a->weights()->Get(w)), weight_name(ref, b->weights()->Get(w))) << "weight " << w;
    ASSERT_EQ(a->inputs()->size(), b->inputs()->size());
    ASSERT_EQ(a->outputs()->size(), b->outputs()->size());
    auto shape = [](const plan::Plan& p, int v) {
      const fb::Value* val = p->values()->Get(v);
      return std::pair(val->cols(), val->rows());
    };
    for (unsigned k = 0; k < b->inputs()->size(); ++k)
      EXPECT_EQ(shape(ours, a->inputs()->Get(k)), shape(ref, b->inputs()->Get(k))) << "input " << k;
    for (unsigned k = 0; k < b->outputs()->size(); ++k)
      EXPECT_EQ(shape(ours, a->outputs()->Get(k)), shape(ref, b->outputs()->Get(k))) << "output " << k;
    // Same data flow: each input comes from the same earlier step. The reference reads
    // v_raw = k_raw on k_eq_v layers, which our graph passes as the same value too.
    EXPECT_EQ(ours_prod[i], ref_prod[i]);
    const fb::Attrs* x = a->attrs();
    const fb::Attrs* y = b->attrs();
    EXPECT_EQ(x->eps(), y->eps());
    EXPECT_EQ(x->norm_dim(), y->norm_dim());
    EXPECT_EQ(x->window(), y->window());
    EXPECT_EQ(x->num_q_heads(), y->num_q_heads());
    EXPECT_EQ(x->num_kv_heads(), y->num_kv_heads());
    EXPECT_EQ(x->head_dim(), y->head_dim());
    EXPECT_EQ(x->rope_theta(), y->rope_theta());
    EXPECT_EQ(x->rotary_pairs(), y->rotary_pairs());
    EXPECT_EQ(x->softcap(), y->softcap());
    EXPECT_EQ(x->scale(), y->scale());
    EXPECT_EQ(x->epilogue(), y->epilogue());
    EXPECT_EQ(x->kv_layer(), y->kv_layer());
    EXPECT_EQ(x->v_from_k(), y->v_from_k());
  }
  // KV layout: ring capacity window-1+256 for sliding layers, 16-token blocks for full ones.
  ASSERT_EQ(ours->kv()->size(), ref->kv()->size());
  for (unsigned i = 0; i < ref->kv()->size(); ++i) {
    const fb::KvLayer* a = ours->kv()->Get(i);
    const fb::KvLayer* b = ref->kv()->Get(i);
    EXPECT_EQ(a->layer(), b->layer());
    EXPECT_EQ(a->kind(), b->kind());
    EXPECT_EQ(a->num_kv_heads(), b->num_kv_heads());
    EXPECT_EQ(a->head_dim(), b->head_dim());
    EXPECT_EQ(a->window(), b->window());
    EXPECT_EQ(a->capacity(), b->capacity());
    EXPECT_EQ(a->block_size(), b->block_size());
    EXPECT_EQ(a->dtype(), b->dtype());
  }
  EXPECT_EQ(ours->kv_block_size(), ref->kv_block_size());
  EXPECT_EQ(ours->max_chunk_tokens(), ref->max_chunk_tokens());
  EXPECT_EQ(shape_of_logits(ours), shape_of_logits(ref));
}

TEST_F(TinyCodegen, ArenaNeverOverlapsLiveValues) {
  plan::Plan p = compiled();
  const unsigned nsteps = p->program()->size(), nvalues = p->values()->size();
  // Live range of a value over the plan's steps: first write .. last read.
  std::vector<int> first(nvalues, -1), last(nvalues, -1);
  for (unsigned s = 0; s < nsteps; ++s) {
    const fb::Step* step = p->program()->Get(s);
    for (int v : *step->outputs())
      if (first[v] < 0) first[v] = int(s);
    for (int v : *step->inputs()) last[v] = int(s);
    for (int v : *step->outputs()) last[v] = std::max(last[v], int(s));
  }
  last[p->logits_value()] = int(nsteps);  // read by the sampler after the program
  ASSERT_GT(p->buckets()->size(), 1u);
  for (const fb::Bucket* b : *p->buckets()) {
    SCOPED_TRACE("bucket of " + std::to_string(b->max_tokens()) + " tokens");
    auto bytes = [&](unsigned v) {
      const fb::Value* val = p->values()->Get(v);
      const int rows = val->rows() == fb::RowSpace::Tokens ? b->max_tokens() : b->max_logit_rows();
      return uint64_t(rows) * val->cols() * 4;  // f32 values
    };
    for (unsigned u = 0; u < nvalues; ++u) {
      EXPECT_LE(b->arena_offsets()->Get(u) + bytes(u), b->arena_bytes()) << p->values()->Get(u)->name()->str();
      for (unsigned v = u + 1; v < nvalues; ++v) {
        const bool live_together = first[u] <= last[v] && first[v] <= last[u];
        if (!live_together) continue;
        const uint64_t a0 = b->arena_offsets()->Get(u), a1 = a0 + bytes(u);
        const uint64_t b0 = b->arena_offsets()->Get(v), b1 = b0 + bytes(v);
        EXPECT_TRUE(a1 <= b0 || b1 <= a0) << p->values()->Get(u)->name()->str() << " and "
                                          << p->values()->Get(v)->name()->str();
      }
    }
  }
}

TEST_F(TinyCodegen, BucketsCarryDecodeAndGraphFlags) {
  // max-seqs 6, max-chunk 512, graph-max-tokens 64: decode buckets 1, 2, 4, 6 (graphs), prefill
  // 16 … 256 and 512 with S = min(T, 6); prefill graphs only up to 64 tokens.
  passes::PipelineOptions po;
  po.max_seqs = 6;
  po.max_chunk = 512;
  po.graph_max_tokens = 64;
  plan::Plan p = compiled(po);
  std::vector<std::tuple<int, int, int, bool, bool>> got;
  for (const fb::Bucket* b : *p->buckets())
    got.emplace_back(b->max_tokens(), b->max_sequences(), b->max_logit_rows(), b->decode(), b->graph());
  const std::vector<std::tuple<int, int, int, bool, bool>> want = {
      {1, 1, 1, true, true},       {2, 2, 2, true, true},       {4, 4, 4, true, true},
      {6, 6, 6, true, true},       {16, 6, 6, false, true},     {32, 6, 6, false, true},
      {64, 6, 6, false, true},     {128, 6, 6, false, false},   {256, 6, 6, false, false},
      {512, 6, 6, false, false}};
  EXPECT_EQ(got, want);
  // graph-max-tokens 0: decode graphs only.
  po.graph_max_tokens = 0;
  const plan::Plan eager_prefill = compiled(po);
  for (const fb::Bucket* b : *eager_prefill->buckets()) EXPECT_EQ(b->graph(), b->decode()) << b->max_tokens();
}

TEST_F(TinyCodegen, UnfusedGraphIsRejectedWithTheOpName) {
  mlir::MLIRContext ctx;
  auto module = frontend::build_from_model_dir(ctx, dir);
  // Planned but not fused: g4.dequant / g4.matmul have no kernel in KERNELS.md.
  passes::register_passes_once();
  mlir::PassManager pm(&ctx, "builtin.module");
  ASSERT_TRUE(mlir::succeeded(mlir::parsePassPipeline("g4-plan-kv,g4-plan-buckets,g4-plan-memory", pm)));
  ASSERT_TRUE(mlir::succeeded(pm.run(*module)));
  codegen::CodegenOptions o;
  try {
    codegen::emit_plan(*module, cfg, o);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("op g4.dequant has no kernel"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace g4c

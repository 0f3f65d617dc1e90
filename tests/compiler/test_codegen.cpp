// Codegen against the runtime's hand-written reference plan builder
// (runtime/plan/reference_builder.cpp, no MLIR): for the tiny model the compiled
// plan must have the same program step for step — kernel ids, layers, labels,
// weight bindings (by name), attributes, value shapes and data flow — and its
// arena must never place two live values on the same bytes. With --kv-shared (K=V stored
// once on the k_eq_v layers) the CPU backend must give the same logits bit for bit.
#include <gtest/gtest.h>

#include <map>

#include "codegen/Codegen.h"
#include "frontend/Frontend.h"
#include "models/error.h"
#include "models/safetensors.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "passes/Pipeline.h"
#include "runtime/engine.h"
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
  for (const bool shared : {false, true}) {  // K=V stored once (--kv-shared) or not
    SCOPED_TRACE(shared ? "kv-shared" : "default");
    passes::PipelineOptions popts;
    popts.kv_shared = shared;
    plan::ReferenceOptions ropts;
    ropts.kv_shared = shared;
    plan::Plan ours = compiled(popts);
    plan::Plan ref = plan::build_reference_plan(cfg, *ckpt, ropts);
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
      EXPECT_EQ(x->k_from_v(), y->k_from_v());
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
      EXPECT_EQ(a->kv_shared(), b->kv_shared());
    }
    EXPECT_EQ(ours->kv_block_size(), ref->kv_block_size());
    EXPECT_EQ(ours->max_chunk_tokens(), ref->max_chunk_tokens());
    EXPECT_EQ(shape_of_logits(ours), shape_of_logits(ref));
  }
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

// K=V stored once (kv-shared): the two full (k_eq_v) layers keep V only and their attention
// recomputes K = rope(V ⊙ k_norm). In fp32 that is the same arithmetic as the stored K
// (rms_norm multiplies (x·inv)·w, then the same rope), so the CPU backend's logits must be
// bitwise equal to the default plan's — over a 150-token prompt fed in chunks of 7 (keys from
// earlier steps come out of the cache; 10 blocks of 16 on the full layers) and a batched greedy
// generation. A K formed at the wrong position, with the wrong weight or from unwritten V rows
// changes the logits.
TEST_F(TinyCodegen, KvSharedPlanGivesBitwiseEqualLogitsOnCpu) {
  passes::PipelineOptions shared_opts;
  shared_opts.kv_shared = true;
  plan::Plan base = compiled(), shared = compiled(shared_opts);
  int shared_layers = 0, k_from_v_steps = 0;
  for (unsigned i = 0; i < shared->kv()->size(); ++i) {
    const fb::KvLayer* l = shared->kv()->Get(i);
    EXPECT_EQ(l->kv_shared(), cfg.layers[l->layer()].k_eq_v) << "layer " << l->layer();
    shared_layers += l->kv_shared();
    EXPECT_FALSE(base->kv()->Get(i)->kv_shared());
  }
  for (const fb::Step* st : *shared->program()) {
    if (st->kernel() != fb::KernelId::Attention) continue;
    const bool kfv = shared->kv()->Get(st->attrs()->kv_layer())->kv_shared();
    EXPECT_EQ(st->attrs()->k_from_v(), kfv) << st->label()->str();
    if (!kfv) continue;
    ++k_from_v_steps;
    EXPECT_EQ(weight_name(shared, st->weights()->Get(0)), "layers." + std::to_string(st->layer()) + ".self_attn.k_norm.weight");
  }
  EXPECT_EQ(shared_layers, 2);  // layers 5 and 11
  EXPECT_EQ(k_from_v_steps, 2);
  ASSERT_EQ(base->program()->size(), shared->program()->size());  // same fused program, flags aside

  std::vector<int32_t> ids;
  for (int i = 0; i < 150; ++i) ids.push_back(2 + (i * 7919 + 13) % (cfg.vocab_size - 2));
  auto run = [&](plan::Plan p) {
    auto e = runtime::Engine::open(dir, std::move(p), {.max_sequences = 3});
    auto logits = e->logits(ids, 7);
    std::vector<runtime::GenerationRequest> rs;
    for (int r = 0; r < 3; ++r)
      rs.push_back({.id = "r" + std::to_string(r), .prompt = std::vector<int32_t>(ids.begin(), ids.begin() + 40 + 50 * r),
                    .max_new_tokens = 12});
    std::vector<std::vector<int32_t>> tokens;
    for (auto& g : e->generate(rs)) tokens.push_back(g.tokens);
    return std::pair(logits, tokens);
  };
  const auto [la, ta] = run(std::move(base));
  const auto [lb, tb] = run(std::move(shared));
  ASSERT_EQ(la.size(), lb.size());
  size_t differ = 0;
  for (size_t i = 0; i < la.size(); ++i) differ += la[i] != lb[i];
  EXPECT_EQ(differ, 0u) << "of " << la.size() << " logits";
  EXPECT_EQ(ta, tb);
}

// The loader refuses a K=V-once plan whose flags disagree: a V-only cache read by an attention
// that would look for K rows (none are written), or k_from_v steps on a layer that stores K.
TEST_F(TinyCodegen, KvSharedFlagsMustAgreeOrThePlanIsRefused) {
  passes::PipelineOptions shared_opts;
  shared_opts.kv_shared = true;
  const std::vector<uint8_t> good = compiled(shared_opts).bytes();
  auto expect_refused = [&](std::vector<uint8_t> bytes, const char* what) {
    try {
      plan::Plan::from_bytes(std::move(bytes), "flags.g4p");
      ADD_FAILURE() << what << ": accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("kv_shared"), std::string::npos) << what << ": " << e.what();
    }
  };
  {
    auto bytes = good;
    auto* root = fb::GetMutablePlan(bytes.data());
    int flipped = 0;
    for (unsigned s = 0; s < root->program()->size(); ++s) {
      auto* st = root->mutable_program()->GetMutableObject(s);
      if (st->kernel() == fb::KernelId::Attention && st->attrs()->k_from_v())
        flipped += st->mutable_attrs()->mutate_k_from_v(false);
    }
    ASSERT_EQ(flipped, 2);
    expect_refused(bytes, "attention without k_from_v on a V-only cache");
  }
  {
    auto bytes = good;
    auto* root = fb::GetMutablePlan(bytes.data());
    int flipped = 0;
    for (unsigned i = 0; i < root->kv()->size(); ++i)
      if (root->kv()->Get(i)->kv_shared()) flipped += root->mutable_kv()->GetMutableObject(i)->mutate_kv_shared(false);
    ASSERT_EQ(flipped, 2);
    expect_refused(bytes, "k_from_v steps on caches that store K");
  }
  EXPECT_NO_THROW(plan::Plan::from_bytes(good, "good.g4p"));
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

// End-to-end behaviour of the engine on the tiny model: greedy generation vs the HF
// goldens, chunked prefill invariance, batching invariance, preemption, ring windows,
// the unfused program, sampling.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "models/safetensors.h"
#include "runtime/engine.h"
#include "runtime/plan/reference_builder.h"
#include "tests/runtime/support.h"

using namespace g4c;
using runtime::Engine;
using runtime::GenerationRequest;

namespace {

struct GoldenGeneration {
  std::vector<int32_t> prompt, expected;
};

std::vector<GoldenGeneration> fp32_generations() {
  std::vector<GoldenGeneration> out;
  auto dir = test::golden_dir();
  std::ifstream in(dir / "golden_generate.json");
  auto j = nlohmann::json::parse(in);
  for (const auto& g : j)
    if (g.at("model") == "fp32") out.push_back({g.at("prompt_ids").get<std::vector<int32_t>>(), g.at("new_ids").get<std::vector<int32_t>>()});
  return out;
}

std::vector<GenerationRequest> requests_of(const std::vector<GoldenGeneration>& gs, int max_new = 48) {
  std::vector<GenerationRequest> rs;
  for (size_t i = 0; i < gs.size(); ++i)
    rs.push_back({.id = "g" + std::to_string(i), .prompt = gs[i].prompt, .max_new_tokens = max_new});
  return rs;
}

std::vector<int32_t> golden_ids(const std::string& name) {
  auto f = models::SafetensorsFile::open(test::golden_dir() / "golden_logits.safetensors");
  auto v = f->view(*f->find(name + ".input_ids"));
  return {v.as<int32_t>(), v.as<int32_t>() + v.info->numel()};
}

std::unique_ptr<Engine> open_tiny(runtime::EngineOptions o, const plan::ReferenceOptions* ro = nullptr) {
  if (!ro) return Engine::open(test::tiny_model_dir(), std::nullopt, o);
  auto cfg = models::load_model_config(test::tiny_model_dir());
  auto ckpt = models::Checkpoint::open(test::tiny_model_dir());
  return Engine::open(test::tiny_model_dir(), plan::build_reference_plan(cfg, *ckpt, *ro), o);
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

}  // namespace

TEST(Engine, GreedyReproducesAllEightFp32GoldensBatched) {
  auto gs = fp32_generations();
  ASSERT_EQ(gs.size(), 8u);
  auto e = open_tiny({.max_sequences = 8});
  auto results = e->generate(requests_of(gs));
  ASSERT_EQ(results.size(), gs.size());
  for (size_t i = 0; i < gs.size(); ++i) {
    EXPECT_EQ(results[i].tokens, gs[i].expected) << "golden generation " << i;
    EXPECT_EQ(results[i].finish_reason, "length");
    EXPECT_EQ(results[i].prompt_tokens, int(gs[i].prompt.size()));
    EXPECT_EQ(results[i].decode_latencies_s.size(), 47u);
  }
  // Every ring slot and block is back once the run is over.
  EXPECT_EQ(e->ring_slots().num_free(), 8);
  EXPECT_EQ(e->block_pool()->num_free(), e->block_pool()->num_blocks());
}

TEST(Engine, ChunkedPrefillGivesTheSameLogits) {
  auto ids = golden_ids("p2");  // 144 tokens: crosses the 128-token window
  auto e = open_tiny({.max_sequences = 1});
  auto whole = e->logits(ids, int(ids.size()));
  for (int chunk : {1, 7, 128}) {
    // Same math in another grouping of rows; fp32 results differ only by accumulation order
    // inside a step (the linear kernel sums per row), bounded far below 1e-4.
    EXPECT_LE(max_abs_diff(e->logits(ids, chunk), whole), 1e-4f) << "chunk " << chunk;
  }
}

TEST(Engine, OutputIsTheSameAloneOrBatched) {
  auto gs = fp32_generations();
  gs.resize(4);  // prompts of 91, 74, 144 and 84 tokens
  auto batched = open_tiny({.max_sequences = 4, .token_budget = 100, .chunk_tokens = 64})->generate(requests_of(gs, 20));
  auto alone_engine = open_tiny({.max_sequences = 1});
  for (size_t i = 0; i < gs.size(); ++i) {
    auto alone = alone_engine->generate(requests_of({gs[i]}, 20));
    EXPECT_EQ(alone[0].tokens, batched[i].tokens) << "request " << i;
  }
}

TEST(Engine, PreemptionUnderATinyKvBudgetKeepsOutputs) {
  auto gs = fp32_generations();
  // 14 blocks of 16 tokens: one 144+48-token request needs 12, so 8 requests can never all
  // be resident and decode growth must preempt (recompute).
  auto e = open_tiny({.max_sequences = 8, .kv_blocks = 14, .reserve_generation = false});
  auto results = e->generate(requests_of(gs));
  for (size_t i = 0; i < gs.size(); ++i) {
    EXPECT_EQ(results[i].finish_reason, "length") << results[i].error;
    EXPECT_EQ(results[i].tokens, gs[i].expected) << "golden generation " << i;
  }
  EXPECT_GT(e->stats().preemptions, 0);
  EXPECT_EQ(e->block_pool()->num_free(), 14);
  EXPECT_EQ(e->ring_slots().num_free(), 8);
}

// The same pool with admission by each request's whole life (the default): requests wait for
// room instead of being recomputed, and the outputs are the goldens.
TEST(Engine, ReservedAdmissionUnderATinyKvBudgetNeverPreempts) {
  auto gs = fp32_generations();
  auto e = open_tiny({.max_sequences = 8, .kv_blocks = 14});
  auto results = e->generate(requests_of(gs));
  for (size_t i = 0; i < gs.size(); ++i) {
    EXPECT_EQ(results[i].finish_reason, "length") << results[i].error;
    EXPECT_EQ(results[i].tokens, gs[i].expected) << "golden generation " << i;
  }
  EXPECT_EQ(e->stats().preemptions, 0);
  EXPECT_GE(e->stats().max_running, 1);
  EXPECT_LT(e->stats().max_running, 8);  // 14 blocks cannot reserve the lives of all eight
  EXPECT_EQ(e->block_pool()->num_free(), 14);
  EXPECT_EQ(e->window_pool()->num_free(), e->window_pool()->num_blocks());
}

// --batch-size 0 on the CPU: kMaxAutoBatch sequences (a quarter of any test host's memory holds
// 64 full-length tiny-model sequences: a few MiB each), the reason reported, goldens unchanged.
TEST(Engine, AutoBatchOnTheCpuKeepsTheGoldens) {
  auto gs = fp32_generations();
  auto e = open_tiny({});
  EXPECT_EQ(e->options().max_sequences, runtime::kMaxAutoBatch);
  EXPECT_NE(e->batch_reason().find("auto"), std::string::npos) << e->batch_reason();
  auto results = e->generate(requests_of(gs));
  for (size_t i = 0; i < gs.size(); ++i) EXPECT_EQ(results[i].tokens, gs[i].expected) << "golden generation " << i;
  EXPECT_EQ(e->stats().max_running, 8);
  EXPECT_EQ(e->stats().preemptions, 0);
}

// Sliding layers in the window pool: 300 tokens of `long` fed 5 at a time cross the 128-token
// window twice; after each chunk the sequence holds exactly the blocks of the keys its next
// query can see plus the chunk (never the 19 blocks of 300 tokens), and the logits still match HF.
TEST(Engine, WindowPoolHoldsTheWindowAndMatchesGoldens) {
  auto e = open_tiny({.max_sequences = 1});
  ASSERT_NE(e->window_pool(), nullptr);
  EXPECT_EQ(e->plan()->kv()->Get(0)->kind(), plan::fb::KvKind::Paged);
  EXPECT_EQ(e->plan()->kv()->Get(0)->window(), 128);
  auto f = models::SafetensorsFile::open(test::golden_dir() / "golden_logits.safetensors");
  auto ids = golden_ids("long");
  ids.resize(300);
  const float* ref = f->view(*f->find("long.logits_fp32")).as<float>();
  auto rv = f->view(*f->find("long.rows"));
  const std::vector<int32_t> pos(rv.as<int32_t>(), rv.as<int32_t>() + rv.info->numel());
  const int V = e->vocab_size(), B = e->plan()->kv_block_size(), W = 128, chunk = 5;
  float worst = 0;
  int most = 0, compared = 0;
  e->logits(ids, chunk, [&](int start, int n, const float* logits) {
    const int held = e->window_pool()->num_blocks() - e->window_pool()->num_free();
    EXPECT_EQ(held, (start + n + B - 1) / B - std::max(0, start - W + 1) / B) << "chunk at " << start;
    most = std::max(most, held);
    for (int r = start; r < start + n; ++r) {
      const auto it = std::find(pos.begin(), pos.end(), r);
      if (it == pos.end()) continue;
      ++compared;
      const size_t g = size_t(it - pos.begin());
      for (int v = 0; v < V; ++v)
        worst = std::max(worst, std::abs(logits[size_t(r - start) * V + v] - ref[g * V + v]));
    }
  });
  EXPECT_GE(compared, 8);  // positions 0, 35, ..., 280 of the 300 fed
  EXPECT_EQ(most, runtime::BlockPool::window_blocks_for(W, chunk, B));
  EXPECT_EQ(e->window_pool()->num_free(), e->window_pool()->num_blocks());
  EXPECT_LE(worst, 2e-3f);  // the HF parity bound of test_golden.cpp
}

TEST(Engine, RequestLargerThanTheWholePoolFailsAlone) {
  auto gs = fp32_generations();
  auto e = open_tiny({.max_sequences = 2, .kv_blocks = 8});  // 128 tokens of full-layer KV
  auto rs = requests_of({gs[2], gs[4]});  // 144 tokens (cannot fit), 5 tokens (fits)
  auto results = e->generate(rs);
  EXPECT_EQ(results[0].finish_reason, "error");
  EXPECT_NE(results[0].error.find("KV"), std::string::npos);
  EXPECT_EQ(results[1].tokens, gs[4].expected);
  EXPECT_EQ(e->block_pool()->num_free(), 8);
}

TEST(Engine, RingAtExactWindowCapacityMatchesGoldens) {
  // max_chunk_tokens 1 makes every sliding ring exactly W = 128 slots: position p overwrites
  // p-128, the key that just left the window. Feeding 300 `long` tokens one at a time crosses
  // the ring boundary twice; the logits must still match HF at the positions the goldens keep.
  plan::ReferenceOptions ro;
  ro.max_chunk_tokens = 1;
  ro.sliding_kv = "ring";
  auto e = open_tiny({.max_sequences = 1}, &ro);
  EXPECT_EQ(e->plan()->kv()->Get(0)->capacity(), 128);
  auto f = models::SafetensorsFile::open(test::golden_dir() / "golden_logits.safetensors");
  auto ids = golden_ids("long");
  ids.resize(300);
  const float* ref = f->view(*f->find("long.logits_fp32")).as<float>();
  auto rv = f->view(*f->find("long.rows"));
  const std::vector<int32_t> pos(rv.as<int32_t>(), rv.as<int32_t>() + rv.info->numel());
  const int V = e->vocab_size();
  float worst = 0;
  int compared = 0;
  e->logits(ids, 1, [&](int row, int, const float* logits) {
    const auto it = std::find(pos.begin(), pos.end(), row);
    if (it == pos.end()) return;
    ++compared;
    const size_t r = size_t(it - pos.begin());
    for (int v = 0; v < V; ++v) worst = std::max(worst, std::abs(logits[v] - ref[r * V + v]));
  });
  EXPECT_GE(compared, 8);  // positions 0, 35, ..., 280 of the 300 fed
  EXPECT_LE(worst, 2e-3f);  // the HF parity bound of test_golden.cpp
}

TEST(Engine, UnfusedProgramGivesTheSameLogits) {
  auto ids = golden_ids("p1");
  plan::ReferenceOptions unfused;
  unfused.fused = false;
  auto a = open_tiny({.max_sequences = 1})->logits(ids);
  auto b = open_tiny({.max_sequences = 1}, &unfused)->logits(ids);
  // Same operations in the same order except the fused norm/residual temporaries: fp32
  // rounding differences only.
  EXPECT_LE(max_abs_diff(a, b), 1e-4f);
}

TEST(Engine, SeededSamplingIsReproducibleAndBatchInvariant) {
  auto gs = fp32_generations();
  gs.resize(3);
  auto rs = requests_of(gs, 16);
  for (size_t i = 0; i < rs.size(); ++i) rs[i].sampling = {.temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .seed = 1234 + i};
  auto a = open_tiny({.max_sequences = 3})->generate(rs);
  auto e1 = open_tiny({.max_sequences = 1});
  for (size_t i = 0; i < rs.size(); ++i) {
    auto b = e1->generate({rs[i]});
    EXPECT_EQ(a[i].tokens, b[0].tokens) << "request " << i;
  }
  // Sampling at temperature 0.8 departs from greedy somewhere in 3x16 tokens.
  bool differs = false;
  for (size_t i = 0; i < rs.size(); ++i)
    differs |= !std::equal(a[i].tokens.begin(), a[i].tokens.end(), gs[i].expected.begin());
  EXPECT_TRUE(differs);
}

TEST(Engine, GptqHooksSeeLinearInputsAndWeightReplacementTakesEffect) {
  auto ids = golden_ids("p1");
  auto e = open_tiny({.max_sequences = 1});
  auto before = e->logits(ids);
  int observed = 0;
  e->backend().set_linear_observer([&](int step, const float*, int rows, int cols) {
    const auto* st = e->plan()->program()->Get(step);
    EXPECT_EQ(rows, int(ids.size()));
    EXPECT_EQ(int64_t(cols), e->weights().shape(st->weights()->Get(0))[1]);
    ++observed;
  });
  e->logits(ids);
  EXPECT_EQ(observed, 70);  // every Linear step of the 12 layers (the fused LmHead is not a Linear)
  e->backend().set_linear_observer({});
  const std::string name = "layers.3.mlp.down_proj.weight";
  std::vector<float> zero(e->weights().numel(e->weights().find(name)), 0.0f);
  e->replace_weight(name, zero);
  EXPECT_GT(max_abs_diff(e->logits(ids), before), 1e-2f);
}

// RunStats::decode_by_rows counts the steps whose every row decodes: three requests of 100 /
// 120 / 140 prompt tokens prefilled in one step (token budget 512), then 3 decode steps of 3
// rows (4 tokens each, the first from the prefill step). Row k (1…3) of a request with prompt P
// feeds its token at position P + k − 1 and attends to P + k keys; a sliding layer (the tiny
// model's window: 128) to min(P + k, 128). Sums by hand: keys 3·360 + 3·6 = 1098, window keys
// 306 + 366 + 384 = 1056.
TEST(Engine, DecodeStepsByRowsCountStepsAndKeys) {
  auto e = open_tiny({.max_sequences = 3, .token_budget = 512, .chunk_tokens = 256});
  std::vector<GenerationRequest> rs;
  for (int p : {100, 120, 140}) {
    GenerationRequest r{.id = "r" + std::to_string(p), .max_new_tokens = 4, .ignore_eos = true};
    r.prompt.push_back(2);
    for (int i = 1; i < p; ++i) r.prompt.push_back(int32_t(100 + (i * 37 + p) % 5000));
    rs.push_back(std::move(r));
  }
  for (const auto& r : e->generate(rs)) ASSERT_EQ(r.tokens.size(), 4u) << r.id;
  const auto& by = e->stats().decode_by_rows;
  ASSERT_EQ(by.size(), 1u);
  ASSERT_EQ(by.count(3), 1u);
  const runtime::DecodeBatchStats& b = by.at(3);
  EXPECT_EQ(b.steps, 3);
  EXPECT_EQ(b.keys, 1098);
  EXPECT_EQ(b.window_keys, 1056);
  EXPECT_GT(b.seconds, 0.0);
  EXPECT_EQ(e->stats().steps, 4);  // the prefill step and the three decode steps
}

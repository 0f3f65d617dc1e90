// Golden parity of the CPU backend with Hugging Face (transformers 5.17, fp32 run):
// logits of p0..p2 and of the 700-token `long` sequence at the positions the vendored goldens
// keep (tests/data/golden/gemma4-tiny), and greedy generation.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "models/safetensors.h"
#include "runtime/engine.h"
#include "tests/runtime/support.h"

using namespace g4c;

namespace {

// HF's fp32 run vs ours: both accumulate in fp32 but in different orders through 12 layers;
// the design note measured 4e-6 for an independent fp32 implementation. 2e-3 (the required
// bound) leaves room for summation-order differences over 700 positions, far below any real
// error (a wrong window or RoPE pair moves logits by >1e-1).
constexpr float kLogitTolerance = 2e-3f;

struct Golden {
  std::unique_ptr<models::SafetensorsFile> file;
  std::vector<int32_t> ids(const std::string& name) const {
    auto v = file->view(*file->find(name + ".input_ids"));
    return {v.as<int32_t>(), v.as<int32_t>() + v.info->numel()};
  }
  // The positions whose logits the goldens keep, row r of logits() being position rows()[r].
  std::vector<int32_t> rows(const std::string& name) const {
    auto v = file->view(*file->find(name + ".rows"));
    return {v.as<int32_t>(), v.as<int32_t>() + v.info->numel()};
  }
  const float* logits(const std::string& name, int64_t* rows) const {
    auto v = file->view(*file->find(name + ".logits_fp32"));
    *rows = v.info->shape[0];
    return v.as<float>();
  }
};

std::unique_ptr<Golden> open_golden() {
  auto dir = test::golden_dir();
  auto g = std::make_unique<Golden>();
  g->file = models::SafetensorsFile::open(dir / "golden_logits.safetensors");
  return g;
}

runtime::Engine& tiny_engine() {
  static auto engine = runtime::Engine::open(test::tiny_model_dir(), std::nullopt, {.max_sequences = 8});
  return *engine;
}

}  // namespace

TEST(Golden, PromptLogitsMatchHuggingFaceFp32) {
  auto g = open_golden();
  auto& e = tiny_engine();
  const int V = e.vocab_size();
  for (std::string p : {"p0", "p1", "p2"}) {
    auto ids = g->ids(p);
    int64_t rows;
    const float* ref = g->logits(p, &rows);
    const auto pos = g->rows(p);
    ASSERT_EQ(rows, int64_t(pos.size()));
    ASSERT_EQ(pos.back(), int32_t(ids.size()) - 1);  // the last position is always kept
    auto ours = e.logits(ids);
    ASSERT_EQ(ours.size(), ids.size() * size_t(V));
    float worst = 0;
    for (size_t r = 0; r < pos.size(); ++r)
      for (int v = 0; v < V; ++v)
        worst = std::max(worst, std::abs(ours[size_t(pos[r]) * V + v] - ref[r * V + v]));
    EXPECT_LE(worst, kLogitTolerance) << p << ": max |Δlogit| over " << rows << "x" << V;
    std::printf("[ measured ] %s max |dlogit| = %.3g\n", p.c_str(), worst);
  }
}

TEST(Golden, LongSequenceAcrossFiveWindowsMatches) {
  auto g = open_golden();
  auto& e = tiny_engine();
  const int V = e.vocab_size();
  auto ids = g->ids("long");
  ASSERT_EQ(ids.size(), 700u);
  int64_t rows;
  const float* ref = g->logits("long", &rows);
  const auto pos = g->rows("long");
  ASSERT_EQ(rows, int64_t(pos.size()));
  ASSERT_GE(pos.back(), 5 * 128);  // the kept positions reach the fifth window crossing
  std::vector<int> row_of(ids.size(), -1);
  for (size_t r = 0; r < pos.size(); ++r) row_of[size_t(pos[r])] = int(r);
  float worst = 0;
  size_t compared = 0;
  // Chunks of 128 as `g4c eval` feeds them (crosses chunk and window boundaries).
  e.logits(ids, 128, [&](int first, int n, const float* logits) {
    for (int i = first; i < first + n; ++i) {
      if (row_of[size_t(i)] < 0) continue;
      ++compared;
      for (int v = 0; v < V; ++v)
        worst = std::max(worst, std::abs(logits[size_t(i - first) * V + v] - ref[size_t(row_of[size_t(i)]) * V + v]));
    }
  });
  EXPECT_EQ(compared, pos.size());
  EXPECT_LE(worst, kLogitTolerance);
  std::printf("[ measured ] long max |dlogit| = %.3g\n", worst);
}

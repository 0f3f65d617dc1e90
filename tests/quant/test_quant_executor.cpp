// tools/quant_executor's calibration executor on models/gemma4-tiny: true-sequential
// pieces resumed at the previous piece's cut must see exactly what the same pieces see
// when recomputed from the layer's input (a fresh executor keeps no cut to resume from).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>
#include <thread>

#include "tools/quant_executor.h"

using namespace g4c;

namespace {

std::filesystem::path tiny() {
  const char* src = std::getenv("G4C_SOURCE_DIR");
  return std::filesystem::path(src ? src : ".") / "models" / "gemma4-tiny";
}

// Three calibration sequences of 96 tokens (BOS + pseudo-random ids; 3 > the batch of 2,
// so a cut is kept for more than one batch).
std::vector<std::vector<int32_t>> sequences() {
  std::mt19937 rng(5);
  std::vector<std::vector<int32_t>> s(3, std::vector<int32_t>(96));
  for (auto& q : s) {
    q[0] = 2;
    for (size_t i = 1; i < q.size(); ++i) q[i] = int32_t(10 + rng() % 8000);
  }
  return s;
}

// What an observer saw: Linear group name → concatenated inputs.
using Seen = std::map<std::string, std::vector<float>>;
quant::CalibrationExecutor::Observer recorder(Seen& seen) {
  return [&seen](const std::vector<std::string>& names, const float* x, int64_t rows, int64_t in) {
    auto& v = seen[names.front()];
    v.insert(v.end(), x, x + rows * in);
  };
}

// A perturbation standing in for quantization: changes every output of the Linear.
std::vector<float> perturbed(const std::vector<float>& w) {
  std::vector<float> o(w);
  for (size_t i = 0; i < o.size(); ++i) o[i] *= (i % 3 == 0) ? 0.5f : 1.25f;
  return o;
}

// set_weights' fill from whole arrays: names[i] gets ws[i].
quant::CalibrationExecutor::WeightFill copy_from(const std::vector<std::vector<float>>& ws) {
  return [&ws](size_t i, std::span<float> out) {
    ASSERT_EQ(out.size(), ws[i].size());
    std::copy(ws[i].begin(), ws[i].end(), out.begin());
  };
}

}  // namespace

TEST(QuantExecutor, ResumedPiecesEqualPiecesFromTheLayerStart) {
  const auto seqs = sequences();
  const int layer = 1;  // a layer > 0: its input comes through the "h"/"a" boundary
  tools::EngineCalibrationExecutor resumed(tiny(), seqs, 96, 2, /*batch_sequences=*/2);
  resumed.run_layer(0, {}, true);
  const auto groups = resumed.input_groups(layer);
  ASSERT_EQ(groups.size(), 4u);  // q/k/v, o, gate/up, down
  EXPECT_EQ(groups[0], (std::vector<std::string>{"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"}));
  EXPECT_EQ(groups[3], (std::vector<std::string>{"mlp.down_proj"}));
  for (size_t g = 0; g < groups.size(); ++g) {
    Seen a, b;
    resumed.observe_group(layer, int(g), recorder(a));
    // The same piece from the layer start: a fresh executor, the same weights changed.
    tools::EngineCalibrationExecutor fresh(tiny(), seqs, 96, 2, 2);
    fresh.run_layer(0, {}, true);
    for (size_t e = 0; e < g; ++e)
      for (const auto& n : groups[e]) fresh.set_weight(layer, n, perturbed(fresh.weight(layer, n)));
    fresh.observe_group(layer, int(g), recorder(b));
    ASSERT_EQ(a.size(), 1u);
    ASSERT_EQ(b.count(a.begin()->first), 1u);
    int64_t width = 0;
    for (const auto& li : fresh.linears(layer))
      if (li.name == groups[g][0]) width = li.in;
    EXPECT_EQ(a.begin()->second.size(), size_t(3 * 96 * width)) << "rows × in_features of group " << g;
    EXPECT_TRUE(a.begin()->second == b.begin()->second) << "group " << g << " differs after resuming";
    // "Quantize" this group before the next piece, as GPTQ does: the whole group at once
    // here, one weight at a time on `fresh` (the two must give the same values).
    std::vector<std::vector<float>> ws;
    for (const auto& n : groups[g]) ws.push_back(perturbed(resumed.weight(layer, n)));
    resumed.set_weights(layer, groups[g], copy_from(ws));
  }
  // Advancing resumes at the last cut: the layer output equals a from-start advance.
  resumed.run_layer(layer, {}, true);
  // ...and the pieces were resumed, not recomputed: layer 0, then layer 1 computed once
  // (each piece also reruns the embedding step to size the batch's values).
  {
    const auto steps = [&](int l) {
      tools::EngineCalibrationExecutor probe(tiny(), seqs, 96, 2, 2);
      const int64_t before = probe.steps_executed();
      probe.run_layer(l, {}, false);
      return probe.steps_executed() - before;
    };
    const int64_t embed_per_piece = 2;  // one embedding step for each of the 2 batches
    EXPECT_EQ(resumed.steps_executed(), steps(0) + steps(layer) + int64_t(groups.size()) * embed_per_piece)
        << "true-sequential pieces recomputed part of the layer instead of resuming";
  }
  tools::EngineCalibrationExecutor fresh(tiny(), seqs, 96, 2, 2);
  fresh.run_layer(0, {}, true);
  for (const auto& grp : groups)
    for (const auto& n : grp) fresh.set_weight(layer, n, perturbed(fresh.weight(layer, n)));
  fresh.run_layer(layer, {}, true);
  Seen ra, rb;
  resumed.observe_group(layer + 1, 0, recorder(ra));
  fresh.observe_group(layer + 1, 0, recorder(rb));
  EXPECT_TRUE(ra.begin()->second == rb.begin()->second);
}

// Changing a weight the kept cut was computed with drops the cut: the next piece then
// starts from the layer's input and sees the change.
TEST(QuantExecutor, ChangingAWeightBeforeTheCutRecomputes) {
  const auto seqs = sequences();
  tools::EngineCalibrationExecutor e(tiny(), seqs, 96, 2, 2);
  Seen before, after, want;
  e.observe_group(0, 1, recorder(before));  // o_proj's input, cut kept there
  e.set_weight(0, "self_attn.v_proj", perturbed(e.weight(0, "self_attn.v_proj")));
  e.observe_group(0, 1, recorder(after));
  tools::EngineCalibrationExecutor f(tiny(), seqs, 96, 2, 2);
  f.set_weight(0, "self_attn.v_proj", perturbed(f.weight(0, "self_attn.v_proj")));
  f.observe_group(0, 1, recorder(want));
  EXPECT_FALSE(before.begin()->second == after.begin()->second);
  EXPECT_TRUE(after.begin()->second == want.begin()->second);
}

// The same through set_weights when only the second weight lies before the cut: o_proj is
// the cut's own Linear (the kept values stay valid for it), v_proj is read before it.
// release_weights on the CPU backend (which computes from the store) frees nothing: the
// weights stay readable and the layer computes as before.
TEST(QuantExecutor, ReleaseWeightsOnTheCpuKeepsThem) {
  const auto seqs = sequences();
  tools::EngineCalibrationExecutor e(tiny(), seqs, 96, 2, 2);
  Seen before, after;
  e.observe_group(0, 1, recorder(before));
  const std::vector<float> w = e.weight(0, "self_attn.o_proj");
  const std::vector<std::string> names{"self_attn.o_proj", "self_attn.q_proj"};
  e.release_weights(0, names);
  EXPECT_EQ(e.weight(0, "self_attn.o_proj"), w);
  e.observe_group(0, 1, recorder(after));
  EXPECT_TRUE(before.begin()->second == after.begin()->second);
}

TEST(QuantExecutor, SetWeightsDropsTheCutWhenAnyWeightIsBeforeIt) {
  const auto seqs = sequences();
  tools::EngineCalibrationExecutor e(tiny(), seqs, 96, 2, 2);
  Seen before, after, want;
  e.observe_group(0, 1, recorder(before));
  const std::vector<std::string> names{"self_attn.o_proj", "self_attn.v_proj"};
  const std::vector<std::vector<float>> ws{perturbed(e.weight(0, names[0])), perturbed(e.weight(0, names[1]))};
  e.set_weights(0, names, copy_from(ws));
  e.observe_group(0, 1, recorder(after));
  tools::EngineCalibrationExecutor f(tiny(), seqs, 96, 2, 2);
  f.set_weight(0, names[0], ws[0]);
  f.set_weight(0, names[1], ws[1]);
  f.observe_group(0, 1, recorder(want));
  EXPECT_FALSE(before.begin()->second == after.begin()->second);
  EXPECT_TRUE(after.begin()->second == want.begin()->second);
}

// prefetch_weights converts a layer's Linears on a background thread while the executor computes
// another layer: the values read afterwards are the checkpoint's (a fresh executor's), and the
// layer computed meanwhile sees what it sees without the prefetch.
TEST(QuantExecutor, PrefetchedWeightsAreTheCheckpointValues) {
  const auto seqs = sequences();
  tools::EngineCalibrationExecutor e(tiny(), seqs, 96, 2, 2), f(tiny(), seqs, 96, 2, 2);
  e.prefetch_weights(1);
  Seen got, want;
  e.run_layer(0, {}, /*advance=*/true);
  f.run_layer(0, {}, /*advance=*/true);
  e.prefetch_weights(2);  // waits for layer 1's
  e.observe_group(1, 0, recorder(got));
  f.observe_group(1, 0, recorder(want));
  ASSERT_FALSE(got.empty());
  EXPECT_TRUE(got.begin()->second == want.begin()->second);
  for (const quant::LinearInfo& li : f.linears(1)) EXPECT_EQ(e.weight(1, li.name), f.weight(1, li.name)) << li.name;
}

// The Hessian's XᵀX on the CPU GEMM tiles (cpu_gram_update): the upper triangle equals
// float64 XᵀX for widths that leave ragged 64- and 128-wide tiles and row counts over several
// k-blocks, and the thread count changes no bit.
TEST(QuantExecutor, GramUpdateIsXtXUpperTriangle) {
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (const auto [rows, n] : {std::pair<int64_t, int64_t>{600, 200}, {300, 300}, {70, 40}}) {
    std::vector<float> X(size_t(rows * (n + 3)));  // leading dimension n + 3: a strided X
    for (auto& v : X) v = nd(rng);
    // Accumulates into C (H's partial sums): start from something that is not zero.
    std::vector<float> c0(size_t(n * n));
    for (auto& v : c0) v = nd(rng);
    std::vector<float> c1 = c0, c2 = c0;
    tools::cpu_gram_update(1)(X.data(), rows, n, n + 3, c1.data());
    tools::cpu_gram_update(2)(X.data(), rows, n, n + 3, c2.data());
    double err = 0, ref2 = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = i; j < n; ++j) {
        double s = c0[i * n + j];
        for (int64_t r = 0; r < rows; ++r) s += double(X[r * (n + 3) + i]) * X[r * (n + 3) + j];
        err += (c1[i * n + j] - s) * (c1[i * n + j] - s);
        ref2 += s * s;
        ASSERT_EQ(c1[i * n + j], c2[i * n + j]) << "thread count changed (" << i << ", " << j << ")";
      }
    // fp32 chains of ≤ 600 N(0,1) products: relative error ~√600·6e-8 ≈ 1.5e-6, nmse ~1e-12;
    // 1e-10 (the bound of the in-place XᵀX test this replaces) still catches a misplaced
    // panel or row block (nmse ~1).
    EXPECT_LT(err / ref2, 1e-10) << rows << " x " << n;
  }
}

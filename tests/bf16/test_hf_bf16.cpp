// The CPU emulation of HF's bf16 rounding points (hf_bf16.h) against the HF bf16 goldens.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <thread>

#include <nlohmann/json.hpp>

#include "models/json_file.h"
#include "models/safetensors.h"
#include "tests/bf16/hf_bf16.h"

using namespace g4c;

namespace {

std::filesystem::path source_dir() {
  const char* src = std::getenv("G4C_SOURCE_DIR");
  return std::filesystem::path(src ? src : ".");
}
// The vendored HF goldens (tests/data/golden/gemma4-tiny/README.md).
std::filesystem::path golden_dir() { return source_dir() / "tests" / "data" / "golden" / "gemma4-tiny"; }
std::filesystem::path model_dir() { return source_dir() / "models" / "gemma4-tiny"; }

struct Figures {
  std::vector<int> first_diff;  // per bf16 prompt: first differing new token, -1 = equal
  std::vector<double> gap_ulps; // per diverging prompt: |logit(ours) − logit(golden)| in bf16 ulps
  int greedy_equal = 0;
  bool greedy = false;
  long top1 = 0, rows = 0;            // top-1 agreement over every prompt position
  long kept_rows = 0;                  // positions whose full logits the goldens keep
  double mean_abs = 0, max_abs = 0;    // over the kept positions
};

// One bf16 ulp at the magnitude of x.
double ulp_bf16(double x) { return std::ldexp(1.0, std::ilogb(std::fabs(x)) - 7); }

Figures measure(const bf16emu::Options& opt, bool greedy, bool logits) {
  Figures f;
  f.greedy = greedy;
  const auto gen = models::read_json_file(golden_dir() / "golden_generate.json");
  std::vector<const nlohmann::json*> cases;
  for (const auto& e : gen)
    if (e.at("model") == "bf16") cases.push_back(&e);
  f.first_diff.assign(cases.size(), -1);
  f.gap_ulps.assign(cases.size(), 0.0);
  auto run = [&](size_t first) {
    bf16emu::Model local(model_dir(), opt);
    for (size_t i = first; i < cases.size(); i += 2) {
      const auto& e = *cases[i];
      const auto want = e.at("new_ids").get<std::vector<int>>();
      const auto got = local.generate(e.at("prompt_ids").get<std::vector<int>>(), int(want.size()));
      for (size_t k = 0; k < want.size(); ++k)
        if (got[k] != want[k]) {
          f.first_diff[i] = int(k);
          // The emulation's logits at the divergence, for both candidates (a decode step, as
          // generate() ran it: prefill of the prompt, then the generated tokens one by one).
          const auto lg = local.logits_after(e.at("prompt_ids").get<std::vector<int>>(),
                                             std::vector<int>(want.begin(), want.begin() + long(k)));
          f.gap_ulps[i] = std::fabs(double(lg[got[k]]) - lg[want[k]]) / ulp_bf16(lg[got[k]]);
          std::printf("[ measured ] prompt %zu first differs at new token %zu: ours %d (%.4f), golden %d (%.4f)\n", i,
                      k, got[k], lg[got[k]], want[k], lg[want[k]]);
          break;
        }
    }
  };
  if (greedy) {
    std::thread t0(run, 0), t1(run, 1);
    t0.join();
    t1.join();
  }
  for (int d : f.first_diff) f.greedy_equal += greedy && d < 0;
  if (!logits) return f;
  bf16emu::Model m(model_dir(), opt);
  auto file = models::SafetensorsFile::open(golden_dir() / "golden_logits.safetensors");
  for (std::string p : {"p0", "p1", "p2"}) {
    auto iv = file->view(*file->find(p + ".input_ids"));
    std::vector<int> ids(iv.as<int32_t>(), iv.as<int32_t>() + iv.info->numel());
    auto lv = file->view(*file->find(p + ".logits_bf16"));
    const float* ref = lv.as<float>();
    auto tv = file->view(*file->find(p + ".top1_bf16"));
    auto rv = file->view(*file->find(p + ".rows"));
    const int32_t* top1 = tv.as<int32_t>();
    const int32_t* kept = rv.as<int32_t>();
    const auto got = m.prompt_logits(ids);
    const int V = m.config().vocab_size;
    EXPECT_EQ(got.size(), size_t(tv.info->numel()));
    for (size_t r = 0; r < got.size(); ++r) {
      int a = 0;
      for (int j = 1; j < V; ++j)
        if (got[r][j] > got[r][a]) a = j;
      f.top1 += a == top1[r];
      f.rows++;
    }
    for (int64_t k = 0; k < rv.info->numel(); ++k) {
      const float* want = ref + k * V;
      const auto& row = got.at(size_t(kept[k]));
      f.kept_rows++;
      for (int j = 0; j < V; ++j) {
        const double dd = std::fabs(double(row[j]) - want[j]);
        f.mean_abs += dd;
        f.max_abs = std::max(f.max_abs, dd);
      }
    }
  }
  f.mean_abs /= double(f.kept_rows) * m.config().vocab_size;
  return f;
}

std::string describe(const Figures& f) {
  std::string s;
  if (f.greedy) {
    s = "greedy " + std::to_string(f.greedy_equal) + "/" + std::to_string(f.first_diff.size()) + " (first diff:";
    for (int d : f.first_diff) s += " " + std::to_string(d);
    s += ")";
  }
  if (f.rows) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "top-1 %ld/%ld, mean |dlogit| %.4f, max %.3f", f.top1, f.rows, f.mean_abs, f.max_abs);
    s += buf;
  }
  return s;
}

}  // namespace

// Top-1 (every position, vs p{i}.top1_bf16) and mean |Δlogit| (kept positions, vs
// p{i}.logits_bf16) of the emulation, and vs the same emulation
// without rounding points 5, 8, 10–11 (the CUDA backend's numerics before they were added).
TEST(HfBf16Emulation, LogitsTrackHfBf16Run) {
  const Figures hf = measure(bf16emu::Options{}, false, true);
  bf16emu::Options old;
  old.attn = bf16emu::AttnKernel::Online32;
  old.rope_bf16 = old.mlp_bf16 = old.softcap_bf16 = false;
  const Figures before = measure(old, false, true);
  std::printf("[ measured ] HF rounding points: %s\n[ measured ] without points 5, 8, 10-11: %s\n",
              describe(hf).c_str(), describe(before).c_str());
  // Measured 306/309. HF's own bf16 logits tie at the top on 4 of these 309 positions and its
  // fp32 run's top-2 are within one bf16 ulp on 11: any pipeline not bit-identical to HF's
  // (cuBLAS accumulation order) flips some of those. 305 leaves one for libm differences.
  EXPECT_GE(hf.top1, 305);
  // Mean |Δlogit| over the positions the vendored goldens keep (every 8th and the last of each
  // prompt): measured 0.0192 with the rounding points vs 0.0216 without (0.0193 / 0.0224 over
  // every position; HF's bf16 run is 0.0195 from its fp32 run). The points must bring the
  // emulation closer to HF's bf16 run than the numerics without them by at least 0.002.
  EXPECT_LT(hf.mean_abs, before.mean_abs - 0.002);
  EXPECT_LT(hf.mean_abs, 0.0205);
}

// Greedy generations vs the 8 bf16 goldens. The emulation reproduces 3/8 (measured); every
// divergence is at a near-tie of the emulation's own logits (≤ 2 bf16 ulps apart, most of them
// exact ties of the bf16 softcap output), i.e. where sub-ulp differences upstream (GEMM
// accumulation order, rsqrt/exp/tanh ulps) decide. That is asserted: a wrong rounding point or
// kernel would diverge where the two tokens are clearly apart.
TEST(HfBf16Emulation, GreedyDivergesOnlyAtNearTies) {
  const Figures f = measure(bf16emu::Options{}, true, false);
  std::printf("[ measured ] %s\n", describe(f).c_str());
  EXPECT_GE(f.greedy_equal, 3);
  for (size_t i = 0; i < f.first_diff.size(); ++i)
    if (f.first_diff[i] >= 0) {
      EXPECT_LE(f.gap_ulps[i], 2.0) << "prompt " << i << " diverges at new token " << f.first_diff[i];
      // The first few tokens of a prompt are the easiest; a diverging 1st token is a bug.
      EXPECT_GE(f.first_diff[i], 1) << "prompt " << i;
    }
}

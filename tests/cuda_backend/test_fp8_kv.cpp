// The CUDA backend with an FP8 KV cache (plan.fbs KvLayer.dtype F8E4M3: `--kv-dtype fp8`) on the
// tiny model, against the CPU backend running the same plan (tests/runtime/test_fp8_attention.cpp
// holds its FP8 attention to float64). The kernels' own FP8 paths are held bit for bit to the
// BF16 kernels and the host quantizer in tests/cuda_kernels; this checks the backend's part: the
// pools, the KV writes and the attention reading codes and scales, in prefill chunks and decode
// steps. Label "gpu": skips without a CUDA device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "models/safetensors.h"
#include "runtime/engine.h"
#include "tests/cuda_backend/support.h"

namespace g4c::gpurt {
namespace {

// Two implementations of the same model and KV format, differing in activation precision (the
// CUDA backend rounds activations to bf16 where HF's bf16 run does, the CPU backend keeps fp32):
// HF's bf16 and fp32 runs agree on 99.35 % of the golden positions with mean |Δlogit| 0.0195.
// On top of that, K/V rows that differ in their low bits can round to different FP8 codes, which
// moves a logit by up to what FP8 storage itself moves it: on an H100 the CUDA backend with FP8
// KV against BF16 KV agrees on 97.1 % of the positions (mean |Δlogit| 0.048). Bars: top-1 ≥ 95 %
// (the activations' 1 % of near ties plus FP8's 3 %, with a margin of two positions), mean
// |Δlogit| ≤ 3 × 0.0195 ≈ 0.06 (measured 0.041). A wrong scale, slot or layer moves the mean
// past 1 and top-1 below 50 %.
constexpr double kTop1 = 0.95;
constexpr double kMeanAbs = 0.06;



TEST(CudaBackend, Fp8KvMatchesTheCpuBackend) {
  REQUIRE_GPU();
  const auto prompts = golden_prompts();
  runtime::EngineOptions eo{.max_sequences = 2, .max_seq_len = 256};
  eo.reference_kv_dtype = "fp8";
  auto cpu = runtime::Engine::open(tiny_dir(), std::nullopt, eo);
  auto gpu = open_cuda(tiny_dir(), {}, eo);
  eo.reference_kv_dtype = "bf16";
  auto gpu16 = open_cuda(tiny_dir(), {}, eo);
  const int V = gpu->vocab_size();
  // chunk 0: one prefill chunk per prompt (its keys written, then read back as FP8); 16: chunks
  // over cached keys; 1: decode-sized steps, each token's attention over the cached FP8 rows.
  for (int chunk : {0, 16, 1}) {
    LogitsDiff vs_cpu, vs_bf16;
    for (const auto& p : prompts) {
      const auto ref = cpu->logits(p, chunk);
      const auto got = gpu->logits(p, chunk);
      vs_cpu.add(got, ref, V);
      vs_bf16.add(got, gpu16->logits(p, chunk), V);
    }
    std::printf("[ measured ] fp8 KV chunk %d: cuda vs cpu top-1 %.4f mean |dlogit| %.4g max %.4g; "
                "vs cuda bf16 KV top-1 %.4f mean %.4g\n",
                chunk, vs_cpu.top1(), vs_cpu.mean(), vs_cpu.max, vs_bf16.top1(), vs_bf16.mean());
    EXPECT_GE(vs_cpu.top1(), kTop1) << "chunk " << chunk;
    EXPECT_LE(vs_cpu.mean(), kMeanAbs) << "chunk " << chunk;
    EXPECT_GT(vs_bf16.max, 0.0) << "chunk " << chunk << ": the FP8 plan gave the BF16 plan's logits";
  }
}

// The synthetic Gemma-4-12B INT4 (G4C_12B_INT4: a `g4c synth --preset gemma4-12b --dtype int4`
// directory, as scripts/gpu/bench.sh makes; skips without it) under the 9984 MiB budget: the
// last-position logits with FP8 KV against BF16 KV, prompts of 300 / 1100 / 2100 seeded random
// tokens in chunks of 256 (every chunk after the first reads cached K/V; the two longer ones
// wrap the sliding layers' 1024-token window). Bound: cosine ≥ 0.999 per prompt (issue bound for
// the FP8 cache; BF16 KV against HF bf16 measures 0.9998).
TEST(CudaBackend, Fp8KvLogitsFollowBf16KvOnThe12b) {
  REQUIRE_GPU();
  const char* dir = std::getenv("G4C_12B_INT4");
  if (!dir || !*dir) GTEST_SKIP() << "G4C_12B_INT4 (a synthetic 12B INT4 checkpoint) not set";
  const auto prompts = seeded_prompts(7, {300, 1100, 2100});
  const std::vector<std::vector<float>> last[2] = {last_logits_12b(dir, 2200, prompts, "bf16", "bf16"),
                                                    last_logits_12b(dir, 2200, prompts, "fp8", "bf16")};
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto& a = last[0][i];
    const auto& b = last[1][i];
    ASSERT_EQ(a.size(), b.size());
    ASSERT_FALSE(a.empty());
    const double cosine = gpurt::cosine(a, b);
    const bool top1 = std::max_element(a.begin(), a.end()) - a.begin() == std::max_element(b.begin(), b.end()) - b.begin();
    std::printf("[ measured ] 12B, %zu tokens: logits cosine fp8 vs bf16 KV %.6f, top-1 %s\n", prompts[i].size(), cosine,
                top1 ? "equal" : "differs");
    EXPECT_GE(cosine, 0.999) << prompts[i].size() << " tokens";
  }
}

}  // namespace
}  // namespace g4c::gpurt

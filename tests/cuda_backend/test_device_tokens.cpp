// Next tokens chosen on the device (Backend::argmax_rows, Backend::sample_rows; tokens.cpp) against
// the host's choice on the logits read back. GPU; skipped without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "runtime/sampler.h"
#include "tests/cuda_backend/support.h"

using namespace g4c;
using namespace g4c::gpurt;

TEST(CudaBackend, DeviceArgmaxEqualsHostArgmax) {
  REQUIRE_GPU();
  auto e = open_cuda(tiny_dir());
  const int V = e->vocab_size();
  const std::vector<std::vector<int32_t>> prompts = {
      {2, 818, 2050, 6510}, {2, 7750, 327}, {2, 1405, 903, 691, 818, 2050}, {2, 5}, {2, 9, 10, 11, 12}};
  std::vector<runtime::Engine::SequenceKv> kvs;
  for (const auto& p : prompts) {
    kvs.push_back(e->open_sequence());
    e->grow_sequence(kvs.back(), int(p.size()) + 1);
  }
  std::vector<int32_t> next(prompts.size());
  for (int step = 0; step < 2; ++step) {
    runtime::BatchDesc b;
    for (size_t i = 0; i < prompts.size(); ++i) {
      if (step == 0)
        b.add_sequence(prompts[i].data(), int(prompts[i].size()), 0, kvs[i].ring_slot, &kvs[i].blocks, false, true, &kvs[i].window_blocks);
      else
        b.add_sequence(&next[i], 1, int(prompts[i].size()), kvs[i].ring_slot, &kvs[i].blocks, false, true, &kvs[i].window_blocks);
    }
    e->forward(b);
    std::vector<int32_t> dev;
    ASSERT_EQ(e->backend().argmax_rows(e->plan()->logits_value(), &dev), int(prompts.size()));
    const std::vector<float> logits = e->last_logits();
    ASSERT_EQ(logits.size(), prompts.size() * size_t(V));
    for (size_t i = 0; i < prompts.size(); ++i)
      EXPECT_EQ(dev[i], runtime::argmax(logits.data() + i * size_t(V), V)) << "step " << step << " row " << i;
    next = dev;
  }
  for (auto& kv : kvs) e->close_sequence(kv);
}

// Sampled rows on the device (CudaOptions::device_sample, cuda::sample_rows) against the host
// sampler on the logits read back: the same token for the same draw, except where the host's
// token moves under u ± 1e-6 or top_p · (1 ± 1e-6) (the device's expf is ≤ 2 ulp: partial sums
// within ~5e-7; GpuFused.SampleRowsFollowTheHostSampler says more), skipped and counted.
TEST(CudaBackend, DeviceSamplingFollowsTheHostSampler) {
  REQUIRE_GPU();
  auto e = open_cuda(tiny_dir());  // device sampling: on by default
  const int V = e->vocab_size();
  const std::vector<std::vector<int32_t>> prompts = {{2, 818, 2050, 6510}, {2, 7750, 327}, {2, 1405, 903}, {2, 5}};
  std::vector<runtime::Engine::SequenceKv> kvs;
  runtime::BatchDesc b;
  for (const auto& p : prompts) {
    kvs.push_back(e->open_sequence());
    e->grow_sequence(kvs.back(), int(p.size()));
  }
  for (size_t i = 0; i < prompts.size(); ++i)
    b.add_sequence(prompts[i].data(), int(prompts[i].size()), 0, kvs[i].ring_slot, &kvs[i].blocks, false, true, &kvs[i].window_blocks);
  e->forward(b);
  const runtime::SamplingParams ps[] = {{.temperature = 1.0f}, {.temperature = 0.7f, .top_k = 40},
                                        {.temperature = 1.2f, .top_p = 0.9f},
                                        {.temperature = 0.8f, .top_k = 50, .top_p = 0.95f}};
  std::mt19937_64 g(7);
  std::uniform_real_distribution<double> uni(0.0, 1.0);
  int checked = 0, skipped = 0;
  for (int trial = 0; trial < 25; ++trial) {
    std::vector<runtime::RowDraw> d;
    for (size_t i = 0; i < prompts.size(); ++i) d.push_back({ps[(i + size_t(trial)) % 4], uni(g)});
    std::vector<int32_t> dev;
    ASSERT_EQ(e->backend().sample_rows(e->plan()->logits_value(), d, &dev), int(prompts.size()));
    const std::vector<float> logits = e->last_logits();
    for (size_t i = 0; i < prompts.size(); ++i) {
      const float* row = logits.data() + i * size_t(V);
      const auto& p = d[i].params;
      const double u = d[i].u;
      const int want = runtime::sample_u(row, V, p, u);
      bool ambiguous = false;
      for (const double du : {-1e-6, 1e-6})
        ambiguous |= runtime::sample_u(row, V, p, std::clamp(u + du, 0.0, 1.0 - 0x1p-53)) != want;
      for (const float f : {1.0f - 1e-6f, 1.0f + 1e-6f}) {
        auto q = p;
        q.top_p = std::min(p.top_p * f, 0.99999994f);
        ambiguous |= p.top_p < 1.0f && runtime::sample_u(row, V, q, u) != want;
      }
      if (ambiguous) {
        ++skipped;
        continue;
      }
      ++checked;
      EXPECT_EQ(dev[i], want) << "trial " << trial << " row " << i << " u " << u;
    }
  }
  EXPECT_LE(skipped * 20, checked + skipped);  // ≤ 5%: the skip must not hide the comparison
  for (auto& kv : kvs) e->close_sequence(kv);
  // Off: the backend declines and the engine samples on the host.
  runtime::CudaOptions host;
  host.device_sample = false;
  auto off = open_cuda(tiny_dir(), host);
  std::vector<int32_t> none;
  EXPECT_EQ(off->backend().sample_rows(off->plan()->logits_value(), {}, &none), -1);
}

// Sampled generation end to end (Engine::generate: the scheduler's draws, then the device's
// sample_rows or the host sampler on the pinned staging view of the logits) gives the same tokens
// either way. Deterministic decode GEMMs make each engine's logits the same run after run; top_k 5
// keeps the kept sets small, so a draw lies within expf's ~5e-7 of a boundary with probability
// ~5e-6, and 48 draws all agree but for ~2.4e-4 of builds.
TEST(CudaBackend, SampledGenerationIsTheSameOnDeviceAndHost) {
  REQUIRE_GPU();
  std::vector<runtime::GenerationRequest> rs;
  const std::vector<std::vector<int32_t>> prompts = {{2, 818, 2050, 6510}, {2, 7750, 327}, {2, 1405, 903, 691}};
  for (size_t i = 0; i < prompts.size(); ++i) {
    runtime::GenerationRequest r;
    r.id = "r" + std::to_string(i);
    r.prompt = prompts[i];
    r.max_new_tokens = 16;
    r.ignore_eos = true;
    r.sampling = {.temperature = 1.0f, .top_k = 5, .top_p = 0.95f, .seed = 40 + i};
    rs.push_back(r);
  }
  std::vector<std::vector<int32_t>> got[2];
  for (int dev = 0; dev < 2; ++dev) {
    runtime::CudaOptions co;
    co.kernels.deterministic = true;
    co.device_sample = dev == 1;
    auto e = open_cuda(tiny_dir(), co);
    for (const auto& r : e->generate(rs)) got[dev].push_back(r.tokens);
  }
  for (size_t i = 0; i < rs.size(); ++i) {
    EXPECT_EQ(got[0][i].size(), 16u);
    EXPECT_EQ(got[1][i], got[0][i]) << "request " << i << ": device sampling vs host sampling";
  }
}

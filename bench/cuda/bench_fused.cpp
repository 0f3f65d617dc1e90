// g4c_gpu_kernels_bench's small fused ops (`kb fused [--green 16]`): µs per call in a graph of
// 24 at T = 1, 4, 16, 1024 with and without PDL, argmax and the device sampler at decode sizes.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <random>
#include <vector>

#include "runtime/cuda/kernels.h"
#include "bench/cuda/bench_util.h"

using namespace g4c::cuda;

namespace g4c::gpubench {

void bench_fused() {
  const int H = 3840, V = 262144, kCalls = 24;
  std::printf("\n== Small fused ops (12B shapes; us per call in a graph of %d; GB/s of bytes read + written once)\n", kCalls);
  std::printf("%-36s %6s %10s %10s %10s %10s\n", "op", "T", "us", "GB/s", "us PDL", "GB/s PDL");
  const int max_t = 1024, slots = 4096;
  bf16 *x, *h, *out, *wn, *wp, *ls, *table, *q, *k, *qw, *kw, *kc, *vc;
  int *ids, *pos;
  int64_t* sl;
  float* logits;
  CK(dmalloc(&x, size_t(max_t) * H * 2));
  CK(dmalloc(&h, size_t(max_t) * H * 2));
  CK(dmalloc(&out, size_t(max_t) * H * 2));
  CK(dmalloc(&wn, H * 2));
  CK(dmalloc(&wp, H * 2));
  CK(dmalloc(&ls, 2));
  CK(dmalloc(&table, size_t(V) * H * 2));
  CK(dmalloc(&q, size_t(max_t) * 16 * 512 * 2));
  CK(dmalloc(&k, size_t(max_t) * 8 * 256 * 2));
  CK(dmalloc(&qw, 512 * 2));
  CK(dmalloc(&kw, 512 * 2));
  CK(dmalloc(&kc, size_t(slots) * 8 * 256 * 2));
  CK(dmalloc(&vc, size_t(slots) * 8 * 256 * 2));
  CK(dmalloc(&ids, max_t * 4));
  CK(dmalloc(&pos, max_t * 4));
  CK(dmalloc(&sl, max_t * 8));
  CK(dmalloc(&logits, size_t(16) * V * 4));
  // The sampler's rows: Gaussian logits (σ 3, as an LM head's spread; the random bits above hold
  // ±inf, where the sampler stops at the argmax) and three parameter sets per row count.
  float* glogits = nullptr;
  SampleRow* srows = nullptr;
  CK(dmalloc(&glogits, size_t(16) * V * 4));
  CK(dmalloc(&srows, 3 * 16 * sizeof(SampleRow)));
  {
    std::vector<float> hl(size_t(16) * V);
    std::mt19937_64 g(32);
    std::normal_distribution<float> nd(0.f, 3.f);
    for (auto& v : hl) v = nd(g);
    CK(cudaMemcpy(glogits, hl.data(), hl.size() * 4, cudaMemcpyHostToDevice));
    std::vector<SampleRow> hr;
    const SampleRow sets[3] = {{1.0f, -1, 1.0f, 0, 0.0}, {0.8f, -1, 0.95f, 0, 0.0}, {1.0f, 40, 0.95f, 0, 0.0}};
    for (const SampleRow& r0 : sets)
      for (int i = 0; i < 16; ++i) {
        SampleRow r = r0;
        r.u = (i + 0.5) / 16.0;
        hr.push_back(r);
      }
    CK(cudaMemcpy(srows, hr.data(), hr.size() * sizeof(SampleRow), cudaMemcpyHostToDevice));
  }
  fill_random(x, size_t(max_t) * H * 2, 21, true);
  fill_random(h, size_t(max_t) * H * 2, 22, true);
  fill_random(wn, H * 2, 23, true);
  fill_random(wp, H * 2, 24, true);
  fill_random(table, size_t(V) * H * 2, 25, true);
  fill_random(q, size_t(max_t) * 16 * 512 * 2, 26, true);
  fill_random(k, size_t(max_t) * 8 * 256 * 2, 27, true);
  fill_random(qw, 512 * 2, 28, true);
  fill_random(kw, 512 * 2, 29, true);
  fill_random(logits, size_t(16) * V * 4, 30, false);  // random bits: finite or not, argmax scans all
  {
    std::vector<int> hi(max_t), hp(max_t);
    std::vector<int64_t> hs(max_t);
    std::mt19937_64 g(31);
    for (int i = 0; i < max_t; ++i) {
      hi[i] = int(g() % V);
      hp[i] = 3000 + i;
      hs[i] = int64_t((7 * i + 5) % slots);
    }
    const uint16_t one = 0x3F80;  // bf16 1.0: layer_scalar
    CK(cudaMemcpy(ids, hi.data(), max_t * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(pos, hp.data(), max_t * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(sl, hs.data(), max_t * 8, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(ls, &one, 2, cudaMemcpyHostToDevice));
  }
  struct Op {
    const char* name;
    double bytes_per_t;  // per token
    std::function<void(int)> run;
    bool logit_rows = false;  // rows of logits: decode sizes only
  };
  for (int T : {1, 4, 16, 1024}) {
    KernelOptions ko;  // ko.pdl: the PDL column (the ops read it when the graph is captured)
    const Op ops[] = {
        {"embed gather x scale", 4.0 * H, [&](int) { CK(embed_gather_scale(ids, T, table, V, H, 62.f, out, g_stream)); }},
        {"rmsnorm", 4.0 * H, [&](int) { CK(rmsnorm(x, H, nullptr, T, H, H, wn, 1e-6f, out, H, g_stream, ko)); }},
        {"add_rmsnorm (+ layer_scalar, next)", 8.0 * H,
         [&](int) { CK(add_rmsnorm(x, wp, h, ls, wn, out, T, H, 1e-6f, g_stream, ko)); }},
        {"q/k norm+rope+kv write (16/8x256)", 2.0 * (2 * 16 * 256 + 8 * 256 * 3),
         [&](int) {
           CK(qk_norm_rope_kv_write(q, k, nullptr, qw, kw, pos, sl, T, 16, 8, 256, 10000.f, 128, 1e-6f, q, kc, vc,
                                    g_stream, ko));
         }},
        {"q/k norm+rope+kv write (16/1x512)", 2.0 * (2 * 16 * 512 + 512 * 3),
         [&](int) {
           CK(qk_norm_rope_kv_write(q, k, nullptr, qw, kw, pos, sl, T, 16, 1, 512, 1e6f, 64, 1e-6f, q, kc, vc,
                                    g_stream, ko));
         }},
        {"argmax rows (262144 fp32)", 4.0 * V, [&](int) { CK(argmax_rows(logits, T, V, V, ids + 512, g_stream)); },
         true},
        {"sample rows T 1", 4.0 * V, [&](int) { CK(sample_rows(glogits, T, V, V, srows, ids + 512, g_stream)); }, true},
        {"sample rows T 0.8 top_p 0.95", 4.0 * V,
         [&](int) { CK(sample_rows(glogits, T, V, V, srows + 16, ids + 512, g_stream)); }, true},
        {"sample rows top_k 40 top_p 0.95", 4.0 * V,
         [&](int) { CK(sample_rows(glogits, T, V, V, srows + 32, ids + 512, g_stream)); }, true},
    };
    for (const Op& op : ops) {
      if (T > 16 && op.logit_rows) continue;
      double us[2];
      for (int pdl = 0; pdl < 2; ++pdl) {
        ko.pdl = pdl == 1;
        us[pdl] = time_graph(op.run, kCalls) * 1e3;
      }
      ko.pdl = false;
      const double b = op.bytes_per_t * T;
      std::printf("%-36s %6d %10.2f %10.0f %10.2f %10.0f\n", op.name, T, us[0], b / (us[0] * 1e-6) / 1e9, us[1],
                  b / (us[1] * 1e-6) / 1e9);
    }
  }
  std::fflush(stdout);
  for (void* p : {(void*)x, (void*)h, (void*)out, (void*)wn, (void*)wp, (void*)ls, (void*)table, (void*)q, (void*)k,
                  (void*)qw, (void*)kw, (void*)kc, (void*)vc, (void*)ids, (void*)pos, (void*)sl, (void*)logits,
                  (void*)glogits, (void*)srows})
    cudaFree(p);
}

}  // namespace g4c::gpubench

// Microbenchmarks of the CUDA kernels at Gemma-4-12B shapes. Prints tables; run by
// tests/cuda_kernels/run.sh on the GPU host. Timing: CUDA graph of many launches (rotating over weight /
// KV copies that together exceed L2), CUDA events, warm-up, median of samples.
// cuBLAS (baseline only) is loaded with dlopen so the binary runs without it.
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "runtime/cuda/kernels.h"
#include "bench/cuda/bench_util.h"

using namespace g4c::cuda;

cudaError_t bench_copy16(const void* src, void* dst, size_t bytes, cudaStream_t stream);  // bench_copy.cu

namespace {

using namespace g4c::gpubench;
bool g_quick = false;

// ------------------------------------------------------------ cuBLAS via dlopen
struct Blas {
  void* lib = nullptr;
  cublasHandle_t h = nullptr;
  using GemmFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int,
                                   int, const void*, const void*, cudaDataType, int, const void*,
                                   cudaDataType, int, const void*, void*, cudaDataType, int,
                                   cublasComputeType_t, cublasGemmAlgo_t);
  using CreateFn = cublasStatus_t (*)(cublasHandle_t*);
  using SetStreamFn = cublasStatus_t (*)(cublasHandle_t, cudaStream_t);
  GemmFn gemm = nullptr;
  bool ok() const { return gemm && h; }
  void init() {
    for (const char* n : {"libcublas.so.13", "libcublas.so.12", "libcublas.so"})
      if ((lib = dlopen(n, RTLD_NOW | RTLD_LOCAL))) break;
    if (!lib) { std::printf("cuBLAS: not found (baselines skipped)\n"); return; }
    auto create = reinterpret_cast<CreateFn>(dlsym(lib, "cublasCreate_v2"));
    auto setstream = reinterpret_cast<SetStreamFn>(dlsym(lib, "cublasSetStream_v2"));
    gemm = reinterpret_cast<GemmFn>(dlsym(lib, "cublasGemmEx"));
    if (!create || !setstream || !gemm || create(&h) != CUBLAS_STATUS_SUCCESS) { gemm = nullptr; return; }
    setstream(h, g_stream);
  }
  // Y[m][n] = X[m][k] · W[n][k]^T, bf16, fp32 compute.
  void run(const bf16* x, const bf16* w, bf16* y, int m, int n, int k) {
    const float one = 1.f, zero = 0.f;
    cublasStatus_t st = gemm(h, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &one, w, CUDA_R_16BF, k, x,
                             CUDA_R_16BF, k, &zero, y, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F,
                             CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS) { std::fprintf(stderr, "cublasGemmEx failed %d\n", int(st)); std::exit(1); }
  }
} g_blas;

double g_copy_gbs = 0, g_blas_tflops = 0;

void bench_ceilings() {
  const size_t bytes = size_t(1) << 30;
  void *a, *b;
  CK(dmalloc(&a, bytes));
  CK(dmalloc(&b, bytes));
  fill_random(a, 64 << 20, 1, false);
  double ms = time_graph([&](int) { CK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, g_stream)); }, 5);
  std::printf("cudaMemcpyAsync D2D 1 GiB (graph memcpy node): %.3f ms -> %.0f GB/s (read+write)\n", ms,
              2.0 * bytes / (ms * 1e-3) / 1e9);
  ms = time_graph([&](int) { CK(bench_copy16(a, b, bytes, g_stream)); }, 5);
  g_copy_gbs = 2.0 * bytes / (ms * 1e-3) / 1e9;
  std::printf("ceiling copy kernel 1 GiB (16-byte loads/stores): %.3f ms -> %.0f GB/s (read+write)\n", ms, g_copy_gbs);
  CK(cudaFree(a));
  CK(cudaFree(b));
  if (g_blas.ok()) {
    const int n = 8192;
    bf16 *x, *w, *y;
    CK(dmalloc(&x, size_t(n) * n * 2));
    CK(dmalloc(&w, size_t(n) * n * 2));
    CK(dmalloc(&y, size_t(n) * n * 2));
    fill_random(x, size_t(n) * n * 2, 2, true);
    fill_random(w, size_t(n) * n * 2, 3, true);
    double t = time_graph([&](int) { g_blas.run(x, w, y, n, n, n); }, 5);
    g_blas_tflops = 2.0 * n * n * double(n) / (t * 1e-3) / 1e12;
    std::printf("ceiling cuBLAS bf16 8192^3 (random data): %.3f ms -> %.0f TFLOP/s\n", t, g_blas_tflops);
    cudaFree(x); cudaFree(w); cudaFree(y);
  }
}

struct Shape {
  const char* name;
  int n, k;
  bool gate_up;  // n = f (per weight)
};
const Shape kShapes[] = {
    {"q 3840->4096", 4096, 3840, false},       {"k|v 3840->2048", 2048, 3840, false},
    {"o 4096->3840", 3840, 4096, false},       {"gate+up 3840->2x15360", 15360, 3840, true},
    {"down 15360->3840", 3840, 15360, false},  {"full q 3840->8192", 8192, 3840, false},
    {"full k 3840->512", 512, 3840, false},    {"full o 8192->3840", 3840, 8192, false},
    // What the CUDA runtime runs by default (sibling fusion): the full layers' q and k as one GEMM
    // (k_eq_v: no v); the sliding layers' q|k|v is the 3840->8192 shape of "full q".
    {"full q+k 3840->8704", 8704, 3840, false},
};

struct PackedSet {  // `copies` repacked copies of one random INT4 weight
  std::vector<Int4Weight> w;
  void* mem = nullptr;
  size_t one = 0;
  size_t weight_bytes = 0;  // qweight + scales (+ zeros) of one copy, as the kernel reads them
};

PackedSet make_packed(const Shape& s, int group, bool asym, size_t min_total) {
  PackedSet p;
  const int rows = s.gate_up ? 2 * s.n : s.n;
  p.one = int4_repacked_bytes(rows, s.k, group, asym);
  const int kp = (s.k + group - 1) / group * group;
  p.weight_bytes = size_t(rows) * kp / 2 + size_t(rows) * (kp / group) * (2 + (asym ? 1 : 0));
  const int copies = int(std::max<size_t>(1, (min_total + p.one - 1) / p.one));
  CK(dmalloc(&p.mem, p.one * copies));
  uint8_t *q, *z = nullptr;
  uint16_t* sc;
  const size_t qb = size_t(rows) * kp / 2, ng = size_t(rows) * (kp / group);
  CK(dmalloc(&q, qb));
  CK(dmalloc(&sc, ng * 2));
  fill_random(q, qb, 11, false);
  std::vector<uint16_t> hs(ng);
  for (size_t i = 0; i < ng; ++i) hs[i] = 0x3C00 + uint16_t(i % 97) * 4;  // fp16 ≈ 0.0..1.x... positive
  for (auto& v : hs) v = 0x2000 + (v & 0x3FF);                              // fp16 ≈ 0.008..0.016
  CK(cudaMemcpy(sc, hs.data(), ng * 2, cudaMemcpyHostToDevice));
  if (asym) {
    CK(dmalloc(&z, ng));
    CK(cudaMemset(z, 7, ng));
  }
  const int n_src = s.n;
  Int4Weight w0;
  if (s.gate_up)  // the same source twice: a gate/up pair of the right shape
    w0 = int4_repack(q, sc, z, q, sc, z, false, n_src, s.k, group, p.mem, g_stream);
  else
    w0 = int4_repack(q, sc, z, nullptr, nullptr, nullptr, false, n_src, s.k, group, p.mem, g_stream);
  CK(cudaStreamSynchronize(g_stream));
  for (int c = 0; c < copies; ++c) {
    uint8_t* base = static_cast<uint8_t*>(p.mem) + c * p.one;
    if (c) CK(cudaMemcpy(base, p.mem, p.one, cudaMemcpyDeviceToDevice));
    Int4Weight w = w0;
    const ptrdiff_t off = base - static_cast<uint8_t*>(p.mem);
    w.qweight = static_cast<const uint8_t*>(w0.qweight) + off;
    w.scales = reinterpret_cast<const bf16*>(reinterpret_cast<const uint8_t*>(w0.scales) + off);
    if (w0.zeros) w.zeros = w0.zeros + off;
    p.w.push_back(w);
  }
  cudaFree(q); cudaFree(sc); if (z) cudaFree(z);
  return p;
}

void bench_decode_gemm() {
  std::printf("\n== W4A16 decode GEMM (sym INT4 g128; bytes = qweight+scales+x+y; copy ceiling %.0f GB/s)\n", g_copy_gbs);
  std::printf("(%%copy-same: vs the copy kernel moving the same bytes, L2 rotated the same way)\n");
  std::printf("%-24s %4s %10s %10s %8s %12s %10s\n", "shape", "M", "us", "GB/s", "%copy", "copy-same us", "%copy-same");
  const int Ms[] = {1, 2, 4, 8, 16};
  const size_t pool_bytes = size_t(512) << 20;
  char* pool;
  CK(dmalloc(&pool, pool_bytes));
  CK(cudaMemset(pool, 1, pool_bytes));
  const char* only_shape = std::getenv("G4C_BENCH_SHAPE");  // substring filter (profiling)
  for (const Shape& s : kShapes) {
    if (only_shape && !std::strstr(s.name, only_shape)) continue;
    PackedSet p = make_packed(s, 128, false, size_t(400) << 20);
    const size_t half = (p.weight_bytes / 2 + 15) & ~size_t(15);
    const int ncopy = int(pool_bytes / (2 * half));
    const double tcopy = time_graph([&](int i) {
      char* src = pool + size_t(i % ncopy) * 2 * half;
      CK(bench_copy16(src, src + half, half, g_stream));
    }, std::max(std::min(ncopy, 200), 20));
    const int rows = s.gate_up ? 2 * s.n : s.n;
    const int out_cols = s.gate_up ? s.n : s.n;
    bf16 *x, *y;
    CK(dmalloc(&x, size_t(16) * s.k * 2));
    CK(dmalloc(&y, size_t(16) * rows * 2));
    fill_random(x, size_t(16) * s.k * 2, 5, true);
    for (int m : Ms) {
      const size_t wsb = w4a16_workspace_bytes(m, p.w[0]);
      void* ws = nullptr;
      if (wsb) { CK(dmalloc(&ws, wsb)); CK(cudaMemset(ws, 0, wsb)); }
      GemmOut o;
      o.y = y;
      o.ldy = out_cols;
      const Epilogue ep = s.gate_up ? Epilogue::GeluMul : Epilogue::Store;
      const int copies = int(p.w.size());
      double ms = time_graph([&](int i) {
        CK(w4a16_gemm(x, m, s.k, p.w[i % copies], ep, o, ws, wsb, g_stream));
      }, std::max(copies, 20));
      const double bytes = double(p.weight_bytes) + 2.0 * m * s.k + 2.0 * m * out_cols;
      const double gbs = bytes / (ms * 1e-3) / 1e9;
      std::printf("%-24s %4d %10.2f %10.0f %7.1f%% %12.2f %9.1f%%\n", s.name, m, ms * 1e3, gbs,
                  100 * gbs / g_copy_gbs, tcopy * 1e3, 100 * tcopy / ms);
      if (ws) cudaFree(ws);
    }
    cudaFree(x); cudaFree(y); cudaFree(p.mem);
  }
  cudaFree(pool);
}

// Prefill GEMM table at M tokens. Columns (TFLOP/s = 2·M·N·K / t): w4a16_gemm (µs, TFLOP/s, and
// the tile / k split rs_plan picks), bf16_gemm on the dequantized weights, cuBLAS on them alone and
// after our dequantize kernel. `quick` (green context): fewer launches per graph.
void bench_prefill_gemm(int M, bool quick) {
  std::printf("\n== GEMM M=%d on %d SMs (TFLOP/s = 2*M*N*K / t; cuBLAS ceiling %.0f)\n", M,
              gemm_stream_sms(g_stream), g_blas_tflops);
  std::printf("(w4a16: w4a16_gemm; bf16: bf16_gemm on the dequantized weights; cuBLAS: bf16 GEMM alone on them;\n"
              " deq+cuBL: our dequantize + cuBLAS)\n");
  std::printf("%-22s %9s %7s | %9s %7s | %9s %9s %9s\n", "shape", "w4a16 us", "TF/s", "bf16 us", "TF/s", "cuBLAS us",
              "cuBL TF/s", "deq+cuBL");
  const int calls = quick ? 3 : 10;
  const char* only_shape = std::getenv("G4C_BENCH_SHAPE");  // substring filter (profiling)
  for (const Shape& s : kShapes) {
    if (only_shape && !std::strstr(s.name, only_shape)) continue;
    const int rows = s.gate_up ? 2 * s.n : s.n;
    PackedSet p = make_packed(s, 128, false, 0);
    bf16 *x, *y, *wd;
    CK(dmalloc(&x, size_t(M) * s.k * 2));
    CK(dmalloc(&y, size_t(M) * rows * 2));
    CK(dmalloc(&wd, size_t(rows) * s.k * 2));
    fill_random(x, size_t(M) * s.k * 2, 6, true);
    GemmOut o;
    o.y = y;
    o.ldy = s.n;
    const Epilogue ep = s.gate_up ? Epilogue::GeluMul : Epilogue::Store;
    const double flops = 2.0 * M * rows * s.k;
    auto tf = [&](double ms) { return ms > 0 ? flops / (ms * 1e-3) / 1e12 : 0.0; };
    CK(int4_dequantize(p.w[0], wd, g_stream));
    Bf16Weight bw{wd, rows, s.k, s.k, s.gate_up};
    const double d = time_graph([&](int) { CK(w4a16_gemm(x, M, s.k, p.w[0], ep, o, nullptr, 0, g_stream)); }, calls);
    const double bf = time_graph([&](int) { CK(bf16_gemm(x, M, s.k, bw, ep, o, g_stream)); }, calls);
    double tc = 0, tdc = 0;
    if (g_blas.ok()) {
      tc = time_graph([&](int) { g_blas.run(x, wd, y, M, rows, s.k); }, calls);
      tdc = time_graph([&](int) { CK(int4_dequantize(p.w[0], wd, g_stream)); g_blas.run(x, wd, y, M, rows, s.k); }, calls);
    }
    std::printf("%-22s %9.1f %7.0f | %9.1f %7.0f | %9.1f %9.0f %9.1f\n", s.name, d * 1e3, tf(d), bf * 1e3, tf(bf),
                tc * 1e3, tf(tc), tdc * 1e3);
    std::fflush(stdout);
    cudaFree(x); cudaFree(y); cudaFree(wd); cudaFree(p.mem);
  }
}

void bench_lm_head() {
  std::printf("\n== LM head (BF16 E 262144x3840, softcap fp32 logits; bytes = E + logits)\n");
  const int V = 262144, H = 3840;
  bf16 *e, *x;
  float* logits;
  CK(dmalloc(&e, size_t(V) * H * 2));
  CK(dmalloc(&x, size_t(16) * H * 2));
  CK(dmalloc(&logits, size_t(16) * V * 4));
  fill_random(e, size_t(V) * H * 2, 7, true);
  fill_random(x, size_t(16) * H * 2, 8, true);
  for (int m : {1, 4, 8, 16}) {
      GemmOut o;
      o.y = logits;
      o.ldy = V;
      o.softcap = 30.f;
      Bf16Weight w{e, V, H, H, false};
      double ms = time_graph([&](int) { CK(bf16_gemm(x, m, H, w, Epilogue::SoftcapF32, o, g_stream)); }, 5);
      const double bytes = double(V) * H * 2 + double(m) * V * 4;
      std::printf("M=%d: %.1f us, %.0f GB/s (%.1f%% copy)\n", m, ms * 1e3, bytes / (ms * 1e-3) / 1e9,
                  100 * bytes / (ms * 1e-3) / 1e9 / g_copy_gbs);
  }
  cudaFree(e); cudaFree(x); cudaFree(logits);
}

// ------------------------------------------------------------ small fused ops
// Per-call time of the small ops at 12B shapes (H 3840; sliding q/k heads 16 / 8 × 256, full 16 /
// 1 × 512, K = V), T tokens, in a graph of 24 calls (each call's inputs are the previous call's
// outputs or independent; no call waits on the host): what a decode step pays per op and layer.
// bytes = what the op must read and write once; with PDL (KernelOptions::pdl) as the runtime launches
// them, and without.
// ------------------------------------------------------------ attention
struct AttnSetup {
  int hq, hkv, d, window;
};

void bench_attention() {
  std::printf("\n== Attention (bf16 rate ceiling %.0f TFLOP/s, copy %.0f GB/s)\n", g_blas_tflops, g_copy_gbs);
  std::printf("%-34s %6s %10s %10s %8s\n", "case", "ctx", "us", "rate", "%ceil");
  const AttnSetup layers[] = {{16, 8, 256, 1024}, {16, 1, 512, 0}};
  for (int d : {256, 512}) {
    std::printf("decode d%d: clusters of s blocks resident at once, s = 2 … 8:", d);
    for (int sp = 2; sp <= 8; ++sp) std::printf(" %d", attention_cluster_capacity(d, sp, g_stream));
    std::printf("\n");
  }
  // G4C_BENCH_ATTN="B,ctx,d": only that decode case, no split sweep (for ncu --launch-skip);
  // B = -1: only the prefill case of that ctx and d.
  int only_b = 0, only_ctx = 0, only_d = 0;
  if (const char* f = std::getenv("G4C_BENCH_ATTN")) std::sscanf(f, "%d,%d,%d", &only_b, &only_ctx, &only_d);
  for (const AttnSetup& L : layers) {
    if (only_d && L.d != only_d) continue;
    const long row = long(L.hkv) * L.d;
    for (int ctxlen : {512, 2048, 8192}) {
      if (only_ctx && ctxlen != only_ctx) continue;
      // ---- prefill: one request, queries 0..ctxlen-1 (ctx 0).
      if (only_b <= 0) {
        const int T = ctxlen;
        const int slots = T + 64;
        bf16 *q, *o, *k, *v;
        CK(dmalloc(&q, size_t(T) * L.hq * L.d * 2));
        CK(dmalloc(&o, size_t(T) * L.hq * L.d * 2));
        CK(dmalloc(&k, size_t(slots) * row * 2));
        CK(dmalloc(&v, size_t(slots) * row * 2));
        fill_random(q, size_t(T) * L.hq * L.d * 2, 9, true);
        fill_random(k, size_t(slots) * row * 2, 10, true);
        fill_random(v, size_t(slots) * row * 2, 11, true);
        std::vector<int> qs = {0, T}, cl = {0}, rb = {0};
        int *dqs, *dcl, *drb;
        CK(dmalloc(&dqs, 8)); CK(dmalloc(&dcl, 4)); CK(dmalloc(&drb, 4));
        CK(cudaMemcpy(dqs, qs.data(), 8, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(dcl, cl.data(), 4, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(drb, rb.data(), 4, cudaMemcpyHostToDevice));
        KvCache kv;
        kv.k = k; kv.v = v; kv.ring_base = drb; kv.ring_capacity = slots;  // contiguous = ring ≥ T
        AttnBatch b;
        b.num_requests = 1; b.q_start = dqs; b.ctx_len = dcl; b.total_q = T; b.max_q_len = T; b.max_kv_len = T;
        auto time_prefill = [&]() {
          return time_graph([&](int) { CK(attention(q, L.hq, L.hkv, L.d, kv, b, L.window, 1.f, o, 1, nullptr, 0, g_stream)); },
                            5);
        };
        const double ms = time_prefill();  // the Hopper wgmma kernel (attention_sm90.cu)
        double vis = 0;
        for (int i = 0; i < T; ++i) vis += L.window ? std::min(i + 1, L.window) : i + 1;
        const double flops = vis * L.hq * L.d * 4.0;
        auto pct = [&](double t) { return g_blas_tflops > 0 ? 100 * flops / (t * 1e-3) / 1e12 / g_blas_tflops : 0.0; };
        char nm[64];
        std::snprintf(nm, sizeof nm, "prefill hd%d hkv%d W%d", L.d, L.hkv, L.window);
        std::printf("%-34s %6d %10.1f %7.0f TF %7.1f%%", nm, T, ms * 1e3, flops / (ms * 1e-3) / 1e12, pct(ms));
        std::printf("\n");
        cudaFree(q); cudaFree(o); cudaFree(k); cudaFree(v); cudaFree(dqs); cudaFree(dcl); cudaFree(drb);
      }
      // ---- decode: B requests of context ctxlen, one query each; paged, rotating pools.
      for (int B : {1, 5, 16}) {
        if (only_b && B != only_b) continue;  // (B = -1: none)
        const int bs = 64;
        const int blocks_per = (ctxlen + 1 + bs - 1) / bs;
        const size_t per_copy = size_t(B) * blocks_per * bs * row * 2 * 2;
        const int copies = int(std::max<size_t>(1, (size_t(300) << 20) / per_copy));
        const int pool = copies * B * blocks_per;
        bf16 *q, *o, *k, *v;
        CK(dmalloc(&q, size_t(B) * L.hq * L.d * 2));
        CK(dmalloc(&o, size_t(B) * L.hq * L.d * 2));
        CK(dmalloc(&k, size_t(pool) * bs * row * 2));
        CK(dmalloc(&v, size_t(pool) * bs * row * 2));
        fill_random(q, size_t(B) * L.hq * L.d * 2, 12, true);
        fill_random(k, size_t(pool) * bs * row * 2, 13, true);
        CK(cudaMemcpy(v, k, size_t(pool) * bs * row * 2, cudaMemcpyDeviceToDevice));
        std::vector<int> bt(size_t(copies) * B * blocks_per);
        for (size_t i = 0; i < bt.size(); ++i) bt[i] = int(i);
        std::vector<int> qs(B + 1), cl(B, ctxlen);
        for (int i = 0; i <= B; ++i) qs[i] = i;
        int *dbt, *dqs, *dcl;
        CK(dmalloc(&dbt, bt.size() * 4));
        CK(dmalloc(&dqs, qs.size() * 4));
        CK(dmalloc(&dcl, cl.size() * 4));
        CK(cudaMemcpy(dbt, bt.data(), bt.size() * 4, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(dqs, qs.data(), qs.size() * 4, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(dcl, cl.data(), cl.size() * 4, cudaMemcpyHostToDevice));
        AttnBatch b;
        b.num_requests = B; b.q_start = dqs; b.ctx_len = dcl; b.total_q = B; b.max_q_len = 1; b.max_kv_len = ctxlen + 1;
        // The cooperative kernel at the heuristic's split count, then a sweep (the best of it
        // printed beside). (The stream's SMs: a green context's count under --green, as the
        // runtime passes it.)
        const int sms = gemm_stream_sms(g_stream);
        const int splits = attention_num_splits(b, L.hq, L.hkv, L.d, L.window, sms);
        const size_t wsb = attention_workspace_bytes(b, L.hq, L.d, 64);
        void* ws = nullptr;
        if (wsb) CK(dmalloc(&ws, wsb));
        auto time_splits = [&](int sp, const KernelOptions& ko = {}) {
          return time_graph([&](int i) {
            KvCache kv;
            kv.k = k; kv.v = v; kv.block_table = dbt + size_t(i % copies) * B * blocks_per;
            kv.max_blocks = blocks_per; kv.block_size = bs;
            CK(attention(q, L.hq, L.hkv, L.d, kv, b, L.window, 1.f, o, sp, ws, wsb, g_stream, ko));
          }, std::max(copies, 10));
        };
        // The time at split count `rule`, and the best over the sweep (and `rule`).
        auto sweep = [&](int rule, double& at_rule, int& best_s, double& best_ms) {
          best_ms = at_rule = time_splits(rule);
          best_s = rule;
          for (int sp : {1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 24, 32, 48, 64}) {
            if (only_b) break;
            const double t = time_splits(sp);
            if (t < best_ms) best_ms = t, best_s = sp;
          }
        };
        double ms, best_ms;
        int best_s;
        sweep(splits, ms, best_s, best_ms);
        // The same launches by programmatic dependent launch (as the CUDA runtime makes them): in
        // this graph each attention's first K/V loads overlap the previous combine.
        KernelOptions pdl;
        pdl.pdl = true;
        const double ms_pdl = time_splits(splits, pdl);
        const int c_rule = attention_combine_cluster_size(b, L.hq, L.hkv, L.d, splits, g_stream);
        // FP8 KV (KvCache::k8) at the same split count: codes in the first half of the K / V
        // pools, a scale per (slot, kv head); the same blocks and rotation.
        float *ksc, *vsc;
        CK(dmalloc(&ksc, size_t(pool) * bs * L.hkv * 4));
        CK(dmalloc(&vsc, size_t(pool) * bs * L.hkv * 4));
        CK(cudaMemset(ksc, 0x3c, size_t(pool) * bs * L.hkv * 4));
        CK(cudaMemset(vsc, 0x3c, size_t(pool) * bs * L.hkv * 4));
        const double ms_fp8 = time_graph([&](int i) {
          KvCache kv;
          kv.k8 = reinterpret_cast<const uint8_t*>(k);
          kv.v8 = reinterpret_cast<const uint8_t*>(v);
          kv.k_scale = ksc;
          kv.v_scale = vsc;
          kv.block_table = dbt + size_t(i % copies) * B * blocks_per;
          kv.max_blocks = blocks_per; kv.block_size = bs;
          CK(attention(q, L.hq, L.hkv, L.d, kv, b, L.window, 1.f, o, splits, ws, wsb, g_stream));
        }, std::max(copies, 10));
        cudaFree(ksc); cudaFree(vsc);
        const double vis = L.window ? std::min(ctxlen + 1, L.window) : ctxlen + 1;
        const double bytes = double(B) * vis * row * 2 * 2;
        const double bytes8 = double(B) * vis * L.hkv * (L.d + 4) * 2;  // codes + scales
        auto pct = [&](double t) { return 100 * bytes / (t * 1e-3) / 1e9 / g_copy_gbs; };
        char nm[64];
        std::snprintf(nm, sizeof nm, "decode B=%d hd%d hkv%d W%d s%d", B, L.d, L.hkv, L.window, splits);
        std::printf("%-34s %6d %10.1f %7.0f GB/s %5.1f%%   pdl %.1f us %.1f%% (%s)   sweep best s%d %.1f us %.1f%%   "
                    "fp8 %.1f us %.0f GB/s\n",
                    nm, ctxlen, ms * 1e3, bytes / (ms * 1e-3) / 1e9, pct(ms), ms_pdl * 1e3, pct(ms_pdl),
                    c_rule ? ("in-kernel combine c" + std::to_string(c_rule)).c_str() : "combine kernel", best_s,
                    best_ms * 1e3, pct(best_ms), ms_fp8 * 1e3, bytes8 / (ms_fp8 * 1e-3) / 1e9);
        cudaFree(q); cudaFree(o); cudaFree(k); cudaFree(v); cudaFree(dbt); cudaFree(dqs); cudaFree(dcl);
        if (ws) cudaFree(ws);
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  // argv[1]: "all" or a comma list of decode, prefill, lmhead, fused, attention.
  std::string only = argc > 1 ? argv[1] : "all";
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("no CUDA device: benchmarks skipped\n");
    return 77;
  }
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);
  // --green N: run everything on a stream of an N-SM green context (DESIGN.md §5).
  int green = 0;
  for (int i = 2; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--green") green = std::atoi(argv[i + 1]);
  if (green > 0) {
    g_stream = make_green_stream(green);
    std::printf("green context: %d SMs requested, kernels see %d\n", green, gemm_stream_sms(g_stream));
  } else {
    CK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
  }
  g_blas.init();
  bench_ceilings();
  auto want = [&](const char* m) { return only == "all" || only.find(m) != std::string::npos; };
  if (want("decode")) bench_decode_gemm();
  if (want("prefill")) {
    const char* only_m = std::getenv("G4C_BENCH_M");  // one M only, any value (profiling, plan checks)
    if (only_m && std::atoi(only_m) > 0)
      bench_prefill_gemm(std::atoi(only_m), green > 0);
    else
      for (int m : {2048, 512}) bench_prefill_gemm(m, green > 0);
  }
  if (want("lmhead")) bench_lm_head();
  if (want("fused")) bench_fused();
  if (want("attention")) bench_attention();
  return 0;
}

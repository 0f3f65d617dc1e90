// Benchmark of the W4A16 decode GEMM at Gemma-4-12B shapes: m ≤ 16, the default dispatch of
// w4a16_gemm against each variant of gemm_decode.cu forced (development A/Bs of the decode rule);
// then 8 … 64 rows: the default dispatch, the decode kernels (one weight pass up to
// kDecodeMaxRows, two above) and the wgmma kernel with 32- / 64-token tiles (w4a16_gemm_wgmma);
// last the LM head 3840 -> 262144 at 1 … 64 rows: BF16 table (bf16_gemm, SoftcapF32 with cap 0, as
// the backend runs it) against the per-row INT8 table (w8a16_gemm_f32).
// Usage: g4c_bench_decode [--green N]  (N-SM green context, DESIGN.md §5).
// Timing: CUDA graph of ≥ 20 launches rotating over weight copies that together exceed L2 (400
// MB), CUDA events, warm-up replay, median of 9 replays. Bytes = qweight + scales + x + y.
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "runtime/cuda/gemm_decode.cuh"
#include "runtime/cuda/gemm_w8.cuh"
#include "runtime/cuda/kernels.h"
#include "bench/cuda/bench_util.h"

using namespace g4c::cuda;

cudaError_t bench_copy16(const void* src, void* dst, size_t bytes, cudaStream_t stream);  // bench_copy.cu

namespace {

using namespace g4c::gpubench;

struct Shape {
  const char* name;
  int n, k;
  bool gate_up;
};
const Shape kShapes[] = {
    {"q 3840->4096", 4096, 3840, false},      {"k|v 3840->2048", 2048, 3840, false},
    {"o 4096->3840", 3840, 4096, false},      {"gate+up 3840->2x15360", 15360, 3840, true},
    {"down 15360->3840", 3840, 15360, false}, {"full q 3840->8192", 8192, 3840, false},
    {"full o 8192->3840", 3840, 8192, false},
    // The full layers' q and k as the runtime runs them (sibling fusion; the sliding layers' q|k|v
    // is the 3840->8192 shape of "full q").
    {"full q+k 3840->8704", 8704, 3840, false},
};

}  // namespace

int main(int argc, char** argv) {
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    std::printf("no CUDA device: benchmark skipped\n");
    return 77;
  }
  int green = 0;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--green") green = std::atoi(argv[i + 1]);
  if (green > 0)
    g_stream = make_green_stream(green);
  else
    CK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
  const int sms = gemm_stream_sms(g_stream);
  const char* only_shape = std::getenv("G4C_BENCH_SHAPE");
  // G4C_BENCH_PDL=1: variants launched by programmatic dependent launch (each launch of the
  // graph may then start while the one before it finishes).
  const bool pdl = std::getenv("G4C_BENCH_PDL") && std::string(std::getenv("G4C_BENCH_PDL")) == "1";
  KernelOptions ko;  // the dflt column (w4a16_gemm) in the same mode
  ko.pdl = pdl;
  // G4C_BENCH_VARIANTS="14,17": time only these variants (others print 0; "" none): quick A/Bs of
  // the dflt column.
  const char* only_variants = std::getenv("G4C_BENCH_VARIANTS");
  auto timed = [&](int v) {
    if (!only_variants) return true;
    const std::string l = std::string(",") + only_variants + ",";
    return l.find("," + std::to_string(v) + ",") != std::string::npos;
  };
  // G4C_BENCH_DET=1: deterministic mode (DecodeTuning::deterministic; dflt column too).
  const bool det = std::getenv("G4C_BENCH_DET") && std::string(std::getenv("G4C_BENCH_DET")) == "1";
  ko.deterministic = det;
  // G4C_BENCH_WHOLE_TILES=-1|0|1: DecodeTuning::whole_tiles of the variant columns (default -1,
  // the rule; 0: stream-K ranges in arrival order; 1: whole tiles everywhere).
  const int whole = std::getenv("G4C_BENCH_WHOLE_TILES") ? std::atoi(std::getenv("G4C_BENCH_WHOLE_TILES")) : -1;

  // Copy ceiling in this context (1 GiB, read + write).
  double copy_gbs = 0;
  {
    const size_t bytes = size_t(1) << 30;
    void *a, *b;
    CK(cudaMalloc(&a, bytes));
    CK(cudaMalloc(&b, bytes));
    fill_random(a, 64 << 20, 1, false);
    const double ms = time_graph([&](int) { CK(bench_copy16(a, b, bytes, g_stream)); }, 5);
    copy_gbs = 2.0 * bytes / (ms * 1e-3) / 1e9;
    CK(cudaFree(a));
    CK(cudaFree(b));
  }
  const int nv = w4a16_decode_num_variants();
  std::printf("== W4A16 decode GEMM, INT4 sym g128, %d SMs%s%s%s, whole tiles %d; copy ceiling %.0f GB/s (read+write, 1 GiB)\n",
              sms, green ? " (green context)" : "", pdl ? ", by programmatic dependent launch" : "",
              det ? ", deterministic mode" : "", whole, copy_gbs);
  for (int v = 0; v < nv; ++v) std::printf("   v%d: %s\n", v, w4a16_decode_variant_info(v).name);
  std::printf("   dflt: w4a16_gemm's dispatch; GB/s and %%copy of the best\n");
  std::printf("%-22s %3s %8s", "shape", "M", "dflt");
  for (int v = 0; v < nv; ++v) std::printf("  %6s%d", "v", v);
  std::printf(" %5s %8s %7s %7s %8s %3s\n", "best", "best us", "GB/s", "%copy", "copy-same", "wt");
  const size_t pool_bytes = size_t(512) << 20;  // copy of the same bytes, rotated the same way
  char* pool;
  CK(dmalloc(&pool, pool_bytes));
  CK(cudaMemset(pool, 1, pool_bytes));

  const int Ms[] = {1, 2, 4, 8, 16};
  const int kWideMs[] = {8, 12, 16, 17, 24, 32, 40, 48, 64};
  constexpr int kMaxM = 64;
  for (const Shape& s : kShapes) {
    if (only_shape && !std::strstr(s.name, only_shape)) continue;
    const int rows = s.gate_up ? 2 * s.n : s.n;
    const int group = 128, kp = (s.k + group - 1) / group * group;
    const size_t one = int4_repacked_bytes(rows, s.k, group, false);
    const size_t wbytes = size_t(rows) * kp / 2 + size_t(rows) * (kp / group) * 2;
    const int copies = int(std::max<size_t>(2, ((size_t(400) << 20) + one - 1) / one));
    // One random source weight, repacked, then copied `copies` times (rotated over in the graph).
    uint8_t* mem;
    CK(dmalloc(&mem, one * copies));
    uint8_t *q, *sc;
    const size_t qb = size_t(s.n) * kp / 2, ng = size_t(s.n) * (kp / group);
    CK(dmalloc(&q, qb));
    CK(dmalloc(&sc, ng * 2));
    fill_random(q, qb, 11, false);
    std::vector<uint16_t> hs(ng);
    for (size_t i = 0; i < ng; ++i) hs[i] = uint16_t(0x2000 + (i * 37) % 0x3FF);  // fp16 ≈ 0.008..0.016
    CK(cudaMemcpy(sc, hs.data(), ng * 2, cudaMemcpyHostToDevice));
    Int4Weight w0 = s.gate_up ? int4_repack(q, sc, nullptr, q, sc, nullptr, false, s.n, s.k, group, mem, g_stream)
                              : int4_repack(q, sc, nullptr, nullptr, nullptr, nullptr, false, s.n, s.k, group, mem,
                                            g_stream);
    CK(cudaStreamSynchronize(g_stream));
    std::vector<Int4Weight> ws(copies, w0);
    for (int c = 1; c < copies; ++c) {
      CK(cudaMemcpy(mem + c * one, mem, one, cudaMemcpyDeviceToDevice));
      const ptrdiff_t off = ptrdiff_t(c * one);
      ws[c].qweight = static_cast<const uint8_t*>(w0.qweight) + off;
      ws[c].scales = reinterpret_cast<const bf16*>(reinterpret_cast<const uint8_t*>(w0.scales) + off);
    }
    CK(cudaFree(q));
    CK(cudaFree(sc));
    bf16 *x, *y;
    CK(dmalloc(&x, size_t(kMaxM) * s.k * 2));
    CK(dmalloc(&y, size_t(kMaxM) * rows * 2));
    fill_random(x, size_t(kMaxM) * s.k * 2, 5, true);
    size_t wsb = w4a16_workspace_bytes(kDecodeMaxRows, w0, ko);
    for (int v = 0; v < nv; ++v) {
      DecodeTuning t;
      t.variant = v;
      t.deterministic = det;
      t.whole_tiles = whole;
      wsb = std::max(wsb, w4a16_decode_workspace_bytes(w0, t));
    }
    void* wsp;
    CK(cudaMalloc(&wsp, wsb));
    CK(cudaMemset(wsp, 0, wsb));
    GemmOut o;
    o.y = y;
    o.ldy = s.n;
    const Epilogue ep = s.gate_up ? Epilogue::GeluMul : Epilogue::Store;
    const int calls = std::max(copies, 20);
    // G4C_BENCH_NCU="v,m": three eager launches of variant v at m (for `ncu --launch-skip 2`), no timing.
    if (const char* ncu = std::getenv("G4C_BENCH_NCU")) {
      DecodeTuning t;
      int m = 1;
      if (std::sscanf(ncu, "%d,%d", &t.variant, &m) != 2) return 2;
      t.deterministic = det;
      t.whole_tiles = whole;
      for (int i = 0; i < 3; ++i) CK(w4a16_decode(x, m, s.k, ws[i % copies], ep, o, wsp, wsb, t, g_stream));
      CK(cudaStreamSynchronize(g_stream));
      std::printf("ncu mode: %s variant %d m %d launched 3 times\n", s.name, t.variant, m);
      return 0;
    }
    const size_t half = (wbytes / 2 + 15) & ~size_t(15);
    const int ncopy = int(pool_bytes / (2 * half));
    const double tcopy = time_graph([&](int i) {
      char* src = pool + size_t(i % ncopy) * 2 * half;
      CK(bench_copy16(src, src + half, half, g_stream));
    }, std::max(std::min(ncopy, 200), 20));
    for (int m : Ms) {
      const double bytes = double(wbytes) + 2.0 * m * s.k + 2.0 * m * s.n;
      const double td =
          time_graph([&](int i) { CK(w4a16_gemm(x, m, s.k, ws[i % copies], ep, o, wsp, wsb, g_stream, ko)); }, calls);
      std::vector<double> tv(nv);
      for (int v = 0; v < nv; ++v) {
        tv[v] = 1e30;
        if (!timed(v)) continue;
        DecodeTuning t;
        t.variant = v;
        t.pdl = pdl;
        t.deterministic = det;
        t.whole_tiles = whole;
        tv[v] = time_graph([&](int i) {
          CK(w4a16_decode(x, m, s.k, ws[i % copies], ep, o, wsp, wsb, t, g_stream));
        }, calls);
      }
      const int best = int(std::min_element(tv.begin(), tv.end()) - tv.begin());
      const double tb = tv[best] < 1e29 ? tv[best] : td;  // no variant timed: the dflt column
      const double gbs = bytes / (tb * 1e-3) / 1e9;
      std::printf("%-22s %3d %8.2f", s.name, m, td * 1e3);
      for (int v = 0; v < nv; ++v) std::printf("  %7.2f", tv[v] < 1e29 ? tv[v] * 1e3 : 0.0);
      DecodeTuning tr;  // the dispatched variant's summation order (wt 1: whole tiles, fixed order)
      tr.deterministic = det;
      tr.whole_tiles = whole;
      std::printf(" %5s%d %8.2f %7.0f %6.1f%% %8.2f %3d\n", "v", tv[best] < 1e29 ? best : -1, tb * 1e3, gbs,
                  100 * gbs / copy_gbs, tcopy * 1e3, int(w4a16_decode_whole_tiles(m, w0, sms, tr)));
      std::fflush(stdout);
    }
    // Batches of 8 to 64 rows: the default dispatch, the streaming decode kernels (one weight pass
    // up to kDecodeMaxRows rows, two passes above) and the wgmma kernel with narrow token tiles.
    for (int m : kWideMs) {
      const double td =
          time_graph([&](int i) { CK(w4a16_gemm(x, m, s.k, ws[i % copies], ep, o, wsp, wsb, g_stream, ko)); }, calls);
      DecodeTuning t;
      t.pdl = pdl;
      t.deterministic = det;
      const double tl = time_graph([&](int i) {
        for (int r = 0; r < m;) {
          const int mr = m <= kDecodeMaxRows ? m : r == 0 ? (m + 1) / 2 : m - r;
          GemmOut op = o;
          op.y = static_cast<bf16*>(o.y) + size_t(r) * s.n;
          t.variant = w4a16_decode_choice(mr, ws[i % copies], sms);
          CK(w4a16_decode(x + size_t(r) * s.k, mr, s.k, ws[i % copies], ep, op, wsp, wsb, t, g_stream));
          r += mr;
        }
      }, calls);
      const double tw = time_graph([&](int i) { CK(w4a16_gemm_wgmma(x, m, s.k, ws[i % copies], ep, o, g_stream)); }, calls);
      const double bytes = double(wbytes) + 2.0 * m * s.k + 2.0 * m * s.n;
      std::printf("%-22s %3d dflt %8.2f us, decode kernels %8.2f us, wgmma %8.2f us (%.0f GB/s, %.2fx decode)\n", s.name,
                  m, td * 1e3, tl * 1e3, tw * 1e3, bytes / (tw * 1e-3) / 1e9, tw / tl);
      std::fflush(stdout);
    }
    CK(cudaFree(x));
    CK(cudaFree(y));
    CK(cudaFree(wsp));
    CK(cudaFree(mem));
  }
  CK(cudaFree(pool));

  // LM head: both tables exceed L2 many times over, so each launch streams its table from DRAM.
  if (!only_shape || std::strstr("lm head", only_shape)) {
    constexpr int kVocab = 262144, kHidden = 3840;
    bf16 *tab16, *x;
    int8_t* codes;
    float *scales, *y;
    CK(dmalloc(&tab16, size_t(kVocab) * kHidden * 2));
    CK(dmalloc(&codes, size_t(kVocab) * kHidden));
    CK(dmalloc(&scales, size_t(kVocab) * 4));
    CK(dmalloc(&x, size_t(kMaxM) * kHidden * 2));
    CK(dmalloc(&y, size_t(kMaxM) * kVocab * 4));
    fill_random(tab16, size_t(kVocab) * kHidden * 2, 21, true);
    fill_random(codes, size_t(kVocab) * kHidden, 22, false);
    CK(cudaMemset(scales, 0x3c, size_t(kVocab) * 4));  // fp32 ≈ 0.0115
    fill_random(x, size_t(kMaxM) * kHidden * 2, 23, true);
    const Bf16Weight wb{tab16, kVocab, kHidden, kHidden, false};
    const Int8RowsWeight w8{codes, scales, kVocab, kHidden};
    GemmOut o;
    o.y = y;
    o.ldy = kVocab;
    o.softcap = 0.f;
    std::printf("== LM head %d -> %d, fp32 logits: BF16 table (bf16_gemm) vs per-row INT8 table (w8a16_gemm_f32)\n",
                kHidden, kVocab);
    for (int m : {1, 8, 16, 32, 64}) {
      const double tb = time_graph([&](int) { CK(bf16_gemm(x, m, kHidden, wb, Epilogue::SoftcapF32, o, g_stream)); }, 10);
      const double t8 = time_graph([&](int) { CK(w8a16_gemm_f32(x, m, kHidden, w8, y, kVocab, g_stream)); }, 10);
      const double io = 2.0 * m * kHidden + 4.0 * m * kVocab;  // x + fp32 logits
      const double bb = 2.0 * kVocab * kHidden + io, b8 = double(kVocab) * kHidden + 4.0 * kVocab + io;
      std::printf("lm head M=%2d  bf16 %8.1f us %6.0f GB/s   int8 %8.1f us %6.0f GB/s   (%.2fx)\n", m, tb * 1e3,
                  bb / (tb * 1e-3) / 1e9, t8 * 1e3, b8 / (t8 * 1e-3) / 1e9, tb / t8);
      std::fflush(stdout);
    }
    CK(cudaFree(tab16));
    CK(cudaFree(codes));
    CK(cudaFree(scales));
    CK(cudaFree(x));
    CK(cudaFree(y));
  }
  return 0;
}

// W4A16 decode GEMM, m ≤ 32: the variant table, split plan and launch of the streaming kernels
// (gemm_decode_lean.cu, which states the numerics; API and design in gemm_decode.cuh; weight
// layout in gemm.cuh).
#include "runtime/cuda/gemm_decode.cuh"

#include "runtime/cuda/common.cuh"
#include "runtime/cuda/gemm_decode_common.cuh"
#include "runtime/cuda/gemm_epilogue.cuh"

#include <algorithm>

namespace g4c::cuda {
using namespace detail;

namespace {

// ------------------------------------------------------------------ variants and plan
struct Variant {
  DecodeVariantInfo info;
  LeanKernels k;  // [token tiles][group / 64 − 1][asym], arrival order (k) and deterministic (kd)
};

// The variants w4a16_decode_choice picks (kDecodeLean16, kDecodeLean12).
const Variant& variant(int v) {
  static const Variant kV[] = {
      {{16, 1, 8, 96, 16, "LEAN: 16 warps, 1 blk/SM, 8 chunks in flight, x<=96K, m<=16"}, lean_kernels(0)},
      {{12, 1, 8, 96, 32, "LEAN: 12 warps, 1 blk/SM, 8 chunks in flight, x<=96K, m<=32"}, lean_kernels(1)},
  };
  return kV[v];
}
constexpr int kNumVariants = 2;

struct Plan {
  DecArgs a;
  int blocks;
  int smem;
  bool det;  // fixed-order sums (the deterministic kernels): asked for, or the whole_tiles rule
};

// Token tiles (n8) of an m-row launch: 1, 2 or 4; the kernel table's first index is mt / 2.
int token_tiles(int m) { return m > 16 ? 4 : m > 8 ? 2 : 1; }

// x rows + zero row | Σx [gps][tok] | tile sums (or det: warp slots).
int smem_for(const DecodeVariantInfo& vi, const DecArgs& a, bool det) {
  const int mt = token_tiles(a.mrows);
  const int br = std::max(1, a.br);
  const int sums = det ? vi.warps * 2 * 4 * mt * 32 * 4 : (a.tsm ? ((a.ntiles + br - 1) / br + 1) * 4 * mt * 32 * 4 : 0);
  return (a.mrows + 1) * a.xrow + a.gps * a.tok * 4 + sums;
}

Plan plan_for(int m, const Int4Weight& w, const DecodeVariantInfo& vi, int sms, int xcap_override, bool det) {
  Plan p;
  DecArgs& a = p.a;
  a.tsm = 0;
  a.cpg = w.group / 64;
  a.ngroups = w.kp / w.group;
  a.ntiles = (w.n + 15) / 16;
  a.mrows = std::min(m, 32);
  a.tok = std::max(16, 8 * token_tiles(m));  // Σx / slot stride: 16, or 32 with four token tiles
  p.det = det;
  const int smem_max = 227 * 1024 / vi.blocks_per_sm - 1024;
  const int xcap = xcap_override > 0 ? xcap_override : vi.xcap_kb * 1024;
  // Fewest splits whose slice fits (xcap and the shared memory).
  const int blocks = std::max(1, sms * vi.blocks_per_sm);
  for (int S = 1;; ++S) {
    a.gps = (a.ngroups + S - 1) / S;
    a.xrow = a.gps * w.group * 2 + 16;
    const int xb = (a.mrows + 1) * (a.xrow + a.gps * 4);
    a.S = (a.ngroups + a.gps - 1) / a.gps;
    // The kernel splits a split's units with 32-bit products: units · blocks per split < 2^31.
    a.br = int(std::max(1L, std::min<long>(blocks / a.S, ((1L << 31) - 1) / (long(a.ntiles) * a.gps))));
    if ((xb <= xcap && smem_for(vi, a, det) <= smem_max) || a.gps == 1) break;
  }
  if (!det) {  // block-local tile sums if they fit beside the slice
    a.tsm = 1;  // smem_for counts the tile sums when tsm is set
    a.tsm = smem_for(vi, a, det) <= smem_max;
  }
  p.blocks = a.S * a.br;
  p.smem = smem_for(vi, a, det);
  return p;
}

// The plan with the summation order DecodeTuning asks for (deterministic, whole_tiles): sums in
// fixed order when asked to, or by the whole_tiles rule (evaluated on the
// arrival-order plan: more than 32 SMs, at most 4 tiles per block of a split).
Plan make_plan(int m, const Int4Weight& w, const DecodeVariantInfo& vi, int sms, const DecodeTuning& t) {
  const Plan p = plan_for(m, w, vi, sms, t.xcap, t.deterministic);
  if (p.det || t.whole_tiles == 0) return p;
  if (t.whole_tiles == 1 || (sms > 32 && p.a.ntiles <= 4 * p.a.br)) return plan_for(m, w, vi, sms, t.xcap, true);
  return p;
}

}  // namespace

// The lean 16-warp variant everywhere except m > 8 on more than 32 SMs with weights under 10^8
// elements, where the 12-warp one is faster (H200, g4c_bench_decode, BENCHMARKS.md "W4A16
// decode GEMM"), and m > 16, which only the 12-warp variant runs.
int w4a16_decode_choice(int m, const Int4Weight& w, int sms) {
  if (m < 1 || m > kDecodeMaxRows) return -1;
  if (m > 16) return kDecodeLean12;
  return sms > 32 && m > 8 && double(w.n) * w.kp < 1e8 ? kDecodeLean12 : kDecodeLean16;
}

int w4a16_decode_num_variants() { return kNumVariants; }
DecodeVariantInfo w4a16_decode_variant_info(int v) { return variant(v).info; }

namespace {
// Workspace: tile counters [ntiles, even] (256-aligned), then fp32 slots of 16 × tok, all zero
// between launches: one per tile; the deterministic mode one per (split, tile).
size_t counters_bytes(const Int4Weight& w) { return ((w.n + 31) / 32 * 2 * 4 + 255) / 256 * 256; }
size_t workspace_need(const Int4Weight& w, const Plan& p) {
  const size_t ntiles = (w.n + 31) / 32 * 2;
  const size_t slots = p.det ? size_t(p.a.S) * ntiles : ntiles;
  return counters_bytes(w) + slots * 16 * p.a.tok * 4;
}
}  // namespace

size_t w4a16_decode_workspace_bytes(const Int4Weight& w, const DecodeTuning& tuning) {
  const int sms = tuning.sms > 0 ? tuning.sms : gemm_stream_sms(nullptr);
  size_t need = 0;
  for (int v = 0; v < kNumVariants; ++v) {
    if (tuning.variant >= 0 && v != tuning.variant) continue;
    for (int m = 1; m <= variant(v).info.max_m; ++m)
      need = std::max(need, workspace_need(w, make_plan(m, w, variant(v).info, sms, tuning)));
  }
  return need;
}
size_t w4a16_decode_workspace_bytes(const Int4Weight& w) { return w4a16_decode_workspace_bytes(w, DecodeTuning{}); }

bool w4a16_decode_whole_tiles(int m, const Int4Weight& w, int sms, const DecodeTuning& tuning) {
  const int v = tuning.variant >= 0 ? tuning.variant : w4a16_decode_choice(m, w, sms);
  if (m < 1 || v < 0 || v >= kNumVariants || m > variant(v).info.max_m) return false;
  return make_plan(m, w, variant(v).info, sms, tuning).det;
}

cudaError_t w4a16_decode(const bf16* x, int m, int ldx, const Int4Weight& w, Epilogue ep,
                         const GemmOut& out, void* workspace, size_t workspace_bytes,
                         const DecodeTuning& tuning, cudaStream_t stream) {
  if (m < 1 || m > kDecodeMaxRows) return cudaErrorInvalidValue;
  const int sms = tuning.sms > 0 ? tuning.sms : gemm_stream_sms(stream);
  const int vi = tuning.variant < 0 ? w4a16_decode_choice(m, w, sms) : tuning.variant;
  if (vi >= kNumVariants || m > variant(vi).info.max_m) return cudaErrorInvalidValue;
  const Variant& v = variant(vi);
  const Plan p = make_plan(m, w, v.info, sms, tuning);
  const bool det = p.det;
  if (!workspace || workspace_bytes < workspace_need(w, p)) return cudaErrorInvalidValue;
  if (w.group != 64 && w.group != 128) return cudaErrorInvalidValue;
  const int mi = token_tiles(m) / 2, gi = w.group / 64 - 1;
  const int ai = w.zeros != nullptr;
  const void* kern = det ? v.k.kd[mi][gi][ai] : v.k.k[mi][gi][ai];
  // Dynamic shared memory limit: raised once per kernel to the maximum (process-wide).
  static bool raised[kNumVariants][3][2][2][2] = {};
  bool& r = raised[vi][mi][gi][ai][det];
  if (!r) {
    const cudaError_t err = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                 227 * 1024 / v.info.blocks_per_sm - 1024);
    if (err != cudaSuccess) return err;
    r = true;
  }
  EpiArgs e{int(ep), out, w.n, m};
  int* counters = static_cast<int*>(workspace);
  float* ws = reinterpret_cast<float*>(static_cast<unsigned char*>(workspace) + counters_bytes(w));
  DecArgs a = p.a;
  if (tuning.no_block_sums && !det) a.tsm = 0;
  Int4Weight wv = w;
  void* args[] = {static_cast<void*>(&x), static_cast<void*>(&ldx), static_cast<void*>(&wv),
                  static_cast<void*>(&e), static_cast<void*>(&a), static_cast<void*>(&ws),
                  static_cast<void*>(&counters)};
  cudaLaunchAttribute at;
  const cudaLaunchConfig_t cfg =
      pdl_launch_config(dim3(p.blocks), dim3(v.info.warps * 32), size_t(p.smem), stream, tuning.pdl, &at);
  return cudaLaunchKernelExC(&cfg, kern, args);
}

}  // namespace g4c::cuda

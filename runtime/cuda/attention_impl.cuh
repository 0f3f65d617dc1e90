// Device-side pieces shared by the attention kernels (attention.cu: the flash kernel for d 64 / 128
// prefill; attention_decode.cu: the cooperative decode kernel; attention_sm90.cu: the wgmma prefill
// kernel): tile size, the shared-memory swizzle, the kernels' argument blocks and the KV slot of a
// key. Only included from .cu.
#pragma once

#include "runtime/cuda/attention.cuh"
#include "runtime/cuda/common.cuh"

namespace g4c::cuda {
namespace detail {

constexpr int kBK = 32;
constexpr float kLog2e = 1.4426950408889634f;

// Element offset of 16-byte chunk `chunk` of row `row` in a tile of W bf16 per row (W ≥ 64).
template <int W>
__device__ __forceinline__ int swz(int row, int chunk) {
  return row * W + ((chunk ^ (row & 7)) << 3);
}

// The wgmma canonical layout (attention_sm90.cu): a tile of ROWS rows stored as 64-column
// blocks (block b holds columns 64b … 64b + 63 of every row, rows 128 B apart, blocks ROWS·128 B
// apart), 128-byte swizzle (chunk c of row r at c ^ (r mod 8)); tile base 1024-byte aligned.
// The same bytes are K-major for Q and K (S = Q·Kᵀ) and N-major for V (O += P·V).
template <int ROWS>
__device__ __forceinline__ int cbs(int row, int chunk) {
  return (chunk >> 3) * (ROWS * 64) + row * 64 + (((chunk & 7) ^ (row & 7)) << 3);
}
// Element offset of chunk `chunk` of row `row` of a tile W wide and ROWS high in layout CB
// (false: swz<W>, true: cbs<ROWS>).
template <int W, int ROWS, bool CB>
__device__ __forceinline__ int tile_off(int row, int chunk) {
  if constexpr (CB) return cbs<ROWS>(row, chunk);
  else return swz<W>(row, chunk);
}

struct AttnArgs {
  const bf16* q;
  bf16* out;
  float* ws_o;   // [splits][total_q][hq][d]
  float2* ws_ml; // [splits][total_q][hq]
  KvCache kv;
  const int* q_start;
  const int* ctx_len;
  int total_q, hq, hkv, g, window, splits, dv_parts;
  float scale_log2;  // scale · log2(e)
};

__device__ __forceinline__ long kv_slot(const KvCache& kv, int r, int j) {
  if (kv.block_table)
    return long(kv.block_table[long(r) * kv.max_blocks + j / kv.block_size]) * kv.block_size +
           j % kv.block_size;
  return long(kv.ring_base[r]) + j % kv.ring_capacity;
}

// What block blockIdx of an attention launch with `rows` query rows per block works on: request
// r, kv head hk, output column part dvp, KV split; its queries (q0, qlen, ctx of the request;
// tokens qt0 … qt0 + ntq − 1 of the chunk) and its key tiles [t_lo, t_hi) (keys < kend).
// The caller returns when qt0 ≥ qlen. qblock: the block's query block (blockIdx.x by default);
// rh: request · hkv + kv head (blockIdx.y by default).
struct AttnBlock {
  int r, hk, dvp, split, q0, qlen, ctx, qt0, ntq, kend, t_lo, t_hi;
};
// z: the block's (column part, KV split) index (blockIdx.z by default).
template <int BK = kBK>
__device__ __forceinline__ AttnBlock attn_block(const AttnArgs& a, int rows, int qblock, int rh,
                                                int z = int(blockIdx.z)) {
  AttnBlock b;
  b.r = rh / a.hkv;
  b.hk = rh % a.hkv;
  b.dvp = z % a.dv_parts;
  b.split = z / a.dv_parts;
  b.q0 = a.q_start[b.r];
  b.qlen = a.q_start[b.r + 1] - b.q0;
  b.ctx = a.ctx_len[b.r];
  const int TQ = rows / a.g;
  b.qt0 = qblock * TQ;
  b.ntq = min(TQ, b.qlen - b.qt0);
  const int pmin = b.ctx + b.qt0, pmax = b.ctx + b.qt0 + b.ntq - 1;
  const int kbeg = a.window > 0 ? max(0, pmin - a.window + 1) : 0;
  b.kend = pmax + 1;
  const int tb = kbeg / BK, te = (b.kend + BK - 1) / BK;
  const int tps = (te - tb + a.splits - 1) / a.splits;
  b.t_lo = tb + b.split * tps;
  b.t_hi = min(te, b.t_lo + tps);
  return b;
}
template <int BK = kBK>
__device__ __forceinline__ AttnBlock attn_block(const AttnArgs& a, int rows) {
  return attn_block<BK>(a, rows, blockIdx.x, blockIdx.y);
}

// A block's query rows: the G q heads of one kv head are consecutive rows, so row ρ is token
// tok(ρ) (from the block's first) and head hk·G + head(ρ). G is a power of two (attention()
// checks 16 % G == 0): shifts, not an integer division by a runtime value per row.
struct QRows {
  int lg, G;
  __device__ __forceinline__ explicit QRows(int g) {
    lg = __ffs(g) - 1;  // (in the body: the host pass of nvcc compiles member initializers)
    G = g;
  }
  __device__ __forceinline__ int tok(int rho) const { return rho >> lg; }
  __device__ __forceinline__ int head(int rho) const { return rho & (G - 1); }
  // Index of row ρ in a [tokens][hq] array whose block starts at token tok0 (kv head hk).
  __device__ __forceinline__ long th(long tok0, int hq, int hk, int rho) const {
    return (tok0 + tok(rho)) * hq + hk * G + head(rho);
  }
  __device__ __forceinline__ long th(int tok0, int hq, int hk, int rho) const {  // (32-bit token sum)
    return long(tok0 + tok(rho)) * hq + hk * G + head(rho);
  }
};

// The block's Q tile (ROWS rows of D, NT threads) → swizzled shared memory (layout CB, see
// tile_off); rows past its ntq tokens zero.
template <int D, int ROWS, int NT, bool CB = false>
__device__ __forceinline__ void attn_load_q(bf16* qs, const AttnArgs& a, const AttnBlock& b, int tid) {
  const QRows rows(a.g);
  for (int i = tid; i < ROWS * (D / 8); i += NT) {
    const int row = i / (D / 8), ch = i % (D / 8);
    const int tq = rows.tok(row), head = b.hk * rows.G + rows.head(row);
    const bool ok = tq < b.ntq;
    const bf16* src = ok ? a.q + (long(b.q0 + b.qt0 + tq) * a.hq + head) * D + ch * 8 : a.q;
    cp_async16(qs + tile_off<D, ROWS, CB>(row, ch), src, ok ? 16 : 0);
  }
}

// Rows [0, BK) of a K or V tile (W bf16 per row) → swizzled shared memory `dst` by cp.async, NT
// threads: TPR threads per row, RPP rows per pass, the row's slot and base address once per row
// (not per chunk). sl[row]: the key's cache slot, −1 past the block's last query
// (zero fill from `dummy`, any valid address); base: the kv head's (and column part's) first
// element in slot 0; kv_row: elements per slot.
template <int W, int NT>
__device__ __forceinline__ void attn_load_rows(bf16* dst, const bf16* base, const long* sl, long kv_row,
                                               const bf16* dummy, int tid) {
  constexpr int CPR = W / 8;                    // chunks per row
  constexpr int TPR = CPR < NT ? CPR : NT;      // threads per row
  constexpr int RPP = NT / TPR;                 // rows per pass
  static_assert(kBK % RPP == 0 && CPR % TPR == 0, "whole rows per pass");
  const int rsub = tid / TPR, c0 = tid % TPR;
#pragma unroll 4
  for (int kr0 = 0; kr0 < kBK; kr0 += RPP) {
    const int kr = kr0 + rsub;
    const long slot = sl[kr];
    const bf16* src = slot >= 0 ? base + slot * kv_row : dummy;
    const int bytes = slot >= 0 ? 16 : 0;
#pragma unroll
    for (int c = 0; c < CPR / TPR; ++c) {
      const int ch = c0 + c * TPR;
      cp_async16(dst + swz<W>(kr, ch), slot >= 0 ? src + ch * 8 : dummy, bytes);
    }
  }
}

// Slots of tile `tile`'s kBK keys into sl[0, kBK) (threads < kBK; −1: key ≥ kend).
__device__ __forceinline__ void attn_calc_slots(long* sl, const KvCache& kv, int r, int tile, int kend, int tid) {
  if (tid < kBK) {
    const int j = tile * kBK + tid;
    sl[tid] = j < kend ? kv_slot(kv, r, j) : -1;
  }
}

// The FP8 form of attn_load_rows (KvCache::k8): the same rows and shared-memory layout, each
// 16-byte chunk converted from 8 codes and the row's scale (fp8x8_to_bf16). Synchronous: every
// load of the tile is issued before the first conversion, and the stores land before the barrier
// that publishes the stage. base: codes of the kv head (and column part) in slot 0; sbase: the
// kv head's scale in slot 0; hkv: scales per slot; kv_row: codes per slot. Rows past kend: zero.
template <int W, int NT>
__device__ __forceinline__ void attn_load_rows_f8(bf16* dst, const uint8_t* base, const float* sbase, const long* sl,
                                                  long kv_row, int hkv, int tid) {
  constexpr int CPR = W / 8, TPR = CPR < NT ? CPR : NT, RPP = NT / TPR, NP = kBK / RPP, NC = CPR / TPR;
  static_assert(kBK % RPP == 0 && CPR % TPR == 0, "whole rows per pass");
  const int rsub = tid / TPR, c0 = tid % TPR;
  uint2 c[NP][NC];
  float sc[NP];
#pragma unroll
  for (int p = 0; p < NP; ++p) {
    const long slot = sl[p * RPP + rsub];
    const uint8_t* src = base + (slot >= 0 ? slot : 0) * kv_row;
    sc[p] = slot >= 0 ? ld_cg_f32(sbase + (slot >= 0 ? slot : 0) * hkv) : 0.f;
#pragma unroll
    for (int u = 0; u < NC; ++u) c[p][u] = slot >= 0 ? ld_cg_u2(src + (c0 + u * TPR) * 8) : make_uint2(0, 0);
  }
#pragma unroll
  for (int p = 0; p < NP; ++p)
#pragma unroll
    for (int u = 0; u < NC; ++u)
      *reinterpret_cast<uint4*>(dst + swz<W>(p * RPP + rsub, c0 + u * TPR)) = fp8x8_to_bf16(c[p][u], sc[p]);
}

// One stage: the K tile (D wide) of kv head hk and the V tile's column part dvp (DV wide).
template <int D, int DV, int NT, bool F8>
__device__ __forceinline__ void attn_load_kv(bf16* ks, bf16* vs, const AttnArgs& a, int hk, int dvp, const long* sl,
                                             int tid) {
  const long kv_row = long(a.hkv) * D;
  if constexpr (F8) {
    attn_load_rows_f8<D, NT>(ks, a.kv.k8 + long(hk) * D, a.kv.k_scale + hk, sl, kv_row, a.hkv, tid);
    attn_load_rows_f8<DV, NT>(vs, a.kv.v8 + long(hk) * D + dvp * DV, a.kv.v_scale + hk, sl, kv_row, a.hkv, tid);
  } else {
    attn_load_rows<D, NT>(ks, a.kv.k + long(hk) * D, sl, kv_row, a.q, tid);
    attn_load_rows<DV, NT>(vs, a.kv.v + long(hk) * D + dvp * DV, sl, kv_row, a.q, tid);
  }
}

// Writes query row ρ of block b from the lane's N column pairs o(nd, 0..1) at columns col + 8·nd
// of rows dtot wide: normalized bf16 into out (one split), else the fp32 partial into the
// workspace and, where `ml` (one lane per row), the row's (m, l).
template <int N, class O>
__device__ __forceinline__ void attn_store_row(const AttnArgs& a, const AttnBlock& b, int rho, int dtot, int col,
                                               float m, float l, bool ml, O o) {
  const long tok = b.q0 + b.qt0 + rho / a.g;
  const int head = b.hk * a.g + rho % a.g;
  if (a.splits == 1) {
    const float inv = l > 0.f ? 1.f / l : 0.f;
    bf16* dst = a.out + (tok * a.hq + head) * dtot + col;
#pragma unroll
    for (int nd = 0; nd < N; ++nd)
      *reinterpret_cast<uint32_t*>(dst + nd * 8) = pack_bf162(o(nd, 0) * inv, o(nd, 1) * inv);
  } else {
    const long row = (long(b.split) * a.total_q + tok) * a.hq + head;
    float* dst = a.ws_o + row * dtot + col;
#pragma unroll
    for (int nd = 0; nd < N; ++nd) *reinterpret_cast<float2*>(dst + nd * 8) = make_float2(o(nd, 0), o(nd, 1));
    if (ml) a.ws_ml[row] = make_float2(m, l);
  }
}

// One split's partial state (m, l) = ml and its four output columns v (unnormalized, relative
// to m, base 2) folded into a running (m, L, acc): the split combine's arithmetic, shared by the
// combine kernel (attention.cu) and the decode kernel's in-cluster combine (attention_decode.cu)
// so the two give bitwise-equal outputs. The roundings are spelled out (acc·cs + v·w as one fma
// of a rounded product, exp2f), since nvcc would contract the expression otherwise.
__device__ __forceinline__ void combine_fold(float& m, float& L, float4& acc, float2 ml, float4 v) {
  const float mn = fmaxf(m, ml.x);
  const float base = mn == -INFINITY ? 0.f : mn;  // all empty so far: weights 0, not NaN
  const float cs = exp2f(m - base), w = exp2f(ml.x - base);
  acc.x = __fmaf_rn(acc.x, cs, __fmul_rn(v.x, w));
  acc.y = __fmaf_rn(acc.y, cs, __fmul_rn(v.y, w));
  acc.z = __fmaf_rn(acc.z, cs, __fmul_rn(v.z, w));
  acc.w = __fmaf_rn(acc.w, cs, __fmul_rn(v.w, w));
  L = __fmaf_rn(L, cs, __fmul_rn(ml.y, w));
  m = mn;
}
// The folded state's four bf16 outputs.
__device__ __forceinline__ uint2 combine_out(float L, float4 acc) {
  const float inv = L > 0.f ? 1.f / L : 0.f;
  uint2 pk;
  pk.x = pack_bf162(acc.x * inv, acc.y * inv);
  pk.y = pack_bf162(acc.z * inv, acc.w * inv);
  return pk;
}

}  // namespace detail

// The cooperative decode kernel (attention_decode.cu); same arguments as launch_attn; FP8 KV
// when a.kv.k8 is set (as for every launcher below).
// pdl: launched by programmatic dependent launch (KernelOptions::pdl). combine_c = a.splits (> 1):
// the row set's splits run as one thread-block cluster and merge in the kernel, which writes the
// output (no combine kernel; attn_decode_combine_cluster); 0: partial states to the workspace for
// the combine kernel.
cudaError_t launch_attn_decode_coop(const detail::AttnArgs& a, int d, int num_requests, bool pdl, int combine_c,
                                    cudaStream_t stream);
// The in-kernel combine's cluster size for `splits` splits over `rowsets` row sets (requests ×
// kv heads) on `stream`: splits, or 0 = the combine kernel.
int attn_decode_combine_cluster(int d, int splits, long rowsets, cudaStream_t stream);
// Clusters of `splits` blocks resident at once (0: cannot launch).
int attn_decode_cluster_capacity(int d, int splits, cudaStream_t stream);
// Its blocks resident per SM at head dim d (occupancy API; shared memory bounds it), ≥ 1.
int attn_decode_coop_blocks_per_sm(int d);
// The Hopper wgmma prefill kernel (attention_sm90.cu), d ∈ {256, 512}; split_keys: the
// key ranges of long query blocks split over 2-block clusters (d = 256, one KV split).
// cudaErrorInvalidValue for another d.
cudaError_t launch_attn_sm90(const detail::AttnArgs& a, int d, bool split_keys, int max_q_len, int num_requests,
                             cudaStream_t stream);

}  // namespace g4c::cuda

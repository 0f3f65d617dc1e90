// W4A16 decode GEMM, m ≤ 32: the lean register-direct kernels (variants listed in
// gemm_decode.cu; API in gemm_decode.cuh).
//
// Why: the math of a 512-byte chunk needs ~45 warp instructions at m ≤ 8 (1 load, 2 shared loads,
// 28 ALU nibble → bf16, 4 mma, a share of the group fix-up; each further 8 tokens add 2 shared
// loads and 4 mma: the weights are dequantized once for all tokens); everything that is not math
// is per group or per tile, so the kernel stays memory-bound:
//  - work is whole groups: a split's (tile, group) units, tile-major, one contiguous range per
//    block and, inside it, per warp; two cursors (the one loading D chunks ahead, the one
//    computing) step by pointer increments, no division after the prologue;
//  - the activation slice has one extra zero row and Σx is stored [group][16 or 32 tokens] with
//    zeros past m, so lanes of absent rows read zeros with no test;
//  - asymmetric zero points are a template parameter;
//  - tiles that lie inside one block are summed in shared memory (red.shared) and get their
//    epilogue after one barrier; only the ≤ 2 tiles a block shares with its neighbours (and every
//    tile when k is split) go through the fp32 workspace (red.global) and tile counters;
//  - deterministic mode (DET, DecodeTuning::deterministic): a split's sums are formed in a fixed
//    order, so the output does not depend on which warp or block finishes first. Block ranges
//    hold whole tiles (no tile shared by blocks of a split). A tile a warp holds whole gets its
//    epilogue (or, k split, its split's workspace slot) straight from registers; a warp's partial
//    first and last tiles go to its two shared-memory slots and, after the block's barrier, the
//    warp holding a shared tile's first unit adds the slots in warp order. With k split, the
//    contributor completing a tile's group count adds the splits' slots in split order, applies
//    the epilogue and zeroes them. The default (DecodeTuning::whole_tiles = -1) takes these
//    kernels on more than 32 SMs when a split's blocks get ≤ 4 tiles (faster there,
//    BENCHMARKS.md), the arrival-order ones elsewhere.
// Numerics: A = exact bf16 (128 + code), two mma chains (even / odd k16 steps) per group, T =
// chain0 + chain1, acc += s·(T − (128+z)·Σx) with the fp32 scale and the per-(token, group) Σx:
// exact (c − z). The sums of a tile split between warps are added in arrival order, or (DET) in
// the same order in every run (fp32, within the bound the tests state).
#include "runtime/cuda/common.cuh"
#include "runtime/cuda/gemm_decode_common.cuh"
#include "runtime/cuda/gemm_epilogue.cuh"

namespace g4c::cuda::detail {
namespace {

__device__ __forceinline__ void mma_zero_c(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  const float z = 0.f;
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%10,%10,%10,%10};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(z));
}
__device__ __forceinline__ void red_shared_add(uint32_t p, float v) {
  asm volatile("red.shared.add.f32 [%0], %1;\n" ::"r"(p), "f"(v) : "memory");
}
__device__ __forceinline__ uint4 lds128_at(uint32_t p) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(p));
  return v;
}
__device__ __forceinline__ float2 lds64f_at(uint32_t p) {
  float2 v;
  asm volatile("ld.shared.v2.f32 {%0,%1}, [%2];\n" : "=f"(v.x), "=f"(v.y) : "r"(p));
  return v;
}

// (a & 0x000F000F) | bias as one LOP3 (written as two C++ operations, the compiler emits two:
// a LOP3 takes one 32-bit immediate, and it does not move the second constant to a register).
__device__ __forceinline__ uint32_t nib_bf16(uint32_t a, uint32_t bias) {
  uint32_t d;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;\n" : "=r"(d) : "r"(a), "n"(0x000F000F), "r"(bias));
  return d;
}

// One 64-chunk: exact bf16 128+code times the activation fragments into two chains (even / odd
// k16 steps); FIRST: the chunk that starts a group (chains start from zero).
template <int MT, bool FIRST>
__device__ __forceinline__ void lean_chunk(const uint4& cw, const uint4 (&xb)[MT][2], float (&tg)[2][MT][4],
                                           uint32_t bias) {
#pragma unroll
  for (int ks = 0; ks < 4; ++ks) {
    const uint32_t word = ks == 0 ? cw.x : ks == 1 ? cw.y : ks == 2 ? cw.z : cw.w;
    uint32_t af[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) af[q] = nib_bf16(word >> (4 * q), bias);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      const uint32_t b0 = ks == 0 ? xb[mt][0].x : ks == 1 ? xb[mt][0].z : ks == 2 ? xb[mt][1].x : xb[mt][1].z;
      const uint32_t b1 = ks == 0 ? xb[mt][0].y : ks == 1 ? xb[mt][0].w : ks == 2 ? xb[mt][1].y : xb[mt][1].w;
      if (FIRST && ks < 2)
        mma_zero_c(tg[ks & 1][mt], af, b0, b1);
      else
        mma_bf16_nv(tg[ks & 1][mt], af, b0, b1);
    }
  }
}

// Activation slice k ∈ [k0, k0+klen) → shared memory, in the lane order of the mma B fragment:
// per row and 64-chunk, lane t's 16 values (k16 step ks, k = 16ks + 2t + {0,1,8,9}) are 32
// contiguous bytes [ks][b0,b1], so a lane reads its chunk with two 16-byte loads. Rows < mrows,
// row mrows zero; Σx [group][a.tok tokens] with zeros for tokens ≥ mrows; the block's tile sums
// zero. Loads in batches (independent loads in flight), no per-element index division (the
// prologue is a large share of a small GEMM's instructions).
template <int NT>
__device__ __forceinline__ void lean_fill(const bf16* __restrict__ x, int ldx, int kvalid, int k0, int klen,
                                          const DecArgs& a, int group, unsigned char* xs, float* xsum,
                                          float* tacc, int tacc_floats) {
  uint4* zr = reinterpret_cast<uint4*>(xs + a.mrows * a.xrow);
  for (int i = threadIdx.x; i < a.xrow / 16; i += NT) zr[i] = make_uint4(0, 0, 0, 0);
  for (int i = threadIdx.x; i < a.gps * a.tok; i += NT)
    if ((i & (a.tok - 1)) >= a.mrows) xsum[i] = 0.f;
  for (int i = threadIdx.x; i < tacc_floats; i += NT) tacc[i] = 0.f;
  // Items (row r, block of NT pieces), RB loads in flight per thread: a long k (down: 1920
  // pieces per row) or many rows take ⌈rows · blocks / RB⌉ L2 round trips, not one per item.
  constexpr int RB = 8;
  const int per_row = klen / 8;  // 16-byte pieces per row; a multiple of group / 8
  const int gt = group / 8;      // pieces per group: 8 or 16 consecutive threads
  const int ncb = (per_row + NT - 1) / NT;
  const int items = a.mrows * ncb;
  for (int i0 = 0; i0 < items; i0 += RB) {
    const int r0 = i0 / ncb, b0 = i0 - r0 * ncb;  // first item's (row, block); then stepped
    uint4 v[RB];
    {
      int r = r0, b = b0;
#pragma unroll
      for (int i = 0; i < RB; ++i) {
        v[i] = make_uint4(0, 0, 0, 0);
        const int c = b * NT + threadIdx.x;
        if (i0 + i < items && c < per_row && k0 + c * 8 < kvalid)
          v[i] = __ldg(reinterpret_cast<const uint4*>(x + long(r) * ldx + k0 + c * 8));
        if (++b == ncb) b = 0, ++r;
      }
    }
    int r = r0, b = b0;
#pragma unroll
    for (int i = 0; i < RB; ++i, (++b == ncb ? (b = 0, ++r) : 0)) {
      if (i0 + i >= items) break;  // uniform
      const int c = b * NT + threadIdx.x;
      const int kk = c * 8, cl = kk >> 6, ks = (kk >> 4) & 3, h = (kk >> 3) & 1;
      const uint32_t wv[4] = {v[i].x, v[i].y, v[i].z, v[i].w};
      float sum = 0.f;
#pragma unroll
      for (int t = 0; t < 4; ++t) {
        if (c < per_row) *reinterpret_cast<uint32_t*>(xs + r * a.xrow + cl * 128 + t * 32 + (ks * 2 + h) * 4) = wv[t];
        const float2 f = __bfloat1622float2(*reinterpret_cast<const bf162*>(&wv[t]));
        sum += f.x + f.y;
      }
      // A group's Σx: a butterfly over its gt consecutive lanes (offsets gt/2 … 1).
      if (gt == 16) sum += __shfl_xor_sync(0xffffffffu, sum, 8);
      sum += __shfl_xor_sync(0xffffffffu, sum, 4);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      if (c < per_row && (c & (gt - 1)) == 0) xsum[(group == 128 ? kk >> 7 : kk >> 6) * a.tok + r] = sum;
    }
  }
}

// Partial sums of a tile, per lane: rows g, g+8 × tokens j·8+2t, +1 (the mma C layout).
template <int MT>
struct TileSums {
  float v[MT][4];
};

// The epilogue of a complete tile, out of line (called from the unrolled main loop).
template <int MT>
__device__ __noinline__ void lean_finish(EpiArgs e, int tile, int lane, TileSums<MT> s) {
  decode_finish<MT>(e, tile, lane >> 2, lane & 3, s.v);
}

// Arrival-order mode: a tile's partial sums → the fp32 workspace (red.global; or straight to the
// epilogue when `done` covers all of k). Out of line.
template <int MT>
__device__ __noinline__ void lean_flush_red(DecArgs a, EpiArgs e, float* ws, int* counters, int tile, int done, int lane,
                                            TileSums<MT> s) {
  decode_flush_tile<MT>(a, e, ws, counters, tile, done, lane, s.v);
}

// Workspace slot of tile `tile`'s part in split `split`: fp32 [16 rows][a.tok tokens] (1 or 2
// KB), tokens < mrows used (deterministic mode: the one block of the split holding the tile writes it).
__device__ __forceinline__ float* lean_slot(const DecArgs& a, float* ws, int split, int tile) {
  return ws + (long(split) * ((a.ntiles + 1) & ~1) + tile) * 16 * a.tok;
}

// The lane's sums v of a tile → workspace slot `slot` (tokens < mrows).
template <int MT>
__device__ __forceinline__ void lean_store_slot(const DecArgs& a, float* slot, int lane, const float (&v)[MT][4]) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int j = 0; j < MT; ++j) {
    const int tok = j * 8 + 2 * t;
    if (tok < a.mrows) {
      __stcg(reinterpret_cast<float2*>(slot + g * a.tok + tok), make_float2(v[j][0], v[j][1]));
      __stcg(reinterpret_cast<float2*>(slot + (g + 8) * a.tok + tok), make_float2(v[j][2], v[j][3]));
    }
  }
}
// `done` more groups of tile `tile` are in the workspace (stores fenced by the caller); true for
// the contributor that completes the tile's group count.
__device__ __forceinline__ bool lean_count(const DecArgs& a, int* counters, int tile, int done, int lane) {
  __syncwarp();
  int last = 0;
  if (lane == 0) last = atomicAdd(&counters[tile], done) + done == a.ngroups;
  return __shfl_sync(0xffffffffu, last, 0) != 0;
}

// The complete tile: its k splits' slots in split order, loads of KB slots in flight together.
// Zeroes what it read, resets the counter, applies the epilogue. Out of line and reached only by
// the finishing contributor (its registers cost the main loop nothing).
template <int MT>
__device__ __noinline__ void lean_finish_tile(DecArgs a, EpiArgs e, float* ws, int* counters, int tile, int lane) {
  __threadfence();
  const int g = lane >> 2, t = lane & 3;
  TileSums<MT> v;
#pragma unroll
  for (int j = 0; j < MT; ++j) v.v[j][0] = v.v[j][1] = v.v[j][2] = v.v[j][3] = 0.f;
  // Branch-free: past the last split the loads read split 0's slot (valid, already taken) and
  // are discarded.
  constexpr int KB = 4;
  const long sstride = long((a.ntiles + 1) & ~1) * 16 * a.tok;
  float* const s00 = lean_slot(a, ws, 0, tile);
  for (int i0 = 0; i0 < a.S; i0 += KB) {
    float2* p[KB];
    bool ok[KB];
#pragma unroll
    for (int b = 0; b < KB; ++b) {
      ok[b] = i0 + b < a.S;
      p[b] = reinterpret_cast<float2*>(ok[b] ? s00 + (i0 + b) * sstride : s00);
    }
    float2 x[KB][MT][2];
#pragma unroll
    for (int b = 0; b < KB; ++b)
#pragma unroll
      for (int j = 0; j < MT; ++j) {
        x[b][j][0] = __ldcg(p[b] + (g * a.tok + j * 8 + 2 * t) / 2);
        x[b][j][1] = __ldcg(p[b] + ((g + 8) * a.tok + j * 8 + 2 * t) / 2);
      }
#pragma unroll
    for (int b = 0; b < KB; ++b)
#pragma unroll
      for (int j = 0; j < MT; ++j) {
        v.v[j][0] += ok[b] ? x[b][j][0].x : 0.f;
        v.v[j][1] += ok[b] ? x[b][j][0].y : 0.f;
        v.v[j][2] += ok[b] ? x[b][j][1].x : 0.f;
        v.v[j][3] += ok[b] ? x[b][j][1].y : 0.f;
      }
#pragma unroll
    for (int b = 0; b < KB; ++b)  // unused token columns hold zero anyway
#pragma unroll
      for (int j = 0; j < MT; ++j) {
        __stcg(p[b] + (g * a.tok + j * 8 + 2 * t) / 2, make_float2(0.f, 0.f));
        __stcg(p[b] + ((g + 8) * a.tok + j * 8 + 2 * t) / 2, make_float2(0.f, 0.f));
      }
  }
  if (lane == 0) counters[tile] = 0;
  lean_finish<MT>(e, tile, lane, v);
}

// A contribution of `done` groups (after the main loop), and the tile's epilogue if it completes
// the tile.
template <int MT>
__device__ __forceinline__ void lean_flush_global(const DecArgs& a, const EpiArgs& e, float* ws, int* counters,
                                                  int tile, int done, float* slot, int lane, const TileSums<MT>& s) {
  lean_store_slot<MT>(a, slot, lane, s.v);
  __threadfence();
  if (lean_count(a, counters, tile, done, lane)) lean_finish_tile<MT>(a, e, ws, counters, tile, lane);
}

// Where a block's warps are (deterministic mode): block range [ub0, ub1) of its split's units, on
// tile boundaries; warp w's range [ub0 + ⌊nb·w/NW⌋, ub0 + ⌊nb·(w+1)/NW⌋), nb = ub1 − ub0.
struct BlockPos {
  int ub0, ub1, split, gs;
};

// After the block's barrier, the partial sums of tile `tile` (inside the block, shared by warps)
// sit in the slots of its owner, the warp holding its first unit ts (slot 1; the largest w with
// ⌊nb·w/NW⌋ ≤ ts − ub0), and of the warps starting inside it (slot 0). Adds them in warp order,
// then applies the epilogue (k not split) or passes the split's part on through the workspace.
// Out of line.
template <int MT, int NW>
__device__ __noinline__ void lean_partial(DecArgs a, EpiArgs e, float* ws, int* counters, const float* wslot,
                                          BlockPos bp, int tile, int lane) {
  const int gs = bp.gs, ts = tile * gs;
  const unsigned nb = unsigned(bp.ub1 - bp.ub0);
  const int first = int((unsigned(ts - bp.ub0 + 1) * NW + nb - 1) / nb) - 1;
  auto wstart = [&](int wi) { return bp.ub0 + int(nb * unsigned(wi) / NW); };
  TileSums<MT> v;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) v.v[mt][0] = v.v[mt][1] = v.v[mt][2] = v.v[mt][3] = 0.f;
  {
    const float* p = wslot + (first * 2 + 1) * (4 * MT * 32) + lane;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int q = 0; q < 4; ++q) v.v[mt][q] += p[(mt * 4 + q) * 32];
  }
  // Slot 0 of the non-empty warps starting inside the tile, in warp order, 4 warps' loads at a time.
  for (int w0 = first + 1; w0 < NW && wstart(w0) < ts + gs; w0 += 4) {
    float x[4][MT * 4];
    bool ok[4];
#pragma unroll
    for (int b = 0; b < 4; ++b) {  // loads from a valid slot, discarded where not ok
      const int wi = w0 + b;
      ok[b] = wi < NW && wstart(wi) < ts + gs && wstart(wi) < wstart(wi + 1);
      const float* p = wslot + (min(wi, NW - 1) * 2) * (4 * MT * 32) + lane;
#pragma unroll
      for (int i = 0; i < MT * 4; ++i) x[b][i] = p[i * 32];
    }
#pragma unroll
    for (int b = 0; b < 4; ++b)
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int q = 0; q < 4; ++q) v.v[mt][q] += ok[b] ? x[b][mt * 4 + q] : 0.f;
  }
  if (a.S == 1) {
    lean_finish<MT>(e, tile, lane, v);
    return;
  }
  lean_flush_global<MT>(a, e, ws, counters, tile, gs, lean_slot(a, ws, bp.split, tile), lane, v);
}

// Loading cursor: unit (tile, group gl of the split) → its first chunk, scale pair and zeros.
struct Cursor {
  const uint4* q;
  const uint32_t* s;
  const uint16_t* z;
  int gl;
};

template <int MT, int NW, int BPS, int D, int CPG, bool ASYM, bool DET>
__global__ void __launch_bounds__(NW * 32, BPS)
    w4_lean_kernel(const bf16* __restrict__ x, int ldx, Int4Weight w, EpiArgs e, DecArgs a,
                   float* __restrict__ ws, int* __restrict__ counters) {
  static_assert(D % CPG == 0, "whole groups in flight");
  constexpr int UPI = D / CPG;  // units (groups) in flight per lane
  extern __shared__ __align__(128) unsigned char smem[];
  unsigned char* xs = smem;
  float* xsum = reinterpret_cast<float*>(xs + (a.mrows + 1) * a.xrow);
  // Arrival order: the block's tile sums [block tile][4·MT][32 lanes]. DET: per warp, the
  // partial sums of its first tile begun by an earlier warp (slot 0) and of its last tile
  // continued by a later one (slot 1) [warp][slot][4·MT][32 lanes].
  float* tacc = xsum + a.gps * a.tok;
  float* wslot = tacc;

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  const SplitPos sp = decode_split_pos(a);
  const int gs = sp.gs;
  // 32-bit unsigned arithmetic (the plan keeps U·br < 2^31): 64-bit divisions cost ~100
  // instructions each here.
  const unsigned U = unsigned(a.ntiles) * unsigned(gs), br = unsigned(a.br);
  // DET: block ranges on tile boundaries (whole tiles per block, ⌊ntiles·rb/br⌋ …), so no tile
  // is shared by blocks of a split (only by k splits); else ⌊U·rb/br⌋ … (stream-K).
  const int ub0 = DET ? int(unsigned(a.ntiles) * unsigned(sp.rb) / br) * gs : int(U * unsigned(sp.rb) / br);
  const int ub1 = DET ? int(unsigned(a.ntiles) * unsigned(sp.rb + 1) / br) * gs : int(U * unsigned(sp.rb + 1) / br);
  const unsigned nb = unsigned(ub1 - ub0);
  const int wa = ub0 + int(nb * unsigned(warp) / NW), wb = ub0 + int(nb * unsigned(warp + 1) / NW);
  const int tf0 = (ub0 + gs - 1) / gs, tf1 = !DET && a.tsm ? ub1 / gs : tf0;  // arrival order: tiles summed in the block
  const int ntf = max(0, tf1 - tf0);
  const int kc_n = w.kp / 64;
  const uint64_t pol = evict_first_policy();
  const long qjump = long(kc_n - gs * CPG) * 32;  // uint4 from past a split's last chunk to the next tile's
  const long sjump = long(a.ngroups - gs) * 8;

  Cursor L;
  {
    const int tile = wa / gs;
    L.gl = wa - tile * gs;
    const long gi = long(tile) * a.ngroups + sp.g0 + L.gl;
    L.q = static_cast<const uint4*>(w.qweight) + (long(tile) * kc_n + (sp.g0 + L.gl) * CPG) * 32 + lane;
    L.s = reinterpret_cast<const uint32_t*>(w.scales) + gi * 8 + g;
    L.z = ASYM ? reinterpret_cast<const uint16_t*>(w.zeros) + gi * 8 + g : nullptr;
  }
  auto advance = [&](Cursor& c) {
    c.q += CPG * 32;
    c.s += 8;
    if (ASYM) c.z += 8;
    if (++c.gl == gs) {
      c.gl = 0;
      c.q += qjump;
      c.s += sjump;
      if (ASYM) c.z += sjump;
    }
  };
  uint4 r[D];
  uint32_t sr[UPI], zr[UPI];
#pragma unroll
  for (int j = 0; j < UPI; ++j) {
    if (wa + j < wb) {
#pragma unroll
      for (int cc = 0; cc < CPG; ++cc) r[j * CPG + cc] = ldg_stream(L.q + cc * 32, pol);
      sr[j] = __ldg(L.s);
      zr[j] = ASYM ? uint32_t(__ldg(L.z)) : 0x0808u;
      advance(L);
    }
  }
  // Launched programmatically (DecodeTuning::pdl), this kernel may run before the kernel that
  // writes x has finished; only weights were read so far. Kernels after this one may start now:
  // they read nothing it writes before their own wait, which returns when this grid is done.
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  lean_fill<NW * 32>(x, ldx, w.k, sp.g0 * w.group, gs * w.group, a, w.group, xs, xsum, tacc, ntf * 4 * MT * 32);
  __syncthreads();

  // The lane's activation rows (absent rows → the zero row) and Σx entries.
  uint32_t xrp[MT];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    const int row = mt * 8 + g;
    xrp[mt] = smem_u32(xs) + (row < a.mrows ? row : a.mrows) * a.xrow + t * 32;
  }
  const uint32_t xsp = smem_u32(xsum) + 8 * t, tap = smem_u32(tacc) + 4 * lane;
  const int split = sp.split;
  const BlockPos bpos{ub0, ub1, split, gs};

  float acc[MT][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) acc[mt][0] = acc[mt][1] = acc[mt][2] = acc[mt][3] = 0.f;
  int tile = wa / gs, gl = wa - tile * gs, done = 0;
  // Tile end or range end. Arrival order: into the block's tile sums (red.shared) or the
  // workspace (red.global). DET: the tile began before this warp (slot 0), continues after it
  // (slot 1), or lies in it whole (epilogue, or the split's workspace slot when k is split).
  auto flush = [&]() {
    const int ts = tile * gs;
    if (!DET) {
      if (tile >= tf0 && tile < tf1) {
        const uint32_t p = tap + (tile - tf0) * (4 * MT * 32 * 4);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int q = 0; q < 4; ++q) red_shared_add(p + (mt * 4 + q) * 128, acc[mt][q]);
      } else {
        TileSums<MT> s2;
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int q = 0; q < 4; ++q) s2.v[mt][q] = acc[mt][q];
        lean_flush_red<MT>(a, e, ws, counters, tile, done, lane, s2);
      }
    } else if (ts < wa || ts + gs > wb) {
      // Shared with other warps: into slot 0 (the tile began before this warp) or 1 (it goes on
      // after it), combined after the block's barrier.
      float* p = wslot + (warp * 2 + (ts < wa ? 0 : 1)) * (4 * MT * 32) + lane;
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int q = 0; q < 4; ++q) p[(mt * 4 + q) * 32] = acc[mt][q];
    } else if (a.S == 1) {
      TileSums<MT> s2;
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int q = 0; q < 4; ++q) s2.v[mt][q] = acc[mt][q];
      lean_finish<MT>(e, tile, lane, s2);
    } else {  // the split's part of the tile; counted after the loop (no call in the loop)
      lean_store_slot<MT>(a, lean_slot(a, ws, split, tile), lane, acc);
    }
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) acc[mt][0] = acc[mt][1] = acc[mt][2] = acc[mt][3] = 0.f;
  };

  const uint32_t bias = 0x43004300u;  // bf16 128 in both halves
  // Unit j of the registers (group gl of tile `tile`); `refill`: then request unit + UPI into them.
  auto unit = [&](const int j, const bool refill) {
    float tg[2][MT][4];
#pragma unroll
    for (int cc = 0; cc < CPG; ++cc) {
      uint4 xb[MT][2];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        const uint32_t xp = xrp[mt] + (gl * CPG + cc) * 128;
        xb[mt][0] = lds128_at(xp);
        xb[mt][1] = lds128_at(xp + 16);
      }
      // Refill after the chunk is consumed: the load reuses its registers, no copy.
      if (cc == 0)
        lean_chunk<MT, true>(r[j * CPG + cc], xb, tg, bias);
      else
        lean_chunk<MT, false>(r[j * CPG + cc], xb, tg, bias);
      if (refill) r[j * CPG + cc] = ldg_stream(L.q + cc * 32, pol);
    }
    const uint32_t sw = sr[j], zw = zr[j];
    if (refill) {
      sr[j] = __ldg(L.s);
      if (ASYM) zr[j] = uint32_t(__ldg(L.z));
      advance(L);
    }
    float T[MT][4], xv[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      const float2 v = lds64f_at(xsp + (gl * a.tok + mt * 8) * 4);
      xv[mt][0] = v.x;
      xv[mt][1] = v.y;
#pragma unroll
      for (int q = 0; q < 4; ++q) T[mt][q] = tg[0][mt][q] + tg[1][mt][q];
    }
    decode_group_fix<MT>(acc, T, sw, zw, xv);
    ++done;
    if (++gl == gs) {
      flush();
      ++tile;
      gl = 0;
      done = 0;
    }
  };

  // Whole iterations that refill every unit (no bounds tests), then the last < 2·UPI units.
  int base = wa;
#pragma unroll 1
  for (; base + 2 * UPI <= wb; base += UPI) {
#pragma unroll
    for (int j = 0; j < UPI; ++j) unit(j, true);
  }
#pragma unroll 1
  for (; base < wb; base += UPI) {
#pragma unroll
    for (int j = 0; j < UPI; ++j)
      if (base + j < wb) unit(j, base + j + UPI < wb);
  }
  if (done > 0) flush();
  if (!DET) {
    __syncthreads();
    // Tiles inside the block: sums complete (S = 1: epilogue) or this split's share (workspace).
    for (int tt = warp; tt < ntf; tt += NW) {
      float v[MT][4];
      const float* p = tacc + tt * (4 * MT * 32) + lane;
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int q = 0; q < 4; ++q) v[mt][q] = p[(mt * 4 + q) * 32];
      decode_flush_tile<MT>(a, e, ws, counters, tf0 + tt, gs, lane, v);
    }
    return;
  }
  // k split: the whole tiles of this warp's range were stored in their split slots; count them.
  if (a.S > 1 && wa < wb) {
    __threadfence();
    for (int tw = (wa + gs - 1) / gs; (tw + 1) * gs <= wb; ++tw)
      if (lean_count(a, counters, tw, gs, lane)) lean_finish_tile<MT>(a, e, ws, counters, tw, lane);
  }
  __syncthreads();
  // The tile shared by warps whose first unit this warp holds (block ranges hold whole tiles).
  if (wa < wb) {
    const int tb = (wb - 1) / gs;
    if (tb * gs >= wa && (tb + 1) * gs > wb) lean_partial<MT, NW>(a, e, ws, counters, wslot, bpos, tb, lane);
  }
}

template <int MT, int NW, int BPS, int D, bool DET>
void fill_tiles(const void* (&k)[2][2]) {
  k[0][0] = reinterpret_cast<const void*>(&w4_lean_kernel<MT, NW, BPS, D, 1, false, DET>);
  k[0][1] = reinterpret_cast<const void*>(&w4_lean_kernel<MT, NW, BPS, D, 1, true, DET>);
  k[1][0] = reinterpret_cast<const void*>(&w4_lean_kernel<MT, NW, BPS, D, 2, false, DET>);
  k[1][1] = reinterpret_cast<const void*>(&w4_lean_kernel<MT, NW, BPS, D, 2, true, DET>);
}
// Kernels for up to 8 · TILES tokens (TILES = 2: m ≤ 16, 4: m ≤ 32).
template <int TILES, int NW, int BPS, int D>
void fill(LeanKernels& r) {
  fill_tiles<1, NW, BPS, D, false>(r.k[0]);
  fill_tiles<1, NW, BPS, D, true>(r.kd[0]);
  fill_tiles<2, NW, BPS, D, false>(r.k[1]);
  fill_tiles<2, NW, BPS, D, true>(r.kd[1]);
  if constexpr (TILES == 4) {
    fill_tiles<4, NW, BPS, D, false>(r.k[2]);
    fill_tiles<4, NW, BPS, D, true>(r.kd[2]);
  }
}

}  // namespace

// Kernels of lean variant `i` ([token tiles][group / 64 − 1][asym]; kd: deterministic mode);
// configurations as listed in the variant table of gemm_decode.cu. Four token tiles (m ≤ 32)
// need 12 warps or fewer: their ~150 registers per lane do not fit 16 warps on one SM.
LeanKernels lean_kernels(int i) {
  LeanKernels r{};
  switch (i) {
    case 0: fill<2, 16, 1, 8>(r); break;
    case 1: fill<4, 12, 1, 8>(r); break;
    default: break;
  }
  return r;
}

}  // namespace g4c::cuda::detail

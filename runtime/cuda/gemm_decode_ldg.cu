// W4A16 decode GEMM, m ≤ 16: register-direct streaming family (variants listed in
// gemm_decode.cu; API in gemm_decode.cuh). Same split plan (DecArgs), activation slice in shared
// memory and tile flush as the lean family; the weights do not go through shared memory.
//
// Why: ncu on the gate+up shape (M = 1, 132 SMs) showed the earlier kernels instruction-bound,
// not memory-bound: the first split-K decode kernel issued ~195 warp instructions per 512-byte chunk
// (issue slots 53% busy at 3.5 warps per scheduler, DRAM 30%). This kernel keeps the per-chunk
// work to what the math needs — one 16-byte load, 2 shared loads per 8 tokens, 28 ALU ops of
// nibble → bf16 and 4 mma — with everything else hoisted to once per item.
//
// Work: the split's (tile, k piece of CH chunks) items, tile-major, dealt as one contiguous range
// per warp, so a warp walks along k of a tile and keeps its sums in registers until the tile
// changes. Each item's CH 16-byte loads per lane (evict-first, no L1 allocation) and its scales
// are requested chunk by chunk while the item before is multiplied (see the kernel).
//
// Numerics as the other decode kernels: A = exact bf16 (128 + code), fp32 mma sums per group,
// acc += s·(T − (128 + z)·Σx) at the group end.
#include "runtime/cuda/common.cuh"
#include "runtime/cuda/gemm_decode_common.cuh"
#include "runtime/cuda/gemm_epilogue.cuh"

namespace g4c::cuda::detail {
namespace {

// One item's operands in registers: CH chunks of INT4 fragments, and per group (CH/CPG) the
// lane's two scales (rows g, g+8) and its two zero codes (16 bits per group, two groups a word).
template <int CH, int CPG>
struct ItemRegs {
  static constexpr int NG = CH / CPG;
  uint4 w[CH];
  uint32_t s[NG];
  uint32_t z[(NG + 1) / 2];
};

// One register buffer refilled as it is consumed: after chunk c of item i is multiplied, chunk c
// of item i+1 is requested into the same registers, so CH loads per lane stay in flight at the
// cost of one buffer (measured against two whole-item buffers: those spilled at
// 80–128 registers).
template <int MT, int NW, int BPS, int CH, int CPG>
__global__ void __launch_bounds__(NW * 32, BPS)
    w4_ldg_kernel(const bf16* __restrict__ x, int ldx, Int4Weight w, EpiArgs e, DecArgs a,
                  float* __restrict__ ws, int* __restrict__ counters) {
  static_assert(CH % CPG == 0, "items hold whole groups");
  using R = ItemRegs<CH, CPG>;
  extern __shared__ __align__(128) unsigned char smem[];
  unsigned char* xs = smem;
  float* xsum = reinterpret_cast<float*>(xs + a.mrows * a.xrow);

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  const SplitPos sp = decode_split_pos(a);
  const int rb = sp.rb, g0 = sp.g0, gs = sp.gs;
  const int cps = gs * CPG;                   // chunks in this split
  const int nsub = (cps + CH - 1) / CH;       // items per tile
  const long items = long(a.ntiles) * nsub;
  const int nw = a.br * NW, wi = rb * NW + warp;
  const int ia = int(items * wi / nw), ib = int(items * (wi + 1) / nw);
  const int kc_n = w.kp / 64;
  const uint4* qbase = static_cast<const uint4*>(w.qweight) + lane;
  const uint32_t* sbase = reinterpret_cast<const uint32_t*>(w.scales) + g;  // (tile·ngroups + gi)·8 + g
  const uint16_t* zbase = w.zeros ? reinterpret_cast<const uint16_t*>(w.zeros) + g : nullptr;
  const uint64_t pol = evict_first_policy();

  // Where item `it` lives: its chunk count, first chunk pointer and first (tile, group) index.
  struct Where {
    int tile, sub, nc;
    const uint4* q;
    long gi;
  };
  auto where = [&](int it) {
    Where o;
    o.tile = it / nsub;
    o.sub = it - o.tile * nsub;
    o.nc = min(CH, cps - o.sub * CH);
    const int c0 = g0 * CPG + o.sub * CH;
    o.q = qbase + (long(o.tile) * kc_n + c0) * 32;
    o.gi = long(o.tile) * a.ngroups + c0 / CPG;
    return o;
  };
  auto load_chunk = [&](R& r, const Where& o, int c) {
    if (c < o.nc) r.w[c] = ldg_stream(o.q + c * 32, pol);
  };
  auto load_group = [&](R& r, const Where& o, int j) {
    if (j * CPG < o.nc) {
      r.s[j] = __ldg(sbase + (o.gi + j) * 8);
      const uint32_t zj = zbase ? uint32_t(__ldg(zbase + (o.gi + j) * 8)) : 0x0808u;
      r.z[j / 2] = (j & 1) ? ((r.z[j / 2] & 0xFFFFu) | (zj << 16)) : ((r.z[j / 2] & 0xFFFF0000u) | zj);
    }
  };
  auto load = [&](R& r, const Where& o) {
#pragma unroll
    for (int c = 0; c < CH; ++c) load_chunk(r, o, c);
#pragma unroll
    for (int j = 0; j < CH / CPG; ++j) load_group(r, o, j);
  };

  float acc[MT][4];
  int cur = -1, done = 0;
  auto zero_acc = [&]() {
#pragma unroll
    for (int j = 0; j < MT; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
  };
  zero_acc();

  // Item `o` from registers r; when `refill`, each consumed chunk / group of r is re-requested
  // for item `nx` right after use.
  auto compute = [&](const Where& o, R& r, bool refill, const Where& nx) {
    if (o.tile != cur) {
      if (cur >= 0) decode_flush_tile<MT>(a, e, ws, counters, cur, done, lane, acc);
      zero_acc();
      cur = o.tile;
      done = 0;
    }
    const int cl0 = o.sub * CH;  // first chunk of the item within the split's slice
#pragma unroll
    for (int j = 0; j < CH / CPG; ++j) {
      if (j * CPG < o.nc) {
        float tg[2][MT][4];  // two accumulator chains (even / odd k16 steps)
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) tg[h][mt][0] = tg[h][mt][1] = tg[h][mt][2] = tg[h][mt][3] = 0.f;
#pragma unroll
        for (int cc = 0; cc < CPG; ++cc) {
          const int c = j * CPG + cc;
          uint4 xb[MT][2];
          decode_load_x<MT>(xs, a, cl0 + c, g, t, xb);
          const uint4 cw = r.w[c];
          if (refill) load_chunk(r, nx, c);
          decode_chunk_mma<MT>(cw, xb, tg);
        }
        // Group end: zero and scale in fp32.
        const uint32_t sw = r.s[j], zw = r.z[j / 2] >> ((j & 1) * 16);
        if (refill) load_group(r, nx, j);
        float xv[MT][2], T[MT][4];
        decode_load_xsum<MT>(xsum, a, cl0 / CPG + j, t, xv);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int q = 0; q < 4; ++q) T[mt][q] = tg[0][mt][q] + tg[1][mt][q];
        decode_group_fix<MT>(acc, T, sw, zw, xv);
        ++done;
      }
    }
    // Chunks / groups the next item has past this one's end (this was a tile's short last piece).
    if (refill) {
#pragma unroll
      for (int c = 0; c < CH; ++c)
        if (c >= o.nc) load_chunk(r, nx, c);
#pragma unroll
      for (int j = 0; j < CH / CPG; ++j)
        if (j * CPG >= o.nc) load_group(r, nx, j);
    }
  };

  R ra;
  Where wa = where(ia < ib ? ia : 0);
  if (ia < ib) load(ra, wa);
  // Launched programmatically (DecodeTuning::pdl), this kernel may be running before the kernel
  // that writes x has finished: only weights and scales were read so far. The wait returns at
  // once for a normal launch.
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  // Activation slice of this split (overlaps the first item's loads).
  load_x_slice<NW * 32>(x, ldx, w.k, g0 * w.group, gs * w.group, a.mrows, a.xrow, w.group, xs, xsum, a.gps);
  __syncthreads();

#pragma unroll 1
  for (int it = ia; it < ib; ++it) {
    const bool more = it + 1 < ib;
    const Where wn = where(more ? it + 1 : it);
    compute(wa, ra, more, wn);
    wa = wn;
  }
  if (cur >= 0) decode_flush_tile<MT>(a, e, ws, counters, cur, done, lane, acc);
}

}  // namespace

// Kernels of the register-direct variant ([m > 8][group / 64 − 1]): 16 warps, 1 block per SM,
// 8-chunk items (gemm_decode.cu's variant table).
LdgKernels ldg_kernels() {
  LdgKernels r{};
  r.k[0][0] = reinterpret_cast<const void*>(&w4_ldg_kernel<1, 16, 1, 8, 1>);
  r.k[0][1] = reinterpret_cast<const void*>(&w4_ldg_kernel<1, 16, 1, 8, 2>);
  r.k[1][0] = reinterpret_cast<const void*>(&w4_ldg_kernel<2, 16, 1, 8, 1>);
  r.k[1][1] = reinterpret_cast<const void*>(&w4_ldg_kernel<2, 16, 1, 8, 2>);
  return r;
}

}  // namespace g4c::cuda::detail

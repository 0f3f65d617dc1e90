// W4A16 decode GEMM, m ≤ 16: persistent weight-streaming kernel family (API and design in
// gemm_decode.cuh; weight layout in gemm.cuh).
//
// Numerics (same contract as the decode kernel in gemm.cu): the mma A fragment is the exact
// bf16 value 128 + code, the mma accumulates T = Σ(128+c)·x per group in fp32, and at the group
// end acc += s·(T − (128+z)·Σx) with the fp32 scale and the per-(token, group) Σx of the bf16
// activations: exact (c − z), fp32 scale, fp32 accumulation.
#include "runtime/cuda/gemm_decode.cuh"

#include "runtime/cuda/common.cuh"
#include "runtime/cuda/gemm_decode_common.cuh"
#include "runtime/cuda/gemm_epilogue.cuh"
#include "runtime/cuda/mbarrier.cuh"

#include <algorithm>

namespace g4c::cuda {
using namespace detail;

namespace {

// Shared memory per block: barriers [NW][NST] | rings [NW][NST][stage] | x [mrows][xrow] |
// Σx [mrows][gps] floats. A stage holds UPS units of TP tiles: INT4 [UPS][TP][cpg·512], scales
// [UPS][TP][32 B], zeros [UPS][TP][16 B].
template <int NW, int NST, int UPS, int TP>
struct DecSmem {
  static constexpr int kBars = (NW * NST * 8 + 127) / 128 * 128;
  __host__ __device__ static int stage(int cpg) { return UPS * TP * (cpg * 512 + 48); }
  __host__ __device__ static int ring(int cpg) { return NW * NST * stage(cpg); }
  __host__ __device__ static int bytes(const DecArgs& a) {
    return kBars + ring(a.cpg) + a.mrows * a.xrow + a.mrows * a.gps * 4;
  }
};

// MT: n8 token tiles (1: m ≤ 8, 2: m ≤ 16). TP: 16-row tiles per unit (2: each activation
// fragment read from smem serves two weight tiles). Units of a split: (tile group p, group gl),
// p-major, so a warp's range walks whole tiles along k.
// FAST (not yet measured, never dispatched): two independent accumulator chains per tile
// (even / odd k16 steps), mma and smem loads visible to the compiler's scheduler, no
// division per unit.
template <int MT, int NW, int NST, int UPS, int TP, int BPS, bool FAST>
__global__ void __launch_bounds__(NW * 32, BPS)
    w4_stream_kernel(const bf16* __restrict__ x, int ldx, Int4Weight w, EpiArgs e, DecArgs a,
                     float* __restrict__ ws, int* __restrict__ counters) {
  using L = DecSmem<NW, NST, UPS, TP>;
  static_assert(UPS * TP * 3 <= 32, "one copy per lane");
  extern __shared__ __align__(128) unsigned char smem[];
  uint64_t* bars = reinterpret_cast<uint64_t*>(smem);
  const int stage_bytes = L::stage(a.cpg);
  unsigned char* rings = smem + L::kBars;
  unsigned char* xs = rings + L::ring(a.cpg);
  float* xsum = reinterpret_cast<float*>(xs + a.mrows * a.xrow);

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  const SplitPos sp = decode_split_pos(a);
  const int rb = sp.rb, g0 = sp.g0, gs = sp.gs;
  const int ntp = (a.ntiles + TP - 1) / TP;   // tile groups
  const int units = ntp * gs;
  const int b_lo = int((long(units) * rb) / a.br), b_hi = int((long(units) * (rb + 1)) / a.br);
  const int ua = b_lo + int((long(b_hi - b_lo) * warp) / NW);
  const int ub = b_lo + int((long(b_hi - b_lo) * (warp + 1)) / NW);
  const int nst_total = (ub - ua + UPS - 1) / UPS;

  uint64_t* wbar = bars + warp * NST;
  unsigned char* wring = rings + warp * NST * stage_bytes;
  const int wbytes = a.cpg * 512;
  const int kc_n = w.kp / 64;
  const bool asym = w.zeros != nullptr;
  const uint64_t pol = evict_first_policy();
  const int sc_off = UPS * TP * wbytes, z_off = UPS * TP * (wbytes + 32);

  // Stage `st` (units ua + st·UPS …) → ring slot st % NST. Lane → (kind, unit i, tile tt):
  // kind 0 copies INT4, 1 scales, 2 zeros. Tiles past n are not copied (their smem is never
  // written out).
  auto issue = [&](int st) {
    const int u0 = ua + st * UPS;
    const int cnt = min(UPS, ub - u0);
    uint64_t* bar = wbar + (st % NST);
    unsigned char* dst = wring + (st % NST) * stage_bytes;
    const int last_p = (u0 + cnt - 1) / gs;  // tile groups past n hold fewer tiles
    const int real_last = min(TP, a.ntiles - last_p * TP);
    const int first_p = u0 / gs;
    int tiles = 0;  // tiles copied in this stage
    for (int p = first_p; p <= last_p; ++p) {
      const int lo = max(u0, p * gs), hi = min(u0 + cnt, (p + 1) * gs);
      tiles += (hi - lo) * (p == last_p ? real_last : min(TP, a.ntiles - p * TP));
    }
    if (lane == 0) mbar_expect_tx(bar, uint32_t(tiles * (wbytes + 32 + (asym ? 16 : 0))));
    __syncwarp();
    const int kind = lane / (UPS * TP), rem = lane - kind * (UPS * TP);
    const int i = rem / TP, tt = rem - i * TP;
    if (i < cnt && kind < (asym ? 3 : 2)) {
      const int u = u0 + i;
      const int p = u / gs, gi = g0 + (u - p * gs);
      const int tile = p * TP + tt;
      if (tile < a.ntiles) {
        const int slot = i * TP + tt;
        if (kind == 0)
          bulk_g2s(dst + slot * wbytes,
                   static_cast<const unsigned char*>(w.qweight) + (long(tile) * kc_n + gi * a.cpg) * 512,
                   uint32_t(wbytes), bar, pol);
        else if (kind == 1)
          bulk_g2s(dst + sc_off + slot * 32, w.scales + (long(tile) * a.ngroups + gi) * 16, 32u, bar, pol);
        else
          bulk_g2s(dst + z_off + slot * 16, w.zeros + (long(tile) * a.ngroups + gi) * 16, 16u, bar, pol);
      }
    }
  };

  if (lane == 0)
    for (int s = 0; s < NST; ++s) mbar_init(wbar + s, 1);
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  __syncwarp();
#pragma unroll 1
  for (int s = 0; s < NST && s < nst_total; ++s) issue(s);

  // Activation slice of this split (overlaps the weight copies in flight).
  const int k0 = g0 * w.group;
  load_x_slice<NW * 32>(x, ldx, w.k, k0, gs * w.group, a.mrows, a.xrow, w.group, xs, xsum, a.gps);
  __syncthreads();

  float acc[TP][MT][4], tmp[TP][MT][4];
  int cur = -1, done = 0;
  auto zero_acc = [&]() {
#pragma unroll
    for (int tt = 0; tt < TP; ++tt)
#pragma unroll
      for (int j = 0; j < MT; ++j)
#pragma unroll
        for (int q = 0; q < 4; ++q) acc[tt][j][q] = 0.f;
  };
  auto flush = [&]() {
    if (cur < 0) return;
#pragma unroll
    for (int tt = 0; tt < TP; ++tt) decode_flush_tile<MT>(a, e, ws, counters, cur * TP + tt, done, lane, acc[tt]);
  };

  zero_acc();
  if constexpr (FAST) {
    int p = nst_total > 0 ? ua / gs : 0, gl = nst_total > 0 ? ua - p * gs : 0;
#pragma unroll 1
    for (int st = 0; st < nst_total; ++st) {
      const int slot = st % NST;
      mbar_wait(wbar + slot, uint32_t((st / NST) & 1));
      const unsigned char* sw = wring + slot * stage_bytes;
      const int cnt = min(UPS, ub - (ua + st * UPS));
#pragma unroll 1
      for (int i = 0; i < cnt; ++i) {
        if (p != cur) {
          flush();
          zero_acc();
          cur = p;
          done = 0;
        }
        float t2[TP][2][MT][4];  // [tile][k16 step parity][token tile][fragment]
#pragma unroll
        for (int tt = 0; tt < TP; ++tt)
#pragma unroll
          for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int j = 0; j < MT; ++j) t2[tt][h][j][0] = t2[tt][h][j][1] = t2[tt][h][j][2] = t2[tt][h][j][3] = 0.f;
#pragma unroll 2
        for (int cc = 0; cc < a.cpg; ++cc) {
          const int cl = gl * a.cpg + cc;
          uint4 xb[MT][2];
          decode_load_x<MT>(xs, a, cl, g, t, xb);
          uint4 cw[TP];
#pragma unroll
          for (int tt = 0; tt < TP; ++tt)
            cw[tt] = reinterpret_cast<const uint4*>(sw + ((i * TP + tt) * a.cpg + cc) * 512)[lane];
#pragma unroll
          for (int tt = 0; tt < TP; ++tt) decode_chunk_mma<MT>(cw[tt], xb, t2[tt]);
        }
        float xv[MT][2];
        decode_load_xsum<MT>(xsum, a, gl, t, xv);
#pragma unroll
        for (int tt = 0; tt < TP; ++tt) {
          const int sl = i * TP + tt;
          const uint32_t cs = *reinterpret_cast<const uint32_t*>(sw + sc_off + sl * 32 + 4 * g);
          const uint32_t cz = asym ? *reinterpret_cast<const uint16_t*>(sw + z_off + sl * 16 + 2 * g) : 0x0808u;
          float T[MT][4];
#pragma unroll
          for (int j = 0; j < MT; ++j)
#pragma unroll
            for (int q = 0; q < 4; ++q) T[j][q] = t2[tt][0][j][q] + t2[tt][1][j][q];
          decode_group_fix<MT>(acc[tt], T, cs, cz, xv);
        }
        ++done;
        if (++gl == gs) {
          gl = 0;
          ++p;
        }
      }
      __syncwarp();
      if (st + NST < nst_total) issue(st + NST);
    }
  } else {
#pragma unroll 1
    for (int st = 0; st < nst_total; ++st) {
      const int slot = st % NST;
      mbar_wait(wbar + slot, uint32_t((st / NST) & 1));
      const unsigned char* sw = wring + slot * stage_bytes;
      const int u0 = ua + st * UPS;
      const int cnt = min(UPS, ub - u0);
#pragma unroll 1
      for (int i = 0; i < cnt; ++i) {
        const int u = u0 + i;
        const int p = u / gs, gl = u - p * gs;
        if (p != cur) {
          flush();
          zero_acc();
          cur = p;
          done = 0;
        }
#pragma unroll
        for (int tt = 0; tt < TP; ++tt)
#pragma unroll
          for (int j = 0; j < MT; ++j) tmp[tt][j][0] = tmp[tt][j][1] = tmp[tt][j][2] = tmp[tt][j][3] = 0.f;
#pragma unroll 2
        for (int cc = 0; cc < a.cpg; ++cc) {
          const int cl = gl * a.cpg + cc;  // 64-chunk in the split
          uint4 xb[MT][2];
#pragma unroll
          for (int j = 0; j < MT; ++j) {
            const int row = j * 8 + g;
            if (row < a.mrows) {
              const unsigned char* xp = xs + row * a.xrow + cl * 128 + t * 32;
              xb[j][0] = lds128(xp);
              xb[j][1] = lds128(xp + 16);
            } else {
              xb[j][0] = xb[j][1] = make_uint4(0, 0, 0, 0);
            }
          }
#pragma unroll
          for (int tt = 0; tt < TP; ++tt) {
            const uint4 cw = lds128(sw + ((i * TP + tt) * a.cpg + cc) * 512 + lane * 16);
            const uint32_t words[4] = {cw.x, cw.y, cw.z, cw.w};
#pragma unroll
            for (int ks = 0; ks < 4; ++ks) {
              uint32_t af[4];
#pragma unroll
              for (int q = 0; q < 4; ++q) af[q] = ((words[ks] >> (4 * q)) & 0x000F000Fu) | 0x43004300u;
#pragma unroll
              for (int j = 0; j < MT; ++j) {
                const uint32_t b0 = ks == 0 ? xb[j][0].x : ks == 1 ? xb[j][0].z : ks == 2 ? xb[j][1].x : xb[j][1].z;
                const uint32_t b1 = ks == 0 ? xb[j][0].y : ks == 1 ? xb[j][0].w : ks == 2 ? xb[j][1].y : xb[j][1].w;
                mma_bf16(tmp[tt][j], af, b0, b1);
              }
            }
          }
        }
        // Group end: zero and scale in fp32.
        float xv[MT][2];
        decode_load_xsum<MT>(xsum, a, gl, t, xv);
#pragma unroll
        for (int tt = 0; tt < TP; ++tt) {
          const int slot = i * TP + tt;
          const uint32_t cs = *reinterpret_cast<const uint32_t*>(sw + sc_off + slot * 32 + 4 * g);
          const uint32_t cz = asym ? *reinterpret_cast<const uint16_t*>(sw + z_off + slot * 16 + 2 * g) : 0x0808u;
          decode_group_fix<MT>(acc[tt], tmp[tt], cs, cz, xv);
        }
        ++done;
      }
      __syncwarp();
      if (st + NST < nst_total) issue(st + NST);
    }
  }
  flush();
}

// ------------------------------------------------------------------ variants and plan
struct Variant {
  DecodeVariantInfo info;
  const void* k[2][2][2];   // [m > 8][group / 64 − 1][asym]
  const void* kd[2][2][2];  // the same, deterministic mode (lean family; others: null)
};

template <int NW, int NST, int UPS, int TP, int BPS, bool FAST = false>
Variant make_variant(int xcap_kb, const char* name) {
  const void* k1 = reinterpret_cast<const void*>(&w4_stream_kernel<1, NW, NST, UPS, TP, BPS, FAST>);
  const void* k2 = reinterpret_cast<const void*>(&w4_stream_kernel<2, NW, NST, UPS, TP, BPS, FAST>);
  return Variant{DecodeVariantInfo{NW, BPS, NST, UPS, TP, xcap_kb, name}, {{{k1, k1}, {k1, k1}}, {{k2, k2}, {k2, k2}}}};
}
// Register-direct variant (gemm_decode_ldg.cu): stages = 0 (no ring), units_per_stage = chunks
// per item.
Variant ldg_variant(int i, int warps, int bps, int chunks, int xcap_kb, const char* name) {
  Variant v{DecodeVariantInfo{warps, bps, 0, chunks, 1, xcap_kb, name, 1}, {}};
  const LdgKernels k = ldg_kernels(i);
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 2; ++b) v.k[a][b][0] = v.k[a][b][1] = k.k[a][b];
  return v;
}
// Lean register-direct variant (gemm_decode_lean.cu): units_per_stage = chunks in flight per lane.
Variant lean_variant(int i, int warps, int bps, int chunks, int xcap_kb, const char* name) {
  Variant v{DecodeVariantInfo{warps, bps, 0, chunks, 1, xcap_kb, name, 2}, {}};
  const LeanKernels k = lean_kernels(i);
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 2; ++b)
      for (int c = 0; c < 2; ++c) v.k[a][b][c] = k.k[a][b][c], v.kd[a][b][c] = k.kd[a][b][c];
  return v;
}

// <warps, stages, units/stage, tiles/unit, blocks/SM>(activation budget KB). Ring bytes per
// warp at group 128: stages · units · tiles · 1072.
const Variant& variant(int v) {
  static const Variant kV[] = {
      make_variant<8, 4, 4, 1, 1>(80, "8 warps, 1 blk/SM, 4 stg x 4 units x 1 tile, x<=80K"),
      make_variant<8, 4, 2, 2, 1>(80, "8 warps, 1 blk/SM, 4 stg x 2 units x 2 tiles, x<=80K"),
      make_variant<4, 4, 2, 2, 2>(40, "4 warps, 2 blk/SM, 4 stg x 2 units x 2 tiles, x<=40K"),
      make_variant<8, 4, 4, 1, 1>(24, "8 warps, 1 blk/SM, 4 stg x 4 units x 1 tile, x<=24K"),
      make_variant<16, 4, 1, 2, 1>(64, "16 warps, 1 blk/SM, 4 stg x 1 unit x 2 tiles, x<=64K"),
      make_variant<8, 2, 2, 2, 2>(32, "8 warps, 2 blk/SM, 2 stg x 2 units x 2 tiles, x<=32K"),
      make_variant<8, 8, 2, 1, 1>(80, "8 warps, 1 blk/SM, 8 stg x 2 units x 1 tile, x<=80K"),
      // FAST inner loop (see the kernel).
      make_variant<8, 2, 2, 2, 2, true>(32, "FAST v5: 8 warps, 2 blk/SM, 2 stg x 2 units x 2 tiles, x<=32K"),
      make_variant<16, 4, 1, 2, 1, true>(64, "FAST v4: 16 warps, 1 blk/SM, 4 stg x 1 unit x 2 tiles, x<=64K"),
      make_variant<8, 4, 4, 1, 1, true>(24, "FAST v3: 8 warps, 1 blk/SM, 4 stg x 4 units x 1 tile, x<=24K"),
      // Register-direct (gemm_decode_ldg.cu); the configurations are fixed there by index.
      ldg_variant(0, 8, 2, 8, 64, "LDG: 8 warps, 2 blk/SM, 8-chunk items, rolling refill, x<=64K"),
      ldg_variant(1, 16, 1, 8, 96, "LDG: 16 warps, 1 blk/SM, 8-chunk items, rolling refill, x<=96K"),
      ldg_variant(2, 4, 4, 8, 40, "LDG: 4 warps, 4 blk/SM, 8-chunk items, rolling refill, x<=40K"),
      ldg_variant(3, 8, 1, 16, 96, "LDG: 8 warps, 1 blk/SM, 16-chunk items, rolling refill, x<=96K"),
      // Lean register-direct (gemm_decode_lean.cu); configurations fixed there by index.
      lean_variant(0, 16, 1, 8, 96, "LEAN: 16 warps, 1 blk/SM, 8 chunks in flight, x<=96K"),
      lean_variant(1, 8, 1, 16, 96, "LEAN: 8 warps, 1 blk/SM, 16 chunks in flight, x<=96K"),
      lean_variant(2, 8, 2, 8, 48, "LEAN: 8 warps, 2 blk/SM, 8 chunks in flight, x<=48K"),
      lean_variant(3, 12, 1, 8, 96, "LEAN: 12 warps, 1 blk/SM, 8 chunks in flight, x<=96K"),
      // 14 and 17 with the nibble shifts as IMAD.HI (FMA pipe) instead of SHF (ALU pipe).
      lean_variant(4, 16, 1, 8, 96, "LEAN-IMS: 16 warps, 1 blk/SM, 8 chunks in flight, shifts on FMA pipe, x<=96K"),
      lean_variant(5, 12, 1, 8, 96, "LEAN-IMS: 12 warps, 1 blk/SM, 8 chunks in flight, shifts on FMA pipe, x<=96K"),
  };
  return kV[v];
}
constexpr int kNumVariants = 20;

struct Plan {
  DecArgs a;
  int blocks;
  int smem;
  bool det;  // fixed-order sums (the lean family's deterministic kernels): asked for, or the whole_tiles rule
};

// det: the lean family's deterministic mode.
int smem_for(const DecodeVariantInfo& vi, const DecArgs& a, bool det) {
  if (vi.family == 2) {  // x rows + zero row | Σx [gps][16] | tile sums (or det: warp slots)
    const int mt = a.mrows > 8 ? 2 : 1;
    const int br = std::max(1, a.br);
    const int sums = det ? vi.warps * 2 * 4 * mt * 32 * 4 : (a.tsm ? ((a.ntiles + br - 1) / br + 1) * 4 * mt * 32 * 4 : 0);
    return (a.mrows + 1) * a.xrow + a.gps * 64 + sums;
  }
  const int bars = (vi.warps * vi.stages * 8 + 127) / 128 * 128;
  const int ring = vi.warps * vi.stages * vi.units_per_stage * vi.tiles_per_unit * (a.cpg * 512 + 48);
  return bars + ring + a.mrows * a.xrow + a.mrows * a.gps * 4;
}

Plan plan_for(int m, const Int4Weight& w, const DecodeVariantInfo& vi, int sms, int xcap_override, bool det) {
  Plan p;
  DecArgs& a = p.a;
  a.tsm = 0;
  a.cpg = w.group / 64;
  a.ngroups = w.kp / w.group;
  a.ntiles = (w.n + 15) / 16;
  a.mrows = std::min(m, 16);
  det = det && vi.family == 2;
  p.det = det;
  const int smem_max = 227 * 1024 / vi.blocks_per_sm - 1024;
  const int xcap = xcap_override > 0 ? xcap_override : vi.xcap_kb * 1024;
  // Fewest splits whose slice fits (xcap and the shared memory left beside the rings).
  const int blocks = std::max(1, sms * vi.blocks_per_sm);
  for (int S = 1;; ++S) {
    a.gps = (a.ngroups + S - 1) / S;
    a.xrow = a.gps * w.group * 2 + 16;
    const int xb = (a.mrows + (vi.family == 2)) * (a.xrow + a.gps * 4);
    a.S = (a.ngroups + a.gps - 1) / a.gps;
    a.br = std::max(1, blocks / a.S);
    if ((xb <= xcap && smem_for(vi, a, det) <= smem_max) || a.gps == 1) break;
  }
  if (vi.family == 2 && !det) {  // block-local tile sums if they fit beside the slice
    a.tsm = 1;  // smem_for counts the tile sums when tsm is set
    a.tsm = smem_for(vi, a, det) <= smem_max;
  }
  p.blocks = a.S * a.br;
  p.smem = smem_for(vi, a, det);
  return p;
}

// The plan with the summation order DecodeTuning asks for (deterministic, whole_tiles): the
// lean family sums in fixed order when asked to, or by the whole_tiles rule (evaluated on the
// arrival-order plan: more than 32 SMs, at most 4 tiles per block of a split).
Plan make_plan(int m, const Int4Weight& w, const DecodeVariantInfo& vi, int sms, const DecodeTuning& t) {
  const Plan p = plan_for(m, w, vi, sms, t.xcap, t.deterministic);
  if (vi.family != 2 || p.det || t.whole_tiles == 0) return p;
  if (t.whole_tiles == 1 || (sms > 32 && p.a.ntiles <= 4 * p.a.br)) return plan_for(m, w, vi, sms, t.xcap, true);
  return p;
}

}  // namespace

// Measured on the H200 (BENCHMARKS.md, g4c_gpu_decode_bench, 2026-12-02, third session), 12B
// shapes, M = 1, 2, 4, 8, 16, whole GPU (132 SMs) and a 16-SM green context, all 18 variants and
// the legacy kernel: the lean variant 14 (16 warps, 8 chunks in flight) is the fastest or within
// 3% everywhere except m > 8 on 132 SMs, where the 12-warp lean v17 is 2–5% faster on every shape
// but gate+up (v14 4–5% faster there; three runs agree). In the last run this rule's variant was
// the fastest of the 18 in 56 of 70 cases, within 3% in 12, 3.6% slower in one (q, m = 1). (The rule
// before, register-direct v11 / v9 / v10, is 1.1–2.0× slower.) Shapes whose unit count would
// overflow the lean kernels' 32-bit range split fall back to v11.
int w4a16_decode_choice(int m, const Int4Weight& w, int sms) {
  if (m < 1 || m > 16) return -1;
  const long units = long((w.n + 15) / 16) * std::max(1, w.kp / std::max(1, w.group));
  if (units * std::max(1, 2 * sms) >= (long(1) << 31)) return 11;
  return sms > 32 && m > 8 && double(w.n) * w.kp < 1e8 ? 17 : 14;
}

int w4a16_decode_num_variants() { return kNumVariants; }
DecodeVariantInfo w4a16_decode_variant_info(int v) { return variant(v).info; }

namespace {
// Workspace: tile counters [ntiles, even] (256-aligned), then fp32 slots of 16 × 16, all zero
// between launches: one per tile; the lean family's deterministic mode one per (split, tile).
size_t counters_bytes(const Int4Weight& w) { return ((w.n + 31) / 32 * 2 * 4 + 255) / 256 * 256; }
size_t workspace_need(const Int4Weight& w, const Plan& p) {
  const size_t ntiles = (w.n + 31) / 32 * 2;
  const size_t slots = p.det ? size_t(p.a.S) * ntiles : ntiles;
  return counters_bytes(w) + slots * 16 * 16 * 4;
}
}  // namespace

size_t w4a16_decode_workspace_bytes(const Int4Weight& w, const DecodeTuning& tuning) {
  const int sms = tuning.sms > 0 ? tuning.sms : gemm_stream_sms(nullptr);
  size_t need = 0;
  for (int v = 0; v < kNumVariants; ++v) {
    // Default: the variants w4a16_decode_choice picks, and 18 / 19, which gemm_set_decode_ims
    // puts in place of 14 / 17 (the legacy kernel sizes its own part).
    if (tuning.variant >= 0 ? v != tuning.variant : v != 11 && v != 14 && v != 17 && v != 18 && v != 19) continue;
    for (int m = 1; m <= 16; ++m)
      need = std::max(need, workspace_need(w, make_plan(m, w, variant(v).info, sms, tuning)));
  }
  return need;
}
size_t w4a16_decode_workspace_bytes(const Int4Weight& w) { return w4a16_decode_workspace_bytes(w, DecodeTuning{}); }

bool w4a16_decode_whole_tiles(int m, const Int4Weight& w, int sms, const DecodeTuning& tuning) {
  const int v = tuning.variant >= 0 ? tuning.variant : w4a16_decode_choice(m, w, sms);
  if (m < 1 || m > 16 || v < 0 || v >= kNumVariants) return false;
  return make_plan(m, w, variant(v).info, sms, tuning).det;
}

cudaError_t w4a16_decode(const bf16* x, int m, int ldx, const Int4Weight& w, Epilogue ep,
                         const GemmOut& out, void* workspace, size_t workspace_bytes,
                         const DecodeTuning& tuning, cudaStream_t stream) {
  if (m < 1 || m > 16) return cudaErrorInvalidValue;
  const int vi = tuning.variant < 0 ? 0 : tuning.variant;
  if (vi >= kNumVariants) return cudaErrorInvalidValue;
  const Variant& v = variant(vi);
  const int sms = tuning.sms > 0 ? tuning.sms : gemm_stream_sms(stream);
  const Plan p = make_plan(m, w, v.info, sms, tuning);
  const bool det = p.det;
  if (!workspace || workspace_bytes < workspace_need(w, p)) return cudaErrorInvalidValue;
  if (w.group != 64 && w.group != 128) return cudaErrorInvalidValue;
  const int mi = m <= 8 ? 0 : 1, gi = w.group / 64 - 1;
  const int ai = w.zeros != nullptr;
  const void* kern = det ? v.kd[mi][gi][ai] : v.k[mi][gi][ai];
  // Dynamic shared memory limit: raised once per kernel to the maximum (process-wide).
  static bool raised[kNumVariants][2][2][2][2] = {};
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
  // The lean kernels split a split's units with 32-bit products (units · blocks < 2^31).
  if (v.info.family == 2 && long(a.ntiles) * a.gps * std::max(a.br, 1) >= (long(1) << 31)) return cudaErrorInvalidValue;
  Int4Weight wv = w;
  void* args[] = {static_cast<void*>(&x), static_cast<void*>(&ldx), static_cast<void*>(&wv),
                  static_cast<void*>(&e), static_cast<void*>(&a), static_cast<void*>(&ws),
                  static_cast<void*>(&counters)};
  if (!(tuning.pdl && v.info.stages == 0))
    return cudaLaunchKernel(kern, dim3(p.blocks), dim3(v.info.warps * 32), args, size_t(p.smem), stream);
  cudaLaunchAttribute at;
  const cudaLaunchConfig_t cfg =
      pdl_launch_config(dim3(p.blocks), dim3(v.info.warps * 32), size_t(p.smem), stream, true, &at);
  return cudaLaunchKernelExC(&cfg, kern, args);
}

}  // namespace g4c::cuda

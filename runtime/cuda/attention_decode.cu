// Cooperative decode attention: the decode kernel for stored K (attention.cuh).
//
// Why: the flash kernel's decode blocks (one warp of 16 query rows) leave an SM with 2–3 warps
// and low occupancy. Here the same 16 rows and K/V stages are shared by 4 warps: all threads
// issue the tile's cp.async; warp w computes S for keys 8w…8w+7 over all of d, the row maxima
// are exchanged through shared memory (one barrier), P goes to shared memory as bf16 (one
// barrier), and warp w accumulates output columns [w·DV/4, (w+1)·DV/4) over all 32 keys.
// Same block mapping, split-KV workspace layout and softmax arithmetic (fp32, base 2, P rounded
// to bf16) as the flash kernel; the order of the fp32 row sums differs (per warp, then across).
#include "runtime/cuda/attention.cuh"
#include "runtime/cuda/attention_impl.cuh"
#include "runtime/cuda/cluster.cuh"
#include "runtime/cuda/common.cuh"
#include "runtime/cuda/gemm.cuh"  // gemm_stream_sms

namespace g4c::cuda {
using namespace detail;

namespace {

constexpr int kKG = kBK / 8;  // key groups of 8 per tile (one warp's S columns)
constexpr int kPS = 40;  // P row stride (bf16): 80-byte rows, 16-byte aligned, conflict-free ldmatrix

// Row offsets of tile `tile`'s kBK keys into off[0, kBK), threads < kBK, in 16-byte units
// (slot · hkv · D / 8: 32 bits cover a 64 GB cache). Keys ≥ kend (past the block's last query,
// masked for every row) take key kend − 1's row: any finite row gives P·V = 0 there, and every
// load is then a plain 16-byte copy (no zero-fill size operand).
template <int D>
__device__ __forceinline__ void coop_offsets(uint32_t* off, const AttnArgs& a, int r, int tile, int kend, int tid) {
  if (tid < kBK) off[tid] = uint32_t(kv_slot(a.kv, r, min(tile * kBK + tid, kend - 1)) * (long(a.hkv) * D / 8));
}

// The shared-memory byte offsets (from the K tile's base) of one thread's chunks: rows
// kr0 + rsub, chunk c0; the 128-byte swizzle term (c0 ^ (row & 7)) takes at most two values.
template <int D, int NT>
struct CoopLoader {
  static constexpr int CPR = D / 8;                // 16-byte chunks per row
  static constexpr int TPR = CPR < NT ? CPR : NT;  // threads per row
  static constexpr int RPP = NT / TPR;             // rows per pass
  static_assert(CPR == TPR && kBK % RPP == 0 && (RPP % 8 == 0 || RPP == 4), "one chunk per thread and row");
  int rsub;
  uint32_t so[2];  // row rsub (+ 4) with its swizzle, bytes
  uint32_t c16;    // the thread's chunk, in 16-byte units
  __device__ explicit CoopLoader(int tid) {
    rsub = tid / TPR;
    const int c0 = tid % TPR;
    c16 = uint32_t(c0);
    so[0] = uint32_t(rsub * D * 2 + ((c0 ^ (rsub & 7)) << 4));
    so[1] = uint32_t(rsub * D * 2 + ((c0 ^ ((rsub + 4) & 7)) << 4));
  }
  // One stage: K and V rows [0, kBK) from their kv head's element 0 (kb, vb) into the shared
  // tiles at ks (K) and ks + vdelta (V): per row one offset read, two address adds, two copies.
  __device__ __forceinline__ void load(uint32_t ks, uint32_t vdelta, const bf16* kb, const bf16* vb,
                                       const uint32_t* off) const {
    const uint4* k16 = reinterpret_cast<const uint4*>(kb) + c16;
    const uint4* v16 = reinterpret_cast<const uint4*>(vb) + c16;
#pragma unroll
    for (int kr0 = 0; kr0 < kBK; kr0 += RPP) {
      const uint32_t o = off[kr0 + rsub];
      const uint32_t sa = ks + so[RPP == 4 ? (kr0 >> 2) & 1 : 0] + uint32_t(kr0 * D * 2);
      cp_async16_s(sa, k16 + o);
      cp_async16_s(sa + vdelta, v16 + o);
    }
  }
  // The FP8 form (KvCache::k8): the same chunks, each from 8 codes (8-byte units: the same
  // offsets) and its row's scale (slot · hkv = o / (D/8), from the kv head's scale sk / sv in
  // slot 0), in two halves: fetch_f8 issues the loads of K and V into registers, store_f8
  // converts them and writes the stage, so a tile's loads are in flight while the tile before
  // it is computed.
  static constexpr int NP = kBK / RPP;  // rows per thread
  struct F8Regs {
    uint2 c[2][NP];  // [K, V][row pass]: 8 codes
    float f[2][NP];  // their rows' scales
  };
  __device__ __forceinline__ void fetch_f8(F8Regs& r, const uint8_t* kb, const uint8_t* vb, const float* sk,
                                           const float* sv, const uint32_t* off) const {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint2* c8 = reinterpret_cast<const uint2*>(h ? vb : kb) + c16;
      const float* sc = h ? sv : sk;
#pragma unroll
      for (int p = 0; p < NP; ++p) {
        const uint32_t o = off[p * RPP + rsub];
        r.c[h][p] = ld_cg_u2(c8 + o);
        r.f[h][p] = ld_cg_f32(sc + o / uint32_t(D / 8));
      }
    }
  }
  __device__ __forceinline__ void store_f8(const F8Regs& r, uint32_t ks, uint32_t vdelta) const {
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int p = 0; p < NP; ++p) {
        const int kr0 = p * RPP;
        const uint32_t sa = ks + so[RPP == 4 ? (kr0 >> 2) & 1 : 0] + uint32_t(kr0 * D * 2) + (h ? vdelta : 0u);
        st_shared_v4(sa, fp8x8_to_bf16(r.c[h][p], r.f[h][p]));
      }
  }
};

// NST K/V stages of kBK keys, NW warps; every block produces all D output columns.
template <int D, int NST, int NW>
struct CoopCfg {
  static constexpr int kQ = 16 * D * 2;
  static constexpr int kK = kBK * D * 2;
  static constexpr int kV = kBK * D * 2;
  static constexpr int kP = 16 * kPS * 2;
  static constexpr int kRed = 2 * NW * 16 * 4;  // per warp: 16 row maxima, 16 row sums
  static constexpr int kS = NW > kKG ? kKG * 32 * 16 : 0;  // second d halves' partial S
  static constexpr int kSmem = kQ + NST * (kK + kV) + kP + kRed + kS;
};
// d = 512 (the 12B's full layers): one block per row set covers all 512 output
// columns, so K is read once (two column halves each read K: 1.5× the counted bytes), in three
// stages (210 KB: one block per SM), with 8 warps: warp w computes S for key group w mod 4 over
// d half w div 4 (the second halves' partial S pass through shared memory, one barrier more) and
// O for columns 64w … 64w + 63.
template <int D>
struct CoopShape {
  static constexpr int NST = D == 512 ? 3 : 2;
  static constexpr int NW = D == 512 ? 8 : 4;
  using Cfg = CoopCfg<D, NST, NW>;
};

// CL: the a.splits blocks of a row set form a thread-block cluster (grid z = split = cluster
// rank) and merge their partial states through distributed shared memory (the end of the kernel).
// F8: the cache holds FP8 codes and scales (KvCache::k8).
template <int D, int NST, int NW, bool CL, bool F8>
__global__ void __launch_bounds__(NW * 32) attn_decode_coop_kernel(const AttnArgs a) {
  using C = CoopCfg<D, NST, NW>;
  constexpr int DV = D;  // output columns per block (a.dv_parts = 1)
  constexpr int kThreads = NW * 32;
  constexpr int NDW = DV / 8 / NW;  // n8 output tiles per warp
  constexpr int DS = NW / kKG;      // warps per key group (d split)
  constexpr int KD = D / 16 / DS;   // k16 steps of S per warp
  static_assert(NDW % 2 == 0 && D % 32 == 0 && NW % kKG == 0 && KD % 2 == 0, "shapes");
  // Q in registers: 4·KD of them (64 at d 256 / 512). At d 512 one block of 256 threads fills the
  // SM anyway (shared memory); at d 256 three blocks of 128 threads must still fit (≤ 170 each).
  constexpr bool QREG = D >= 256;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  bf16* qs = reinterpret_cast<bf16*>(smem_raw);
  bf16* ks0 = reinterpret_cast<bf16*>(smem_raw + C::kQ);
  bf16* vs0 = reinterpret_cast<bf16*>(smem_raw + C::kQ + NST * C::kK);
  bf16* ps = reinterpret_cast<bf16*>(smem_raw + C::kQ + NST * (C::kK + C::kV));
  float* redm = reinterpret_cast<float*>(smem_raw + C::kQ + NST * (C::kK + C::kV) + C::kP);
  float* redl = redm + NW * 16;
  float4* reds = reinterpret_cast<float4*>(redm + 2 * NW * 16);  // [key group][lane] (DS = 2)

  const AttnBlock blk = attn_block(a, 16);
  if (blk.qt0 >= blk.qlen) {  // still waits: the grid must not complete before the kernel ahead (PDL)
    pdl_wait();
    return;
  }
  const int r = blk.r, hk = blk.hk, dvp = blk.dvp;
  const int q0 = blk.q0, ctx = blk.ctx, qt0 = blk.qt0, ntq = blk.ntq, kend = blk.kend;
  const int t_lo = blk.t_lo, t_hi = blk.t_hi;
  const int G = a.g;
  const int tid = threadIdx.x;
  // Tile i (key tile t_lo + i): its row offsets in sslot[i % NST], its K/V in stage i % NST.
  __shared__ uint32_t sslot[NST][kBK];
  const int n = t_hi - t_lo;
  auto calc_slots = [&](int i) { coop_offsets<D>(sslot[i % NST], a, r, t_lo + i, kend, tid); };
  const bf16* kbase = a.kv.k + long(hk) * D;
  const bf16* vbase = a.kv.v + long(hk) * D;
  const CoopLoader<D, kThreads> loader(tid);
  const uint32_t ks_addr = smem_u32(ks0), v_delta = smem_u32(vs0) - ks_addr;
  // FP8: tile i's codes and scales → registers (f8_fetch), converted into stage i % NST (f8_store).
  using F8Regs = typename CoopLoader<D, kThreads>::F8Regs;
  auto f8_fetch = [&](F8Regs& rg, int i) {
    loader.fetch_f8(rg, a.kv.k8 + long(hk) * D, a.kv.v8 + long(hk) * D, a.kv.k_scale + hk, a.kv.v_scale + hk,
                    sslot[i % NST]);
  };
  auto f8_store = [&](const F8Regs& rg, int i) { loader.store_f8(rg, ks_addr + uint32_t((i % NST) * C::kK), v_delta); };
  // Tile i's K/V into stage i % NST: BF16 by cp.async; FP8 loaded and converted here (the prologue).
  auto load_kv = [&](int i) {
    if constexpr (F8) {
      F8Regs rg;
      f8_fetch(rg, i);
      f8_store(rg, i);
    } else {
      loader.load(ks_addr + uint32_t((i % NST) * C::kK), v_delta, kbase, vbase, sslot[i % NST]);
    }
  };

  const int warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, t = lane & 3, lq = lane >> 3;
  const int kq = warp % kKG, kd0 = (warp / kKG) * KD;  // S: key group, first k16 step
  const bool sw = warp < kKG;                          // owns its key group's softmax and P
  const bool valid0 = g / G < ntq, valid1 = (g + 8) / G < ntq;
  const int p0 = ctx + qt0 + g / G, p1 = ctx + qt0 + (g + 8) / G;

  float o[NDW][4];
#pragma unroll
  for (int i = 0; i < NDW; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
  uint32_t qf[QREG ? KD : 1][4];  // Q's A fragments for this warp's k16 steps (QREG)
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;  // l: this lane's keys only

#pragma unroll
  for (int i = 0; i < NST; ++i)
    if (i < n) calc_slots(i);
  __syncthreads();
  // Launched by PDL (KernelOptions::pdl), the kernel ahead of this one — the q/k norm + RoPE + KV
  // write — may still be running: it writes Q and the keys ≥ ctx (this chunk's own). The first
  // tiles whose keys are all < ctx are already in the cache (slots from the block table, also
  // written before the step), so their loads go out before the wait; Q and the rest after it.
  // (A ring slot the new key overwrites holds a key < kbeg, masked: P = 0, any finite bytes.)
  bool early[NST - 1];
#pragma unroll
  for (int i = 0; i < NST - 1; ++i) {
    early[i] = i < n && (t_lo + i + 1) * kBK <= ctx;
    if (early[i]) load_kv(i);
  }
  pdl_wait();
  attn_load_q<D, 16, kThreads>(qs, a, blk, tid);  // Q tile (zero rows past the chunk)
#pragma unroll
  for (int i = 0; i < NST - 1; ++i)
    if (i < n && !early[i]) load_kv(i);
  // One group for the prologue, then empty ones: tile i's wait below still completes every group
  // up to its own (tile 0 waits for all of the prologue's loads).
#pragma unroll
  for (int i = 0; i < NST - 1; ++i) cp_async_commit();
  for (int i = 0; i < n; ++i) {
    const int tile = t_lo + i, st = i % NST;
    // Tile i + NST − 1 into the stage tile i − 1 used (free after the barrier that ended its
    // iteration). FP8: its loads go out now and land in the stage after tile i's math (below).
    const bool ahead = i + NST - 1 < n;
    [[maybe_unused]] F8Regs pre;
    if (ahead) {
      if constexpr (F8) f8_fetch(pre, i + NST - 1);
      else load_kv(i + NST - 1);
    }
    cp_async_commit();
    cp_async_wait<NST - 1>();
    __syncthreads();
    if (i + NST < n) calc_slots(i + NST);  // sslot[i % NST]: tile i's loads were issued earlier
    const bf16* ks = ks0 + st * (kBK * D);
    const bf16* vs = vs0 + st * (kBK * DV);

    // S[16 rows][keys 8·kq …] over k16 steps [kd0, kd0 + KD) of d, two per K ldmatrix, into two
    // accumulators (half the dependent-mma chain). Q's A fragments: from registers (QREG, loaded
    // once at tile 0, after the prologue's loads have landed) or shared memory.
    if constexpr (QREG) {
      if (i == 0) {
#pragma unroll
        for (int kk = 0; kk < KD; ++kk)
          ldmatrix_x4(qf[kk], qs + swz<D>((lq & 1) * 8 + (lane & 7), (kd0 + kk) * 2 + (lq >> 1)));
      }
    }
    float s[4] = {0.f, 0.f, 0.f, 0.f}, s2[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int kk = 0; kk < KD; kk += 2) {
      const int kd = kd0 + kk;
      uint32_t b[4];
      ldmatrix_x4(b, ks + swz<D>(kq * 8 + (lane & 7), kd * 2 + lq));
      if constexpr (QREG) {
        mma_bf16(s, qf[kk], b[0], b[1]);
        mma_bf16(s2, qf[kk + 1], b[2], b[3]);
      } else {
        uint32_t qa[4];
        ldmatrix_x4(qa, qs + swz<D>((lq & 1) * 8 + (lane & 7), kd * 2 + (lq >> 1)));
        mma_bf16(s, qa, b[0], b[1]);
        ldmatrix_x4(qa, qs + swz<D>((lq & 1) * 8 + (lane & 7), (kd + 1) * 2 + (lq >> 1)));
        mma_bf16(s2, qa, b[2], b[3]);
      }
    }
#pragma unroll
    for (int e = 0; e < 4; ++e) s[e] += s2[e];
    if constexpr (DS > 1) {  // the second d half's partial S → its key group's first warp
      if (!sw) reds[kq * 32 + lane] = make_float4(s[0], s[1], s[2], s[3]);
      __syncthreads();
      if (sw) {
        const float4 h = reds[kq * 32 + lane];
        s[0] += h.x;
        s[1] += h.y;
        s[2] += h.z;
        s[3] += h.w;
      }
    }
    float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int j = tile * kBK + kq * 8 + 2 * t + (e & 1);
      const bool hi = e >> 1;
      const int p = hi ? p1 : p0;
      // Warps without a key group of their own see nothing (P = 0, their l stays 0).
      const bool vis = sw && (hi ? valid1 : valid0) && j <= p && (a.window == 0 || j > p - a.window);
      const float v = vis ? s[e] * a.scale_log2 : -INFINITY;
      s[e] = v;
      if (hi) mx1 = fmaxf(mx1, v); else mx0 = fmaxf(mx0, v);
    }
#pragma unroll
    for (int off = 1; off <= 2; off <<= 1) {
      mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, off));
      mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, off));
    }
    if (t == 0 && sw) {
      redm[kq * 16 + g] = mx0;
      redm[kq * 16 + g + 8] = mx1;
    }
    __syncthreads();
#pragma unroll
    for (int w = 0; w < kKG; ++w) {
      mx0 = fmaxf(mx0, redm[w * 16 + g]);
      mx1 = fmaxf(mx1, redm[w * 16 + g + 8]);
    }
    // Lazy rescale (as the sm90 prefill kernel): a row's reference maximum moves only when the
    // tile's maximum exceeds it by more than 8 (P ≤ 256 otherwise; O and the row sum share the
    // reference), and a warp none of whose rows moved skips the 32 multiplies of O.
    const float mn0 = mx0 > m0 + 8.f ? mx0 : m0, mn1 = mx1 > m1 + 8.f ? mx1 : m1;
    const float b0 = mn0 == -INFINITY ? 0.f : mn0, b1 = mn1 == -INFINITY ? 0.f : mn1;
    const float c0 = mn0 == m0 ? 1.f : fast_exp2(m0 - b0), c1 = mn1 == m1 ? 1.f : fast_exp2(m1 - b1);
    s[0] = fast_exp2(s[0] - b0);
    s[1] = fast_exp2(s[1] - b0);
    s[2] = fast_exp2(s[2] - b1);
    s[3] = fast_exp2(s[3] - b1);
    l0 = l0 * c0 + (s[0] + s[1]);
    l1 = l1 * c1 + (s[2] + s[3]);
    m0 = mn0;
    m1 = mn1;
    if (__any_sync(0xffffffffu, c0 != 1.f || c1 != 1.f)) {
#pragma unroll
      for (int i = 0; i < NDW; ++i) {
        o[i][0] *= c0; o[i][1] *= c0; o[i][2] *= c1; o[i][3] *= c1;
      }
    }
    if (sw) {
      *reinterpret_cast<uint32_t*>(ps + g * kPS + kq * 8 + 2 * t) = pack_bf162(s[0], s[1]);
      *reinterpret_cast<uint32_t*>(ps + (g + 8) * kPS + kq * 8 + 2 * t) = pack_bf162(s[2], s[3]);
    }
    __syncthreads();
    // O[:, this warp's columns] += P[16][32] · V[32][...]
#pragma unroll
    for (int kk = 0; kk < kBK / 16; ++kk) {
      uint32_t pa[4];
      ldmatrix_x4(pa, ps + ((lq & 1) * 8 + (lane & 7)) * kPS + kk * 16 + (lq >> 1) * 8);
#pragma unroll
      for (int nd = 0; nd < NDW; nd += 2) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, vs + swz<DV>(kk * 16 + (lq & 1) * 8 + (lane & 7), warp * NDW + nd + (lq >> 1)));
        mma_bf16(o[nd], pa, b[0], b[1]);
        mma_bf16(o[nd + 1], pa, b[2], b[3]);
      }
    }
    if constexpr (F8) {
      if (ahead) f8_store(pre, i + NST - 1);
    }
    __syncthreads();  // the stage, P and the row maxima are rewritten next tile
  }
  cp_async_wait<0>();
  pdl_trigger();  // the combine (or the next layer's GEMM) may launch; it waits for this grid
#pragma unroll
  for (int off = 1; off <= 2; off <<= 1) {
    l0 += __shfl_xor_sync(0xffffffffu, l0, off);
    l1 += __shfl_xor_sync(0xffffffffu, l1, off);
  }
  if (t == 0) {
    redl[warp * 16 + g] = l0;
    redl[warp * 16 + g + 8] = l1;
  }
  __syncthreads();
  l0 = l1 = 0.f;
#pragma unroll
  for (int w = 0; w < NW; ++w) {
    l0 += redl[w * 16 + g];
    l1 += redl[w * 16 + g + 8];
  }
  if constexpr (CL) {
    // Split combine inside the kernel: the a.splits blocks of a row set form one
    // thread-block cluster (grid z = split = cluster rank). Each block leaves its partial O (fp32,
    // relative to its m) and (m, l) per row in its own shared memory — the K/V stages, free now —
    // and after a cluster barrier block `rank` of S merges float4 units [rank·U/S, (rank+1)·U/S)
    // of the U valid rows' columns from all S blocks, in split order with the combine kernel's
    // fold (bitwise-equal outputs), and writes bf16: no workspace round trip, no combine launch.
    float* po = reinterpret_cast<float*>(ks0);  // [16][D]
    float2* pml = reinterpret_cast<float2*>(po + 16 * D);
    const int col = warp * NDW * 8 + 2 * t;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float* dst = po + (half ? g + 8 : g) * D + col;
#pragma unroll
      for (int nd = 0; nd < NDW; ++nd)
        *reinterpret_cast<float2*>(dst + nd * 8) = make_float2(o[nd][2 * half], o[nd][2 * half + 1]);
    }
    if (warp == 0 && t == 0) {
      pml[g] = make_float2(m0, l0);
      pml[g + 8] = make_float2(m1, l1);
    }
    cluster_arrive();
    cluster_wait();
    const int S = a.splits;
    constexpr int D4 = D / 4;
    const int U = min(16, ntq * G) * D4;
    const int rank = int(cluster_rank());
    const int u_hi = (rank + 1) * U / S;
    for (int u = rank * U / S + tid; u < u_hi; u += kThreads) {
      const int row = u / D4, c4 = u % D4;
      float4 v[8];
      float2 ml[8];
#pragma unroll
      for (int sp = 0; sp < 8; ++sp)
        if (sp < S) {
          ml[sp] = ld_cluster_f2(pml + row, uint32_t(sp));
          v[sp] = ld_cluster_f4(po + row * D + 4 * c4, uint32_t(sp));
        }
      float m = -INFINITY, L = 0.f;
      float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
      for (int sp = 0; sp < 8; ++sp)
        if (sp < S) combine_fold(m, L, acc, ml[sp], v[sp]);
      const long th = QRows(G).th(q0 + qt0, a.hq, hk, row);  // token · hq + head
      *reinterpret_cast<uint2*>(a.out + th * D + 4 * c4) = combine_out(L, acc);
    }
    cluster_arrive();  // no block leaves while another still reads its shared memory
    cluster_wait();
    return;
  }
  const int dtot = DV * a.dv_parts;
  const int col = dvp * DV + warp * NDW * 8 + 2 * t;
#pragma unroll
  for (int half = 0; half < 2; ++half)
    if (half ? valid1 : valid0)
      attn_store_row<NDW>(a, blk, half ? g + 8 : g, dtot, col, half ? m1 : m0, half ? l1 : l0,
                          dvp == 0 && warp == 0 && t == 0, [&](int nd, int e) { return o[nd][2 * half + e]; });
}

// The instantiation for D (and CL, F8) with its shared-memory attribute set (once; one device
// assumed). The occupancy queries below use the BF16 form; the FP8 form has the same shared
// memory and launch bounds.
template <int D, bool CL, bool F8 = false>
auto kernel_for(cudaError_t* err) {
  using S = CoopShape<D>;
  auto kern = attn_decode_coop_kernel<D, S::NST, S::NW, CL, F8>;
  static const cudaError_t attr =
      cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, S::Cfg::kSmem);
  *err = attr;
  return kern;
}

// Clusters of `splits` blocks resident at once on `stream` (occupancy API; 0 when they cannot
// launch). Cached per split count for the last SM count asked (a green context's stream has
// fewer SMs than the device). Not thread-safe, as the other launch settings.
template <int D>
int resident_clusters(int splits, cudaStream_t stream) {
  static int cached_sms[9] = {}, cached[9] = {};
  const int sms = gemm_stream_sms(stream);
  if (cached_sms[splits] != sms) {
    using S = CoopShape<D>;
    cudaError_t err;
    auto kern = kernel_for<D, true>(&err);
    int v = 0;
    cudaLaunchAttribute at;
    const cudaLaunchConfig_t cfg = cluster_launch_config(dim3(1, 1, splits), dim3(S::NW * 32), S::Cfg::kSmem,
                                                         stream, dim3(1, 1, splits), &at);
    if (err != cudaSuccess || cudaOccupancyMaxActiveClusters(&v, kern, &cfg) != cudaSuccess) {
      (void)cudaGetLastError();
      v = 0;
    }
    cached_sms[splits] = sms;
    cached[splits] = v;
  }
  return cached[splits];
}

template <int D>
cudaError_t launch(const AttnArgs& a, int num_requests, bool pdl, int combine_c, cudaStream_t stream) {
  using S = CoopShape<D>;
  if (a.dv_parts != 1) return cudaErrorInvalidValue;  // attention.cu column_parts: 1 for this kernel
  const dim3 grid(1, num_requests * a.hkv, a.dv_parts * a.splits);  // decode: ≤ 16/G queries per request
  cudaError_t err;
  cudaLaunchAttribute at[2];
  cudaLaunchConfig_t cfg = pdl_launch_config(grid, dim3(S::NW * 32), S::Cfg::kSmem, stream, pdl, at);
  if (combine_c > 1) {  // after the PDL attribute, if any
    at[cfg.numAttrs].id = cudaLaunchAttributeClusterDimension;
    at[cfg.numAttrs++].val.clusterDim = {1, 1, unsigned(combine_c)};
  }
  if (combine_c > 0 && combine_c != a.splits) return cudaErrorInvalidValue;
  auto go = [&](auto kern) { return err != cudaSuccess ? err : cudaLaunchKernelEx(&cfg, kern, a); };
  if (a.kv.k8) return combine_c > 0 ? go(kernel_for<D, true, true>(&err)) : go(kernel_for<D, false, true>(&err));
  return combine_c > 0 ? go(kernel_for<D, true>(&err)) : go(kernel_for<D, false>(&err));
}

template <int D>
int resident() {
  static const int n = [] {
    using S = CoopShape<D>;
    cudaError_t err;
    auto kern = kernel_for<D, false>(&err);
    int v = 0;
    if (err != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&v, kern, S::NW * 32, S::Cfg::kSmem) != cudaSuccess)
      v = 1;
    return v < 1 ? 1 : v;
  }();
  return n;
}

}  // namespace

cudaError_t launch_attn_decode_coop(const AttnArgs& a, int d, int num_requests, bool pdl, int combine_c,
                                    cudaStream_t stream) {
  switch (d) {
    case 64: return launch<64>(a, num_requests, pdl, combine_c, stream);
    case 128: return launch<128>(a, num_requests, pdl, combine_c, stream);
    case 256: return launch<256>(a, num_requests, pdl, combine_c, stream);
    case 512: return launch<512>(a, num_requests, pdl, combine_c, stream);
    default: return cudaErrorInvalidValue;
  }
}

// Splits (one cluster per row set) when 2 ≤ splits ≤ 8 (the portable cluster size) and all the
// clusters are resident at once (a second wave of clusters doubles the time), else 0. Whole
// device only: in a 16-SM green context the combine kernel measured faster end to end.
int attn_decode_combine_cluster(int d, int splits, long rowsets, cudaStream_t stream) {
  if (splits < 2 || splits > 8) return 0;
  if (gemm_stream_sms(stream) != gemm_stream_sms(nullptr)) return 0;  // a green context
  return attn_decode_cluster_capacity(d, splits, stream) >= rowsets ? splits : 0;
}

int attn_decode_cluster_capacity(int d, int splits, cudaStream_t stream) {
  if (splits < 1 || splits > 8) return 0;
  switch (d) {
    case 64: return resident_clusters<64>(splits, stream);
    case 128: return resident_clusters<128>(splits, stream);
    case 256: return resident_clusters<256>(splits, stream);
    case 512: return resident_clusters<512>(splits, stream);
    default: return 0;
  }
}

int attn_decode_coop_blocks_per_sm(int d) {
  switch (d) {
    case 64: return resident<64>();
    case 128: return resident<128>();
    case 256: return resident<256>();
    case 512: return resident<512>();
    default: return 1;
  }
}

}  // namespace g4c::cuda

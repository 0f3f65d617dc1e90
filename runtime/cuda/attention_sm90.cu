// Hopper (sm_90a) prefill attention on wgmma (API: attention.cuh; dispatch in attention.cu). The
// per-tile math lives in attention_sm90_tile.cuh.
//
// Block = 2 warpgroups (128 threads each) × 64 query rows each, sharing the block's K/V tiles; a
// row is one (token, q head) pair and the G heads of one kv head are consecutive rows, as in the
// flash kernel (attention.cu), whose block/tile bookkeeping (attn_block, slots) this kernel
// shares. Per key tile of BK keys:
//   S = Q·Kᵀ      wgmma m64nBKk16, A = Q and B = K both from shared memory (K-major),
//   online softmax in registers (fp32, base 2; the accumulator layout is mma.m16n8's per warp),
//   O += P·V      wgmma m64n256k16, A = P from registers (bf16), B = V from shared memory
//                 N-major (transposed by the descriptor: V stays one key per row).
// Q, K and V tiles use the wgmma canonical 128-byte-swizzle layout (cbs in attention_impl.cuh),
// so one set of bytes serves as K-major and N-major operand. K/V tiles stream through a 2-stage
// cp.async pipeline, and one tile's softmax overlaps the previous tile's P·V (FA3's
// intra-warpgroup overlap). Tiles every row of the block sees whole skip the per-element mask;
// a row's reference maximum only moves when a tile's maximum exceeds it by more than 2^8 (lazy
// rescale, same result up to rounding). d = 512 splits the output columns over two blocks.
// Grid: x = request · kv head, y = query blocks from the last one down, so the heaviest causal
// blocks launch first (shorter tail than launching by query block).
// Split key ranges (CL; attention.cu sm90_split_keys, underfilled launches only): every query
// block is a cluster of two blocks; a block with ≥ kClMin key tiles gives the second half of them
// to the other block, and block r merges warpgroup r's rows from both through distributed shared
// memory — O = O₀·2^(m₀−m) + O₁·2^(m₁−m), likewise the sums.
#include "runtime/cuda/attention.cuh"

#include "runtime/cuda/attention_impl.cuh"
#include "runtime/cuda/attention_sm90_tile.cuh"
#include "runtime/cuda/cluster.cuh"
#include "runtime/cuda/common.cuh"
#include "runtime/cuda/wgmma.cuh"

#include <type_traits>

namespace g4c::cuda {
using namespace detail;

namespace {

// NWG warpgroups per block, each its own 64 query rows against the block's shared K/V tiles.
template <int D, int DV, int BK, int NWG>
struct Sm90Cfg {
  static constexpr int kRows = 64 * NWG;
  static constexpr int kThreads = 128 * NWG;
  static constexpr int kQ = kRows * D * 2;
  static constexpr int kK = BK * D * 2;
  static constexpr int kV = BK * DV * 2;
  static constexpr int kSmem = kQ + 2 * (kK + kV) + 1024;  // + base alignment slack
  static_assert(kQ % 1024 == 0 && kK % 1024 == 0 && kV % 1024 == 0, "1024-aligned tiles");
};

// Row offsets (slot · hkv · d elements) of tile `tile`'s BK keys into off[0, BK), threads < BK.
// Keys ≥ kend (past the block's last query, masked for every row) read key kend − 1's row: any
// finite row gives P·V = 0 there, an unwritten (possibly NaN) slot would not; no zero fill.
template <int D, int BK>
__device__ __forceinline__ void sm90_offsets(long* off, const AttnArgs& a, int r, int tile, int kend, int tid) {
  if (tid < BK) off[tid] = kv_slot(a.kv, r, min(tile * BK + tid, kend - 1)) * (long(a.hkv) * D);
}

// K tile (D wide, K) or V tile (DV wide) rows [0, BK) → shared memory at `dst` (canonical
// layout): DV/8 threads per row (D/DV K chunks or one V chunk each), NT/(DV/8) rows per pass; one
// offset read per row, addresses with compile-time strides.
template <int D, int DV, int BK, int NT, bool K>
__device__ __forceinline__ void sm90_load_tile(uint32_t dst, const bf16* base, const long* off, int tid) {
  constexpr int TPR = DV / 8, RPP = NT / TPR, U = K ? D / DV : 1;
  static_assert(NT % TPR == 0 && BK % RPP == 0 && RPP <= 8 && 8 % RPP == 0, "rows per pass");
  const int rsub = tid / TPR, c = tid % TPR;
  base += c * 8;
#pragma unroll
  for (int kr0 = 0; kr0 < BK; kr0 += RPP) {
    const int kr = kr0 + rsub;
    const long o = off[kr];
#pragma unroll
    for (int u = 0; u < U; ++u) cp_async16_s(dst + 2 * cbs<BK>(kr, c + u * TPR), base + o + u * DV);
  }
}

// The FP8 form (KvCache::k8): the same rows and chunks, each converted from 8 codes (base: the
// kv head's codes in slot 0, + dvp · DV for V; the offsets count elements = code bytes) and the
// row's scale (sbase: the kv head's scale in slot 0; slot · hkv = off / D). Synchronous: all of
// the tile's loads are issued before the first conversion; the stores land before the barrier
// (and proxy fence) that publishes the stage.
template <int D, int DV, int BK, int NT, bool K>
__device__ __forceinline__ void sm90_load_tile_f8(uint32_t dst, const uint8_t* base, const float* sbase, const long* off,
                                                  int tid) {
  constexpr int TPR = DV / 8, RPP = NT / TPR, U = K ? D / DV : 1, NP = BK / RPP;
  static_assert(NT % TPR == 0 && BK % RPP == 0 && RPP <= 8 && 8 % RPP == 0, "rows per pass");
  const int rsub = tid / TPR, c = tid % TPR;
  base += c * 8;
  uint2 q[NP][U];
  float f[NP];
#pragma unroll
  for (int p = 0; p < NP; ++p) {
    const long o = off[p * RPP + rsub];
    f[p] = ld_cg_f32(sbase + o / D);
#pragma unroll
    for (int u = 0; u < U; ++u) q[p][u] = ld_cg_u2(base + o + u * DV);
  }
#pragma unroll
  for (int p = 0; p < NP; ++p)
#pragma unroll
    for (int u = 0; u < U; ++u) st_shared_v4(dst + 2 * cbs<BK>(p * RPP + rsub, c + u * TPR), fp8x8_to_bf16(q[p][u], f[p]));
}

constexpr int kClMin = 3;  // key tiles from which a CL block shares its range

// Tile i's S = Q·Kᵢᵀ and tile i−1's O += Pᵢ₋₁·Vᵢ₋₁ are issued together; the softmax of tile i
// runs while the tensor cores finish P·V, and O is rescaled only after that. K and V stream one
// tile apart (Kᵢ₊₁ and Vᵢ loaded in iteration i), so two stages of each suffice, with three
// row-offset buffers and one barrier per tile.
// F8: the cache holds FP8 codes and scales (KvCache::k8).
template <int D, int DV, int BK, int NWG, bool CL, bool F8>
__global__ void __launch_bounds__(128 * NWG) attn_sm90_kernel(const AttnArgs a) {
  using C = Sm90Cfg<D, DV, BK, NWG>;
  static_assert(!CL || DV / 8 * 128 * NWG * 16 <= 2 * (C::kK + C::kV), "CL: partial O fits K/V");
  constexpr int kRows = C::kRows, kThreads = C::kThreads;
  extern __shared__ unsigned char smem_raw[];
  unsigned char* base = reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  bf16* qs = reinterpret_cast<bf16*>(base);
  const uint32_t qaddr = smem_u32(qs), kaddr0 = qaddr + C::kQ, vaddr0 = kaddr0 + 2 * C::kK;
  __shared__ long soff[3][BK];

  const int crank = CL ? int(cluster_rank()) : 0;
  const AttnBlock blk =
      attn_block<BK>(a, kRows, int(gridDim.y - 1 - blockIdx.y), int(blockIdx.x), int(blockIdx.z) / (CL ? 2 : 1));
  if (blk.qt0 >= blk.qlen) return;
  const int r = blk.r, hk = blk.hk, dvp = blk.dvp;
  const int q0 = blk.q0, ctx = blk.ctx, qt0 = blk.qt0, ntq = blk.ntq, kend = blk.kend;
  const bool csplit = CL && blk.t_hi - blk.t_lo >= kClMin;  // both blocks of the cluster agree
  if (CL && !csplit && crank == 1) return;
  const int t_half = blk.t_lo + (blk.t_hi - blk.t_lo) / 2;
  const int t_lo = csplit && crank == 1 ? t_half : blk.t_lo, t_hi = csplit && crank == 0 ? t_half : blk.t_hi;
  const int n = t_hi - t_lo;
  const int G = a.g;
  const int tid = threadIdx.x;
  attn_load_q<D, kRows, kThreads, true>(qs, a, blk, tid);
  const bf16* kbase = a.kv.k + long(hk) * D;
  const bf16* vbase = a.kv.v + long(hk) * D + dvp * DV;
  // Tile index i is relative (tile t_lo + i); its offsets live in soff[i % 3].
  auto offs = [&](int i) { return soff[i % 3]; };
  auto calc_offsets = [&](int i) { sm90_offsets<D, BK>(offs(i), a, r, t_lo + i, kend, tid); };
  auto load_k = [&](int i) {
    if constexpr (F8)
      sm90_load_tile_f8<D, DV, BK, kThreads, true>(kaddr0 + (i & 1) * C::kK, a.kv.k8 + long(hk) * D,
                                                   a.kv.k_scale + hk, offs(i), tid);
    else
      sm90_load_tile<D, DV, BK, kThreads, true>(kaddr0 + (i & 1) * C::kK, kbase, offs(i), tid);
  };
  auto load_v = [&](int i) {
    if constexpr (F8)
      sm90_load_tile_f8<D, DV, BK, kThreads, false>(vaddr0 + (i & 1) * C::kV, a.kv.v8 + long(hk) * D + dvp * DV,
                                                    a.kv.v_scale + hk, offs(i), tid);
    else
      sm90_load_tile<D, DV, BK, kThreads, false>(vaddr0 + (i & 1) * C::kV, vbase, offs(i), tid);
  };

  const int warp = tid >> 5, lane = tid & 31, wg = warp >> 2;
  const int g = lane >> 2, t = lane & 3;
  const int rho0 = warp * 16 + g, rho1 = rho0 + 8;  // warpgroup wg: rows [64·wg, 64·wg + 64)
  const bool valid0 = rho0 / G < ntq, valid1 = rho1 / G < ntq;
  const int p0 = ctx + qt0 + rho0 / G, p1 = ctx + qt0 + rho1 / G;
  // Keys every valid row of the block sees: j ≤ pmin, and j > pmax − window.
  const int pmin = ctx + qt0, pmax = ctx + qt0 + ntq - 1;

  float o[DV / 2];
#pragma unroll
  for (int i = 0; i < DV / 2; ++i) o[i] = 0.f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;

  if (n > 0) calc_offsets(0);
  if (n > 1) calc_offsets(1);
  __syncthreads();
  if (n > 0) load_k(0);
  cp_async_commit();
  // Descriptors: Q once, K and V per stage; a k step adds a compile-time byte offset / 16 to the
  // start-address field (no carry: shared addresses < 256 KB).
  const uint64_t dq = sw128_desc(qaddr + wg * (64 * 128));  // the warpgroup's 64 rows of each column block
  const uint64_t dk[2] = {sw128_desc(kaddr0), sw128_desc(kaddr0 + C::kK)};
  const uint64_t dv[2] = {sw128_desc_mn(vaddr0, BK * 128), sw128_desc_mn(vaddr0 + C::kV, BK * 128)};

  float s[BK / 2];
  uint32_t pa[BK / 16][4];
  // The per-tile math (attention_sm90_tile.cuh), on this block's stages (tile i in stage i & 1).
  auto issue_s = [&](int i) { sm90_issue_s<D, BK, kRows>(s, dq, (i & 1) ? dk[1] : dk[0]); };
  auto issue_pv = [&](int i) { sm90_issue_pv<BK>(o, pa, (i & 1) ? dv[1] : dv[0]); };
  const Sm90RowMask rmask{p0, p1, pmin, pmax, a.window, t, valid0, valid1, a.scale_log2};
  auto softmax = [&](int i, float& c0, float& c1) {
    sm90_softmax<BK>(s, m0, m1, l0, l1, c0, c1, (t_lo + i) * BK, rmask);
  };
  auto rescale_pack = [&](float c0, float c1) { sm90_rescale_pack<DV, BK>(o, s, pa, c0, c1); };

  // Iteration i's loads: K(i + 1) and V(i).
  auto top = [&](int i) {
    cp_async_wait<0>();   // K(i) and V(i − 1), committed in the previous iteration
    fence_proxy_async();  // cp.async writes (generic proxy) → wgmma reads (async proxy)
    // Publishes them, and: every warpgroup finished S(i − 1) (K stage (i + 1) & 1) and
    // P·V(i − 2) (V stage i & 1), and read offsets (i − 1) % 3 for V(i − 1).
    __syncthreads();
    if (i + 2 < n) calc_offsets(i + 2);
    if (i + 1 < n) load_k(i + 1);
    load_v(i);
    cp_async_commit();
  };
  float c0, c1;
  if (n > 0) {  // tile 0 alone (no P·V in flight: ptxas must see no path reading O under one)
    top(0);
    issue_s(0);
    wgmma_wait0();
    fence_regs(s);
    softmax(0, c0, c1);
    rescale_pack(c0, c1);
  }
  for (int i = 1; i < n; ++i) {
    top(i);
    issue_s(i);
    issue_pv(i - 1);
    wgmma_wait1();  // S(i) done; P·V(i − 1) may still run
    fence_regs(s);
    softmax(i, c0, c1);
    wgmma_wait0();
    fence_regs(o);
    fence_regs(pa);
    rescale_pack(c0, c1);
  }
  if (n > 0) {
    cp_async_wait<0>();
    fence_proxy_async();
    __syncthreads();
    issue_pv(n - 1);
    wgmma_wait0();
    fence_regs(o);
  }
  cp_async_wait<0>();
#pragma unroll
  for (int off = 1; off <= 2; off <<= 1) {
    l0 += __shfl_xor_sync(0xffffffffu, l0, off);
    l1 += __shfl_xor_sync(0xffffffffu, l1, off);
  }
  if constexpr (CL) {
    if (csplit) {
      __syncthreads();  // every warpgroup is done with the Q and K/V tiles
      float4* part = reinterpret_cast<float4*>(base + C::kQ) + tid;  // [column block][thread]
      float4* ml = reinterpret_cast<float4*>(base) + tid;
#pragma unroll
      for (int j = 0; j < DV / 8; ++j) part[j * kThreads] = make_float4(o[4 * j], o[4 * j + 1], o[4 * j + 2], o[4 * j + 3]);
      *ml = make_float4(m0, m1, l0, l1);
      cluster_arrive();
      cluster_wait();
      if (wg == crank) {  // this block writes warpgroup `crank`'s rows, merged with the other block's
        const uint32_t peer = uint32_t(crank ^ 1);
        const float4 wt = sm90_merge_ml(m0, m1, l0, l1, ld_cluster_f4(ml, peer));
        const float a0 = wt.x, b0 = wt.y, a1 = wt.z, b1 = wt.w;
#pragma unroll
        for (int j = 0; j < DV / 8; ++j) {  // (o must stay in registers: fully unrolled)
          const float4 q = ld_cluster_f4(part + j * kThreads, peer);
          o[4 * j] = o[4 * j] * a0 + q.x * b0;
          o[4 * j + 1] = o[4 * j + 1] * a0 + q.y * b0;
          o[4 * j + 2] = o[4 * j + 2] * a1 + q.z * b1;
          o[4 * j + 3] = o[4 * j + 3] * a1 + q.w * b1;
        }
      }
      cluster_arrive();  // done reading the other block's partials (it waits before leaving)
    }
  }
  const int dtot = DV * a.dv_parts;
  const bool writes = !CL || !csplit || wg == crank;
  if (a.splits == 1 && !(CL && csplit) && (reinterpret_cast<uintptr_t>(a.out) & 15) == 0) {
    // Through shared memory (the Q/K/V tiles are dead): each warp stages its 16 rows (pitch DV·2
    // + 16 bytes: the 8 rows g of one store land in distinct banks), then stores each row as
    // 16-byte chunks, a row per instruction (4-byte stores stalled on the store queue).
    constexpr int kPitch = DV * 2 + 16;
    static_assert(NWG * 4 * 16 * kPitch <= C::kSmem - 1024, "staging fits");
    __syncthreads();  // every warp is done with the tiles (its last P·V has completed above)
    unsigned char* st = base + warp * 16 * kPitch;
    const float inv0 = l0 > 0.f ? 1.f / l0 : 0.f, inv1 = l1 > 0.f ? 1.f / l1 : 0.f;
#pragma unroll
    for (int nd = 0; nd < DV / 8; ++nd) {
      *reinterpret_cast<uint32_t*>(st + g * kPitch + (nd * 8 + 2 * t) * 2) = pack_bf162(o[4 * nd] * inv0, o[4 * nd + 1] * inv0);
      *reinterpret_cast<uint32_t*>(st + (g + 8) * kPitch + (nd * 8 + 2 * t) * 2) =
          pack_bf162(o[4 * nd + 2] * inv1, o[4 * nd + 3] * inv1);
    }
    __syncwarp();
    const QRows rows(G);
    for (int rr = 0; rr < 16; ++rr) {
      const int rho = warp * 16 + rr;
      if (rows.tok(rho) >= ntq) break;  // rows past the block's queries (warp-uniform)
      bf16* dst = a.out + rows.th(long(q0) + qt0, a.hq, hk, rho) * dtot + dvp * DV;
#pragma unroll
      for (int c = lane; c < DV / 8; c += 32)
        *reinterpret_cast<uint4*>(dst + c * 8) = *reinterpret_cast<const uint4*>(st + rr * kPitch + c * 16);
    }
    return;
  }
#pragma unroll
  for (int half = 0; half < 2; ++half)
    if ((half ? valid1 : valid0) && writes)
      attn_store_row<DV / 8>(a, blk, half ? rho1 : rho0, dtot, dvp * DV + 2 * t, half ? m1 : m0, half ? l1 : l0,
                             dvp == 0 && t == 0, [&](int nd, int e) { return o[4 * nd + 2 * half + e]; });
  if constexpr (CL) {
    if (csplit) cluster_wait();  // the other block has read this one's partials
  }
}

template <int D, int BK, int NWG, bool CL, bool F8>
cudaError_t launch(const AttnArgs& a, int max_q_len, int num_requests, cudaStream_t stream) {
  constexpr int DV = D > 256 ? 256 : D;
  using C = Sm90Cfg<D, DV, BK, NWG>;
  auto kern = attn_sm90_kernel<D, DV, BK, NWG, CL, F8>;
  static const cudaError_t attr =  // once per instantiation (one device assumed)
      cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmem);
  if (attr != cudaSuccess) return attr;
  const int tq = C::kRows / a.g;
  const int qblocks = (max_q_len + tq - 1) / tq;
  const dim3 grid(num_requests * a.hkv, qblocks, a.dv_parts * a.splits * (CL ? 2 : 1));
  if constexpr (CL) {  // clusters of the two blocks of a query block (consecutive z)
    cudaLaunchAttribute at;
    const cudaLaunchConfig_t cfg = cluster_launch_config(grid, dim3(C::kThreads), C::kSmem, stream, dim3(1, 1, 2), &at);
    return cudaLaunchKernelEx(&cfg, kern, a);
  }
  kern<<<grid, C::kThreads, C::kSmem, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace

// d = 256: 64-key tiles (≈ 193 KB of shared memory); d = 512: 32-key tiles (64 would not fit the
// registers). Both two warpgroups.
cudaError_t launch_attn_sm90(const AttnArgs& a, int d, bool split_keys, int max_q_len, int num_requests,
                             cudaStream_t stream) {
  auto go = [&](auto f8) {
    constexpr bool F8 = decltype(f8)::value;
    if (d == 256)
      return split_keys && a.splits == 1 ? launch<256, 64, 2, true, F8>(a, max_q_len, num_requests, stream)
                                         : launch<256, 64, 2, false, F8>(a, max_q_len, num_requests, stream);
    if (d == 512) return launch<512, 32, 2, false, F8>(a, max_q_len, num_requests, stream);
    return cudaErrorInvalidValue;
  };
  return a.kv.k8 ? go(std::true_type{}) : go(std::false_type{});
}

}  // namespace g4c::cuda

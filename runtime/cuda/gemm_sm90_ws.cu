// Warp-specialized Hopper (sm_90a) GEMM for m ≥ 64: Y^T[n][tok] = W[n][k] · X[tok][k]^T with
// wgmma.mma_async m64nBTk16 (bf16 operands, fp32 accumulators), both operands from shared memory.
//
// Block = 3 warpgroups (384 threads), persistent over output tiles of 128 weight rows × BT tokens
// (tile t → token tile t mod T, row tile t div T: consecutive blocks share weight rows and all
// blocks of a wave share X in L2). Stage ring of S slots, each: X tile [BT][64] bf16, A tile
// [128][64] bf16 (both 128-byte-swizzled K-major, 1024-byte aligned), and for INT4 the packed
// weight fragments of the 8 row tiles (4 KB) plus their group's scales and zeros.
//   warpgroup 0 (producer): cp.async of stage i+L (L = S−2) into its slot once the consumers
//     released it (mbarrier `empty`), then for stage i: wait for its own copies, dequantize the
//     INT4 fragments into the bf16 A tile (INT4 only), fence.proxy.async, arrive on `full`.
//   warpgroups 1, 2 (consumers, 64 weight rows each): wait `full`, 4 wgmmas, commit, wait until
//     one group is left in flight, release the previous slot (`empty`). After the last k step
//     of a tile: epilogue from registers (pairs of adjacent columns exchanged by one shuffle so
//     each store writes 2 bf16), while the producer already fills the next tile's stages.
// L = S−2 keeps the pipeline deadlock-free: a slot is released one wgmma group late, so the
// producer may run at most S−1 stages ahead of the consumers' oldest unreleased slot.
#include "runtime/cuda/common.cuh"
#include "runtime/cuda/gemm_epilogue.cuh"
#include "runtime/cuda/mbarrier.cuh"
#include "runtime/cuda/wgmma.cuh"

#include <algorithm>

namespace g4c::cuda {
namespace detail {
namespace {

// Named barrier 1 over the producer warpgroup only (threads 0..127).
__device__ __forceinline__ void producer_bar() { asm volatile("bar.sync 1, 128;\n" ::: "memory"); }

constexpr int kWsThreads = 384;
constexpr int kWsRows = 128;

template <bool INT4, int BT, int S>
struct WsCfg {
  static constexpr int kX = BT * 128;                 // [BT][64] bf16
  static constexpr int kA = kWsRows * 128;            // [128][64] bf16
  static constexpr int kP = INT4 ? kWsRows * 32 : 0;  // 8 row tiles × 32 lanes × 16 B
  static constexpr int kSZ = INT4 ? 1024 : 0;         // scales [8][16] bf16 at 0, zeros [8][16] at 256
  static constexpr int kStage = kX + kA + kP + kSZ;   // multiple of 1024
  static constexpr int kSmem = kStage * S + 2 * S * 8 + 1024;  // + barriers + alignment slack
  static_assert(kSmem <= 227 * 1024, "shared memory");
};

// REL0: consumers wait for all their wgmmas after each k step and release that slot at once
// (no wgmma group in flight across k steps; the producer may then run L = S−1 stages ahead).
template <bool INT4, int BT, int S, bool REL0>
__global__ void __launch_bounds__(kWsThreads, 1)
    ws_gemm_kernel(const bf16* __restrict__ x, int ldx, Int4Weight w4, Bf16Weight wb, EpiArgs e,
                   int tok_tiles, int total_tiles, int pair_ok) {
  using C = WsCfg<INT4, BT, S>;
  constexpr int L = REL0 ? S - 1 : S - 2;
  static_assert(L >= 1, "at least 3 stages");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + C::kStage * S);
  uint64_t* empty = full + S;
  const int tid = threadIdx.x;
  const int K = INT4 ? w4.k : wb.k;
  const int kc_n = INT4 ? w4.kp / 64 : (K + 63) / 64;
  const int my_tiles = (total_tiles - int(blockIdx.x) + int(gridDim.x) - 1) / int(gridDim.x);
  const int nitems = my_tiles * kc_n;
  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < S; ++s) {
      mbar_init(&full[s], 128);   // every producer thread
      mbar_init(&empty[s], 256);  // every consumer thread
    }
  }
  __syncthreads();

  if (tid < 128) {
    // ------------------------------------------------------------ producer warpgroup
    const int ntiles16 = INT4 ? (w4.n + 15) / 16 : 0;
    const int ngroups = INT4 ? w4.kp / w4.group : 1;
    auto load = [&](int item) {
      unsigned char* base = smem + (item % S) * C::kStage;
      const int tile = int(blockIdx.x) + (item / kc_n) * int(gridDim.x);
      const int kc = item % kc_n;
      const int tok0 = (tile % tok_tiles) * BT;
      const int n0 = (tile / tok_tiles) * kWsRows;
      bf16* xs = reinterpret_cast<bf16*>(base);
#pragma unroll 4
      for (int i = tid; i < BT * 8; i += 128) {
        const int r = i >> 3, ch = i & 7;
        const int tok = tok0 + r, k = kc * 64 + ch * 8;
        const bool ok = tok < e.m && k < K;
        cp_async16(xs + swz(r, ch), ok ? x + long(tok) * ldx + k : x, ok ? 16 : 0);
      }
      if constexpr (INT4) {
        unsigned char* ps = base + C::kX + C::kA;
#pragma unroll
        for (int i = tid; i < 256; i += 128) {
          const int t16 = n0 / 16 + (i >> 5);
          const bool ok = t16 < ntiles16;
          const uint4* src = static_cast<const uint4*>(w4.qweight) +
                             (ok ? (long(t16) * kc_n + kc) * 32 + (i & 31) : 0);
          cp_async16(ps + i * 16, src, ok ? 16 : 0);
        }
        unsigned char* sz = ps + C::kP;
        const int gi = kc * 64 / w4.group;
        if (tid < 16) {  // scales: 32 B per row tile = 2 chunks
          const int t16 = n0 / 16 + (tid >> 1);
          const bool ok = t16 < ntiles16;
          const unsigned char* src = reinterpret_cast<const unsigned char*>(w4.scales) +
                                     (ok ? (long(t16) * ngroups + gi) * 32 + (tid & 1) * 16 : 0);
          cp_async16(sz + tid * 16, src, ok ? 16 : 0);
        } else if (tid < 24 && w4.zeros) {  // zeros: 16 B per row tile
          const int t16 = n0 / 16 + (tid - 16);
          const bool ok = t16 < ntiles16;
          const uint8_t* src = w4.zeros + (ok ? (long(t16) * ngroups + gi) * 16 : 0);
          cp_async16(sz + 256 + (tid - 16) * 16, src, ok ? 16 : 0);
        }
      } else {
        bf16* as = reinterpret_cast<bf16*>(base + C::kX);
#pragma unroll 4
        for (int i = tid; i < kWsRows * 8; i += 128) {
          const int r = i >> 3, ch = i & 7;
          const int row = n0 + r, k = kc * 64 + ch * 8;
          const bool ok = row < wb.n && k < K;
          cp_async16(as + swz(r, ch), ok ? wb.w + long(row) * wb.ldw + k : wb.w, ok ? 16 : 0);
        }
      }
    };
    for (int i = 0; i < nitems + L; ++i) {
      if (i < nitems) {
        if (i >= S) mbar_wait(&empty[i % S], uint32_t((i / S) - 1) & 1u);
        load(i);
      }
      cp_async_commit();
      if (i >= L) {
        const int j = i - L;
        cp_async_wait<L>();  // this thread's copies of stage j have landed
        if constexpr (INT4) {
          producer_bar();  // scales/zeros of stage j were copied by threads 0..23
          unsigned char* base = smem + (j % S) * C::kStage;
          const uint4* ps = reinterpret_cast<const uint4*>(base + C::kX + C::kA);
          const unsigned char* sz = base + C::kX + C::kA + C::kP;
          bf16* ab = reinterpret_cast<bf16*>(base + C::kX);
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int i2 = tid + 128 * h;
            const int tt = i2 >> 5, lane = i2 & 31, g = lane >> 2, t = lane & 3;
            const uint4 aw = ps[i2];
            const bf162 s2 = *reinterpret_cast<const bf162*>(sz + (tt * 16 + 2 * g) * 2);
            const uint32_t zw =
                w4.zeros ? *reinterpret_cast<const uint16_t*>(sz + 256 + tt * 16 + 2 * g) : 0x0808u;
            const bf162 zlo = __float2bfloat162_rn(128.f + float(zw & 0xFF));
            const bf162 zhi = __float2bfloat162_rn(128.f + float(zw >> 8));
            const bf162 slo = __low2bfloat162(s2), shi = __high2bfloat162(s2);
            const uint32_t words[4] = {aw.x, aw.y, aw.z, aw.w};
            const int r0 = tt * 16 + g, r1 = r0 + 8;
#pragma unroll
            for (int ks = 0; ks < 4; ++ks) {
              uint32_t a[4];
              dequant8(words[ks], zlo, zhi, slo, shi, a);
              *reinterpret_cast<uint32_t*>(ab + swz(r0, ks * 2) + 2 * t) = a[0];
              *reinterpret_cast<uint32_t*>(ab + swz(r1, ks * 2) + 2 * t) = a[1];
              *reinterpret_cast<uint32_t*>(ab + swz(r0, ks * 2 + 1) + 2 * t) = a[2];
              *reinterpret_cast<uint32_t*>(ab + swz(r1, ks * 2 + 1) + 2 * t) = a[3];
            }
          }
        }
        fence_proxy_async();  // generic-proxy writes (cp.async, st.shared) → wgmma reads
        mbar_arrive(&full[j % S]);
      }
    }
    return;
  }

  // -------------------------------------------------------------- consumer warpgroups
  const int cw = (tid >> 7) - 1;  // 0 or 1: weight rows cw·64 .. +63 of the tile
  const int warp = tid >> 5, lane = tid & 31;
  const int wl = warp & 3, g = lane >> 2, t = lane & 3;
  const bool odd = g & 1;
  float acc[BT / 2];
  int item = 0;
  for (int ti = 0; ti < my_tiles; ++ti) {
    const int tile = int(blockIdx.x) + ti * int(gridDim.x);
    const int tok0 = (tile % tok_tiles) * BT;
    const int n0 = (tile / tok_tiles) * kWsRows;
#pragma unroll
    for (int i = 0; i < BT / 2; ++i) acc[i] = 0.f;
    for (int kc = 0; kc < kc_n; ++kc, ++item) {
      const int s = item % S;
      mbar_wait(&full[s], uint32_t(item / S) & 1u);
      const uint32_t xaddr = smem_u32(smem + s * C::kStage);
      const uint32_t aaddr = xaddr + C::kX + cw * 64 * 128;
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < 4; ++ks)
        wgmma_ss(acc, sw128_desc(aaddr + ks * 32), sw128_desc(xaddr + ks * 32));
      wgmma_commit();
      if constexpr (REL0) {
        wgmma_wait0();
        mbar_arrive(&empty[s]);
      } else {
        wgmma_wait1();
        if (kc > 0) mbar_arrive(&empty[(item - 1) % S]);
      }
    }
    if constexpr (!REL0) {
      wgmma_wait0();
      mbar_arrive(&empty[(item - 1) % S]);
    }

    // Epilogue. acc[4j..4j+3] = mma.m16n8k16 C layout of token block j: (row g, tok 2t),
    // (row g, tok 2t+1), (row g+8, tok 2t), (row g+8, tok 2t+1). Lanes g and g^1 (lane^4)
    // swap one value so that each holds two adjacent rows (= output columns) of one token.
    const int prow = n0 + cw * 64 + wl * 16 + g;
    if (epilogue_full_tile_ok(e, tok0, BT, n0, kWsRows, pair_ok)) {  // whole tile: straight-line
      epilogue_full_tile<BT, 1>(e, acc, prow, tok0, t, odd, 0);
      continue;
    }
#pragma unroll
    for (int j = 0; j < BT / 8; ++j) {
      const int tok = tok0 + j * 8 + 2 * t;
      const float* c = acc + 4 * j;
      if (e.ep == 3) {
        epi_write(e, prow, tok, c[0], 0.f);
        epi_write(e, prow, tok + 1, c[1], 0.f);
        epi_write(e, prow + 8, tok, c[2], 0.f);
        epi_write(e, prow + 8, tok + 1, c[3], 0.f);
      } else if (e.ep == 2) {  // rows g = gate, g+8 = up of output column (prow>>4)·8 + g;
                               // HF's bf16 rounding points as epi_write (gelu_mul_bf16)
        const float v0 = gelu_mul_bf16(c[0], c[2]), v1 = gelu_mul_bf16(c[1], c[3]);
        const float recv = __shfl_xor_sync(0xffffffffu, odd ? v0 : v1, 4);
        const int col = (prow >> 4) * 8 + g - (odd ? 1 : 0);
        epi_store2(e, odd ? tok + 1 : tok, col, odd ? recv : v0, odd ? v1 : recv, e.n / 2, pair_ok);
      } else {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float a0 = c[2 * h], a1 = c[2 * h + 1];
          const float recv = __shfl_xor_sync(0xffffffffu, odd ? a0 : a1, 4);
          const int col = prow + 8 * h - (odd ? 1 : 0);
          epi_store2(e, odd ? tok + 1 : tok, col, odd ? recv : a0, odd ? a1 : recv, e.n, pair_ok);
        }
      }
    }
  }
}

template <bool INT4, int BT, int S, bool REL0>
cudaError_t launch_ws_t(const bf16* x, int ldx, const Int4Weight& w4, const Bf16Weight& wb,
                        const EpiArgs& e, int max_blocks, cudaStream_t stream) {
  using C = WsCfg<INT4, BT, S>;
  static const cudaError_t attr = cudaFuncSetAttribute(
      ws_gemm_kernel<INT4, BT, S, REL0>, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmem);
  if (attr != cudaSuccess) return attr;
  const int rows = INT4 ? ((w4.n + 15) / 16) * 16 : wb.n;
  const int n_tiles = (rows + kWsRows - 1) / kWsRows;
  const int tok_tiles = (e.m + BT - 1) / BT;
  const int total = n_tiles * tok_tiles;
  const int grid = max_blocks > 0 ? std::min(total, max_blocks) : total;
  const auto a4 = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 3) == 0; };
  const bool pair_ok = e.o.ldy % 2 == 0 && a4(e.o.y) &&
                       (e.ep != 1 || (e.o.ldr % 2 == 0 && a4(e.o.residual)));
  ws_gemm_kernel<INT4, BT, S, REL0><<<grid, kWsThreads, C::kSmem, stream>>>(
      x, ldx, w4, wb, e, tok_tiles, total, pair_ok ? 1 : 0);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_ws_int4(const bf16* x, int ldx, const Int4Weight& w, const EpiArgs& e, int bt,
                           int max_blocks, bool rel0, cudaStream_t stream) {
  const Bf16Weight nb{};
  if (rel0)
    return bt == 256 ? launch_ws_t<true, 256, 4, true>(x, ldx, w, nb, e, max_blocks, stream)
                     : launch_ws_t<true, 128, 5, true>(x, ldx, w, nb, e, max_blocks, stream);
  return bt == 256 ? launch_ws_t<true, 256, 4, false>(x, ldx, w, nb, e, max_blocks, stream)
                   : launch_ws_t<true, 128, 5, false>(x, ldx, w, nb, e, max_blocks, stream);
}
cudaError_t launch_ws_bf16(const bf16* x, int ldx, const Bf16Weight& w, const EpiArgs& e, int bt,
                           int max_blocks, cudaStream_t stream) {
  return bt == 256 ? launch_ws_t<false, 256, 4, false>(x, ldx, Int4Weight{}, w, e, max_blocks, stream)
                   : launch_ws_t<false, 128, 5, false>(x, ldx, Int4Weight{}, w, e, max_blocks, stream);
}

}  // namespace detail
}  // namespace g4c::cuda

// Warp-specialized Hopper (sm_90a) W4A16 GEMM with the A operand (dequantized INT4 weights) in
// registers: wgmma.mma_async m64nBTk16 "RS" form (A from registers, B = X tile from shared
// memory), fp32 accumulators. The Machete arrangement, without CUTLASS. BT = 256 or 128 tokens
// from 64 rows on; 64 or 32 for smaller batches (the decode batches w4a16_rows_take_wgmma gives
// it), where the tensor work per k step is short and its four k16 wgmmas alternate between 2 or 4 accumulators
// instead of waiting on one another.
//
// Block = 3 warpgroups (384 threads), persistent over tiles of 128 weight rows × BT tokens
// (tile t → token tile t mod T, row tile t div T). Stage ring of S slots, each: X tile [BT][64]
// bf16 (TMA, 128-byte swizzle: row r at r·128 B, 16-byte chunk c at c ^ (r mod 8)), the packed
// INT4 fragments of the 8 row tiles (the repacked layout, gemm.cuh), their group's scales
// (8 × 32 B) and zeros (8 × 16 B).
//   warpgroup 0: thread 0 issues the copies of stage i once the consumers released its slot
//     (mbarrier `empty`): it arms `full` with the byte count (complete_tx) and issues 4 TMA
//     requests — X, the 8 row tiles' fragments as one 2-D box over [row tile][k chunk · 512 B],
//     their scales and zeros as 2-D boxes over [row tile][group · 16] (rows past n zero-filled).
//     Warps 1–3 only lower their register allotment (setmaxnreg) and leave.
//   warpgroups 1, 2 (64 weight rows each, warp w: one 16-row tile): per k step of 64, each
//     thread reads its 16 packed bytes (its 4 mma A fragments, one per k16 step) and
//     dequantizes them in registers, bf16((code − z)·s) exactly as the other kernels, while the
//     previous k step's 4 wgmmas run; the A registers are double-buffered (k loop unrolled by
//     two) so that wgmma.wait_group 1 frees the set about to be rewritten.
// No bf16 A tile in shared memory: 37 KB per stage (BT = 256), so 6 stages fit.
// Split-K (KS > 1): a cluster of KS blocks per tile, block `rank` of the
// cluster takes k chunks [rank·kc/KS, (rank+1)·kc/KS); after its main loop each block stores its
// fp32 partial tile in its own (now idle) stage ring, and block r sums token blocks j ≡ r (mod KS)
// of all KS partials through distributed shared memory in rank order (deterministic) and runs the
// epilogue for them. For tiles that fill less than half a wave (full k: 64 tiles on 132 SMs).
#include <cuda.h>

#include <algorithm>

#include "runtime/cuda/cluster.cuh"
#include "runtime/cuda/common.cuh"
#include "runtime/cuda/gemm_epilogue.cuh"
#include "runtime/cuda/mbarrier.cuh"
#include "runtime/cuda/wgmma.cuh"

namespace g4c::cuda {
namespace detail {
namespace {

__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, int c0, int c1, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(
          smem_u32(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(smem_u32(bar))
      : "memory");
}
__device__ __forceinline__ void prefetch_tmap(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

__device__ __forceinline__ void wgmma_rs(float (&d)[16], const uint32_t* a, uint64_t db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, {%16, %17, %18, %19}, %20, p, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}
__device__ __forceinline__ void wgmma_rs(float (&d)[32], const uint32_t* a, uint64_t db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}
__device__ __forceinline__ void wgmma_rs(float (&d)[64], const uint32_t* a, uint64_t db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}
__device__ __forceinline__ void wgmma_rs(float (&d)[128], const uint32_t* a, uint64_t db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, {%128, %129, %130, %131}, %132, p, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
        "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
        "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
        "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
        "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
        "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
        "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}

constexpr int kRsThreads = 384;
constexpr int kRsRows = 128;

template <int BT, int S>
struct RsCfg {
  static constexpr int kX = BT * 128;        // [BT][64] bf16, 1024-aligned
  static constexpr int kP = kRsRows * 32;    // 8 row tiles × 512 B
  static constexpr int kSZ = 512;            // scales [8][16] bf16 at 0, zeros [8][16] u8 at 256
  static constexpr int kStage = kX + kP + kSZ;
  static constexpr int kStageAligned = (kStage + 1023) / 1024 * 1024;
  static constexpr int kSmem = kStageAligned * S + 2 * S * 8 + 1024;
  static_assert(kSmem <= 227 * 1024, "shared memory");
};

// The weight-side tensor maps (fragments, scales, zeros).
struct RsWeightMaps {
  CUtensorMap w, s, z;
};

template <int BT, int S, int KS>
__global__ void __launch_bounds__(kRsThreads, 1)
    rs_gemm_kernel(const __grid_constant__ CUtensorMap tmx, const __grid_constant__ RsWeightMaps tmw, Int4Weight w4,
                   EpiArgs e, int tok_tiles, int total_tiles, int pair_ok) {
  using C = RsCfg<BT, S>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + C::kStageAligned * S);
  uint64_t* empty = full + S;
  const int tid = threadIdx.x;
  const int kc_n = w4.kp / 64;
  const int ntiles16 = (w4.n + 15) / 16;
  static_assert(BT / 8 * 256 * 16 <= C::kStageAligned * S, "partial tile fits the stage ring");
  // Split-K: one tile per cluster, this block's k chunks [k_lo, k_lo + nk). Else persistent.
  const int rank = KS > 1 ? int(cluster_rank()) : 0;
  const int k_lo = rank * kc_n / KS, nk = (rank + 1) * kc_n / KS - k_lo;
  const int my_tiles = KS > 1 ? 1 : (total_tiles - int(blockIdx.x) + int(gridDim.x) - 1) / int(gridDim.x);
  const auto tile_of = [&](int ti) { return KS > 1 ? int(blockIdx.x) / KS : int(blockIdx.x) + ti * int(gridDim.x); };
  const int nitems = my_tiles * nk;
  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < S; ++s) {
      mbar_init(&full[s], 1);     // the copying thread's arrive.expect_tx (+ the bytes)
      mbar_init(&empty[s], 256);  // every consumer thread
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  // The copying thread's loop (thread 0).
  const auto produce = [&]() {
    prefetch_tmap(&tmx);
    prefetch_tmap(&tmw.w);
    prefetch_tmap(&tmw.s);
    if (w4.zeros) prefetch_tmap(&tmw.z);
    for (int i = 0; i < nitems; ++i) {
      const int s = i % S;
      if (i >= S) mbar_wait(&empty[s], uint32_t((i / S) - 1) & 1u);
      unsigned char* base = smem + s * C::kStageAligned;
      const int tile = tile_of(i / nk);
      const int kc = k_lo + i % nk;
      const int tok0 = (tile % tok_tiles) * BT;
      const int t0 = (tile / tok_tiles) * (kRsRows / 16);
      const int gi = kc * 64 / w4.group;
      // Every box is counted whole (its zero-filled rows too).
      mbar_expect_tx(&full[s], uint32_t(C::kX) + 8u * (512u + 32u + (w4.zeros ? 16u : 0u)));
      tma_load_2d(base, &tmx, kc * 64, tok0, &full[s]);
      tma_load_2d(base + C::kX, &tmw.w, kc * 128, t0, &full[s]);
      tma_load_2d(base + C::kX + C::kP, &tmw.s, gi * 16, t0, &full[s]);
      if (w4.zeros) tma_load_2d(base + C::kX + C::kP + 256, &tmw.z, gi * 16, t0, &full[s]);
    }
  };

  if (tid < 128) {
    // ---------------------------------------------------------------- copy warpgroup
    if constexpr (BT == 256) asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
    if (tid == 0) produce();
    if constexpr (KS > 1) {  // the consumers' two cluster barriers (partials stored, partials read)
      cluster_arrive();
      cluster_wait();
      cluster_arrive();
      cluster_wait();
    }
    return;
  }
  // ------------------------------------------------------------------ consumer warpgroups
  if constexpr (BT == 256) asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
  const int cw = (tid >> 7) - 1;  // weight rows cw·64 .. +63 of the tile
  const int warp = tid >> 5, lane = tid & 31;
  const int wl = warp & 3, g = lane >> 2, t = lane & 3;
  const int tl = cw * 4 + wl;  // this warp's 16-row tile in the block tile
  const bool odd = g & 1;
  // Accumulator chains: a narrow tile's four k16 wgmmas per k step would run back to back on one
  // accumulator (latency-bound: the tensor work of n ≤ 64 is short), so they alternate between
  // NC accumulators, summed before the epilogue.
  constexpr int NC = BT <= 32 ? 4 : BT <= 64 ? 2 : 1;
  float accs[NC][BT / 2];
  float(&acc)[BT / 2] = accs[0];
  uint32_t a0[16], a1[16];

  // Waits for item `it`, then dequantizes this thread's fragments of it into `a`.
  auto dq = [&](uint32_t(&a)[16], int it, bool valid) {
    const int s = it % S;
    mbar_wait(&full[s], uint32_t(it / S) & 1u);
    const unsigned char* base = smem + s * C::kStageAligned;
    const uint4 aw = *reinterpret_cast<const uint4*>(base + C::kX + tl * 512 + lane * 16);
    bf162 s2 = *reinterpret_cast<const bf162*>(base + C::kX + C::kP + (tl * 16 + 2 * g) * 2);
    const uint32_t zw =
        w4.zeros ? *reinterpret_cast<const uint16_t*>(base + C::kX + C::kP + 256 + tl * 16 + 2 * g) : 0x0808u;
    if (!valid) s2 = __float2bfloat162_rn(0.f);  // row tile past n: slot holds stale bytes
    const bf162 zlo = __float2bfloat162_rn(128.f + float(zw & 0xFF));
    const bf162 zhi = __float2bfloat162_rn(128.f + float((zw >> 8) & 0xFF));
    const bf162 slo = __low2bfloat162(s2), shi = __high2bfloat162(s2);
    const uint32_t words[4] = {aw.x, aw.y, aw.z, aw.w};
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
      uint32_t f[4];
      dequant8(words[ks], zlo, zhi, slo, shi, f);
#pragma unroll
      for (int q = 0; q < 4; ++q) a[4 * ks + q] = f[q];
    }
  };
  auto mma = [&](const uint32_t(&a)[16], int it) {
    const uint32_t xaddr = smem_u32(smem + (it % S) * C::kStageAligned);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) wgmma_rs(accs[ks % NC], a + 4 * ks, sw128_desc(xaddr + ks * 32));
    wgmma_commit();
  };

  int item = 0;
  for (int ti = 0; ti < my_tiles; ++ti) {
    const int tile = tile_of(ti);
    const int tok0 = (tile % tok_tiles) * BT;
    const int n0 = (tile / tok_tiles) * kRsRows;
    const bool valid = n0 / 16 + tl < ntiles16;
#pragma unroll
    for (int c = 0; c < NC; ++c)
#pragma unroll
      for (int i = 0; i < BT / 2; ++i) accs[c][i] = 0.f;
    dq(a0, item, valid);
    for (int kc = 0; kc < nk; kc += 2) {
      mma(a0, item);
      wgmma_wait1();  // group item−1 (registers a1) done
      if (kc > 0) mbar_arrive(&empty[(item - 1) % S]);
      ++item;
      if (kc + 1 >= nk) break;
      dq(a1, item, valid);
      mma(a1, item);
      wgmma_wait1();  // group item−1 (registers a0) done
      mbar_arrive(&empty[(item - 1) % S]);
      ++item;
      if (kc + 2 < nk) dq(a0, item, valid);
    }
    wgmma_wait0();
    mbar_arrive(&empty[(item - 1) % S]);
#pragma unroll
    for (int c = 1; c < NC; ++c)
#pragma unroll
      for (int i = 0; i < BT / 2; ++i) acc[i] += accs[c][i];
    if constexpr (KS > 1) {
      // Both warpgroups are done with the stage ring (and every copy into it has landed): store
      // the partial tile there as [token block j][consumer thread] float4, then sum token blocks
      // j ≡ rank (mod KS) over the cluster's blocks in rank order.
      asm volatile("bar.sync 1, 256;\n" ::: "memory");
      float4* part = reinterpret_cast<float4*>(smem) + (tid - 128);
#pragma unroll
      for (int j = 0; j < BT / 8; ++j) part[j * 256] = make_float4(acc[4 * j], acc[4 * j + 1], acc[4 * j + 2], acc[4 * j + 3]);
      cluster_arrive();
      cluster_wait();
#pragma unroll
      for (int j = 0; j < BT / 8; ++j) {
        if (j % KS != rank) continue;
        float4 sum = rank == 0 ? part[j * 256] : ld_cluster_f4(part + j * 256, 0);
#pragma unroll
        for (int r = 1; r < KS; ++r) {
          const float4 v = r == rank ? part[j * 256] : ld_cluster_f4(part + j * 256, uint32_t(r));
          sum.x += v.x;
          sum.y += v.y;
          sum.z += v.z;
          sum.w += v.w;
        }
        acc[4 * j] = sum.x;
        acc[4 * j + 1] = sum.y;
        acc[4 * j + 2] = sum.z;
        acc[4 * j + 3] = sum.w;
      }
      cluster_arrive();  // done reading the other blocks' partials (they wait before leaving)
    }

    // Epilogue: acc[4j..4j+3] = (row g, tok 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1) of token block
    // j; lanes g, g^1 swap one value for paired column stores. A tile inside both bounds (all but
    // the last token / row tile) takes the straight-line path; the rest (and ep 3), the tested one.
    const int prow = n0 + cw * 64 + wl * 16 + g;
    if (epilogue_full_tile_ok(e, tok0, BT, n0, kRsRows, pair_ok)) {
      epilogue_full_tile<BT, KS>(e, acc, prow, tok0, t, odd, rank);
      continue;
    }
#pragma unroll
    for (int j = 0; j < BT / 8; ++j) {
      if (KS > 1 && j % KS != rank) continue;  // another block of the cluster stores it
      const int tok = tok0 + j * 8 + 2 * t;
      const float* c = acc + 4 * j;
      if (e.ep == 3) {
        epi_write(e, prow, tok, c[0], 0.f);
        epi_write(e, prow, tok + 1, c[1], 0.f);
        epi_write(e, prow + 8, tok, c[2], 0.f);
        epi_write(e, prow + 8, tok + 1, c[3], 0.f);
      } else if (e.ep == 2) {
        const float v0 = gelu_mul_bf16(c[0], c[2]), v1 = gelu_mul_bf16(c[1], c[3]);
        const float recv = __shfl_xor_sync(0xffffffffu, odd ? v0 : v1, 4);
        const int col = (prow >> 4) * 8 + g - (odd ? 1 : 0);
        epi_store2(e, odd ? tok + 1 : tok, col, odd ? recv : v0, odd ? v1 : recv, e.n / 2, pair_ok);
      } else {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float x0 = c[2 * h], x1 = c[2 * h + 1];
          const float recv = __shfl_xor_sync(0xffffffffu, odd ? x0 : x1, 4);
          const int col = prow + 8 * h - (odd ? 1 : 0);
          epi_store2(e, odd ? tok + 1 : tok, col, odd ? recv : x0, odd ? x1 : recv, e.n, pair_ok);
        }
      }
    }
  }
  if constexpr (KS > 1) cluster_wait();  // the others have read this block's partial
}

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
EncodeTiled encode_fn() {
  static const EncodeTiled fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult st{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, CUDA_VERSION, cudaEnableDefault, &st) !=
            cudaSuccess ||
        st != cudaDriverEntryPointSuccess)
      p = nullptr;
    return reinterpret_cast<EncodeTiled>(p);
  }();
  return fn;
}

// A 2-D tensor map over `rows` rows of `cols` elements (row pitch `pitch` bytes), box {bc, br};
// reads past either extent are zero-filled. False when the driver lacks the entry point or
// rejects the map.
bool encode_rows(CUtensorMap* map, CUtensorMapDataType type, const void* p, uint64_t cols, uint64_t rows,
                 uint64_t pitch, uint32_t bc, uint32_t br, CUtensorMapSwizzle swizzle) {
  const EncodeTiled enc = encode_fn();
  const cuuint64_t dims[2] = {cols, rows};
  const cuuint64_t strides[1] = {pitch};
  const cuuint32_t box[2] = {bc, br};
  const cuuint32_t estr[2] = {1u, 1u};
  return enc && enc(map, type, 2, const_cast<void*>(p), dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                    swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

template <int BT, int S, int KS>
cudaError_t launch_rs_t(const bf16* x, int ldx, const Int4Weight& w, const EpiArgs& e, int max_blocks,
                        cudaStream_t stream) {
  using C = RsCfg<BT, S>;
  static const cudaError_t attr =
      cudaFuncSetAttribute(rs_gemm_kernel<BT, S, KS>, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmem);
  if (attr != cudaSuccess) return attr;
  if (!encode_fn()) return cudaErrorNotSupported;
  // X [m][ldx] bf16 as a 2-D tensor {k, m}; box {64, BT}, 128-byte swizzle.
  CUtensorMap map;
  if (!encode_rows(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, x, uint64_t(w.k), uint64_t(e.m), uint64_t(ldx) * 2, 64,
                   BT, CU_TENSOR_MAP_SWIZZLE_128B))
    return cudaErrorInvalidValue;
  // Repacked layout (gemm.cuh): qweight [ntiles16][kp/64][512 B] as u32 rows of kp/64 · 128;
  // scales bf16 / zeros u8 [ntiles16][kp/G][16]. Box: 8 row tiles × one k chunk / group.
  RsWeightMaps wm{};
  const uint64_t nt = uint64_t((w.n + 15) / 16), kc = uint64_t(w.kp / 64), ng = uint64_t(w.kp / w.group);
  constexpr CUtensorMapSwizzle kNone = CU_TENSOR_MAP_SWIZZLE_NONE;
  if (!encode_rows(&wm.w, CU_TENSOR_MAP_DATA_TYPE_UINT32, w.qweight, kc * 128, nt, kc * 512, 128, 8, kNone) ||
      !encode_rows(&wm.s, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, w.scales, ng * 16, nt, ng * 32, 16, 8, kNone) ||
      (w.zeros && !encode_rows(&wm.z, CU_TENSOR_MAP_DATA_TYPE_UINT8, w.zeros, ng * 16, nt, ng * 16, 16, 8, kNone)))
    return cudaErrorInvalidValue;
  const int n_tiles = (((w.n + 15) / 16) * 16 + kRsRows - 1) / kRsRows;
  const int tok_tiles = (e.m + BT - 1) / BT;
  const int total = n_tiles * tok_tiles;
  const auto a4 = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 3) == 0; };
  const int pair_ok =
      e.o.ldy % 2 == 0 && a4(e.o.y) && (e.ep != 1 || (e.o.ldr % 2 == 0 && a4(e.o.residual))) ? 1 : 0;
  if constexpr (KS == 1) {
    const int grid = max_blocks > 0 ? std::min(total, max_blocks) : total;
    rs_gemm_kernel<BT, S, 1><<<grid, kRsThreads, C::kSmem, stream>>>(map, wm, w, e, tok_tiles, total, pair_ok);
    return cudaGetLastError();
  } else {  // one cluster of KS blocks per tile (max_blocks does not apply)
    cudaLaunchAttribute at;
    const cudaLaunchConfig_t cfg =
        cluster_launch_config(dim3(unsigned(total * KS)), dim3(kRsThreads), C::kSmem, stream, dim3(KS, 1, 1), &at);
    return cudaLaunchKernelEx(&cfg, rs_gemm_kernel<BT, S, KS>, map, wm, w, e, tok_tiles, total, pair_ok);
  }
}

// Clusters of KS blocks of the split-K kernel that can be resident at once (0 when unknown).
template <int BT, int S, int KS>
int rs_clusters_t() {
  static const int n = [] {
    using C = RsCfg<BT, S>;
    if (cudaFuncSetAttribute(rs_gemm_kernel<BT, S, KS>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             C::kSmem) != cudaSuccess)
      return 0;
    cudaLaunchAttribute at;
    const cudaLaunchConfig_t cfg = cluster_launch_config(dim3(KS), dim3(kRsThreads), C::kSmem, nullptr, dim3(KS, 1, 1), &at);
    int c = 0;
    if (cudaOccupancyMaxActiveClusters(&c, rs_gemm_kernel<BT, S, KS>, &cfg) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return c;
  }();
  return n;
}

// Stages per tile width: 6 × 37 KB (256 tokens), 8 × 21 KB (128), 12 × 13 KB (64), 16 × 9 KB
// (32); the narrow tiles keep ≥ 48 KB of weights in flight per SM.
template <int BT>
constexpr int rs_stages() {
  return BT == 256 ? 6 : BT == 128 ? 8 : BT == 64 ? 12 : 16;
}

template <int BT>
cudaError_t launch_rs_bt(const bf16* x, int ldx, const Int4Weight& w, const EpiArgs& e, int max_blocks, int ksplit,
                         cudaStream_t stream) {
  constexpr int S = rs_stages<BT>();
  if (ksplit >= 4) return launch_rs_t<BT, S, 4>(x, ldx, w, e, 0, stream);
  if (ksplit >= 2) return launch_rs_t<BT, S, 2>(x, ldx, w, e, 0, stream);
  return launch_rs_t<BT, S, 1>(x, ldx, w, e, max_blocks, stream);
}

template <int BT>
int rs_clusters_bt(int ksplit) {
  constexpr int S = rs_stages<BT>();
  if (ksplit >= 4) return rs_clusters_t<BT, S, 4>();
  if (ksplit >= 2) return rs_clusters_t<BT, S, 2>();
  return 0;
}

}  // namespace

cudaError_t launch_rs_int4(const bf16* x, int ldx, const Int4Weight& w, const EpiArgs& e, int bt, int max_blocks,
                           int ksplit, cudaStream_t stream) {
  ksplit = std::min(ksplit, w.kp / 64);  // every block of a cluster gets ≥ 1 k chunk
  switch (bt) {
    case 256: return launch_rs_bt<256>(x, ldx, w, e, max_blocks, ksplit, stream);
    case 128: return launch_rs_bt<128>(x, ldx, w, e, max_blocks, ksplit, stream);
    case 64: return launch_rs_bt<64>(x, ldx, w, e, max_blocks, ksplit, stream);
    case 32: return launch_rs_bt<32>(x, ldx, w, e, max_blocks, ksplit, stream);
    default: return cudaErrorInvalidValue;
  }
}

int rs_split_clusters(int bt, int ksplit) {
  switch (bt) {
    case 256: return rs_clusters_bt<256>(ksplit);
    case 128: return rs_clusters_bt<128>(ksplit);
    case 64: return rs_clusters_bt<64>(ksplit);
    case 32: return rs_clusters_bt<32>(ksplit);
    default: return 0;
  }
}

}  // namespace detail
}  // namespace g4c::cuda

// Hopper (sm_90a) tensor-core GEMM for m ≥ 64: wgmma.mma_async m64n128k16, bf16 operands,
// fp32 accumulators. Block = 2 warpgroups × 64 weight rows, 128 tokens, k step 64, 4-stage
// cp.async pipeline into shared tiles laid out exactly as the 128-byte-swizzle K-major wgmma
// layout (row r at r·128 B, 16-byte chunk c at c ^ (r mod 8); tiles 1024-byte aligned).
// BF16 weights: A and B both from shared memory (descriptors). INT4 weights: A from registers,
// each warp dequantizing its own 16-row tile's fragments (the repacked layout, gemm.cuh) —
// the A-register layout of wgmma is the mma.m16n8k16 one, per warp.
#include "runtime/cuda/common.cuh"
#include "runtime/cuda/gemm_epilogue.cuh"

namespace g4c::cuda {
namespace detail {
namespace {

__device__ __forceinline__ uint64_t sw128_desc(uint32_t saddr) {
  return uint64_t((saddr & 0x3FFFF) >> 4) | (uint64_t(1) << 16) | (uint64_t(1024 >> 4) << 32) |
         (uint64_t(1) << 62);
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_wait0() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

__device__ __forceinline__ void wgmma_ss(float (&d)[64], uint64_t da, uint64_t db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(da), "l"(db));
}
__device__ __forceinline__ void wgmma_rs(float (&d)[64], const uint32_t (&a)[4], uint64_t db) {
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

constexpr int kBN = 128, kBT = 128, kStages = 4, kThreads = 256;
template <bool INT4>
struct WgCfg {
  static constexpr int kX = kBT * 64 * 2;
  static constexpr int kA = INT4 ? kBN * 32 : kBN * 64 * 2;
  static constexpr int kStage = kX + kA;  // multiple of 1024
  static constexpr int kSmem = kStage * kStages + 1024;  // + alignment slack
};

__device__ __forceinline__ int swz(int row, int chunk) { return row * 64 + ((chunk ^ (row & 7)) << 3); }

template <bool INT4>
__global__ void __launch_bounds__(kThreads, 1)
    wgmma_gemm_kernel(const bf16* __restrict__ x, int ldx, Int4Weight w4, Bf16Weight wb, EpiArgs e) {
  using C = WgCfg<INT4>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  const int K = INT4 ? w4.k : wb.k;
  const int kc_n = INT4 ? w4.kp / 64 : (K + 63) / 64;
  const int n0 = blockIdx.x * kBN;
  const int tok0 = blockIdx.y * kBT;
  const int tid = threadIdx.x;
  const int ntiles = INT4 ? (w4.n + 15) / 16 : 0;

  auto load_stage = [&](int stage, int kc) {
    unsigned char* base = smem + stage * C::kStage;
    bf16* xs = reinterpret_cast<bf16*>(base);
#pragma unroll 4
    for (int i = tid; i < kBT * 8; i += kThreads) {
      const int r = i >> 3, ch = i & 7;
      const int tok = tok0 + r, k = kc * 64 + ch * 8;
      const bool ok = tok < e.m && k < K;
      cp_async16(xs + swz(r, ch), ok ? x + long(tok) * ldx + k : x, ok ? 16 : 0);
    }
    if constexpr (INT4) {
      unsigned char* as = base + C::kX;
      for (int i = tid; i < kBN * 2; i += kThreads) {
        const int tt = i >> 5, lane = i & 31;
        const int tile = n0 / 16 + tt;
        const bool ok = tile < ntiles;
        const uint4* src = static_cast<const uint4*>(w4.qweight) +
                           (ok ? (long(tile) * kc_n + kc) * 32 + lane : 0);
        cp_async16(as + i * 16, src, ok ? 16 : 0);
      }
    } else {
      bf16* as = reinterpret_cast<bf16*>(base + C::kX);
#pragma unroll 4
      for (int i = tid; i < kBN * 8; i += kThreads) {
        const int r = i >> 3, ch = i & 7;
        const int row = n0 + r, k = kc * 64 + ch * 8;
        const bool ok = row < wb.n && k < K;
        cp_async16(as + swz(r, ch), ok ? wb.w + long(row) * wb.ldw + k : wb.w, ok ? 16 : 0);
      }
    }
  };

  const int warp = tid >> 5, lane = tid & 31;
  const int wg = warp >> 2, wl = warp & 3;
  const int g = lane >> 2, t = lane & 3;
  float acc[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = 0.f;

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < kc_n) load_stage(s, s);
    cp_async_commit();
  }
  const int ngroups = INT4 ? w4.kp / w4.group : 1;
  for (int kc = 0; kc < kc_n; ++kc) {
    cp_async_wait<kStages - 2>();
    fence_proxy_async();  // cp.async writes (generic proxy) → wgmma reads (async proxy)
    __syncthreads();
    {
      const int nk = kc + kStages - 1;  // overwrites the slot of kc−1, whose wgmmas completed
      if (nk < kc_n) load_stage(nk % kStages, nk);
      cp_async_commit();
    }
    const unsigned char* base = smem + (kc % kStages) * C::kStage;
    const uint32_t xaddr = smem_u32(base);
    if constexpr (INT4) {
      const int tl = wg * 4 + wl;
      const uint4 aw = reinterpret_cast<const uint4*>(base + C::kX)[tl * 32 + lane];
      const int tile = min(n0 / 16 + tl, ntiles - 1);
      const long so = (long(tile) * ngroups + kc * 64 / w4.group) * 16 + 2 * g;
      const bf162 s2 = *reinterpret_cast<const bf162*>(w4.scales + so);
      const uint32_t zw = w4.zeros ? *reinterpret_cast<const uint16_t*>(w4.zeros + so) : 0x0808u;
      const bf162 zlo = __float2bfloat162_rn(128.f + float(zw & 0xFF));
      const bf162 zhi = __float2bfloat162_rn(128.f + float(zw >> 8));
      const bf162 slo = __low2bfloat162(s2), shi = __high2bfloat162(s2);
      uint32_t a[4][4];
      dequant8(aw.x, zlo, zhi, slo, shi, a[0]);
      dequant8(aw.y, zlo, zhi, slo, shi, a[1]);
      dequant8(aw.z, zlo, zhi, slo, shi, a[2]);
      dequant8(aw.w, zlo, zhi, slo, shi, a[3]);
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) wgmma_rs(acc, a[ks], sw128_desc(xaddr + ks * 32));
    } else {
      const uint32_t aaddr = smem_u32(base + C::kX) + wg * 64 * 128;
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < 4; ++ks)
        wgmma_ss(acc, sw128_desc(aaddr + ks * 32), sw128_desc(xaddr + ks * 32));
    }
    wgmma_commit();
    wgmma_wait0();
  }
  cp_async_wait<0>();

  // Accumulator layout per warp = mma.m16n8k16 C layout for each 8-token block j.
  const int prow = n0 + wg * 64 + wl * 16 + g;
#pragma unroll
  for (int j = 0; j < kBT / 8; ++j) {
    const int tok = tok0 + j * 8 + 2 * t;
    const float* c = acc + 4 * j;
    if (e.ep == 2) {
      epi_write(e, prow, tok, c[0], c[2]);
      epi_write(e, prow, tok + 1, c[1], c[3]);
    } else {
      epi_write(e, prow, tok, c[0], 0.f);
      epi_write(e, prow, tok + 1, c[1], 0.f);
      epi_write(e, prow + 8, tok, c[2], 0.f);
      epi_write(e, prow + 8, tok + 1, c[3], 0.f);
    }
  }
}

template <bool INT4>
cudaError_t launch(const bf16* x, int ldx, const Int4Weight& w4, const Bf16Weight& wb,
                   const EpiArgs& e, cudaStream_t stream) {
  using C = WgCfg<INT4>;
  static const cudaError_t attr = cudaFuncSetAttribute(
      wgmma_gemm_kernel<INT4>, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmem);
  if (attr != cudaSuccess) return attr;
  const int n = INT4 ? ((w4.n + 15) / 16) * 16 : wb.n;
  dim3 grid((n + kBN - 1) / kBN, (e.m + kBT - 1) / kBT);
  wgmma_gemm_kernel<INT4><<<grid, kThreads, C::kSmem, stream>>>(x, ldx, w4, wb, e);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_wgmma_int4(const bf16* x, int ldx, const Int4Weight& w, const EpiArgs& e,
                              cudaStream_t stream) {
  return launch<true>(x, ldx, w, Bf16Weight{}, e, stream);
}
cudaError_t launch_wgmma_bf16(const bf16* x, int ldx, const Bf16Weight& w, const EpiArgs& e,
                              cudaStream_t stream) {
  return launch<false>(x, ldx, Int4Weight{}, w, e, stream);
}

}  // namespace detail
}  // namespace g4c::cuda

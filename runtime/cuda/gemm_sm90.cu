// Hopper (sm_90a) tensor-core GEMM for m ≥ 64: wgmma.mma_async m64n128k16, bf16 operands,
// fp32 accumulators. Block = 2 warpgroups × 64 weight rows, 128 or 256 tokens, k step 64, 4-stage
// cp.async pipeline into shared tiles laid out exactly as the 128-byte-swizzle K-major wgmma
// layout (row r at r·128 B, 16-byte chunk c at c ^ (r mod 8); tiles 1024-byte aligned).
// A and B both come from shared memory (descriptors). INT4 weights: each warp dequantizes its
// 16-row tile of the stage (the repacked fragments, gemm.cuh) into a double-buffered bf16 A
// tile in the same swizzled layout, then the BF16 path runs on it.
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
__device__ __forceinline__ void wgmma_ss(float (&d)[128], uint64_t da, uint64_t db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, p, 1, 1, 0, 0;\n}\n"
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
      : "l"(da), "l"(db));
}
__device__ __forceinline__ void wgmma_wait1() { asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory"); }

constexpr int kBN = 128, kStages = 4, kThreads = 256;
template <bool INT4, int kBT>
struct WgCfg {
  static constexpr int kX = kBT * 64 * 2;
  static constexpr int kA = INT4 ? kBN * 32 : kBN * 64 * 2;
  static constexpr int kStage = kX + kA;  // multiple of 1024
  static constexpr int kABuf = INT4 ? kBN * 64 * 2 : 0;  // 2 dequantized bf16 A tiles
  static constexpr int kSmem = kStage * kStages + 2 * kABuf + 1024;  // + alignment slack
};

__device__ __forceinline__ int swz(int row, int chunk) { return row * 64 + ((chunk ^ (row & 7)) << 3); }

// BT tokens per block (wgmma n). Loads run kLoadAhead = kStages − 2 stages ahead so that one
// wgmma group may stay in flight (wait_group 1).
template <bool INT4, int kBT>
__global__ void __launch_bounds__(kThreads, 1)
    wgmma_gemm_kernel(const bf16* __restrict__ x, int ldx, Int4Weight w4, Bf16Weight wb, EpiArgs e) {
  using C = WgCfg<INT4, kBT>;
  constexpr int kLoadAhead = kStages - 2;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  bf16* abuf = reinterpret_cast<bf16*>(smem + C::kStage * kStages);  // INT4 only
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
  float acc[kBT / 2];
#pragma unroll
  for (int i = 0; i < kBT / 2; ++i) acc[i] = 0.f;

#pragma unroll
  for (int s = 0; s < kLoadAhead; ++s) {
    if (s < kc_n) load_stage(s, s);
    cp_async_commit();
  }
  const int ngroups = INT4 ? w4.kp / w4.group : 1;
  for (int kc = 0; kc < kc_n; ++kc) {
    cp_async_wait<kLoadAhead - 1>();
    fence_proxy_async();  // cp.async writes (generic proxy) → wgmma reads (async proxy)
    __syncthreads();
    {
      const int nk = kc + kLoadAhead;  // slot of kc−2, whose wgmma group has completed
      if (nk < kc_n) load_stage(nk % kStages, nk);
      cp_async_commit();
    }
    const unsigned char* base = smem + (kc % kStages) * C::kStage;
    const uint32_t xaddr = smem_u32(base);
    if constexpr (INT4) {
      // Dequantize this stage's packed tiles (warp w: tile w, 16 rows) into bf16 A buffer kc&1,
      // laid out like the bf16 path (its previous reader, wgmma kc−2, has completed).
      const uint4 aw = reinterpret_cast<const uint4*>(base + C::kX)[tid];
      const int tile = min(n0 / 16 + warp, ntiles - 1);
      const long so = (long(tile) * ngroups + kc * 64 / w4.group) * 16 + 2 * g;
      const bf162 s2 = *reinterpret_cast<const bf162*>(w4.scales + so);
      const uint32_t zw = w4.zeros ? *reinterpret_cast<const uint16_t*>(w4.zeros + so) : 0x0808u;
      const bf162 zlo = __float2bfloat162_rn(128.f + float(zw & 0xFF));
      const bf162 zhi = __float2bfloat162_rn(128.f + float(zw >> 8));
      const bf162 slo = __low2bfloat162(s2), shi = __high2bfloat162(s2);
      bf16* ab = abuf + (kc & 1) * (kBN * 64);
      const uint32_t words[4] = {aw.x, aw.y, aw.z, aw.w};
      const int r0 = warp * 16 + g, r1 = r0 + 8;
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) {
        uint32_t a[4];
        dequant8(words[ks], zlo, zhi, slo, shi, a);
        *reinterpret_cast<uint32_t*>(ab + swz(r0, ks * 2) + 2 * t) = a[0];
        *reinterpret_cast<uint32_t*>(ab + swz(r1, ks * 2) + 2 * t) = a[1];
        *reinterpret_cast<uint32_t*>(ab + swz(r0, ks * 2 + 1) + 2 * t) = a[2];
        *reinterpret_cast<uint32_t*>(ab + swz(r1, ks * 2 + 1) + 2 * t) = a[3];
      }
      fence_proxy_async();
      __syncthreads();
      const uint32_t aaddr = smem_u32(ab) + wg * 64 * 128;
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < 4; ++ks)
        wgmma_ss(acc, sw128_desc(aaddr + ks * 32), sw128_desc(xaddr + ks * 32));
    } else {
      const uint32_t aaddr = smem_u32(base + C::kX) + wg * 64 * 128;
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < 4; ++ks)
        wgmma_ss(acc, sw128_desc(aaddr + ks * 32), sw128_desc(xaddr + ks * 32));
    }
    wgmma_commit();
    wgmma_wait1();
  }
  wgmma_wait0();
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

template <bool INT4, int kBT>
cudaError_t launch(const bf16* x, int ldx, const Int4Weight& w4, const Bf16Weight& wb,
                   const EpiArgs& e, cudaStream_t stream) {
  using C = WgCfg<INT4, kBT>;
  static const cudaError_t attr = cudaFuncSetAttribute(
      wgmma_gemm_kernel<INT4, kBT>, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmem);
  if (attr != cudaSuccess) return attr;
  const int n = INT4 ? ((w4.n + 15) / 16) * 16 : wb.n;
  dim3 grid((n + kBN - 1) / kBN, (e.m + kBT - 1) / kBT);
  wgmma_gemm_kernel<INT4, kBT><<<grid, kThreads, C::kSmem, stream>>>(x, ldx, w4, wb, e);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_wgmma_int4(const bf16* x, int ldx, const Int4Weight& w, const EpiArgs& e,
                              int bt, cudaStream_t stream) {
  return bt == 256 ? launch<true, 256>(x, ldx, w, Bf16Weight{}, e, stream)
                   : launch<true, 128>(x, ldx, w, Bf16Weight{}, e, stream);
}
cudaError_t launch_wgmma_bf16(const bf16* x, int ldx, const Bf16Weight& w, const EpiArgs& e,
                              int bt, cudaStream_t stream) {
  return bt == 256 ? launch<false, 256>(x, ldx, Int4Weight{}, w, e, stream)
                   : launch<false, 128>(x, ldx, Int4Weight{}, w, e, stream);
}

}  // namespace detail
}  // namespace g4c::cuda

// Hopper (sm_90a) tensor-core GEMM for m ≥ 64: wgmma.mma_async m64n128k16, bf16 operands,
// fp32 accumulators. Block = 2 warpgroups × 64 weight rows, 128 or 256 tokens, k step 64, 4-stage
// cp.async pipeline into shared tiles laid out exactly as the 128-byte-swizzle K-major wgmma
// layout (row r at r·128 B, 16-byte chunk c at c ^ (r mod 8); tiles 1024-byte aligned).
// A and B both come from shared memory (descriptors). BF16 weights (the INT4 GEMM's m ≥ 64 kernel
// is gemm_sm90_rs.cu).
#include "runtime/cuda/common.cuh"
#include "runtime/cuda/gemm_epilogue.cuh"
#include "runtime/cuda/wgmma.cuh"

namespace g4c::cuda {
namespace detail {
namespace {

constexpr int kBN = 128, kStages = 4, kThreads = 256;
template <int kBT>
struct WgCfg {
  static constexpr int kX = kBT * 64 * 2;
  static constexpr int kA = kBN * 64 * 2;
  static constexpr int kStage = kX + kA;  // multiple of 1024
  static constexpr int kSmem = kStage * kStages + 1024;  // + alignment slack
};

// BT tokens per block (wgmma n). Loads run kLoadAhead = kStages − 2 stages ahead so that one
// wgmma group may stay in flight (wait_group 1).
template <int kBT>
__global__ void __launch_bounds__(kThreads, 1)
    wgmma_gemm_kernel(const bf16* __restrict__ x, int ldx, Bf16Weight wb, EpiArgs e) {
  using C = WgCfg<kBT>;
  constexpr int kLoadAhead = kStages - 2;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  const int K = wb.k;
  const int kc_n = (K + 63) / 64;
  const int n0 = blockIdx.x * kBN;
  const int tok0 = blockIdx.y * kBT;
  const int tid = threadIdx.x;

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
    {
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
    {
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

template <int kBT>
cudaError_t launch(const bf16* x, int ldx, const Bf16Weight& wb, const EpiArgs& e, cudaStream_t stream) {
  using C = WgCfg<kBT>;
  static const cudaError_t attr =
      cudaFuncSetAttribute(wgmma_gemm_kernel<kBT>, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmem);
  if (attr != cudaSuccess) return attr;
  dim3 grid((wb.n + kBN - 1) / kBN, (e.m + kBT - 1) / kBT);
  wgmma_gemm_kernel<kBT><<<grid, kThreads, C::kSmem, stream>>>(x, ldx, wb, e);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_wgmma_bf16(const bf16* x, int ldx, const Bf16Weight& w, const EpiArgs& e,
                              int bt, cudaStream_t stream) {
  return bt == 256 ? launch<256>(x, ldx, w, e, stream) : launch<128>(x, ldx, w, e, stream);
}

}  // namespace detail
}  // namespace g4c::cuda

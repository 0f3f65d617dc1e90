// W4A16 and BF16 GEMM kernels (API and layouts in gemm.cuh).
#include "runtime/cuda/gemm.cuh"

#include "runtime/cuda/common.cuh"
#include "runtime/cuda/gemm_decode.cuh"
#include "runtime/cuda/gemm_epilogue.cuh"

#include <cuda.h>

#include <algorithm>

namespace g4c::cuda {
using namespace detail;

namespace {

constexpr int kDecodeWarps = 8;  // one 16-row tile per warp → 128 rows per block
constexpr int kDecodeSmemAct = 40 << 10;  // bytes of activation slice per block (≤ 48 KB total)

size_t align256(size_t v) { return (v + 255) & ~size_t(255); }

// ------------------------------------------------------------------ decode (m ≤ 16)
// Block: 8 warps, one 16-row tile each (128 rows); blockIdx.y = k split of `cps` 64-chunks
// (whole groups). The block's activation slice [m rows][cps·64] sits in smem (row pad 8
// elements: fragment loads hit 32 distinct banks), with per-(token, group) sums Σx; fragment
// rows ≥ m are zero registers. Weights stream with one 16-byte evict-first load per lane per
// 64-chunk through a rolling window of U loads in flight per warp (the first U issued before
// the activation fill).
//
// Dequantization is folded out of the inner loop: the A fragment is the exact bf16 value
// 128 + code (one shift + one LOP3 per 2 codes), the mma accumulates Σ(128+c)·x per group in
// fp32, and at the end of a group  acc += s·(Σ(128+c)·x − (128+z)·Σx)  (exact (c−z), fp32
// scale; the cancellation costs ~2^-24·16·√G ≈ 1e-5 relative). Split partials go to ws; the
// last block of a column (atomic ticket) sums them and runs the epilogue.
constexpr int kDecodeRows = kDecodeWarps * 16;

template <int MT, int U, int MINB>
__global__ void __launch_bounds__(kDecodeWarps * 32, MINB)
    w4_decode_kernel(const bf16* __restrict__ x, int ldx, Int4Weight w, EpiArgs e,
                     float* __restrict__ ws, int* __restrict__ counters, int cps) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int S = gridDim.y;
  const int split = blockIdx.y;
  const int kc_n = w.kp / 64;
  const int c_begin = split * cps;
  const int c_end = min(kc_n, c_begin + cps);
  const int k0 = c_begin * 64;
  const int klen = (c_end - c_begin) * 64;
  const int xstride = cps * 64 + 8;
  const int mrows = min(e.m, MT * 8);
  const int cpg = w.group / 64;  // chunks per group
  const int ngl = cps / cpg;     // groups per split (cps is a multiple of cpg)
  bf16* xs = reinterpret_cast<bf16*>(smem_raw);
  float* xsum = reinterpret_cast<float*>(smem_raw + size_t(mrows) * xstride * 2);  // [mrows][ngl]
  float* red = xsum + ((mrows * ngl + 3) & ~3);                                   // [128][16]
  __shared__ int s_last;

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  const int ntiles = (w.n + 15) / 16;
  const int tile = blockIdx.x * kDecodeWarps + warp;
  const int ngroups = w.kp / w.group;
  const bool have_tile = tile < ntiles;
  const int tc = min(tile, ntiles - 1);
  const uint4* qw = static_cast<const uint4*>(w.qweight) + (long(tc) * kc_n) * 32 + lane;
  const bf16* sc = w.scales + long(tc) * ngroups * 16 + 2 * g;
  const uint8_t* zp = w.zeros ? w.zeros + long(tc) * ngroups * 16 + 2 * g : nullptr;

  uint4 wv[U];
  uint32_t sv[U], zv[U];
  auto issue = [&](int u, int c) {
    wv[u] = __ldcs(qw + long(c) * 32);
    const int gi = c / cpg;
    sv[u] = *reinterpret_cast<const uint32_t*>(sc + gi * 16);
    zv[u] = zp ? *reinterpret_cast<const uint16_t*>(zp + gi * 16) : 0x0808u;
  };
  if (have_tile) {
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (c_begin + u < c_end) issue(u, c_begin + u);
  }

  // Activation slice → smem (zeros past k), and Σx per (token, group): the G/8 threads of a
  // group are consecutive lanes (G/8 ∈ {8, 16}), reduced with shuffles.
  const int gthreads = w.group / 8;
#pragma unroll
  for (int r = 0; r < MT * 8; ++r) {
    if (r >= mrows) break;
    for (int c8 = threadIdx.x * 8; c8 < ((klen + blockDim.x * 8 - 1) / (blockDim.x * 8)) * blockDim.x * 8;
         c8 += blockDim.x * 8) {
      uint4 v = make_uint4(0, 0, 0, 0);
      if (c8 < klen && k0 + c8 < w.k) v = *reinterpret_cast<const uint4*>(x + long(r) * ldx + k0 + c8);
      if (c8 < klen) *reinterpret_cast<uint4*>(xs + r * xstride + c8) = v;
      const bf162* h = reinterpret_cast<const bf162*>(&v);
      float sum = 0.f;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float2 f = __bfloat1622float2(h[i]);
        sum += f.x + f.y;
      }
      for (int o = gthreads / 2; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
      if ((threadIdx.x & (gthreads - 1)) == 0 && c8 < klen) xsum[r * ngl + c8 / w.group] = sum;
    }
  }
  __syncthreads();

  float acc[MT][4], tmp[MT][4];
#pragma unroll
  for (int j = 0; j < MT; ++j)
#pragma unroll
    for (int q = 0; q < 4; ++q) acc[j][q] = tmp[j][q] = 0.f;

  if (have_tile) {
    for (int c = c_begin; c < c_end; c += U) {
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int cc = c + u;
        if (cc >= c_end) break;
        const uint4 cw = wv[u];
        const uint32_t cs = sv[u], cz = zv[u];
        if (cc + U < c_end) issue(u, cc + U);  // keep U loads in flight
        const uint32_t words[4] = {cw.x, cw.y, cw.z, cw.w};
        const int kl = (cc - c_begin) * 64;
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) {
          uint32_t a[4];
#pragma unroll
          for (int i = 0; i < 4; ++i) a[i] = ((words[ks] >> (4 * i)) & 0x000F000Fu) | 0x43004300u;
#pragma unroll
          for (int j = 0; j < MT; ++j) {
            const int row = j * 8 + g;
            uint32_t b0 = 0, b1 = 0;
            if (row < mrows) {
              const bf16* xr = xs + row * xstride + kl + ks * 16 + 2 * t;
              b0 = *reinterpret_cast<const uint32_t*>(xr);
              b1 = *reinterpret_cast<const uint32_t*>(xr + 8);
            }
            mma_bf16(tmp[j], a, b0, b1);
          }
        }
        if ((cc - c_begin + 1) % cpg == 0) {  // group end: apply zero and scale in fp32
          const int gl = (cc - c_begin) / cpg;
          const float2 s2 = __bfloat1622float2(*reinterpret_cast<const bf162*>(&cs));
          const float zg = 128.f + float(cz & 0xFF), zg8 = 128.f + float((cz >> 8) & 0xFF);
#pragma unroll
          for (int j = 0; j < MT; ++j) {
            const int t0 = j * 8 + 2 * t, t1 = t0 + 1;
            const float x0 = t0 < mrows ? xsum[t0 * ngl + gl] : 0.f;
            const float x1 = t1 < mrows ? xsum[t1 * ngl + gl] : 0.f;
            acc[j][0] += s2.x * (tmp[j][0] - zg * x0);
            acc[j][1] += s2.x * (tmp[j][1] - zg * x1);
            acc[j][2] += s2.y * (tmp[j][2] - zg8 * x0);
            acc[j][3] += s2.y * (tmp[j][3] - zg8 * x1);
            tmp[j][0] = tmp[j][1] = tmp[j][2] = tmp[j][3] = 0.f;
          }
        }
      }
    }
  }
  // acc[j]: rows (g, g+8) of the warp tile × tokens (j·8 + 2t, +1).
#pragma unroll
  for (int j = 0; j < MT; ++j) {
    red[(warp * 16 + g) * 16 + j * 8 + 2 * t] = acc[j][0];
    red[(warp * 16 + g) * 16 + j * 8 + 2 * t + 1] = acc[j][1];
    red[(warp * 16 + g + 8) * 16 + j * 8 + 2 * t] = acc[j][2];
    red[(warp * 16 + g + 8) * 16 + j * 8 + 2 * t + 1] = acc[j][3];
  }
  __syncthreads();
  const int row0 = blockIdx.x * kDecodeRows;
  const int ntok = mrows;
  if (S > 1) {
    const long np = long(gridDim.x) * kDecodeRows;
    for (int i = threadIdx.x; i < kDecodeRows * ntok; i += blockDim.x) {
      const int r = i / ntok, tk = i % ntok;
      ws[(long(split) * np + row0 + r) * 16 + tk] = red[r * 16 + tk];
    }
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) s_last = (atomicAdd(&counters[blockIdx.x], 1) == S - 1);
    __syncthreads();
    if (!s_last) return;
    __threadfence();
    for (int i = threadIdx.x; i < kDecodeRows * ntok; i += blockDim.x) {
      const int r = i / ntok, tk = i % ntok;
      float v = 0.f;
      for (int s2 = 0; s2 < S; ++s2) {  // read and zero: the streaming kernels share ws
        float* p = &ws[(long(s2) * np + row0 + r) * 16 + tk];
        v += __ldcg(p);
        __stcg(p, 0.f);
      }
      red[r * 16 + tk] = v;
    }
    if (threadIdx.x == 0) counters[blockIdx.x] = 0;
    __syncthreads();
  }
  if (e.ep == 2) {
    for (int i = threadIdx.x; i < (kDecodeRows / 2) * ntok; i += blockDim.x) {
      const int tk = i / (kDecodeRows / 2), q = i % (kDecodeRows / 2);  // q: output in block
      const int r = (q >> 3) * 16 + (q & 7);
      epi_write(e, row0 + r, tk, red[r * 16 + tk], red[(r + 8) * 16 + tk]);
    }
  } else {
    for (int i = threadIdx.x; i < kDecodeRows * ntok; i += blockDim.x) {
      const int tk = i / kDecodeRows, r = i % kDecodeRows;  // consecutive threads → consecutive n
      epi_write(e, row0 + r, tk, red[r * 16 + tk], 0.f);
    }
  }
}

// ------------------------------------------------------------------ tile kernel (tensor cores)
// Block tile BN weight rows × BT tokens × 64 k, STAGES-deep cp.async pipeline. Warp tile
// MI·16 rows × NI·8 tokens. Y^T = W·X^T: A = weight rows (INT4: dequantized from the repacked
// fragments; BF16: ldmatrix from a swizzled smem tile), B = activation rows via ldmatrix.
template <bool INT4, int WN, int WT, int MI, int NI, int STAGES>
struct TileCfg {
  static constexpr int kThreads = WN * WT * 32;
  static constexpr int BN = WN * MI * 16;
  static constexpr int BT = WT * NI * 8;
  static constexpr int kXStage = BT * 64 * 2;                   // bytes
  static constexpr int kAStage = INT4 ? BN * 32 : BN * 64 * 2;  // bytes
  static constexpr int kStage = kXStage + kAStage;
  static constexpr int kSmem = kStage * STAGES;
};

__device__ __forceinline__ int swz(int row, int chunk) { return row * 64 + ((chunk ^ (row & 7)) << 3); }

template <bool INT4, int WN, int WT, int MI, int NI, int STAGES>
__global__ void __launch_bounds__(WN* WT * 32)
    tile_gemm_kernel(const bf16* __restrict__ x, int ldx, Int4Weight w4, Bf16Weight wb, EpiArgs e) {
  using C = TileCfg<INT4, WN, WT, MI, NI, STAGES>;
  static_assert(NI % 2 == 0, "NI even (x4 ldmatrix covers two token tiles)");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int K = INT4 ? w4.k : wb.k;
  const int kc_n = INT4 ? w4.kp / 64 : (K + 63) / 64;
  const int n0 = blockIdx.x * C::BN;
  const int tok0 = blockIdx.y * C::BT;
  const int tid = threadIdx.x;
  const int ntiles = INT4 ? (w4.n + 15) / 16 : 0;

  auto load_stage = [&](int stage, int kc) {
    unsigned char* base = smem_raw + stage * C::kStage;
    bf16* xs = reinterpret_cast<bf16*>(base);
    for (int i = tid; i < C::BT * 8; i += C::kThreads) {
      const int r = i >> 3, ch = i & 7;
      const int tok = tok0 + r, k = kc * 64 + ch * 8;
      const bool ok = tok < e.m && k < K;
      const bf16* src = ok ? x + long(tok) * ldx + k : x;
      cp_async16(xs + swz(r, ch), src, ok ? 16 : 0);
    }
    if constexpr (INT4) {
      unsigned char* as = base + C::kXStage;
      for (int i = tid; i < C::BN * 2; i += C::kThreads) {
        const int tt = i >> 5, lane = i & 31;
        const int tile = n0 / 16 + tt;
        const bool ok = tile < ntiles;
        const uint4* src = static_cast<const uint4*>(w4.qweight) +
                           (ok ? (long(tile) * kc_n + kc) * 32 + lane : 0);
        cp_async16(as + i * 16, src, ok ? 16 : 0);
      }
    } else {
      bf16* as = reinterpret_cast<bf16*>(base + C::kXStage);
      for (int i = tid; i < C::BN * 8; i += C::kThreads) {
        const int r = i >> 3, ch = i & 7;
        const int row = n0 + r, k = kc * 64 + ch * 8;
        const bool ok = row < wb.n && k < K;
        const bf16* src = ok ? wb.w + long(row) * wb.ldw + k : wb.w;
        cp_async16(as + swz(r, ch), src, ok ? 16 : 0);
      }
    }
  };

  const int warp = tid >> 5, lane = tid & 31;
  const int wn = warp % WN, wt = warp / WN;
  const int g = lane >> 2, t = lane & 3;
  float acc[MI][NI][4];
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int j = 0; j < NI; ++j) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.f;

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < kc_n) load_stage(s, s);
    cp_async_commit();
  }
  const int ngroups = INT4 ? w4.kp / w4.group : 1;
  for (int kc = 0; kc < kc_n; ++kc) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    {
      const int nk = kc + STAGES - 1;
      if (nk < kc_n) load_stage(nk % STAGES, nk);
      cp_async_commit();
    }
    const unsigned char* base = smem_raw + (kc % STAGES) * C::kStage;
    const bf16* xs = reinterpret_cast<const bf16*>(base);
    uint4 aw[MI];
    bf162 zlo[MI], zhi[MI], slo[MI], shi[MI];
    if constexpr (INT4) {
      const int gi = kc * 64 / w4.group;
#pragma unroll
      for (int i = 0; i < MI; ++i) {
        const int tl = wn * MI + i;
        aw[i] = reinterpret_cast<const uint4*>(base + C::kXStage)[tl * 32 + lane];
        const int tile = min(n0 / 16 + tl, ntiles - 1);
        const long so = (long(tile) * ngroups + gi) * 16 + 2 * g;
        const bf162 s2 = *reinterpret_cast<const bf162*>(w4.scales + so);
        slo[i] = __low2bfloat162(s2);
        shi[i] = __high2bfloat162(s2);
        const uint32_t zw = w4.zeros ? *reinterpret_cast<const uint16_t*>(w4.zeros + so) : 0x0808u;
        const float z0 = float(zw & 0xFF), z1 = float(zw >> 8);
        zlo[i] = __float2bfloat162_rn(128.f + z0);
        zhi[i] = __float2bfloat162_rn(128.f + z1);
      }
    }
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
      uint32_t a[MI][4];
#pragma unroll
      for (int i = 0; i < MI; ++i) {
        if constexpr (INT4) {
          const uint32_t word = ks == 0 ? aw[i].x : ks == 1 ? aw[i].y : ks == 2 ? aw[i].z : aw[i].w;
          dequant8(word, zlo[i], zhi[i], slo[i], shi[i], a[i]);
        } else {
          const bf16* as = reinterpret_cast<const bf16*>(base + C::kXStage);
          const int q = lane >> 3;
          const int r = (wn * MI + i) * 16 + (q & 1) * 8 + (lane & 7);
          ldmatrix_x4(a[i], as + swz(r, ks * 2 + (q >> 1)));
        }
      }
#pragma unroll
      for (int p = 0; p < NI / 2; ++p) {
        uint32_t b[4];
        const int q = lane >> 3;
        const int r = wt * NI * 8 + p * 16 + (q >> 1) * 8 + (lane & 7);
        ldmatrix_x4(b, xs + swz(r, ks * 2 + (q & 1)));
#pragma unroll
        for (int i = 0; i < MI; ++i) {
          mma_bf16(acc[i][2 * p], a[i], b[0], b[1]);
          mma_bf16(acc[i][2 * p + 1], a[i], b[2], b[3]);
        }
      }
    }
  }
  cp_async_wait<0>();

#pragma unroll
  for (int i = 0; i < MI; ++i) {
    const int prow = n0 + (wn * MI + i) * 16 + g;
#pragma unroll
    for (int j = 0; j < NI; ++j) {
      const int tok = tok0 + (wt * NI + j) * 8 + 2 * t;
      if (e.ep == 2) {
        epi_write(e, prow, tok, acc[i][j][0], acc[i][j][2]);
        epi_write(e, prow, tok + 1, acc[i][j][1], acc[i][j][3]);
      } else {
        epi_write(e, prow, tok, acc[i][j][0], 0.f);
        epi_write(e, prow, tok + 1, acc[i][j][1], 0.f);
        epi_write(e, prow + 8, tok, acc[i][j][2], 0.f);
        epi_write(e, prow + 8, tok + 1, acc[i][j][3], 0.f);
      }
    }
  }
}

template <bool INT4, int WN, int WT, int MI, int NI, int STAGES>
cudaError_t launch_tile(const bf16* x, int ldx, const Int4Weight& w4, const Bf16Weight& wb,
                        const EpiArgs& e, cudaStream_t stream) {
  using C = TileCfg<INT4, WN, WT, MI, NI, STAGES>;
  auto kern = tile_gemm_kernel<INT4, WN, WT, MI, NI, STAGES>;
  // Once per instantiation (process-wide; one device assumed).
  static const cudaError_t attr =
      cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmem);
  if (attr != cudaSuccess) return attr;
  const int n = INT4 ? ((w4.n + 15) / 16) * 16 : wb.n;
  dim3 grid((n + C::BN - 1) / C::BN, (e.m + C::BT - 1) / C::BT);
  kern<<<grid, C::kThreads, C::kSmem, stream>>>(x, ldx, w4, wb, e);
  return cudaGetLastError();
}

// 0: by shape (streaming kernels of gemm_decode.cu where measured faster, else this kernel with
// 8 loads in flight/lane, 2 blocks/SM); 1: this kernel, 4 loads, 3 blocks/SM; 2: this kernel,
// 8 loads, 2 blocks/SM.
int g_decode_variant = 0;
// 0: by shape; 1: mma.sync only; 2/3: wgmma 256/128 tokens (all warps load, dequantize and
// multiply); 4/5: warp-specialized persistent wgmma 256/128; 6/7: the same, one block per tile;
// 8: the choice by shape before the warp-specialized kernels (mma.sync / wgmma 256);
// 9/10: warp-specialized persistent 256/128 with the consumers draining wgmma every k step;
// 11/12: register-A warp-specialized persistent kernel (gemm_sm90_rs.cu) 256/128, weights by
// 8 bulk copies per operand and stage; 13/14: the same with one TMA box per operand and stage
// (the default since 2026-12-03: 1.2–1.5× the bulk-copy producer on every 12B shape, H200).
// 0: 13/14 with the tile and k splits of rs_plan (2026-12-03).
int g_tc_path = 0;
int g_persistent_blocks = 0;  // > 0: grid cap of the persistent kernels (tests)
int g_split_k = 0;            // 0: rs_plan's rule; 1: never; 2 / 4: forced (tests, benchmarks)

struct DecodePlan {
  int nblk, cps, splits;
};
int num_sms() {
  static int sms = [] {
    int dev = 0, v = 132;
    if (cudaGetDevice(&dev) == cudaSuccess) cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev);
    return v;
  }();
  return sms;
}
// Fill one wave (2 blocks of 8 warps per SM) with as few k splits as that allows; a split's
// activation slice must fit kDecodeSmemAct.
DecodePlan decode_plan(int m, const Int4Weight& w) {
  DecodePlan p;
  const int ntiles = (w.n + 15) / 16;
  p.nblk = (ntiles + kDecodeWarps - 1) / kDecodeWarps;
  const int kc_n = w.kp / 64;
  const int mrows = std::min(m, 16);
  const int cpg = w.group / 64;  // splits hold whole groups
  const int cap = std::max(cpg, (kDecodeSmemAct / (2 * mrows) - 8) / 64 / cpg * cpg);
  int splits = (kc_n + cap - 1) / cap;
  const int par = std::max(1, ((g_decode_variant == 1 ? 3 : 2) * num_sms()) / p.nblk);
  splits = std::max(splits, std::min(par, std::max(1, kc_n / (2 * cpg))));
  p.cps = ((kc_n + splits - 1) / splits + cpg - 1) / cpg * cpg;
  p.splits = (kc_n + p.cps - 1) / p.cps;
  return p;
}


// SMs the kernels of `stream` may use: the SM count of the stream's green context when it has
// one (DESIGN.md §5 emulation), else the device's. Sizes the persistent grids.
int stream_sms(cudaStream_t stream) {
  using GetGreen = CUresult (*)(CUstream, CUgreenCtx*);
  using GetRes = CUresult (*)(CUgreenCtx, CUdevResource*, CUdevResourceType);
  static const auto fns = [] {
    void* a = nullptr;
    void* b = nullptr;
    cudaDriverEntryPointQueryResult st{};
    if (cudaGetDriverEntryPointByVersion("cuStreamGetGreenCtx", &a, CUDA_VERSION, cudaEnableDefault, &st) != cudaSuccess ||
        st != cudaDriverEntryPointSuccess)
      a = nullptr;
    if (cudaGetDriverEntryPointByVersion("cuGreenCtxGetDevResource", &b, CUDA_VERSION, cudaEnableDefault, &st) != cudaSuccess ||
        st != cudaDriverEntryPointSuccess)
      b = nullptr;
    return std::make_pair(reinterpret_cast<GetGreen>(a), reinterpret_cast<GetRes>(b));
  }();
  int sms = num_sms();
  if (stream && fns.first && fns.second) {
    CUgreenCtx g = nullptr;
    CUdevResource r{};
    if (fns.first(reinterpret_cast<CUstream>(stream), &g) == CUDA_SUCCESS && g &&
        fns.second(g, &r, CU_DEV_RESOURCE_TYPE_SM) == CUDA_SUCCESS && r.sm.smCount > 0)
      sms = int(r.sm.smCount);
  }
  return sms;
}

// Tokens per tile of the warp-specialized kernels by default (n: weight rows, sms: the stream's
// SMs): 128 when m ≤ 128 (one tile covers every token); else 256 when 256-token tiles of 128 rows
// fill at least 0.9 of a wave, 128 otherwise. Measured on the 12B shapes with the register-A
// kernel and tensor-map weights (H200, 2026-12-03, BENCHMARKS.md "Prefill GEMM"): the rule picks
// the faster tile in all 32 cases (M = 512 / 2048 on 132 and 16 SMs) — e.g. M = 512 q 413 vs 296
// TFLOP/s at 128 (64 tiles of 256), full q 570 vs 430 at 256 (128 tiles of 256). The default
// path (0) uses rs_plan below instead, which agrees with it where it does not split k.
int ws_tile(int m, int n, int sms) {
  if (g_tc_path == 4 || g_tc_path == 6 || g_tc_path == 9 || g_tc_path == 11 || g_tc_path == 13) return 256;
  if (g_tc_path == 5 || g_tc_path == 7 || g_tc_path == 10 || g_tc_path == 12 || g_tc_path == 14) return 128;
  if (m <= 128) return 128;
  const long tiles256 = long((n + 127) / 128) * ((m + 255) / 256);
  return 10 * tiles256 >= 9L * sms ? 256 : 128;
}

// Tile (tokens) and k splits of the tensor-map register-A kernel: the (bt, ks) of least modelled
// time = waves × k steps per block × step cost + split cost, where a block's 64-wide k step costs
// 1 (bt 128) or 1.4 (bt 256) and a split-K tile 5 / 9 steps more (the partial sums through
// distributed shared memory): costs measured on the H200 (2026-12-03: ≈0.65 / 0.9 µs per step,
// ≈3 / 6 µs per split tile; BENCHMARKS.md). Waves count tiles per block (persistent grid, ks = 1)
// or clusters per resident-cluster slot; a split needs ≥ 8 k steps per block and must beat the
// best unsplit plan by 10% (on down at M = 2048 the model calls 256 × 2 a near tie; measured
// 413 vs 362 µs unsplit). Picks on the 12B shapes: full k 3840 → 512 at M = 2048: 128 × 2 (23.5
// µs vs 38.9 unsplit); at M = 512: q, o, down, full o 256 × 2, k/v 128 × 2, full k 128 × 4; the
// rest as ws_tile. Paths 13 / 14 force the tile (and no split unless gemm_set_split_k).
struct RsPlan {
  int bt, ks;
};
RsPlan rs_plan(int m, int n, int kp, int sms) {
  if (g_tc_path == 13 || g_tc_path == 14) return {g_tc_path == 13 ? 256 : 128, std::max(1, g_split_k)};
  const int kc = kp / 64;
  double best1 = 1e30, best = 1e30;
  RsPlan plan1{128, 1}, plan{128, 1};
  for (int bt : {256, 128}) {
    if (bt == 256 && m <= 128) continue;
    const long tiles = long((n + 127) / 128) * ((m + bt - 1) / bt);
    for (int ks : {1, 2, 4}) {
      long slots = sms;
      if (ks > 1) {
        if (kc < 8 * ks) continue;
        slots = std::min<long>(sms / ks, rs_split_clusters(bt, ks)) * ks;
        if (slots <= 0) continue;
      }
      const long waves = (tiles * ks + slots - 1) / slots;
      const double t =
          double(waves) * ((kc + ks - 1) / ks) * (bt == 256 ? 1.4 : 1.0) + (ks > 1 ? (bt == 256 ? 9 : 5) : 0);
      if (ks == 1 && t < best1) best1 = t, plan1 = {bt, 1};
      if (ks > 1 && t < best) best = t, plan = {bt, ks};
    }
  }
  if (g_split_k == 1) return plan1;
  if (g_split_k > 1) return best < 1e30 ? plan : plan1;
  return best < 0.9 * best1 ? plan : plan1;
}
int ws_blocks(int sms) {
  if (g_persistent_blocks > 0) return g_persistent_blocks;
  return (g_tc_path == 6 || g_tc_path == 7) ? 0 : sms;
}

}  // namespace

void gemm_set_tensor_core_path(int path) { g_tc_path = path; }
void gemm_set_persistent_blocks(int blocks) { g_persistent_blocks = blocks; }
void gemm_set_split_k(int ks) { g_split_k = ks; }
int gemm_split_clusters(int bt, int ks) { return rs_split_clusters(bt, ks); }
int gemm_stream_sms(cudaStream_t stream) { return stream_sms(stream); }

namespace {
// Tokens per wgmma block. Measured on the H200 (BENCHMARKS.md): 256-token tiles win for long k
// or wide n (BF16 down, full o, gate+up: +8–50%), 128 for the 3840→4096-class shapes.
int wgmma_tile(int m, int n, int k) {
  if (g_tc_path == 2) return 256;
  if (g_tc_path == 3) return 128;
  return (m >= 256 && (k >= 8192 || n >= 16384)) ? 256 : 128;
}
}  // namespace
void gemm_set_decode_variant(int v) { g_decode_variant = v; }
namespace {
bool g_decode_pdl = false;
bool g_decode_ims = false;
bool g_decode_det = false;
int g_decode_whole_tiles = -1;
DecodeTuning decode_tuning(int variant) {
  DecodeTuning t;
  t.variant = variant;
  t.pdl = g_decode_pdl;
  t.deterministic = g_decode_det;
  t.whole_tiles = g_decode_whole_tiles;
  return t;
}
}  // namespace
void gemm_set_decode_pdl(bool on) { g_decode_pdl = on; }
void gemm_set_decode_ims(bool on) { g_decode_ims = on; }
void gemm_set_decode_deterministic(bool on) { g_decode_det = on; }
void gemm_set_decode_whole_tiles(int mode) { g_decode_whole_tiles = mode; }

size_t w4a16_workspace_bytes(int m, const Int4Weight& w) {
  if (m > 16) return 0;
  const DecodePlan p = decode_plan(m, w);
  const size_t stream_ws = w4a16_decode_workspace_bytes(w, decode_tuning(-1));  // gemm_decode.cu
  if (p.splits <= 1) return stream_ws;
  return std::max(stream_ws, align256(size_t(p.splits) * p.nblk * kDecodeRows * 16 * 4) + align256(size_t(p.nblk) * 4));
}

cudaError_t w4a16_gemm(const bf16* x, int m, int ldx, const Int4Weight& w, Epilogue ep,
                       const GemmOut& out, void* workspace, size_t workspace_bytes,
                       cudaStream_t stream) {
  EpiArgs e{int(ep), out, w.n, m};
  if (m <= 0) return cudaSuccess;
  if (m <= 16) {
    if (g_decode_variant == 0) {  // streaming kernels (gemm_decode.cu) where measured faster
      int v = w4a16_decode_choice(m, w, stream_sms(stream));
      if (g_decode_ims && (v == 14 || v == 17)) v = v == 14 ? 18 : 19;  // the same plan, shifts on the FMA pipe
      if (v >= 0) return w4a16_decode(x, m, ldx, w, ep, out, workspace, workspace_bytes, decode_tuning(v), stream);
    }
    const DecodePlan p = decode_plan(m, w);
    float* ws = nullptr;
    int* counters = nullptr;
    if (p.splits > 1) {
      if (workspace_bytes < w4a16_workspace_bytes(m, w)) return cudaErrorInvalidValue;
      ws = static_cast<float*>(workspace);
      counters = reinterpret_cast<int*>(static_cast<unsigned char*>(workspace) +
                                        align256(size_t(p.splits) * p.nblk * kDecodeRows * 16 * 4));
    }
    dim3 grid(p.nblk, p.splits);
    const int mrows = std::min(m, 16);
    const size_t smem = size_t(mrows) * (p.cps * 64 + 8) * 2 +
                        size_t((mrows * (p.cps / (w.group / 64)) + 3) & ~3) * 4 + kDecodeRows * 16 * 4;
    if (m <= 8 && g_decode_variant == 1)
      w4_decode_kernel<1, 4, 3><<<grid, kDecodeWarps * 32, smem, stream>>>(x, ldx, w, e, ws, counters, p.cps);
    else if (m <= 8)
      w4_decode_kernel<1, 8, 2><<<grid, kDecodeWarps * 32, smem, stream>>>(x, ldx, w, e, ws, counters, p.cps);
    else
      w4_decode_kernel<2, 4, 2><<<grid, kDecodeWarps * 32, smem, stream>>>(x, ldx, w, e, ws, counters, p.cps);
    return cudaGetLastError();
  }
  if (m >= 64 && (g_tc_path == 0 || (g_tc_path >= 11 && g_tc_path <= 14))) {
    const int sms = stream_sms(stream);
    if (g_tc_path == 11 || g_tc_path == 12 || g_persistent_blocks > 0)  // no split-K with a grid cap
      return launch_rs_int4(x, ldx, w, e, ws_tile(m, w.n, sms), ws_blocks(sms), g_tc_path != 11 && g_tc_path != 12,
                            1, stream);
    const RsPlan plan = rs_plan(m, w.n, w.kp, sms);
    return launch_rs_int4(x, ldx, w, e, plan.bt, ws_blocks(sms), true, plan.ks, stream);
  }
  if (m >= 64 && ((g_tc_path >= 4 && g_tc_path <= 7) || g_tc_path == 9 || g_tc_path == 10)) {
    const int sms = stream_sms(stream);
    return launch_ws_int4(x, ldx, w, e, ws_tile(m, w.n, sms), ws_blocks(sms), g_tc_path >= 9, stream);
  }
  // Before the warp-specialized kernel (path 8), measured on the H200 (BENCHMARKS.md): the
  // all-warps wgmma INT4 kernel won on gate+up and down, the mma.sync kernel on 4k-class shapes.
  const bool wg_int4 = g_tc_path == 2 || g_tc_path == 3 ||
                       (g_tc_path == 8 && m >= 256 && (w.k >= 12288 || w.n >= 16384));
  if (m >= 64 && wg_int4) return launch_wgmma_int4(x, ldx, w, e, wgmma_tile(m, w.n, w.k), stream);
  // Warps 4 (rows) × 2 (tokens): each INT4 fragment is dequantized by 2 warps, not 4.
  return launch_tile<true, 4, 2, 2, 8, 4>(x, ldx, w, Bf16Weight{}, e, stream);
}

cudaError_t bf16_gemm(const bf16* x, int m, int ldx, const Bf16Weight& w, Epilogue ep,
                      const GemmOut& out, cudaStream_t stream) {
  EpiArgs e{int(ep), out, w.n, m};
  if (m <= 0) return cudaSuccess;
  if (m <= 16) {
    cudaError_t err = cudaSuccess;
    if (ep == Epilogue::SoftcapF32 && bf16_gemv_rd(x, m, ldx, w, out, &err, stream)) return err;
    return launch_tile<false, 4, 1, 2, 2, 4>(x, ldx, Int4Weight{}, w, e, stream);
  }
  if (m >= 64 && g_tc_path >= 4 && g_tc_path <= 7) {
    const int sms = stream_sms(stream);
    return launch_ws_bf16(x, ldx, w, e, ws_tile(m, w.n, sms), ws_blocks(sms), stream);
  }
  if (m >= 64 && g_tc_path != 1) return launch_wgmma_bf16(x, ldx, w, e, wgmma_tile(m, w.n, w.k), stream);
  return launch_tile<false, 2, 4, 4, 4, 3>(x, ldx, Int4Weight{}, w, e, stream);
}

}  // namespace g4c::cuda

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

// ------------------------------------------------------------------ BF16 tile kernel (tensor cores)
// Block tile BN weight rows × BT tokens × 64 k, STAGES-deep cp.async pipeline. Warp tile
// MI·16 rows × NI·8 tokens. Y^T = W·X^T: A = weight rows by ldmatrix from a swizzled smem tile,
// B = activation rows via ldmatrix.
template <int WN, int WT, int MI, int NI, int STAGES>
struct TileCfg {
  static constexpr int kThreads = WN * WT * 32;
  static constexpr int BN = WN * MI * 16;
  static constexpr int BT = WT * NI * 8;
  static constexpr int kXStage = BT * 64 * 2;  // bytes
  static constexpr int kAStage = BN * 64 * 2;  // bytes
  static constexpr int kStage = kXStage + kAStage;
  static constexpr int kSmem = kStage * STAGES;
};

__device__ __forceinline__ int swz(int row, int chunk) { return row * 64 + ((chunk ^ (row & 7)) << 3); }

template <int WN, int WT, int MI, int NI, int STAGES>
__global__ void __launch_bounds__(WN* WT * 32)
    tile_gemm_kernel(const bf16* __restrict__ x, int ldx, Bf16Weight wb, EpiArgs e) {
  using C = TileCfg<WN, WT, MI, NI, STAGES>;
  static_assert(NI % 2 == 0, "NI even (x4 ldmatrix covers two token tiles)");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int K = wb.k;
  const int kc_n = (K + 63) / 64;
  const int n0 = blockIdx.x * C::BN;
  const int tok0 = blockIdx.y * C::BT;
  const int tid = threadIdx.x;

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
    bf16* as = reinterpret_cast<bf16*>(base + C::kXStage);
    for (int i = tid; i < C::BN * 8; i += C::kThreads) {
      const int r = i >> 3, ch = i & 7;
      const int row = n0 + r, k = kc * 64 + ch * 8;
      const bool ok = row < wb.n && k < K;
      const bf16* src = ok ? wb.w + long(row) * wb.ldw + k : wb.w;
      cp_async16(as + swz(r, ch), src, ok ? 16 : 0);
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
    const bf16* as = reinterpret_cast<const bf16*>(base + C::kXStage);
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
      uint32_t a[MI][4];
#pragma unroll
      for (int i = 0; i < MI; ++i) {
        const int q = lane >> 3;
        const int r = (wn * MI + i) * 16 + (q & 1) * 8 + (lane & 7);
        ldmatrix_x4(a[i], as + swz(r, ks * 2 + (q >> 1)));
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

template <int WN, int WT, int MI, int NI, int STAGES>
cudaError_t launch_tile(const bf16* x, int ldx, const Bf16Weight& wb, const EpiArgs& e, cudaStream_t stream) {
  using C = TileCfg<WN, WT, MI, NI, STAGES>;
  auto kern = tile_gemm_kernel<WN, WT, MI, NI, STAGES>;
  // Once per instantiation (process-wide; one device assumed).
  static const cudaError_t attr =
      cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmem);
  if (attr != cudaSuccess) return attr;
  dim3 grid((wb.n + C::BN - 1) / C::BN, (e.m + C::BT - 1) / C::BT);
  kern<<<grid, C::kThreads, C::kSmem, stream>>>(x, ldx, wb, e);
  return cudaGetLastError();
}

int num_sms() {
  static int sms = [] {
    int dev = 0, v = 132;
    if (cudaGetDevice(&dev) == cudaSuccess) cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev);
    return v;
  }();
  return sms;
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

// Tile (tokens) and k splits of the register-A kernel: the (bt, ks) of least modelled time =
// waves × k steps per block × step cost + split cost, where a block's 64-wide k step costs 1
// (bt 128) or 1.4 (bt 256) and a split-K tile 5 / 9 steps more (the partial sums through
// distributed shared memory; costs fitted to measurements, BENCHMARKS.md "Prefill GEMM"). Waves
// count tiles per block (persistent grid, ks = 1) or clusters per resident-cluster slot; a split
// needs ≥ 8 k steps per block and must beat the best unsplit plan by 10%. 256-token tiles only
// when m > 128; fewer than 64 rows (decode batches) take one tile of 32 or 64 tokens
// (memory-bound: its k step costs what a 128-token one does).
struct RsPlan {
  int bt, ks;
};
RsPlan rs_plan(int m, int n, int kp, int sms) {
  const int kc = kp / 64;
  const int narrow = m <= 32 ? 32 : m < 64 ? 64 : 0;
  double best1 = 1e30, best = 1e30;
  RsPlan plan1{narrow ? narrow : 128, 1}, plan = plan1;
  for (int bt : {256, 128, 64, 32}) {
    if (narrow ? bt != narrow : (bt < 128 || (bt == 256 && m <= 128))) continue;
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
  return best < 0.9 * best1 ? plan : plan1;
}

// Tokens per wgmma block of the BF16 kernel: 256-token tiles for long k or wide n (BF16 down,
// full o, gate+up), 128 for the 3840 → 4096-class shapes (BENCHMARKS.md "Prefill GEMM").
int wgmma_tile(int m, int n, int k) { return (m >= 256 && (k >= 8192 || n >= 16384)) ? 256 : 128; }

DecodeTuning decode_tuning(const KernelOptions& ko) {
  DecodeTuning t;
  t.pdl = ko.pdl;
  t.deterministic = ko.deterministic;
  return t;
}

}  // namespace

int gemm_stream_sms(cudaStream_t stream) { return stream_sms(stream); }

bool w4a16_rows_take_wgmma(int m, int n, int sms) {
  if (m > kDecodeMaxRows) return true;
  return m > 16 && sms >= 64 && n >= 2048 && n <= 8192;
}

size_t w4a16_workspace_bytes(int m, const Int4Weight& w, const KernelOptions& ko) {
  if (m > kDecodeMaxRows) return 0;
  return w4a16_decode_workspace_bytes(w, decode_tuning(ko));  // gemm_decode.cu
}

cudaError_t w4a16_gemm_wgmma(const bf16* x, int m, int ldx, const Int4Weight& w, Epilogue ep, const GemmOut& out,
                             cudaStream_t stream) {
  if (m <= 0) return cudaSuccess;
  const int sms = stream_sms(stream);
  const RsPlan plan = rs_plan(m, w.n, w.kp, sms);
  return launch_rs_int4(x, ldx, w, EpiArgs{int(ep), out, w.n, m}, plan.bt, sms, plan.ks, stream);
}

cudaError_t w4a16_gemm(const bf16* x, int m, int ldx, const Int4Weight& w, Epilogue ep,
                       const GemmOut& out, void* workspace, size_t workspace_bytes,
                       cudaStream_t stream, const KernelOptions& ko) {
  if (m <= 0) return cudaSuccess;
  const int sms = stream_sms(stream);
  if (w4a16_rows_take_wgmma(m, w.n, sms)) return w4a16_gemm_wgmma(x, m, ldx, w, ep, out, stream);
  DecodeTuning t = decode_tuning(ko);
  t.variant = w4a16_decode_choice(m, w, sms);
  return w4a16_decode(x, m, ldx, w, ep, out, workspace, workspace_bytes, t, stream);
}

cudaError_t bf16_gemm(const bf16* x, int m, int ldx, const Bf16Weight& w, Epilogue ep,
                      const GemmOut& out, cudaStream_t stream) {
  EpiArgs e{int(ep), out, w.n, m};
  if (m <= 0) return cudaSuccess;
  if (m <= 16) return launch_tile<4, 1, 2, 2, 4>(x, ldx, w, e, stream);
  if (m >= 64) return launch_wgmma_bf16(x, ldx, w, e, wgmma_tile(m, w.n, w.k), stream);
  return launch_tile<2, 4, 4, 4, 3>(x, ldx, w, e, stream);
}

}  // namespace g4c::cuda

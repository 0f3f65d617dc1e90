// Flash-style attention on tensor cores (API in attention.cuh): the prefill-sized chunks at
// d 64 / 128, and attention(), which sends decode-sized chunks to attention_decode.cu and d 256 /
// 512 prefill to attention_sm90.cu.
//
// Block = NW warps × 16 query rows. A row is one (token, q head) pair; the G = hq/hkv heads of
// one kv head are consecutive rows, so one K/V tile in shared memory serves the whole GQA
// group. K/V tiles of 32 keys stream through a 2-stage cp.async pipeline; S = Q·Kᵀ and O += P·V
// use mma.m16n8k16 (bf16 operands, fp32 accumulators); softmax state (row max, row sum) is fp32
// in base-2 units. Key tiles outside [first visible key of the block's first query, last
// query] are never loaded (sliding windows skip them). Split-KV: blockIdx.z also picks a range
// of key tiles; partial (O, m, l) go to a workspace and a combine kernel merges.
#include "runtime/cuda/attention.cuh"

#include "runtime/cuda/attention_impl.cuh"
#include "runtime/cuda/gemm.cuh"  // gemm_stream_sms: the stream's (or, null, the device's) SMs
#include "runtime/cuda/common.cuh"

#include <algorithm>

namespace g4c::cuda {
using namespace detail;

namespace {

template <int D, int DV, int NW>
struct AttnCfg {
  static constexpr int kRows = NW * 16;
  static constexpr int kQ = kRows * D * 2;
  static constexpr int kK = kBK * D * 2;
  static constexpr int kV = kBK * DV * 2;
  static constexpr int kSmem = kQ + 2 * (kK + kV);
};

template <int D, int DV, int NW, bool F8>
__global__ void __launch_bounds__(NW * 32) attn_kernel(const AttnArgs a) {
  using C = AttnCfg<D, DV, NW>;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  bf16* qs = reinterpret_cast<bf16*>(smem_raw);
  bf16* ks0 = reinterpret_cast<bf16*>(smem_raw + C::kQ);
  bf16* vs0 = reinterpret_cast<bf16*>(smem_raw + C::kQ + 2 * C::kK);

  const AttnBlock blk = attn_block(a, C::kRows);
  if (blk.qt0 >= blk.qlen) return;
  const int r = blk.r, hk = blk.hk, dvp = blk.dvp;
  const int ctx = blk.ctx, qt0 = blk.qt0, ntq = blk.ntq, kend = blk.kend;
  const int t_lo = blk.t_lo, t_hi = blk.t_hi;
  const int G = a.g;
  const int tid = threadIdx.x;
  constexpr int kThreads = NW * 32;
  attn_load_q<D, C::kRows, kThreads>(qs, a, blk, tid);  // Q tile (zero rows past the chunk)
  // Slots of a tile's 32 keys, computed once per key (not per 16-byte chunk) into a
  // double-buffered table; buffer (tile − t_lo) & 1. −1: key past the block's last query.
  __shared__ long sslot[2][kBK];
  auto calc_slots = [&](int tile) { attn_calc_slots(sslot[(tile - t_lo) & 1], a.kv, r, tile, kend, tid); };
  auto load_kv = [&](int stage, int tile) {
    attn_load_kv<D, DV, kThreads, F8>(ks0 + stage * (kBK * D), vs0 + stage * (kBK * DV), a, hk, dvp, sslot[(tile - t_lo) & 1], tid);
  };

  const int warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, t = lane & 3, lq = lane >> 3;
  const int rho0 = warp * 16 + g, rho1 = rho0 + 8;
  const bool valid0 = rho0 / G < ntq, valid1 = rho1 / G < ntq;
  const int p0 = ctx + qt0 + rho0 / G, p1 = ctx + qt0 + rho1 / G;

  float o[DV / 8][4];
#pragma unroll
  for (int i = 0; i < DV / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;

  if (t_lo < t_hi) calc_slots(t_lo);
  if (t_lo + 1 < t_hi) calc_slots(t_lo + 1);
  __syncthreads();
  if (t_lo < t_hi) load_kv(0, t_lo);
  cp_async_commit();
  for (int tile = t_lo; tile < t_hi; ++tile) {
    const int st = (tile - t_lo) & 1;
    if (tile + 1 < t_hi) load_kv(st ^ 1, tile + 1);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    // Reuses tile's slot buffer: every thread issued tile's loads before the barrier above;
    // the barrier at the end of this iteration publishes it to load_kv(tile + 2).
    if (tile + 2 < t_hi) calc_slots(tile + 2);
    const bf16* ks = ks0 + st * (kBK * D);
    const bf16* vs = vs0 + st * (kBK * DV);

    float s[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.f;
#pragma unroll
    for (int kd = 0; kd < D / 16; ++kd) {
      uint32_t qa[4];
      ldmatrix_x4(qa, qs + swz<D>(warp * 16 + (lq & 1) * 8 + (lane & 7), kd * 2 + (lq >> 1)));
#pragma unroll
      for (int p = 0; p < 2; ++p) {
        uint32_t b[4];
        ldmatrix_x4(b, ks + swz<D>(p * 16 + (lq >> 1) * 8 + (lane & 7), kd * 2 + (lq & 1)));
        mma_bf16(s[2 * p], qa, b[0], b[1]);
        mma_bf16(s[2 * p + 1], qa, b[2], b[3]);
      }
    }
    float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < 4; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int j = tile * kBK + nt * 8 + 2 * t + (e & 1);
        const bool hi = e >> 1;
        const int p = hi ? p1 : p0;
        const bool vis = (hi ? valid1 : valid0) && j <= p && (a.window == 0 || j > p - a.window);
        const float v = vis ? s[nt][e] * a.scale_log2 : -INFINITY;
        s[nt][e] = v;
        if (hi) mx1 = fmaxf(mx1, v); else mx0 = fmaxf(mx0, v);
      }
#pragma unroll
    for (int off = 1; off <= 2; off <<= 1) {
      mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, off));
      mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, off));
    }
    const float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);
    const float b0 = mn0 == -INFINITY ? 0.f : mn0, b1 = mn1 == -INFINITY ? 0.f : mn1;
    const float c0 = exp2f(m0 - b0), c1 = exp2f(m1 - b1);
    float ls0 = 0.f, ls1 = 0.f;
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
      s[nt][0] = exp2f(s[nt][0] - b0);
      s[nt][1] = exp2f(s[nt][1] - b0);
      s[nt][2] = exp2f(s[nt][2] - b1);
      s[nt][3] = exp2f(s[nt][3] - b1);
      ls0 += s[nt][0] + s[nt][1];
      ls1 += s[nt][2] + s[nt][3];
    }
    l0 = l0 * c0 + ls0;
    l1 = l1 * c1 + ls1;
    m0 = mn0;
    m1 = mn1;
#pragma unroll
    for (int i = 0; i < DV / 8; ++i) {
      o[i][0] *= c0; o[i][1] *= c0; o[i][2] *= c1; o[i][3] *= c1;
    }
#pragma unroll
    for (int kk = 0; kk < kBK / 16; ++kk) {
      uint32_t pa[4];
      pa[0] = pack_bf162(s[2 * kk][0], s[2 * kk][1]);
      pa[1] = pack_bf162(s[2 * kk][2], s[2 * kk][3]);
      pa[2] = pack_bf162(s[2 * kk + 1][0], s[2 * kk + 1][1]);
      pa[3] = pack_bf162(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
      for (int nd = 0; nd < DV / 8; nd += 2) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, vs + swz<DV>(kk * 16 + (lq & 1) * 8 + (lane & 7), nd + (lq >> 1)));
        mma_bf16(o[nd], pa, b[0], b[1]);
        mma_bf16(o[nd + 1], pa, b[2], b[3]);
      }
    }
    __syncthreads();
  }
  cp_async_wait<0>();
#pragma unroll
  for (int off = 1; off <= 2; off <<= 1) {
    l0 += __shfl_xor_sync(0xffffffffu, l0, off);
    l1 += __shfl_xor_sync(0xffffffffu, l1, off);
  }
  const int dtot = DV * a.dv_parts;
#pragma unroll
  for (int half = 0; half < 2; ++half)
    if (half ? valid1 : valid0)
      attn_store_row<DV / 8>(a, blk, half ? rho1 : rho0, dtot, dvp * DV + 2 * t, half ? m1 : m0, half ? l1 : l0,
                             dvp == 0 && t == 0, [&](int nd, int e) { return o[nd][2 * half + e]; });
}

// One block per (token, head): merges the splits' partial states. Each thread owns 4 columns
// and folds the splits in online (running maximum, rescaled float4 sum and row sum), reading
// (m, l) itself as a broadcast load next to its float4 of partials, 8 splits' loads in flight:
// one round of L2 latency per 8 splits.
__global__ void attn_combine_kernel(const float* __restrict__ ws_o, const float2* __restrict__ ws_ml,
                                    int splits, int total_q, int hq, int d, bf16* __restrict__ out) {
  const long th = blockIdx.x;  // token * hq + head
  // Launched by PDL: the split kernel ahead of it may still be running (it triggers after its
  // main loop); the partials are read after the wait. The next kernel may launch at once.
  pdl_wait();
  pdl_trigger();
  const long stride = long(total_q) * hq;
  const int d4 = d / 4;
  const float4* o4 = reinterpret_cast<const float4*>(ws_o);
  for (int c = threadIdx.x; c < d4; c += blockDim.x) {
    float m = -INFINITY, L = 0.f;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 8
    for (int s = 0; s < splits; ++s) {
      const long row = s * stride + th;
      combine_fold(m, L, acc, ws_ml[row], o4[row * d4 + c]);
    }
    const uint2 pk = combine_out(L, acc);
    *reinterpret_cast<uint2*>(out + th * d + 4 * c) = pk;
  }
}

template <int D, int NW, bool F8>
cudaError_t launch_attn(const AttnArgs& a, int max_q_len, int num_requests, cudaStream_t stream) {
  constexpr int DV = D > 256 ? 256 : D;
  using C = AttnCfg<D, DV, NW>;
  auto kern = attn_kernel<D, DV, NW, F8>;
  static const cudaError_t attr =  // once per instantiation (one device assumed)
      cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmem);
  if (attr != cudaSuccess) return attr;
  const int tq = C::kRows / a.g;
  dim3 grid((max_q_len + tq - 1) / tq, num_requests * a.hkv, a.dv_parts * a.splits);
  kern<<<grid, NW * 32, C::kSmem, stream>>>(a);
  return cudaGetLastError();
}

// Blocks per row set that split the output columns: two at d = 512 (256 columns each), except in
// the cooperative decode kernel, which covers d = 512 in one block (K read once).
int column_parts(int d, bool coop) { return d > 256 && !coop ? 2 : 1; }
// Whether a prefill launch of the sm90 kernel splits the key ranges of its query blocks over
// 2-block clusters: at d = 256 with one KV split when both blocks of every query block fit one
// wave (faster for underfilled launches, slower where the SMs are already busy; BENCHMARKS.md).
bool sm90_split_keys(int d, const AttnBatch& b, int g, int hkv, int splits, cudaStream_t stream) {
  if (d != 256 || splits != 1) return false;
  const int tq = 128 / g;  // tokens per query block (two warpgroups of 64 rows)
  const long blocks = long((b.max_q_len + tq - 1) / tq) * b.num_requests * hkv;
  return 2 * blocks <= gemm_stream_sms(stream);
}

}  // namespace

int attention_num_splits(const AttnBatch& b, int hq, int hkv, int d, int window, int sms) {
  const int g = hq / hkv;
  if (b.max_q_len * g > 16) return 1;  // prefill-sized: enough blocks without splitting
  const long blocks = long(b.num_requests) * hkv * column_parts(d, /*coop=*/true);
  const int keys = window > 0 ? std::min(b.max_kv_len, window + b.max_q_len) : b.max_kv_len;
  const int tiles = std::max(1, (keys + kBK - 1) / kBK);
  const int device_sms = gemm_stream_sms(nullptr);
  const int nsm = sms > 0 ? sms : device_sms;
  // Cooperative kernel: at most one wave of resident blocks (3 per SM at d ≤ 256, 1 at d 512:
  // shared memory), down to one key tile per split (fitted to split sweeps). A CUDA graph
  // (captured with max_kv_len = 2^30) and an eager step then split the same keys alike
  // whenever the wave exceeds the tiles (bitwise-equal outputs).
  int s = int(long(attn_decode_coop_blocks_per_sm(d)) * nsm / blocks);
  // Where that many splits cannot run as one cluster per row set (all resident at once), the
  // splits merge in the combine kernel; with large partial states (rows · d ≥ 4096: 16 KB per
  // split and row set) a slightly smaller split count whose clusters do fit is faster (measured
  // at hd512; hd256 lost), its merge done in the kernel (attention_decode.cu). Whole device only.
  const long rowsets = long(b.num_requests) * hkv;
  if (long(d) * std::min(16, b.max_q_len * g) >= 4096 && nsm == device_sms && s >= 2 &&
      attn_decode_combine_cluster(d, s, rowsets, nullptr) == 0) {
    for (int sc = std::min(s - 1, 8); sc >= 2 && 4 * sc >= 3 * s; --sc)
      if (attn_decode_combine_cluster(d, sc, rowsets, nullptr) == sc) {
        s = sc;
        break;
      }
  }
  return std::max(1, std::min({s, tiles, 64}));
}

int attention_combine_cluster_size(const AttnBatch& b, int hq, int hkv, int d, int splits, cudaStream_t stream) {
  if (hkv <= 0 || hq % hkv != 0 || b.max_q_len * (hq / hkv) > 16) return 0;
  return attn_decode_combine_cluster(d, splits, long(b.num_requests) * hkv, stream);
}

int attention_cluster_capacity(int d, int splits, cudaStream_t stream) {
  return attn_decode_cluster_capacity(d, splits, stream);
}

size_t attention_workspace_bytes(const AttnBatch& b, int hq, int d, int splits) {
  if (splits <= 1) return 0;
  const size_t rows = size_t(splits) * b.total_q * hq;
  return ((rows * d * 4 + 255) & ~size_t(255)) + rows * 8;
}

cudaError_t attention(const bf16* q, int hq, int hkv, int d, const KvCache& kv, const AttnBatch& b,
                      int window, float scale, bf16* out, int splits, void* workspace, size_t workspace_bytes,
                      cudaStream_t stream, const KernelOptions& ko) {
  if (b.total_q <= 0 || b.num_requests <= 0) return cudaSuccess;
  if (!(scale > 0.f)) return cudaErrorInvalidValue;  // the sm90 kernel takes the maximum before scaling
  if (hkv <= 0 || hq % hkv != 0) return cudaErrorInvalidValue;
  const int g = hq / hkv;
  if (g > 16 || (16 % g) != 0) return cudaErrorInvalidValue;
  if (kv.k8 && !(kv.v8 && kv.k_scale && kv.v_scale)) return cudaErrorInvalidValue;
  splits = std::max(1, splits);
  if (splits > 1 && workspace_bytes < attention_workspace_bytes(b, hq, d, splits))
    return cudaErrorInvalidValue;
  AttnArgs a{};
  a.q = q;
  a.out = out;
  a.kv = kv;
  a.q_start = b.q_start;
  a.ctx_len = b.ctx_len;
  a.total_q = b.total_q;
  a.hq = hq;
  a.hkv = hkv;
  a.g = g;
  a.window = window;
  a.scale_log2 = scale * kLog2e;
  a.splits = splits;
  const bool coop = b.max_q_len * g <= 16;  // decode-sized: the cooperative kernel
  a.dv_parts = column_parts(d, coop);
  if (splits > 1) {
    const size_t rows = size_t(splits) * b.total_q * hq;
    a.ws_o = static_cast<float*>(workspace);
    a.ws_ml = reinterpret_cast<float2*>(static_cast<unsigned char*>(workspace) +
                                        ((rows * d * 4 + 255) & ~size_t(255)));
  }
  cudaError_t err;
  if (coop) {
    const int c = attention_combine_cluster_size(b, hq, hkv, d, splits, stream);
    err = launch_attn_decode_coop(a, d, b.num_requests, ko.pdl, c, stream);
    if (c > 0) return err;
  } else if (d == 256 || d == 512) {
    err = launch_attn_sm90(a, d, sm90_split_keys(d, b, g, hkv, splits, stream), b.max_q_len, b.num_requests, stream);
  } else switch (d) {  // prefill-sized, d 64 / 128
    case 64:
      err = a.kv.k8 ? launch_attn<64, 4, true>(a, b.max_q_len, b.num_requests, stream)
                    : launch_attn<64, 4, false>(a, b.max_q_len, b.num_requests, stream);
      break;
    case 128:
      err = a.kv.k8 ? launch_attn<128, 4, true>(a, b.max_q_len, b.num_requests, stream)
                    : launch_attn<128, 4, false>(a, b.max_q_len, b.num_requests, stream);
      break;
    default: return cudaErrorInvalidValue;
  }
  if (err != cudaSuccess || splits == 1) return err;
  // d/4 threads (one float4 of columns each, d is a multiple of 32 here), at most 128.
  cudaLaunchAttribute at;
  const cudaLaunchConfig_t cfg =
      pdl_launch_config(dim3(b.total_q * hq), dim3(std::min(128, d / 4)), 0, stream, ko.pdl, &at);
  return cudaLaunchKernelEx(&cfg, attn_combine_kernel, static_cast<const float*>(a.ws_o),
                            static_cast<const float2*>(a.ws_ml), splits, b.total_q, hq, d, out);
}

}  // namespace g4c::cuda

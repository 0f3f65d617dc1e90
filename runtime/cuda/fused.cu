// Small fused ops (API in fused.cuh).
#include "runtime/cuda/fused.cuh"

#include <algorithm>

#include "runtime/cuda/cluster.cuh"
#include "runtime/cuda/common.cuh"
#include "runtime/cuda/gemm.cuh"  // gemm_stream_sms

namespace g4c::cuda {
using namespace detail;

namespace {

constexpr int kNormThreads = 256;

__device__ __forceinline__ void load8(const bf16* p, float (&v)[8]) {
  const uint4 u = *reinterpret_cast<const uint4*>(p);
  const bf162* b = reinterpret_cast<const bf162*>(&u);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(b[i]);
    v[2 * i] = f.x;
    v[2 * i + 1] = f.y;
  }
}
__device__ __forceinline__ void store8(bf16* p, const float (&v)[8]) {
  uint4 u;
  uint32_t* w = reinterpret_cast<uint32_t*>(&u);
#pragma unroll
  for (int i = 0; i < 4; ++i) w[i] = pack_bf162(v[2 * i], v[2 * i + 1]);
  *reinterpret_cast<uint4*>(p) = u;
}

__global__ void embed_kernel(const int* __restrict__ ids, const bf16* __restrict__ table, int vocab,
                             int h, float scale, bf16* __restrict__ out) {
  const int tok = blockIdx.x;
  const int id = ids[tok];
  const bool ok = id >= 0 && id < vocab;
  for (int c = threadIdx.x * 8; c < h; c += blockDim.x * 8) {
    float v[8];
    if (ok) {
      load8(table + long(id) * h + c, v);
#pragma unroll
      for (int i = 0; i < 8; ++i) v[i] *= scale;
    } else {
#pragma unroll
      for (int i = 0; i < 8; ++i) v[i] = 0.f;
    }
    store8(out + long(tok) * h + c, v);
  }
}

// Launched by PDL (KernelOptions::pdl), a norm kernel lets the kernel after it launch at once — the
// decode GEMMs read only weights until their own wait, which returns when this grid is done —
// and waits for the kernel before it (which wrote its input) before reading anything. Without
// the attribute both instructions return at once.
__device__ __forceinline__ void fused_pdl_prologue() {
  pdl_trigger();
  pdl_wait();
}

// One block per (row, group of h = norm_dim columns).
__global__ void rmsnorm_kernel(const bf16* x, int ldx, const int* __restrict__ rows, int h,
                               const bf16* __restrict__ w, float eps, bf16* out, int ldo) {
  fused_pdl_prologue();
  __shared__ float scratch[32];
  const int i = blockIdx.x;
  const long row = rows ? rows[i] : i;
  const bf16* xr = x + row * ldx + long(blockIdx.y) * h;
  out += long(blockIdx.y) * h;
  float ss = 0.f;
  for (int c = threadIdx.x * 8; c < h; c += blockDim.x * 8) {
    float v[8];
    load8(xr + c, v);
#pragma unroll
    for (int k = 0; k < 8; ++k) ss += v[k] * v[k];
  }
  const float r = rsqrtf(block_sum(ss, scratch) / h + eps);
  for (int c = threadIdx.x * 8; c < h; c += blockDim.x * 8) {
    float v[8], wv[8] = {1.f, 1.f, 1.f, 1.f, 1.f, 1.f, 1.f, 1.f};
    load8(xr + c, v);
    if (w) load8(w + c, wv);
#pragma unroll
    for (int k = 0; k < 8; ++k) v[k] = v[k] * r * wv[k];
    store8(out + long(i) * ldo + c, v);
  }
}

__global__ void add_rmsnorm_kernel(const bf16* __restrict__ x, const bf16* __restrict__ w_post,
                                   bf16* __restrict__ hbuf, const bf16* __restrict__ ls,
                                   const bf16* __restrict__ w_next, bf16* __restrict__ out_next,
                                   int hdim, float eps) {
  fused_pdl_prologue();
  __shared__ float scratch[32];
  const long base = long(blockIdx.x) * hdim;
  float ss = 0.f;
  for (int c = threadIdx.x * 8; c < hdim; c += blockDim.x * 8) {
    float v[8];
    load8(x + base + c, v);
#pragma unroll
    for (int k = 0; k < 8; ++k) ss += v[k] * v[k];
  }
  const float r = rsqrtf(block_sum(ss, scratch) / hdim + eps);
  const float lsv = ls ? __bfloat162float(ls[0]) : 1.f;
  float ss2 = 0.f;
  for (int c = threadIdx.x * 8; c < hdim; c += blockDim.x * 8) {
    float v[8], wv[8], hv[8];
    load8(x + base + c, v);
    load8(w_post + c, wv);
    load8(hbuf + base + c, hv);
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const float tt = rbf(v[k] * r * wv[k]);
      float hn = rbf(hv[k] + tt);
      if (ls) hn = rbf(hn * lsv);
      hv[k] = hn;
      ss2 += hn * hn;
    }
    store8(hbuf + base + c, hv);
  }
  if (!w_next) return;
  const float r2 = rsqrtf(block_sum(ss2, scratch) / hdim + eps);
  for (int c = threadIdx.x * 8; c < hdim; c += blockDim.x * 8) {
    float hv[8], wv[8];
    load8(hbuf + base + c, hv);  // written by this same thread above
    load8(w_next + c, wv);
#pragma unroll
    for (int k = 0; k < 8; ++k) hv[k] = hv[k] * r2 * wv[k];
    store8(out_next + base + c, hv);
  }
}

// A head of D values into a warp: lane l holds elements l + 32 i (y0) and D/2 + l + 32 i (y1),
// i < D / 64 (the rotate-half pairs); returns the RMS norm's 1 / sqrt(mean(x²) + eps).
template <int D>
__device__ __forceinline__ float load_head_rms(const bf16* __restrict__ src, int lane, float eps,
                                               float (&y0)[D / 64], float (&y1)[D / 64]) {
  float ss = 0.f;
#pragma unroll
  for (int i = 0; i < D / 64; ++i) {
    const int j = lane + 32 * i;
    y0[i] = __bfloat162float(src[j]);
    y1[i] = __bfloat162float(src[j + D / 2]);
    ss += y0[i] * y0[i] + y1[i] * y1[i];
  }
  return rsqrtf(warp_sum(ss) / D + eps);
}

// A row of D values in a warp's lanes as load_head_rms holds them (elements lane + 32 i in y0,
// D/2 + lane + 32 i in y1; bf16 values) → FP8 codes at dst and the row's scale at *scale.
template <int P>
__device__ __forceinline__ void fp8_store_row(const float (&y0)[P], const float (&y1)[P], uint8_t* dst, float* scale,
                                              int lane) {
  float amax = 0.f;
#pragma unroll
  for (int i = 0; i < P; ++i) amax = fmaxf(amax, fmaxf(fabsf(y0[i]), fabsf(y1[i])));
  const Fp8Row row(amax);
#pragma unroll
  for (int i = 0; i < P; ++i) {
    dst[lane + 32 * i] = row.code(y0[i]);
    dst[P * 32 + lane + 32 * i] = row.code(y1[i]);
  }
  if (lane == 0) *scale = row.scale;
}

// A persistent grid of warps over the (token, head) items: heads [0, hq) are q, [hq, hq+hkv) k
// (+ v). The rotary inverse frequencies (a double-precision pow each) are formed once per block
// into shared memory: they depend on the pair index only.
// F8: K and V rows go to the FP8 cache f8 (codes + a scale per row, Fp8Row) instead of
// k_cache / v_cache.
template <int D, bool F8>
__global__ void qk_rope_kernel(const bf16* __restrict__ q, const bf16* __restrict__ k_raw,
                               const bf16* __restrict__ v_raw, const bf16* __restrict__ q_w,
                               const bf16* __restrict__ k_w, const int* __restrict__ positions,
                               const int64_t* __restrict__ slots, int n, int hq, int hkv,
                               float theta, int rotary_pairs, float eps, bf16* q_out,
                               bf16* __restrict__ k_cache, bf16* __restrict__ v_cache, Fp8Kv f8) {
  constexpr int P = D / 64;  // rotate-half pairs per lane
  // The attention after this kernel may launch now (KernelOptions::pdl): before it waits for this
  // grid it reads only keys already cached, never Q or the keys written here.
  pdl_trigger();
  __shared__ float inv_freq[D / 2];
  for (int j = threadIdx.x; j < D / 2; j += blockDim.x) {
    // inv_freq as HF computes it on the host in fp32: 1 / powf(θ, fp32(2j) / D).
    const float e = float(2 * j) / float(D);
    inv_freq[j] = 1.f / float(pow(double(theta), double(e)));
  }
  pdl_wait();  // launched by PDL (KernelOptions::pdl): q, k, v come from the GEMM before this kernel
  __syncthreads();
  const int lane = threadIdx.x & 31;
  const int heads = hq + hkv;
  const long items = long(n) * heads;
  const long wstride = long(gridDim.x) * (blockDim.x >> 5);
  for (long item = long(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5); item < items; item += wstride) {
    const int tok = int(item / heads), hd = int(item % heads);
    const bool isq = hd < hq;
    const int kh = hd - hq;
    const bf16* src = isq ? q + (long(tok) * hq + hd) * D : k_raw + (long(tok) * hkv + kh) * D;
    const bf16* w = isq ? q_w : k_w;
    const float pos = float(positions[tok]);
    const long slot = isq ? 0 : slots[tok];

    float y0[P], y1[P];
    const float r = load_head_rms<D>(src, lane, eps, y0, y1);
    bf16* dst = isq ? q_out + (long(tok) * hq + hd) * D : F8 ? nullptr : k_cache + (slot * hkv + kh) * D;
    float ky0[P], ky1[P];  // F8: the K row's bf16 values, quantized below
    __syncwarp();
#pragma unroll
    for (int i = 0; i < P; ++i) {
      const int j = lane + 32 * i;
      // HF: q_norm / k_norm output is a bf16 tensor; cos/sin are bf16 tensors; every product
      // and the sum of apply_rotary_pos_emb round to bf16 (fused.cuh).
      const float a = rbf(y0[i] * r * __bfloat162float(w[j]));
      const float b = rbf(y1[i] * r * __bfloat162float(w[j + D / 2]));
      float c = 1.f, s = 0.f;
      if (j < rotary_pairs) {
        const float ang = pos * inv_freq[j];
        sincosf(ang, &s, &c);
        c = rbf(c);
        s = rbf(s);
      }
      const bf16 y0 = __float2bfloat16(rbf(a * c) + rbf(-b * s)), y1 = __float2bfloat16(rbf(b * c) + rbf(a * s));
      if (F8 && !isq) {
        ky0[i] = __bfloat162float(y0);
        ky1[i] = __bfloat162float(y1);
      } else {
        dst[j] = y0;
        dst[j + D / 2] = y1;
      }
    }
    if (isq) continue;
    if constexpr (F8) fp8_store_row<P>(ky0, ky1, f8.k + (slot * hkv + kh) * D, f8.k_scale + slot * hkv + kh, lane);
    // v: rms_head without weight, no rope (k_eq_v: from k_raw).
    const bf16* vs = (v_raw ? v_raw : k_raw) + (long(tok) * hkv + kh) * D;
    float v0[P], v1[P];
    const float rv = load_head_rms<D>(vs, lane, eps, v0, v1);
    if constexpr (F8) {
#pragma unroll
      for (int i = 0; i < P; ++i) {
        v0[i] = rbf(v0[i] * rv);
        v1[i] = rbf(v1[i] * rv);
      }
      fp8_store_row<P>(v0, v1, f8.v + (slot * hkv + kh) * D, f8.v_scale + slot * hkv + kh, lane);
      continue;
    }
    bf16* vd = v_cache + (slot * hkv + kh) * D;
#pragma unroll
    for (int i = 0; i < P; ++i) {
      const int j = lane + 32 * i;
      vd[j] = __float2bfloat16(v0[i] * rv);
      vd[j + D / 2] = __float2bfloat16(v1[i] * rv);
    }
  }
}

// Keeps (v, j) when it beats (best, bi): larger, or equal with a smaller index.
__device__ __forceinline__ void argmax_merge(float& best, int& bi, float v, int j) {
  if (v > best || (v == best && j < bi)) {
    best = v;
    bi = j;
  }
}

// One row per cluster of gridDim.x blocks (grid (C, m), cluster (C, 1, 1)); block r of the
// cluster scans the row's r-th chunk of `chunk` entries (a multiple of 4) — with 16-byte loads,
// four in flight per thread, where kVec (row starts 16-byte aligned) — and rank 0 merges the
// blocks' (best, index) pairs through distributed shared memory.
// NaN never compares greater, so it ranks below every number; a row with nothing above −inf → 0.
template <bool kVec>
__global__ void __launch_bounds__(512) argmax_kernel(const float* __restrict__ logits, int n, long ldl, int chunk,
                                                     int* __restrict__ out) {
  __shared__ float sv[16];
  __shared__ int si[16];
  __shared__ float2 part;
  const uint32_t rank = cluster_rank();
  const float* row = logits + long(blockIdx.y) * ldl;
  const int begin = int(rank) * chunk, end = min(n, begin + chunk);
  float best = -INFINITY;
  int bi = 0x7fffffff;
  int j = begin + int(threadIdx.x);  // scalar scan from here (all of the chunk when !kVec)
  if constexpr (kVec) {
    // Per thread the indices rise, so a strict > keeps the first of equal values.
    const float4* r4 = reinterpret_cast<const float4*>(row);
    const int q0 = begin / 4, q1 = q0 + max(0, end - begin) / 4, B = int(blockDim.x);
    int q = q0 + int(threadIdx.x);
    auto take = [&](const float4 v, int at) {
      if (v.x > best) { best = v.x; bi = 4 * at; }
      if (v.y > best) { best = v.y; bi = 4 * at + 1; }
      if (v.z > best) { best = v.z; bi = 4 * at + 2; }
      if (v.w > best) { best = v.w; bi = 4 * at + 3; }
    };
    for (; q + 3 * B < q1; q += 4 * B) {
      const float4 a = r4[q], b = r4[q + B], c = r4[q + 2 * B], d = r4[q + 3 * B];
      take(a, q);
      take(b, q + B);
      take(c, q + 2 * B);
      take(d, q + 3 * B);
    }
    for (; q < q1; q += B) take(r4[q], q);
    j = 4 * q1 + int(threadIdx.x);  // the chunk's last (end − begin) mod 4 entries
  }
  for (; j < end; j += blockDim.x) {
    const float v = row[j];
    if (v > best) { best = v; bi = j; }
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    argmax_merge(best, bi, __shfl_xor_sync(0xffffffffu, best, o), __shfl_xor_sync(0xffffffffu, bi, o));
  const int w = threadIdx.x >> 5, l = threadIdx.x & 31;
  if (l == 0) { sv[w] = best; si[w] = bi; }
  __syncthreads();
  if (w == 0) {
    best = l < int(blockDim.x >> 5) ? sv[l] : -INFINITY;
    bi = l < int(blockDim.x >> 5) ? si[l] : 0x7fffffff;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
      argmax_merge(best, bi, __shfl_xor_sync(0xffffffffu, best, o), __shfl_xor_sync(0xffffffffu, bi, o));
    if (l == 0) part = make_float2(best, __int_as_float(bi));
  }
  cluster_arrive();  // every block's part written …
  cluster_wait();
  if (rank == 0 && w == 0) {
    const uint32_t C = gridDim.x;
    const float2 p = l < int(C) ? ld_cluster_f2(&part, uint32_t(l)) : make_float2(-INFINITY, __int_as_float(0x7fffffff));
    best = p.x;
    bi = __float_as_int(p.y);
#pragma unroll
    for (int o = 4; o > 0; o >>= 1)  // C ≤ 8
      argmax_merge(best, bi, __shfl_xor_sync(0xffffffffu, best, o), __shfl_xor_sync(0xffffffffu, bi, o));
    if (l == 0) out[blockIdx.y] = bi == 0x7fffffff ? 0 : bi;
  }
  cluster_arrive();  // … and no block leaves while rank 0 may still read its shared memory
  cluster_wait();
}

// Clusters of c blocks of argmax_kernel resident at once on `stream` (0: they cannot launch), cached
// per cluster size for the last SM count asked (a green context's stream has fewer SMs).
int argmax_resident_clusters(int c, cudaStream_t stream) {
  static int cached_sms[9] = {}, cached[9] = {};
  const int sms = gemm_stream_sms(stream);
  if (cached_sms[c] != sms) {
    int v = 0;
    cudaLaunchAttribute at;
    const cudaLaunchConfig_t cfg = cluster_launch_config(dim3(c, 1), dim3(512), 0, stream, dim3(c, 1, 1), &at);
    if (cudaOccupancyMaxActiveClusters(&v, argmax_kernel<true>, &cfg) != cudaSuccess) {
      (void)cudaGetLastError();
      v = 0;
    }
    cached_sms[c] = sms;
    cached[c] = v;
  }
  return cached[c];
}

}  // namespace

cudaError_t embed_gather_scale(const int* ids, int t, const bf16* table, int vocab, int h,
                               float scale, bf16* out, cudaStream_t stream) {
  if (t <= 0) return cudaSuccess;
  if (h % 8) return cudaErrorInvalidValue;
  embed_kernel<<<t, 128, 0, stream>>>(ids, table, vocab, h, scale, out);
  return cudaGetLastError();
}

cudaError_t rmsnorm(const bf16* x, int ldx, const int* rows, int n, int cols, int norm_dim,
                    const bf16* w, float eps, bf16* out, int ldo, cudaStream_t stream,
                    const KernelOptions& ko) {
  if (n <= 0) return cudaSuccess;
  if (norm_dim <= 0 || norm_dim % 8 || cols % norm_dim || ldx % 8 || ldo % 8)
    return cudaErrorInvalidValue;
  const int threads = norm_dim >= 2048 ? 256 : norm_dim >= 512 ? 64 : 32;
  cudaLaunchAttribute at;
  const cudaLaunchConfig_t cfg =
      pdl_launch_config(dim3(n, cols / norm_dim), dim3(threads), 0, stream, ko.pdl, &at);
  return cudaLaunchKernelEx(&cfg, rmsnorm_kernel, x, ldx, rows, norm_dim, w, eps, out, ldo);
}

cudaError_t add_rmsnorm(const bf16* x, const bf16* w_post, bf16* h, const bf16* layer_scalar,
                        const bf16* w_next, bf16* out_next, int n, int hdim, float eps,
                        cudaStream_t stream, const KernelOptions& ko) {
  if (n <= 0) return cudaSuccess;
  if (hdim % 8) return cudaErrorInvalidValue;
  cudaLaunchAttribute at;
  const cudaLaunchConfig_t cfg = pdl_launch_config(dim3(n), dim3(kNormThreads), 0, stream, ko.pdl, &at);
  return cudaLaunchKernelEx(&cfg, add_rmsnorm_kernel, x, w_post, h, layer_scalar, w_next, out_next, hdim, eps);
}

namespace {
template <bool F8>
cudaError_t qk_norm_rope_kv_write_impl(const bf16* q, const bf16* k_raw, const bf16* v_raw, const bf16* q_w,
                                       const bf16* k_w, const int* positions, const int64_t* slots, int n, int hq,
                                       int hkv, int d, float theta, int rotary_pairs, float eps, bf16* q_out,
                                       bf16* k_cache, bf16* v_cache, const Fp8Kv& f8, cudaStream_t stream,
                                       const KernelOptions& ko) {
  if (n <= 0) return cudaSuccess;
  const long warps = long(n) * (hq + hkv);
  const int threads = 256;
  // At most 4 blocks of 8 warps per SM of the stream (each loops over items): the per-block
  // inverse-frequency table is then formed a few hundred times, not once per 4 items.
  const long cap = 4L * gemm_stream_sms(stream);
  const unsigned blocks = unsigned(std::min(cap, (warps * 32 + threads - 1) / threads));
  cudaLaunchAttribute at;
  const cudaLaunchConfig_t cfg = pdl_launch_config(dim3(blocks), dim3(threads), 0, stream, ko.pdl, &at);
#define G4C_QK(D)                                                                                    \
  cudaLaunchKernelEx(&cfg, qk_rope_kernel<D, F8>, q, k_raw, v_raw, q_w, k_w, positions, slots, n, hq, hkv, \
                     theta, rotary_pairs, eps, q_out, k_cache, v_cache, f8)
  switch (d) {
    case 64: return G4C_QK(64);
    case 128: return G4C_QK(128);
    case 256: return G4C_QK(256);
    case 512: return G4C_QK(512);
    default: return cudaErrorInvalidValue;
  }
#undef G4C_QK
}
}  // namespace

cudaError_t qk_norm_rope_kv_write(const bf16* q, const bf16* k_raw, const bf16* v_raw, const bf16* q_w,
                                  const bf16* k_w, const int* positions, const int64_t* slots, int n, int hq, int hkv,
                                  int d, float theta, int rotary_pairs, float eps, bf16* q_out, bf16* k_cache,
                                  bf16* v_cache, cudaStream_t stream, const KernelOptions& ko) {
  return qk_norm_rope_kv_write_impl<false>(q, k_raw, v_raw, q_w, k_w, positions, slots, n, hq, hkv, d, theta,
                                           rotary_pairs, eps, q_out, k_cache, v_cache, Fp8Kv{}, stream, ko);
}

cudaError_t qk_norm_rope_kv_write(const bf16* q, const bf16* k_raw, const bf16* v_raw, const bf16* q_w,
                                  const bf16* k_w, const int* positions, const int64_t* slots, int n, int hq, int hkv,
                                  int d, float theta, int rotary_pairs, float eps, bf16* q_out, const Fp8Kv& cache,
                                  cudaStream_t stream, const KernelOptions& ko) {
  if (!cache.k || !cache.v || !cache.k_scale || !cache.v_scale) return cudaErrorInvalidValue;
  return qk_norm_rope_kv_write_impl<true>(q, k_raw, v_raw, q_w, k_w, positions, slots, n, hq, hkv, d, theta,
                                          rotary_pairs, eps, q_out, nullptr, nullptr, cache, stream, ko);
}

cudaError_t argmax_rows(const float* logits, int m, int n, long ldl, int* out, cudaStream_t stream) {
  if (m <= 0) return cudaSuccess;
  if (n <= 0) return cudaErrorInvalidValue;
  // Blocks per row: the largest power of two ≤ 8 (the portable cluster size) that keeps m·C
  // within the stream's SMs, at least 8192 entries per block, and whose clusters can launch.
  const int sms = gemm_stream_sms(stream);
  int c = 1;
  while (c < 8 && long(m) * 2 * c <= sms && long(n) >= 2L * c * 8192 && argmax_resident_clusters(2 * c, stream) > 0)
    c *= 2;
  const int chunk = int((long(n) + 4L * c - 1) / (4L * c)) * 4;
  const bool vec = reinterpret_cast<uintptr_t>(logits) % 16 == 0 && ldl % 4 == 0;
  cudaLaunchAttribute at;
  const cudaLaunchConfig_t cfg = cluster_launch_config(dim3(c, m), dim3(512), 0, stream, dim3(c, 1, 1), &at);
  return vec ? cudaLaunchKernelEx(&cfg, argmax_kernel<true>, logits, n, ldl, chunk, out)
             : cudaLaunchKernelEx(&cfg, argmax_kernel<false>, logits, n, ldl, chunk, out);
}

}  // namespace g4c::cuda

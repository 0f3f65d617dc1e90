// Simple kernels of the CUDA backend (API in extra_kernels.h). Grid-stride loops, fp32 math,
// one rounding to the output type.
#include "runtime/cuda_backend/extra_kernels.h"

#include <cmath>

#include "runtime/cuda/common.cuh"  // Fp8Row

namespace g4c::cudart {
namespace {

constexpr int kThreads = 256;
inline int blocks_for(long n) { return int(std::min<long>((n + kThreads - 1) / kThreads, 65535L * 4)); }

__device__ __forceinline__ float rbf(float v) { return __bfloat162float(__float2bfloat16(v)); }

// HF's softcap of bf16 logits: three bf16 ops (l · fp32(1/cap), tanh, · cap), each rounded.
__device__ __forceinline__ float softcap_bf16_ops(float v, float cap) {
  return rbf(rbf(tanhf(rbf(v * (1.f / cap)))) * cap);
}

__device__ __forceinline__ float ld(const void* p, long i, VType t) {
  switch (t) {
    case VType::BF16: return __bfloat162float(static_cast<const bf16*>(p)[i]);
    case VType::F32: return static_cast<const float*>(p)[i];
    default: return float(static_cast<const int*>(p)[i]);
  }
}
__device__ __forceinline__ void st(void* p, long i, VType t, float v) {
  switch (t) {
    case VType::BF16: static_cast<bf16*>(p)[i] = __float2bfloat16(v); break;
    case VType::F32: static_cast<float*>(p)[i] = v; break;
    default: static_cast<int*>(p)[i] = int(v); break;
  }
}

__global__ void binary_kernel(int op, const void* a, const void* b, void* y, long n, VType t) {
  for (long i = blockIdx.x * long(blockDim.x) + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x) {
    const float x = ld(a, i, t), z = ld(b, i, t);
    st(y, i, t, op == 0 ? x + z : x * z);
  }
}

__global__ void scale_kernel(const void* x, const bf16* scalar, float scale, void* y, long n, VType t) {
  const float s = scalar ? __bfloat162float(scalar[0]) : scale;
  for (long i = blockIdx.x * long(blockDim.x) + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x)
    st(y, i, t, ld(x, i, t) * s);
}

__global__ void unary_kernel(int op, const void* x, void* y, long n, float cap, VType t) {
  for (long i = blockIdx.x * long(blockDim.x) + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x) {
    const float v = ld(x, i, t);
    float r;
    if (op == 0)
      r = 0.5f * v * (1.f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
    else
      r = softcap_bf16_ops(rbf(v), cap);
    st(y, i, t, r);
  }
}

__global__ void round_softcap_kernel(float* x, int rows, int cols, long ld, float cap) {
  const long n = long(rows) * cols;
  for (long i = blockIdx.x * long(blockDim.x) + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x) {
    float* p = x + (i / cols) * ld + i % cols;
    const float v = rbf(*p);
    *p = cap > 0.f ? softcap_bf16_ops(v, cap) : v;
  }
}

__global__ void select_kernel(const void* x, const int* rows, int nrows, int cols, void* y, VType t) {
  const long n = long(nrows) * cols;
  for (long i = blockIdx.x * long(blockDim.x) + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x) {
    const long r = i / cols, c = i % cols;
    st(y, i, t, ld(x, long(rows[r]) * cols + c, t));
  }
}

// One thread per (row, head, pair j < rotary_pairs).
__global__ void rope_kernel(bf16* x, int n, int heads, int d, int pairs, const float* inv_freq,
                            const int* positions) {
  const long total = long(n) * heads * pairs;
  for (long i = blockIdx.x * long(blockDim.x) + threadIdx.x; i < total; i += long(gridDim.x) * blockDim.x) {
    const int j = int(i % pairs);
    const long rh = i / pairs;  // row * heads + head
    const int row = int(rh / heads);
    const float angle = float(positions[row]) * inv_freq[j];
    // HF bf16 run: cos/sin are bf16 tensors, each product and the sum round to bf16.
    const float c = rbf(cosf(angle)), s = rbf(sinf(angle));
    bf16* hp = x + rh * d;
    const float a = __bfloat162float(hp[j]), b = __bfloat162float(hp[j + d / 2]);
    hp[j] = __float2bfloat16(rbf(a * c) + rbf(-b * s));
    hp[j + d / 2] = __float2bfloat16(rbf(b * c) + rbf(a * s));
  }
}

__global__ void kv_write_kernel(const bf16* src, const int64_t* slots, int n, int row, bf16* cache) {
  const long total = long(n) * row;
  for (long i = blockIdx.x * long(blockDim.x) + threadIdx.x; i < total; i += long(gridDim.x) * blockDim.x) {
    const long r = i / row, c = i % row;
    cache[slots[r] * row + c] = src[i];
  }
}

// One warp per (token, kv head) row of d values: runtime/fp8.h's row quantizer (Fp8Row).
__global__ void kv_write_fp8_kernel(const bf16* src, const int64_t* slots, int n, int hkv, int d, uint8_t* codes,
                                    float* scales) {
  const long rows = long(n) * hkv;
  const int lane = threadIdx.x & 31;
  for (long w = (blockIdx.x * long(blockDim.x) + threadIdx.x) >> 5; w < rows; w += (long(gridDim.x) * blockDim.x) >> 5) {
    const bf16* x = src + w * d;
    float amax = 0.f;
    for (int c = lane; c < d; c += 32) amax = fmaxf(amax, fabsf(__bfloat162float(x[c])));
    const cuda::detail::Fp8Row row(amax);
    const long at = slots[w / hkv] * hkv + w % hkv;
    for (int c = lane; c < d; c += 32) codes[at * d + c] = row.code(__bfloat162float(x[c]));
    if (lane == 0) scales[at] = row.scale;
  }
}

template <class In, class Out>
__global__ void convert_kernel(const In* in, Out* out, long n) {
  for (long i = blockIdx.x * long(blockDim.x) + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x) {
    if constexpr (std::is_same_v<Out, bf16>)
      out[i] = __float2bfloat16(float(in[i]));
    else if constexpr (std::is_same_v<In, bf16>)
      out[i] = Out(__bfloat162float(in[i]));
    else
      out[i] = Out(in[i]);
  }
}

}  // namespace

cudaError_t binary(int op, const void* a, const void* b, void* y, long n, VType t, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  binary_kernel<<<blocks_for(n), kThreads, 0, s>>>(op, a, b, y, n, t);
  return cudaGetLastError();
}
cudaError_t scale(const void* x, const bf16* scalar, float sc, void* y, long n, VType t, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  scale_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, scalar, sc, y, n, t);
  return cudaGetLastError();
}
cudaError_t unary(int op, const void* x, void* y, long n, float cap, VType t, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  unary_kernel<<<blocks_for(n), kThreads, 0, s>>>(op, x, y, n, cap, t);
  return cudaGetLastError();
}
cudaError_t round_softcap_bf16(float* x, int rows, int cols, long ld, float cap, cudaStream_t s) {
  const long n = long(rows) * cols;
  if (n <= 0) return cudaSuccess;
  round_softcap_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, rows, cols, ld, cap);
  return cudaGetLastError();
}
cudaError_t select_rows(const void* x, const int* rows, int nrows, int cols, void* y, VType t, cudaStream_t s) {
  const long n = long(nrows) * cols;
  if (n <= 0) return cudaSuccess;
  select_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, rows, nrows, cols, y, t);
  return cudaGetLastError();
}
cudaError_t rope(bf16* x, int n, int heads, int d, int rotary_pairs, double theta, const int* positions,
                 cudaStream_t s) {
  const long total = long(n) * heads * rotary_pairs;
  if (total <= 0) return cudaSuccess;
  // inv_freq in fp32 as HF computes it; at most d/2 ≤ 256 entries, passed by a
  // small device table so the kernel needs no double math. The table is a static per (d, θ, R)
  // so the call stays capturable (no allocation while a stream is captured).
  struct Table {
    int d, r;
    double theta;
    float* dev;
  };
  static Table tables[16];
  static int ntables = 0;
  float* dev = nullptr;
  for (int i = 0; i < ntables; ++i)
    if (tables[i].d == d && tables[i].r == rotary_pairs && tables[i].theta == theta) dev = tables[i].dev;
  if (!dev) {
    if (ntables == 16) return cudaErrorInvalidValue;
    float host[512];
    // As HF computes inv_freq on the host in fp32: 1 / fp32pow(θ, fp32(2j) / d).
    for (int j = 0; j < rotary_pairs; ++j)
      host[j] = 1.f / float(std::pow(theta, double(float(2 * j) / float(d))));
    cudaError_t e = cudaMalloc(&dev, rotary_pairs * sizeof(float));
    if (e != cudaSuccess) return e;
    e = cudaMemcpy(dev, host, rotary_pairs * sizeof(float), cudaMemcpyHostToDevice);
    if (e != cudaSuccess) return e;
    tables[ntables++] = {d, rotary_pairs, theta, dev};
  }
  rope_kernel<<<blocks_for(total), kThreads, 0, s>>>(x, n, heads, d, rotary_pairs, dev, positions);
  return cudaGetLastError();
}
cudaError_t kv_write(const bf16* src, const int64_t* slots, int n, int row, bf16* cache, cudaStream_t s) {
  const long total = long(n) * row;
  if (total <= 0) return cudaSuccess;
  kv_write_kernel<<<blocks_for(total), kThreads, 0, s>>>(src, slots, n, row, cache);
  return cudaGetLastError();
}
cudaError_t kv_write_fp8(const bf16* src, const int64_t* slots, int n, int hkv, int d, uint8_t* codes, float* scales,
                         cudaStream_t s) {
  const long threads = long(n) * hkv * 32;
  if (threads <= 0) return cudaSuccess;
  kv_write_fp8_kernel<<<blocks_for(threads), kThreads, 0, s>>>(src, slots, n, hkv, d, codes, scales);
  return cudaGetLastError();
}
cudaError_t f32_to_bf16(const float* in, bf16* out, long n, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  convert_kernel<float, bf16><<<blocks_for(n), kThreads, 0, s>>>(in, out, n);
  return cudaGetLastError();
}
cudaError_t bf16_to_f32(const bf16* in, float* out, long n, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  convert_kernel<bf16, float><<<blocks_for(n), kThreads, 0, s>>>(in, out, n);
  return cudaGetLastError();
}
cudaError_t i32_to_f32(const int* in, float* out, long n, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  convert_kernel<int, float><<<blocks_for(n), kThreads, 0, s>>>(in, out, n);
  return cudaGetLastError();
}
cudaError_t f32_to_i32(const float* in, int* out, long n, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  convert_kernel<float, int><<<blocks_for(n), kThreads, 0, s>>>(in, out, n);
  return cudaGetLastError();
}

}  // namespace g4c::cudart

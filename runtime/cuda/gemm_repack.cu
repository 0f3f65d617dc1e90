// Load-time INT4 / BF16 weight layouts of the GEMM kernels (API and layouts in gemm.cuh): the
// lab's row-major nibbles → 16-row mma tiles, scales/zeros beside them, gate/up interleaving,
// and the dequantization back to BF16 (tests, dequantize-then-cuBLAS baselines). Moved out of
// gemm.cu unchanged.
#include "runtime/cuda/gemm.cuh"

#include "runtime/cuda/common.cuh"

namespace g4c::cuda {
using namespace detail;

namespace {

size_t align256(size_t v) { return (v + 255) & ~size_t(255); }

// ------------------------------------------------------------------ repack
__global__ void repack_qweight_kernel(const uint8_t* __restrict__ qa, const uint8_t* __restrict__ qb,
                                      int n_src, int kp, uint32_t* __restrict__ dst, int ntiles) {
  const int kc_n = kp / 64;
  const long total = long(ntiles) * kc_n * 32 * 4;
  for (long idx = blockIdx.x * long(blockDim.x) + threadIdx.x; idx < total;
       idx += long(gridDim.x) * blockDim.x) {
    const int word = int(idx & 3);
    const int lane = int((idx >> 2) & 31);
    const long tc = idx >> 7;
    const int kc = int(tc % kc_n);
    const int tile = int(tc / kc_n);
    const int g = lane >> 2, t = lane & 3;
    uint32_t out = 0;
#pragma unroll
    for (int nib = 0; nib < 8; ++nib) {
      const int i = nib & 3, hi = nib >> 2;
      const int rr = g + 8 * (i & 1);
      const int k = kc * 64 + word * 16 + (i >> 1) * 8 + 2 * t + hi;
      const uint8_t* src = qa;
      int row;
      if (qb) {  // gate/up interleave: rows 0-7 of the tile from gate, 8-15 from up
        row = tile * 8 + (rr & 7);
        src = rr < 8 ? qa : qb;
      } else {
        row = tile * 16 + rr;
      }
      uint32_t code = 0;
      if (row < n_src) code = (src[long(row) * (kp / 2) + (k >> 1)] >> (4 * (k & 1))) & 15u;
      out |= code << (4 * nib);
    }
    dst[idx] = out;
  }
}

__global__ void repack_scales_kernel(const void* sa, const void* sb, const uint8_t* za,
                                     const uint8_t* zb, bool sbf16, int n_src, int ngroups,
                                     bf16* __restrict__ sdst, uint8_t* __restrict__ zdst,
                                     int ntiles) {
  const long total = long(ntiles) * ngroups * 16;
  for (long idx = blockIdx.x * long(blockDim.x) + threadIdx.x; idx < total;
       idx += long(gridDim.x) * blockDim.x) {
    const int pos = int(idx & 15);
    const int rr = (pos >> 1) + ((pos & 1) << 3);  // pairs (row g, row g+8) adjacent
    const long tg = idx >> 4;
    const int gi = int(tg % ngroups);
    const int tile = int(tg / ngroups);
    int row;
    bool second = false;
    if (sb) {
      row = tile * 8 + (rr & 7);
      second = rr >= 8;
    } else {
      row = tile * 16 + rr;
    }
    float s = 0.f;
    uint8_t z = 8;
    if (row < n_src) {
      const void* sp = second ? sb : sa;
      const long o = long(row) * ngroups + gi;
      s = sbf16 ? __bfloat162float(static_cast<const bf16*>(sp)[o])
                : __half2float(static_cast<const __half*>(sp)[o]);
      const uint8_t* zp = second ? zb : za;
      if (zp) z = zp[o];
    }
    sdst[idx] = __float2bfloat16(s);
    if (zdst) zdst[idx] = z;
  }
}

__global__ void interleave_bf16_kernel(const bf16* __restrict__ gate, const bf16* __restrict__ up,
                                       int f, int k, bf16* __restrict__ dst) {
  const long total = 2L * f * k;
  for (long idx = blockIdx.x * long(blockDim.x) + threadIdx.x; idx < total;
       idx += long(gridDim.x) * blockDim.x) {
    const int col = int(idx % k);
    const long prow = idx / k;
    const int tile = int(prow >> 4), rr = int(prow & 15);
    const long row = tile * 8L + (rr & 7);
    dst[idx] = (rr < 8 ? gate : up)[row * k + col];
  }
}

// Packed row prow, column k → bf16((code − z)·s) (out row = packed row).
__global__ void dequant_kernel(Int4Weight w, bf16* __restrict__ out) {
  const long total = long(w.n) * w.k;
  const int kc_n = w.kp / 64, ngroups = w.kp / w.group;
  for (long idx = blockIdx.x * long(blockDim.x) + threadIdx.x; idx < total;
       idx += long(gridDim.x) * blockDim.x) {
    const int prow = int(idx / w.k), k = int(idx % w.k);
    const int tile = prow >> 4, rr = prow & 15;
    const int kc = k >> 6, word = (k >> 4) & 3, kin = k & 15;
    const int g = rr & 7, hi8 = rr >> 3;
    const int half = kin >> 3, t = (kin & 7) >> 1, odd = kin & 1;
    const int lane = g * 4 + t;
    const int nib = (half * 2 + hi8) + 4 * odd;
    const uint32_t wd =
        static_cast<const uint32_t*>(w.qweight)[((long(tile) * kc_n + kc) * 32 + lane) * 4 + word];
    const int code = (wd >> (4 * nib)) & 15;
    const long so = (long(tile) * ngroups + k / w.group) * 16 + 2 * (rr & 7) + (rr >> 3);
    const float z = w.zeros ? float(w.zeros[so]) : 8.f;
    out[idx] = __float2bfloat16(__bfloat162float(__float2bfloat16(float(code) - z)) *
                                __bfloat162float(w.scales[so]));
  }
}

}  // namespace

size_t int4_repacked_bytes(int n, int k, int group, bool asymmetric) {
  const int kp = (k + group - 1) / group * group;
  const size_t ntiles = (n + 15) / 16;
  const size_t q = ntiles * (kp / 64) * 512;
  const size_t s = ntiles * (kp / group) * 16;
  return align256(q) + align256(s * 2) + (asymmetric ? align256(s) : 0);
}

Int4Weight int4_repack(const uint8_t* qweight, const void* scales, const uint8_t* zeros,
                       const uint8_t* up_qweight, const void* up_scales, const uint8_t* up_zeros,
                       bool scales_are_bf16, int n, int k, int group, void* dst,
                       cudaStream_t stream) {
  Int4Weight w;
  const bool pair = up_qweight != nullptr;
  w.n = pair ? 2 * n : n;
  w.k = k;
  w.group = group;
  w.kp = (k + group - 1) / group * group;
  w.gate_up = pair;
  const int ntiles = (w.n + 15) / 16;
  const int ngroups = w.kp / group;
  const size_t q = size_t(ntiles) * (w.kp / 64) * 512;
  const size_t s = size_t(ntiles) * ngroups * 16;
  unsigned char* base = static_cast<unsigned char*>(dst);
  w.qweight = base;
  bf16* sdst = reinterpret_cast<bf16*>(base + align256(q));
  uint8_t* zdst = zeros ? base + align256(q) + align256(s * 2) : nullptr;
  w.scales = sdst;
  w.zeros = zdst;
  repack_qweight_kernel<<<1024, 256, 0, stream>>>(qweight, up_qweight, n, w.kp,
                                                  static_cast<uint32_t*>(dst), ntiles);
  repack_scales_kernel<<<256, 256, 0, stream>>>(scales, up_scales, zeros, up_zeros, scales_are_bf16,
                                                n, ngroups, sdst, zdst, ntiles);
  return w;
}

void interleave_gate_up_bf16(const bf16* gate, const bf16* up, int f, int k, bf16* dst,
                             cudaStream_t stream) {
  interleave_bf16_kernel<<<1024, 256, 0, stream>>>(gate, up, f, k, dst);
}

cudaError_t int4_dequantize(const Int4Weight& w, bf16* out, cudaStream_t stream) {
  dequant_kernel<<<2048, 256, 0, stream>>>(w, out);
  return cudaGetLastError();
}

}  // namespace g4c::cuda

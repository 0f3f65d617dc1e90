// Per-row INT8 table kernels (API: gemm_w8.cuh): the LM head GEMM (w8a16_gemm_f32) and the
// embedding gather (embed_gather_int8).
//
// LM head. The work is streaming the table (1 GB at 262144 × 3840) once per 64 rows of x, so the
// kernel is built around that stream:
//  - a block owns 128 table rows (8 warps × 16 rows, the mma M dimension) and up to 64 rows of x
//    (the mma N dimension, 8 tokens per tile; MT tiles, MT ∈ {1, 2, 4, 8} picked from m so decode
//    batches pay no padding past the next power of two); grid = (token tiles, row tiles), token
//    tiles fastest, so blocks that share a row tile run together and share it in L2 when m > 64;
//  - k advances in 128-wide chunks through a 3- or 4-stage cp.async ring holding the chunk's codes
//    [128 rows][128 B] and its x rows [8·MT][128 bf16] (both XOR-swizzled by 16-byte unit so the
//    fragment reads below are bank-conflict free); 32–48 KB of codes per block are in flight;
//  - no split of k: every output element is one warp's accumulator, summed in a fixed order, so
//    the result is deterministic without a workspace or atomics.
// Fragments. Within a 64-wide k slice, lane (g = lane/4, t = lane%4) reads 16 consecutive codes of
// table rows g and g+8 (bytes 16t … 16t+15) and the 16 matching x values of token g of each tile.
// The sum over k does not depend on the order of k, so the mma's logical k slots of lane t in k16
// step s — (2t, 2t+1) and (2t+8, 2t+9) — are mapped to physical k 16t+4s+(0, 1) and 16t+4s+(2, 3):
// A register pairs are code bytes (0,1) and (2,3) of word s, B register pairs are x words 2s and
// 2s+1 of the same 32 bytes, and neither side needs a shuffle or ldmatrix.
// Numerics: int8 → bf16 is exact (|code| ≤ 127 has ≤ 7 significant bits; see int8x4_to_bf16), so
// the tensor cores form the exact products x·code and add them in fp32; y = acc · scale[j] is one
// fp32 rounding more.
#include "runtime/cuda/common.cuh"
#include "runtime/cuda/gemm_decode_common.cuh"
#include "runtime/cuda/gemm_w8.cuh"

namespace g4c::cuda {
namespace detail {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kTileRows = kWarps * 16;  // table rows per block
constexpr int kChunk = 128;             // k per pipeline stage
constexpr int kMaxTokens = 64;          // x rows per block (gridDim.x tiles the rest)

template <int MT>
struct W8Config {
  static constexpr int kTokens = MT * 8;
  // Three stages at 64 tokens keep two blocks per SM (2 × 96 KB); 4 elsewhere (≤ 96 KB).
  static constexpr int kStages = MT == 8 ? 3 : 4;
  static constexpr int kCodeBytes = kTileRows * kChunk;  // [128 rows][128 codes]
  static constexpr int kXRowBytes = kChunk * 2;          // one x row's chunk, bf16
  static constexpr int kStageBytes = kCodeBytes + kTokens * kXRowBytes;
  static constexpr int kSmem = kStages * kStageBytes;
};

// Four int8 codes (byte i of w = code i) as two bf16x2 registers: lo = (code 0, code 1), hi =
// (code 2, code 3), low half first. A code c has low 7 bits l and sign bit b (c = l − 128·b), so
// c = (128 + l) − (128 + 128·b): 0x4300 | l is bf16 128 + l (exact: the bf16 ulp in [128, 256) is
// 1) and 0x4300 | b << 7 is bf16 128 or 256; the difference is an integer in [−128, 127], exact.
__device__ __forceinline__ void int8x4_to_bf16(uint32_t w, uint32_t& lo, uint32_t& hi) {
  const uint32_t v = __byte_perm(w, 0, 0x3120);  // bytes (c0, c2, c1, c3): halves c0 | c2 << 8, c1 | c3 << 8
  const uint32_t u = v >> 8;                      // halves c2 | …, c3 | …
  uint32_t mag_lo = (v & 0x007F007Fu) | 0x43004300u, off_lo = (v & 0x00800080u) | 0x43004300u;
  uint32_t mag_hi = (u & 0x007F007Fu) | 0x43004300u, off_hi = (u & 0x00800080u) | 0x43004300u;
  const bf162 l = __hsub2(*reinterpret_cast<bf162*>(&mag_lo), *reinterpret_cast<bf162*>(&off_lo));
  const bf162 h = __hsub2(*reinterpret_cast<bf162*>(&mag_hi), *reinterpret_cast<bf162*>(&off_hi));
  lo = *reinterpret_cast<const uint32_t*>(&l);
  hi = *reinterpret_cast<const uint32_t*>(&h);
}

// Issues the copies of k chunk `chunk` into the stage at shared address `stage`: codes of rows
// row0 … row0+127 and x rows tok0 … tok0+8·MT−1. Rows past n or m and columns past k are zero
// filled (src size 0), so they add exact zeros. Swizzle: 16-byte unit u of code row r sits at
// unit u ^ ((r & 1) << 2), of x row r at u ^ (r & 1).
template <int MT>
__device__ __forceinline__ void w8_load_stage(uint32_t stage, int chunk, const bf16* __restrict__ x, int m, int ldx,
                                              int tok0, const int8_t* __restrict__ q, int n, int k, int row0) {
  using C = W8Config<MT>;
  const int tid = threadIdx.x;
  const int kc = chunk * kChunk;
#pragma unroll
  for (int j = 0; j < kTileRows * (kChunk / 16) / kThreads; ++j) {
    const int i = tid + j * kThreads;
    const int r = i >> 3, u = i & 7;
    const int row = row0 + r, col = kc + u * 16;
    const bool ok = row < n && col < k;
    cp_async16_s(stage + r * kChunk + ((u ^ ((r & 1) << 2)) << 4), ok ? q + long(row) * k + col : q, ok ? 16u : 0u);
  }
  constexpr int kXUnits = C::kTokens * (kChunk / 8);
  const uint32_t xs = stage + C::kCodeBytes;
#pragma unroll
  for (int j = 0; j < (kXUnits + kThreads - 1) / kThreads; ++j) {
    const int i = tid + j * kThreads;
    if (kXUnits % kThreads == 0 || i < kXUnits) {
      const int r = i >> 4, u = i & 15;
      const int tok = tok0 + r, col = kc + u * 8;
      const bool ok = tok < m && col < k;
      cp_async16_s(xs + r * C::kXRowBytes + ((u ^ (r & 1)) << 4), ok ? x + long(tok) * ldx + col : x, ok ? 16u : 0u);
    }
  }
}

template <int MT>
__global__ void __launch_bounds__(kThreads, 2)
    w8a16_kernel(const bf16* __restrict__ x, int m, int ldx, const int8_t* __restrict__ q,
                 const float* __restrict__ scale, int n, int k, float* __restrict__ y, long ldy) {
  using C = W8Config<MT>;
  extern __shared__ __align__(128) uint8_t smem[];
  const uint32_t sbase = smem_u32(smem);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int tok0 = blockIdx.x * C::kTokens;
  const int row0 = blockIdx.y * kTileRows;
  const int nk = (k + kChunk - 1) / kChunk;

#pragma unroll
  for (int s = 0; s < C::kStages - 1; ++s) {
    if (s < nk) w8_load_stage<MT>(sbase + s * C::kStageBytes, s, x, m, ldx, tok0, q, n, k, row0);
    cp_async_commit();
  }

  float acc[MT][4];
#pragma unroll
  for (int j = 0; j < MT; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
  // Byte offsets inside a stage: this lane's code row g of the warp's 16 rows, its x row g of
  // tile 0, and their swizzles (rows g and g+8, and 8j+g, have the parity of g).
  const int code_row = (warp * 16 + g) * kChunk, code_sw = (g & 1) << 2;
  const int x_row = C::kCodeBytes + g * C::kXRowBytes, x_sw = g & 1;

  for (int c = 0; c < nk; ++c) {
    cp_async_wait<C::kStages - 2>();
    __syncthreads();  // chunk c landed for all threads; stage (c − 1) % S is free to refill
    const int next = c + C::kStages - 1;
    if (next < nk) w8_load_stage<MT>(sbase + (next % C::kStages) * C::kStageBytes, next, x, m, ldx, tok0, q, n, k, row0);
    cp_async_commit();

    const uint8_t* st = smem + (c % C::kStages) * C::kStageBytes;
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // the two 64-wide k slices of the chunk
      const int cu = ((4 * h + t) ^ code_sw) << 4;
      const uint4 w0 = *reinterpret_cast<const uint4*>(st + code_row + cu);
      const uint4 w1 = *reinterpret_cast<const uint4*>(st + code_row + 8 * kChunk + cu);
      uint32_t a[4][4];  // [k16 step][fragment register]: rows g (0, 2) and g+8 (1, 3)
      int8x4_to_bf16(w0.x, a[0][0], a[0][2]);
      int8x4_to_bf16(w1.x, a[0][1], a[0][3]);
      int8x4_to_bf16(w0.y, a[1][0], a[1][2]);
      int8x4_to_bf16(w1.y, a[1][1], a[1][3]);
      int8x4_to_bf16(w0.z, a[2][0], a[2][2]);
      int8x4_to_bf16(w1.z, a[2][1], a[2][3]);
      int8x4_to_bf16(w0.w, a[3][0], a[3][2]);
      int8x4_to_bf16(w1.w, a[3][1], a[3][3]);
      const int xu0 = ((8 * h + 2 * t) ^ x_sw) << 4, xu1 = ((8 * h + 2 * t + 1) ^ x_sw) << 4;
#pragma unroll
      for (int j = 0; j < MT; ++j) {
        const uint8_t* xr = st + x_row + j * 8 * C::kXRowBytes;
        const uint4 b0 = *reinterpret_cast<const uint4*>(xr + xu0);
        const uint4 b1 = *reinterpret_cast<const uint4*>(xr + xu1);
        mma_bf16_nv(acc[j], a[0], b0.x, b0.y);
        mma_bf16_nv(acc[j], a[1], b0.z, b0.w);
        mma_bf16_nv(acc[j], a[2], b1.x, b1.y);
        mma_bf16_nv(acc[j], a[3], b1.z, b1.w);
      }
    }
  }
  cp_async_wait<0>();  // only empty groups remain; leave none pending at exit

  // acc[j]: (row g, token 2t), (row g, 2t+1), (row g+8, 2t), (row g+8, 2t+1) of tile j.
  const int r0 = row0 + warp * 16 + g, r1 = r0 + 8;
  const float s0 = r0 < n ? scale[r0] : 0.f, s1 = r1 < n ? scale[r1] : 0.f;
#pragma unroll
  for (int j = 0; j < MT; ++j) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int tok = tok0 + j * 8 + 2 * t + e;
      if (tok >= m) continue;
      float* yr = y + long(tok) * ldy;
      if (r0 < n) yr[r0] = acc[j][e] * s0;
      if (r1 < n) yr[r1] = acc[j][2 + e] * s1;
    }
  }
}

template <int MT>
cudaError_t w8a16_launch(const bf16* x, int m, int ldx, const Int8RowsWeight& w, float* y, long ldy,
                         cudaStream_t s) {
  using C = W8Config<MT>;
  static const cudaError_t attr =
      cudaFuncSetAttribute(w8a16_kernel<MT>, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmem);
  if (attr != cudaSuccess) return attr;
  const dim3 grid(unsigned((m + C::kTokens - 1) / C::kTokens), unsigned((w.n + kTileRows - 1) / kTileRows));
  w8a16_kernel<MT><<<grid, kThreads, C::kSmem, s>>>(x, m, ldx, w.q, w.scale, w.n, w.k, y, ldy);
  return cudaGetLastError();
}

// One block per token, 8 columns per thread and step: v = float(code) · scale, out = bf16_rn(v ·
// normalizer), two separate fp32 roundings (the order the header states).
__global__ void embed_int8_kernel(const int* __restrict__ ids, const int8_t* __restrict__ q,
                                  const float* __restrict__ scale, int n, int k, float normalizer,
                                  bf16* __restrict__ out, int ldo) {
  const int tok = blockIdx.x;
  const int id = ids[tok];
  const bool ok = id >= 0 && id < n;
  const float s = ok ? scale[id] : 0.f;
  const int8_t* row = q + (ok ? long(id) * k : 0);
  bf16* o = out + long(tok) * ldo;
  for (int c = threadIdx.x * 8; c < k; c += blockDim.x * 8) {
    uint4 r = make_uint4(0u, 0u, 0u, 0u);  // bf16 +0
    if (ok) {
      const uint2 codes = *reinterpret_cast<const uint2*>(row + c);
      float v[8];
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const int code = int(int8_t(((i < 4 ? codes.x : codes.y) >> (8 * (i & 3))) & 0xFFu));
        v[i] = __fmul_rn(__fmul_rn(float(code), s), normalizer);
      }
      r = make_uint4(pack_bf162(v[0], v[1]), pack_bf162(v[2], v[3]), pack_bf162(v[4], v[5]), pack_bf162(v[6], v[7]));
    }
    *reinterpret_cast<uint4*>(o + c) = r;
  }
}

}  // namespace
}  // namespace detail

cudaError_t w8a16_gemm_f32(const bf16* x, int m, int ldx, const Int8RowsWeight& w, float* y, long ldy,
                           cudaStream_t s) {
  if (m < 0) return cudaErrorInvalidValue;
  if (m == 0) return cudaSuccess;
  if (!x || !y || !w.q || !w.scale || w.n <= 0 || w.k <= 0 || w.k % 16 || ldx < w.k || ldx % 8 || ldy < w.n ||
      (reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(w.q)) % 16 ||
      (w.n + detail::kTileRows - 1) / detail::kTileRows > 65535)
    return cudaErrorInvalidValue;
  if (m <= 8) return detail::w8a16_launch<1>(x, m, ldx, w, y, ldy, s);
  if (m <= 16) return detail::w8a16_launch<2>(x, m, ldx, w, y, ldy, s);
  if (m <= 32) return detail::w8a16_launch<4>(x, m, ldx, w, y, ldy, s);
  static_assert(detail::W8Config<8>::kTokens == detail::kMaxTokens, "64 x rows per block from m > 32 on");
  return detail::w8a16_launch<8>(x, m, ldx, w, y, ldy, s);
}

cudaError_t embed_gather_int8(const int* ids, int t, const Int8RowsWeight& w, float normalizer, bf16* out, int ldo,
                              cudaStream_t s) {
  if (t < 0) return cudaErrorInvalidValue;
  if (t == 0) return cudaSuccess;
  if (!ids || !out || !w.q || !w.scale || w.k <= 0 || w.k % 8 || ldo < w.k || ldo % 8 ||
      reinterpret_cast<uintptr_t>(out) % 16 || reinterpret_cast<uintptr_t>(w.q) % 8)
    return cudaErrorInvalidValue;
  detail::embed_int8_kernel<<<t, 128, 0, s>>>(ids, w.q, w.scale, w.n, w.k, normalizer, out, ldo);
  return cudaGetLastError();
}

}  // namespace g4c::cuda

// fp32 GEMM tiles and vector helpers of the CPU backend (see gemm.h).
#include "runtime/cpu/gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace g4c::runtime::cpu {
namespace {

constexpr int MR = kGemmMr, NR = kGemmNr;

// ---- packing: zero-padded micro-panels, k-major ----

// ---- micro-kernels: c[MR×NR·w] (ldc) = (load ? c : 0) + Σ_k A(r, k)·B(j, k) ----
// A(r, k) = a[r·ars + k·acs] (read as broadcasts, so A never needs packing); the NR
// columns of B at step k are b[k·bks .. k·bks + NR) (a packed panel, or a row of X).

__attribute__((target("avx2,fma"))) void kernel_avx2(int64_t kc, const float* a, int64_t ars, int64_t acs,
                                                     const float* b, int64_t bks, float* c, int64_t ldc, bool load) {
  __m256 acc[MR][2];
  for (int r = 0; r < MR; ++r) {
    acc[r][0] = load ? _mm256_loadu_ps(c + r * ldc) : _mm256_setzero_ps();
    acc[r][1] = load ? _mm256_loadu_ps(c + r * ldc + 8) : _mm256_setzero_ps();
  }
  for (int64_t k = 0, ak = 0; k < kc; ++k, ak += acs, b += bks) {
    const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
    for (int r = 0; r < MR; ++r) {
      const __m256 ar = _mm256_broadcast_ss(a + r * ars + ak);
      acc[r][0] = _mm256_fmadd_ps(ar, b0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(ar, b1, acc[r][1]);
    }
  }
  for (int r = 0; r < MR; ++r) {
    _mm256_storeu_ps(c + r * ldc, acc[r][0]);
    _mm256_storeu_ps(c + r * ldc + 8, acc[r][1]);
  }
}

// Two B panels at once (6×32 outputs, 12 zmm accumulators): on CPUs with full-width
// AVX-512 units this doubles the FMA rate of kernel_avx2.
__attribute__((target("avx512f"))) void kernel_avx512_x2(int64_t kc, const float* a, int64_t ars, int64_t acs,
                                                          const float* b0p, const float* b1p, int64_t bks, float* c,
                                                          int64_t ldc, bool load) {
  __m512 acc[MR][2];
  for (int r = 0; r < MR; ++r) {
    acc[r][0] = load ? _mm512_loadu_ps(c + r * ldc) : _mm512_setzero_ps();
    acc[r][1] = load ? _mm512_loadu_ps(c + r * ldc + NR) : _mm512_setzero_ps();
  }
  for (int64_t k = 0, ak = 0, bk = 0; k < kc; ++k, ak += acs, bk += bks) {
    const __m512 b0 = _mm512_loadu_ps(b0p + bk), b1 = _mm512_loadu_ps(b1p + bk);
    for (int r = 0; r < MR; ++r) {
      const __m512 ar = _mm512_set1_ps(a[r * ars + ak]);
      acc[r][0] = _mm512_fmadd_ps(ar, b0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(ar, b1, acc[r][1]);
    }
  }
  for (int r = 0; r < MR; ++r) {
    _mm512_storeu_ps(c + r * ldc, acc[r][0]);
    _mm512_storeu_ps(c + r * ldc + NR, acc[r][1]);
  }
}

void kernel_portable(int64_t kc, const float* a, int64_t ars, int64_t acs, const float* b, int64_t bks, float* c,
                     int64_t ldc, bool load) {
  float acc[MR][NR];
  for (int r = 0; r < MR; ++r)
    for (int j = 0; j < NR; ++j) acc[r][j] = load ? c[r * ldc + j] : 0.f;
  for (int64_t k = 0; k < kc; ++k, b += bks)
    for (int r = 0; r < MR; ++r) {
      const float ar = a[r * ars + k * acs];
      for (int j = 0; j < NR; ++j) acc[r][j] = std::fma(ar, b[j], acc[r][j]);  // one rounding, as vfmadd
    }
  for (int r = 0; r < MR; ++r)
    for (int j = 0; j < NR; ++j) c[r * ldc + j] = acc[r][j];
}

bool detect_avx2_fma() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
const bool kAvx2 = detect_avx2_fma();
// G4C_CPU_NO_AVX512=1 keeps the AVX2 kernel (for comparing the two).
const bool kAvx512 = kAvx2 && __builtin_cpu_supports("avx512f") && !std::getenv("G4C_CPU_NO_AVX512");

// ---- exp: Cephes-style polynomial on [−ln2/2, ln2/2] after range reduction ----

// Arguments are clamped to [kExpLo, kExpHi]: 2^n then stays a normal float (n ≤ 127; at
// 88.38 it would round to 128, whose bit pattern is +inf). e^88 ≈ 1.7e38 is "large enough"
// wherever it is used (gelu's e^(−2z), where x / (1 + e^88) is 0 to fp32 accuracy).
constexpr float kExpHi = 88.0f, kExpLo = -87.3365447505531f;
constexpr float kLog2e = 1.44269504088896341f, kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
constexpr float kP[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                         4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};

inline float exp_scalar(float x) {
  x = std::min(kExpHi, std::max(kExpLo, x));
  const float n = std::nearbyint(x * kLog2e);
  const float r = x - n * kLn2Hi - n * kLn2Lo;
  float p = kP[0];
  for (int i = 1; i < 6; ++i) p = p * r + kP[i];
  p = p * r * r + r + 1.f;
  const int32_t bits = (int32_t(n) + 127) << 23;
  float s;
  std::memcpy(&s, &bits, 4);
  return p * s;
}

__attribute__((target("avx2,fma"))) inline __m256 exp_avx2(__m256 x) {
  x = _mm256_min_ps(_mm256_set1_ps(kExpHi), _mm256_max_ps(_mm256_set1_ps(kExpLo), x));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Hi), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Lo), r);
  __m256 p = _mm256_set1_ps(kP[0]);
  for (int i = 1; i < 6; ++i) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP[i]));
  p = _mm256_fmadd_ps(_mm256_mul_ps(p, r), r, _mm256_add_ps(r, _mm256_set1_ps(1.f)));
  const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
}

constexpr float kGeluC = 0.7978845608028654f, kGeluA = 0.044715f;

// gelu_tanh(x) = 0.5·x·(1 + tanh(z)) = x / (1 + e^(−2z)), z = √(2/π)(x + 0.044715x³):
// no cancellation near z = 0, and e^(−2z) → ∞ gives the exact limit 0 for x ≪ 0.
inline float gelu_scalar(float x) {
  const float z = kGeluC * (x + kGeluA * x * x * x);
  return x / (1.f + exp_scalar(-2.f * z));
}

__attribute__((target("avx2,fma"))) void gelu_mul_avx2(const float* g, const float* u, float* y, int64_t n) {
  int64_t i = 0;
  const __m256 c = _mm256_set1_ps(-2.f * kGeluC), a = _mm256_set1_ps(kGeluA), one = _mm256_set1_ps(1.f);
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(g + i);
    const __m256 x2 = _mm256_mul_ps(x, x);
    const __m256 z2 = _mm256_mul_ps(c, _mm256_fmadd_ps(_mm256_mul_ps(a, x2), x, x));  // −2z
    const __m256 gl = _mm256_div_ps(x, _mm256_add_ps(one, exp_avx2(z2)));
    _mm256_storeu_ps(y + i, _mm256_mul_ps(gl, _mm256_loadu_ps(u + i)));
  }
  if (i < n) {  // the tail through the same vector code (zero-padded), so no element's value
    alignas(32) float gt[8] = {}, ut[8] = {}, yt[8];  // depends on where it sits in the array
    std::memcpy(gt, g + i, size_t(n - i) * 4);
    std::memcpy(ut, u + i, size_t(n - i) * 4);
    gelu_mul_avx2(gt, ut, yt, 8);
    std::memcpy(y + i, yt, size_t(n - i) * 4);
  }
}

__attribute__((target("avx2,fma"))) float exp_shift_sum_avx2(float* p, int64_t n, float shift) {
  __m256 acc = _mm256_setzero_ps();
  const __m256 s = _mm256_set1_ps(shift);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(p + i), s));
    _mm256_storeu_ps(p + i, e);
    acc = _mm256_add_ps(acc, e);
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, acc);
  float sum = 0.f;
  for (float l : lanes) sum += l;
  for (; i < n; ++i) sum += (p[i] = exp_scalar(p[i] - shift));
  return sum;
}

}  // namespace

bool cpu_has_avx2_fma() { return kAvx2; }
bool cpu_uses_avx512() { return kAvx512; }

int64_t packed_b_floats(int64_t N, int64_t K) { return (N + NR - 1) / NR * NR * K; }

void pack_b(const MatView& B, int64_t N, int64_t K, float* out, int64_t panel_begin, int64_t panel_end) {
  for (int64_t p = panel_begin; p < panel_end; ++p) {
    float* dst = out + p * NR * K;
    for (int c = 0; c < NR; ++c) {
      const int64_t j = p * NR + c;
      if (j >= N) {
        for (int64_t k = 0; k < K; ++k) dst[k * NR + c] = 0.f;
        continue;
      }
      const float* src = B.p + j * B.rs;
      for (int64_t k = 0; k < K; ++k) dst[k * NR + c] = src[k * B.cs];
    }
  }
}

void gemm_tile(const MatView& A, const PanelB& B, int64_t M, int64_t N, int64_t K, float* C, int64_t ldc,
               bool accumulate) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    if (!accumulate)
      for (int64_t i = 0; i < M; ++i) std::fill(C + i * ldc, C + i * ldc + N, 0.f);
    return;
  }
  const int64_t mp = (M + MR - 1) / MR, np = (N + NR - 1) / NR;
  thread_local std::vector<float> a_edge;
  for (int64_t k0 = 0; k0 < K; k0 += kGemmKc) {
    const int64_t kc = std::min<int64_t>(kGemmKc, K - k0);
    const bool load = accumulate || k0 > 0;
    // A rows of a ragged last micro-panel: copied zero-padded (row stride 1, k stride MR).
    const int64_t m_edge = M - (mp - 1) * MR;
    if (m_edge < MR) {
      a_edge.assign(size_t(kc * MR), 0.f);
      for (int64_t r = 0; r < m_edge; ++r)
        for (int64_t k = 0; k < kc; ++k) a_edge[size_t(k * MR + r)] = A.p[((mp - 1) * MR + r) * A.rs + (k0 + k) * A.cs];
    }
    for (int64_t jp = 0; jp < np;) {
      const int64_t j0 = jp * NR, nr = std::min<int64_t>(NR, N - j0);
      const bool pair = kAvx512 && jp + 1 < np && N - j0 >= 2 * NR;
      const float* b0 = B.p + jp * B.panel_stride + k0 * B.k_stride;
      const int64_t bks = B.k_stride;
      const int64_t cols = pair ? 2 * NR : NR;
      for (int64_t ip = 0; ip < mp; ++ip) {
        const int64_t i0 = ip * MR, mr = std::min<int64_t>(MR, M - i0);
        const float* a = mr == MR ? A.p + i0 * A.rs + k0 * A.cs : a_edge.data();
        const int64_t ars = mr == MR ? A.rs : 1, acs = mr == MR ? A.cs : MR;
        float* c = C + i0 * ldc + j0;
        float edge[MR * 2 * NR] = {};
        const bool direct = mr == MR && (pair || nr == NR);
        float* cc = direct ? c : edge;
        const int64_t ldcc = direct ? ldc : cols;
        if (!direct && load)
          for (int64_t r = 0; r < mr; ++r) std::memcpy(edge + r * cols, c + r * ldc, size_t(pair ? cols : nr) * 4);
        if (pair)
          kernel_avx512_x2(kc, a, ars, acs, b0, b0 + B.panel_stride, bks, cc, ldcc, load);
        else if (kAvx2)
          kernel_avx2(kc, a, ars, acs, b0, bks, cc, ldcc, load);
        else
          kernel_portable(kc, a, ars, acs, b0, bks, cc, ldcc, load);
        if (!direct)
          for (int64_t r = 0; r < mr; ++r) std::memcpy(c + r * ldc, edge + r * cols, size_t(pair ? cols : nr) * 4);
      }
      jp += pair ? 2 : 1;
    }
  }
}

void gelu_tanh_mul(const float* g, const float* u, float* y, int64_t n) {
  if (kAvx2) return gelu_mul_avx2(g, u, y, n);
  for (int64_t i = 0; i < n; ++i) y[i] = gelu_scalar(g[i]) * u[i];
}

float gelu_tanh(float x) {
  const float one = 1.f;
  float y;
  gelu_tanh_mul(&x, &one, &y, 1);
  return y;
}

float exp_shift_sum(float* p, int64_t n, float shift) {
  if (kAvx2) return exp_shift_sum_avx2(p, n, shift);
  float sum = 0.f;
  for (int64_t i = 0; i < n; ++i) sum += (p[i] = exp_scalar(p[i] - shift));
  return sum;
}

}  // namespace g4c::runtime::cpu

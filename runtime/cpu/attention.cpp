// CPU attention (see attention.h). Scores are plain fp32 dot products summed over the
// head dimension in order; the softmax uses the backend's vector exp (gemm.h).
#include "runtime/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "models/target_clones.h"
#include "runtime/cpu/gemm.h"
#include "runtime/fp8.h"

namespace g4c::runtime::cpu {
namespace {

constexpr int kQueryBlock = 64;  // rows sharing one gathered key/value range

// Value of every E4M3 code (the gather decodes through it).
struct Fp8Table {
  float v[256];
  Fp8Table() {
    for (int c = 0; c < 256; ++c) v[c] = fp8_e4m3_decode(uint8_t(c));
  }
};
const Fp8Table kFp8;

// s[j] = scale · Σ_e q[e]·kt[e·nk + j] for j in [a, b): kt is the key range transposed
// ([head_dim][nk]). Keys go in register blocks of kKeys, summed over e in order.
constexpr int kKeys = 32;
G4C_TARGET_CLONES("arch=x86-64-v4", "arch=x86-64-v3", "default") void scores(
    const float* q, const float* kt, int nk, int a, int b, int D, float scale, float* s) {
  int j0 = a;
  for (; j0 + kKeys <= b; j0 += kKeys) {
    float acc[kKeys] = {};
    for (int e = 0; e < D; ++e) {
      const float qe = q[e];
      const float* row = kt + size_t(e) * nk + j0;
      for (int l = 0; l < kKeys; ++l) acc[l] += qe * row[l];
    }
    for (int l = 0; l < kKeys; ++l) s[j0 + l] = acc[l] * scale;
  }
  for (int j = j0; j < b; ++j) {
    float acc = 0.f;
    for (int e = 0; e < D; ++e) acc += q[e] * kt[size_t(e) * nk + j];
    s[j] = acc * scale;
  }
}

// out[e] = Σ_{j∈[a,b)} p[j]·v[j·D + e] / sum, head dims in register blocks of kDims.
constexpr int kDims = 64;
G4C_TARGET_CLONES("arch=x86-64-v4", "arch=x86-64-v3", "default") void weighted_values(
    const float* p, const float* v, int a, int b, int D, float sum, float* out) {
  int e0 = 0;
  for (; e0 + kDims <= D; e0 += kDims) {
    float acc[kDims] = {};
    for (int j = a; j < b; ++j) {
      const float pj = p[j];
      const float* vj = v + size_t(j) * D + e0;
      for (int l = 0; l < kDims; ++l) acc[l] += pj * vj[l];
    }
    for (int l = 0; l < kDims; ++l) out[e0 + l] = acc[l] / sum;
  }
  for (int e = e0; e < D; ++e) {
    float acc = 0.f;
    for (int j = a; j < b; ++j) acc += p[j] * v[size_t(j) * D + e];
    out[e] = acc / sum;
  }
}

}  // namespace

void attention(ThreadPool& pool, const BatchDesc& batch, const float* q, float* o, int Hq, int Hkv, int D,
               int window, float scale, const KvRows& kv) {
  const int T = batch.num_tokens();
  std::vector<std::pair<int, int>> blocks;  // [first row, end row)
  for (int r = 0; r < T;) {
    int e = r + 1;
    while (e < T && e - r < kQueryBlock && batch.seq_of_row[e] == batch.seq_of_row[r] &&
           batch.positions[e] == batch.positions[e - 1] + 1)
      ++e;
    blocks.emplace_back(r, e);
    r = e;
  }
  const int group = Hq / Hkv;
  pool.parallel_for(int64_t(blocks.size()) * Hkv, 1, [&](int64_t job0, int64_t job1) {
    thread_local std::vector<float> kt, vr, s;
    for (int64_t job = job0; job < job1; ++job) {
      const auto [r0, r1] = blocks[size_t(job / Hkv)];
      const int g = int(job % Hkv), seq = batch.seq_of_row[r0];
      const int first = batch.positions[r0], last = batch.positions[r1 - 1];
      const int lo = window > 0 ? std::max(0, first - window + 1) : 0, nk = last - lo + 1;
      kt.resize(size_t(D) * nk);
      vr.resize(size_t(nk) * D);
      s.resize(size_t(nk));
      for (int j = 0; j < nk; ++j) {
        const size_t at = kv.index(seq, lo + j) + size_t(g) * D;
        if (kv.k_codes) {
          const float ks = kv.k_scales[at / D], vs = kv.v_scales[at / D];
          const uint8_t* kc = kv.k_codes + at;
          const uint8_t* vc = kv.v_codes + at;
          float* vj = &vr[size_t(j) * D];
          for (int e = 0; e < D; ++e) {
            kt[size_t(e) * nk + j] = kFp8.v[kc[e]] * ks;
            vj[e] = kFp8.v[vc[e]] * vs;
          }
          continue;
        }
        for (int e = 0; e < D; ++e) kt[size_t(e) * nk + j] = kv.k[at + e];
        std::memcpy(&vr[size_t(j) * D], kv.v + at, size_t(D) * 4);
      }
      for (int r = r0; r < r1; ++r) {
        const int t = batch.positions[r];
        const int a = (window > 0 ? std::max(0, t - window + 1) : 0) - lo, b = t - lo + 1;  // visible keys
        for (int h = g * group; h < (g + 1) * group; ++h) {
          scores(q + (size_t(r) * Hq + h) * D, kt.data(), nk, a, b, D, scale, s.data());
          const float mx = *std::max_element(s.begin() + a, s.begin() + b);
          const float sum = exp_shift_sum(s.data() + a, b - a, mx);
          weighted_values(s.data(), vr.data(), a, b, D, sum, o + (size_t(r) * Hq + h) * D);
        }
      }
    }
  });
}

}  // namespace g4c::runtime::cpu

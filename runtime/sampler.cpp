#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace g4c::runtime {

namespace {

// The strict order of sampler.h: higher logit first, lower index on ties; NaN ranks with −inf
// (so the order stays strict and weak for the sorts: std::sort may read out of bounds otherwise).
struct Before {
  const float* l;
  static float key(float v) { return v == v ? v : -INFINITY; }
  bool operator()(int32_t a, int32_t b) const {
    const float ka = key(l[a]), kb = key(l[b]);
    return ka > kb || (ka == kb && a < b);
  }
};

// x = (max − l) / T ≥ 0 and w = exp(−x) in float; past kXMax exp(−x) is 0 in float (below the
// smallest denormal, e^−103.3), and NaN logits get weight 0 too.
constexpr float kXMax = 104.0f;
inline float weight(float x) { return x <= kXMax ? std::exp(-x) : 0.0f; }

// Per-thread buffers, reused across rows: fresh vocabulary-sized vectors cost more in page faults
// than the sampling itself (≈ 1 ms per row at 262k tokens).
struct Scratch {
  std::vector<float> w;
  std::vector<uint16_t> bin;
  std::vector<int32_t> ids;
  std::vector<double> mass;
  std::vector<std::pair<int32_t, float>> kept;
};
Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

// The nucleus over every token, no top-k (the case that needs no sort of the candidates): a
// histogram of weight by x (kBins bins, monotone in x and so consistent with Before) finds the bin
// where the running weight crosses top_p · Σw; only that bin's tokens are sorted.
constexpr int kBins = 4096;
constexpr float kBinScale = kBins / kXMax;
inline uint16_t bin_of(float x) { return uint16_t(x <= kXMax ? std::min(kBins - 1, int(x * kBinScale)) : kBins - 1); }

}  // namespace

int32_t argmax(const float* logits, int vocab) {
  // The best value in a register: comparing against logits[best] reloaded it every step (a load
  // whose address depends on the last compare: 3.5 ns per token, 0.9 ms at 262k).
  // A NaN at index 0 ranks as −inf (as in the sampler's order) instead of hiding every later token.
  int32_t best = 0;
  float bv = logits[0] == logits[0] ? logits[0] : -INFINITY;
  for (int i = 1; i < vocab; ++i)
    if (logits[i] > bv) {
      bv = logits[i];
      best = i;
    }
  return best;
}

int32_t sample_u(const float* logits, int vocab, const SamplingParams& p, double u) {
  if (p.temperature <= 0.0f) return argmax(logits, vocab);
  const float inv_t = 1.0f / p.temperature;
  const bool top_k = p.top_k > 0 && p.top_k < vocab, nucleus = p.top_p < 1.0f;
  const Before by{logits};
  Scratch& sc = scratch();
  if (top_k) {
    // The best k in order: one pass keeping the tokens above a running threshold (the k-th best
    // of those kept so far, refreshed by nth_element whenever 2k are held), then the k sorted.
    // NaN and −inf never pass the threshold: they have weight 0 and are never drawn, so K may
    // leave them out.
    const int k = p.top_k;
    auto& ids = sc.ids;
    ids.clear();
    float thr = -INFINITY;
    for (int i = 0; i < vocab; ++i) {
      if (!(logits[i] > thr)) continue;
      ids.push_back(i);
      if (int(ids.size()) == 2 * k) {
        std::nth_element(ids.begin(), ids.begin() + (k - 1), ids.end(), by);
        thr = logits[ids[k - 1]];  // later tokens equal to it come after it in the order
        ids.resize(size_t(k));
      }
    }
    if (ids.empty()) return argmax(logits, vocab);  // no finite or +inf logit
    const int kk = std::min<int>(k, int(ids.size()));
    std::partial_sort(ids.begin(), ids.begin() + kk, ids.end(), by);
    const float mx = logits[ids[0]];
    if (!std::isfinite(mx)) return argmax(logits, vocab);
    auto& kept = sc.kept;
    kept.resize(size_t(kk));
    double z = 0;
    for (int j = 0; j < kk; ++j) {
      kept[j] = {ids[j], weight((mx - logits[ids[j]]) * inv_t)};
      z += kept[j].second;
    }
    int n = kk;
    if (nucleus) {
      const double target = double(p.top_p) * z;
      double acc = 0;
      n = 0;
      while (n < kk && acc < target) acc += kept[n++].second;
      n = std::max(n, 1);
    }
    std::sort(kept.begin(), kept.begin() + n);  // K in index order
    double s = 0;
    for (int j = 0; j < n; ++j) s += kept[j].second;
    const double target = u * s;
    double run = 0;
    int32_t last = kept[0].first;
    for (int j = 0; j < n; ++j) {
      if (kept[j].second == 0.0f) continue;
      last = kept[j].first;
      if ((run += kept[j].second) > target) return last;
    }
    return last;  // u · s rounded up to s
  }
  const int32_t best = argmax(logits, vocab);
  const float mx = logits[best];
  if (!std::isfinite(mx)) return best;
  auto& w = sc.w;
  w.resize(size_t(vocab));
  double z = 0;
  if (!nucleus) {
    for (int i = 0; i < vocab; ++i) z += w[i] = weight((mx - logits[i]) * inv_t);
  } else {
    // One pass: weights, bins and the histogram; then the crossing bin's tokens in order; K is
    // then {bin < bin(e)} ∪ {bin(e), not after e} for the kept prefix's last token e, and the
    // weights outside K are set to 0 (never drawn).
    auto& bin = sc.bin;
    auto& mass = sc.mass;
    bin.resize(size_t(vocab));
    mass.assign(kBins, 0.0);
    for (int i = 0; i < vocab; ++i) {
      const float x = (mx - logits[i]) * inv_t;
      z += w[i] = weight(x);
      mass[bin[i] = bin_of(x)] += w[i];
    }
    const double target = double(p.top_p) * z;
    double acc = 0;
    int b = 0;
    for (; b < kBins - 1 && acc + mass[b] < target; ++b) acc += mass[b];
    auto& ids = sc.ids;
    ids.clear();
    for (int i = 0; i < vocab; ++i)
      if (bin[i] == b) ids.push_back(i);
    std::sort(ids.begin(), ids.end(), by);
    // (Rounding could leave the bins' sum short of target only if top_p · z came within ~1e-12 of
    // z, and float top_p < 1 is ≤ 1 − 2⁻²⁴: then the whole last bin, or every token if it is empty.)
    if (!ids.empty()) {
      int32_t e = ids.back();
      for (const int32_t i : ids)
        if ((acc += w[i]) >= target) {
          e = i;
          break;
        }
      for (int i = 0; i < vocab; ++i)
        if (bin[i] > b || (bin[i] == b && by(e, i))) w[i] = 0.0f;
    }
  }
  double s = 0;
  if (!nucleus) s = z;
  else
    for (int i = 0; i < vocab; ++i) s += w[i];
  const double target = u * s;
  double run = 0;
  int32_t last = best;
  for (int i = 0; i < vocab; ++i) {
    if (w[i] == 0.0f) continue;
    last = i;
    if ((run += w[i]) > target) return i;
  }
  return last;  // u · s rounded up to s
}

double sample_draw(const SamplingParams& p, std::mt19937_64& rng) {
  return p.temperature > 0.0f ? std::uniform_real_distribution<double>(0.0, 1.0)(rng) : 0.0;
}

int32_t sample(const float* logits, int vocab, const SamplingParams& p, std::mt19937_64& rng) {
  return sample_u(logits, vocab, p, sample_draw(p, rng));
}

}  // namespace g4c::runtime

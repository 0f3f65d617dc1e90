#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace g4c::runtime {

int32_t argmax(const float* logits, int vocab) {
  int32_t best = 0;
  for (int i = 1; i < vocab; ++i)
    if (logits[i] > logits[best]) best = i;
  return best;
}

int32_t sample(const float* logits, int vocab, const SamplingParams& p, std::mt19937_64& rng) {
  if (p.temperature <= 0.0f) return argmax(logits, vocab);
  std::vector<int32_t> ids(vocab);
  std::iota(ids.begin(), ids.end(), 0);
  // Highest logit first; ties by index so the order (and the draw) is deterministic.
  auto by_logit = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  int keep = vocab;
  if (p.top_k > 0 && p.top_k < vocab) {
    keep = p.top_k;
    std::partial_sort(ids.begin(), ids.begin() + keep, ids.end(), by_logit);
  } else {
    std::sort(ids.begin(), ids.end(), by_logit);
  }
  std::vector<double> prob(keep);
  const double mx = logits[ids[0]];
  double sum = 0;
  for (int i = 0; i < keep; ++i) sum += prob[i] = std::exp((double(logits[ids[i]]) - mx) / p.temperature);
  for (auto& x : prob) x /= sum;
  if (p.top_p < 1.0f) {
    double cum = 0;
    int n = 0;
    while (n < keep && cum < p.top_p) cum += prob[n++];
    keep = std::max(1, n);
    sum = cum;
    for (int i = 0; i < keep; ++i) prob[i] /= sum;
  }
  double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  for (int i = 0; i < keep; ++i) {
    if (u < prob[i]) return ids[i];
    u -= prob[i];
  }
  return ids[keep - 1];
}

}  // namespace g4c::runtime

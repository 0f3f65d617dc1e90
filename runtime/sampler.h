// Token sampling from one row of logits: greedy (temperature 0), or temperature with
// top-k / top-p (nucleus) filtering and a per-request seeded generator.
//
// The distribution (temperature T > 0), over a strict order of the tokens (higher logit first,
// lower index on ties):
//   candidates C = the first top_k tokens of that order (all when top_k ≤ 0 or ≥ vocab);
//   weights    w_i = exp((l_i − max l) / T), in float;
//   kept set   K = C, or (top_p < 1) the shortest prefix of C in that order whose weight is
//              ≥ top_p · Σ_C w (at least one token);
//   draw       u ∈ [0, 1) from the request's generator; the token is the first i of K in
//              *index* order whose running weight sum (double) exceeds u · Σ_K w (should
//              rounding leave it short, the last token of K with positive weight).
// Walking K in index order rather than by weight gives the same distribution and needs no sort
// of the vocabulary: O(vocab) expected per row (quickselect for top_k and the nucleus).
#pragma once

#include <cstdint>
#include <optional>
#include <random>

namespace g4c::runtime {

struct SamplingParams {
  float temperature = 0.0f;       // <= 0: greedy
  int top_k = -1;                 // <= 0: no top-k filter
  float top_p = 1.0f;             // >= 1: no nucleus filter
  std::optional<uint64_t> seed;   // unset: derived from the request's index
};

// Greedy: index of the largest logit, lowest index on ties (NaN never wins; all NaN: 0).
int32_t argmax(const float* logits, int vocab);

// Samples one token: sample_u(logits, vocab, p, sample_draw(p, rng)).
int32_t sample(const float* logits, int vocab, const SamplingParams& p, std::mt19937_64& rng);

// The uniform draw u ∈ [0, 1) a row takes from its generator: one double when temperature > 0,
// none (0, rng untouched) for greedy rows.
double sample_draw(const SamplingParams& p, std::mt19937_64& rng);

// A row's parameters with its draw (what a backend that samples on its device needs).
struct RowDraw {
  SamplingParams params;
  double u = 0.0;
};

// The token for a given draw u. Rows whose largest logit is not finite fall back to argmax.
// Reentrant (per-thread scratch buffers): rows may be sampled on several threads.
int32_t sample_u(const float* logits, int vocab, const SamplingParams& p, double u);

}  // namespace g4c::runtime

// Token sampling from one row of logits: greedy (temperature 0), or temperature with
// top-k / top-p (nucleus) filtering and a per-request seeded generator.
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

// Greedy: index of the largest logit, lowest index on ties.
int32_t argmax(const float* logits, int vocab);

// Samples one token; `rng` advances only when temperature > 0.
int32_t sample(const float* logits, int vocab, const SamplingParams& p, std::mt19937_64& rng);

}  // namespace g4c::runtime

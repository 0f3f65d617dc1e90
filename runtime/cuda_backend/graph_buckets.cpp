// CUDA graph buckets (see graph_buckets.h).
#include "runtime/cuda_backend/graph_buckets.h"

#include <algorithm>

namespace g4c::cudart {

std::vector<GraphBucket> graph_buckets(const fb::Plan& plan) {
  std::vector<GraphBucket> out;
  if (!plan.buckets()) return out;
  for (const auto* b : *plan.buckets())
    if (b->graph()) out.push_back({b->max_tokens(), b->max_sequences(), b->max_logit_rows(), b->decode()});
  return out;
}

std::optional<Shape> bucket_shape(const std::vector<GraphBucket>& buckets, const Shape& real, bool decode, int cap_T,
                                  int cap_S, int cap_R) {
  const GraphBucket* best = nullptr;
  for (const auto& b : buckets) {
    if (b.decode != decode) continue;
    const int T = decode ? std::min(b.T, cap_S) : b.T;
    const int S = std::min(b.S, cap_S), R = decode ? T : std::min(b.R, cap_R);
    if (T < real.T || S < real.S || R < real.R || T > cap_T) continue;
    if (!best || std::pair(b.T, b.S) < std::pair(best->T, best->S)) best = &b;
  }
  if (!best) return std::nullopt;
  Shape sh = real;
  sh.T = decode ? std::min(best->T, cap_S) : best->T;
  sh.S = decode ? sh.T : std::min(best->S, cap_S);
  sh.R = decode ? sh.T : std::min(best->R, cap_R);
  sh.max_q_len = decode ? 1 : sh.T;
  sh.max_kv_len = 1 << 30;
  sh.bucket = true;
  return sh;
}

}  // namespace g4c::cudart

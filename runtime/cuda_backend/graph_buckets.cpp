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
  std::optional<Shape> best;
  for (const auto& b : buckets) {
    if (b.decode != decode) continue;
    Shape sh = real;  // the bucket's sizes within the capacities; a decode bucket is square
    sh.T = decode ? std::min(b.T, cap_S) : b.T;
    sh.S = decode ? sh.T : std::min(b.S, cap_S);
    sh.R = decode ? sh.T : std::min(b.R, cap_R);
    if (sh.T < real.T || sh.S < real.S || sh.R < real.R || sh.T > cap_T) continue;
    if (best && std::pair(sh.T, sh.S) >= std::pair(best->T, best->S)) continue;
    sh.max_q_len = decode ? 1 : sh.T;
    sh.max_kv_len = 1 << 30;
    sh.bucket = true;
    best = sh;
  }
  return best;
}

}  // namespace g4c::cudart

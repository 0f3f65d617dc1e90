// The CUDA graph buckets of a plan (plan.fbs Bucket.graph, written by g4-plan-buckets) and the
// padded shape a step is launched at when one holds it. Plain C++ (no CUDA): tested on the CPU
// (tests/cuda_backend/test_graph_buckets.cpp).
//
// A decode step (every sequence feeds one token) pads to the smallest decode bucket with at
// least its sequences; a prefill or mixed step to the smallest prefill graph bucket with at
// least its tokens, sequences and logit rows. Sequences and logit rows are clipped to the
// backend's capacities (a bucket may name more sequences than the KV holds), tokens are not:
// a step whose bucket needs more token rows than the arena has runs eagerly instead of growing it.
#pragma once

#include <optional>
#include <vector>

#include "runtime/cuda_backend/meta.h"
#include "runtime/plan/plan.h"

namespace g4c::cudart {

struct GraphBucket {
  int T = 0, S = 0, R = 0;  // tokens, sequences, logit rows
  bool decode = false;
};

// The plan's buckets marked `graph`, in plan order (ascending tokens).
std::vector<GraphBucket> graph_buckets(const fb::Plan& plan);

// The launch shape of a step of real shape `real` (T, S, R; real_* equal to them) on a backend
// whose buffers hold cap_T tokens, cap_S sequences and cap_R logit rows: the bucket's sizes with
// real_* kept, max_q_len 1 (decode) or the bucket's tokens (prefill), max_kv_len 2^30 (attention
// splits chosen for the longest context a replay may see) and `bucket` set. nullopt: no graph
// bucket holds the step.
std::optional<Shape> bucket_shape(const std::vector<GraphBucket>& buckets, const Shape& real, bool decode, int cap_T,
                                  int cap_S, int cap_R);

}  // namespace g4c::cudart

// RUN: g4c opt %s --g4-plan-buckets="max-seqs=6 max-chunk=256 min-prefill=32 graph-max-tokens=64" | FileCheck %s
// RUN: g4c opt %s --g4-plan-buckets="max-seqs=1 max-chunk=16 min-prefill=32" | FileCheck %s --check-prefix=SMALL
// RUN: g4c opt %s --split-input-file --g4-plan-buckets | FileCheck %s --check-prefix=DEFAULT

// Decode: powers of two below 6, then 6. Prefill: powers of two from 32 below 256, then 256;
// the prefill buckets up to graph-max-tokens (32 and 64) are CUDA graphs.
// CHECK: module attributes {g4.buckets = {decode = array<i64: 1, 2, 4, 6>, graph_max_tokens = 64 : i64, max_seqs = 6 : i64, prefill = array<i64: 32, 64, 128, 256>}}
// A single sequence and a chunk smaller than min-prefill: one bucket each.
// SMALL: module attributes {g4.buckets = {decode = array<i64: 1>, graph_max_tokens = 256 : i64, max_seqs = 1 : i64, prefill = array<i64: 16>}}
// Defaults (max-seqs 4, max-chunk 256, min-prefill 16, graph-max-tokens 256).
// DEFAULT: module attributes {g4.buckets = {decode = array<i64: 1, 2, 4>, graph_max_tokens = 256 : i64, max_seqs = 4 : i64, prefill = array<i64: 16, 32, 64, 128, 256>}}
// CHECK-LABEL: func.func @step
func.func @step(%ids: tensor<?xi32>) -> tensor<?xi32> {
  return %ids : tensor<?xi32>
}

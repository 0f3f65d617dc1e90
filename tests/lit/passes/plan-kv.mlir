// RUN: g4c opt %s --split-input-file --g4-plan-kv="max-chunk=4 max-seqs=2 max-seq-len=64 block-size=16 sliding-kv=ring" | FileCheck %s
// RUN: g4c opt %s --split-input-file --g4-plan-kv="max-chunk=4 max-seqs=2 max-seq-len=64 block-size=16 sliding-kv=paged" | FileCheck %s --check-prefix=PAGED
// RUN: g4c opt %s --split-input-file --g4-plan-kv="max-chunk=4 max-seqs=2 max-seq-len=20 block-size=16" | FileCheck %s --check-prefix=AUTO
// RUN: not g4c opt %s --split-input-file --g4-plan-kv="sliding-kv=rings" 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: g4c opt %s --split-input-file --g4-plan-kv="max-chunk=4 max-seqs=2 max-seq-len=64 block-size=16 sliding-kv=ring kv-dtype=fp8" | FileCheck %s --check-prefix=FP8
// RUN: g4c opt %s --split-input-file --g4-plan-kv="max-chunk=4 max-seqs=2 max-seq-len=64 block-size=16 sliding-kv=ring kv-dtype=bf16" | FileCheck %s --check-prefix=BF16
// RUN: not g4c opt %s --split-input-file --g4-plan-kv="kv-dtype=fp16" 2>&1 | FileCheck %s --check-prefix=BADDT

// Layer 0 sliding (window 8, 2 kv heads x 16), layer 1 full with k_eq_v (1 kv head x 32).
// Sliding: 2 (K,V) x 32 x 2 B = 128 B/token; ring capacity 8 - 1 + 4 = 11 tokens per sequence,
// pool 11 x 128 x 2 sequences = 2816 B.
// Full: 2 (K,V) x 32 x 2 B = 128 B/token; 2 x ceil(64/16) = 8 blocks of 16 tokens:
// 8 x 16 x 128 = 16384 B.
// CHECK: module attributes {g4.kv = {block_size = 16 : i64, full_bytes_per_token = 128 : i64, full_pool_bytes = 16384 : i64, max_chunk = 4 : i64, max_seq_len = 64 : i64, max_seqs = 2 : i64, pool_bytes = 19200 : i64, sliding_bytes_per_token = 128 : i64, window_pool_bytes = 0 : i64}}
// CHECK-DAG: g4.kv_buffer @kv.layer0 {bytes_per_token = 128 : i64, capacity = 11 : i64, head_dim = 16 : i64, kind = "ring", layer = 0 : i64, max_seqs = 2 : i64, num_kv_heads = 2 : i64, pool_bytes = 2816 : i64}
// CHECK-DAG: g4.kv_buffer @kv.layer1 {block_size = 16 : i64, bytes_per_token = 128 : i64, head_dim = 32 : i64, kind = "paged", layer = 1 : i64, num_blocks = 8 : i64, num_kv_heads = 1 : i64, pool_bytes = 16384 : i64}
// sliding-kv=paged: the sliding layer gets blocks from the window pool; the buffer carries its
// window. A sequence holds at most ceil((8 - 1 + 4)/16) + 1 = 2 blocks there (the keys of one
// chunk and the 7 before it, over one block more than they fill), so the plan reserves
// 2 sequences x min(ceil(64/16), 2) = 4 blocks of 16 x 128 B = 8192 B; full 16384 B as above.
// PAGED: module attributes {g4.kv = {block_size = 16 : i64, full_bytes_per_token = 128 : i64, full_pool_bytes = 16384 : i64, {{.*}}pool_bytes = 24576 : i64, sliding_bytes_per_token = 128 : i64, window_pool_bytes = 8192 : i64}}
// PAGED-DAG: g4.kv_buffer @kv.layer0 {block_size = 16 : i64, bytes_per_token = 128 : i64, head_dim = 16 : i64, kind = "paged", layer = 0 : i64, num_blocks = 4 : i64, num_kv_heads = 2 : i64, pool_bytes = 8192 : i64, window = 8 : i64}
// PAGED-DAG: g4.kv_buffer @kv.layer1 {{{.*}}kind = "paged", layer = 1 : i64, num_blocks = 8 : i64, num_kv_heads = 1 : i64, pool_bytes = 16384 : i64}
// PAGED: g4.attention {{.*}}window = 8 : i64
// auto is paged: max-seq-len 20 → window 2 x min(ceil(20/16), 2) = 4 blocks (8192 B), full
// 2 x ceil(20/16) = 4 blocks (8192 B).
// AUTO: module attributes {g4.kv = {{{.*}}pool_bytes = 16384 : i64
// AUTO-DAG: g4.kv_buffer @kv.layer0 {{{.*}}kind = "paged", layer = 0 : i64, num_blocks = 4 : i64{{.*}}window = 8 : i64
// BAD: sliding-kv must be ring, paged or auto, not 'rings'
// kv-dtype=fp8: a code per element and an fp32 scale per (token, kv head), for K and V.
// Sliding: 2 x (2 heads x 16 + 2 x 4) = 80 B/token, ring pool 11 x 80 x 2 = 1760 B; full:
// 2 x (32 + 4) = 72 B/token, 8 blocks x 16 x 72 = 9216 B; codegen reads kv_dtype.
// FP8: module attributes {g4.kv = {block_size = 16 : i64, full_bytes_per_token = 72 : i64, full_pool_bytes = 9216 : i64, kv_dtype = "fp8", max_chunk = 4 : i64, max_seq_len = 64 : i64, max_seqs = 2 : i64, pool_bytes = 10976 : i64, sliding_bytes_per_token = 80 : i64, window_pool_bytes = 0 : i64}}
// FP8-DAG: g4.kv_buffer @kv.layer0 {bytes_per_token = 80 : i64, capacity = 11 : i64, {{.*}}pool_bytes = 1760 : i64}
// FP8-DAG: g4.kv_buffer @kv.layer1 {block_size = 16 : i64, bytes_per_token = 72 : i64, {{.*}}pool_bytes = 9216 : i64}
// kv-dtype=bf16: the sizes of auto (BF16), with kv_dtype recorded.
// BF16: module attributes {g4.kv = {block_size = 16 : i64, full_bytes_per_token = 128 : i64, full_pool_bytes = 16384 : i64, kv_dtype = "bf16", {{.*}}pool_bytes = 19200 : i64, sliding_bytes_per_token = 128 : i64
// BADDT: kv-dtype must be auto, bf16 or fp8, not 'fp16'
g4.weight @kn0 : tensor<16xbf16>
g4.weight @kn1 : tensor<32xbf16>
// CHECK-LABEL: func.func @two_layers
func.func @two_layers(%q0: tensor<?x64xf32>, %k0: tensor<?x32xf32>, %v0: tensor<?x32xf32>, %q1: tensor<?x64xf32>, %kraw: tensor<?x32xf32>, %pos: tensor<?xi32>) -> (tensor<?x64xf32>, tensor<?x64xf32>) {
  %kn = g4.rms_norm %k0, @kn0 {eps = 1.0e-06 : f64, group = 16 : i64} : tensor<?x32xf32>
  %kr = g4.rope %kn, %pos {head_dim = 16 : i64, rotary_pairs = 8 : i64, theta = 1.0e+04 : f64, rope_type = "default"} : tensor<?x32xf32>, tensor<?xi32>
  %vn = g4.rms_norm %v0 {eps = 1.0e-06 : f64, group = 16 : i64} : tensor<?x32xf32>
  // The sliding layer has its own v projection: K and V both stored.
  // CHECK: g4.kv_write %{{.*}} key(%{{.*}}) value(%{{.*}}) {layer = 0 : i64, window = 8 : i64}
  g4.kv_write %pos key(%kr : tensor<?x32xf32>) value(%vn : tensor<?x32xf32>) {layer = 0 : i64, window = 8 : i64} : tensor<?xi32>
  %o0 = g4.attention %q0, %pos {layer = 0 : i64, window = 8 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 16 : i64, scale = 1.0 : f64} : tensor<?x64xf32>, tensor<?xi32> -> tensor<?x64xf32>
  // k_eq_v: K = rope(rms(k_raw, @kn1)) and V = rms(k_raw) of one projection, both stored.
  // CHECK: g4.rope
  // CHECK: g4.kv_write %{{.*}} key(%{{.*}}) value(%{{.*}}) {layer = 1 : i64, window = 0 : i64}
  %kn2 = g4.rms_norm %kraw, @kn1 {eps = 1.0e-06 : f64, group = 32 : i64} : tensor<?x32xf32>
  %kr2 = g4.rope %kn2, %pos {head_dim = 32 : i64, rotary_pairs = 4 : i64, theta = 1.0e+06 : f64, rope_type = "proportional"} : tensor<?x32xf32>, tensor<?xi32>
  %vn2 = g4.rms_norm %kraw {eps = 1.0e-06 : f64, group = 32 : i64} : tensor<?x32xf32>
  g4.kv_write %pos key(%kr2 : tensor<?x32xf32>) value(%vn2 : tensor<?x32xf32>) {layer = 1 : i64, window = 0 : i64} : tensor<?xi32>
  %o1 = g4.attention %q1, %pos {layer = 1 : i64, window = 0 : i64, num_heads = 2 : i64, num_kv_heads = 1 : i64, head_dim = 32 : i64, scale = 1.0 : f64} : tensor<?x64xf32>, tensor<?xi32> -> tensor<?x64xf32>
  return %o0, %o1 : tensor<?x64xf32>, tensor<?x64xf32>
}

// RUN: g4c opt %s --split-input-file --g4-fuse-qk-norm-rope | FileCheck %s

g4.weight @qn : tensor<16xbf16>
g4.weight @kn : tensor<16xbf16>
// A sliding layer with its own v projection.
// CHECK-LABEL: func.func @sliding
func.func @sliding(%q_raw: tensor<?x64xf32>, %k_raw: tensor<?x32xf32>, %v_raw: tensor<?x32xf32>, %pos: tensor<?xi32>) -> tensor<?x64xf32> {
  // CHECK-NEXT: %[[Q:.*]] = g4.qk_norm_rope_kv_write %arg0, %arg1, %arg2, %arg3 {eps = {{.*}}, g4.layer = 0 : i64, head_dim = 16 : i64, k_norm = @kn, layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, q_norm = @qn, rope_theta = 1.000000e+04 : f64, rotary_pairs = 8 : i64, window = 8 : i64}
  // CHECK-NEXT: %[[O:.*]] = g4.attention %[[Q]], %arg3
  // CHECK-NEXT: return %[[O]]
  %qn = g4.rms_norm %q_raw, @qn {eps = 1.0e-06 : f64, group = 16 : i64} : tensor<?x64xf32>
  %q = g4.rope %qn, %pos {head_dim = 16 : i64, rotary_pairs = 8 : i64, theta = 1.0e+04 : f64, rope_type = "default"} : tensor<?x64xf32>, tensor<?xi32>
  %kn = g4.rms_norm %k_raw, @kn {eps = 1.0e-06 : f64, group = 16 : i64} : tensor<?x32xf32>
  %k = g4.rope %kn, %pos {head_dim = 16 : i64, rotary_pairs = 8 : i64, theta = 1.0e+04 : f64, rope_type = "default"} : tensor<?x32xf32>, tensor<?xi32>
  %v = g4.rms_norm %v_raw {eps = 1.0e-06 : f64, group = 16 : i64} : tensor<?x32xf32>
  g4.kv_write %pos key(%k : tensor<?x32xf32>) value(%v : tensor<?x32xf32>) {layer = 0 : i64, window = 8 : i64, g4.layer = 0 : i64} : tensor<?xi32>
  %o = g4.attention %q, %pos {layer = 0 : i64, window = 8 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 16 : i64, scale = 1.0 : f64} : tensor<?x64xf32>, tensor<?xi32> -> tensor<?x64xf32>
  return %o : tensor<?x64xf32>
}

// -----

g4.weight @qn : tensor<32xbf16>
g4.weight @kn : tensor<32xbf16>
// A k_eq_v full layer: v_raw is the raw k projection (the same operand twice).
// CHECK-LABEL: func.func @k_eq_v
func.func @k_eq_v(%q_raw: tensor<?x64xf32>, %k_raw: tensor<?x32xf32>, %pos: tensor<?xi32>) -> tensor<?x64xf32> {
  // CHECK-NEXT: g4.qk_norm_rope_kv_write %arg0, %arg1, %arg1, %arg2 {{{.*}}rope_theta = 1.000000e+06 : f64, rotary_pairs = 4 : i64, window = 0 : i64}
  %qn = g4.rms_norm %q_raw, @qn {eps = 1.0e-06 : f64, group = 32 : i64} : tensor<?x64xf32>
  %q = g4.rope %qn, %pos {head_dim = 32 : i64, rotary_pairs = 4 : i64, theta = 1.0e+06 : f64, rope_type = "proportional"} : tensor<?x64xf32>, tensor<?xi32>
  %kn = g4.rms_norm %k_raw, @kn {eps = 1.0e-06 : f64, group = 32 : i64} : tensor<?x32xf32>
  %k = g4.rope %kn, %pos {head_dim = 32 : i64, rotary_pairs = 4 : i64, theta = 1.0e+06 : f64, rope_type = "proportional"} : tensor<?x32xf32>, tensor<?xi32>
  %v = g4.rms_norm %k_raw {eps = 1.0e-06 : f64, group = 32 : i64} : tensor<?x32xf32>
  g4.kv_write %pos key(%k : tensor<?x32xf32>) value(%v : tensor<?x32xf32>) {layer = 5 : i64, window = 0 : i64} : tensor<?xi32>
  %o = g4.attention %q, %pos {layer = 5 : i64, window = 0 : i64, num_heads = 2 : i64, num_kv_heads = 1 : i64, head_dim = 32 : i64, scale = 1.0 : f64} : tensor<?x64xf32>, tensor<?xi32> -> tensor<?x64xf32>
  return %o : tensor<?x64xf32>
}

// -----

g4.weight @qn : tensor<16xbf16>
g4.weight @kn : tensor<16xbf16>
// q and k rotate with different theta: not one kernel.
// CHECK-LABEL: func.func @mismatched_rope
func.func @mismatched_rope(%q_raw: tensor<?x64xf32>, %k_raw: tensor<?x32xf32>, %pos: tensor<?xi32>) -> tensor<?x64xf32> {
  // CHECK-NOT: g4.qk_norm_rope_kv_write
  // CHECK: g4.kv_write
  %qn = g4.rms_norm %q_raw, @qn {eps = 1.0e-06 : f64, group = 16 : i64} : tensor<?x64xf32>
  %q = g4.rope %qn, %pos {head_dim = 16 : i64, rotary_pairs = 8 : i64, theta = 1.0e+04 : f64, rope_type = "default"} : tensor<?x64xf32>, tensor<?xi32>
  %kn = g4.rms_norm %k_raw, @kn {eps = 1.0e-06 : f64, group = 16 : i64} : tensor<?x32xf32>
  %k = g4.rope %kn, %pos {head_dim = 16 : i64, rotary_pairs = 8 : i64, theta = 1.0e+06 : f64, rope_type = "default"} : tensor<?x32xf32>, tensor<?xi32>
  %v = g4.rms_norm %k_raw {eps = 1.0e-06 : f64, group = 16 : i64} : tensor<?x32xf32>
  g4.kv_write %pos key(%k : tensor<?x32xf32>) value(%v : tensor<?x32xf32>) {layer = 0 : i64, window = 0 : i64} : tensor<?xi32>
  %o = g4.attention %q, %pos {layer = 0 : i64, window = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 16 : i64, scale = 1.0 : f64} : tensor<?x64xf32>, tensor<?xi32> -> tensor<?x64xf32>
  return %o : tensor<?x64xf32>
}

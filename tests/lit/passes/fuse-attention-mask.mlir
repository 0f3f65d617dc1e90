// RUN: g4c opt %s --split-input-file --g4-fuse-attention-mask | FileCheck %s

// A sliding layer: window, GQA grouping and head_dim travel to the fused op; scale is 1.0.
// CHECK-LABEL: func.func @sliding
func.func @sliding(%q: tensor<?x64xf32>, %pos: tensor<?xi32>) -> tensor<?x64xf32> {
  // CHECK-NOT: g4.kv_read
  // CHECK-NOT: g4.qk
  // CHECK-NOT: g4.softmax
  // CHECK: %[[O:.*]] = g4.attention %{{.*}}, %{{.*}} {g4.layer = 2 : i64, head_dim = 16 : i64, layer = 2 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 1.000000e+00 : f64, window = 8 : i64} : tensor<?x64xf32>, tensor<?xi32> -> tensor<?x64xf32>
  // CHECK-NEXT: return %[[O]]
  %keys, %values = g4.kv_read %pos {layer = 2 : i64} : tensor<?xi32> -> tensor<?x32xf32>, tensor<?x32xf32>
  %s = g4.qk %q, %keys {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 16 : i64} : tensor<?x64xf32>, tensor<?x32xf32> -> tensor<4x?x?xf32>
  %m = g4.mask %s, %pos {window = 8 : i64} : tensor<4x?x?xf32>, tensor<?xi32>
  %p = g4.softmax %m : tensor<4x?x?xf32>
  %o = g4.pv %p, %values {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 16 : i64, g4.layer = 2 : i64} : tensor<4x?x?xf32>, tensor<?x32xf32> -> tensor<?x64xf32>
  return %o : tensor<?x64xf32>
}

// -----

// A full layer: window 0 (causal), one kv head.
// CHECK-LABEL: func.func @full
func.func @full(%q: tensor<?x64xf32>, %pos: tensor<?xi32>) -> tensor<?x64xf32> {
  // CHECK: g4.attention %{{.*}}, %{{.*}} {head_dim = 32 : i64, layer = 5 : i64, num_heads = 2 : i64, num_kv_heads = 1 : i64, scale = 1.000000e+00 : f64, window = 0 : i64}
  %keys, %values = g4.kv_read %pos {layer = 5 : i64} : tensor<?xi32> -> tensor<?x32xf32>, tensor<?x32xf32>
  %s = g4.qk %q, %keys {num_heads = 2 : i64, num_kv_heads = 1 : i64, head_dim = 32 : i64} : tensor<?x64xf32>, tensor<?x32xf32> -> tensor<2x?x?xf32>
  %m = g4.mask %s, %pos {window = 0 : i64} : tensor<2x?x?xf32>, tensor<?xi32>
  %p = g4.softmax %m : tensor<2x?x?xf32>
  %o = g4.pv %p, %values {num_heads = 2 : i64, num_kv_heads = 1 : i64, head_dim = 32 : i64} : tensor<2x?x?xf32>, tensor<?x32xf32> -> tensor<?x64xf32>
  return %o : tensor<?x64xf32>
}

// -----

// The probabilities have another user: nothing is fused.
// CHECK-LABEL: func.func @probs_escape
func.func @probs_escape(%q: tensor<?x64xf32>, %pos: tensor<?xi32>) -> (tensor<?x64xf32>, tensor<4x?x?xf32>) {
  // CHECK-NOT: g4.attention
  // CHECK: g4.pv
  %keys, %values = g4.kv_read %pos {layer = 0 : i64} : tensor<?xi32> -> tensor<?x32xf32>, tensor<?x32xf32>
  %s = g4.qk %q, %keys {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 16 : i64} : tensor<?x64xf32>, tensor<?x32xf32> -> tensor<4x?x?xf32>
  %m = g4.mask %s, %pos {window = 0 : i64} : tensor<4x?x?xf32>, tensor<?xi32>
  %p = g4.softmax %m : tensor<4x?x?xf32>
  %o = g4.pv %p, %values {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 16 : i64} : tensor<4x?x?xf32>, tensor<?x32xf32> -> tensor<?x64xf32>
  return %o, %p : tensor<?x64xf32>, tensor<4x?x?xf32>
}

// -----

// Values from another layer's cache than the keys: not one attention.
// CHECK-LABEL: func.func @mixed_layers
func.func @mixed_layers(%q: tensor<?x64xf32>, %pos: tensor<?xi32>) -> tensor<?x64xf32> {
  // CHECK-NOT: g4.attention
  %k0, %v0 = g4.kv_read %pos {layer = 0 : i64} : tensor<?xi32> -> tensor<?x32xf32>, tensor<?x32xf32>
  %k1, %v1 = g4.kv_read %pos {layer = 1 : i64} : tensor<?xi32> -> tensor<?x32xf32>, tensor<?x32xf32>
  %s = g4.qk %q, %k0 {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 16 : i64} : tensor<?x64xf32>, tensor<?x32xf32> -> tensor<4x?x?xf32>
  %m = g4.mask %s, %pos {window = 0 : i64} : tensor<4x?x?xf32>, tensor<?xi32>
  %p = g4.softmax %m : tensor<4x?x?xf32>
  %o = g4.pv %p, %v1 {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 16 : i64} : tensor<4x?x?xf32>, tensor<?x32xf32> -> tensor<?x64xf32>
  return %o : tensor<?x64xf32>
}

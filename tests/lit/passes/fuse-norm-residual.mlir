// RUN: g4c opt %s --split-input-file --g4-fuse-norm-residual | FileCheck %s

g4.weight @post : tensor<32xbf16>
g4.weight @next : tensor<32xbf16>
// After attention: h1 = h + rms(x, @post); m = rms(h1, @next). h1 stays the residual stream.
// CHECK-LABEL: func.func @post_attention
func.func @post_attention(%h: tensor<?x32xf32>, %x: tensor<?x32xf32>) -> (tensor<?x32xf32>, tensor<?x32xf32>) {
  // CHECK-NEXT: %[[H:.*]], %[[N:.*]] = g4.norm_residual %arg0, %arg1 {eps = 9.9999999999999995E-7 : f64, g4.layer = 1 : i64, next = @next, post = @post} : tensor<?x32xf32>, tensor<?x32xf32>
  // CHECK-NEXT: return %[[H]], %[[N]]
  %p = g4.rms_norm %x, @post {eps = 1.0e-06 : f64, group = 32 : i64, g4.layer = 1 : i64} : tensor<?x32xf32>
  %h1 = g4.add %h, %p : tensor<?x32xf32>
  %m = g4.rms_norm %h1, @next {eps = 1.0e-06 : f64, group = 32 : i64} : tensor<?x32xf32>
  return %h1, %m : tensor<?x32xf32>, tensor<?x32xf32>
}

// -----

g4.weight @post : tensor<32xbf16>
g4.weight @next : tensor<32xbf16>
g4.weight @s : tensor<1xbf16>
// After the MLP: the layer_scalar multiplies the whole stream before the next pre-norm.
// CHECK-LABEL: func.func @post_ffn_scalar
func.func @post_ffn_scalar(%h: tensor<?x32xf32>, %x: tensor<?x32xf32>) -> (tensor<?x32xf32>, tensor<?x32xf32>) {
  // CHECK-NEXT: %[[H:.*]], %[[N:.*]] = g4.norm_residual %arg0, %arg1 {{{.*}}next = @next, post = @post, scalar = @s} : tensor<?x32xf32>, tensor<?x32xf32>
  // CHECK-NEXT: return %[[H]], %[[N]]
  %p = g4.rms_norm %x, @post {eps = 1.0e-06 : f64, group = 32 : i64} : tensor<?x32xf32>
  %h1 = g4.add %p, %h : tensor<?x32xf32>
  %h2 = g4.scale %h1, @s : tensor<?x32xf32>
  %a = g4.rms_norm %h2, @next {eps = 1.0e-06 : f64, group = 32 : i64} : tensor<?x32xf32>
  return %h2, %a : tensor<?x32xf32>, tensor<?x32xf32>
}

// -----

g4.weight @post : tensor<32xbf16>
g4.weight @s : tensor<1xbf16>
// The last layer: no following whole-row norm (a per-head one does not count), so the
// fused op has no `next` and only the new residual.
// CHECK-LABEL: func.func @no_next_norm
func.func @no_next_norm(%h: tensor<?x32xf32>, %x: tensor<?x32xf32>) -> tensor<?x32xf32> {
  // CHECK-NEXT: %[[H:.*]] = g4.norm_residual %arg0, %arg1 {eps = {{.*}}, post = @post, scalar = @s} : tensor<?x32xf32>{{$}}
  // CHECK-NEXT: g4.rms_norm %[[H]] {eps = {{.*}}, group = 16 : i64}
  %p = g4.rms_norm %x, @post {eps = 1.0e-06 : f64, group = 32 : i64} : tensor<?x32xf32>
  %h1 = g4.add %h, %p : tensor<?x32xf32>
  %h2 = g4.scale %h1, @s : tensor<?x32xf32>
  %n = g4.rms_norm %h2 {eps = 1.0e-06 : f64, group = 16 : i64} : tensor<?x32xf32>
  return %n : tensor<?x32xf32>
}

// -----

g4.weight @post : tensor<32xbf16>
g4.weight @next : tensor<32xbf16>
// The post-norm output is used elsewhere too: it must stay materialized, no fusion.
// CHECK-LABEL: func.func @post_norm_escapes
func.func @post_norm_escapes(%h: tensor<?x32xf32>, %x: tensor<?x32xf32>) -> (tensor<?x32xf32>, tensor<?x32xf32>) {
  // CHECK-NOT: g4.norm_residual
  %p = g4.rms_norm %x, @post {eps = 1.0e-06 : f64, group = 32 : i64} : tensor<?x32xf32>
  %h1 = g4.add %h, %p : tensor<?x32xf32>
  %m = g4.rms_norm %h1, @next {eps = 1.0e-06 : f64, group = 32 : i64} : tensor<?x32xf32>
  %r = g4.add %m, %p : tensor<?x32xf32>
  return %h1, %r : tensor<?x32xf32>, tensor<?x32xf32>
}

// RUN: g4c opt %s --split-input-file --g4-fuse-lm-head | FileCheck %s

g4.weight @embed_tokens : tensor<128x32xbf16>
g4.weight @norm : tensor<32xbf16>
// CHECK-LABEL: func.func @head
func.func @head(%h: tensor<?x32xf32>) -> tensor<?x128xf32> {
  // CHECK-NEXT: %[[L:.*]] = g4.lm_head %arg0 {eps = 9.9999999999999995E-7 : f64, norm = @norm, softcap = 3.000000e+01 : f64, table = @embed_tokens} : tensor<?x32xf32> -> tensor<?x128xf32>
  // CHECK-NEXT: return %[[L]]
  %n = g4.rms_norm %h, @norm {eps = 1.0e-06 : f64, group = 32 : i64} : tensor<?x32xf32>
  %l = g4.logits %n, @embed_tokens : tensor<?x32xf32> -> tensor<?x128xf32>
  %c = g4.softcap %l {cap = 30.0 : f64} : tensor<?x128xf32>
  return %c : tensor<?x128xf32>
}

// -----

g4.weight @embed_tokens : tensor<128x32xbf16>
g4.weight @norm : tensor<32xbf16>
// No softcap: softcap 0 means none.
// CHECK-LABEL: func.func @no_cap
func.func @no_cap(%h: tensor<?x32xf32>) -> tensor<?x128xf32> {
  // CHECK-NEXT: g4.lm_head %arg0 {{{.*}}softcap = 0.000000e+00 : f64, table = @embed_tokens}
  %n = g4.rms_norm %h, @norm {eps = 1.0e-06 : f64, group = 32 : i64} : tensor<?x32xf32>
  %l = g4.logits %n, @embed_tokens : tensor<?x32xf32> -> tensor<?x128xf32>
  return %l : tensor<?x128xf32>
}

// -----

g4.weight @embed_tokens : tensor<128x32xbf16>
g4.weight @norm : tensor<32xbf16>
// The normed rows are used elsewhere: they must exist, no fusion.
// CHECK-LABEL: func.func @norm_escapes
func.func @norm_escapes(%h: tensor<?x32xf32>) -> (tensor<?x128xf32>, tensor<?x32xf32>) {
  // CHECK-NOT: g4.lm_head
  %n = g4.rms_norm %h, @norm {eps = 1.0e-06 : f64, group = 32 : i64} : tensor<?x32xf32>
  %l = g4.logits %n, @embed_tokens : tensor<?x32xf32> -> tensor<?x128xf32>
  return %l, %n : tensor<?x128xf32>, tensor<?x32xf32>
}

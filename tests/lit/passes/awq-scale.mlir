// RUN: g4c opt %s --split-input-file --g4-awq-scale --verify-diagnostics
// RUN: not g4c opt %s --split-input-file --g4-awq-scale="clip=max" 2>&1 | FileCheck %s --check-prefix=BADCLIP
// BADCLIP: g4-awq-scale: clip must be none or mse, got max

// A Gemma 4 layer's Linear inputs: q/k read input_layernorm (an RMSNorm fold), gate/up read
// pre_feedforward_layernorm (an RMSNorm fold), down reads gelu(gate) ⊙ up (a Linear fold into
// up's rows); o_proj reads attention (here an argument), which takes no exact scale. Without an
// executor the pass names what it found and fails.
// expected-error@+1 {{g4-awq-scale: no calibration executor; AWQ runs through `g4c quantize --awq` (found 2 RMSNorm folds, 1 Linear folds, 1 Linears without an exact fold)}}
module {
  g4.weight @layers.0.input_layernorm : tensor<32xbf16> {layer = 0 : i64}
  g4.weight @layers.0.self_attn.q_proj : tensor<64x32xbf16> {layer = 0 : i64}
  g4.weight @layers.0.self_attn.k_proj : tensor<32x32xbf16> {layer = 0 : i64}
  g4.weight @layers.0.self_attn.o_proj : tensor<32x64xbf16> {layer = 0 : i64}
  g4.weight @layers.0.pre_feedforward_layernorm : tensor<32xbf16> {layer = 0 : i64}
  g4.weight @layers.0.mlp.gate_proj : tensor<96x32xbf16> {layer = 0 : i64}
  g4.weight @layers.0.mlp.up_proj : tensor<96x32xbf16> {layer = 0 : i64}
  g4.weight @layers.0.mlp.down_proj : tensor<32x96xbf16> {layer = 0 : i64}
  func.func @layer(%h: tensor<?x32xf32>, %attn: tensor<?x64xf32>) -> (tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>, tensor<?x32xf32>) {
    %a = g4.rms_norm %h, @layers.0.input_layernorm {eps = 1.0e-06 : f64, group = 32 : i64} : tensor<?x32xf32>
    %wq = g4.dequant @layers.0.self_attn.q_proj : tensor<64x32xbf16>
    %q = g4.matmul %a, %wq : tensor<?x32xf32>, tensor<64x32xbf16> -> tensor<?x64xf32>
    %wk = g4.dequant @layers.0.self_attn.k_proj : tensor<32x32xbf16>
    %k = g4.matmul %a, %wk : tensor<?x32xf32>, tensor<32x32xbf16> -> tensor<?x32xf32>
    %wo = g4.dequant @layers.0.self_attn.o_proj : tensor<32x64xbf16>
    %o = g4.matmul %attn, %wo : tensor<?x64xf32>, tensor<32x64xbf16> -> tensor<?x32xf32>
    %m = g4.rms_norm %h, @layers.0.pre_feedforward_layernorm {eps = 1.0e-06 : f64, group = 32 : i64} : tensor<?x32xf32>
    %wg = g4.dequant @layers.0.mlp.gate_proj : tensor<96x32xbf16>
    %g0 = g4.matmul %m, %wg : tensor<?x32xf32>, tensor<96x32xbf16> -> tensor<?x96xf32>
    %g = g4.gelu_tanh %g0 : tensor<?x96xf32>
    %wu = g4.dequant @layers.0.mlp.up_proj : tensor<96x32xbf16>
    %u = g4.matmul %m, %wu : tensor<?x32xf32>, tensor<96x32xbf16> -> tensor<?x96xf32>
    %gu = g4.mul %g, %u : tensor<?x96xf32>
    %wd = g4.dequant @layers.0.mlp.down_proj : tensor<32x96xbf16>
    %d = g4.matmul %gu, %wd : tensor<?x96xf32>, tensor<32x96xbf16> -> tensor<?x32xf32>
    return %q, %k, %o, %d : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>, tensor<?x32xf32>
  }
}

// -----

// No exact fold: a norm output that also feeds a non-Linear op (the add), a norm weight read by
// two norms, a per-head norm (group 16 of 32 features), an up projection whose output is read
// twice (the mul and the return).
// expected-error@+1 {{(found 0 RMSNorm folds, 0 Linear folds, 6 Linears without an exact fold)}}
module {
  g4.weight @layers.0.n1 : tensor<32xbf16> {layer = 0 : i64}
  g4.weight @layers.0.n2 : tensor<32xbf16> {layer = 0 : i64}
  g4.weight @layers.0.head_norm : tensor<16xbf16> {layer = 0 : i64}
  g4.weight @layers.0.qa : tensor<64x32xbf16> {layer = 0 : i64}
  g4.weight @layers.0.qb : tensor<64x32xbf16> {layer = 0 : i64}
  g4.weight @layers.0.qc : tensor<64x32xbf16> {layer = 0 : i64}
  g4.weight @layers.0.gate : tensor<96x32xbf16> {layer = 0 : i64}
  g4.weight @layers.0.up : tensor<96x32xbf16> {layer = 0 : i64}
  g4.weight @layers.0.down : tensor<32x96xbf16> {layer = 0 : i64}
  func.func @none(%x: tensor<?x32xf32>, %y: tensor<?x32xf32>) -> (tensor<?x32xf32>, tensor<?x32xf32>, tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x96xf32>, tensor<?x32xf32>) {
    %a = g4.rms_norm %x, @layers.0.n1 {eps = 1.0e-06 : f64, group = 32 : i64} : tensor<?x32xf32>
    %wa = g4.dequant @layers.0.qa : tensor<64x32xbf16>
    %qa = g4.matmul %a, %wa : tensor<?x32xf32>, tensor<64x32xbf16> -> tensor<?x64xf32>
    %s = g4.add %a, %x : tensor<?x32xf32>
    %b = g4.rms_norm %x, @layers.0.n2 {eps = 1.0e-06 : f64, group = 32 : i64} : tensor<?x32xf32>
    %b2 = g4.rms_norm %y, @layers.0.n2 {eps = 1.0e-06 : f64, group = 32 : i64} : tensor<?x32xf32>
    %wb = g4.dequant @layers.0.qb : tensor<64x32xbf16>
    %qb = g4.matmul %b, %wb : tensor<?x32xf32>, tensor<64x32xbf16> -> tensor<?x64xf32>
    %c = g4.rms_norm %x, @layers.0.head_norm {eps = 1.0e-06 : f64, group = 16 : i64} : tensor<?x32xf32>
    %wc = g4.dequant @layers.0.qc : tensor<64x32xbf16>
    %qc = g4.matmul %c, %wc : tensor<?x32xf32>, tensor<64x32xbf16> -> tensor<?x64xf32>
    %wg = g4.dequant @layers.0.gate : tensor<96x32xbf16>
    %g0 = g4.matmul %x, %wg : tensor<?x32xf32>, tensor<96x32xbf16> -> tensor<?x96xf32>
    %g = g4.gelu_tanh %g0 : tensor<?x96xf32>
    %wu = g4.dequant @layers.0.up : tensor<96x32xbf16>
    %u = g4.matmul %x, %wu : tensor<?x32xf32>, tensor<96x32xbf16> -> tensor<?x96xf32>
    %gu = g4.mul %g, %u : tensor<?x96xf32>
    %wd = g4.dequant @layers.0.down : tensor<32x96xbf16>
    %d = g4.matmul %gu, %wd : tensor<?x96xf32>, tensor<32x96xbf16> -> tensor<?x32xf32>
    return %s, %b2, %qa, %qb, %qc, %u, %d : tensor<?x32xf32>, tensor<?x32xf32>, tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x96xf32>, tensor<?x32xf32>
  }
}

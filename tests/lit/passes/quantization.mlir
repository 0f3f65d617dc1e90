// RUN: g4c opt %s --split-input-file --g4-quantize-rtn | FileCheck %s
// RUN: g4c opt %s --split-input-file --g4-quantize-rtn="group-size=64 symmetric=false" | FileCheck %s --check-prefix=G64
// RUN: g4c opt %s --split-input-file --g4-quantize-rtn="clip=mse" | FileCheck %s --check-prefix=CLIP
// RUN: not g4c opt %s --split-input-file --g4-quantize-rtn="clip=max" 2>&1 | FileCheck %s --check-prefix=BADCLIP
// RUN: g4c opt %s --split-input-file --g4-gptq --verify-diagnostics

// Linear weights (dequant→matmul, linear, gate_up) become INT4; padded_in rounds
// in_features up to the group; the embedding (not a Linear) and the norm stay BF16.
// CHECK: module attributes {g4.quantization = {clip = "none", group_size = 128 : i64, linears = 4 : i64, method = "rtn", symmetric = true}}
// CLIP: module attributes {g4.quantization = {clip = "mse", group_size = 128 : i64, linears = 4 : i64, method = "rtn", symmetric = true}}
// BADCLIP: g4-quantize-rtn: clip must be none or mse, got max
// CHECK-DAG: g4.weight @embed_tokens : tensor<64x32xbf16>{{$}}
// CHECK-DAG: g4.weight @layers.0.self_attn.q_proj : tensor<64x200xbf16> {{.*}}#g4.int4<group_size = 128, symmetric = true, padded_in = 256, scale_type = f16>
// CHECK-DAG: g4.weight @layers.0.self_attn.o_proj : tensor<32x64xbf16> {{.*}}#g4.int4<group_size = 128, symmetric = true, padded_in = 128, scale_type = f16>
// CHECK-DAG: g4.weight @layers.0.mlp.gate_proj : tensor<96x32xbf16> {{.*}}#g4.int4<group_size = 128, symmetric = true, padded_in = 128, scale_type = f16>
// CHECK-DAG: g4.weight @layers.0.input_layernorm : tensor<32xbf16> {layer = 0 : i64}{{$}}
// G64-DAG: g4.weight @layers.0.self_attn.q_proj : tensor<64x200xbf16> {{.*}}#g4.int4<group_size = 64, symmetric = false, padded_in = 256, scale_type = f16>
// G64-DAG: g4.weight @layers.0.self_attn.o_proj : tensor<32x64xbf16> {{.*}}#g4.int4<group_size = 64, symmetric = false, padded_in = 64, scale_type = f16>
// expected-error@+1 {{g4-gptq: no calibration executor}}
module {
  g4.weight @embed_tokens : tensor<64x32xbf16>
  g4.weight @layers.0.input_layernorm : tensor<32xbf16> {layer = 0 : i64}
  g4.weight @layers.0.self_attn.q_proj : tensor<64x200xbf16> {layer = 0 : i64}
  g4.weight @layers.0.self_attn.o_proj : tensor<32x64xbf16> {layer = 0 : i64}
  g4.weight @layers.0.mlp.gate_proj : tensor<96x32xbf16> {layer = 0 : i64}
  g4.weight @layers.0.mlp.up_proj : tensor<96x32xbf16> {layer = 0 : i64}
  func.func @step(%x: tensor<?x200xf32>, %a: tensor<?x64xf32>, %m: tensor<?x32xf32>) -> (tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x96xf32>) {
    %w = g4.dequant @layers.0.self_attn.q_proj : tensor<64x200xbf16>
    %q = g4.matmul %x, %w : tensor<?x200xf32>, tensor<64x200xbf16> -> tensor<?x64xf32>
    %o = g4.linear %a, @layers.0.self_attn.o_proj : tensor<?x64xf32> -> tensor<?x32xf32>
    %gu = g4.gate_up %m, @layers.0.mlp.gate_proj, @layers.0.mlp.up_proj : tensor<?x32xf32> -> tensor<?x96xf32>
    return %q, %o, %gu : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x96xf32>
  }
}

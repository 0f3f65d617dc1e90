// RUN: g4c opt %s --split-input-file --g4-quantize-table | FileCheck %s
// RUN: g4c opt %s --split-input-file --g4-quantize-table=dtype=bf16 | FileCheck %s --check-prefix=BF16
// RUN: not g4c opt %s --split-input-file --g4-quantize-table=dtype=fp8 2>&1 | FileCheck %s --check-prefix=BAD

// The tied table of g4.embed and g4.lm_head becomes int8 rows; the norm and the Linear stay.
// CHECK: g4.weight @embed_tokens : tensor<128x32xbf16> {int8_rows}
// CHECK: g4.weight @norm : tensor<32xbf16>{{$}}
// CHECK: g4.weight @proj : tensor<32x32xbf16>{{$}}
// BF16: g4.weight @embed_tokens : tensor<128x32xbf16>{{$}}
// BAD: dtype must be bf16 or int8, got fp8
g4.weight @embed_tokens : tensor<128x32xbf16>
g4.weight @norm : tensor<32xbf16>
g4.weight @proj : tensor<32x32xbf16>
func.func @step(%ids: tensor<?xi32>) -> tensor<?x128xf32> {
  %h = g4.embed %ids, @embed_tokens {scale = 5.65625 : f64} : tensor<?xi32> -> tensor<?x32xf32>
  %p = g4.linear %h, @proj : tensor<?x32xf32> -> tensor<?x32xf32>
  %l = g4.lm_head %p {eps = 1.0e-06 : f64, norm = @norm, softcap = 3.0e+01 : f64, table = @embed_tokens} : tensor<?x32xf32> -> tensor<?x128xf32>
  return %l : tensor<?x128xf32>
}

// -----

// The unfused head (g4.logits) reads the table too.
// CHECK: g4.weight @table : tensor<64x16xbf16> {int8_rows}
g4.weight @table : tensor<64x16xbf16>
func.func @head(%h: tensor<?x16xf32>) -> tensor<?x64xf32> {
  %l = g4.logits %h, @table : tensor<?x16xf32> -> tensor<?x64xf32>
  return %l : tensor<?x64xf32>
}

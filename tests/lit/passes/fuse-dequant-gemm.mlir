// RUN: g4c opt %s --split-input-file --g4-fuse-dequant-gemm | FileCheck %s
// RUN: g4c opt %s --split-input-file --g4-fuse-dequant-gemm=fuse-gate-up=false | FileCheck %s --check-prefix=NOGU

g4.weight @q : tensor<64x32xbf16> {quant = #g4.int4<group_size = 16, symmetric = true, padded_in = 32, scale_type = f16>}
// CHECK-LABEL: func.func @single
// NOGU-LABEL: func.func @single
func.func @single(%x: tensor<?x32xf32>) -> tensor<?x64xf32> {
  // CHECK-NOT: g4.dequant
  // CHECK-NOT: g4.matmul
  // CHECK: %[[Y:.*]] = g4.linear %{{.*}}, @q {g4.layer = 3 : i64} : tensor<?x32xf32> -> tensor<?x64xf32>
  // CHECK: return %[[Y]]
  %w = g4.dequant @q {g4.layer = 3 : i64} : tensor<64x32xbf16>
  %y = g4.matmul %x, %w {g4.layer = 3 : i64} : tensor<?x32xf32>, tensor<64x32xbf16> -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

// A dequant with two users: both become linears, the dequant disappears.
g4.weight @e : tensor<64x32xbf16>
// CHECK-LABEL: func.func @shared
func.func @shared(%x: tensor<?x32xf32>, %z: tensor<?x32xf32>) -> (tensor<?x64xf32>, tensor<?x64xf32>) {
  // CHECK-NOT: g4.dequant
  // CHECK: g4.linear %{{.*}}, @e
  // CHECK: g4.linear %{{.*}}, @e
  %w = g4.dequant @e : tensor<64x32xbf16>
  %a = g4.matmul %x, %w : tensor<?x32xf32>, tensor<64x32xbf16> -> tensor<?x64xf32>
  %b = g4.matmul %z, %w : tensor<?x32xf32>, tensor<64x32xbf16> -> tensor<?x64xf32>
  return %a, %b : tensor<?x64xf32>, tensor<?x64xf32>
}

// -----

// A matmul over a value that is not a dequantized weight stays.
// CHECK-LABEL: func.func @not_a_weight
func.func @not_a_weight(%x: tensor<?x32xf32>, %w: tensor<64x32xbf16>) -> tensor<?x64xf32> {
  // CHECK: g4.matmul
  // CHECK-NOT: g4.linear
  %y = g4.matmul %x, %w : tensor<?x32xf32>, tensor<64x32xbf16> -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

// The MLP: gelu_tanh(m·Wgᵀ) ⊙ (m·Wuᵀ) -> one gate_up.
g4.weight @gate : tensor<96x32xbf16>
g4.weight @up : tensor<96x32xbf16>
// CHECK-LABEL: func.func @mlp
// NOGU-LABEL: func.func @mlp
func.func @mlp(%m: tensor<?x32xf32>) -> tensor<?x96xf32> {
  // CHECK-NEXT: %[[GU:.*]] = g4.gate_up %{{.*}}, @gate, @up {g4.layer = 0 : i64} : tensor<?x32xf32> -> tensor<?x96xf32>
  // CHECK-NEXT: return %[[GU]]
  // NOGU: g4.linear %{{.*}}, @gate
  // NOGU: g4.gelu_tanh
  // NOGU: g4.linear %{{.*}}, @up
  // NOGU: g4.mul
  %wg = g4.dequant @gate : tensor<96x32xbf16>
  %g0 = g4.matmul %m, %wg : tensor<?x32xf32>, tensor<96x32xbf16> -> tensor<?x96xf32>
  %g = g4.gelu_tanh %g0 : tensor<?x96xf32>
  %wu = g4.dequant @up : tensor<96x32xbf16>
  %u = g4.matmul %m, %wu : tensor<?x32xf32>, tensor<96x32xbf16> -> tensor<?x96xf32>
  %gu = g4.mul %g, %u {g4.layer = 0 : i64} : tensor<?x96xf32>
  return %gu : tensor<?x96xf32>
}

// -----

// gate and up over different inputs are not one op.
g4.weight @gate : tensor<96x32xbf16>
g4.weight @up : tensor<96x32xbf16>
// CHECK-LABEL: func.func @different_inputs
func.func @different_inputs(%m: tensor<?x32xf32>, %n: tensor<?x32xf32>) -> tensor<?x96xf32> {
  // CHECK-NOT: g4.gate_up
  // CHECK: g4.mul
  %wg = g4.dequant @gate : tensor<96x32xbf16>
  %g0 = g4.matmul %m, %wg : tensor<?x32xf32>, tensor<96x32xbf16> -> tensor<?x96xf32>
  %g = g4.gelu_tanh %g0 : tensor<?x96xf32>
  %wu = g4.dequant @up : tensor<96x32xbf16>
  %u = g4.matmul %n, %wu : tensor<?x32xf32>, tensor<96x32xbf16> -> tensor<?x96xf32>
  %gu = g4.mul %g, %u : tensor<?x96xf32>
  return %gu : tensor<?x96xf32>
}

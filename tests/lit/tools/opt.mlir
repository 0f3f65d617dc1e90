// g4c opt is an mlir-opt: textual pipelines, IR printing after every pass, pass flags in order.
// RUN: g4c opt %s --pass-pipeline='builtin.module(g4-fuse-dequant-gemm{fuse-gate-up=false},g4-fuse-attention-mask)' | FileCheck %s --check-prefix=PIPE
// RUN: g4c opt %s --g4-fuse-dequant-gemm --g4-fuse-attention-mask --mlir-print-ir-after-all 2>&1 | FileCheck %s --check-prefix=AFTER
// RUN: g4c opt --help | FileCheck %s --check-prefix=HELP

// PIPE-LABEL: func.func @layer
// PIPE: g4.linear %{{.*}}, @q
// PIPE: g4.attention
// PIPE-NOT: g4.pv

// AFTER: IR Dump After FuseDequantGemm (g4-fuse-dequant-gemm)
// AFTER: g4.linear
// AFTER: g4.softmax
// AFTER: IR Dump After FuseAttentionMask (g4-fuse-attention-mask)
// AFTER-NOT: g4.softmax
// AFTER: g4.attention

// HELP: --g4-fuse-attention-mask
// HELP: --g4-fuse-dequant-gemm
// HELP: --g4-plan-offload

g4.weight @q : tensor<64x32xbf16>
func.func @layer(%x: tensor<?x32xf32>, %pos: tensor<?xi32>) -> tensor<?x64xf32> {
  %w = g4.dequant @q : tensor<64x32xbf16>
  %q = g4.matmul %x, %w : tensor<?x32xf32>, tensor<64x32xbf16> -> tensor<?x64xf32>
  %keys, %values = g4.kv_read %pos {layer = 0 : i64} : tensor<?xi32> -> tensor<?x32xf32>, tensor<?x32xf32>
  %s = g4.qk %q, %keys {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 16 : i64} : tensor<?x64xf32>, tensor<?x32xf32> -> tensor<4x?x?xf32>
  %m = g4.mask %s, %pos {window = 0 : i64} : tensor<4x?x?xf32>, tensor<?xi32>
  %p = g4.softmax %m : tensor<4x?x?xf32>
  %o = g4.pv %p, %values {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 16 : i64} : tensor<4x?x?xf32>, tensor<?x32xf32> -> tensor<?x64xf32>
  return %o : tensor<?x64xf32>
}

// RUN: g4c opt %s --split-input-file --g4-plan-memory="tokens=4 alignment=16" | FileCheck %s

// A chain h -> a -> b -> c of [4 x 32] f32 (512 B each at 4 tokens): neighbours are live
// together, every other one can reuse the bytes. Greedy (largest first, lowest offset):
// h 0, a 512, b 0, c 512; the token ids (4 x i32 = 16 B) overlap only h -> 512. Peak 1024.
// CHECK: module attributes {g4.activations = {alignment = 16 : i64, decode = array<i64: 0>, max_peak_bytes = 1024 : i64, peak_bytes = array<i64: 1024>, seqs = array<i64: 1>, tokens = array<i64: 4>}}
g4.weight @e : tensor<8x32xbf16>
g4.weight @n : tensor<32xbf16>
// CHECK-LABEL: func.func @chain
// CHECK-SAME: g4.arena_args = [array<i64: 512>]
func.func @chain(%ids: tensor<?xi32>) -> tensor<?x32xf32> {
  // CHECK-NEXT: g4.embed {{.*}}g4.arena = [array<i64: 0>]
  // CHECK-NEXT: g4.rms_norm {{.*}}g4.arena = [array<i64: 512>]
  // CHECK-NEXT: g4.gelu_tanh {{.*}}g4.arena = [array<i64: 0>]
  // CHECK-NEXT: g4.gelu_tanh {{.*}}g4.arena = [array<i64: 512>]
  %h = g4.embed %ids, @e {scale = 1.0 : f64} : tensor<?xi32> -> tensor<?x32xf32>
  %a = g4.rms_norm %h, @n {eps = 1.0e-06 : f64, group = 32 : i64} : tensor<?x32xf32>
  %b = g4.gelu_tanh %a : tensor<?x32xf32>
  %c = g4.gelu_tanh %b : tensor<?x32xf32>
  return %c : tensor<?x32xf32>
}

// -----

// Per bucket: decode (1 token, 1 sequence) and prefill (4 tokens, at most 2 sequences).
// Logits, and the softcap that follows them, have one row per sequence: 128 x 4 B per row.
//   bucket (1,1): logits 512 @0, softcap 512 @512, h 128 @512 (live with logits, not with
//                 softcap), ids 16 @0 (dead before logits) -> 1024
//   bucket (4,2): logits 1024 @0, softcap 1024 @1024, h 512 @1024, ids 16 @0 -> 2048
// The decode flags follow the buckets: (1,1) from g4.buckets decode, (4,2) from prefill.
// CHECK: g4.activations = {alignment = 16 : i64, decode = array<i64: 1, 0>, max_peak_bytes = 2048 : i64, peak_bytes = array<i64: 1024, 2048>, seqs = array<i64: 1, 2>, tokens = array<i64: 1, 4>}
module attributes {g4.buckets = {decode = array<i64: 1>, prefill = array<i64: 4>, max_seqs = 2 : i64}} {
  g4.weight @e : tensor<128x32xbf16>
  // CHECK-LABEL: func.func @buckets
  // CHECK-SAME: g4.arena_args = [array<i64: 0, 0>]
  func.func @buckets(%ids: tensor<?xi32>) -> tensor<?x128xf32> {
    // CHECK-NEXT: g4.embed {{.*}}g4.arena = [array<i64: 512, 1024>]
    // CHECK-NEXT: g4.logits {{.*}}g4.arena = [array<i64: 0, 0>]
    // CHECK-NEXT: g4.softcap {{.*}}g4.arena = [array<i64: 512, 1024>]
    %h = g4.embed %ids, @e {scale = 1.0 : f64} : tensor<?xi32> -> tensor<?x32xf32>
    %l = g4.logits %h, @e : tensor<?x32xf32> -> tensor<?x128xf32>
    %c = g4.softcap %l {cap = 30.0 : f64} : tensor<?x128xf32>
    return %c : tensor<?x128xf32>
  }
}

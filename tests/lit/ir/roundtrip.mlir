// Every g4 op and attribute prints and parses back to the same text.
// RUN: g4c opt %s | g4c opt | FileCheck %s
// RUN: g4c opt %s --mlir-print-op-generic | g4c opt | FileCheck %s

// CHECK: g4.weight @embed_tokens : tensor<128x32xbf16>
g4.weight @embed_tokens : tensor<128x32xbf16>
// CHECK: g4.weight @q : tensor<64x32xbf16> {layer = 0 : i64, quant = #g4.int4<group_size = 16, symmetric = true, padded_in = 32, scale_type = f16>, residency = "streamed", source = "layers.0.q"}
g4.weight @q : tensor<64x32xbf16> {layer = 0 : i64, quant = #g4.int4<group_size = 16, symmetric = true, padded_in = 32, scale_type = f16>, residency = "streamed", source = "layers.0.q"}
// CHECK: g4.weight @k : tensor<32x32xbf16> {quant = #g4.int4<group_size = 128, symmetric = false, padded_in = 128, scale_type = bf16>}
g4.weight @k : tensor<32x32xbf16> {quant = #g4.int4<group_size = 128, symmetric = false, padded_in = 128, scale_type = bf16>}
g4.weight @o : tensor<32x64xbf16>
g4.weight @gate : tensor<96x32xbf16>
g4.weight @up : tensor<96x32xbf16>
g4.weight @norm : tensor<32xbf16>
g4.weight @qn : tensor<16xbf16>
g4.weight @scalar : tensor<1xbf16>
// CHECK: g4.kv_buffer @kv.layer0 {bytes_per_token = 128 : i64, capacity = 19 : i64, head_dim = 16 : i64, kind = "ring", layer = 0 : i64, max_seqs = 2 : i64, num_kv_heads = 2 : i64, pool_bytes = 4864 : i64}
g4.kv_buffer @kv.layer0 {layer = 0 : i64, kind = "ring", num_kv_heads = 2 : i64, head_dim = 16 : i64, bytes_per_token = 128 : i64, pool_bytes = 4864 : i64, capacity = 19 : i64, max_seqs = 2 : i64}
// CHECK: g4.kv_buffer @kv.layer1 {block_size = 16 : i64, bytes_per_token = 128 : i64, head_dim = 16 : i64, kind = "paged", layer = 1 : i64, num_blocks = 8 : i64, num_kv_heads = 2 : i64, pool_bytes = 16384 : i64}
g4.kv_buffer @kv.layer1 {layer = 1 : i64, kind = "paged", num_kv_heads = 2 : i64, head_dim = 16 : i64, bytes_per_token = 128 : i64, pool_bytes = 16384 : i64, block_size = 16 : i64, num_blocks = 8 : i64}

// CHECK-LABEL: func.func @all_ops
func.func @all_ops(%ids: tensor<?xi32>, %pos: tensor<?xi32>) -> (tensor<?x128xf32>, tensor<?xi32>, tensor<?xi32>) {
  // CHECK: g4.prefetch [@q] {layer = 0 : i64, slot = 0 : i64}
  g4.prefetch [@q] {layer = 0 : i64, slot = 0 : i64}
  // CHECK: g4.wait {layer = 0 : i64, slot = 0 : i64}
  g4.wait {layer = 0 : i64, slot = 0 : i64}
  // CHECK: %[[H:.*]] = g4.embed %{{.*}}, @embed_tokens {scale = 5.656250e+00 : f64} : tensor<?xi32> -> tensor<?x32xf32>
  %h = g4.embed %ids, @embed_tokens {scale = 5.65625 : f64} : tensor<?xi32> -> tensor<?x32xf32>
  // CHECK: g4.rms_norm %[[H]], @norm {eps = 9.9999999999999995E-7 : f64, group = 32 : i64} : tensor<?x32xf32>
  %a = g4.rms_norm %h, @norm {eps = 1.0e-06 : f64, group = 32 : i64} : tensor<?x32xf32>
  // CHECK: g4.dequant @q : tensor<64x32xbf16>
  %wq = g4.dequant @q : tensor<64x32xbf16>
  // CHECK: g4.matmul %{{.*}}, %{{.*}} : tensor<?x32xf32>, tensor<64x32xbf16> -> tensor<?x64xf32>
  %q0 = g4.matmul %a, %wq : tensor<?x32xf32>, tensor<64x32xbf16> -> tensor<?x64xf32>
  // CHECK: g4.rms_norm %{{.*}}, @qn {eps = {{.*}}, group = 16 : i64} : tensor<?x64xf32>
  %q1 = g4.rms_norm %q0, @qn {eps = 1.0e-06 : f64, group = 16 : i64} : tensor<?x64xf32>
  // CHECK: g4.rope %{{.*}}, %{{.*}} {head_dim = 16 : i64, rope_type = "proportional", rotary_pairs = 2 : i64, theta = 1.000000e+06 : f64} : tensor<?x64xf32>, tensor<?xi32>
  %q = g4.rope %q1, %pos {head_dim = 16 : i64, rotary_pairs = 2 : i64, theta = 1.0e+06 : f64, rope_type = "proportional"} : tensor<?x64xf32>, tensor<?xi32>
  // CHECK: g4.linear %{{.*}}, @k : tensor<?x32xf32> -> tensor<?x32xf32>
  %k = g4.linear %a, @k : tensor<?x32xf32> -> tensor<?x32xf32>
  // CHECK: g4.rms_norm %{{.*}} {eps = {{.*}}, group = 16 : i64} : tensor<?x32xf32>
  %v = g4.rms_norm %k {eps = 1.0e-06 : f64, group = 16 : i64} : tensor<?x32xf32>
  // CHECK: g4.kv_write %{{.*}} key(%{{.*}} : tensor<?x32xf32>) value(%{{.*}} : tensor<?x32xf32>) {layer = 0 : i64, window = 4 : i64} : tensor<?xi32>
  g4.kv_write %pos key(%k : tensor<?x32xf32>) value(%v : tensor<?x32xf32>) {layer = 0 : i64, window = 4 : i64} : tensor<?xi32>
  // CHECK: g4.kv_read %{{.*}} {layer = 0 : i64} : tensor<?xi32> -> tensor<?x32xf32>, tensor<?x32xf32>
  %keys, %values = g4.kv_read %pos {layer = 0 : i64} : tensor<?xi32> -> tensor<?x32xf32>, tensor<?x32xf32>
  // CHECK: g4.qk %{{.*}}, %{{.*}} {head_dim = 16 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64} : tensor<?x64xf32>, tensor<?x32xf32> -> tensor<4x?x?xf32>
  %s = g4.qk %q, %keys {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 16 : i64} : tensor<?x64xf32>, tensor<?x32xf32> -> tensor<4x?x?xf32>
  // CHECK: g4.mask %{{.*}}, %{{.*}} {window = 4 : i64} : tensor<4x?x?xf32>, tensor<?xi32>
  %m = g4.mask %s, %pos {window = 4 : i64} : tensor<4x?x?xf32>, tensor<?xi32>
  // CHECK: g4.softmax %{{.*}} : tensor<4x?x?xf32>
  %p = g4.softmax %m : tensor<4x?x?xf32>
  // CHECK: g4.pv %{{.*}}, %{{.*}} {head_dim = 16 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64} : tensor<4x?x?xf32>, tensor<?x32xf32> -> tensor<?x64xf32>
  %o = g4.pv %p, %values {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 16 : i64} : tensor<4x?x?xf32>, tensor<?x32xf32> -> tensor<?x64xf32>
  // CHECK: g4.attention %{{.*}}, %{{.*}} {head_dim = 16 : i64, layer = 1 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 1.000000e+00 : f64, window = 0 : i64} : tensor<?x64xf32>, tensor<?xi32> -> tensor<?x64xf32>
  %o2 = g4.attention %o, %pos {layer = 1 : i64, window = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 16 : i64, scale = 1.0 : f64} : tensor<?x64xf32>, tensor<?xi32> -> tensor<?x64xf32>
  // CHECK: g4.linear %{{.*}}, @o : tensor<?x64xf32> -> tensor<?x32xf32>
  %x = g4.linear %o2, @o : tensor<?x64xf32> -> tensor<?x32xf32>
  // CHECK: %{{.*}}, %{{.*}} = g4.norm_residual %{{.*}}, %{{.*}} {eps = {{.*}}, next = @norm, post = @norm, scalar = @scalar} : tensor<?x32xf32>, tensor<?x32xf32>
  %h1, %n1 = g4.norm_residual %h, %x {post = @norm, next = @norm, scalar = @scalar, eps = 1.0e-06 : f64} : tensor<?x32xf32>, tensor<?x32xf32>
  // CHECK: g4.norm_residual %{{.*}}, %{{.*}} {eps = {{.*}}, post = @norm} : tensor<?x32xf32>{{$}}
  %h1b = g4.norm_residual %h1, %x {post = @norm, eps = 1.0e-06 : f64} : tensor<?x32xf32>
  // CHECK: g4.qk_norm_rope_kv_write %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {eps = {{.*}}, head_dim = 16 : i64, k_norm = @qn, layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, q_norm = @qn, rope_theta = 1.000000e+04 : f64, rotary_pairs = 8 : i64, window = 4 : i64} : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?xi32>
  %qq = g4.qk_norm_rope_kv_write %q0, %k, %k, %pos {q_norm = @qn, k_norm = @qn, eps = 1.0e-06 : f64, num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 16 : i64, rotary_pairs = 8 : i64, rope_theta = 1.0e+04 : f64, layer = 0 : i64, window = 4 : i64} : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?xi32>
  // CHECK: g4.lm_head %{{.*}} {eps = {{.*}}, norm = @norm, softcap = 3.000000e+01 : f64, table = @embed_tokens} : tensor<?x32xf32> -> tensor<?x128xf32>
  %lh = g4.lm_head %h1b {norm = @norm, table = @embed_tokens, eps = 1.0e-06 : f64, softcap = 30.0 : f64} : tensor<?x32xf32> -> tensor<?x128xf32>
  // CHECK: g4.gate_up %{{.*}}, @gate, @up : tensor<?x32xf32> -> tensor<?x96xf32>
  %gu = g4.gate_up %n1, @gate, @up : tensor<?x32xf32> -> tensor<?x96xf32>
  // CHECK: g4.gelu_tanh %{{.*}} : tensor<?x96xf32>
  %g = g4.gelu_tanh %gu : tensor<?x96xf32>
  // CHECK: g4.mul %{{.*}}, %{{.*}} : tensor<?x96xf32>
  %gm = g4.mul %g, %gu : tensor<?x96xf32>
  // CHECK: g4.add %{{.*}}, %{{.*}} : tensor<?x32xf32>
  %h2 = g4.add %h1, %x : tensor<?x32xf32>
  // CHECK: g4.scale %{{.*}}, @scalar : tensor<?x32xf32>
  %h3 = g4.scale %h2, @scalar : tensor<?x32xf32>
  // CHECK: g4.logits %{{.*}}, @embed_tokens : tensor<?x32xf32> -> tensor<?x128xf32>
  %l = g4.logits %h3, @embed_tokens : tensor<?x32xf32> -> tensor<?x128xf32>
  // CHECK: g4.softcap %{{.*}} {cap = 3.000000e+01 : f64} : tensor<?x128xf32>
  %c = g4.softcap %l {cap = 30.0 : f64} : tensor<?x128xf32>
  // CHECK: g4.argmax %{{.*}} : tensor<?x128xf32> -> tensor<?xi32>
  %t = g4.argmax %c : tensor<?x128xf32> -> tensor<?xi32>
  // CHECK: g4.sample %{{.*}} {temperature = 0.69999999999999996 : f64, top_k = 64 : i64, top_p = 0.94999999999999996 : f64} : tensor<?x128xf32> -> tensor<?xi32>
  %t2 = g4.sample %c {temperature = 0.7 : f64, top_k = 64 : i64, top_p = 0.95 : f64} : tensor<?x128xf32> -> tensor<?xi32>
  return %c, %t, %t2 : tensor<?x128xf32>, tensor<?xi32>, tensor<?xi32>
}

// Verifier diagnostics of the g4 dialect.
// RUN: g4c opt %s --split-input-file --verify-diagnostics

// expected-error @below {{padded_in (100) must be a positive multiple of group_size (128)}}
g4.weight @w : tensor<64x100xbf16> {quant = #g4.int4<group_size = 128, symmetric = true, padded_in = 100, scale_type = f16>}

// -----

// expected-error @below {{padded_in 256 must be ceil(100 / 128) * 128}}
g4.weight @w : tensor<64x100xbf16> {quant = #g4.int4<group_size = 128, symmetric = true, padded_in = 256, scale_type = f16>}

// -----

// expected-error @below {{scale_type must be f16 or bf16}}
g4.weight @w : tensor<64x128xbf16> {quant = #g4.int4<group_size = 128, symmetric = true, padded_in = 128, scale_type = f32>}

// -----

// expected-error @below {{residency must be "resident" or "streamed", got "gpu"}}
g4.weight @w : tensor<64x128xbf16> {residency = "gpu"}

// -----

g4.weight @w : tensor<64x32xbf16>
func.func @linear_shape(%x: tensor<?x32xf32>) -> tensor<?x48xf32> {
  // expected-error @below {{weight 'w' has shape [64, 32], expected [48, 32]}}
  %y = g4.linear %x, @w : tensor<?x32xf32> -> tensor<?x48xf32>
  return %y : tensor<?x48xf32>
}

// -----

func.func @missing_weight(%x: tensor<?x32xf32>) -> tensor<?x64xf32> {
  // expected-error @below {{weight 'nowhere' does not name a g4.weight}}
  %y = g4.linear %x, @nowhere : tensor<?x32xf32> -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

func.func @matmul_k(%x: tensor<?x32xf32>, %w: tensor<64x48xbf16>) -> tensor<?x64xf32> {
  // expected-error @below {{input has 32 features, expected 48}}
  %y = g4.matmul %x, %w : tensor<?x32xf32>, tensor<64x48xbf16> -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

func.func @norm_group(%x: tensor<?x32xf32>) -> tensor<?x32xf32> {
  // expected-error @below {{group 12 must divide the 32 features}}
  %y = g4.rms_norm %x {eps = 1.0e-06 : f64, group = 12 : i64} : tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}

// -----

g4.weight @n : tensor<32xbf16>
func.func @norm_weight(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  // expected-error @below {{weight 'n' has shape [32], expected [16]}}
  %y = g4.rms_norm %x, @n {eps = 1.0e-06 : f64, group = 16 : i64} : tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

func.func @rope_pairs(%x: tensor<?x64xf32>, %pos: tensor<?xi32>) -> tensor<?x64xf32> {
  // expected-error @below {{default rope rotates all head_dim/2 pairs}}
  %y = g4.rope %x, %pos {head_dim = 16 : i64, rotary_pairs = 2 : i64, theta = 1.0e+04 : f64, rope_type = "default"} : tensor<?x64xf32>, tensor<?xi32>
  return %y : tensor<?x64xf32>
}

// -----

func.func @rope_too_many_pairs(%x: tensor<?x64xf32>, %pos: tensor<?xi32>) -> tensor<?x64xf32> {
  // expected-error @below {{rotary_pairs 9 must be in [0, head_dim/2 = 8]}}
  %y = g4.rope %x, %pos {head_dim = 16 : i64, rotary_pairs = 9 : i64, theta = 1.0e+06 : f64, rope_type = "proportional"} : tensor<?x64xf32>, tensor<?xi32>
  return %y : tensor<?x64xf32>
}

// -----

func.func @gqa(%q: tensor<?x64xf32>, %k: tensor<?x48xf32>) -> tensor<4x?x?xf32> {
  // expected-error @below {{num_heads (4) must be a multiple of num_kv_heads (3)}}
  %s = g4.qk %q, %k {num_heads = 4 : i64, num_kv_heads = 3 : i64, head_dim = 16 : i64} : tensor<?x64xf32>, tensor<?x48xf32> -> tensor<4x?x?xf32>
  return %s : tensor<4x?x?xf32>
}

// -----

func.func @qk_heads(%q: tensor<?x64xf32>, %k: tensor<?x32xf32>) -> tensor<2x?x?xf32> {
  // expected-error @below {{result's first dimension must be num_heads}}
  %s = g4.qk %q, %k {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 16 : i64} : tensor<?x64xf32>, tensor<?x32xf32> -> tensor<2x?x?xf32>
  return %s : tensor<2x?x?xf32>
}

// -----

func.func @pv_value(%p: tensor<4x?x?xf32>, %v: tensor<?x16xf32>) -> tensor<?x64xf32> {
  // expected-error @below {{value has 16 features, expected 32}}
  %o = g4.pv %p, %v {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 16 : i64} : tensor<4x?x?xf32>, tensor<?x16xf32> -> tensor<?x64xf32>
  return %o : tensor<?x64xf32>
}

// -----

func.func @mask_window(%s: tensor<4x?x?xf32>, %pos: tensor<?xi32>) -> tensor<4x?x?xf32> {
  // expected-error @below {{window must be >= 0 (0 = causal)}}
  %m = g4.mask %s, %pos {window = -1 : i64} : tensor<4x?x?xf32>, tensor<?xi32>
  return %m : tensor<4x?x?xf32>
}

// -----

func.func @kv_types(%pos: tensor<?xi32>, %k: tensor<?x32xf32>, %v: tensor<?x16xf32>) {
  // expected-error @below {{key and value must have the same type}}
  g4.kv_write %pos key(%k : tensor<?x32xf32>) value(%v : tensor<?x16xf32>) {layer = 0 : i64, window = 0 : i64} : tensor<?xi32>
  return
}

// -----

g4.weight @s : tensor<2xbf16>
func.func @scalar(%x: tensor<?x32xf32>) -> tensor<?x32xf32> {
  // expected-error @below {{scalar must name a one-element weight}}
  %y = g4.scale %x, @s : tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}

// -----

func.func @softcap(%x: tensor<?x32xf32>) -> tensor<?x32xf32> {
  // expected-error @below {{cap must be positive}}
  %y = g4.softcap %x {cap = 0.0 : f64} : tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}

// -----

func.func @sample(%l: tensor<?x32xf32>) -> tensor<?xi32> {
  // expected-error @below {{top_p must be in (0, 1]}}
  %t = g4.sample %l {temperature = 1.0 : f64, top_k = -1 : i64, top_p = 1.5 : f64} : tensor<?x32xf32> -> tensor<?xi32>
  return %t : tensor<?xi32>
}

// -----

// expected-error @below {{bytes_per_token 100 does not match 128 (BF16 K and V)}}
g4.kv_buffer @kv {layer = 0 : i64, kind = "ring", num_kv_heads = 2 : i64, head_dim = 16 : i64, bytes_per_token = 100 : i64, pool_bytes = 0 : i64, capacity = 4 : i64, max_seqs = 1 : i64}

// -----

// expected-error @below {{a paged buffer needs positive block_size and num_blocks}}
g4.kv_buffer @kv {layer = 0 : i64, kind = "paged", num_kv_heads = 2 : i64, head_dim = 16 : i64, bytes_per_token = 128 : i64, pool_bytes = 0 : i64}

// -----

func.func @activation_rank(%x: tensor<32xf32>) -> tensor<32xf32> {
  // expected-error @below {{operand #0 must be 2D tensor}}
  %y = g4.gelu_tanh %x : tensor<32xf32>
  return %y : tensor<32xf32>
}

// Ops of the `g4` dialect. C++ holds only the verifiers (G4Dialect.cpp).
#ifndef G4_OPS_TD
#define G4_OPS_TD

include "ir/G4Dialect.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"

class G4_Op<string mnemonic, list<Trait> traits = []> : Op<G4_Dialect, mnemonic, traits>;

// [tokens, features]: one row per token of the step (dynamic), features static.
def G4_Act : TensorRankOf<[F32, BF16, F16], [2]>;
// One int32 per token row (token ids, positions) or per sequence (sampled ids).
def G4_Ids : TensorRankOf<[I32], [1]>;
// Attention scores/probabilities [q_heads, queries, keys].
def G4_Scores : TensorRankOf<[F32], [3]>;

// Ops that name weights by symbol verify the symbols exist and fit.
def G4_WeightUser : DeclareOpInterfaceMethods<SymbolUserOpInterface>;

//===----------------------------------------------------------------------===//
// Weights and planning symbols
//===----------------------------------------------------------------------===//

def G4_WeightOp : G4_Op<"weight", [Symbol, HasParent<"::mlir::ModuleOp">]> {
  let summary = "a named weight of the checkpoint (logical shape, storage format)";
  let description = [{
    Declares a weight by its checkpoint name (prefix stripped, without the
    `.weight` suffix). `type` is the logical BF16 shape ([out, in] for a
    Linear). `quant` marks INT4 group-quantized storage; `int8_rows` marks a
    dense table stored as int8 codes and one fp32 scale per row, quantized
    when the runtime loads it (g4-quantize-table); `source` is the
    checkpoint key; `layer` is the decoder layer it belongs to (absent for
    the embedding and the final norm). `g4-plan-offload` sets `residency`
    to "resident" or "streamed".

    Example:
    ```mlir
    g4.weight @embed_tokens : tensor<262144x3840xbf16>
    g4.weight @layers.0.mlp.down_proj : tensor<3840x15360xbf16> {layer = 0 : i64,
        quant = #g4.int4<group_size = 128, symmetric = true, padded_in = 15360, scale_type = f16>}
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, TypeAttrOf<AnyStaticShapeTensor>:$type,
                       OptionalAttr<G4_Int4QuantAttr>:$quant,
                       OptionalAttr<UnitAttr>:$int8_rows,
                       OptionalAttr<StrAttr>:$residency,
                       OptionalAttr<I64Attr>:$layer,
                       OptionalAttr<StrAttr>:$source);
  let assemblyFormat = "$sym_name `:` $type attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::RankedTensorType getTensorType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getType());
    }
    // Device bytes of the stored weight (BF16, INT4 codes+scales+zeros, or int8 codes + fp32
    // row scales).
    int64_t storageBytes();
    bool isStreamed() { return getResidency() && *getResidency() == "streamed"; }
  }];
}

def G4_KVBufferOp : G4_Op<"kv_buffer", [Symbol, HasParent<"::mlir::ModuleOp">]> {
  let summary = "the KV cache of one decoder layer (ring or paged), planned by g4-plan-kv";
  let description = [{
    Sliding layers get a per-sequence ring of `capacity` tokens (window - 1 +
    max chunk: a chunk's first query still sees window - 1 older keys);
    full layers get a pool of `num_blocks` paged blocks of `block_size`
    tokens shared by all sequences. A paged sliding layer carries its `window`:
    its blocks come from the window pool, which takes a sequence's blocks back as
    they leave the window (a sequence holds at most
    ceil((window - 1 + max chunk) / block_size) + 1 of them). Every token stores K and V.
    `bytes_per_token` is the BF16 size of one token's entries; `pool_bytes`
    the device bytes of the whole buffer.

    Example:
    ```mlir
    g4.kv_buffer @kv.layer0 {layer = 0 : i64, kind = "ring", num_kv_heads = 8 : i64,
        head_dim = 256 : i64, bytes_per_token = 8192 : i64,
        capacity = 1279 : i64, max_seqs = 4 : i64, pool_bytes = 41910272 : i64}
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, I64Attr:$layer, StrAttr:$kind,
                       I64Attr:$num_kv_heads, I64Attr:$head_dim,
                       I64Attr:$bytes_per_token, I64Attr:$pool_bytes,
                       OptionalAttr<I64Attr>:$capacity, OptionalAttr<I64Attr>:$max_seqs,
                       OptionalAttr<I64Attr>:$block_size, OptionalAttr<I64Attr>:$num_blocks,
                       OptionalAttr<I64Attr>:$window);
  let assemblyFormat = "$sym_name attr-dict";
  let hasVerifier = 1;
}

def G4_PrefetchOp : G4_Op<"prefetch"> {
  let summary = "start copying a streamed layer's weights from pinned host memory";
  let description = [{
    Inserted by `g4-plan-offload` at the start of layer `layer - 1`: the copy
    stream fills staging slot `slot` (double buffer) with the weights listed.

    Example:
    ```mlir
    g4.prefetch [@layers.7.self_attn.q_proj, @layers.7.mlp.down_proj] {layer = 7 : i64, slot = 1 : i64}
    ```
  }];
  let arguments = (ins SymbolRefArrayAttr:$weights, I64Attr:$layer, I64Attr:$slot);
  let assemblyFormat = "$weights attr-dict";
}

def G4_WaitOp : G4_Op<"wait"> {
  let summary = "wait until a streamed layer's prefetch has landed";
  let description = [{
    Placed before the first op that reads a weight of streamed layer `layer`.

    Example:
    ```mlir
    g4.wait {layer = 7 : i64, slot = 1 : i64}
    ```
  }];
  let arguments = (ins I64Attr:$layer, I64Attr:$slot);
  let assemblyFormat = "attr-dict";
}

//===----------------------------------------------------------------------===//
// Model-level ops (the frontend's unfused form)
//===----------------------------------------------------------------------===//

def G4_EmbedOp : G4_Op<"embed", [Pure, G4_WeightUser]> {
  let summary = "embedding lookup times a scale";
  let description = [{
    `result[t] = table[ids[t]] * scale` (scale = sqrt(hidden), rounded to BF16).

    Example:
    ```mlir
    %h = g4.embed %ids, @embed_tokens {scale = 62.0 : f64} : tensor<?xi32> -> tensor<?x3840xf32>
    ```
  }];
  let arguments = (ins G4_Ids:$ids, FlatSymbolRefAttr:$table, F64Attr:$scale);
  let results = (outs G4_Act:$result);
  let assemblyFormat = "$ids `,` $table attr-dict `:` type($ids) `->` type($result)";
}

def G4_RmsNormOp : G4_Op<"rms_norm", [Pure, G4_WeightUser, AllTypesMatch<["input", "result"]>]> {
  let summary = "RMSNorm over groups of `group` features, with or without a scale";
  let description = [{
    `y = x * (mean(x^2) + eps)^-1/2 * w` over each group of `group` consecutive
    features (group = hidden for a row norm, head_dim for the per-head q/k/v
    norms); `w` is used as is (not 1 + w). Without `weight` there is no scale.

    Example:
    ```mlir
    %a = g4.rms_norm %h, @layers.0.input_layernorm {eps = 1.0e-06 : f64, group = 3840 : i64} : tensor<?x3840xf32>
    %v = g4.rms_norm %v_raw {eps = 1.0e-06 : f64, group = 256 : i64} : tensor<?x2048xf32>
    ```
  }];
  let arguments = (ins G4_Act:$input, OptionalAttr<FlatSymbolRefAttr>:$weight, F64Attr:$eps, I64Attr:$group);
  let results = (outs G4_Act:$result);
  let assemblyFormat = "$input (`,` $weight^)? attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def G4_DequantOp : G4_Op<"dequant", [Pure, G4_WeightUser]> {
  let summary = "materialize a weight as a BF16 tensor";
  let description = [{
    Identity for BF16 weights; for INT4 weights `(code - zero) * scale` per
    group. Fused into `g4.linear` by `g4-fuse-dequant-gemm`.

    Example:
    ```mlir
    %w = g4.dequant @layers.0.self_attn.q_proj : tensor<4096x3840xbf16>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$weight);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = "$weight attr-dict `:` type($result)";
}

def G4_MatmulOp : G4_Op<"matmul", [Pure]> {
  let summary = "x times the transpose of a [out, in] weight tensor";
  let description = [{
    `y[t, o] = sum_i x[t, i] * w[o, i]`, fp32 accumulation.

    Example:
    ```mlir
    %q = g4.matmul %a, %w : tensor<?x3840xf32>, tensor<4096x3840xbf16> -> tensor<?x4096xf32>
    ```
  }];
  let arguments = (ins G4_Act:$input, TensorRankOf<[BF16, F16, F32], [2]>:$weight);
  let results = (outs G4_Act:$result);
  let assemblyFormat = "$input `,` $weight attr-dict `:` type($input) `,` type($weight) `->` type($result)";
  let hasVerifier = 1;
}

def G4_RopeOp : G4_Op<"rope", [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "rotary position embedding (rotate-half), default or proportional";
  let description = [{
    Per head of `head_dim` features, pairs (j, j + head_dim/2) for
    j < `rotary_pairs` rotate by `pos * theta^(-2j/head_dim)`; the other pairs
    are left as they are. `rope_type` is "default" (all pairs rotate) or
    "proportional" (rotary_pairs = int(partial_rotary_factor * head_dim / 2)).

    Example:
    ```mlir
    %qr = g4.rope %q, %pos {head_dim = 512 : i64, rotary_pairs = 64 : i64, theta = 1.0e+06 : f64,
                            rope_type = "proportional"} : tensor<?x8192xf32>, tensor<?xi32>
    ```
  }];
  let arguments = (ins G4_Act:$input, G4_Ids:$positions, I64Attr:$head_dim, I64Attr:$rotary_pairs,
                       F64Attr:$theta, StrAttr:$rope_type);
  let results = (outs G4_Act:$result);
  let assemblyFormat = "$input `,` $positions attr-dict `:` type($result) `,` type($positions)";
  let hasVerifier = 1;
}

def G4_KVWriteOp : G4_Op<"kv_write"> {
  let summary = "append this step's K and V rows to a layer's KV cache";
  let description = [{
    Writes row t of `key` / `value` at position `positions[t]` of its
    sequence in the cache of `layer`. `window` is the layer's sliding window
    (0 for full layers).

    Example:
    ```mlir
    g4.kv_write %pos key(%k : tensor<?x2048xf32>) value(%v : tensor<?x2048xf32>)
        {layer = 0 : i64, window = 1024 : i64} : tensor<?xi32>
    ```
  }];
  let arguments = (ins G4_Ids:$positions, G4_Act:$key, G4_Act:$value,
                       I64Attr:$layer, I64Attr:$window);
  let assemblyFormat = [{
    $positions `key` `(` $key `:` type($key) `)` `value` `(` $value `:` type($value) `)`
    attr-dict `:` type($positions)
  }];
  let hasVerifier = 1;
}

def G4_KVReadOp : G4_Op<"kv_read"> {
  let summary = "all cached K and V rows of the sequences of this step";
  let description = [{
    Returns the keys and values of `layer` for every cached position of the
    step's sequences (the key dimension is dynamic). Fused away by
    `g4-fuse-attention-mask`.

    Example:
    ```mlir
    %keys, %values = g4.kv_read %pos {layer = 0 : i64} : tensor<?xi32> -> tensor<?x2048xf32>, tensor<?x2048xf32>
    ```
  }];
  let arguments = (ins G4_Ids:$positions, I64Attr:$layer);
  let results = (outs G4_Act:$key, G4_Act:$value);
  let assemblyFormat = "$positions attr-dict `:` type($positions) `->` type($key) `,` type($value)";
}

def G4_QKOp : G4_Op<"qk", [Pure]> {
  let summary = "attention scores q·kᵀ per query head (no 1/sqrt(d), no softcap)";
  let description = [{
    `s[h, t, j] = q[t, h] · k[j, h / (num_heads / num_kv_heads)]`: GQA groups
    are contiguous. Gemma 4 uses scale 1.0 (the q/k norms take its place).

    Example:
    ```mlir
    %s = g4.qk %q, %keys {num_heads = 16 : i64, num_kv_heads = 8 : i64, head_dim = 256 : i64}
        : tensor<?x4096xf32>, tensor<?x2048xf32> -> tensor<16x?x?xf32>
    ```
  }];
  let arguments = (ins G4_Act:$query, G4_Act:$key, I64Attr:$num_heads, I64Attr:$num_kv_heads, I64Attr:$head_dim);
  let results = (outs G4_Scores:$result);
  let assemblyFormat = "$query `,` $key attr-dict `:` type($query) `,` type($key) `->` type($result)";
  let hasVerifier = 1;
}

def G4_MaskOp : G4_Op<"mask", [Pure, AllTypesMatch<["scores", "result"]>]> {
  let summary = "causal (window = 0) or sliding-window mask";
  let description = [{
    Key j stays visible to the query at position t iff j <= t and, for
    window W > 0, t - W < j (W keys including itself); others become -inf.

    Example:
    ```mlir
    %m = g4.mask %s, %pos {window = 1024 : i64} : tensor<16x?x?xf32>, tensor<?xi32>
    ```
  }];
  let arguments = (ins G4_Scores:$scores, G4_Ids:$positions, I64Attr:$window);
  let results = (outs G4_Scores:$result);
  let assemblyFormat = "$scores `,` $positions attr-dict `:` type($result) `,` type($positions)";
  let hasVerifier = 1;
}

def G4_SoftmaxOp : G4_Op<"softmax", [Pure, SameOperandsAndResultType]> {
  let summary = "softmax over the key dimension";
  let description = [{
    Example:
    ```mlir
    %p = g4.softmax %m : tensor<16x?x?xf32>
    ```
  }];
  let arguments = (ins G4_Scores:$input);
  let results = (outs G4_Scores:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def G4_PVOp : G4_Op<"pv", [Pure]> {
  let summary = "probabilities times values, heads concatenated";
  let description = [{
    `o[t, h] = sum_j p[h, t, j] * v[j, h / (num_heads / num_kv_heads)]`.

    Example:
    ```mlir
    %o = g4.pv %p, %values {num_heads = 16 : i64, num_kv_heads = 8 : i64, head_dim = 256 : i64}
        : tensor<16x?x?xf32>, tensor<?x2048xf32> -> tensor<?x4096xf32>
    ```
  }];
  let arguments = (ins G4_Scores:$probs, G4_Act:$value, I64Attr:$num_heads, I64Attr:$num_kv_heads, I64Attr:$head_dim);
  let results = (outs G4_Act:$result);
  let assemblyFormat = "$probs `,` $value attr-dict `:` type($probs) `,` type($value) `->` type($result)";
  let hasVerifier = 1;
}

class G4_UnaryOp<string mnemonic, string sum, string desc> :
    G4_Op<mnemonic, [Pure, SameOperandsAndResultType]> {
  let summary = sum;
  let description = desc;
  let arguments = (ins G4_Act:$input);
  let results = (outs G4_Act:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

class G4_BinaryOp<string mnemonic, string sum, string desc> :
    G4_Op<mnemonic, [Pure, SameOperandsAndResultType]> {
  let summary = sum;
  let description = desc;
  let arguments = (ins G4_Act:$lhs, G4_Act:$rhs);
  let results = (outs G4_Act:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($result)";
}

def G4_GeluTanhOp : G4_UnaryOp<"gelu_tanh", "GELU, tanh approximation", [{
    `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`.

    Example:
    ```mlir
    %g = g4.gelu_tanh %gate : tensor<?x15360xf32>
    ```
  }]>;

def G4_MulOp : G4_BinaryOp<"mul", "elementwise product", [{
    Example:
    ```mlir
    %gu = g4.mul %g, %u : tensor<?x15360xf32>
    ```
  }]>;

def G4_AddOp : G4_BinaryOp<"add", "elementwise sum (the residual add)", [{
    Example:
    ```mlir
    %h1 = g4.add %h, %x : tensor<?x3840xf32>
    ```
  }]>;

def G4_ScaleOp : G4_Op<"scale", [Pure, G4_WeightUser, AllTypesMatch<["input", "result"]>]> {
  let summary = "multiply by a one-element weight (the layer_scalar)";
  let description = [{
    Example:
    ```mlir
    %h2 = g4.scale %h, @layers.0.layer_scalar : tensor<?x3840xf32>
    ```
  }];
  let arguments = (ins G4_Act:$input, FlatSymbolRefAttr:$scalar);
  let results = (outs G4_Act:$result);
  let assemblyFormat = "$input `,` $scalar attr-dict `:` type($result)";
}

def G4_SoftcapOp : G4_Op<"softcap", [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "cap * tanh(x / cap)";
  let description = [{
    Example:
    ```mlir
    %c = g4.softcap %l {cap = 3.0e+01 : f64} : tensor<?x262144xf32>
    ```
  }];
  let arguments = (ins G4_Act:$input, F64Attr:$cap);
  let results = (outs G4_Act:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def G4_LogitsOp : G4_Op<"logits", [Pure, G4_WeightUser]> {
  let summary = "LM head on the last token row of each sequence (tied embedding)";
  let description = [{
    Picks the last row of every sequence of the step and multiplies it by the
    transposed table [vocab, hidden]: one result row per sequence.

    Example:
    ```mlir
    %l = g4.logits %n, @embed_tokens : tensor<?x3840xf32> -> tensor<?x262144xf32>
    ```
  }];
  let arguments = (ins G4_Act:$input, FlatSymbolRefAttr:$table);
  let results = (outs G4_Act:$result);
  let assemblyFormat = "$input `,` $table attr-dict `:` type($input) `->` type($result)";
}

def G4_ArgmaxOp : G4_Op<"argmax", [Pure]> {
  let summary = "greedy token per sequence";
  let description = [{
    Example:
    ```mlir
    %t = g4.argmax %l : tensor<?x262144xf32> -> tensor<?xi32>
    ```
  }];
  let arguments = (ins G4_Act:$logits);
  let results = (outs G4_Ids:$result);
  let assemblyFormat = "$logits attr-dict `:` type($logits) `->` type($result)";
}

def G4_SampleOp : G4_Op<"sample"> {
  let summary = "sampled token per sequence (temperature, top-k, top-p)";
  let description = [{
    Temperature 0 is greedy; top_k -1 and top_p 1 disable those filters.

    Example:
    ```mlir
    %t = g4.sample %l {temperature = 7.0e-01 : f64, top_k = 64 : i64, top_p = 9.5e-01 : f64}
        : tensor<?x262144xf32> -> tensor<?xi32>
    ```
  }];
  let arguments = (ins G4_Act:$logits, F64Attr:$temperature, I64Attr:$top_k, F64Attr:$top_p);
  let results = (outs G4_Ids:$result);
  let assemblyFormat = "$logits attr-dict `:` type($logits) `->` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Fused ops (produced by the passes)
//===----------------------------------------------------------------------===//

def G4_LinearOp : G4_Op<"linear", [Pure, G4_WeightUser]> {
  let summary = "x times a weight's transpose, dequantizing on the fly";
  let description = [{
    The fused `g4.matmul(x, g4.dequant @w)`: one kernel reads BF16 or INT4
    storage directly.

    Example:
    ```mlir
    %q = g4.linear %a, @layers.0.self_attn.q_proj : tensor<?x3840xf32> -> tensor<?x4096xf32>
    ```
  }];
  let arguments = (ins G4_Act:$input, FlatSymbolRefAttr:$weight);
  let results = (outs G4_Act:$result);
  let assemblyFormat = "$input `,` $weight attr-dict `:` type($input) `->` type($result)";
}

def G4_GateUpOp : G4_Op<"gate_up", [Pure, G4_WeightUser]> {
  let summary = "gelu_tanh(x·Wgᵀ) ⊙ (x·Wuᵀ) in one op";
  let description = [{
    The MLP's gate and up projections share their input; one kernel computes
    both and applies the epilogue, so the two [tokens, ffn] intermediates are
    never stored.

    Example:
    ```mlir
    %gu = g4.gate_up %m, @layers.0.mlp.gate_proj, @layers.0.mlp.up_proj
        : tensor<?x3840xf32> -> tensor<?x15360xf32>
    ```
  }];
  let arguments = (ins G4_Act:$input, FlatSymbolRefAttr:$gate, FlatSymbolRefAttr:$up);
  let results = (outs G4_Act:$result);
  let assemblyFormat = "$input `,` $gate `,` $up attr-dict `:` type($input) `->` type($result)";
}

def G4_AttentionOp : G4_Op<"attention"> {
  let summary = "fused attention over a layer's KV cache";
  let description = [{
    scores -> mask -> softmax -> pv reading K/V of `layer` from its cache:
    `window` (0 = causal full attention), GQA with contiguous groups, scale
    (1.0 for Gemma 4).

    Example:
    ```mlir
    %o = g4.attention %q, %pos {layer = 0 : i64, window = 1024 : i64, num_heads = 16 : i64,
        num_kv_heads = 8 : i64, head_dim = 256 : i64, scale = 1.0 : f64}
        : tensor<?x4096xf32>, tensor<?xi32> -> tensor<?x4096xf32>
    ```
  }];
  let arguments = (ins G4_Act:$query, G4_Ids:$positions, I64Attr:$layer, I64Attr:$window,
                       I64Attr:$num_heads, I64Attr:$num_kv_heads, I64Attr:$head_dim, F64Attr:$scale);
  let results = (outs G4_Act:$result);
  let assemblyFormat = "$query `,` $positions attr-dict `:` type($query) `,` type($positions) `->` type($result)";
  let hasVerifier = 1;
}

def G4_NormResidualOp : G4_Op<"norm_residual", [Pure, G4_WeightUser,
    AllTypesMatch<["residual", "input", "new_residual"]>]> {
  let summary = "post-norm + residual add (+ layer_scalar) (+ next pre-norm)";
  let description = [{
    `new_residual = (residual + rms(input, post)) [* scalar]`, and with `next`
    also `normed = rms(new_residual, next)`: the residual stream is read and
    written once per sub-block. The last layer has no next pre-norm (the final
    norm belongs to `g4.lm_head`).

    Example:
    ```mlir
    %h1, %m = g4.norm_residual %h, %attn {post = @layers.0.post_attention_layernorm,
        next = @layers.0.pre_feedforward_layernorm, eps = 1.0e-06 : f64} : tensor<?x3840xf32>, tensor<?x3840xf32>
    %h2 = g4.norm_residual %h1, %mlp {post = @layers.47.post_feedforward_layernorm,
        scalar = @layers.47.layer_scalar, eps = 1.0e-06 : f64} : tensor<?x3840xf32>
    ```
  }];
  let arguments = (ins G4_Act:$residual, G4_Act:$input, FlatSymbolRefAttr:$post,
                       OptionalAttr<FlatSymbolRefAttr>:$next, OptionalAttr<FlatSymbolRefAttr>:$scalar, F64Attr:$eps);
  let results = (outs G4_Act:$new_residual, Optional<G4_Act>:$normed);
  let assemblyFormat = "$residual `,` $input attr-dict `:` type($residual) (`,` type($normed)^)?";
  let hasVerifier = 1;
}

def G4_QKNormRopeKVWriteOp : G4_Op<"qk_norm_rope_kv_write", [G4_WeightUser,
    AllTypesMatch<["q_raw", "result"]>, AllTypesMatch<["k_raw", "v_raw"]>]> {
  let summary = "q/k per-head norm + RoPE, v per-head norm, KV write: one op";
  let description = [{
    `q = rope(rms_head(q_raw, q_norm))` is the result; `k = rope(rms_head(k_raw,
    k_norm))` and `v = rms_head(v_raw)` (no weight, no RoPE) are written to the
    cache of `layer`. On k_eq_v layers `v_raw` is the same value as `k_raw`.

    Example:
    ```mlir
    %q = g4.qk_norm_rope_kv_write %q_raw, %k_raw, %v_raw, %pos {q_norm = @layers.0.self_attn.q_norm,
        k_norm = @layers.0.self_attn.k_norm, eps = 1.0e-06 : f64, num_heads = 16 : i64, num_kv_heads = 8 : i64,
        head_dim = 256 : i64, rotary_pairs = 128 : i64, rope_theta = 1.0e+04 : f64, layer = 0 : i64,
        window = 1024 : i64} : tensor<?x4096xf32>, tensor<?x2048xf32>, tensor<?xi32>
    ```
  }];
  let arguments = (ins G4_Act:$q_raw, G4_Act:$k_raw, G4_Act:$v_raw, G4_Ids:$positions,
                       FlatSymbolRefAttr:$q_norm, FlatSymbolRefAttr:$k_norm, F64Attr:$eps,
                       I64Attr:$num_heads, I64Attr:$num_kv_heads, I64Attr:$head_dim,
                       I64Attr:$rotary_pairs, F64Attr:$rope_theta, I64Attr:$layer, I64Attr:$window);
  let results = (outs G4_Act:$result);
  let assemblyFormat = [{
    $q_raw `,` $k_raw `,` $v_raw `,` $positions attr-dict `:` type($q_raw) `,` type($k_raw) `,` type($positions)
  }];
  let hasVerifier = 1;
}

def G4_LMHeadOp : G4_Op<"lm_head", [Pure, G4_WeightUser]> {
  let summary = "final norm + tied LM head + softcap on the logit rows";
  let description = [{
    `logits[r] = cap(rms(h[last row of sequence r], norm) · tableᵀ)` with
    `cap(z) = softcap * tanh(z / softcap)`, identity when softcap = 0.

    Example:
    ```mlir
    %l = g4.lm_head %h {norm = @norm, table = @embed_tokens, eps = 1.0e-06 : f64, softcap = 3.0e+01 : f64}
        : tensor<?x3840xf32> -> tensor<?x262144xf32>
    ```
  }];
  let arguments = (ins G4_Act:$input, FlatSymbolRefAttr:$norm, FlatSymbolRefAttr:$table, F64Attr:$eps,
                       F64Attr:$softcap);
  let results = (outs G4_Act:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

#endif  // G4_OPS_TD

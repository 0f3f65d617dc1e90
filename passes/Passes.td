// Passes over the `g4` dialect. One pass per file (passes/<Name>.cpp), each
// with a FileCheck test in tests/lit/passes/. The default `g4c compile`
// pipeline runs them in the order listed here.
#ifndef G4_PASSES_TD
#define G4_PASSES_TD

include "mlir/Pass/PassBase.td"

def FuseDequantGemm : Pass<"g4-fuse-dequant-gemm", "::mlir::ModuleOp"> {
  let summary = "g4.matmul(x, g4.dequant @w) -> g4.linear; gate/up pair -> g4.gate_up";
  let description = [{
    Every matmul whose weight operand is a `g4.dequant` becomes one
    `g4.linear` that reads the stored (BF16 or INT4) weight directly. With
    `fuse-gate-up`, `mul(gelu_tanh(linear(m, @gate)), linear(m, @up))` becomes
    one `g4.gate_up`: both projections share the input and the epilogue
    avoids storing two [tokens, ffn] intermediates, which pays at every
    batch size.

    ```mlir
    %w = g4.dequant @q : tensor<64x32xbf16>
    %y = g4.matmul %x, %w : tensor<?x32xf32>, tensor<64x32xbf16> -> tensor<?x64xf32>
    // becomes
    %y = g4.linear %x, @q : tensor<?x32xf32> -> tensor<?x64xf32>
    ```
  }];
  let options = [
    Option<"fuseGateUp", "fuse-gate-up", "bool", /*default=*/"true",
           "also fuse the MLP gate/up pair and its gelu_tanh(g)*u epilogue">
  ];
}

def FuseAttentionMask : Pass<"g4-fuse-attention-mask", "::mlir::ModuleOp"> {
  let summary = "kv_read -> qk -> mask -> softmax -> pv -> one g4.attention";
  let description = [{
    The unfused attention chain of a layer becomes one `g4.attention` that
    reads the layer's KV cache itself, carrying window, kv-head grouping,
    head_dim and scale 1.0. The scores tensor [heads, tokens, keys] is never
    materialized.
  }];
}

def FuseNormResidual : Pass<"g4-fuse-norm-residual", "::mlir::ModuleOp"> {
  let summary = "post-norm + residual add (+ layer_scalar) + next pre-norm -> g4.norm_residual";
  let description = [{
    `n = rms(scale(add(h, rms(x, @post)), @s), @next)` becomes
    `%h2, %n = g4.norm_residual %h, %x {post, next, scalar}`. The scale is
    optional; the intermediate sums must have no other users than the chain
    and the residual stream. Without a following whole-row norm (the last
    layer, whose final norm belongs to g4.lm_head) the op has no `next` and
    only the new residual as result.
  }];
}

def FuseLMHead : Pass<"g4-fuse-lm-head", "::mlir::ModuleOp"> {
  let summary = "softcap?(logits(rms_norm(h, @norm), @table)) -> one g4.lm_head";
  let description = [{
    The final norm, the tied LM head and the logit softcap run only on the
    logit rows: one op reads the residual stream directly. Run it before
    g4-fuse-norm-residual so the final norm is not taken as a next pre-norm.
  }];
}

def QuantizeTable : Pass<"g4-quantize-table", "::mlir::ModuleOp"> {
  let summary = "store the embedding / LM head table as int8 codes with one fp32 scale per row";
  let description = [{
    With `dtype=int8`, sets `int8_rows` on every g4.weight read as a table by
    g4.embed, g4.logits or g4.lm_head: the runtime keeps int8 codes and a
    scale amax(|row|)/127 per row (runtime/int8_rows.h) instead of the BF16
    tensor, half the bytes (Gemma-4-12B's tied table: 1.0 GB instead of
    2.0 GB, which the planners then give to KV), read once per decode step by
    the LM head. `dtype=bf16` leaves the graph unchanged. Runs before the
    planning passes, which count the stored bytes.
  }];
  let options = [Option<"dtype", "dtype", "std::string", "\"int8\"", "table storage: bf16 | int8">];
}

def FuseQKNormRope : Pass<"g4-fuse-qk-norm-rope", "::mlir::ModuleOp"> {
  let summary = "q/k per-head norms + RoPE, v norm and kv_write -> g4.qk_norm_rope_kv_write";
  let description = [{
    Matches `kv_write(key = rope(rms(k_raw, @k_norm)), value = rms(v_raw))` and
    the query `rope(rms(q_raw, @q_norm))` of the same layer's g4.attention, and
    replaces them with one op that returns q and writes K/V (the runtime's
    QkNormRopeKvWrite kernel).
  }];
}

def PlanKV : Pass<"g4-plan-kv", "::mlir::ModuleOp"> {
  let summary = "one KV buffer per layer: rings for sliding layers, paged blocks for full layers";
  let description = [{
    Adds a `g4.kv_buffer` per `g4.kv_write`: sliding layers get a ring of
    window - 1 + max-chunk tokens per sequence, full layers a pool of paged
    blocks (`block-size` tokens; max-seqs * ceil(max-seq-len / block-size)
    blocks). Sets the module attribute `g4.kv` with bytes/token per layer kind
    and the total pool bytes.
    `sliding-kv=paged` (and `auto`) gives sliding layers paged blocks too, from
    a window pool of their own (the buffer carries its `window`): a sequence
    holds only its own length there, and its blocks go back to the pool as they
    leave the window, so it never holds more than
    ceil((window - 1 + max-chunk) / block-size) + 1 blocks; a ring reserves
    window - 1 + max-chunk slots for every sequence however short. The attention
    op still masks by its window. Sets `window_pool_bytes` and `full_pool_bytes`
    beside `pool_bytes`.
    `kv-dtype` is the KV storage type: `auto` (codegen's choice: F32 for CPU
    reference plans, BF16 for GPU plans; counted as 2 bytes an element), `bf16`,
    or `fp8` (OCP E4M3 codes, 1 byte an element, and an fp32 scale per token and
    kv head: 2 x kv_heads x (head_dim + 4) bytes a token; plan.fbs KvLayer). A
    value other than auto is recorded as `kv_dtype` in `g4.kv` for codegen.
  }];
  let options = [
    Option<"blockSize", "block-size", "int64_t", "16", "tokens per paged block (full layers)">,
    Option<"maxChunk", "max-chunk", "int64_t", "256", "largest prefill chunk (tokens per sequence per step)">,
    Option<"maxSeqs", "max-seqs", "int64_t", "4", "sequences alive at once (decode batch)">,
    Option<"maxSeqLen", "max-seq-len", "int64_t", "2048", "longest sequence (prompt + generated)">,
    Option<"slidingKv", "sliding-kv", "std::string", "\"auto\"",
           "sliding layers' KV: ring (window - 1 + max-chunk slots per sequence), or paged / auto (blocks of a window pool, taken as a sequence grows and returned as they leave the window)">,
    Option<"kvDtype", "kv-dtype", "std::string", "\"auto\"",
           "KV storage: auto (F32 on CPU plans, BF16 on GPU plans), bf16, or fp8 (E4M3 codes + an fp32 scale per token and kv head)">
  ];
}

def PlanBuckets : Pass<"g4-plan-buckets", "::mlir::ModuleOp"> {
  let summary = "decode batch-size buckets and prefill token buckets for CUDA Graph capture";
  let description = [{
    Decode buckets: powers of two below max-seqs, then max-seqs. Prefill
    buckets: powers of two from min-prefill below max-chunk, then max-chunk.
    Every decode bucket is replayed as a CUDA graph, and so is every prefill
    bucket of at most graph-max-tokens tokens: there a step is short enough
    for launch overhead to matter and padding up to the bucket costs little;
    a larger step runs eagerly at its own size (padding a 600-token chunk to
    1024 would cost 70 % more GEMM work, and launches hide behind its kernels).
    Sets `g4.buckets = {decode = array<i64: ...>, prefill = array<i64: ...>,
    max_seqs, graph_max_tokens}`; a step is padded up to the smallest graph
    bucket that holds it.
  }];
  let options = [
    Option<"maxSeqs", "max-seqs", "int64_t", "4", "largest decode batch">,
    Option<"maxChunk", "max-chunk", "int64_t", "256", "largest prefill chunk in tokens">,
    Option<"minPrefill", "min-prefill", "int64_t", "16", "smallest prefill bucket">,
    Option<"graphMaxTokens", "graph-max-tokens", "int64_t", "256",
           "largest prefill bucket replayed as a CUDA graph (0: prefill runs eagerly)">
  ];
}

def PlanMemory : Pass<"g4-plan-memory", "::mlir::ModuleOp"> {
  let summary = "activation arena by liveness, per bucket; peak bytes";
  let description = [{
    For every bucket of `g4.buckets` (or just `tokens` when there are none)
    sizes each tensor value of the function (token rows = the bucket's
    tokens; per-sequence rows = its sequences; other dynamic dims =
    max-seq-len), computes live ranges over the op order and packs them into
    one arena (largest first, first fit, `alignment`-byte offsets). Each op
    gets `g4.arena` (per result, one offset per bucket); the module gets
    `g4.activations = {tokens, seqs, peak_bytes}`.
  }];
  let options = [
    Option<"tokens", "tokens", "int64_t", "256", "token rows when the module has no g4.buckets">,
    Option<"maxSeqLen", "max-seq-len", "int64_t", "2048", "size of other dynamic dims (unfused scores)">,
    Option<"alignment", "alignment", "int64_t", "256", "byte alignment of every arena offset">
  ];
}

def PlanOffload : Pass<"g4-plan-offload", "::mlir::ModuleOp"> {
  let summary = "resident vs streamed weights under a device budget; prefetch/wait ops";
  let description = [{
    Adds up weights, KV pools (g4.kv), the activation arena (g4.activations),
    workspaces, graph pools and the CUDA context against `budget-mib`. When
    everything fits, every weight is resident. Otherwise whole layers'
    Linear weights are streamed from pinned host memory, last layers first,
    through two staging slots (double buffer): `g4.prefetch` of layer i+1 at
    the start of layer i, `g4.wait` before layer i+1's first use. A plan that
    cannot fit even with every layer streamed is an error that prints the
    memory table. Sets `g4.memory_table`.
  }];
  let options = [
    Option<"budgetMiB", "budget-mib", "int64_t", "9984", "device memory budget (MiB)">,
    Option<"contextMiB", "context-mib", "int64_t", "512",
           "CUDA context and runtime before any buffer (DESIGN.md 4: about 0.5 GiB measured)">,
    Option<"workspaceMiB", "workspace-mib", "int64_t", "64", "cuBLAS/kernel workspaces">,
    Option<"graphPoolMiB", "graph-pool-mib", "int64_t", "32", "CUDA Graph pools beyond the shared arena">
  ];
}

// ---- quantization (passes/quant/ holds the MLIR-free math) ----

def QuantizeRTN : Pass<"g4-quantize-rtn", "::mlir::ModuleOp"> {
  let summary = "mark every Linear weight INT4 group-quantized (round-to-nearest)";
  let description = [{
    Sets `quant = #g4.int4<group_size, symmetric, padded_in, scale_type = f16>`
    on every g4.weight used as a Linear weight (g4.dequant feeding g4.matmul,
    g4.linear, g4.gate_up); the embedding, norms and layer_scalar stay BF16.
    RTN codes are a pure function of each weight, computed when the checkpoint
    is written (`g4c quantize --method rtn`). Sets `g4.quantization`.
  }];
  let options = [
    Option<"groupSize", "group-size", "int64_t", "128", "input elements per scale (64 or 128)">,
    Option<"symmetric", "symmetric", "bool", "true", "symmetric codes (no zero points)">,
    Option<"clip", "clip", "std::string", "\"none\"",
           "group ranges: none (min/max) | mse (MSE-optimal shrink, recorded in g4.quantization)">
  ];
}

def GPTQ : Pass<"g4-gptq", "::mlir::ModuleOp"> {
  let summary = "GPTQ over the graph's Linear weights, layer by layer, through a calibration executor";
  let description = [{
    For each decoder layer in order, hands the layer's Linear weights to the
    calibration executor (passes/quant/calibration.h; tools/ implements it on
    the runtime): the layer runs on calibration activations recomputed through
    the already-quantized earlier layers, H = 2XᵀX per Linear input, dead
    columns, damping, upper Cholesky of H⁻¹, blocked column-wise quantization
    with error feedback. Then marks the weights #g4.int4 and sets
    `g4.quantization`. Needs an executor (passes/GPTQ.h, `g4c quantize`).
  }];
  let options = [
    Option<"groupSize", "group-size", "int64_t", "128", "input elements per scale (64 or 128)">,
    Option<"symmetric", "symmetric", "bool", "true", "symmetric codes (no zero points)">,
    Option<"damp", "damp", "double", "0.01", "damping as a fraction of mean(diag H)">,
    Option<"blockSize", "block-size", "int64_t", "128", "columns per lazy-update block">,
    Option<"actOrder", "act-order", "bool", "false", "columns by decreasing diag H (static groups)">,
    Option<"clip", "clip", "std::string", "\"none\"",
           "group ranges: none (min/max at each group start) | mse (MSE-optimal shrink of the original "
           "weights' range, fixed before the solve: static groups)">
  ];
}

def AWQScale : Pass<"g4-awq-scale", "::mlir::ModuleOp"> {
  let summary = "activation-aware per-input-channel scales folded into the RMSNorm or Linear before each Linear input";
  let description = [{
    Finds, on the unfused graph, every Linear input whose producer can take
    a per-channel scale exactly, and for each such site searches the scale
    s = mean|x|^alpha (normalised, alpha on a grid) on the calibration set
    that minimizes the output error of the Linears quantized by RTN
    (passes/quant/awq.h), then folds 1/s into the producer and s into the
    Linears' columns. Exact sites:
      - `g4.rms_norm %h, @w` over whole rows whose only users are
        `g4.matmul(·, g4.dequant @W)` and whose weight no other op reads
        (q/k/v ← input_layernorm, gate/up ← pre_feedforward_layernorm);
        w' is rounded to the weight's storage type (BF16) and the columns
        take w / w', so the fold stays exact;
      - `g4.mul(g, g4.matmul(y, g4.dequant @U))` read only by Linears, U's
        output read only by that mul (down ← up: U's rows take 1/s).
    Everything else keeps its input: o_proj reads attention over V =
    rms_head(v_raw) without a weight (a per-channel scale of v_proj would
    be normalized away), k_eq_v layers have no v_proj at all. Runs the
    layers through the calibration executor (passes/AWQScale.h, `g4c
    quantize --awq`), then restarts it so that g4-gptq can follow; the
    weights stay BF16 (no `quant`). Sets `g4.awq`.

    ```mlir
    %a = g4.rms_norm %h, @layers.0.input_layernorm {eps = 1.0e-06 : f64, group = 256 : i64} : tensor<?x256xf32>
    %w = g4.dequant @layers.0.self_attn.q_proj : tensor<256x256xbf16>
    %q = g4.matmul %a, %w : tensor<?x256xf32>, tensor<256x256xbf16> -> tensor<?x256xf32>
    // input_layernorm ← w / s, q_proj ← W·diag(s)
    ```
  }];
  let options = [
    Option<"groupSize", "group-size", "int64_t", "128", "input elements per scale of the INT4 format searched for">,
    Option<"symmetric", "symmetric", "bool", "true", "symmetric codes (no zero points)">,
    Option<"grid", "grid", "int64_t", "20", "alpha = i / grid, i = 0 … grid">,
    Option<"clip", "clip", "std::string", "\"none\"",
           "group ranges of the quantizer in the search: none (min/max) | mse">
  ];
}

#endif  // G4_PASSES_TD

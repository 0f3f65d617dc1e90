// The `g4` dialect: Gemma 4 decoder graphs at model level.
//
// Activations are 2-D tensors [tokens, features] with a dynamic token
// dimension (`tensor<?x3840xf32>`); the token rows of one step may belong to
// several sequences (continuous batching), which is why positions travel as
// an explicit `tensor<?xi32>`. Weights are module-level symbols (`g4.weight`)
// that carry their logical shape and storage format; ops name them by symbol,
// so the graph never holds weight data.
#ifndef G4_DIALECT_TD
#define G4_DIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def G4_Dialect : Dialect {
  let name = "g4";
  let cppNamespace = "::g4c::g4";
  let summary = "Gemma 4 decoder graphs: model-level ops, weights as symbols, planning ops";
  let description = [{
    The `g4` dialect describes one decoding step of a Gemma 4 text model for a
    batch of token rows. The frontend emits the unfused form (dequant + matmul,
    scores -> mask -> softmax -> pv); the fusion passes produce `g4.linear`,
    `g4.gate_up`, `g4.attention` and `g4.norm_residual`; the planning passes
    add `g4.kv_buffer`, `g4.prefetch`/`g4.wait` and module attributes
    (`g4.kv`, `g4.buckets`, `g4.activations`, `g4.memory_table`) that codegen
    lowers to the runtime plan.
  }];
  let useDefaultAttributePrinterParser = 1;
}

def G4_Int4QuantAttr : AttrDef<G4_Dialect, "Int4Quant"> {
  let mnemonic = "int4";
  let summary = "INT4 group-quantized storage of a Linear weight [out, in]";
  let description = [{
    The weight is stored as 4-bit codes (two per byte, element 2j in the low
    nibble), one scale per group of `group_size` input elements, and for
    asymmetric quantization one uint8 zero point per group. The input
    dimension is padded with zeros to `padded_in` = ceil(in / group_size) *
    group_size. `scale_type` is f16 or bf16.

    Example:
    ```mlir
    g4.weight @layers.0.self_attn.q_proj : tensor<4096x3840xbf16>
        {quant = #g4.int4<group_size = 128, symmetric = true, padded_in = 3840, scale_type = f16>}
    ```
  }];
  let parameters = (ins "int64_t":$group_size, "::mlir::BoolAttr":$symmetric,
                        "int64_t":$padded_in, "::mlir::Type":$scale_type);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    // Bytes of codes + scales (+ zero points) for a weight with `out` rows.
    int64_t storageBytes(int64_t out) const;
  }];
}

#endif  // G4_DIALECT_TD

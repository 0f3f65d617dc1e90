// Frontend: Gemma 4 config + checkpoint headers -> unfused g4 graph (DESIGN.md §2).
#include "frontend/Frontend.h"

#include <cmath>

#include "ir/G4Dialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"
#include "models/error.h"
#include "models/manifest.h"
#include "models/safetensors.h"

namespace g4c::frontend {

using models::LayerKind;
using models::ModelConfig;

namespace {

std::string layer_name(int i, const char* what) { return "layers." + std::to_string(i) + "." + what; }

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

}  // namespace

WeightTable expected_weights(const ModelConfig& cfg) {
  WeightTable w;
  const int64_t H = cfg.hidden_size;
  auto add = [&](const std::string& name, std::vector<int64_t> shape) {
    w[name] = WeightInfo{std::move(shape), DType::BF16, std::nullopt, name + ".weight"};
  };
  add("embed_tokens", {cfg.vocab_size, H});
  add("norm", {H});
  for (const auto& lin : models::linear_shapes(cfg)) add(lin.name, {lin.out, lin.in});
  for (int i = 0; i < cfg.num_layers; ++i) {
    const int64_t D = cfg.layers[i].head_dim;
    for (const char* n : {"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                          "post_feedforward_layernorm"})
      add(layer_name(i, n), {H});
    add(layer_name(i, "self_attn.q_norm"), {D});
    add(layer_name(i, "self_attn.k_norm"), {D});
    // layer_scalar is a buffer: its checkpoint key has no ".weight".
    w[layer_name(i, "layer_scalar")] = WeightInfo{{1}, DType::BF16, std::nullopt, layer_name(i, "layer_scalar")};
  }
  return w;
}

WeightTable checkpoint_weights(const ModelConfig& cfg, const std::filesystem::path& dir) {
  WeightTable expected = expected_weights(cfg);
  std::unique_ptr<models::Int4Checkpoint> int4;
  std::unique_ptr<models::Checkpoint> plain;
  const models::Manifest* manifest = nullptr;
  const models::Checkpoint* ck = nullptr;
  if (models::Int4Checkpoint::is_int4_dir(dir)) {
    int4 = models::Int4Checkpoint::open(dir, /*header_only=*/true);
    manifest = &int4->manifest();
    ck = &int4->tensors();
  } else {
    plain = models::Checkpoint::open(dir, /*header_only=*/true);
    ck = plain.get();
  }
  for (auto& [name, info] : expected) {
    if (manifest) {
      if (const models::QuantModule* m = manifest->find(name)) {
        if (info.shape.size() != 2 || m->out != info.shape[0] || m->in != info.shape[1])
          throw Error(dir.string() + "/manifest.json: module '" + name + "' is [" + std::to_string(m->out) + ", " +
                      std::to_string(m->in) + "], the config implies " + shape_str(info.shape));
        if (m->bits != 4) throw Error(dir.string() + "/manifest.json: module '" + name + "' has bits != 4");
        info.int4 = Int4Storage{m->group_size, m->symmetric, m->padded_in, m->scale_dtype};
        info.source = name;
        continue;
      }
    }
    if (!ck->has(info.source))
      throw Error(dir.string() + ": checkpoint has no tensor '" + info.source + "' (needed for " + name + ")");
    const models::TensorInfo& t = ck->info(info.source);
    // Accept [1] or [] for the scalar buffer; everything else must match exactly.
    const bool scalar_ok = info.shape == std::vector<int64_t>{1} && t.numel() == 1;
    if (t.shape != info.shape && !scalar_ok)
      throw Error(dir.string() + ": tensor '" + info.source + "' has shape " + shape_str(t.shape) +
                  ", the config implies " + shape_str(info.shape));
    if (t.dtype != DType::BF16 && t.dtype != DType::F16 && t.dtype != DType::F32)
      throw Error(dir.string() + ": tensor '" + info.source + "' has dtype " + std::string(dtype_name(t.dtype)) +
                  ", expected BF16, F16 or F32");
    info.dtype = t.dtype;
  }
  return expected;
}

void load_dialects(mlir::MLIRContext& ctx) {
  ctx.loadDialect<g4::G4Dialect, mlir::func::FuncDialect>();
}

namespace {

// Emits the ops of one decoding step; every helper tags ops with the current layer.
class DecoderBuilder {
 public:
  DecoderBuilder(mlir::MLIRContext& ctx, const ModelConfig& cfg, const WeightTable& weights,
                 const FrontendOptions& opts)
      : ctx_(ctx), cfg_(cfg), weights_(weights), b_(&ctx), loc_(mlir::UnknownLoc::get(&ctx)) {
    act_ = opts.bf16_activations ? mlir::Type(b_.getBF16Type()) : mlir::Type(b_.getF32Type());
    bf16_ = opts.bf16_activations;
  }

  mlir::OwningOpRef<mlir::ModuleOp> build();

 private:
  mlir::RankedTensorType act(int64_t features) {
    return mlir::RankedTensorType::get({mlir::ShapedType::kDynamic, features}, act_);
  }
  mlir::FlatSymbolRefAttr sym(const std::string& name) {
    if (!weights_.count(name)) throw Error("frontend: weight '" + name + "' is missing from the weight table");
    return mlir::FlatSymbolRefAttr::get(&ctx_, name);
  }
  template <class Op>
  Op tag(Op op) {
    if (layer_ >= 0) op->setAttr("g4.layer", b_.getI64IntegerAttr(layer_));
    return op;
  }
  mlir::Value norm(mlir::Value x, const std::string& weight, int64_t group) {
    auto w = weight.empty() ? mlir::FlatSymbolRefAttr() : sym(weight);
    return tag(g4::RmsNormOp::create(b_, loc_, x.getType(), x, w, b_.getF64FloatAttr(cfg_.rms_norm_eps),
                                     b_.getI64IntegerAttr(group)))
        .getResult();
  }
  // x · Wᵀ through an explicit dequant (the unfused form).
  mlir::Value project(mlir::Value x, const std::string& weight) {
    const WeightInfo& w = weights_.at(weight);
    auto wtype = mlir::RankedTensorType::get(w.shape, b_.getBF16Type());
    auto dq = tag(g4::DequantOp::create(b_, loc_, wtype, sym(weight)));
    return tag(g4::MatmulOp::create(b_, loc_, act(w.shape[0]), x, dq.getResult())).getResult();
  }
  void declareWeights(mlir::ModuleOp module);
  mlir::Value layer(int i, mlir::Value h, mlir::Value pos);

  mlir::MLIRContext& ctx_;
  const ModelConfig& cfg_;
  const WeightTable& weights_;
  mlir::OpBuilder b_;
  mlir::Location loc_;
  mlir::Type act_;
  bool bf16_ = false;
  int layer_ = -1;
};

void DecoderBuilder::declareWeights(mlir::ModuleOp module) {
  b_.setInsertionPointToEnd(module.getBody());
  for (const auto& [name, w] : weights_) {
    mlir::Type elem = w.dtype == DType::F32   ? mlir::Type(b_.getF32Type())
                      : w.dtype == DType::F16 ? mlir::Type(b_.getF16Type())
                                              : mlir::Type(b_.getBF16Type());
    auto type = mlir::RankedTensorType::get(w.shape, w.int4 ? mlir::Type(b_.getBF16Type()) : elem);
    g4::Int4QuantAttr quant;
    if (w.int4) {
      mlir::Type scale = w.int4->scale_dtype == DType::BF16 ? mlir::Type(b_.getBF16Type()) : mlir::Type(b_.getF16Type());
      quant = g4::Int4QuantAttr::get(&ctx_, w.int4->group_size, b_.getBoolAttr(w.int4->symmetric), w.int4->padded_in,
                                     scale);
    }
    mlir::IntegerAttr layerAttr;
    if (name.rfind("layers.", 0) == 0) layerAttr = b_.getI64IntegerAttr(std::stoll(name.substr(7)));
    g4::WeightOp::create(b_, loc_, b_.getStringAttr(name), mlir::TypeAttr::get(type), quant, mlir::UnitAttr(), mlir::StringAttr(),
                         layerAttr, b_.getStringAttr(w.source));
  }
}

mlir::Value DecoderBuilder::layer(int i, mlir::Value h, mlir::Value pos) {
  layer_ = i;
  const models::LayerGeometry& g = cfg_.layers[i];
  const int64_t H = cfg_.hidden_size, D = g.head_dim, Hq = cfg_.num_q_heads, Hkv = g.num_kv_heads;
  const bool sliding = g.kind == LayerKind::Sliding;
  auto rope = [&](mlir::Value x) {
    return tag(g4::RopeOp::create(b_, loc_, x.getType(), x, pos, b_.getI64IntegerAttr(D),
                                  b_.getI64IntegerAttr(g.rotary_pairs()), b_.getF64FloatAttr(g.rope.theta),
                                  b_.getStringAttr(g.rope.type == models::RopeType::Proportional ? "proportional"
                                                                                                 : "default")))
        .getResult();
  };

  // Attention block.
  mlir::Value a = norm(h, layer_name(i, "input_layernorm"), H);
  mlir::Value q = rope(norm(project(a, layer_name(i, "self_attn.q_proj")), layer_name(i, "self_attn.q_norm"), D));
  mlir::Value kRaw = project(a, layer_name(i, "self_attn.k_proj"));
  // k_eq_v layers have no v_proj: V comes from the raw k projection.
  mlir::Value vRaw = g.k_eq_v ? kRaw : project(a, layer_name(i, "self_attn.v_proj"));
  mlir::Value k = rope(norm(kRaw, layer_name(i, "self_attn.k_norm"), D));
  mlir::Value v = norm(vRaw, "", D);  // V: per-head RMSNorm without scale, never roped
  const int64_t window = sliding ? g.window : 0;
  tag(g4::KVWriteOp::create(b_, loc_, pos, k, v, b_.getI64IntegerAttr(i), b_.getI64IntegerAttr(window)));
  auto read = tag(g4::KVReadOp::create(b_, loc_, act(Hkv * D), act(Hkv * D), pos, b_.getI64IntegerAttr(i)));
  auto scoresType = mlir::RankedTensorType::get({Hq, mlir::ShapedType::kDynamic, mlir::ShapedType::kDynamic},
                                                b_.getF32Type());
  auto heads = [&](int64_t n) { return b_.getI64IntegerAttr(n); };
  mlir::Value s = tag(g4::QKOp::create(b_, loc_, scoresType, q, read.getKey(), heads(Hq), heads(Hkv), heads(D)));
  s = tag(g4::MaskOp::create(b_, loc_, scoresType, s, pos, b_.getI64IntegerAttr(window)));
  s = tag(g4::SoftmaxOp::create(b_, loc_, s));
  mlir::Value o = tag(g4::PVOp::create(b_, loc_, act(Hq * D), s, read.getValue(), heads(Hq), heads(Hkv), heads(D)));
  mlir::Value attn = project(o, layer_name(i, "self_attn.o_proj"));
  h = tag(g4::AddOp::create(b_, loc_, h, norm(attn, layer_name(i, "post_attention_layernorm"), H)));

  // MLP block.
  mlir::Value m = norm(h, layer_name(i, "pre_feedforward_layernorm"), H);
  mlir::Value gate = tag(g4::GeluTanhOp::create(b_, loc_, project(m, layer_name(i, "mlp.gate_proj"))));
  mlir::Value up = project(m, layer_name(i, "mlp.up_proj"));
  mlir::Value gu = tag(g4::MulOp::create(b_, loc_, gate, up));
  mlir::Value down = project(gu, layer_name(i, "mlp.down_proj"));
  h = tag(g4::AddOp::create(b_, loc_, h, norm(down, layer_name(i, "post_feedforward_layernorm"), H)));
  h = tag(g4::ScaleOp::create(b_, loc_, h.getType(), h, sym(layer_name(i, "layer_scalar"))));
  layer_ = -1;
  return h;
}

mlir::OwningOpRef<mlir::ModuleOp> DecoderBuilder::build() {
  if (cfg_.hidden_size_per_layer_input != 0)
    throw Error(cfg_.source + ": per-layer inputs (hidden_size_per_layer_input > 0) are not supported");
  if (!cfg_.tie_word_embeddings) throw Error(cfg_.source + ": only tied embeddings are supported");
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::ModuleOp::create(loc_);
  const int64_t H = cfg_.hidden_size;
  module->getOperation()->setAttr(
      "g4.config",
      b_.getDictionaryAttr({
          b_.getNamedAttr("model_type", b_.getStringAttr(cfg_.model_type)),
          b_.getNamedAttr("hidden_size", b_.getI64IntegerAttr(H)),
          b_.getNamedAttr("num_layers", b_.getI64IntegerAttr(cfg_.num_layers)),
          b_.getNamedAttr("num_q_heads", b_.getI64IntegerAttr(cfg_.num_q_heads)),
          b_.getNamedAttr("intermediate_size", b_.getI64IntegerAttr(cfg_.intermediate_size)),
          b_.getNamedAttr("vocab_size", b_.getI64IntegerAttr(cfg_.vocab_size)),
          b_.getNamedAttr("sliding_window", b_.getI64IntegerAttr(cfg_.sliding_window)),
          b_.getNamedAttr("rms_norm_eps", b_.getF64FloatAttr(cfg_.rms_norm_eps)),
          b_.getNamedAttr("final_logit_softcapping", b_.getF64FloatAttr(cfg_.final_logit_softcapping)),
      }));
  declareWeights(*module);

  auto ids = mlir::RankedTensorType::get({mlir::ShapedType::kDynamic}, b_.getI32Type());
  auto logitsType = act(cfg_.vocab_size);
  auto fn = mlir::func::FuncOp::create(b_, loc_, "decode", b_.getFunctionType({ids, ids}, {logitsType}));
  fn.setArgAttr(0, "g4.name", b_.getStringAttr("token_ids"));
  fn.setArgAttr(1, "g4.name", b_.getStringAttr("positions"));
  mlir::Block* body = fn.addEntryBlock();
  b_.setInsertionPointToStart(body);
  mlir::Value tokenIds = body->getArgument(0), pos = body->getArgument(1);

  // HF multiplies by sqrt(H) in the activation dtype: exact in fp32, rounded to bf16 (62.0 for 12B) in bf16.
  const double embedScale = bf16_ ? cfg_.embed_scale_bf16() : cfg_.embed_scale();
  mlir::Value h = g4::EmbedOp::create(b_, loc_, act(H), tokenIds, sym("embed_tokens"), b_.getF64FloatAttr(embedScale));
  for (int i = 0; i < cfg_.num_layers; ++i) h = layer(i, h, pos);
  mlir::Value n = norm(h, "norm", H);
  mlir::Value logits = g4::LogitsOp::create(b_, loc_, logitsType, n, sym("embed_tokens"));
  if (cfg_.final_logit_softcapping > 0)
    logits = g4::SoftcapOp::create(b_, loc_, logits, b_.getF64FloatAttr(cfg_.final_logit_softcapping));
  mlir::func::ReturnOp::create(b_, loc_, logits);
  return module;
}

}  // namespace

mlir::OwningOpRef<mlir::ModuleOp> build_decoder(mlir::MLIRContext& ctx, const ModelConfig& cfg,
                                                const WeightTable& weights, const FrontendOptions& opts) {
  load_dialects(ctx);
  DecoderBuilder builder(ctx, cfg, weights, opts);
  auto module = builder.build();
  if (mlir::failed(mlir::verify(*module)))
    throw Error("frontend: the graph built for " + cfg.source + " does not verify (see the diagnostics above)");
  return module;
}

mlir::OwningOpRef<mlir::ModuleOp> build_from_model_dir(mlir::MLIRContext& ctx, const std::filesystem::path& dir,
                                                       const FrontendOptions& opts) {
  ModelConfig cfg = models::load_model_config(dir);
  WeightTable weights = checkpoint_weights(cfg, dir);
  return build_decoder(ctx, cfg, weights, opts);
}

}  // namespace g4c::frontend

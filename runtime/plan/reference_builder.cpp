// Reference plan builder (see reference_builder.h): the Gemma 4 program of KERNELS.md.
#include "runtime/plan/reference_builder.h"
#include "runtime/plan/step_spec.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "models/config.h"
#include "models/error.h"
#include "models/safetensors.h"

namespace g4c::plan {
namespace {

using flatbuffers::FlatBufferBuilder;
using flatbuffers::Offset;

struct ValueSpec {
  std::string name;
  int cols;
  fb::RowSpace rows;
};

class Builder {
 public:
  Builder(const models::ModelConfig& cfg, const models::Checkpoint& ckpt, const ReferenceOptions& o)
      : cfg_(cfg), ckpt_(ckpt), opts_(o) {}

  Plan build();

 private:
  int value(const std::string& name, int cols, fb::RowSpace rows = fb::RowSpace::Tokens) {
    auto it = value_ids_.find(name);
    if (it != value_ids_.end()) return it->second;
    values_.push_back({name, cols, rows});
    return value_ids_[name] = int(values_.size()) - 1;
  }
  int dense(const std::string& name, fb::WeightFormat format = fb::WeightFormat::Dense) {
    auto it = weight_ids_.find(name);
    if (it != weight_ids_.end()) return it->second;
    const auto& t = ckpt_.info(name);  // throws naming the checkpoint when absent
    auto w = fb::CreateWeightDirect(fbb_, name.c_str(), fb::DType(uint8_t(t.dtype)), &t.shape, format, name.c_str(),
                                    Offset<fb::Int4Layout>(), fb::Residency::Resident, t.nbytes);
    weights_.push_back(w);
    return weight_ids_[name] = int(weights_.size()) - 1;
  }
  // A Linear "layers.i.x.y_proj": INT4 when the checkpoint has its qweight, else "<>.weight".
  int linear(const std::string& base, int out, int in) {
    const std::string qkey = base + ".qweight";
    if (!ckpt_.has(qkey)) return dense(base + ".weight");
    const std::string name = base + ".weight";
    auto it = weight_ids_.find(name);
    if (it != weight_ids_.end()) return it->second;
    const auto& q = ckpt_.info(qkey);
    const auto& s = ckpt_.info(base + ".scales");
    const bool symmetric = !ckpt_.has(base + ".zeros");
    if (q.shape.size() != 2 || s.shape.size() != 2 || q.shape[0] != out || s.shape[0] != out || s.shape[1] <= 0)
      throw Error(ckpt_.dir().string() + ": INT4 tensors of " + base + " have unexpected shapes");
    const int padded_in = int(q.shape[1] * 2);
    const int group = padded_in / int(s.shape[1]);
    if (group * s.shape[1] != padded_in || padded_in < in || padded_in - in >= group)
      throw Error(ckpt_.dir().string() + ": INT4 tensors of " + base + " do not match in_features " + std::to_string(in));
    uint64_t bytes = q.nbytes + s.nbytes + (symmetric ? 0 : ckpt_.info(base + ".zeros").nbytes);
    std::string zkey = symmetric ? "" : base + ".zeros";
    auto layout = fb::CreateInt4LayoutDirect(fbb_, qkey.c_str(), (base + ".scales").c_str(), zkey.c_str(),
                                             fb::DType(uint8_t(s.dtype)), group, symmetric, in, padded_in, out);
    std::vector<int64_t> shape = {out, in};
    auto w = fb::CreateWeightDirect(fbb_, name.c_str(), fb::DType::BF16, &shape, fb::WeightFormat::Int4, nullptr, layout,
                                    fb::Residency::Resident, bytes);
    weights_.push_back(w);
    return weight_ids_[name] = int(weights_.size()) - 1;
  }
  void step(StepSpec s) { steps_.push_back(std::move(s)); }

  void emit_layer(int i);
  Offset<fb::ModelConfig> emit_config();

  const models::ModelConfig& cfg_;
  const models::Checkpoint& ckpt_;
  const ReferenceOptions& opts_;
  FlatBufferBuilder fbb_{1 << 16};
  std::vector<Offset<fb::Weight>> weights_;
  std::map<std::string, int> weight_ids_;
  std::vector<ValueSpec> values_;
  std::map<std::string, int> value_ids_;
  std::vector<StepSpec> steps_;
  std::vector<int> kv_of_layer_;
};

void Builder::emit_layer(int i) {
  const auto& g = cfg_.layers[i];
  const bool full = g.kind == models::LayerKind::Full;
  const std::string kind = full ? "full" : "sliding";
  const std::string L = "layers." + std::to_string(i) + ".";
  const std::string tag = "L" + std::to_string(i) + ".";
  const int H = cfg_.hidden_size, Hq = cfg_.num_q_heads, Hkv = g.num_kv_heads, D = g.head_dim;
  const float eps = float(cfg_.rms_norm_eps);
  const int h = value("h", H), a = value("a", H), m = value("m", H), t = value("t", H);
  const int q = value("q." + kind, Hq * D), k = value("k." + kind, Hkv * D), v = value("v." + kind, Hkv * D);
  const int o = value("attn." + kind, Hq * D), ffn = value("ffn", cfg_.intermediate_size);

  step({.kernel = fb::KernelId::Linear, .layer = i, .inputs = {a}, .outputs = {q},
        .weights = {linear(L + "self_attn.q_proj", Hq * D, H)}, .label = tag + "q_proj"});
  step({.kernel = fb::KernelId::Linear, .layer = i, .inputs = {a}, .outputs = {k},
        .weights = {linear(L + "self_attn.k_proj", Hkv * D, H)}, .label = tag + "k_proj"});
  if (!g.k_eq_v)
    step({.kernel = fb::KernelId::Linear, .layer = i, .inputs = {a}, .outputs = {v},
          .weights = {linear(L + "self_attn.v_proj", Hkv * D, H)}, .label = tag + "v_proj"});
  const int qn = dense(L + "self_attn.q_norm.weight"), kn = dense(L + "self_attn.k_norm.weight");
  StepSpec rope{.kernel = fb::KernelId::Rope, .layer = i, .head_dim = D, .rotary_pairs = g.rotary_pairs(),
                .rope_theta = g.rope.theta};
  if (opts_.fused) {
    step({.kernel = fb::KernelId::QkNormRopeKvWrite, .layer = i, .inputs = {q, k, g.k_eq_v ? k : v}, .outputs = {q},
          .weights = {qn, kn}, .label = tag + "qk_norm_rope_kv", .eps = eps, .num_q_heads = Hq, .num_kv_heads = Hkv,
          .head_dim = D, .rotary_pairs = g.rotary_pairs(), .kv_layer = kv_of_layer_[i], .rope_theta = g.rope.theta,
          .v_from_k = g.k_eq_v});
  } else {
    // v first: with k_eq_v it is normalised from the raw k before k is normalised in place.
    step({.kernel = fb::KernelId::RmsNorm, .layer = i, .inputs = {g.k_eq_v ? k : v}, .outputs = {v}, .weights = {-1},
          .label = tag + "v_norm", .eps = eps, .norm_dim = D});
    step({.kernel = fb::KernelId::RmsNorm, .layer = i, .inputs = {q}, .outputs = {q}, .weights = {qn},
          .label = tag + "q_norm", .eps = eps, .norm_dim = D});
    rope.inputs = rope.outputs = {q};
    rope.label = tag + "q_rope";
    step(rope);
    step({.kernel = fb::KernelId::RmsNorm, .layer = i, .inputs = {k}, .outputs = {k}, .weights = {kn},
          .label = tag + "k_norm", .eps = eps, .norm_dim = D});
    rope.inputs = rope.outputs = {k};
    rope.label = tag + "k_rope";
    step(rope);
    step({.kernel = fb::KernelId::KvWrite, .layer = i, .inputs = {k, v}, .label = tag + "kv_write",
          .kv_layer = kv_of_layer_[i]});
  }
  step({.kernel = fb::KernelId::Attention, .layer = i, .inputs = {q}, .outputs = {o}, .label = tag + "attention",
        .scale = 1.0f, .window = full ? 0 : g.window, .num_q_heads = Hq, .num_kv_heads = Hkv, .head_dim = D,
        .kv_layer = kv_of_layer_[i]});
  step({.kernel = fb::KernelId::Linear, .layer = i, .inputs = {o}, .outputs = {t},
        .weights = {linear(L + "self_attn.o_proj", H, Hq * D)}, .label = tag + "o_proj"});
  const int post_attn = dense(L + "post_attention_layernorm.weight");
  const int pre_ffn = dense(L + "pre_feedforward_layernorm.weight");
  const int post_ffn = dense(L + "post_feedforward_layernorm.weight");
  const int scalar = dense(L + "layer_scalar");
  const int next_norm = i + 1 < cfg_.num_layers ? dense("layers." + std::to_string(i + 1) + ".input_layernorm.weight") : -1;
  const int gate = linear(L + "mlp.gate_proj", cfg_.intermediate_size, H);
  const int up = linear(L + "mlp.up_proj", cfg_.intermediate_size, H);
  const int down = linear(L + "mlp.down_proj", H, cfg_.intermediate_size);
  if (opts_.fused) {
    step({.kernel = fb::KernelId::PostNormResidual, .layer = i, .inputs = {h, t}, .outputs = {h, m},
          .weights = {post_attn, -1, pre_ffn}, .label = tag + "attn_residual", .eps = eps});
    step({.kernel = fb::KernelId::Linear, .layer = i, .inputs = {m}, .outputs = {ffn}, .weights = {gate, up},
          .label = tag + "gate_up", .epilogue = fb::Epilogue::GeluTanhGateUp});
    step({.kernel = fb::KernelId::Linear, .layer = i, .inputs = {ffn}, .outputs = {t}, .weights = {down},
          .label = tag + "down_proj"});
    StepSpec res{.kernel = fb::KernelId::PostNormResidual, .layer = i, .inputs = {h, t}, .outputs = {h},
                 .weights = {post_ffn, scalar, next_norm}, .label = tag + "ffn_residual", .eps = eps};
    if (next_norm >= 0) res.outputs.push_back(a);
    step(res);
  } else {
    const int up_v = value("ffn_up", cfg_.intermediate_size);
    step({.kernel = fb::KernelId::RmsNorm, .layer = i, .inputs = {t}, .outputs = {t}, .weights = {post_attn},
          .label = tag + "post_attn_norm", .eps = eps, .norm_dim = H});
    step({.kernel = fb::KernelId::Add, .layer = i, .inputs = {h, t}, .outputs = {h}, .label = tag + "attn_residual"});
    step({.kernel = fb::KernelId::RmsNorm, .layer = i, .inputs = {h}, .outputs = {m}, .weights = {pre_ffn},
          .label = tag + "pre_ffn_norm", .eps = eps, .norm_dim = H});
    step({.kernel = fb::KernelId::Linear, .layer = i, .inputs = {m}, .outputs = {ffn}, .weights = {gate},
          .label = tag + "gate_proj"});
    step({.kernel = fb::KernelId::Linear, .layer = i, .inputs = {m}, .outputs = {up_v}, .weights = {up},
          .label = tag + "up_proj"});
    step({.kernel = fb::KernelId::GeluTanh, .layer = i, .inputs = {ffn}, .outputs = {ffn}, .label = tag + "gelu"});
    step({.kernel = fb::KernelId::Mul, .layer = i, .inputs = {ffn, up_v}, .outputs = {ffn}, .label = tag + "gate_mul"});
    step({.kernel = fb::KernelId::Linear, .layer = i, .inputs = {ffn}, .outputs = {t}, .weights = {down},
          .label = tag + "down_proj"});
    step({.kernel = fb::KernelId::RmsNorm, .layer = i, .inputs = {t}, .outputs = {t}, .weights = {post_ffn},
          .label = tag + "post_ffn_norm", .eps = eps, .norm_dim = H});
    step({.kernel = fb::KernelId::Add, .layer = i, .inputs = {h, t}, .outputs = {h}, .label = tag + "ffn_residual"});
    step({.kernel = fb::KernelId::Scale, .layer = i, .inputs = {h}, .outputs = {h}, .weights = {scalar},
          .label = tag + "layer_scalar"});
    if (next_norm >= 0)
      step({.kernel = fb::KernelId::RmsNorm, .layer = i, .inputs = {h}, .outputs = {a}, .weights = {next_norm},
            .label = tag + "next_input_norm", .eps = eps, .norm_dim = H});
  }
}

Offset<fb::ModelConfig> Builder::emit_config() {
  std::vector<Offset<fb::LayerConfig>> layers;
  for (const auto& g : cfg_.layers)
    layers.push_back(fb::CreateLayerConfig(
        fbb_, g.kind == models::LayerKind::Full ? fb::LayerKind::Full : fb::LayerKind::Sliding, g.num_kv_heads,
        g.head_dim, g.k_eq_v, g.window,
        g.rope.type == models::RopeType::Proportional ? fb::RopeType::Proportional : fb::RopeType::Default,
        g.rope.theta, g.rope.partial_rotary_factor, g.rotary_pairs()));
  return fb::CreateModelConfigDirect(fbb_, cfg_.model_type.c_str(), cfg_.hidden_size, cfg_.num_layers, cfg_.num_q_heads,
                                     cfg_.intermediate_size, cfg_.vocab_size, cfg_.sliding_window, cfg_.rms_norm_eps,
                                     cfg_.final_logit_softcapping, float(cfg_.embed_scale()), cfg_.tie_word_embeddings,
                                     cfg_.bos_token_id, cfg_.pad_token_id, &cfg_.eos_token_ids, &layers);
}

Plan Builder::build() {
  if (cfg_.hidden_size_per_layer_input != 0)
    throw Error(cfg_.source + ": per-layer inputs (hidden_size_per_layer_input) are not supported");
  if (opts_.sliding_kv != "ring" && opts_.sliding_kv != "paged" && opts_.sliding_kv != "auto")
    throw Error("reference plan: sliding_kv must be ring, paged or auto, got \"" + opts_.sliding_kv + "\"");
  if (opts_.kv_dtype != "auto" && opts_.kv_dtype != "bf16" && opts_.kv_dtype != "fp8")
    throw Error("reference plan: kv_dtype must be auto, bf16 or fp8, got \"" + opts_.kv_dtype + "\"");
  const fb::DType kv_dtype = opts_.kv_dtype == "fp8"    ? fb::DType::F8E4M3
                             : opts_.kv_dtype == "bf16" ? fb::DType::BF16
                                                        : fb::DType::F32;
  // KV layout: one cache per layer, ring for sliding, paged for full.
  std::vector<Offset<fb::KvLayer>> kv;
  for (int i = 0; i < cfg_.num_layers; ++i) {
    const auto& g = cfg_.layers[i];
    const int ring_capacity = g.window - 1 + opts_.max_chunk_tokens;
    const bool paged = g.kind == models::LayerKind::Full || opts_.sliding_kv != "ring";
    kv_of_layer_.push_back(i);
    kv.push_back(fb::CreateKvLayer(fbb_, i, paged ? fb::KvKind::Paged : fb::KvKind::Ring, g.num_kv_heads, g.head_dim,
                                   g.window, paged ? 0 : ring_capacity, paged ? opts_.kv_block_size : 0,
                                   /*kv_shared (deprecated)=*/false, kv_dtype));
  }
  const int H = cfg_.hidden_size;
  const int h = value("h", H), a = value("a", H);
  if (opts_.table_dtype != "bf16" && opts_.table_dtype != "int8")
    throw Error("reference plan: table_dtype must be bf16 or int8, got \"" + opts_.table_dtype + "\"");
  const int embed = dense("embed_tokens.weight",
                          opts_.table_dtype == "int8" ? fb::WeightFormat::Int8Rows : fb::WeightFormat::Dense);
  step({.kernel = fb::KernelId::Embed, .outputs = {h}, .weights = {embed}, .label = "embed",
        .scale = float(cfg_.embed_scale())});
  step({.kernel = fb::KernelId::RmsNorm, .layer = 0, .inputs = {h}, .outputs = {a},
        .weights = {dense("layers.0.input_layernorm.weight")}, .label = "L0.input_norm",
        .eps = float(cfg_.rms_norm_eps), .norm_dim = H});
  for (int i = 0; i < cfg_.num_layers; ++i) emit_layer(i);
  const int norm = dense("norm.weight");
  const int logits = value("logits", cfg_.vocab_size, fb::RowSpace::LogitRows);
  const float cap = float(cfg_.final_logit_softcapping);
  if (opts_.fused) {
    step({.kernel = fb::KernelId::LmHead, .inputs = {h}, .outputs = {logits}, .weights = {norm, embed},
          .label = "lm_head", .eps = float(cfg_.rms_norm_eps), .softcap = cap});
  } else {
    const int hr = value("h_rows", H, fb::RowSpace::LogitRows);
    step({.kernel = fb::KernelId::SelectLogitRows, .inputs = {h}, .outputs = {hr}, .label = "select_rows"});
    step({.kernel = fb::KernelId::RmsNorm, .inputs = {hr}, .outputs = {hr}, .weights = {norm}, .label = "final_norm",
          .eps = float(cfg_.rms_norm_eps), .norm_dim = H});
    step({.kernel = fb::KernelId::Linear, .inputs = {hr}, .outputs = {logits}, .weights = {embed}, .label = "lm_head"});
    if (cap > 0)
      step({.kernel = fb::KernelId::Softcap, .inputs = {logits}, .outputs = {logits}, .label = "softcap", .softcap = cap});
  }

  // Values and per-bucket arena offsets (no reuse between values: simple and safe).
  std::vector<Offset<fb::Value>> values;
  for (const auto& v : values_) values.push_back(fb::CreateValueDirect(fbb_, v.name.c_str(), fb::DType::F32, v.cols, v.rows));
  // Ascending by (tokens, sequences), as codegen writes them.
  std::vector<std::tuple<int, int, bool>> shapes;  // tokens, sequences, decode
  for (int n : opts_.decode_buckets) shapes.emplace_back(n, n, true);
  for (int tokens : opts_.bucket_tokens) shapes.emplace_back(tokens, std::min(tokens, 256), false);
  std::stable_sort(shapes.begin(), shapes.end(), [](const auto& a, const auto& b) {
    return std::pair(std::get<0>(a), std::get<1>(a)) < std::pair(std::get<0>(b), std::get<1>(b));
  });
  std::vector<Offset<fb::Bucket>> buckets;
  for (const auto& [tokens, seqs, decode] : shapes) {
    std::vector<uint64_t> offsets;
    uint64_t at = 0;
    for (const auto& v : values_) {
      offsets.push_back(at);
      at += (uint64_t(tokens) * v.cols * 4 + 255) / 256 * 256;
    }
    // Logit rows: any token's (g4c eval reads every position's logits).
    buckets.push_back(fb::CreateBucketDirect(fbb_, tokens, seqs, tokens, &offsets, at, decode,
                                             decode || tokens <= opts_.graph_max_tokens));
  }
  std::vector<Offset<fb::Step>> steps;
  for (const auto& s : steps_) steps.push_back(write_step(fbb_, s));
  std::string fp_text;
  uint64_t fp = checkpoint_fingerprint(cfg_, ckpt_, &fp_text);
  auto model = emit_config();
  auto root = fb::CreatePlanDirect(fbb_, kPlanFormatVersion, "g4c reference_builder 0.1", fp, fp_text.c_str(), model,
                                   &weights_, &kv, opts_.kv_block_size, opts_.max_chunk_tokens, &values, &buckets, &steps,
                                   logits, 1, 0);
  fb::FinishPlanBuffer(fbb_, root);
  std::vector<uint8_t> bytes(fbb_.GetBufferPointer(), fbb_.GetBufferPointer() + fbb_.GetSize());
  return Plan::from_bytes(std::move(bytes), "<reference plan for " + ckpt_.dir().string() + ">");
}

}  // namespace

Plan build_reference_plan(const models::ModelConfig& cfg, const models::Checkpoint& ckpt, const ReferenceOptions& opts) {
  return Builder(cfg, ckpt, opts).build();
}

}  // namespace g4c::plan

// Gemma 4 config.json parsing (DESIGN.md §2), presets and the HF writer.
#include "models/config.h"
#include "models/json_file.h"

#include <cmath>
#include <fstream>
#include <cstdio>
#include <sstream>

#include <nlohmann/json.hpp>

#include "models/dtype.h"
#include "models/error.h"

namespace g4c::models {

using nlohmann::json;

namespace {

// Reads fields of one JSON object and names "file: field" in every error.
// `where` is the path of the object inside the file ("" or "text_config.").
struct FieldReader {
  const json& obj;
  const std::string& file;
  std::string where;

  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    throw Error(file + ": field '" + where + field + "' " + what);
  }
  bool has(const char* f) const { return obj.contains(f) && !obj.at(f).is_null(); }
  int64_t integer(const char* f) const {
    if (!has(f)) fail(f, "is missing");
    const json& v = obj.at(f);
    if (!v.is_number_integer()) fail(f, "must be an integer, got " + std::string(v.type_name()));
    return v.get<int64_t>();
  }
  int positive(const char* f) const {
    int64_t v = integer(f);
    if (v <= 0 || v > (int64_t(1) << 31) - 1) fail(f, "must be a positive 32-bit integer, got " + std::to_string(v));
    return int(v);
  }
  int positive_or(const char* f, int dflt) const { return has(f) ? positive(f) : dflt; }
  int non_negative_or(const char* f, int dflt) const {
    if (!has(f)) return dflt;
    int64_t v = integer(f);
    if (v < 0 || v > (int64_t(1) << 31) - 1) fail(f, "must be a non-negative 32-bit integer, got " + std::to_string(v));
    return int(v);
  }
  double number_or(const char* f, double dflt) const {
    if (!has(f)) return dflt;
    const json& v = obj.at(f);
    if (!v.is_number()) fail(f, "must be a number, got " + std::string(v.type_name()));
    double d = v.get<double>();
    if (!std::isfinite(d)) fail(f, "must be finite");
    return d;
  }
  bool boolean_or(const char* f, bool dflt) const {
    if (!has(f)) return dflt;
    const json& v = obj.at(f);
    if (!v.is_boolean()) fail(f, "must be a boolean, got " + std::string(v.type_name()));
    return v.get<bool>();
  }
  std::string string(const char* f) const {
    if (!has(f)) fail(f, "is missing");
    const json& v = obj.at(f);
    if (!v.is_string()) fail(f, "must be a string, got " + std::string(v.type_name()));
    return v.get<std::string>();
  }
};

// eos_token_id: an int or a list of ints.
std::vector<int> read_eos(const json& v, const std::string& file, const std::string& field) {
  std::vector<int> ids;
  auto one = [&](const json& e) {
    if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() > INT32_MAX)
      throw Error(file + ": field '" + field + "' must be a non-negative integer or a list of them");
    ids.push_back(int(e.get<int64_t>()));
  };
  if (v.is_array()) {
    if (v.empty()) throw Error(file + ": field '" + field + "' is an empty list");
    for (const json& e : v) one(e);
  } else {
    one(v);
  }
  return ids;
}

RopeParams read_rope(const json& r, const std::string& file, const std::string& where, double default_theta) {
  if (!r.is_object()) throw Error(file + ": field '" + where + "' must be an object");
  FieldReader f{r, file, where + "."};
  RopeParams p;
  std::string type = f.has("rope_type") ? f.string("rope_type") : "default";
  if (type == "default") p.type = RopeType::Default;
  else if (type == "proportional") p.type = RopeType::Proportional;
  else f.fail("rope_type", "has unsupported value '" + type + "' (expected default or proportional)");
  p.theta = f.number_or("rope_theta", default_theta);
  if (p.theta <= 0) f.fail("rope_theta", "must be positive");
  p.partial_rotary_factor = f.number_or("partial_rotary_factor", 1.0);
  if (p.partial_rotary_factor <= 0 || p.partial_rotary_factor > 1) f.fail("partial_rotary_factor", "must be in (0, 1]");
  return p;
}


}  // namespace

int LayerGeometry::rotary_pairs() const {
  if (rope.type == RopeType::Default) return head_dim / 2;
  return int(rope.partial_rotary_factor * (head_dim / 2));
}

size_t LayerGeometry::kv_bytes_per_token() const {
  return 2 * size_t(num_kv_heads) * size_t(head_dim) * dtype_size(DType::BF16);
}

double ModelConfig::embed_scale() const { return std::sqrt(double(hidden_size)); }

double ModelConfig::embed_scale_bf16() const { return bf16_to_f32(f32_to_bf16(float(embed_scale()))); }

size_t ModelConfig::num_parameters() const {
  size_t H = size_t(hidden_size), n = size_t(vocab_size) * H;
  if (!tie_word_embeddings) n *= 2;
  n += H;  // final norm
  for (const LayerGeometry& g : layers) {
    size_t qd = size_t(num_q_heads) * size_t(g.head_dim), kvd = size_t(g.num_kv_heads) * size_t(g.head_dim);
    n += 2 * qd * H;                       // q_proj, o_proj
    n += (g.k_eq_v ? 1 : 2) * kvd * H;     // k_proj (+ v_proj)
    n += 3 * H * size_t(intermediate_size);
    n += 4 * H + 2 * size_t(g.head_dim) + 1;  // 4 layer norms, q_norm, k_norm, layer_scalar
  }
  return n;
}

size_t ModelConfig::kv_bytes_per_token(LayerKind kind) const {
  size_t n = 0;
  for (const LayerGeometry& g : layers)
    if (g.kind == kind) n += g.kv_bytes_per_token();
  return n;
}

std::string ModelConfig::summary() const {
  int n_full = 0;
  for (const LayerGeometry& g : layers) n_full += g.kind == LayerKind::Full;
  std::ostringstream s;
  s << model_type << " (" << source << "): " << num_layers << " layers (" << (num_layers - n_full) << " sliding, "
    << n_full << " full), hidden " << hidden_size << ", FFN " << intermediate_size << ", vocab " << vocab_size
    << ", " << num_q_heads << " q heads; sliding: " << num_kv_heads << " kv x " << head_dim << ", window "
    << sliding_window << ", rope theta " << rope_sliding.theta << "; full: " << num_global_kv_heads << " kv x "
    << global_head_dim << (attention_k_eq_v ? " (k_eq_v, no v_proj)" : "") << ", rope "
    << (rope_full.type == RopeType::Proportional ? "proportional p=" + std::to_string(rope_full.partial_rotary_factor)
                                                 : std::string("default"))
    << " theta " << rope_full.theta << "; softcap " << final_logit_softcapping
    << (tie_word_embeddings ? ", tied embeddings" : "") << "; " << num_parameters() << " parameters; KV bf16 "
    << kv_bytes_per_token(LayerKind::Sliding) / 1024.0 << " KiB/token sliding (capped at the window), "
    << kv_bytes_per_token(LayerKind::Full) / 1024.0 << " KiB/token full.";
  return s.str();
}

ModelConfig parse_model_config(const json& config, const std::string& file) {
  if (!config.is_object()) throw Error(file + ": config must be a JSON object");
  ModelConfig cfg;
  cfg.source = file;
  FieldReader top{config, file, ""};
  cfg.model_type = top.string("model_type");
  const json* text = &config;
  std::string where;
  if (cfg.model_type == "gemma4_text") {
    cfg.tensor_prefix = "model.";
  } else if (cfg.model_type == "gemma4" || cfg.model_type == "gemma4_unified") {
    if (!config.contains("text_config") || !config["text_config"].is_object())
      throw Error(file + ": field 'text_config' is missing or not an object (model_type " + cfg.model_type + ")");
    text = &config["text_config"];
    where = "text_config.";
    cfg.tensor_prefix = "model.language_model.";
    // A ForCausalLM save of the nested config stores the text model under "model.".
    if (config.contains("architectures") && config["architectures"].is_array())
      for (const json& a : config["architectures"])
        if (a.is_string() && a.get<std::string>() == "Gemma4ForCausalLM") cfg.tensor_prefix = "model.";
  } else {
    throw Error(file + ": unsupported model_type '" + cfg.model_type +
                "' (expected gemma4_text, gemma4 or gemma4_unified)");
  }
  FieldReader f{*text, file, where};

  cfg.hidden_size = f.positive("hidden_size");
  cfg.num_layers = f.positive("num_hidden_layers");
  cfg.num_q_heads = f.positive("num_attention_heads");
  cfg.intermediate_size = f.positive("intermediate_size");
  cfg.vocab_size = f.positive("vocab_size");
  cfg.head_dim = f.positive("head_dim");
  cfg.num_kv_heads = f.positive("num_key_value_heads");
  if (cfg.head_dim % 2) f.fail("head_dim", "must be even (rotate-half RoPE)");
  if (cfg.num_q_heads % cfg.num_kv_heads) f.fail("num_attention_heads", "must be a multiple of num_key_value_heads");
  cfg.attention_k_eq_v = f.boolean_or("attention_k_eq_v", false);
  cfg.sliding_window = f.positive("sliding_window");
  cfg.rms_norm_eps = f.number_or("rms_norm_eps", 1e-6);
  if (cfg.rms_norm_eps <= 0) f.fail("rms_norm_eps", "must be positive");
  cfg.final_logit_softcapping = f.number_or("final_logit_softcapping", 0.0);
  if (cfg.final_logit_softcapping < 0) f.fail("final_logit_softcapping", "must be >= 0");
  // tie_word_embeddings may sit on the outer config of nested saves.
  cfg.tie_word_embeddings = f.has("tie_word_embeddings") ? f.boolean_or("tie_word_embeddings", true)
                                                         : top.boolean_or("tie_word_embeddings", true);
  cfg.hidden_size_per_layer_input = f.non_negative_or("hidden_size_per_layer_input", 0);
  if (cfg.hidden_size_per_layer_input != 0)
    f.fail("hidden_size_per_layer_input", "is " + std::to_string(cfg.hidden_size_per_layer_input) +
                                              ": per-layer inputs (PLE) are not supported, only 0");
  if (f.boolean_or("enable_moe_block", false)) f.fail("enable_moe_block", "is true: MoE models are not supported");
  if (f.boolean_or("attention_bias", false)) f.fail("attention_bias", "is true: biased projections are not supported");
  if (f.boolean_or("use_double_wide_mlp", false)) f.fail("use_double_wide_mlp", "is true: not supported");
  if (f.has("hidden_activation")) {
    std::string act = f.string("hidden_activation");
    if (act != "gelu_pytorch_tanh" && act != "gelu_tanh")
      f.fail("hidden_activation", "is '" + act + "': only gelu_pytorch_tanh is supported");
  }
  if (f.non_negative_or("num_kv_shared_layers", 0) != 0)
    f.fail("num_kv_shared_layers", "is non-zero: KV-shared layers are not supported");
  cfg.max_position_embeddings = f.non_negative_or("max_position_embeddings", 0);
  cfg.bos_token_id = f.non_negative_or("bos_token_id", top.non_negative_or("bos_token_id", 2));
  cfg.pad_token_id = f.non_negative_or("pad_token_id", top.non_negative_or("pad_token_id", 0));
  if (f.has("eos_token_id")) cfg.eos_token_ids = read_eos(text->at("eos_token_id"), file, where + "eos_token_id");
  else if (top.has("eos_token_id")) cfg.eos_token_ids = read_eos(config.at("eos_token_id"), file, "eos_token_id");
  else cfg.eos_token_ids = {1};
  cfg.eos_token_id = cfg.eos_token_ids.front();

  // Layer kinds: explicit layer_types, else Gemma's default pattern (every 6th full).
  std::vector<LayerKind> kinds(size_t(cfg.num_layers), LayerKind::Sliding);
  if (f.has("layer_types")) {
    const json& lt = text->at("layer_types");
    if (!lt.is_array()) f.fail("layer_types", "must be a list");
    if (lt.size() != size_t(cfg.num_layers))
      f.fail("layer_types", "has " + std::to_string(lt.size()) + " entries but num_hidden_layers is " +
                                std::to_string(cfg.num_layers));
    for (size_t i = 0; i < lt.size(); ++i) {
      std::string t = lt[i].is_string() ? lt[i].get<std::string>() : "";
      if (t == "sliding_attention") kinds[i] = LayerKind::Sliding;
      else if (t == "full_attention") kinds[i] = LayerKind::Full;
      else f.fail("layer_types", "entry " + std::to_string(i) + " must be \"sliding_attention\" or \"full_attention\"");
    }
  } else {
    int pattern = f.positive_or("sliding_window_pattern", 6);
    for (int i = 0; i < cfg.num_layers; ++i)
      if ((i + 1) % pattern == 0) kinds[size_t(i)] = LayerKind::Full;
  }

  // RoPE per layer type.
  cfg.rope_sliding = RopeParams{RopeType::Default, f.number_or("rope_local_base_freq", 10000.0), 1.0};
  cfg.rope_full = RopeParams{RopeType::Default, f.number_or("rope_theta", 1000000.0), 1.0};
  if (f.has("rope_parameters")) {
    const json& rp = text->at("rope_parameters");
    if (!rp.is_object()) f.fail("rope_parameters", "must be an object");
    if (rp.contains("sliding_attention"))
      cfg.rope_sliding = read_rope(rp["sliding_attention"], file, where + "rope_parameters.sliding_attention", 10000.0);
    if (rp.contains("full_attention"))
      cfg.rope_full = read_rope(rp["full_attention"], file, where + "rope_parameters.full_attention", 1000000.0);
  }

  // Full-attention geometry: global_* fields, or per_layer_config keyed by "05".
  cfg.global_head_dim = f.positive_or("global_head_dim", cfg.head_dim);
  cfg.num_global_kv_heads = f.positive_or("num_global_key_value_heads", cfg.num_kv_heads);
  const json* plc = nullptr;
  if (f.has("per_layer_config")) {
    plc = &text->at("per_layer_config");
    if (!plc->is_object()) f.fail("per_layer_config", "must be an object");
    for (auto it = plc->begin(); it != plc->end(); ++it) {
      int idx = -1;
      try {
        size_t used = 0;
        idx = std::stoi(it.key(), &used);
        if (used != it.key().size()) idx = -1;
      } catch (...) {
      }
      if (idx < 0 || idx >= cfg.num_layers)
        f.fail("per_layer_config", "key '" + it.key() + "' is not a layer index in [0, " +
                                       std::to_string(cfg.num_layers) + ")");
      if (!it.value().is_object()) f.fail("per_layer_config." + it.key(), "must be an object");
    }
  }
  bool first_full = true;
  cfg.layers.resize(size_t(cfg.num_layers));
  for (int i = 0; i < cfg.num_layers; ++i) {
    LayerGeometry& g = cfg.layers[size_t(i)];
    g.kind = kinds[size_t(i)];
    if (g.kind == LayerKind::Sliding) {
      g.num_kv_heads = cfg.num_kv_heads;
      g.head_dim = cfg.head_dim;
      g.window = cfg.sliding_window;
      g.rope = cfg.rope_sliding;
    } else {
      g.num_kv_heads = cfg.num_global_kv_heads;
      g.head_dim = cfg.global_head_dim;
      g.k_eq_v = cfg.attention_k_eq_v;
      g.rope = cfg.rope_full;
    }
    if (plc) {
      char key[16];
      std::snprintf(key, sizeof key, "%02d", i);
      const json* e = plc->contains(key) ? &(*plc)[key] : plc->contains(std::to_string(i)) ? &(*plc)[std::to_string(i)] : nullptr;
      if (e) {
        FieldReader lf{*e, file, where + "per_layer_config." + key + "."};
        g.head_dim = lf.positive_or("head_dim", g.head_dim);
        g.num_kv_heads = lf.positive_or("num_key_value_heads", g.num_kv_heads);
        if (g.kind == LayerKind::Full && first_full && !f.has("global_head_dim")) {
          cfg.global_head_dim = g.head_dim;
          cfg.num_global_kv_heads = g.num_kv_heads;
        }
      }
    }
    if (g.head_dim % 2) f.fail("head_dim", "of layer " + std::to_string(i) + " must be even");
    if (cfg.num_q_heads % g.num_kv_heads)
      f.fail("num_attention_heads", "must be a multiple of layer " + std::to_string(i) + "'s kv heads");
    if (g.kind == LayerKind::Full) first_full = false;
  }
  return cfg;
}

void apply_generation_config(ModelConfig& cfg, const json& gen, const std::string& file) {
  if (!gen.is_object()) throw Error(file + ": generation config must be a JSON object");
  if (gen.contains("eos_token_id") && !gen["eos_token_id"].is_null()) {
    cfg.eos_token_ids = read_eos(gen["eos_token_id"], file, "eos_token_id");
    cfg.eos_token_id = cfg.eos_token_ids.front();
  }
  FieldReader f{gen, file, ""};
  cfg.bos_token_id = f.non_negative_or("bos_token_id", cfg.bos_token_id);
  cfg.pad_token_id = f.non_negative_or("pad_token_id", cfg.pad_token_id);
}

ModelConfig load_model_config(const std::filesystem::path& model_dir) {
  auto cpath = model_dir / "config.json";
  if (!std::filesystem::exists(cpath)) throw Error(cpath.string() + ": no such file (not a model directory?)");
  ModelConfig cfg = parse_model_config(read_json_file(cpath), cpath.string());
  auto gpath = model_dir / "generation_config.json";
  if (std::filesystem::exists(gpath)) apply_generation_config(cfg, read_json_file(gpath), gpath.string());
  return cfg;
}

json to_hf_config_json(const ModelConfig& cfg) {
  json j;
  j["architectures"] = {"Gemma4ForCausalLM"};
  j["model_type"] = "gemma4_text";
  j["attention_bias"] = false;
  j["attention_dropout"] = 0.0;
  j["attention_k_eq_v"] = cfg.attention_k_eq_v;
  j["bos_token_id"] = cfg.bos_token_id;
  j["eos_token_id"] = cfg.eos_token_ids.size() == 1 ? json(cfg.eos_token_ids[0]) : json(cfg.eos_token_ids);
  j["pad_token_id"] = cfg.pad_token_id;
  j["dtype"] = "bfloat16";
  j["enable_moe_block"] = false;
  j["final_logit_softcapping"] = cfg.final_logit_softcapping;
  j["head_dim"] = cfg.head_dim;
  j["global_head_dim"] = cfg.global_head_dim;
  j["num_global_key_value_heads"] = cfg.num_global_kv_heads;
  j["hidden_activation"] = "gelu_pytorch_tanh";
  j["hidden_size"] = cfg.hidden_size;
  j["hidden_size_per_layer_input"] = cfg.hidden_size_per_layer_input;
  j["intermediate_size"] = cfg.intermediate_size;
  json lt = json::array();
  for (const LayerGeometry& g : cfg.layers) lt.push_back(g.kind == LayerKind::Full ? "full_attention" : "sliding_attention");
  j["layer_types"] = lt;
  j["max_position_embeddings"] = cfg.max_position_embeddings;
  j["num_attention_heads"] = cfg.num_q_heads;
  j["num_hidden_layers"] = cfg.num_layers;
  j["num_key_value_heads"] = cfg.num_kv_heads;
  j["num_kv_shared_layers"] = 0;
  j["rms_norm_eps"] = cfg.rms_norm_eps;
  auto rope = [](const RopeParams& r) {
    json o;
    if (r.type == RopeType::Proportional) o["partial_rotary_factor"] = r.partial_rotary_factor;
    o["rope_theta"] = r.theta;
    o["rope_type"] = r.type == RopeType::Proportional ? "proportional" : "default";
    return o;
  };
  j["rope_parameters"] = {{"full_attention", rope(cfg.rope_full)}, {"sliding_attention", rope(cfg.rope_sliding)}};
  j["sliding_window"] = cfg.sliding_window;
  j["tie_word_embeddings"] = cfg.tie_word_embeddings;
  j["use_cache"] = true;
  j["vocab_size"] = cfg.vocab_size;
  return j;
}

namespace {

json tiny_json() {
  // Identical to models/gemma4-tiny/config.json (the test compares them).
  return json::parse(R"({
    "model_type": "gemma4_text", "architectures": ["Gemma4ForCausalLM"], "attention_k_eq_v": true,
    "bos_token_id": 2, "eos_token_id": 1, "pad_token_id": 0, "final_logit_softcapping": 30.0,
    "head_dim": 64, "hidden_size": 256, "hidden_size_per_layer_input": 0, "intermediate_size": 1024,
    "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention",
      "sliding_attention", "full_attention", "sliding_attention", "sliding_attention", "sliding_attention",
      "sliding_attention", "sliding_attention", "full_attention"],
    "max_position_embeddings": 8192, "num_attention_heads": 4, "num_hidden_layers": 12, "num_key_value_heads": 2,
    "per_layer_config": {"05": {"head_dim": 128, "num_key_value_heads": 1},
                         "11": {"head_dim": 128, "num_key_value_heads": 1}},
    "rms_norm_eps": 1e-06,
    "rope_parameters": {"full_attention": {"partial_rotary_factor": 0.25, "rope_theta": 1000000.0, "rope_type": "proportional"},
                        "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"}},
    "sliding_window": 128, "tie_word_embeddings": true, "vocab_size": 8192})");
}

// A Gemma 4 config in the released layout (global_head_dim + num_global_key_value_heads),
// full attention every 6th layer (5, 11, ...).
json released_json(int hidden, int layers, int q_heads, int kv, int head_dim, int global_kv, int global_head_dim,
                   int ffn, int window, int max_pos) {
  json lt = json::array();
  for (int i = 0; i < layers; ++i) lt.push_back((i + 1) % 6 == 0 ? "full_attention" : "sliding_attention");
  return json{{"model_type", "gemma4_text"},
              {"attention_k_eq_v", true},
              {"bos_token_id", 2},
              {"eos_token_id", {1, 106}},  // <eos>, <end_of_turn> of the Gemma 3 tokenizer
              {"pad_token_id", 0},
              {"final_logit_softcapping", 30.0},
              {"head_dim", head_dim},
              {"global_head_dim", global_head_dim},
              {"num_global_key_value_heads", global_kv},
              {"hidden_size", hidden},
              {"hidden_size_per_layer_input", 0},
              {"intermediate_size", ffn},
              {"layer_types", lt},
              {"max_position_embeddings", max_pos},
              {"num_attention_heads", q_heads},
              {"num_hidden_layers", layers},
              {"num_key_value_heads", kv},
              {"rms_norm_eps", 1e-6},
              {"rope_parameters",
               {{"full_attention", {{"partial_rotary_factor", 0.25}, {"rope_theta", 1e6}, {"rope_type", "proportional"}}},
                {"sliding_attention", {{"rope_theta", 1e4}, {"rope_type", "default"}}}}},
              {"sliding_window", window},
              {"tie_word_embeddings", true},
              {"vocab_size", 262144}};
}

}  // namespace

ModelConfig preset(std::string_view name) {
  if (name == "gemma4-tiny") return parse_model_config(tiny_json(), "preset gemma4-tiny");
  // Gemma-4-12B, DESIGN.md §2. max_position_embeddings 131072 is an assumption
  // (Gemma 3 12B's value); nothing in g4c depends on it.
  if (name == "gemma4-12b")
    return parse_model_config(released_json(3840, 48, 16, 8, 256, 1, 512, 15360, 1024, 131072), "preset gemma4-12b");
  // Gemma-4-31B: shape as given in the project brief (hidden 5376, 60 layers, 32 q heads,
  // sliding 16 kv x 256, full 4 kv x 512, FFN 21504, window 1024, full every 6th layer).
  // NOT checked against a released config.json: attention_k_eq_v, the rope parameters and
  // max_position_embeddings (262144) are assumed to follow the 12B model.
  if (name == "gemma4-31b")
    return parse_model_config(released_json(5376, 60, 32, 16, 256, 4, 512, 21504, 1024, 262144), "preset gemma4-31b");
  throw Error("unknown preset '" + std::string(name) + "' (expected gemma4-tiny, gemma4-12b or gemma4-31b)");
}

std::vector<std::string> preset_names() { return {"gemma4-tiny", "gemma4-12b", "gemma4-31b"}; }

static std::string layer_name(int i, const char* rest) { return "layers." + std::to_string(i) + "." + rest; }
std::string LinearNames::q(int i) { return layer_name(i, "self_attn.q_proj"); }
std::string LinearNames::k(int i) { return layer_name(i, "self_attn.k_proj"); }
std::string LinearNames::v(int i) { return layer_name(i, "self_attn.v_proj"); }
std::string LinearNames::o(int i) { return layer_name(i, "self_attn.o_proj"); }
std::string LinearNames::gate(int i) { return layer_name(i, "mlp.gate_proj"); }
std::string LinearNames::up(int i) { return layer_name(i, "mlp.up_proj"); }
std::string LinearNames::down(int i) { return layer_name(i, "mlp.down_proj"); }

}  // namespace g4c::models

namespace g4c::models {

std::vector<LinearShape> linear_shapes(const ModelConfig& cfg) {
  std::vector<LinearShape> out;
  const int64_t H = cfg.hidden_size, F = cfg.intermediate_size;
  for (int i = 0; i < cfg.num_layers; ++i) {
    const LayerGeometry& g = cfg.layers[size_t(i)];
    const int64_t qd = int64_t(cfg.num_q_heads) * g.head_dim, kvd = int64_t(g.num_kv_heads) * g.head_dim;
    out.push_back({LinearNames::q(i), qd, H});
    out.push_back({LinearNames::k(i), kvd, H});
    if (!g.k_eq_v) out.push_back({LinearNames::v(i), kvd, H});
    out.push_back({LinearNames::o(i), H, qd});
    out.push_back({LinearNames::gate(i), F, H});
    out.push_back({LinearNames::up(i), F, H});
    out.push_back({LinearNames::down(i), H, F});
  }
  return out;
}

}  // namespace g4c::models

// Gemma 4 text-model configuration: every config.json shape of DESIGN.md §2,
// normalised into one struct with per-layer geometry.
//
// Accepted shapes:
//  - model_type "gemma4_text": flat text config (Gemma4ForCausalLM, tensors "model.").
//  - model_type "gemma4" / "gemma4_unified": text config nested under "text_config",
//    tensors prefixed "model.language_model.".
//  - full-attention geometry from "global_head_dim" + "num_global_key_value_heads"
//    (released checkpoints) or from "per_layer_config" {"05": {"head_dim", ...}}.
//  - "layer_types" read explicitly; "rope_parameters" per layer type.
//  - EOS ids from generation_config.json (int or list), falling back to config.json.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace g4c::models {

enum class LayerKind { Sliding, Full };
enum class RopeType { Default, Proportional };

struct RopeParams {
  RopeType type = RopeType::Default;
  double theta = 10000.0;
  double partial_rotary_factor = 1.0;  // proportional only
};

// Geometry of one decoder layer's attention.
struct LayerGeometry {
  LayerKind kind = LayerKind::Sliding;
  int num_kv_heads = 0;
  int head_dim = 0;
  bool k_eq_v = false;  // no v_proj: V comes from the raw k projection (full layers)
  int window = 0;       // sliding window W (keys t-W < j <= t); 0 for full layers
  RopeParams rope;
  // Number of rotated (j, j+D/2) pairs: D/2 for default RoPE, int(p*D/2) for proportional.
  int rotary_pairs() const;
  // Bytes per token of this layer's KV cache in BF16 (K and V).
  size_t kv_bytes_per_token() const;
};

struct ModelConfig {
  std::string model_type;     // as written in config.json
  std::string tensor_prefix;  // "model." or "model.language_model."
  int hidden_size = 0;
  int num_layers = 0;
  int num_q_heads = 0;
  int intermediate_size = 0;
  int vocab_size = 0;
  int head_dim = 0;            // sliding layers
  int num_kv_heads = 0;        // sliding layers
  int global_head_dim = 0;     // full layers
  int num_global_kv_heads = 0; // full layers
  bool attention_k_eq_v = false;
  int sliding_window = 0;
  double rms_norm_eps = 1e-6;
  double final_logit_softcapping = 0.0;  // 0 = none
  bool tie_word_embeddings = true;
  int hidden_size_per_layer_input = 0;   // PLE; g4c supports only 0
  int max_position_embeddings = 0;
  RopeParams rope_sliding, rope_full;
  std::vector<LayerGeometry> layers;     // size num_layers
  int bos_token_id = 2, eos_token_id = 1, pad_token_id = 0;
  std::vector<int> eos_token_ids;        // generation_config.json (or config.json) EOS ids
  std::string source;                    // file the config came from (for messages)

  bool is_full(int layer) const { return layers[layer].kind == LayerKind::Full; }
  // Embedding scale sqrt(hidden); HF's bf16 run rounds it to bf16.
  double embed_scale() const;
  // sqrt(hidden) rounded to bf16, as HF's bf16 run uses it (62.0 for 12B).
  double embed_scale_bf16() const;
  // KV-cache bytes per token (BF16) summed over all layers of one kind.
  size_t kv_bytes_per_token(LayerKind kind) const;
  // Number of stored elements: parameters plus the layer_scalar buffers (embedding once when tied).
  size_t num_parameters() const;
  // One-paragraph human summary (layers, heads, windows, KV bytes/token...).
  std::string summary() const;
};

// Reads DIR/config.json and, if present, DIR/generation_config.json.
// Throws g4c::Error naming the file and the field on any problem.
ModelConfig load_model_config(const std::filesystem::path& model_dir);
// Parses an already-read config.json; `file` is only used in messages.
ModelConfig parse_model_config(const nlohmann::json& config, const std::string& file);
// Applies generation_config.json (eos_token_id int or list).
void apply_generation_config(ModelConfig& cfg, const nlohmann::json& gen, const std::string& file);

// Built-in configs: "gemma4-tiny", "gemma4-12b", "gemma4-31b". Throws for others.
ModelConfig preset(std::string_view name);
std::vector<std::string> preset_names();
// config.json text in the HF gemma4_text layout (used by synth).
nlohmann::json to_hf_config_json(const ModelConfig& cfg);

// HF tensor names of layer i (without prefix), e.g. "layers.3.self_attn.q_proj".
struct LinearNames {
  static std::string q(int i), k(int i), v(int i), o(int i), gate(int i), up(int i), down(int i);
};

// Every Linear of the model in checkpoint order (q, k, [v], o, gate, up, down per layer),
// name without prefix and without ".weight"; weight shape is [out, in].
struct LinearShape {
  std::string name;
  int64_t out = 0, in = 0;
};
std::vector<LinearShape> linear_shapes(const ModelConfig& cfg);

}  // namespace g4c::models

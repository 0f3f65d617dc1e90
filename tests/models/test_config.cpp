// Config parsing of every config.json shape of DESIGN.md §2, presets, and the
// KV-size numbers DESIGN.md states for Gemma-4-12B.
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "models/config.h"
#include "models/error.h"

using namespace g4c::models;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

fs::path tiny_dir() {
  const char* s = std::getenv("G4C_SOURCE_DIR");
  return fs::path(s ? s : ".") / "models" / "gemma4-tiny";
}

json tiny_json() {
  std::ifstream in(tiny_dir() / "config.json");
  return json::parse(in);
}

void expect_same(const ModelConfig& a, const ModelConfig& b) {
  EXPECT_EQ(a.hidden_size, b.hidden_size);
  EXPECT_EQ(a.num_layers, b.num_layers);
  EXPECT_EQ(a.num_q_heads, b.num_q_heads);
  EXPECT_EQ(a.intermediate_size, b.intermediate_size);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.num_kv_heads, b.num_kv_heads);
  EXPECT_EQ(a.global_head_dim, b.global_head_dim);
  EXPECT_EQ(a.num_global_kv_heads, b.num_global_kv_heads);
  EXPECT_EQ(a.attention_k_eq_v, b.attention_k_eq_v);
  EXPECT_EQ(a.sliding_window, b.sliding_window);
  EXPECT_EQ(a.rms_norm_eps, b.rms_norm_eps);
  EXPECT_EQ(a.final_logit_softcapping, b.final_logit_softcapping);
  EXPECT_EQ(a.tie_word_embeddings, b.tie_word_embeddings);
  EXPECT_EQ(a.eos_token_ids, b.eos_token_ids);
  EXPECT_EQ(a.bos_token_id, b.bos_token_id);
  ASSERT_EQ(a.layers.size(), b.layers.size());
  for (size_t i = 0; i < a.layers.size(); ++i) {
    SCOPED_TRACE("layer " + std::to_string(i));
    const auto &x = a.layers[i], &y = b.layers[i];
    EXPECT_EQ(x.kind, y.kind);
    EXPECT_EQ(x.num_kv_heads, y.num_kv_heads);
    EXPECT_EQ(x.head_dim, y.head_dim);
    EXPECT_EQ(x.k_eq_v, y.k_eq_v);
    EXPECT_EQ(x.window, y.window);
    EXPECT_EQ(x.rope.type, y.rope.type);
    EXPECT_EQ(x.rope.theta, y.rope.theta);
    EXPECT_EQ(x.rope.partial_rotary_factor, y.rope.partial_rotary_factor);
  }
}

}  // namespace

TEST(Config, TinyFromDisk) {
  ModelConfig c = load_model_config(tiny_dir());
  EXPECT_EQ(c.model_type, "gemma4_text");
  EXPECT_EQ(c.tensor_prefix, "model.");
  EXPECT_EQ(c.hidden_size, 256);
  EXPECT_EQ(c.num_layers, 12);
  EXPECT_EQ(c.num_q_heads, 4);
  EXPECT_EQ(c.vocab_size, 8192);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.global_head_dim, 128);  // from per_layer_config "05"
  EXPECT_EQ(c.num_global_kv_heads, 1);
  EXPECT_EQ(c.sliding_window, 128);
  for (int i = 0; i < 12; ++i) {
    bool full = i == 5 || i == 11;
    EXPECT_EQ(c.is_full(i), full) << i;
    EXPECT_EQ(c.layers[i].k_eq_v, full) << i;
    EXPECT_EQ(c.layers[i].head_dim, full ? 128 : 64);
    EXPECT_EQ(c.layers[i].window, full ? 0 : 128);
  }
  EXPECT_EQ(c.layers[5].rope.type, RopeType::Proportional);
  EXPECT_EQ(c.layers[5].rope.theta, 1e6);
  // proportional p=0.25, D=128: int(0.25*64) = 16 rotated pairs; sliding D=64: all 32.
  EXPECT_EQ(c.layers[5].rotary_pairs(), 16);
  EXPECT_EQ(c.layers[0].rotary_pairs(), 32);
  EXPECT_EQ(c.layers[0].rope.theta, 1e4);
  EXPECT_EQ(c.eos_token_ids, std::vector<int>{1});
  // The index's metadata says total_size 28209176 bytes of BF16 = 14104588 elements
  // (its total_parameters 14104576 leaves out the 12 layer_scalar buffers).
  EXPECT_EQ(c.num_parameters(), 14104588u);
  // sqrt(256) = 16 exactly in bf16.
  EXPECT_EQ(c.embed_scale_bf16(), 16.0);
}

TEST(Config, TinyPresetEqualsDisk) {
  expect_same(preset("gemma4-tiny"), load_model_config(tiny_dir()));
}

TEST(Config, Preset12B) {
  ModelConfig c = preset("gemma4-12b");
  EXPECT_EQ(c.hidden_size, 3840);
  EXPECT_EQ(c.num_layers, 48);
  EXPECT_EQ(c.num_q_heads, 16);
  EXPECT_EQ(c.intermediate_size, 15360);
  EXPECT_EQ(c.vocab_size, 262144);
  int n_full = 0;
  for (int i = 0; i < 48; ++i) {
    bool full = i % 6 == 5;  // 5, 11, ..., 47
    EXPECT_EQ(c.is_full(i), full) << i;
    n_full += full;
    EXPECT_EQ(c.layers[i].num_kv_heads, full ? 1 : 8);
    EXPECT_EQ(c.layers[i].head_dim, full ? 512 : 256);
    EXPECT_EQ(c.layers[i].k_eq_v, full);
    EXPECT_EQ(c.layers[i].window, full ? 0 : 1024);
  }
  EXPECT_EQ(n_full, 8);
  EXPECT_EQ(c.final_logit_softcapping, 30.0);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.layers[5].rotary_pairs(), 64);  // int(0.25 * 512/2)
  // DESIGN.md §2: sliding KV 320 KiB/token, full KV 16 KiB/token.
  // 40 layers * 8 heads * 256 * 2 (K,V) * 2 B = 327680; 8 * 1 * 512 * 2 * 2 = 16384.
  EXPECT_EQ(c.kv_bytes_per_token(LayerKind::Sliding), 320u * 1024);
  EXPECT_EQ(c.kv_bytes_per_token(LayerKind::Full), 16u * 1024);
  EXPECT_EQ(c.embed_scale_bf16(), 62.0);  // sqrt(3840) = 61.97 → bf16 62.0 (DESIGN.md §2)
  // 12B: 40*7 + 8*6 = 328 Linears (DESIGN.md §3).
  EXPECT_EQ(linear_shapes(c).size(), 328u);
}

TEST(Config, Preset31B) {
  ModelConfig c = preset("gemma4-31b");
  EXPECT_EQ(c.hidden_size, 5376);
  EXPECT_EQ(c.num_layers, 60);
  EXPECT_EQ(c.num_q_heads, 32);
  EXPECT_EQ(c.layers[0].num_kv_heads, 16);
  EXPECT_EQ(c.layers[59].num_kv_heads, 4);
  EXPECT_EQ(c.layers[59].head_dim, 512);
  EXPECT_EQ(c.intermediate_size, 21504);
  EXPECT_THROW(preset("gemma4-2b"), g4c::Error);
  EXPECT_EQ(preset_names().size(), 3u);
}

TEST(Config, HfJsonRoundTrip) {
  for (const std::string& name : preset_names()) {
    SCOPED_TRACE(name);
    ModelConfig p = preset(name);
    expect_same(parse_model_config(to_hf_config_json(p), "roundtrip"), p);
  }
}

TEST(Config, NestedTextConfig) {
  json t = tiny_json();
  for (const char* mt : {"gemma4", "gemma4_unified"}) {
    json outer{{"model_type", mt}, {"architectures", {"Gemma4ForConditionalGeneration"}}, {"text_config", t}};
    ModelConfig c = parse_model_config(outer, "nested.json");
    EXPECT_EQ(c.tensor_prefix, "model.language_model.");
    expect_same(c, load_model_config(tiny_dir()));
  }
  json causal{{"model_type", "gemma4"}, {"architectures", {"Gemma4ForCausalLM"}}, {"text_config", t}};
  EXPECT_EQ(parse_model_config(causal, "x").tensor_prefix, "model.");
}

TEST(Config, GlobalFieldsEqualPerLayerConfig) {
  json t = tiny_json();
  t.erase("per_layer_config");
  t["global_head_dim"] = 128;
  t["num_global_key_value_heads"] = 1;
  expect_same(parse_model_config(t, "global.json"), load_model_config(tiny_dir()));
}

TEST(Config, KEqVOffKeepsVProj) {
  json t = tiny_json();
  t["attention_k_eq_v"] = false;
  ModelConfig c = parse_model_config(t, "x");
  EXPECT_FALSE(c.layers[5].k_eq_v);
  EXPECT_EQ(linear_shapes(c).size(), 12u * 7);
  EXPECT_EQ(linear_shapes(load_model_config(tiny_dir())).size(), 10u * 7 + 2 * 6);
}

TEST(Config, GenerationConfigEos) {
  ModelConfig c = preset("gemma4-tiny");
  apply_generation_config(c, json{{"eos_token_id", json{1, 106}}}, "gen.json");
  EXPECT_EQ(c.eos_token_ids, (std::vector<int>{1, 106}));
  EXPECT_EQ(c.eos_token_id, 1);
  apply_generation_config(c, json{{"eos_token_id", 7}}, "gen.json");
  EXPECT_EQ(c.eos_token_ids, std::vector<int>{7});
  try {
    apply_generation_config(c, json{{"eos_token_id", "one"}}, "gen.json");
    FAIL();
  } catch (const g4c::Error& e) {
    EXPECT_NE(std::string(e.what()).find("gen.json"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("eos_token_id"), std::string::npos);
  }
}

TEST(Config, SummaryMentionsGeometry) {
  std::string s = preset("gemma4-12b").summary();
  EXPECT_NE(s.find("48 layers"), std::string::npos) << s;
  EXPECT_NE(s.find("320 KiB/token sliding"), std::string::npos) << s;
  EXPECT_NE(s.find("16 KiB/token full"), std::string::npos) << s;
}

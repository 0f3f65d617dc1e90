// libFuzzer target: config.json (parse_model_config) and generation_config.json
// (apply_generation_config) on arbitrary bytes. The first byte picks the parser. A config that
// parses must describe a model whose per-layer table the frontend and runtime can index: one
// layer geometry per layer, positive widths, and Linear shapes that are all positive.
#include <cstddef>
#include <cstdint>

#include "models/config.h"
#include "models/error.h"
#include "tests/fuzz/fuzz_common.h"

using namespace g4c;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const bool generation = data[0] & 1;
  const auto j = fuzz::parse_or_null(data + 1, size - 1);
  if (j.is_discarded()) return 0;
  try {
    if (generation) {
      static const models::ModelConfig tiny = models::load_model_config(fuzz::source_dir() + "/models/gemma4-tiny");
      models::ModelConfig cfg = tiny;
      models::apply_generation_config(cfg, j, "generation_config.json");
      return 0;
    }
    const models::ModelConfig cfg = models::parse_model_config(j, "config.json");
    if (int(cfg.layers.size()) != cfg.num_layers) fuzz::violated("layers table size differs from num_layers");
    if (cfg.hidden_size <= 0 || cfg.num_q_heads <= 0 || cfg.vocab_size <= 0) fuzz::violated("non-positive width");
    for (const auto& l : cfg.layers)
      if (l.num_kv_heads <= 0 || l.head_dim <= 0 || cfg.num_q_heads % l.num_kv_heads != 0)
        fuzz::violated("layer geometry the attention cannot index");
    for (const auto& s : models::linear_shapes(cfg))
      if (s.out <= 0 || s.in <= 0) fuzz::violated("non-positive Linear shape");
    (void)models::to_hf_config_json(cfg).dump();
  } catch (const Error&) {
  }
  return 0;
}

// The lab INT4 checkpoint format through the engine: a checkpoint quantized here with
// models/int4 (symmetric G=32 fp16 scales on even layers; asymmetric G=96 bf16 scales on odd
// layers, so in=256/1024 needs padding columns) must give the logits of the dense model whose
// Linears are replaced by the same dequantized values.
#include <gtest/gtest.h>

#include <cmath>

#include "models/int4.h"
#include "models/safetensors.h"
#include "runtime/engine.h"
#include "runtime/plan/reference_builder.h"
#include "tests/runtime/support.h"

using namespace g4c;

namespace {

bool is_linear(const std::string& n) { return n.find("_proj.weight") != std::string::npos; }

int layer_of(const std::string& n) { return std::stoi(n.substr(std::string("layers.").size())); }

}  // namespace

TEST(Int4, QuantizedCheckpointRunsAsItsDequantizedWeights) {
  const auto src = test::tiny_model_dir();
  auto ckpt = models::Checkpoint::open(src);
  auto dir = test::temp_dir("int4");
  std::map<std::string, std::vector<float>> dequantized;
  {
    models::SafetensorsWriter w(dir, "model.");
    for (const auto& n : ckpt->names()) {
      auto v = ckpt->get(n);
      if (!is_linear(n)) {
        w.add(n, v.info->dtype, v.info->shape, v.bytes());
        continue;
      }
      const int64_t out = v.info->shape[0], in = v.info->shape[1];
      std::vector<float> f(size_t(out * in));
      for (size_t i = 0; i < f.size(); ++i) f[i] = bf16_to_f32(v.as<uint16_t>()[i]);
      models::int4::Params p;
      const bool even = layer_of(n) % 2 == 0;
      p.group_size = even ? 32 : 96;
      p.symmetric = even;
      p.scale_dtype = even ? DType::F16 : DType::BF16;
      auto q = models::int4::quantize_rtn(f, out, in, p);
      const std::string base = n.substr(0, n.size() - std::string(".weight").size());
      w.add(base + ".qweight", DType::U8, {out, q.padded_in / 2}, q.qweight);
      w.add(base + ".scales", p.scale_dtype, {out, q.groups()},
            {reinterpret_cast<const uint8_t*>(q.scales.data()), q.scales.size() * 2});
      if (!even) w.add(base + ".zeros", DType::U8, {out, q.groups()}, q.zeros);
      dequantized[n] = models::int4::dequantize(q);
    }
    w.finish();
  }
  for (const char* f : {"config.json", "generation_config.json"})
    std::filesystem::copy_file(src / f, dir / f, std::filesystem::copy_options::overwrite_existing);

  auto int4 = runtime::Engine::open(dir, std::nullopt, {.max_sequences = 1});
  // Every Linear is bound as INT4 with the layout the tensors imply.
  int n_int4 = 0;
  for (const auto* w : *int4->plan()->weights())
    if (w->format() == plan::fb::WeightFormat::Int4) {
      ++n_int4;
      const bool even = layer_of(w->name()->str()) % 2 == 0;
      EXPECT_EQ(w->int4()->group_size(), even ? 32 : 96);
      EXPECT_EQ(w->int4()->symmetric(), even);
      EXPECT_EQ(w->int4()->padded_in() % w->int4()->group_size(), 0);
    }
  EXPECT_EQ(n_int4, 12 * 7 - 2);  // q,k,v,o,gate,up,down per layer; the 2 full layers have no v_proj

  auto dense = runtime::Engine::open(src, std::nullopt, {.max_sequences = 1});
  for (const auto& [name, w] : dequantized) dense->replace_weight(name, w);
  std::vector<int32_t> ids = {2, 818, 2050, 6510, 7750, 327, 1405, 903, 691, 1019, 867, 7675};
  auto a = int4->logits(ids), b = dense->logits(ids);
  float worst = 0, moved = 0;
  auto plain = runtime::Engine::open(src, std::nullopt, {.max_sequences = 1})->logits(ids);
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::abs(a[i] - b[i]));
    moved = std::max(moved, std::abs(a[i] - plain[i]));
  }
  // Identical fp32 weights and program: only bit-identical arithmetic is expected; 1e-5
  // allows nothing but summation-order noise.
  EXPECT_LE(worst, 1e-5f);
  // ...and the quantization really changed the model (the test is not comparing dense to dense).
  EXPECT_GT(moved, 1e-2f);
}

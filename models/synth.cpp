#include "models/synth.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "models/config.h"
#include "models/error.h"
#include "models/manifest.h"
#include "models/progress.h"
#include "models/safetensors.h"
#include "models/xz.h"

namespace g4c::models {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

enum class Init { Embedding, Linear, Norm, QKNorm, Scalar };

struct TensorSpec {
  std::string name;  // without prefix; Linear: module name (no ".weight")
  Init init;
  int64_t rows = 1, cols = 1;  // 1-D tensors: rows 1
  bool one_d = true;
};

// Model tensors in the order HF writes them (alphabetical inside a layer).
std::vector<TensorSpec> model_tensors(const ModelConfig& c) {
  std::vector<TensorSpec> t;
  const int64_t H = c.hidden_size;
  t.push_back({"embed_tokens.weight", Init::Embedding, c.vocab_size, H, false});
  std::vector<LinearShape> lin = linear_shapes(c);
  auto find = [&](const std::string& n) {
    for (const LinearShape& l : lin)
      if (l.name == n) return l;
    throw Error("synth: internal: no linear " + n);
  };
  auto linear = [&](const std::string& n) {
    LinearShape l = find(n);
    t.push_back({n, Init::Linear, l.out, l.in, false});
  };
  auto norm = [&](int i, const char* n, Init init, int64_t size) {
    t.push_back({"layers." + std::to_string(i) + "." + n, init, 1, size, true});
  };
  for (int i = 0; i < c.num_layers; ++i) {
    const LayerGeometry& g = c.layers[size_t(i)];
    norm(i, "input_layernorm.weight", Init::Norm, H);
    norm(i, "layer_scalar", Init::Scalar, 1);
    linear(LinearNames::down(i));
    linear(LinearNames::gate(i));
    linear(LinearNames::up(i));
    norm(i, "post_attention_layernorm.weight", Init::Norm, H);
    norm(i, "post_feedforward_layernorm.weight", Init::Norm, H);
    norm(i, "pre_feedforward_layernorm.weight", Init::Norm, H);
    norm(i, "self_attn.k_norm.weight", Init::QKNorm, g.head_dim);
    linear(LinearNames::k(i));
    linear(LinearNames::o(i));
    norm(i, "self_attn.q_norm.weight", Init::QKNorm, g.head_dim);
    linear(LinearNames::q(i));
    if (!g.k_eq_v) linear(LinearNames::v(i));
  }
  t.push_back({"norm.weight", Init::Norm, 1, H, true});
  return t;
}

uint64_t splitmix64(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char ch : s) h = (h ^ ch) * 0x100000001b3ull;
  return h;
}

// Approximately N(0,1): Irwin–Hall sum of four 16-bit uniforms, variance 4/12 → ×√3.
inline float normal(uint64_t& s) {
  uint64_t x = splitmix64(s);
  float sum = float(x & 0xffff) + float((x >> 16) & 0xffff) + float((x >> 32) & 0xffff) + float(x >> 48);
  return (sum * (1.0f / 65536.0f) - 2.0f) * 1.7320508f;
}
inline float uniform_pm1(uint64_t& s) { return float(splitmix64(s) >> 40) * (2.0f / 16777216.0f) - 1.0f; }

// Fills rows [r0, r1) of a tensor. Each chunk has its own stream so the values do not
// depend on how the work is split among threads.
void fill(const TensorSpec& t, const ModelConfig& c, uint64_t tensor_seed, int64_t chunk, int64_t r0, int64_t r1,
          float* out) {
  uint64_t s = tensor_seed ^ (uint64_t(chunk) * 0xd1b54a32d192ed03ull);
  splitmix64(s);
  const int64_t n = (r1 - r0) * t.cols;
  switch (t.init) {
    case Init::Embedding: {
      const float sd = 1.0f / std::sqrt(std::sqrt(float(c.hidden_size)));  // std H^(-1/4), see synth.h
      for (int64_t i = 0; i < n; ++i) out[i] = sd * normal(s);
      break;
    }
    case Init::Linear: {
      const float sd = 1.0f / std::sqrt(float(t.cols));
      for (int64_t i = 0; i < n; ++i) out[i] = sd * normal(s);
      break;
    }
    case Init::Norm:
      for (int64_t i = 0; i < n; ++i) out[i] = 1.0f + 0.05f * normal(s);
      break;
    case Init::QKNorm: {
      const float base = 1.0f / std::sqrt(std::sqrt(float(t.cols)));
      for (int64_t i = 0; i < n; ++i) out[i] = base * (1.0f + 0.05f * normal(s));
      break;
    }
    case Init::Scalar:
      for (int64_t i = 0; i < n; ++i) out[i] = 1.0f + 0.05f * uniform_pm1(s);
      break;
  }
}

struct Chunk {
  size_t tensor;
  int64_t index, r0, r1;
};

void write_json(const fs::path& p, const json& j) {
  std::ofstream out(p, std::ios::trunc);
  out << j.dump(2) << "\n";
  if (!out) throw Error(p.string() + ": write failed");
}

void copy_tokenizer(const fs::path& src, const fs::path& out_dir) {
  const fs::path dst = out_dir / "tokenizer.json";
  if (!fs::exists(src)) throw Error(src.string() + ": tokenizer not found");
  if (src.extension() == ".xz") {
    const std::string text = read_xz_file(src);
    std::ofstream out(dst, std::ios::binary | std::ios::trunc);
    out.write(text.data(), std::streamsize(text.size()));
    if (!out) throw Error(dst.string() + ": write failed");
  } else {
    fs::copy_file(src, dst, fs::copy_options::overwrite_existing);
  }
  const fs::path tc = src.parent_path() / "tokenizer_config.json";
  if (fs::exists(tc)) fs::copy_file(tc, out_dir / "tokenizer_config.json", fs::copy_options::overwrite_existing);
}

}  // namespace

fs::path default_tokenizer(const std::string& preset_name, const fs::path& source_dir) {
  if (preset_name == "gemma4-tiny") return source_dir / "models" / "gemma4-tiny" / "tokenizer.json";
  return source_dir / "tokenizers" / "gemma3" / "tokenizer.json.xz";
}

SynthResult synthesize(const SynthOptions& o) {
  auto t0 = std::chrono::steady_clock::now();
  if (o.out_dir.empty()) throw Error("synth: no output directory");
  const ModelConfig cfg = preset(o.preset);
  if (o.int4) {
    if (o.int4_params.group_size <= 0 || o.int4_params.group_size % 2)
      throw Error("synth: group size " + std::to_string(o.int4_params.group_size) + " must be even and positive");
  }
  fs::create_directories(o.out_dir);
  SynthResult r;

  const std::vector<TensorSpec> specs = model_tensors(cfg);
  SafetensorsWriter w(o.out_dir, o.int4 ? "" : "model.", o.max_shard_bytes);
  Manifest manifest;
  manifest.method_name = "synth-rtn";
  manifest.method_version = "1";
  // Declare every output tensor first (the writer then streams them with pwrite).
  for (const TensorSpec& t : specs) {
    if (o.int4 && t.init == Init::Linear) {
      QuantModule m = QuantModule::make(t.name, t.rows, t.cols, o.int4_params);
      w.declare(m.qweight_key, DType::U8, {m.out, m.padded_in / 2});
      w.declare(m.scales_key, m.scale_dtype, {m.out, m.groups()});
      r.qweight_bytes += uint64_t(m.out * m.padded_in / 2);
      r.scale_bytes += uint64_t(m.out * m.groups()) * 2;
      r.tensors += 2;
      if (!m.symmetric) {
        w.declare(m.zeros_key, DType::U8, {m.out, m.groups()});
        r.zero_bytes += uint64_t(m.out * m.groups());
        ++r.tensors;
      }
      manifest.add(m);
      ++r.quantized_linears;
    } else {
      std::string name = t.init == Init::Linear ? t.name + ".weight" : t.name;
      std::vector<int64_t> shape = t.one_d ? std::vector<int64_t>{t.cols} : std::vector<int64_t>{t.rows, t.cols};
      w.declare(name, DType::BF16, shape);
      r.bf16_bytes += uint64_t(t.rows * t.cols) * 2;
      ++r.tensors;
    }
  }
  r.data_bytes = w.total_bytes();

  if (!o.header_only) {
    // Row chunks of about 4M values: enough parallelism for the 2 GB embedding, small buffers.
    std::vector<Chunk> chunks;
    for (size_t i = 0; i < specs.size(); ++i) {
      int64_t rows_per = std::max<int64_t>(1, (int64_t(1) << 22) / specs[i].cols), k = 0;
      for (int64_t r0 = 0; r0 < specs[i].rows; r0 += rows_per, ++k)
        chunks.push_back({i, k, r0, std::min(specs[i].rows, r0 + rows_per)});
    }
    std::vector<uint64_t> seeds(specs.size());
    for (size_t i = 0; i < specs.size(); ++i) {
      uint64_t s = o.seed ^ fnv1a(specs[i].name);
      seeds[i] = splitmix64(s);
    }
    std::unique_ptr<Progress> bar;
    if (o.progress)
      bar = std::make_unique<Progress>("synth " + o.preset + (o.int4 ? " int4" : " bf16"), r.data_bytes,
                                       Progress::Unit::Bytes);
    std::atomic<size_t> next{0};
    std::atomic<bool> failed{false};
    std::string error;
    std::mutex error_mu;
    auto worker = [&] {
      std::vector<float> vals;
      std::vector<uint16_t> bf;
      try {
        for (size_t ci; !failed && (ci = next.fetch_add(1)) < chunks.size();) {
          const Chunk& ch = chunks[ci];
          const TensorSpec& t = specs[ch.tensor];
          const int64_t n = (ch.r1 - ch.r0) * t.cols;
          vals.resize(size_t(n));
          fill(t, cfg, seeds[ch.tensor], ch.index, ch.r0, ch.r1, vals.data());
          if (o.int4 && t.init == Init::Linear) {
            const QuantModule& m = *manifest.find(t.name);
            int4::QuantizedLinear q = int4::quantize_rtn(vals, ch.r1 - ch.r0, t.cols, o.int4_params);
            w.write_range(m.qweight_key, uint64_t(ch.r0 * m.padded_in / 2), q.qweight);
            w.write_range(m.scales_key, uint64_t(ch.r0 * m.groups()) * 2,
                          {reinterpret_cast<const uint8_t*>(q.scales.data()), q.scales.size() * 2});
            if (!m.symmetric) w.write_range(m.zeros_key, uint64_t(ch.r0 * m.groups()), q.zeros);
            if (bar) bar->add(q.qweight.size() + q.scales.size() * 2 + q.zeros.size());
          } else {
            bf.resize(size_t(n));
            for (int64_t i = 0; i < n; ++i) bf[size_t(i)] = f32_to_bf16(vals[size_t(i)]);
            std::string name = t.init == Init::Linear ? t.name + ".weight" : t.name;
            w.write_range(name, uint64_t(ch.r0 * t.cols) * 2, {reinterpret_cast<const uint8_t*>(bf.data()), bf.size() * 2});
            if (bar) bar->add(bf.size() * 2);
          }
        }
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(error_mu);
        if (!failed.exchange(true)) error = e.what();
      }
    };
    int nt = o.threads > 0 ? o.threads : int(std::max(1u, std::thread::hardware_concurrency()));
    std::vector<std::thread> pool;
    for (int i = 0; i < nt; ++i) pool.emplace_back(worker);
    for (std::thread& th : pool) th.join();
    if (failed) throw Error(error);
    if (bar) bar->finish();
  }
  r.files = w.finish(o.header_only);

  write_json(o.out_dir / "config.json", to_hf_config_json(cfg));
  r.files.push_back(o.out_dir / "config.json");
  json gen{{"_from_model_config", true}, {"bos_token_id", cfg.bos_token_id}, {"pad_token_id", cfg.pad_token_id},
           {"eos_token_id", cfg.eos_token_ids.size() == 1 ? json(cfg.eos_token_ids[0]) : json(cfg.eos_token_ids)}};
  write_json(o.out_dir / "generation_config.json", gen);
  r.files.push_back(o.out_dir / "generation_config.json");
  if (o.int4) {
    write_manifest(manifest, o.out_dir / "manifest.json");
    write_json(o.out_dir / "quantization_config.json", quantization_config_json(manifest));
    r.files.push_back(o.out_dir / "manifest.json");
    r.files.push_back(o.out_dir / "quantization_config.json");
  }
  if (!o.tokenizer.empty()) {
    copy_tokenizer(o.tokenizer, o.out_dir);
    r.files.push_back(o.out_dir / "tokenizer.json");
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace g4c::models

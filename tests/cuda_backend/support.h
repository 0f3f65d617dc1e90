// Helpers of the CUDA runtime tests (tests/cuda_backend/*.cpp).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "models/safetensors.h"

#include "runtime/cuda_backend/cuda_backend.h"
#include "runtime/engine.h"

namespace g4c::gpurt {

#define REQUIRE_GPU() \
  if (!::g4c::runtime::cuda_device_available()) GTEST_SKIP() << "no CUDA device"

inline std::filesystem::path source_dir() {
  const char* s = std::getenv("G4C_SOURCE_DIR");
  return s ? std::filesystem::path(s) : std::filesystem::path(".");
}
inline std::filesystem::path tiny_dir() { return source_dir() / "models" / "gemma4-tiny"; }

inline std::unique_ptr<runtime::Engine> open_cuda(const std::filesystem::path& model, runtime::CudaOptions co = {},
                                                  runtime::EngineOptions eo = {.max_sequences = 8}) {
  co.model_dir = model;
  return runtime::Engine::open(model, std::nullopt, eo, runtime::make_cuda_backend(co));
}

// The token ids of the golden prompts p0, p1, p2 (tests/data/golden/gemma4-tiny).
inline std::vector<std::vector<int32_t>> golden_prompts() {
  const auto f = source_dir() / "tests" / "data" / "golden" / "gemma4-tiny" / "golden_logits.safetensors";
  auto file = models::SafetensorsFile::open(f);
  std::vector<std::vector<int32_t>> out;
  for (const char* p : {"p0", "p1", "p2"}) {
    auto v = file->view(*file->find(std::string(p) + ".input_ids"));
    out.emplace_back(v.as<int32_t>(), v.as<int32_t>() + v.info->numel());
  }
  return out;
}

// Top-1 agreement and |Δlogit| (mean, max) of two runs' logits rows of width V.
struct LogitsDiff {
  int rows = 0, agree = 0;
  double sum = 0, max = 0;
  size_t n = 0;
  void add(const std::vector<float>& a, const std::vector<float>& b, int V) {
    for (size_t r = 0; r * V < a.size(); ++r) {
      const float* x = a.data() + r * V;
      const float* y = b.data() + r * V;
      agree += std::max_element(x, x + V) - x == std::max_element(y, y + V) - y;
      ++rows;
      for (int j = 0; j < V; ++j) {
        const double d = std::abs(double(x[j]) - y[j]);
        sum += d;
        max = std::max(max, d);
      }
      n += V;
    }
  }
  double top1() const { return rows ? double(agree) / rows : 0; }
  double mean() const { return n ? sum / n : 0; }
};

// The logits of the last position of `prompt` fed in chunks of `chunk` tokens.
inline std::vector<float> last_logits(runtime::Engine& e, const std::vector<int32_t>& prompt, int chunk) {
  const int V = e.vocab_size();
  std::vector<float> l;
  e.logits(prompt, chunk, [&](int first, int rows, const float* x) {
    if (first + rows == int(prompt.size())) l.assign(x + size_t(rows - 1) * V, x + size_t(rows) * V);
  });
  return l;
}

// Prompts of BOS and `n` seeded random ids in [1000, 262000) for each n (12B vocabulary).
inline std::vector<std::vector<int32_t>> seeded_prompts(unsigned seed, std::initializer_list<int> lengths) {
  std::mt19937 rng(seed);
  std::vector<std::vector<int32_t>> out;
  for (int n : lengths) {
    std::vector<int32_t> p{2};
    for (int i = 0; i < n; ++i) p.push_back(int32_t(1000 + rng() % 261000));
    out.push_back(std::move(p));
  }
  return out;
}

// The synthetic 12B at `dir` under the 9984 MiB budget, one sequence at a time: the last-position
// logits of each prompt fed in chunks of 256, with the reference plan's KV and table storage.
inline std::vector<std::vector<float>> last_logits_12b(const char* dir, int max_seq_len,
                                                       const std::vector<std::vector<int32_t>>& prompts,
                                                       const std::string& kv_dtype, const std::string& table_dtype) {
  runtime::CudaOptions co;
  co.budget_bytes = size_t(9984) << 20;
  runtime::EngineOptions eo{.max_sequences = 1, .max_seq_len = max_seq_len};
  eo.reference_kv_dtype = kv_dtype;
  eo.reference_table_dtype = table_dtype;
  auto e = open_cuda(dir, co, eo);
  std::vector<std::vector<float>> out;
  for (const auto& p : prompts) out.push_back(last_logits(*e, p, 256));
  return out;
}

inline double cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t j = 0; j < a.size() && j < b.size(); ++j)
    ab += double(a[j]) * b[j], aa += double(a[j]) * a[j], bb += double(b[j]) * b[j];
  return ab / std::sqrt(aa * bb);
}

}  // namespace g4c::gpurt

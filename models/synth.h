// Synthetic Gemma 4 checkpoints (`g4c synth`): config.json, generation_config.json,
// safetensors shards + index with every tensor of the model at its real name, shape
// and dtype, optionally in the lab's INT4 format (manifest.json,
// quantization_config.json), plus a tokenizer. 12B-size checkpoints are generated on
// the machine that needs them, never stored (DESIGN.md §6).
//
// Weights are seeded and deterministic (independent of the thread count) and scaled
// so activations stay O(1) through all layers:
//   embedding     N(0, std H^(-1/4))     → E[ids]*sqrt(H) has RMS H^(1/4) (7.9 for 12B)
//                                          and tied logits have std ≈ H^(1/4): confident
//                                          next-token distributions, so greedy comparisons
//                                          rarely sit on near-ties
//   Linear [o,i]  N(0, 1) / sqrt(i)      → outputs keep the RMS of their inputs
//   layer norms   1 + 0.05 N(0,1)        (Gemma 4 uses w as is, not 1+w)
//   q_norm/k_norm D^(-1/4) (1 + 0.05 N)  → q·k logits (scale 1.0) have std ≈ 1
//   layer_scalar  1 + 0.05 U(-1, 1)
// Measured with HF transformers 5.17 on the 12B synth (seed 1, 2×300 random ids): 0
// missing/unexpected keys, hidden-state RMS 7.9 → 12.9 over the 48 layers, all finite,
// logits std 7.4, mean top-1 probability 0.91.
// The normal variates are Irwin–Hall sums of four uniforms (one 64-bit draw each),
// which is plenty for synthetic weights and fast enough for 31B.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "models/int4.h"

namespace g4c::models {

struct SynthOptions {
  std::string preset = "gemma4-tiny";
  bool int4 = false;
  int4::Params int4_params;      // group size, symmetric, scale dtype
  uint64_t seed = 0;
  bool header_only = false;      // headers only, no data sections
  std::filesystem::path out_dir;
  // tokenizer.json or tokenizer.json.xz to copy (.xz is decompressed with liblzma);
  // empty: no tokenizer is written.
  std::filesystem::path tokenizer;
  int threads = 0;               // 0: hardware concurrency
  uint64_t max_shard_bytes = 4ull << 30;
  bool progress = true;
};

struct SynthResult {
  size_t tensors = 0;
  size_t quantized_linears = 0;
  uint64_t data_bytes = 0;       // bytes of tensor data described (written unless header-only)
  uint64_t qweight_bytes = 0, scale_bytes = 0, zero_bytes = 0, bf16_bytes = 0;
  std::vector<std::filesystem::path> files;
  double seconds = 0;
};

// Writes the checkpoint into opts.out_dir (created if needed). Throws g4c::Error.
SynthResult synthesize(const SynthOptions& opts);

// The default tokenizer of a preset, searched under `source_dir`:
// tiny → models/gemma4-tiny/tokenizer.json; 12b/31b → tokenizers/gemma3/tokenizer.json.xz.
std::filesystem::path default_tokenizer(const std::string& preset, const std::filesystem::path& source_dir);

}  // namespace g4c::models

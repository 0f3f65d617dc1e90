// The execution side of quantization and evaluation (`g4c quantize`, `g4c eval`):
//
//  - RefModel: a Gemma 4 text model held as fp32 weights (from a BF16 checkpoint or
//    dequantized from the lab's INT4 format) with the exact forward pass of
//    DESIGN.md §2 in fp32 on the CPU: layer-granular execution over batches of
//    calibration sequences (with an observer on every Linear input, and in-place
//    weight replacement), and chunked next-token scoring through a KV cache.
//  - RefCalibrationExecutor: the quant::CalibrationExecutor (passes/quant/calibration.h)
//    that the GPTQ driver talks to, on top of RefModel.
//
// This is the narrow interface DESIGN.md §1 asks for: passes/ never sees it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "models/config.h"
#include "passes/quant/calibration.h"

namespace g4c::tools {

class RefModel {
 public:
  // Loads DIR/config.json and the checkpoint: `.weight` BF16/F16/F32 Linears, or the
  // INT4 `qweight`/`scales`/[`zeros`] triple described by DIR/manifest.json.
  static std::unique_ptr<RefModel> load(const std::filesystem::path& dir, int threads);
  ~RefModel();

  const models::ModelConfig& config() const;
  bool is_int4() const;
  int threads() const;

  // Linear names of a layer in checkpoint order: self_attn.{q,k,[v],o}_proj, mlp.{gate,up,down}_proj.
  std::vector<quant::LinearInfo> linears(int layer) const;
  std::vector<float> weight(int layer, const std::string& linear) const;  // [out, in]
  void set_weight(int layer, const std::string& linear, std::span<const float> w);

  // h [n_seq · len, hidden] ← embeddings of ids [n_seq · len].
  void embed(std::span<const int32_t> ids, float* h) const;
  // Runs decoder layer `layer` in place on n_seq independent sequences of `len`
  // tokens each (positions 0..len-1). The observer, if any, sees every Linear input.
  void layer_forward(int layer, float* h, int64_t n_seq, int64_t len, const quant::CalibrationExecutor::Observer* obs) const;
  // Sum of −log p(ids[t+1] | ids[..t]) over t = 0..n−2, the sequence fed in chunks of
  // `chunk` tokens through a KV cache, log-softmax in fp32 on the soft-capped logits.
  double score_sequence(std::span<const int32_t> ids, int chunk) const;

 private:
  RefModel();
  struct Impl;
  std::unique_ptr<Impl> p_;
};

// Calibration activations for sequential GPTQ: the hidden states entering the next
// layer for every calibration sequence, advanced layer by layer through RefModel.
class RefCalibrationExecutor : public quant::CalibrationExecutor {
 public:
  // `sequences`: token ids, each exactly `len` long.
  RefCalibrationExecutor(RefModel& model, const std::vector<std::vector<int32_t>>& sequences, int64_t len,
                         int64_t batch_sequences = 16);
  int num_layers() const override;
  std::vector<quant::LinearInfo> linears(int layer) const override;
  void run_layer(int layer, const Observer& observe, bool advance) override;
  std::vector<float> weight(int layer, const std::string& linear) const override;
  void set_weight(int layer, const std::string& linear, std::span<const float> w) override;

 private:
  RefModel& model_;
  int64_t n_seq_, len_, batch_;
  std::vector<float> h_;  // [n_seq, len, hidden]
};

}  // namespace g4c::tools

namespace g4c::runtime {
class Engine;
}

namespace g4c::tools {

// The same two services on the runtime's Engine (runtime/engine.h, CPU backend):
// next-token scoring through Engine::logits, and layer-by-layer calibration through
// Engine::forward over a layer's step range with the backend's Linear observer and
// Engine::replace_weight.
class EngineScorer {
 public:
  EngineScorer(const std::filesystem::path& dir, int max_len, int threads);
  ~EngineScorer();
  const models::ModelConfig& config() const;
  double score_sequence(std::span<const int32_t> ids, int chunk);

 private:
  std::unique_ptr<runtime::Engine> engine_;
};

class EngineCalibrationExecutor : public quant::CalibrationExecutor {
 public:
  EngineCalibrationExecutor(const std::filesystem::path& dir, const std::vector<std::vector<int32_t>>& sequences,
                            int64_t len, int threads, int batch_sequences = 16);
  ~EngineCalibrationExecutor() override;
  int num_layers() const override;
  std::vector<quant::LinearInfo> linears(int layer) const override;
  void run_layer(int layer, const Observer& observe, bool advance) override;
  std::vector<float> weight(int layer, const std::string& linear) const override;
  void set_weight(int layer, const std::string& linear, std::span<const float> w) override;

 private:
  std::unique_ptr<runtime::Engine> engine_;
  std::vector<std::vector<int32_t>> seqs_;
  int64_t len_;
  int batch_;
  std::vector<float> h_, a_;  // layer-boundary values "h" and "a" of every sequence [n_seq·len, hidden]
};

}  // namespace g4c::tools

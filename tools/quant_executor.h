// The execution side of quantization and evaluation (`g4c quantize`, `g4c eval`), on the
// runtime Engine (runtime/engine.h) with the CPU backend — the golden-tested forward of
// DESIGN.md §2; there is no second implementation of the model here.
//
// This is the narrow interface DESIGN.md §1 asks for: passes/ sees only
// quant::CalibrationExecutor and quant::GramUpdate, never the runtime.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <future>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "models/config.h"
#include "passes/quant/calibration.h"
#include "runtime/backend.h"

namespace g4c::runtime {
class Engine;
}

namespace g4c::tools {

// Next-token scoring through Engine::logits: Σ −log p(ids[t+1] | ids[..t]), the sequence
// fed in chunks of `chunk` tokens through the KV cache; log-softmax of the soft-capped
// fp32 logits with fp32 exps summed in float64. The engine runs the reference plan with the
// KV storage `kv_dtype` (ReferenceOptions::kv_dtype: auto = F32, bf16, fp8).
class EngineScorer {
 public:
  EngineScorer(const std::filesystem::path& dir, int max_len, int threads, const std::string& kv_dtype = "auto",
               const std::string& table_dtype = "bf16");
  ~EngineScorer();
  const models::ModelConfig& config() const;
  double score_sequence(std::span<const int32_t> ids, int chunk);

 private:
  std::unique_ptr<runtime::Engine> engine_;
};

// The Hessian's XᵀX (quant::GramUpdate) on the CPU backend's GEMM tiles, `threads` wide.
quant::GramUpdate cpu_gram_update(int threads);

// Layer-by-layer GPTQ calibration: the calibration sequences go through Engine::forward
// over one layer's step range at a time, batch by batch, with the boundary values "h"
// and "a" of every sequence kept between layers; the backend's Linear observer reports
// Linear inputs, Engine::replace_weight installs the quantized weights.
//
// True-sequential GPTQ (observe_group 0, 1, …, then run_layer(advance)) resumes each
// piece where the previous one stopped: the values live across that cut are kept per
// batch, so the layer is computed once, each part with the weights before it quantized.
class EngineCalibrationExecutor : public quant::CalibrationExecutor {
 public:
  // `backend`: null = the CPU backend; a CUDA backend runs the calibration forwards on the GPU
  // (its Linear observer hands the inputs to the host, where the Hessians and solves run).
  EngineCalibrationExecutor(const std::filesystem::path& dir, const std::vector<std::vector<int32_t>>& sequences,
                            int64_t len, int threads, int batch_sequences = 16,
                            std::unique_ptr<runtime::Backend> backend = nullptr);
  const runtime::Backend& backend() const;
  ~EngineCalibrationExecutor() override;
  int num_layers() const override;
  std::vector<quant::LinearInfo> linears(int layer) const override;
  void run_layer(int layer, const Observer& observe, bool advance) override;
  std::vector<std::vector<std::string>> input_groups(int layer) const override;
  void observe_group(int layer, int group, const Observer& observe) override;
  // Plan steps executed so far, summed over batches (embedding steps included): how much
  // of the layers was computed (tests check that resumed pieces compute less).
  int64_t steps_executed() const { return steps_executed_; }
  // Wall seconds spent moving layer values between the host arrays and the backend (write_value,
  // the reads and copies of the advanced values), apart from the forward itself (each batch's
  // steps are waited for before the reads).
  double value_io_seconds() const { return value_io_seconds_; }
  std::vector<float> weight(int layer, const std::string& linear) const override;
  void set_weight(int layer, const std::string& linear, std::span<const float> w) override;
  std::span<const float> weight_view(int layer, const std::string& linear) const override;
  void set_weights(int layer, std::span<const std::string> names, const WeightFill& fill) override;
  void release_weights(int layer, std::span<const std::string> names) override;
  // Converts `layer`'s Linears on a background thread (the store's first read; WeightStore
  // converts each weight once, a reader of one being converted waits for it). One at a time: a
  // second call first waits for the one before, and rethrows its error.
  void prefetch_weights(int layer) override;
  // The embeddings again (the embedding table is never rewritten), "a" cleared: layer 0 computes
  // its own input norm, later layers read the "a" the layer before them writes.
  void restart() override;
  // Taken when the backend has device memory (CUDA): Linear inputs are offered there first.
  void set_device_observer(DeviceObserver o) override { dev_observer_ = std::move(o); }

 private:
  struct Observed {
    int step;   // the first Linear step of the group
    int input;  // the plan value its Linears read
    std::vector<std::string> names;
  };
  std::vector<Observed> observed_steps(int layer) const;
  // Reports group g's input (the value it reads now) to the device observer, else to `observe`.
  void report(const Observed& g, const Observer& observe);
  DeviceObserver dev_observer_;
  // Runs every calibration batch through steps [start, stop) of `layer` — from the
  // layer-boundary values when start is the layer's first step, else from the values
  // kept at the cut `start` — then calls after(batch index, offset of its rows into the boundary
  // values, their entry count).
  void for_each_batch(int layer, int start, int stop, const std::function<void(size_t, size_t, size_t)>& after);
  // Keeps, for batch `batch`, the values read in [stop, end of layer) before being written
  // there (the state a later piece resumes from).
  void keep_cut(int layer, int stop, size_t batch);

  // Where the last observe_group stopped (-1: nowhere to resume from) and, per batch, the
  // values live across that step.
  struct Cut {
    int layer = -1, step = -1;
    std::vector<int> values;
    std::vector<std::vector<std::vector<float>>> kept;  // [batch][value]
  };
  Cut cut_, next_cut_;
  // Forgets the cut when a step before it reads one of `weights` (plan names) of `layer`.
  void drop_stale_cut(int layer, std::span<const std::string> weights);
  int64_t steps_executed_ = 0;
  double value_io_seconds_ = 0.0;

  std::unique_ptr<runtime::Engine> engine_;
  std::vector<std::vector<int32_t>> seqs_;
  int64_t len_;
  int batch_;
  // The layer-boundary values "h" and "a" of every sequence [n_seq·len, hidden]: fp32 where the
  // backend computes them in fp32 (the CPU backend), else the bf16 bits the backend holds, moved
  // without conversion from its page-locked memory (h16_/a16_ in boundary16_).
  bool bf16_ = false;
  std::vector<float> h_, a_;
  std::shared_ptr<void> boundary16_;
  uint16_t* h16_ = nullptr;
  uint16_t* a16_ = nullptr;
  // Sequences' rows [off, off + cnt) of "h" (a: of "a") into the backend's value v / back from it.
  void write_boundary(int v, bool a, size_t off, size_t cnt);
  void read_boundary(int v, bool a, size_t off, size_t cnt);
  std::vector<float> scratch_;  // one value read back from a backend that keeps values on a device
  // A value of the current batch: the backend's host storage, or a copy in scratch_.
  std::span<const float> value(int v, int* rows);
  std::future<void> prefetch_;  // last member: destroyed (waited for) before the engine
};

}  // namespace g4c::tools

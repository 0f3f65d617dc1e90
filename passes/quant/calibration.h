// The narrow interface through which GPTQ executes layers (DESIGN.md §1: passes/
// does not depend on runtime/; tools/quant_executor implements this on the runtime),
// and the layer-by-layer GPTQ driver built on it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "passes/quant/gptq.h"

namespace g4c::quant {

struct LinearInfo {
  std::string name;  // e.g. "self_attn.q_proj", "mlp.down_proj"
  int64_t out = 0, in = 0;
};

class CalibrationExecutor {
 public:
  virtual ~CalibrationExecutor() = default;
  virtual int num_layers() const = 0;
  virtual std::vector<LinearInfo> linears(int layer) const = 0;
  // Called with the input X [rows, in] (row-major) of the Linears named in `linears`
  // (Linears fed the same activations — q/k/v, gate/up — are reported together),
  // possibly several times (one call per chunk of calibration tokens).
  using Observer = std::function<void(const std::vector<std::string>& linears, const float* x, int64_t rows,
                                      int64_t in)>;
  // Runs decoder layer `layer` with its current weights on the calibration
  // activations that enter it (computed through the already-quantized earlier
  // layers). `observe` may be empty. With `advance`, the outputs become the inputs
  // of layer + 1.
  virtual void run_layer(int layer, const Observer& observe, bool advance) = 0;
  // The Linears of `layer` grouped by the input they read, in execution order (q/k/v;
  // o; gate/up; down): what true-sequential GPTQ quantizes one group at a time.
  virtual std::vector<std::vector<std::string>> input_groups(int layer) const = 0;
  // Runs `layer` with its current weights (earlier groups possibly quantized already)
  // up to the input of input_groups(layer)[group], reports that input (possibly in
  // several calls), and stops there. Never advances. Called for increasing groups (some
  // may be skipped) and followed by run_layer(layer, {}, true), an executor may resume each
  // piece where the previous one stopped instead of starting from the layer's input.
  virtual void observe_group(int layer, int group, const Observer& observe) = 0;
  // Optional, for executors whose activations live in device memory: while set, Linear inputs
  // are offered first as bf16 rows [rows, in] in device memory (valid for work on the executor's
  // device stream during the call); when it returns false the executor reports them to the
  // host Observer as usual. Empty function: host only. Default: ignored.
  using DeviceObserver = std::function<bool(const std::vector<std::string>& linears, const void* x_bf16,
                                            int64_t rows, int64_t in)>;
  virtual void set_device_observer(DeviceObserver) {}
  // A tensor of `layer` by its name within the layer: a Linear ("self_attn.q_proj", [out, in]
  // row-major) or, for the AWQ folds, an RMSNorm weight ("input_layernorm", [hidden]).
  // set_weight's values hold for every later run.
  virtual std::vector<float> weight(int layer, const std::string& linear) const = 0;
  // The same without a copy where the executor keeps the values in host memory, valid until the
  // next set_weight(s); empty where it does not (use weight()).
  virtual std::span<const float> weight_view(int /*layer*/, const std::string& /*linear*/) const { return {}; }
  virtual void set_weight(int layer, const std::string& linear, std::span<const float> w) = 0;
  // set_weight of several tensors of `layer` at once: fill(i, out) writes names[i]'s new values
  // into `out` (its element count), in the executor's own array where it keeps one (no copy, no
  // allocation); an executor that packs weights together on a device rebuilds each buffer once.
  // Default: weight(), fill, set_weight, one by one.
  using WeightFill = std::function<void(size_t i, std::span<float> out)>;
  virtual void set_weights(int layer, std::span<const std::string> names, const WeightFill& fill) {
    for (size_t i = 0; i < names.size(); ++i) {
      std::vector<float> w = weight(layer, names[i]);
      fill(i, w);
      set_weight(layer, names[i], w);
    }
  }
  // The Linears `names` of `layer` are final (quantized, the layer advanced): an executor whose
  // device keeps its own copies may free their host values. Default: nothing.
  virtual void release_weights(int /*layer*/, std::span<const std::string> /*names*/) {}
  // `layer`'s Linear weights will be read soon (the next layer's, while this one runs): an
  // executor that converts them on first read may start now, in the background. Default: nothing.
  virtual void prefetch_weights(int /*layer*/) {}
  // Starts over: the calibration activations become the embeddings again (the inputs of layer 0),
  // computed with the weights as they are now; nothing kept from earlier runs is reused. Lets a
  // second pass (GPTQ after the AWQ folds) run through the layers again. Default: not supported.
  virtual void restart();
};

struct LinearReport {
  int layer = 0;
  std::string name;
  int64_t out = 0, in = 0;
  int64_t dead_columns = 0;
  double predicted_loss = 0.0;  // GPTQ objective (see GptqResult; of the refined codes with QuantEase)
  double gptq_loss = 0.0;       // the objective of GPTQ's own codes (GptqResult::gptq_loss)
  int64_t quantease_changed = 0;
  double seconds = 0.0;         // GPTQ solve time of this Linear
  int64_t calibration_rows = 0;
};

// Where sequential GPTQ spends its wall time (seconds, summed over layers).
struct GptqTimings {
  double observe_forward = 0.0;  // run_layer with the observer, minus the Hessian updates
  double hessian = 0.0;          // H += 2XᵀX inside the observer
  double solve = 0.0;            // prepare_hessian + gptq_quantize
  double advance_forward = 0.0;  // run_layer with the quantized weights
  double weights = 0.0;          // reading each Linear's weights, writing the fake-quantized ones back
  double weights_read = 0.0;     // of `weights`: the reads (a lazy store widens the checkpoint's bf16 then)
};

// Where the driver accumulates one input's Hessian and solves the Linears that read it. The
// default (HessianStoreFactory empty) is the host: HessianAccumulator + prepare_hessian +
// gptq_quantize; tools/quant_gpu supplies one on the GPU.
class HessianStore {
 public:
  virtual ~HessianStore() = default;
  virtual int64_t n() const = 0;
  virtual int64_t rows() const = 0;
  virtual void add(const float* X, int64_t rows, int64_t ld) = 0;
  // The same rows as bf16 in device memory (exactly the fp32 values add() would get); false when
  // this store cannot read them there (the host store).
  virtual bool add_device_bf16(const void* /*X*/, int64_t /*rows*/, int64_t /*ld*/) { return false; }
  // GPTQ of W [out, n()] (row-major) against this Hessian; the first call prepares it (dead
  // columns, order, damping, factor) and later calls reuse that.
  virtual GptqResult quantize(const float* W, int64_t out, const GptqOptions& opt) = 0;
  // No further add() or quantize(): memory may be released.
  virtual void release() {}
};
using HessianStoreFactory = std::function<std::unique_ptr<HessianStore>(int64_t n)>;

// The host store (threads: the Gram's; gram: its XᵀX kernel, empty = sgemm_acc).
std::unique_ptr<HessianStore> host_hessian_store(int64_t n, int threads, GramUpdate gram);

struct GptqDriverOptions {
  GptqOptions gptq;
  // Within a layer, quantize the input groups in order (q/k/v, then o, gate/up, down),
  // each observed through the layer with the groups before it already quantized (as
  // AutoGPTQ's true_sequential). Off: every Linear sees the layer's unquantized inputs.
  bool true_sequential = false;
  GptqTimings* timings = nullptr;  // accumulated into when set
  int threads = 1;  // for the Hessian accumulation and the fake-quantized write-back
  GramUpdate gram;  // the Hessian's XᵀX kernel; empty: sgemm_acc on `threads` threads
  HessianStoreFactory stores;  // empty: host_hessian_store(n, threads, gram)
  // GPTAQ (gptaq.h): the full-precision model run in lockstep on the same calibration sequences
  // (its weights never change). Each Linear is solved against the output it has there: W is
  // first replaced by gptaq_target(W, X̃ᵀX, XᵀX), then GPTQ'd. Its inputs are read on the host
  // (no device observer). Null: plain GPTQ.
  CalibrationExecutor* reference = nullptr;
  // Called once per quantized Linear, in order; receives the quantized weights.
  std::function<void(const LinearReport&, const QuantizedLinear&)> on_linear;
  std::function<void(int layer, double seconds)> on_layer;
};

// Sequential GPTQ: for each layer, observe the inputs of its Linears (earlier layers
// already quantized; with true_sequential also the earlier groups of the same layer),
// accumulate H = 2XᵀX per distinct input, quantize every Linear, write the
// fake-quantized weights back, then advance the activations through the quantized layer.
void run_gptq(CalibrationExecutor& exec, const GptqDriverOptions& opt);

// One layer of run_gptq, restricted to the Linears `which` (the graph-level g4-gptq
// pass passes the Linears it found in the g4 graph); every one must be among
// exec.linears(layer) with the same shape. Returns the layer's reports.
std::vector<LinearReport> gptq_layer(CalibrationExecutor& exec, int layer, const std::vector<LinearInfo>& which,
                                     const GptqDriverOptions& opt);

}  // namespace g4c::quant

// g4c quantize's checkpoint writer: every tensor of the output is declared up front (the
// layout is fixed), then written as soon as it is known, on a background thread — a Linear when
// its quantization is done, the tensors it does not quantize once the AWQ folds are done — so
// the write overlaps GPTQ instead of following it. Quantized Linears go out in the lab's INT4
// format (DESIGN.md §3: packed codes, F16 scales, U8 zeros when asymmetric), or as F32
// fake-quantized values (--fake-quant). The files are written into a sibling folder
// (DST.partial) and moved into DST by finish(): a run that fails leaves DST as it was.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "models/config.h"
#include "models/int4.h"
#include "models/manifest.h"
#include "models/safetensors.h"
#include "passes/quant/quantizer.h"

namespace g4c::cli {

class QuantCheckpointWriter {
 public:
  // dst: the output directory (created by finish()); the Linears `shapes` are written quantized with
  // `params` (or F32 fake-quantized), every other tensor of `ck` in its own dtype.
  QuantCheckpointWriter(const std::filesystem::path& dst, const models::Checkpoint& ck,
                        const std::vector<models::LinearShape>& shapes, const models::int4::Params& params,
                        bool fake_quant);
  ~QuantCheckpointWriter();  // joins the thread; without finish(), removes DST.partial
  QuantCheckpointWriter(const QuantCheckpointWriter&) = delete;
  QuantCheckpointWriter& operator=(const QuantCheckpointWriter&) = delete;

  // `weight` (a checkpoint name, "layers.0.mlp.up_proj.weight") is a Linear written quantized.
  bool quantizes(const std::string& weight) const { return by_weight_.count(weight) > 0; }
  // Queues the quantized Linear `linear` (a name of `shapes`, e.g. "layers.0.mlp.up_proj").
  void linear(const std::string& linear, quant::QuantizedLinear q);
  // Queues every tensor that is not a quantized Linear: `rewritten` (by checkpoint name, e.g. the
  // norms the AWQ folds changed; read when written, so it must outlive finish() unchanged), the
  // rest copied from the checkpoint.
  void others(const std::map<std::string, std::vector<float>>& rewritten);
  // Waits for the queue, closes the files and moves them into DST; rethrows the first error of a
  // write. The manifest of the quantized Linears (empty with fake_quant).
  models::Manifest finish(const std::string& method);

 private:
  void post(std::function<void()> job);
  void run();
  std::filesystem::path dst_, tmp_;
  bool finished_ = false;
  const models::Checkpoint& ck_;
  std::map<std::string, models::QuantModule> modules_;  // by Linear name
  std::map<std::string, const models::LinearShape*> by_weight_;
  models::int4::Params params_;
  bool fake_quant_;
  models::SafetensorsWriter wr_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool closing_ = false;
  std::exception_ptr error_;
  std::thread worker_;
};

}  // namespace g4c::cli

// EngineScorer / EngineCalibrationExecutor: quantization and evaluation on the runtime
// Engine (declared in tools/quant_executor.h).
#include <algorithm>
#include <cmath>
#include <map>

#include "models/error.h"
#include "runtime/engine.h"
#include "tools/quant_executor.h"

namespace g4c::tools {

namespace detail {
double row_nll(float* logits, int64_t n, float cap, int32_t target);  // quant_executor.cpp
}

// ---- scoring ----

EngineScorer::EngineScorer(const std::filesystem::path& dir, int max_len, int threads) {
  runtime::EngineOptions o;
  o.max_sequences = 1;
  o.max_seq_len = std::max(2, max_len);
  o.threads = std::max(1, threads);
  engine_ = runtime::Engine::open(dir, std::nullopt, o);
}
EngineScorer::~EngineScorer() = default;
const models::ModelConfig& EngineScorer::config() const { return engine_->config(); }

double EngineScorer::score_sequence(std::span<const int32_t> ids, int chunk) {
  const int64_t n = int64_t(ids.size()), V = engine_->vocab_size();
  double nll = 0.0;
  engine_->logits(ids, chunk, [&](int first, int rows, const float* logits) {
    std::vector<float> row(static_cast<size_t>(V));
    for (int r = 0; r < rows; ++r) {
      const int64_t t = first + r;
      if (t + 1 >= n) break;
      std::copy(logits + r * V, logits + (r + 1) * V, row.begin());
      nll += detail::row_nll(row.data(), V, /*cap: already soft-capped*/ 0.f, ids[size_t(t + 1)]);
    }
  });
  return nll;
}

// ---- calibration ----

namespace {

// "layers.3.self_attn.q_proj.weight" → "self_attn.q_proj"
std::string local_linear_name(const std::string& weight) {
  const size_t d1 = weight.find('.'), d2 = weight.find('.', d1 + 1);
  std::string s = weight.substr(d2 + 1);
  if (s.size() > 7 && s.compare(s.size() - 7, 7, ".weight") == 0) s.resize(s.size() - 7);
  return s;
}

std::string weight_name(int layer, const std::string& linear) {
  return "layers." + std::to_string(layer) + "." + linear + ".weight";
}

}  // namespace

EngineCalibrationExecutor::EngineCalibrationExecutor(const std::filesystem::path& dir,
                                                     const std::vector<std::vector<int32_t>>& seqs, int64_t len,
                                                     int threads, int batch)
    : seqs_(seqs), len_(len), batch_(std::max(1, batch)) {
  runtime::EngineOptions o;
  o.max_sequences = batch_;
  o.max_seq_len = int(len);
  o.threads = std::max(1, threads);
  o.token_budget = int(batch_ * len);
  engine_ = runtime::Engine::open(dir, std::nullopt, o);
  for (size_t s = 0; s < seqs_.size(); ++s)
    if (int64_t(seqs_[s].size()) != len_)
      throw Error("calibration sequence " + std::to_string(s) + " has " + std::to_string(seqs_[s].size()) +
                  " tokens, expected " + std::to_string(len_));
  const int64_t H = engine_->config().hidden_size;
  h_.assign(size_t(int64_t(seqs_.size()) * len_ * H), 0.f);
  a_.assign(h_.size(), 0.f);
  // Embeddings: step 0 (embed) of every batch.
  const int hv = engine_->plan().find_value("h");
  const int first0 = engine_->plan().layer_steps(0).first;
  for (size_t s0 = 0; s0 < seqs_.size(); s0 += size_t(batch_)) {
    const size_t nb = std::min(seqs_.size() - s0, size_t(batch_));
    runtime::BatchDesc b;
    std::vector<runtime::Engine::SequenceKv> kvs(nb);
    for (size_t i = 0; i < nb; ++i) {
      kvs[i] = engine_->open_sequence();
      engine_->grow_sequence(kvs[i], int(len_));
      b.add_sequence(seqs_[s0 + i].data(), int(len_), 0, kvs[i].ring_slot, &kvs[i].blocks, false, false);
    }
    engine_->forward(b, 0, first0);
    std::vector<float> out;
    engine_->backend().read_value(hv, &out);
    std::copy(out.begin(), out.end(), h_.begin() + int64_t(s0) * len_ * H);
    for (auto& kv : kvs) engine_->close_sequence(kv);
  }
}

EngineCalibrationExecutor::~EngineCalibrationExecutor() = default;

int EngineCalibrationExecutor::num_layers() const { return engine_->config().num_layers; }

std::vector<quant::LinearInfo> EngineCalibrationExecutor::linears(int layer) const {
  std::vector<quant::LinearInfo> out;
  for (const char* n : {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
                        "mlp.up_proj", "mlp.down_proj"}) {
    const int id = engine_->weights().find(weight_name(layer, n));
    if (id < 0) continue;
    const auto& shape = engine_->weights().shape(id);
    out.push_back({n, shape[0], shape[1]});
  }
  return out;
}

std::vector<float> EngineCalibrationExecutor::weight(int layer, const std::string& linear) const {
  const int id = engine_->weights().find(weight_name(layer, linear));
  if (id < 0) throw Error("calibration: no weight " + weight_name(layer, linear));
  const float* p = engine_->weights().data(id);
  return {p, p + engine_->weights().numel(id)};
}

void EngineCalibrationExecutor::set_weight(int layer, const std::string& linear, std::span<const float> w) {
  engine_->replace_weight(weight_name(layer, linear), w);
}

void EngineCalibrationExecutor::run_layer(int layer, const Observer& observe, bool advance) {
  runtime::Engine& e = *engine_;
  const int64_t H = e.config().hidden_size;
  const int hv = e.plan().find_value("h"), av = e.plan().find_value("a");
  const auto [first, last] = e.plan().layer_steps(layer);
  const int first0 = e.plan().layer_steps(0).first;
  try {
    for (size_t s0 = 0; s0 < seqs_.size(); s0 += size_t(batch_)) {
      const size_t nb = std::min(seqs_.size() - s0, size_t(batch_));
      runtime::BatchDesc b;
      std::vector<runtime::Engine::SequenceKv> kvs(nb);
      for (size_t i = 0; i < nb; ++i) {
        kvs[i] = e.open_sequence();
        e.grow_sequence(kvs[i], int(len_));
        b.add_sequence(seqs_[s0 + i].data(), int(len_), 0, kvs[i].ring_slot, &kvs[i].blocks, false, false);
      }
      const size_t off = s0 * size_t(len_ * H), cnt = nb * size_t(len_ * H);
      // Size the values for this batch (runs the embedding), then restore the boundary.
      e.backend().set_linear_observer({});
      e.forward(b, 0, first0);
      if (observe) {
        e.backend().set_linear_observer([&](int step, const float* x, int rows, int cols) {
          const auto* ws = e.plan()->program()->Get(step)->weights();
          std::vector<std::string> names;
          for (unsigned i = 0; i < ws->size(); ++i)
            if (ws->Get(i) >= 0) names.push_back(local_linear_name(e.weights().name(ws->Get(i))));
          observe(names, x, rows, cols);
        });
      }
      e.backend().write_value(hv, {h_.data() + off, cnt});
      if (layer > 0) e.backend().write_value(av, {a_.data() + off, cnt});
      e.forward(b, first, last);
      if (advance) {
        std::vector<float> out;
        e.backend().read_value(hv, &out);
        std::copy(out.begin(), out.end(), h_.begin() + int64_t(off));
        if (layer + 1 < e.config().num_layers) {
          e.backend().read_value(av, &out);
          std::copy(out.begin(), out.end(), a_.begin() + int64_t(off));
        }
      }
      for (auto& kv : kvs) e.close_sequence(kv);
    }
  } catch (...) {
    e.backend().set_linear_observer({});
    throw;
  }
  e.backend().set_linear_observer({});
}

}  // namespace g4c::tools

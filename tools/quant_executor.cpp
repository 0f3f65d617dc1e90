// The execution side of `g4c quantize` and `g4c eval` on the runtime Engine (CPU backend):
// next-token scoring, layer-by-layer GPTQ calibration, and the Hessian Gram update
// (declared in tools/quant_executor.h).
#include "tools/quant_executor.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>

#include "models/error.h"
#include "runtime/cpu/gemm.h"
#include "runtime/thread_pool.h"
#include "runtime/engine.h"

namespace g4c::tools {

// ---- scoring ----

EngineScorer::EngineScorer(const std::filesystem::path& dir, int max_len, int threads, const std::string& kv_dtype,
                           const std::string& table_dtype) {
  runtime::EngineOptions o;
  o.reference_kv_dtype = kv_dtype;
  o.reference_table_dtype = table_dtype;
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
  std::vector<float> row(static_cast<size_t>(V));
  engine_->logits(ids, chunk, [&](int first, int rows, const float* logits) {
    for (int r = 0; r < rows; ++r) {
      const int64_t t = first + r;
      if (t + 1 >= n) break;
      // −log softmax(z)[target] = max + log Σ e^(z − max) − z[target], z already soft-capped.
      // The exps are fp32; their sum is taken in float64: fp32 running sums drop the many
      // tiny terms of a peaked distribution and biased the mean NLL by −1.6e-5 (tiny model,
      // vs a float64 log-softmax; 8-lane fp32 sums still −1.6e-6).
      const float* z = logits + r * V;
      const float mx = *std::max_element(z, z + V);
      std::copy(z, z + V, row.begin());
      runtime::cpu::exp_shift_sum(row.data(), V, mx);
      double sum = 0.0;
      for (const float p : row) sum += double(p);
      nll += double(mx) + std::log(sum) - double(z[ids[size_t(t + 1)]]);
    }
  });
  return nll;
}

// ---- Hessian Gram update on the CPU backend's GEMM ----

quant::GramUpdate cpu_gram_update(int threads) {
  auto pool = std::make_shared<runtime::ThreadPool>(std::max(1, threads));
  return [pool](const float* X, int64_t rows, int64_t n, int64_t ld, float* C) {
    // Square tiles on and above the diagonal of C (XᵀX is symmetric: the blocks below are
    // never computed); each tile sums over all rows, so the result is thread-count free.
    const int64_t tile = n <= 256 ? 64 : 128, nt = (n + tile - 1) / tile;
    std::vector<std::pair<int64_t, int64_t>> tiles;
    for (int64_t bi = 0; bi < nt; ++bi)
      for (int64_t bj = bi; bj < nt; ++bj) tiles.emplace_back(bi * tile, bj * tile);
    // Each tile takes the rows in blocks of the GEMM's k-block and first copies, row by
    // row, its two column slices of X: A(i, k) = X[k, i0 + i] into a compact block [kb, mi],
    // B(j, k) = X[k, j0 + j] into 16-column panels. Read in place, both operands were
    // strided by a whole row of X per k (a new page per step at in = 1024). Every C element
    // stays one fp32 FMA chain over the rows in order: the same bits as the unblocked loop.
    constexpr int64_t kc = runtime::cpu::kGemmKc, nr = runtime::cpu::kGemmNr;
    pool->parallel_for(int64_t(tiles.size()), 1, [&](int64_t t0, int64_t t1) {
      thread_local std::vector<float> xa, bp;
      xa.resize(size_t(tile * kc));
      bp.resize(size_t(runtime::cpu::packed_b_floats(tile, kc)));
      for (int64_t t = t0; t < t1; ++t) {
        const auto [i0, j0] = tiles[size_t(t)];
        const int64_t mi = std::min(tile, n - i0), nj = std::min(tile, n - j0), np = (nj + nr - 1) / nr;
        for (int64_t k0 = 0; k0 < rows; k0 += kc) {
          const int64_t kb = std::min(kc, rows - k0);
          for (int64_t k = 0; k < kb; ++k) {
            const float* xr = X + (k0 + k) * ld;
            std::memcpy(xa.data() + k * mi, xr + i0, size_t(mi) * 4);
            for (int64_t p = 0; p < np; ++p) {
              float* dst = bp.data() + p * nr * kb + k * nr;
              const int64_t w = std::min(nr, nj - p * nr);
              std::memcpy(dst, xr + j0 + p * nr, size_t(w) * 4);
              std::fill(dst + w, dst + nr, 0.f);  // a ragged last panel is zero-padded
            }
          }
          runtime::cpu::gemm_tile({xa.data(), 1, mi}, {bp.data(), nr, nr * kb}, mi, nj, kb, C + i0 * n + j0, n,
                                  true);
        }
      }
    });
  };
}

// ---- calibration ----

namespace {

// Calibration sequences [s0, s0 + n) as one batch with their KV opened; the sequences are
// closed when it goes (also when a step throws, so the pool is whole for the next call).
class OpenBatch {
 public:
  OpenBatch(runtime::Engine& e, const std::vector<std::vector<int32_t>>& seqs, size_t s0, size_t n, int64_t len)
      : kv_{e, {}} {
    kv_.seqs.reserve(n);  // batch keeps pointers to the block tables
    for (size_t i = 0; i < n; ++i) {
      kv_.seqs.push_back(e.open_sequence());
      e.grow_sequence(kv_.seqs.back(), int(len));
      batch.add_sequence(seqs[s0 + i].data(), int(len), 0, kv_.seqs.back().ring_slot, &kv_.seqs.back().blocks, false,
                         false, &kv_.seqs.back().window_blocks);
    }
  }
  runtime::BatchDesc batch;

 private:
  struct Kv {
    runtime::Engine& e;
    std::vector<runtime::Engine::SequenceKv> seqs;
    ~Kv() {
      for (auto& s : seqs) e.close_sequence(s);
    }
  } kv_;
};

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
                                                     int threads, int batch,
                                                     std::unique_ptr<runtime::Backend> backend)
    : seqs_(seqs), len_(len), batch_(std::max(1, batch)) {
  runtime::EngineOptions o;
  o.max_sequences = batch_;
  o.max_seq_len = int(len);
  o.threads = std::max(1, threads);
  o.token_budget = int(batch_ * len);
  engine_ = runtime::Engine::open(dir, std::nullopt, o, std::move(backend));
  for (size_t s = 0; s < seqs_.size(); ++s)
    if (int64_t(seqs_[s].size()) != len_)
      throw Error("calibration sequence " + std::to_string(s) + " has " + std::to_string(seqs_[s].size()) +
                  " tokens, expected " + std::to_string(len_));
  restart();
}

void EngineCalibrationExecutor::restart() {
  cut_ = next_cut_ = Cut{};
  const int64_t H = engine_->config().hidden_size;
  const size_t n = size_t(int64_t(seqs_.size()) * len_ * H);
  const int hv = engine_->plan().find_value("h"), av = engine_->plan().find_value("a");
  const runtime::Backend& b = engine_->backend();
  bf16_ = b.value_is_bf16(hv) && b.value_is_bf16(av);
  if (bf16_) {
    if (!boundary16_) {
      boundary16_ = b.pinned_host(2 * n * sizeof(uint16_t));
      if (!boundary16_) boundary16_ = std::shared_ptr<uint16_t[]>(new uint16_t[2 * n]);
      h16_ = static_cast<uint16_t*>(boundary16_.get());
      a16_ = h16_ + n;
    }
    std::fill(a16_, a16_ + n, uint16_t(0));
  } else {
    h_.assign(n, 0.f);
    a_.assign(n, 0.f);
  }
  // Embeddings: step 0 (embed) of every batch.
  const int first0 = engine_->plan().layer_steps(0).first;
  for (size_t s0 = 0; s0 < seqs_.size(); s0 += size_t(batch_)) {
    const size_t nb = std::min(seqs_.size() - s0, size_t(batch_));
    const OpenBatch ob(*engine_, seqs_, s0, nb, len_);
    engine_->forward(ob.batch, 0, first0);
    read_boundary(hv, false, s0 * size_t(len_ * H), nb * size_t(len_ * H));
  }
}

void EngineCalibrationExecutor::write_boundary(int v, bool a, size_t off, size_t cnt) {
  runtime::Backend& b = engine_->backend();
  if (bf16_)
    b.write_value_bf16(v, {(a ? a16_ : h16_) + off, cnt});
  else
    b.write_value(v, {(a ? a_ : h_).data() + off, cnt});
}

void EngineCalibrationExecutor::read_boundary(int v, bool a, size_t off, size_t cnt) {
  if (bf16_) {
    const int rows = engine_->backend().read_value_bf16(v, {(a ? a16_ : h16_) + off, cnt});
    if (size_t(rows) * size_t(engine_->config().hidden_size) != cnt)
      throw Error("calibration: internal: the backend returned " + std::to_string(rows) + " rows of a boundary value");
    return;
  }
  int rows = 0;
  const std::span<const float> x = value(v, &rows);
  if (x.size() != cnt) throw Error("calibration: internal: a boundary value has " + std::to_string(x.size()) + " entries");
  std::copy(x.begin(), x.end(), (a ? a_ : h_).begin() + int64_t(off));
}

EngineCalibrationExecutor::~EngineCalibrationExecutor() = default;

const runtime::Backend& EngineCalibrationExecutor::backend() const { return engine_->backend(); }

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
  const std::span<const float> w = weight_view(layer, linear);
  return {w.begin(), w.end()};
}

void EngineCalibrationExecutor::set_weight(int layer, const std::string& linear, std::span<const float> w) {
  const std::string name = weight_name(layer, linear);
  engine_->replace_weight(name, w);
  drop_stale_cut(layer, {&name, 1});
}

std::span<const float> EngineCalibrationExecutor::weight_view(int layer, const std::string& linear) const {
  const int id = engine_->weights().find(weight_name(layer, linear));
  if (id < 0) throw Error("calibration: no weight " + weight_name(layer, linear));
  return {engine_->weights().data(id), engine_->weights().numel(id)};
}

void EngineCalibrationExecutor::set_weights(int layer, std::span<const std::string> names, const WeightFill& fill) {
  std::vector<std::string> full;
  for (const std::string& n : names) full.push_back(weight_name(layer, n));
  engine_->rewrite_weights(full, fill);
  drop_stale_cut(layer, full);
}

void EngineCalibrationExecutor::release_weights(int layer, std::span<const std::string> names) {
  std::vector<std::string> full;
  for (const std::string& n : names) full.push_back(weight_name(layer, n));
  engine_->release_host_weights(full);
}

void EngineCalibrationExecutor::prefetch_weights(int layer) {
  if (prefetch_.valid()) prefetch_.get();
  std::vector<int> ids;
  for (const quant::LinearInfo& li : linears(layer)) ids.push_back(engine_->weights().find(weight_name(layer, li.name)));
  const runtime::WeightStore& store = engine_->weights();
  prefetch_ = std::async(std::launch::async, [&store, ids] {
    for (const int id : ids) (void)store.data(id);
  });
}

// Values kept at a cut that a step before it computed with one of these weights are stale.
void EngineCalibrationExecutor::drop_stale_cut(int layer, std::span<const std::string> weights) {
  if (cut_.layer != layer) return;
  const auto* prog = engine_->plan()->program();
  for (const std::string& name : weights) {
    const int id = engine_->weights().find(name);
    for (int s = engine_->plan().layer_steps(layer).first; s < cut_.step; ++s)
      for (const int wi : *prog->Get(s)->weights())
        if (wi == id) {
          cut_ = Cut{};
          return;
        }
  }
}

// The Linear steps of `layer` as observation groups: consecutive Linear steps that read
// the same value (q/k/v of one input, or gate+up fused in one step) report their input once.
std::vector<EngineCalibrationExecutor::Observed> EngineCalibrationExecutor::observed_steps(int layer) const {
  const runtime::Engine& e = *engine_;
  const auto* prog = e.plan()->program();
  const auto [first, last] = e.plan().layer_steps(layer);
  std::vector<Observed> groups;
  int prev_linear = -1;
  for (int s = first; s < last; ++s) {
    const auto* st = prog->Get(s);
    if (st->kernel() != plan::fb::KernelId::Linear) continue;
    const int input = st->inputs()->Get(0);
    const bool joins = !groups.empty() && prev_linear == s - 1 && groups.back().input == input;
    if (!joins) groups.push_back({s, input, {}});
    const auto* ws = st->weights();
    for (unsigned i = 0; i < ws->size(); ++i)
      if (ws->Get(i) >= 0) groups.back().names.push_back(local_linear_name(engine_->weights().name(ws->Get(i))));
    prev_linear = s;
  }
  return groups;
}

std::vector<std::vector<std::string>> EngineCalibrationExecutor::input_groups(int layer) const {
  std::vector<std::vector<std::string>> out;
  for (Observed& g : observed_steps(layer)) out.push_back(std::move(g.names));
  return out;
}

namespace {

// Values that steps [stop, last) read before writing them: what a run resumed at `stop`
// needs from the steps before it. Empty optional: the cut cannot be resumed (a KV cache
// written before `stop` is read after it).
std::optional<std::vector<int>> live_values(const plan::Plan& plan, int first, int stop, int last) {
  const auto* prog = plan->program();
  bool kv_before = false;
  for (int s = first; s < stop; ++s) {
    const auto k = prog->Get(s)->kernel();
    kv_before |= k == plan::fb::KernelId::KvWrite || k == plan::fb::KernelId::QkNormRopeKvWrite;
  }
  std::vector<int> live, written;
  for (int s = stop; s < last; ++s) {
    const auto* st = prog->Get(s);
    if (kv_before && st->kernel() == plan::fb::KernelId::Attention) return std::nullopt;
    for (const int v : *st->inputs())
      if (v >= 0 && std::find(written.begin(), written.end(), v) == written.end() &&
          std::find(live.begin(), live.end(), v) == live.end())
        live.push_back(v);
    for (const int v : *st->outputs()) written.push_back(v);
  }
  return live;
}

}  // namespace

std::span<const float> EngineCalibrationExecutor::value(int v, int* rows) {
  const runtime::Backend& b = engine_->backend();
  std::span<const float> host = b.host_value(v);
  if (host.empty()) {
    b.read_value(v, &scratch_);
    host = scratch_;
  }
  *rows = int(int64_t(host.size()) / engine_->plan()->values()->Get(v)->cols());
  return host;
}

void EngineCalibrationExecutor::keep_cut(int layer, int stop, size_t batch) {
  runtime::Engine& e = *engine_;
  const auto [first, last] = e.plan().layer_steps(layer);
  if (batch == 0) {
    next_cut_ = Cut{};
    const auto live = live_values(e.plan(), first, stop, last);
    if (!live) return;
    next_cut_ = {layer, stop, *live, {}};
  }
  if (next_cut_.step != stop) return;
  next_cut_.kept.emplace_back();
  for (const int v : next_cut_.values) {
    int rows = 0;
    const std::span<const float> x = value(v, &rows);
    next_cut_.kept.back().emplace_back(x.begin(), x.end());
  }
}

void EngineCalibrationExecutor::for_each_batch(int layer, int start, int stop,
                                               const std::function<void(size_t, size_t, size_t)>& after) {
  runtime::Engine& e = *engine_;
  const int64_t H = e.config().hidden_size;
  const int hv = e.plan().find_value("h"), av = e.plan().find_value("a");
  const int first = e.plan().layer_steps(layer).first, first0 = e.plan().layer_steps(0).first;
  const bool resume = start != first;
  if (resume && (cut_.layer != layer || cut_.step != start))
    throw Error("calibration: internal: no values kept at step " + std::to_string(start));
  for (size_t s0 = 0, batch = 0; s0 < seqs_.size(); s0 += size_t(batch_), ++batch) {
    const size_t nb = std::min(seqs_.size() - s0, size_t(batch_));
    const OpenBatch ob(e, seqs_, s0, nb, len_);
    const runtime::BatchDesc& b = ob.batch;
    const size_t off = s0 * size_t(len_ * H), cnt = nb * size_t(len_ * H);
    // Size the values for this batch (runs the embedding: no Linear step, so an
    // observer that is set sees nothing), then restore the state at `start`.
    e.forward(b, 0, first0);
    const auto t_io = std::chrono::steady_clock::now();
    if (resume) {
      for (size_t k = 0; k < cut_.values.size(); ++k) e.backend().write_value(cut_.values[k], cut_.kept[batch][k]);
    } else {
      write_boundary(hv, false, off, cnt);
      if (layer > 0) write_boundary(av, true, off, cnt);
    }
    value_io_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t_io).count();
    e.forward(b, start, stop);
    e.backend().wait();
    steps_executed_ += first0 + (stop - start);
    after(batch, off, cnt);
  }
}

void EngineCalibrationExecutor::run_layer(int layer, const Observer& observe, bool advance) {
  runtime::Engine& e = *engine_;
  const int hv = e.plan().find_value("h"), av = e.plan().find_value("a");
  const auto [first, last] = e.plan().layer_steps(layer);
  const std::vector<Observed> groups = observe ? observed_steps(layer) : std::vector<Observed>{};
  // Observing only: the layer ends at its last Linear's input (down_proj's), read from
  // the value it reads, so that Linear and everything after it are not computed.
  const int stop = observe && !advance && !groups.empty() ? groups.back().step : last;
  // Advancing right after true-sequential pieces: resume at the last one's cut.
  const int start = !observe && cut_.layer == layer ? cut_.step : first;
  std::vector<int> leader(size_t(std::max(0, last - first)), -1);  // step -> group index
  for (size_t g = 0; g < groups.size(); ++g) leader[size_t(groups[g].step - first)] = int(g);
  auto clear = [&] {
    e.backend().set_linear_observer({});
    e.backend().set_device_linear_observer({});
  };
  if (observe) {
    auto group_of = [&, first = first, last = last](int step) -> const Observed* {
      if (step < first || step >= last || leader[size_t(step - first)] < 0) return nullptr;
      return &groups[size_t(leader[size_t(step - first)])];
    };
    // The observer sees the group input's rows on the device: report() takes those (or the host
    // rows when there are none) as it does for the input read after the run.
    const bool on_device = dev_observer_ && e.backend().set_device_linear_observer([&](int step, const void*, int, int) {
      if (const Observed* g = group_of(step)) report(*g, observe);
    });
    if (!on_device)
      e.backend().set_linear_observer([&](int step, const float* x, int rows, int cols) {
        if (const Observed* g = group_of(step)) observe(g->names, x, rows, cols);
      });
  }
  try {
    for_each_batch(layer, start, stop, [&](size_t, size_t off, size_t cnt) {
      if (stop < last) report(groups.back(), observe);
      if (advance) {
        const auto t_io = std::chrono::steady_clock::now();
        read_boundary(hv, false, off, cnt);
        if (layer + 1 < e.config().num_layers) read_boundary(av, true, off, cnt);
        value_io_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t_io).count();
      }
    });
  } catch (...) {
    clear();
    cut_ = Cut{};
    throw;
  }
  clear();
  cut_ = Cut{};
}

void EngineCalibrationExecutor::report(const Observed& g, const Observer& observe) {
  const int64_t cols = engine_->plan()->values()->Get(g.input)->cols();
  int rows = 0;
  if (dev_observer_) {
    const void* xd = engine_->backend().device_value_bf16(g.input, &rows);
    if (xd && dev_observer_(g.names, xd, rows, cols)) return;
  }
  const std::span<const float> x = value(g.input, &rows);
  observe(g.names, x.data(), rows, int64_t(x.size()) / std::max(1, rows));
}

void EngineCalibrationExecutor::observe_group(int layer, int group, const Observer& observe) {
  const std::vector<Observed> groups = observed_steps(layer);
  if (group < 0 || size_t(group) >= groups.size())
    throw Error("calibration: layer " + std::to_string(layer) + " has no input group " + std::to_string(group));
  const Observed& g = groups[size_t(group)];
  const int first = engine_->plan().layer_steps(layer).first;
  // Resume at the previous piece's cut when it lies before this one; else from the layer start.
  const int start = cut_.layer == layer && cut_.step >= first && cut_.step <= g.step ? cut_.step : first;
  try {
    // Stop before the group's first Linear, read the value it would read, keep the cut.
    for_each_batch(layer, start, g.step, [&](size_t batch, size_t, size_t) {
      report(g, observe);
      keep_cut(layer, g.step, batch);
    });
  } catch (...) {
    cut_ = next_cut_ = Cut{};
    throw;
  }
  cut_ = std::move(next_cut_);
  next_cut_ = Cut{};
  if (cut_.step < 0) cut_ = Cut{};
}

}  // namespace g4c::tools

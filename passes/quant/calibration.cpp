#include "passes/quant/calibration.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>

#include "models/error.h"
#include "passes/quant/gptaq.h"

namespace g4c::quant {

namespace {

using clock = std::chrono::steady_clock;
double secs(clock::time_point a, clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

std::string layer_str(int layer) { return "gptq: layer " + std::to_string(layer) + " "; }

void check_which(const CalibrationExecutor& exec, int layer, const std::vector<LinearInfo>& which) {
  const std::vector<LinearInfo> infos = exec.linears(layer);
  for (const LinearInfo& w : which) {
    auto li = std::find_if(infos.begin(), infos.end(), [&](const LinearInfo& i) { return i.name == w.name; });
    if (li == infos.end()) throw Error(layer_str(layer) + "has no Linear " + w.name + " in the executor");
    if (li->out != w.out || li->in != w.in)
      throw Error(layer_str(layer) + w.name + " is [" + std::to_string(w.out) + ", " + std::to_string(w.in) +
                  "] in the graph but [" + std::to_string(li->out) + ", " + std::to_string(li->in) +
                  "] in the executor");
  }
}

// The full-precision model's inputs of one observation (GPTAQ), chunk by chunk as reported, by
// the first Linear of each group.
using ReferenceRows = std::map<std::string, std::vector<std::vector<float>>>;

CalibrationExecutor::Observer record(ReferenceRows& rows) {
  return [&rows](const std::vector<std::string>& names, const float* x, int64_t n_rows, int64_t in) {
    if (!names.empty()) rows[names.front()].emplace_back(x, x + n_rows * in);
  };
}

// Hessians of one observation (one store per distinct input), keyed by Linear name; with GPTAQ
// also the cross Gram of each input against the reference's rows.
struct Observation {
  std::vector<std::unique_ptr<HessianStore>> stores;
  std::map<std::string, HessianStore*> by_linear;
  std::map<std::string, HessianStore*> by_group;  // key: first linear of the group
  const ReferenceRows* reference = nullptr;
  std::map<std::string, size_t> next_chunk;
  std::map<std::string, std::unique_ptr<CrossGramAccumulator>> cross;  // by group key
  std::map<std::string, CrossGramAccumulator*> cross_by_linear;

  HessianStore& store(int layer, const GptqDriverOptions& opt, const std::vector<std::string>& names, int64_t in) {
    HessianStore*& st = by_group[names.front()];
    if (!st) {
      stores.push_back(opt.stores ? opt.stores(in) : host_hessian_store(in, opt.threads, opt.gram));
      st = stores.back().get();
      for (const auto& nm : names) by_linear[nm] = st;
    }
    if (st->n() != in)
      throw Error(layer_str(layer) + names.front() + " input width changed from " + std::to_string(st->n()) + " to " +
                  std::to_string(in));
    return *st;
  }
  CalibrationExecutor::Observer observer(int layer, const GptqDriverOptions& opt, GptqTimings& tm) {
    return [this, layer, &opt, &tm](const std::vector<std::string>& names, const float* x, int64_t rows, int64_t in) {
      if (names.empty()) return;
      HessianStore& st = store(layer, opt, names, in);
      const auto t_h = clock::now();
      st.add(x, rows, in);
      if (reference) add_cross(layer, opt, names, x, rows, in);
      tm.hessian += secs(t_h, clock::now());
    };
  }
  void add_cross(int layer, const GptqDriverOptions& opt, const std::vector<std::string>& names, const float* x,
                 int64_t rows, int64_t in) {
    const std::string& key = names.front();
    auto it = reference->find(key);
    const size_t k = next_chunk[key]++;
    if (it == reference->end() || k >= it->second.size() || int64_t(it->second[k].size()) != rows * in)
      throw Error(layer_str(layer) + key + ": the full-precision reference reported different inputs (chunk " +
                  std::to_string(k) + ", " + std::to_string(rows) + " rows of " + std::to_string(in) + ")");
    auto& acc = cross[key];
    if (!acc) {
      acc = std::make_unique<CrossGramAccumulator>(in);
      for (const auto& nm : names) cross_by_linear[nm] = acc.get();
    }
    acc->add(it->second[k].data(), x, rows, in, opt.threads);
  }
  // GPTAQ reads every input on the host (the cross Gram): no device observer then.
  CalibrationExecutor::DeviceObserver device_observer(int layer, const GptqDriverOptions& opt, GptqTimings& tm) {
    if (opt.reference) return {};
    return [this, layer, &opt, &tm](const std::vector<std::string>& names, const void* x, int64_t rows, int64_t in) {
      if (names.empty()) return true;
      HessianStore& st = store(layer, opt, names, in);
      const auto t_h = clock::now();
      const bool taken = st.add_device_bf16(x, rows, in);
      tm.hessian += secs(t_h, clock::now());
      return taken;
    };
  }
  // Sets the device observer on `exec` for one observing pass; clears it when it goes.
  struct DeviceScope {
    CalibrationExecutor& exec;
    DeviceScope(CalibrationExecutor& e, CalibrationExecutor::DeviceObserver o) : exec(e) {
      exec.set_device_observer(std::move(o));
    }
    ~DeviceScope() { exec.set_device_observer({}); }
  };
};

// GPTQ of the Linears `lins` from the Hessians of `obs`; writes the fake-quantized
// weights back into the executor and appends the reports. A store is released after the
// last of `lins` that reads it.
void quantize_observed(CalibrationExecutor& exec, int layer, const std::vector<LinearInfo>& lins,
                       const Observation& obs, const GptqDriverOptions& opt, GptqTimings& tm,
                       std::vector<LinearReport>& reports) {
  std::map<HessianStore*, int> uses;
  for (const LinearInfo& li : lins) {
    auto it = obs.by_linear.find(li.name);
    if (it == obs.by_linear.end()) throw Error(layer_str(layer) + li.name + " saw no calibration input");
    if (it->second->n() != li.in)
      throw Error(layer_str(layer) + li.name + " has in_features " + std::to_string(li.in) +
                  " but its observed input has width " + std::to_string(it->second->n()));
    ++uses[it->second];
  }
  // The group's fake-quantized weights go back together after its last solve (one input, so
  // none of them changes another's Hessian): the executor rebuilds a packed buffer once.
  std::vector<std::string> names;
  std::vector<QuantizedLinear> done;
  for (const LinearInfo& li : lins) {
    HessianStore& st = *obs.by_linear.at(li.name);
    const auto t_read = clock::now();
    // The executor's own array where it has one (set_weights comes after the group's solves).
    std::vector<float> owned;
    std::span<const float> w = exec.weight_view(layer, li.name);
    if (w.empty()) {
      owned = exec.weight(layer, li.name);
      w = owned;
    }
    const auto t_lin = clock::now();
    tm.weights += secs(t_read, t_lin);
    tm.weights_read += secs(t_read, t_lin);
    if (auto c = obs.cross_by_linear.find(li.name); c != obs.cross_by_linear.end()) {
      owned = gptaq_target(w.data(), li.out, li.in, c->second->cross(), c->second->gram(), opt.gptq.damp,
                           opt.gptq.threads);
      w = owned;
    }
    GptqResult r = st.quantize(w.data(), li.out, opt.gptq);
    if (--uses[&st] == 0) st.release();
    r.seconds = secs(t_lin, clock::now());
    tm.solve += r.seconds;
    names.push_back(li.name);
    LinearReport rep;
    rep.layer = layer;
    rep.name = li.name;
    rep.out = li.out;
    rep.in = li.in;
    rep.dead_columns = r.dead_columns;
    rep.predicted_loss = r.predicted_loss;
    rep.gptq_loss = r.gptq_loss;
    rep.quantease_changed = r.quantease_changed;
    rep.seconds = r.seconds;
    rep.calibration_rows = st.rows();
    if (opt.on_linear) opt.on_linear(rep, r.q);
    reports.push_back(rep);
    done.push_back(std::move(r.q));
  }
  // The fake-quantized values go straight into the executor's arrays.
  const auto t_write = clock::now();
  exec.set_weights(layer, names, [&](size_t i, std::span<float> out) { done[i].dequantize_into(out, opt.threads); });
  tm.weights += secs(t_write, clock::now());
}

// The host store: HessianAccumulator, prepare_hessian once, gptq_quantize per Linear.
class HostHessianStore final : public HessianStore {
 public:
  HostHessianStore(int64_t n, int threads, GramUpdate gram) : acc_(n), threads_(threads), gram_(std::move(gram)) {}
  int64_t n() const override { return acc_.n(); }
  int64_t rows() const override { return acc_.rows(); }
  void add(const float* X, int64_t rows, int64_t ld) override { acc_.add(X, rows, ld, threads_, gram_); }
  GptqResult quantize(const float* W, int64_t out, const GptqOptions& opt) override {
    if (!prepared_) prepared_ = std::make_unique<PreparedHessian>(prepare_hessian(acc_.hessian(), acc_.n(), opt));
    return gptq_quantize(W, out, acc_.n(), *prepared_, opt);
  }
  void release() override { prepared_.reset(); }

 private:
  HessianAccumulator acc_;
  int threads_;
  GramUpdate gram_;
  std::unique_ptr<PreparedHessian> prepared_;
};

}  // namespace

void CalibrationExecutor::restart() { throw Error("calibration: this executor cannot start over from layer 0"); }

std::unique_ptr<HessianStore> host_hessian_store(int64_t n, int threads, GramUpdate gram) {
  return std::make_unique<HostHessianStore>(n, threads, std::move(gram));
}

std::vector<LinearReport> gptq_layer(CalibrationExecutor& exec, int layer, const std::vector<LinearInfo>& which,
                                     const GptqDriverOptions& opt) {
  const auto t0 = clock::now();
  check_which(exec, layer, which);
  if (layer + 1 < exec.num_layers()) exec.prefetch_weights(layer + 1);
  GptqTimings tm;
  std::vector<LinearReport> reports;
  if (!opt.true_sequential) {
    // One observing pass: every Linear sees the layer's unquantized inputs.
    Observation obs;
    const auto t_observe = clock::now();
    ReferenceRows ref;
    if (opt.reference) {
      opt.reference->run_layer(layer, record(ref), /*advance=*/false);
      obs.reference = &ref;
    }
    const double h0 = tm.hessian;
    {
      const Observation::DeviceScope dev(exec, obs.device_observer(layer, opt, tm));
      exec.run_layer(layer, obs.observer(layer, opt, tm), /*advance=*/false);
    }
    tm.observe_forward += secs(t_observe, clock::now()) - (tm.hessian - h0);
    quantize_observed(exec, layer, which, obs, opt, tm, reports);
  } else {
    // One observing pass per input group, the groups before it already quantized. Every
    // Linear must be in a group: checked before any weight changes.
    const std::vector<std::vector<std::string>> groups = exec.input_groups(layer);
    auto in_group = [&](size_t g, const std::string& name) {
      return std::find(groups[g].begin(), groups[g].end(), name) != groups[g].end();
    };
    for (const LinearInfo& li : which) {
      bool found = false;
      for (size_t g = 0; g < groups.size() && !found; ++g) found = in_group(g, li.name);
      if (!found) throw Error(layer_str(layer) + li.name + " is in no input group of the executor");
    }
    for (size_t g = 0; g < groups.size(); ++g) {
      std::vector<LinearInfo> lins;
      for (const LinearInfo& li : which)
        if (in_group(g, li.name)) lins.push_back(li);
      if (lins.empty()) continue;
      Observation obs;
      const auto t_observe = clock::now();
      ReferenceRows ref;
      if (opt.reference) {
        opt.reference->observe_group(layer, int(g), record(ref));
        obs.reference = &ref;
      }
      const double h0 = tm.hessian;
      {
        const Observation::DeviceScope dev(exec, obs.device_observer(layer, opt, tm));
        exec.observe_group(layer, int(g), obs.observer(layer, opt, tm));
      }
      tm.observe_forward += secs(t_observe, clock::now()) - (tm.hessian - h0);
      quantize_observed(exec, layer, lins, obs, opt, tm, reports);
    }
  }
  const auto t_advance = clock::now();
  exec.run_layer(layer, {}, /*advance=*/true);
  if (opt.reference) opt.reference->run_layer(layer, {}, /*advance=*/true);
  tm.advance_forward = secs(t_advance, clock::now());
  {  // the layer's Linears are final: a device executor may free their host values
    std::vector<std::string> names;
    for (const LinearInfo& li : which) names.push_back(li.name);
    exec.release_weights(layer, names);
  }
  if (opt.timings) {
    opt.timings->observe_forward += tm.observe_forward;
    opt.timings->hessian += tm.hessian;
    opt.timings->solve += tm.solve;
    opt.timings->advance_forward += tm.advance_forward;
    opt.timings->weights += tm.weights;
    opt.timings->weights_read += tm.weights_read;
  }
  if (opt.on_layer) opt.on_layer(layer, secs(t0, clock::now()));
  return reports;
}

void run_gptq(CalibrationExecutor& exec, const GptqDriverOptions& opt) {
  for (int layer = 0; layer < exec.num_layers(); ++layer) gptq_layer(exec, layer, exec.linears(layer), opt);
}

}  // namespace g4c::quant

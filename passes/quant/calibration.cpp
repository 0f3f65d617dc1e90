#include "passes/quant/calibration.h"

#include <chrono>
#include <map>
#include <memory>

#include "models/error.h"

namespace g4c::quant {

std::vector<LinearReport> gptq_layer(CalibrationExecutor& exec, int layer, const std::vector<LinearInfo>& which,
                                     const GptqDriverOptions& opt) {
  auto t0 = std::chrono::steady_clock::now();
  const std::vector<LinearInfo> infos = exec.linears(layer);
  for (const LinearInfo& w : which) {
    bool found = false;
    for (const LinearInfo& li : infos)
      if (li.name == w.name) {
        found = true;
        if (li.out != w.out || li.in != w.in)
          throw Error("gptq: layer " + std::to_string(layer) + " " + w.name + " is [" + std::to_string(w.out) + ", " +
                      std::to_string(w.in) + "] in the graph but [" + std::to_string(li.out) + ", " +
                      std::to_string(li.in) + "] in the executor");
      }
    if (!found) throw Error("gptq: layer " + std::to_string(layer) + " has no Linear " + w.name + " in the executor");
  }
  // One accumulator per distinct input; linear name -> accumulator.
  std::vector<std::unique_ptr<HessianAccumulator>> accs;
  std::map<std::string, HessianAccumulator*> by_linear;
  std::map<std::string, HessianAccumulator*> by_group;  // key: first linear of the group
  using clock = std::chrono::steady_clock;
  auto secs = [](clock::time_point a, clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
  GptqTimings tm;
  const auto t_observe = clock::now();
  exec.run_layer(
      layer,
      [&](const std::vector<std::string>& names, const float* x, int64_t rows, int64_t in) {
        if (names.empty()) return;
        HessianAccumulator*& acc = by_group[names.front()];
        if (!acc) {
          accs.push_back(std::make_unique<HessianAccumulator>(in));
          acc = accs.back().get();
          for (const auto& nm : names) by_linear[nm] = acc;
        }
        if (acc->n() != in)
          throw Error("gptq: layer " + std::to_string(layer) + " " + names.front() + " input width changed from " +
                      std::to_string(acc->n()) + " to " + std::to_string(in));
        const auto t_h = clock::now();
        acc->add(x, rows, in, opt.threads, opt.gram);
        tm.hessian += secs(t_h, clock::now());
      },
      /*advance=*/false);
  tm.observe_forward = secs(t_observe, clock::now()) - tm.hessian;
  std::vector<LinearReport> reports;
  std::map<const HessianAccumulator*, PreparedHessian> prepared;  // shared by Linears of one input
  for (const LinearInfo& li : which) {
    auto it = by_linear.find(li.name);
    if (it == by_linear.end())
      throw Error("gptq: layer " + std::to_string(layer) + " " + li.name + " saw no calibration input");
    const HessianAccumulator& acc = *it->second;
    if (acc.n() != li.in)
      throw Error("gptq: layer " + std::to_string(layer) + " " + li.name + " has in_features " +
                  std::to_string(li.in) + " but its observed input has width " + std::to_string(acc.n()));
    std::vector<float> w = exec.weight(layer, li.name);
    auto t_lin = std::chrono::steady_clock::now();
    auto pit = prepared.find(&acc);
    if (pit == prepared.end()) pit = prepared.emplace(&acc, prepare_hessian(acc.hessian(), acc.n(), opt.gptq)).first;
    GptqResult r = gptq_quantize(w.data(), li.out, li.in, pit->second, opt.gptq);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_lin).count();
    tm.solve += r.seconds;
    std::vector<float> deq = r.q.dequantized();
    exec.set_weight(layer, li.name, deq);
    LinearReport rep;
    rep.layer = layer;
    rep.name = li.name;
    rep.out = li.out;
    rep.in = li.in;
    rep.dead_columns = r.dead_columns;
    rep.predicted_loss = r.predicted_loss;
    rep.seconds = r.seconds;
    rep.calibration_rows = acc.rows();
    if (opt.on_linear) opt.on_linear(rep, r.q);
    reports.push_back(rep);
  }
  const auto t_advance = clock::now();
  exec.run_layer(layer, {}, /*advance=*/true);
  tm.advance_forward = secs(t_advance, clock::now());
  if (opt.timings) {
    opt.timings->observe_forward += tm.observe_forward;
    opt.timings->hessian += tm.hessian;
    opt.timings->solve += tm.solve;
    opt.timings->advance_forward += tm.advance_forward;
  }
  if (opt.on_layer) opt.on_layer(layer, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return reports;
}

void run_gptq(CalibrationExecutor& exec, const GptqDriverOptions& opt) {
  for (int layer = 0; layer < exec.num_layers(); ++layer) gptq_layer(exec, layer, exec.linears(layer), opt);
}

}  // namespace g4c::quant

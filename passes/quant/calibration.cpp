#include "passes/quant/calibration.h"

#include <chrono>
#include <map>
#include <memory>

#include "models/error.h"

namespace g4c::quant {

void run_gptq(CalibrationExecutor& exec, const GptqDriverOptions& opt) {
  for (int layer = 0; layer < exec.num_layers(); ++layer) {
    auto t0 = std::chrono::steady_clock::now();
    const std::vector<LinearInfo> infos = exec.linears(layer);
    // One accumulator per distinct input; linear name -> accumulator.
    std::vector<std::unique_ptr<HessianAccumulator>> accs;
    std::map<std::string, HessianAccumulator*> by_linear;
    std::map<std::string, HessianAccumulator*> by_group;  // key: first linear of the group
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
          acc->add(x, rows, in, opt.threads);
        },
        /*advance=*/false);
    for (const LinearInfo& li : infos) {
      auto it = by_linear.find(li.name);
      if (it == by_linear.end())
        throw Error("gptq: layer " + std::to_string(layer) + " " + li.name + " saw no calibration input");
      const HessianAccumulator& acc = *it->second;
      if (acc.n() != li.in)
        throw Error("gptq: layer " + std::to_string(layer) + " " + li.name + " has in_features " +
                    std::to_string(li.in) + " but its observed input has width " + std::to_string(acc.n()));
      std::vector<float> w = exec.weight(layer, li.name);
      GptqResult r = gptq_quantize(w.data(), li.out, li.in, acc.hessian(), opt.gptq);
      std::vector<float> deq = r.q.dequantized();
      exec.set_weight(layer, li.name, deq);
      if (opt.on_linear) {
        LinearReport rep;
        rep.layer = layer;
        rep.name = li.name;
        rep.out = li.out;
        rep.in = li.in;
        rep.dead_columns = r.dead_columns;
        rep.predicted_loss = r.predicted_loss;
        rep.seconds = r.seconds;
        rep.calibration_rows = acc.rows();
        opt.on_linear(rep, r.q);
      }
    }
    exec.run_layer(layer, {}, /*advance=*/true);
    if (opt.on_layer) opt.on_layer(layer, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
}

}  // namespace g4c::quant

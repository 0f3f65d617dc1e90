// g4-gptq: GPTQ over the Linear ops of the g4 graph, layer by layer.
//
// The graph decides what is quantized: every g4.weight used as a Linear weight
// (by g4.dequant → g4.matmul, g4.linear or g4.gate_up), grouped by its `layer`. For
// each layer in order, the pass hands that layer's Linears to the calibration
// executor (passes/quant/calibration.h: run the layer on calibration activations
// recomputed through the already-quantized earlier layers, collect each Linear's
// input, H = 2XᵀX, GPTQ, write the fake-quantized weights back), then marks the
// weights #g4.int4<group_size, symmetric, padded_in, f16> and records the method in
// the module attribute `g4.quantization`. The quantized values reach the checkpoint
// through the executor's callbacks (`g4c quantize --method gptq`); run from `g4c opt`
// without an executor the pass fails, since it has no calibration data to run on.
#include <map>

#include "ir/G4Dialect.h"
#include "passes/GPTQ.h"
#include "passes/PassUtils.h"
#include "passes/Passes.h"

namespace g4c::passes {
#define GEN_PASS_DEF_GPTQ
#include "passes/Passes.h.inc"
}  // namespace g4c::passes

using namespace mlir;

namespace g4c::passes {
namespace {

// Symbol names of the weights that feed a Linear (matmul through dequant, linear, gate_up).
llvm::SmallVector<StringRef> linearWeightSymbols(ModuleOp module) {
  llvm::SmallVector<StringRef> out;
  llvm::StringSet<> seen;
  auto add = [&](FlatSymbolRefAttr s) {
    if (s && seen.insert(s.getValue()).second) out.push_back(s.getValue());
  };
  module.walk([&](Operation* op) {
    if (auto d = dyn_cast<g4::DequantOp>(op)) {
      for (Operation* user : d->getUsers())
        if (auto mm = dyn_cast<g4::MatmulOp>(user); mm && mm.getWeight() == d.getResult()) add(d.getWeightAttr());
    } else if (auto l = dyn_cast<g4::LinearOp>(op)) {
      add(l.getWeightAttr());
    } else if (auto gu = dyn_cast<g4::GateUpOp>(op)) {
      for (NamedAttribute a : gu->getAttrs())
        if (auto s = dyn_cast<FlatSymbolRefAttr>(a.getValue())) add(s);
    }
  });
  return out;
}

struct GptqPass : impl::GPTQBase<GptqPass> {
  using GPTQBase::GPTQBase;
  GptqPass(const GptqPassConfig& c) : config(c) {
    groupSize = c.driver.gptq.spec.group_size;
    symmetric = c.driver.gptq.spec.symmetric;
    damp = c.driver.gptq.damp;
    blockSize = c.driver.gptq.block_size;
    actOrder = c.driver.gptq.act_order;
    clip = c.driver.gptq.clip.enabled() ? "mse" : "none";
  }
  GptqPassConfig config;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (groupSize <= 0 || groupSize % 2 || blockSize <= 0 || damp < 0) {
      module.emitError("g4-gptq: group-size must be positive and even, block-size positive, damp ≥ 0");
      return signalPassFailure();
    }
    if (clip != "none" && clip != "mse") {
      module.emitError("g4-gptq: clip must be none or mse, got ") << clip;
      return signalPassFailure();
    }
    // Linear weights by layer, in graph order.
    std::map<int64_t, llvm::SmallVector<g4::WeightOp>> byLayer;
    for (StringRef name : linearWeightSymbols(module)) {
      auto w = SymbolTable::lookupNearestSymbolFrom<g4::WeightOp>(module, StringAttr::get(module.getContext(), name));
      if (!w) continue;
      if (!w.getLayer()) {
        w.emitError("g4-gptq: Linear weight without a `layer` attribute");
        return signalPassFailure();
      }
      if (w.getQuant()) {
        w.emitError("g4-gptq: weight is already quantized");
        return signalPassFailure();
      }
      byLayer[int64_t(*w.getLayer())].push_back(w);
    }
    if (!config.executor) {
      module.emitError("g4-gptq: no calibration executor; GPTQ runs through `g4c quantize --method gptq` "
                       "(found ")
          << byLayer.size() << " layers of Linear weights)";
      return signalPassFailure();
    }
    quant::GptqDriverOptions opt = config.driver;
    opt.gptq.spec = {int(groupSize), bool(symmetric)};
    opt.gptq.damp = damp;
    opt.gptq.block_size = int(blockSize);
    opt.gptq.act_order = actOrder;
    if (clip == "none") opt.gptq.clip = {};
    else if (!opt.gptq.clip.enabled()) opt.gptq.clip = quant::ClipSearch::mse();
    Builder b(module.getContext());
    try {
      for (auto& [layer, weights] : byLayer) {
        std::vector<quant::LinearInfo> which;
        for (g4::WeightOp w : weights) {
          const auto name = layerLocalName(w, layer);
          if (!name) {
            w.emitError("g4-gptq: weight of layer ") << layer << " is not named layers." << layer << ".…";
            return signalPassFailure();
          }
          auto t = w.getTensorType();
          which.push_back({*name, t.getDimSize(0), t.getDimSize(1)});
        }
        quant::gptq_layer(*config.executor, int(layer), which, opt);
        for (g4::WeightOp w : weights) {
          const int64_t in = w.getTensorType().getDimSize(1);
          const int64_t padded = (in + groupSize - 1) / groupSize * groupSize;
          w.setQuantAttr(g4::Int4QuantAttr::get(module.getContext(), groupSize, b.getBoolAttr(symmetric), padded,
                                                b.getF16Type()));
        }
      }
    } catch (const std::exception& e) {
      module.emitError("g4-gptq: ") << e.what();
      return signalPassFailure();
    }
    module->setAttr("g4.quantization",
                    b.getDictionaryAttr({b.getNamedAttr("method", b.getStringAttr("gptq")),
                                         b.getNamedAttr("group_size", b.getI64IntegerAttr(groupSize)),
                                         b.getNamedAttr("symmetric", b.getBoolAttr(symmetric)),
                                         b.getNamedAttr("damp", b.getF64FloatAttr(damp)),
                                         b.getNamedAttr("block_size", b.getI64IntegerAttr(blockSize)),
                                         b.getNamedAttr("act_order", b.getBoolAttr(actOrder)),
                                         b.getNamedAttr("clip", b.getStringAttr(clip)),
                                         b.getNamedAttr("quantease_sweeps",
                                                        b.getI64IntegerAttr(opt.gptq.quantease_sweeps))}));
  }
};

}  // namespace

std::unique_ptr<mlir::Pass> createGptqPass(const GptqPassConfig& config) {
  return std::make_unique<GptqPass>(config);
}

}  // namespace g4c::passes

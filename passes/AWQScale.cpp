// g4-awq-scale: activation-aware per-input-channel scales (AWQ), folded where the graph makes the
// fold exact.
//
// The graph decides where a scale can go (Passes.td lists the two exact patterns); the math and
// the layer driver are passes/quant/awq.h. Gemma 4's placement of its norms decides what is
// exact: the pre-norms (input_layernorm, pre_feedforward_layernorm) feed only the Linears of
// their block and carry a weight used as is (not 1 + w), so 1/s goes into that weight; the
// post-norms (post_attention_layernorm, post_feedforward_layernorm) and layer_scalar act on
// Linear outputs and the residual stream, never on a Linear input, so nothing folds into them;
// V = rms_head(v_raw) has no weight and o_proj reads attention over it, so o_proj keeps its
// input (k_eq_v layers have no v_proj either). Without an executor the pass fails, naming the
// sites it found, as g4-gptq does.
#include <map>

#include "ir/G4Dialect.h"
#include "models/dtype.h"
#include "models/error.h"
#include "passes/AWQScale.h"
#include "passes/PassUtils.h"
#include "passes/Passes.h"

namespace g4c::passes {
#define GEN_PASS_DEF_AWQSCALE
#include "passes/Passes.h.inc"
}  // namespace g4c::passes

using namespace mlir;

namespace g4c::passes {
namespace {

// A fold site of the graph; weights by symbol name.
struct GraphSite {
  int64_t layer = 0;
  g4::WeightOp producer;
  bool producerIsLinear = false;
  llvm::SmallVector<g4::WeightOp> linears;
};

g4::WeightOp lookupWeight(ModuleOp module, FlatSymbolRefAttr sym) {
  if (!sym) return {};
  return SymbolTable::lookupNearestSymbolFrom<g4::WeightOp>(module, sym.getAttr());
}

// A weight read by exactly one op of the module.
bool readOnce(ModuleOp module, g4::WeightOp w) {
  auto uses = SymbolTable::getSymbolUses(w.getSymNameAttr(), module);
  return uses && std::distance(uses->begin(), uses->end()) == 1;
}

// The unquantized, layer-tagged Linear weight that `mm` multiplies by (through g4.dequant), read
// nowhere else; null otherwise.
g4::WeightOp linearWeight(ModuleOp module, g4::MatmulOp mm) {
  auto dq = mm.getWeight().getDefiningOp<g4::DequantOp>();
  if (!dq || !dq->hasOneUse()) return {};
  g4::WeightOp w = lookupWeight(module, dq.getWeightAttr());
  if (!w || w.getQuant() || !w.getLayer() || w.getTensorType().getRank() != 2 || !readOnce(module, w)) return {};
  return w;
}

// The Linear weights of every user of `x`, when all of them are matmuls reading x as their
// input, of one layer; empty otherwise.
llvm::SmallVector<g4::WeightOp> linearReaders(ModuleOp module, Value x, int64_t layer) {
  llvm::SmallVector<g4::WeightOp> out;
  for (OpOperand& use : x.getUses()) {
    auto mm = dyn_cast<g4::MatmulOp>(use.getOwner());
    if (!mm || use.getOperandNumber() != 0) return {};
    g4::WeightOp w = linearWeight(module, mm);
    if (!w || int64_t(*w.getLayer()) != layer) return {};
    out.push_back(w);
  }
  return out;
}

// The exact sites in program order, and the Linear weights that are in none.
void findSites(ModuleOp module, std::vector<GraphSite>& sites, int64_t& unscaled) {
  llvm::DenseSet<Operation*> covered;
  module.walk([&](Operation* op) {
    if (auto n = dyn_cast<g4::RmsNormOp>(op)) {
      // RMSNorm over whole rows with its own weight: x·w per channel, w read by this op alone.
      g4::WeightOp w = lookupWeight(module, n.getWeightAttr());
      auto type = cast<RankedTensorType>(n.getResult().getType());
      if (!w || !w.getLayer() || !readOnce(module, w) || n.getGroup() != type.getDimSize(1)) return;
      if (w.getTensorType().getRank() != 1 || w.getTensorType().getDimSize(0) != n.getGroup()) return;
      auto readers = linearReaders(module, n.getResult(), int64_t(*w.getLayer()));
      if (readers.empty()) return;
      sites.push_back({int64_t(*w.getLayer()), w, false, readers});
    } else if (auto mul = dyn_cast<g4::MulOp>(op)) {
      // g ⊙ (y·Uᵀ): scaling U's rows by 1/s scales the product's channels by 1/s.
      if (mul.getLhs() == mul.getRhs()) return;
      for (Value u : {mul.getRhs(), mul.getLhs()}) {
        auto mm = u.getDefiningOp<g4::MatmulOp>();
        if (!mm || !u.hasOneUse()) continue;
        g4::WeightOp U = linearWeight(module, mm);
        if (!U) continue;
        auto readers = linearReaders(module, mul.getResult(), int64_t(*U.getLayer()));
        if (readers.empty()) continue;
        sites.push_back({int64_t(*U.getLayer()), U, true, readers});
        return;
      }
    }
  });
  for (const GraphSite& s : sites)
    for (g4::WeightOp w : s.linears) covered.insert(w.getOperation());
  unscaled = 0;
  module.walk([&](g4::MatmulOp mm) {
    if (g4::WeightOp w = linearWeight(module, mm); w && !covered.count(w.getOperation())) ++unscaled;
  });
}

// The storage rounding of a norm weight of element type `t` (the checkpoint keeps its dtype).
std::function<float(float)> storageRounding(Type t) {
  if (t.isBF16()) return [](float v) { return bf16_to_f32(f32_to_bf16(v)); };
  if (t.isF16()) return [](float v) { return f16_to_f32(f32_to_f16(v)); };
  return {};
}

struct AwqScalePass : impl::AWQScaleBase<AwqScalePass> {
  using AWQScaleBase::AWQScaleBase;
  AwqScalePass(const AwqPassConfig& c) : config(c) {
    groupSize = c.driver.awq.spec.group_size;
    symmetric = c.driver.awq.spec.symmetric;
    grid = c.driver.awq.grid;
    clip = c.driver.awq.clip.enabled() ? "mse" : "none";
  }
  AwqPassConfig config;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (groupSize <= 0 || groupSize % 2 || grid < 1) {
      module.emitError("g4-awq-scale: group-size must be positive and even, grid ≥ 1");
      return signalPassFailure();
    }
    if (clip != "none" && clip != "mse") {
      module.emitError("g4-awq-scale: clip must be none or mse, got ") << clip;
      return signalPassFailure();
    }
    std::vector<GraphSite> found;
    int64_t unscaled = 0;
    findSites(module, found, unscaled);
    int64_t normSites = 0;
    for (const GraphSite& s : found) normSites += !s.producerIsLinear;
    if (!config.executor) {
      module.emitError("g4-awq-scale: no calibration executor; AWQ runs through `g4c quantize --awq` (found ")
          << normSites << " RMSNorm folds, " << found.size() - normSites << " Linear folds, " << unscaled
          << " Linears without an exact fold)";
      return signalPassFailure();
    }
    quant::AwqDriverOptions opt = config.driver;
    opt.awq.spec = {int(groupSize), bool(symmetric)};
    opt.awq.grid = int(grid);
    if (clip == "none") opt.awq.clip = {};
    else if (!opt.awq.clip.enabled()) opt.awq.clip = quant::ClipSearch::mse();
    std::map<int64_t, std::vector<quant::AwqSite>> byLayer;
    for (GraphSite& s : found) {
      // Each weight by its name within the layer; false (after the error) when one is not named so.
      auto local = [&](g4::WeightOp w, std::string& out) {
        auto name = layerLocalName(w, s.layer);
        if (!name) {
          w.emitError("g4-awq-scale: weight of layer ") << s.layer << " is not named layers." << s.layer << ".…";
          return false;
        }
        out = *name;
        return true;
      };
      quant::AwqSite site;
      if (!local(s.producer, site.producer)) return signalPassFailure();
      site.producer_is_linear = s.producerIsLinear;
      if (!s.producerIsLinear) site.round = storageRounding(s.producer.getTensorType().getElementType());
      for (g4::WeightOp w : s.linears)
        if (!local(w, site.linears.emplace_back())) return signalPassFailure();
      byLayer[s.layer].push_back(std::move(site));
    }
    quant::CalibrationExecutor& exec = *config.executor;
    try {
      if (!byLayer.empty() && byLayer.rbegin()->first >= exec.num_layers())
        throw Error("the graph has Linears of layer " + std::to_string(byLayer.rbegin()->first) +
                    ", the executor " + std::to_string(exec.num_layers()) + " layers");
      // Every layer runs, folded or not: the next one's calibration inputs come from it.
      for (int layer = 0; layer < exec.num_layers(); ++layer) {
        auto it = byLayer.find(layer);
        if (it == byLayer.end()) exec.run_layer(layer, {}, /*advance=*/true);
        else quant::awq_layer(exec, layer, it->second, opt);
      }
      exec.restart();
    } catch (const std::exception& e) {
      module.emitError("g4-awq-scale: ") << e.what();
      return signalPassFailure();
    }
    Builder b(module.getContext());
    module->setAttr("g4.awq", b.getDictionaryAttr({b.getNamedAttr("group_size", b.getI64IntegerAttr(groupSize)),
                                                   b.getNamedAttr("symmetric", b.getBoolAttr(symmetric)),
                                                   b.getNamedAttr("grid", b.getI64IntegerAttr(grid)),
                                                   b.getNamedAttr("clip", b.getStringAttr(clip)),
                                                   b.getNamedAttr("norm_folds", b.getI64IntegerAttr(normSites)),
                                                   b.getNamedAttr("linear_folds",
                                                                  b.getI64IntegerAttr(found.size() - normSites)),
                                                   b.getNamedAttr("unscaled_linears", b.getI64IntegerAttr(unscaled))}));
  }
};

}  // namespace

std::unique_ptr<mlir::Pass> createAwqScalePass(const AwqPassConfig& config) {
  return std::make_unique<AwqScalePass>(config);
}

}  // namespace g4c::passes

// g4-quantize-rtn: marks every Linear weight of the g4 graph as INT4 group-quantized
// storage, #g4.int4<group_size, symmetric, padded_in = ceil(in/G)·G, scale f16>, and
// records the method in the module attribute `g4.quantization`.
//
// Round-to-nearest needs no calibration: its codes are a pure function of each
// weight (passes/quant/quantizer.h, written to the lab's INT4 checkpoint by
// `g4c quantize --method rtn`), so at graph level it is the decision of which
// weights are quantized and in which format — what codegen and the memory planner
// read. The embedding (tied LM head), norms and layer_scalar stay BF16.
#include "ir/G4Dialect.h"
#include "passes/PassUtils.h"
#include "passes/Passes.h"

namespace g4c::passes {
#define GEN_PASS_DEF_QUANTIZERTN
#include "passes/Passes.h.inc"
}  // namespace g4c::passes

using namespace mlir;

namespace g4c::passes {
namespace {

struct QuantizeRtnPass : impl::QuantizeRTNBase<QuantizeRtnPass> {
  using QuantizeRTNBase::QuantizeRTNBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (groupSize <= 0 || groupSize % 2) {
      module.emitError("g4-quantize-rtn: group-size must be positive and even, got ") << int64_t(groupSize);
      return signalPassFailure();
    }
    if (clip != "none" && clip != "mse") {
      module.emitError("g4-quantize-rtn: clip must be none or mse, got ") << clip;
      return signalPassFailure();
    }
    llvm::StringSet<> linear;
    module.walk([&](Operation* op) {
      if (auto d = dyn_cast<g4::DequantOp>(op)) {
        for (Operation* user : d->getUsers())
          if (auto mm = dyn_cast<g4::MatmulOp>(user); mm && mm.getWeight() == d.getResult())
            linear.insert(d.getWeight());
      } else if (auto l = dyn_cast<g4::LinearOp>(op)) {
        linear.insert(l.getWeight());
      } else if (isa<g4::GateUpOp>(op)) {
        for (NamedAttribute a : op->getAttrs())
          if (auto s = dyn_cast<FlatSymbolRefAttr>(a.getValue())) linear.insert(s.getValue());
      }
    });
    Builder b(module.getContext());
    int64_t count = 0;
    for (g4::WeightOp w : module.getOps<g4::WeightOp>()) {
      if (!linear.contains(w.getSymName()) || w.getQuant()) continue;
      auto t = w.getTensorType();
      if (t.getRank() != 2) continue;
      const int64_t in = t.getDimSize(1);
      w.setQuantAttr(g4::Int4QuantAttr::get(module.getContext(), groupSize, b.getBoolAttr(symmetric),
                                            (in + groupSize - 1) / groupSize * groupSize, b.getF16Type()));
      ++count;
    }
    module->setAttr("g4.quantization",
                    b.getDictionaryAttr({b.getNamedAttr("method", b.getStringAttr("rtn")),
                                         b.getNamedAttr("group_size", b.getI64IntegerAttr(groupSize)),
                                         b.getNamedAttr("symmetric", b.getBoolAttr(symmetric)),
                                         b.getNamedAttr("clip", b.getStringAttr(clip)),
                                         b.getNamedAttr("linears", b.getI64IntegerAttr(count))}));
  }
};

}  // namespace
}  // namespace g4c::passes

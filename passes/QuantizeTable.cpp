// g4-quantize-table: the embedding / LM head table as int8 codes with one fp32 scale per row.
//
// A graph-level storage decision, as g4-quantize-rtn's: the runtime quantizes the checkpoint's
// dense table when it loads it (runtime/int8_rows.h), so the pass only marks the weight; codegen
// writes it as plan WeightFormat Int8Rows and the planners count its stored bytes.
#include "passes/PassUtils.h"
#include "passes/Passes.h"

namespace g4c::passes {
#define GEN_PASS_DEF_QUANTIZETABLE
#include "passes/Passes.h.inc"
}  // namespace g4c::passes

using namespace mlir;
using namespace g4c::g4;

namespace g4c::passes {
namespace {

struct QuantizeTablePass : impl::QuantizeTableBase<QuantizeTablePass> {
  using QuantizeTableBase::QuantizeTableBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (dtype != "bf16" && dtype != "int8") {
      module.emitError("g4-quantize-table: dtype must be bf16 or int8, got ") << dtype;
      return signalPassFailure();
    }
    if (dtype == "bf16") return;
    llvm::StringSet<> tables;
    module.walk([&](Operation* op) {
      if (auto e = dyn_cast<EmbedOp>(op)) tables.insert(e.getTable());
      if (auto l = dyn_cast<LogitsOp>(op)) tables.insert(l.getTable());
      if (auto h = dyn_cast<LMHeadOp>(op)) tables.insert(h.getTable());
    });
    for (WeightOp w : module.getOps<WeightOp>()) {
      if (!tables.contains(w.getSymName())) continue;
      if (w.getQuant() || w.getTensorType().getRank() != 2) {
        w.emitError("g4-quantize-table: the table must be a dense 2-D weight");
        return signalPassFailure();
      }
      w.setInt8Rows(true);
    }
  }
};

}  // namespace
}  // namespace g4c::passes

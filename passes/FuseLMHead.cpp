// g4-fuse-lm-head: softcap?(logits(rms_norm(h, @norm), @table)) -> g4.lm_head.
#include "passes/PassUtils.h"
#include "passes/Passes.h"

namespace g4c::passes {
#define GEN_PASS_DEF_FUSELMHEAD
#include "passes/Passes.h.inc"
}  // namespace g4c::passes

using namespace mlir;
using namespace g4c::g4;

namespace g4c::passes {
namespace {

struct FuseLMHeadPass : impl::FuseLMHeadBase<FuseLMHeadPass> {
  void runOnOperation() override {
    SmallVector<LogitsOp> heads;
    getOperation().walk([&](LogitsOp op) { heads.push_back(op); });
    for (LogitsOp logits : heads) {
      auto norm = logits.getInput().getDefiningOp<RmsNormOp>();
      if (!norm || !norm.getWeightAttr() || !norm->hasOneUse() ||
          norm.getGroup() != cast<RankedTensorType>(norm.getType()).getShape().back())
        continue;
      // A single softcap user is folded in; otherwise softcap = 0 (none).
      SoftcapOp cap;
      if (logits->hasOneUse()) cap = dyn_cast<SoftcapOp>(*logits->getUsers().begin());
      Operation* last = cap ? cap.getOperation() : logits.getOperation();
      OpBuilder b(last);
      auto head = LMHeadOp::create(b, logits.getLoc(), logits.getType(), norm.getInput(), norm.getWeightAttr(),
                                   logits.getTableAttr(), norm.getEpsAttr(),
                                   cap ? cap.getCapAttr() : b.getF64FloatAttr(0.0));
      last->getResult(0).replaceAllUsesWith(head.getResult());
      if (cap) cap.erase();
      logits.erase();
      norm.erase();
    }
  }
};

}  // namespace
}  // namespace g4c::passes

// g4-fuse-attention-mask: kv_read -> qk -> mask -> softmax -> pv -> one g4.attention.
#include "passes/PassUtils.h"
#include "passes/Passes.h"

namespace g4c::passes {
#define GEN_PASS_DEF_FUSEATTENTIONMASK
#include "passes/Passes.h.inc"
}  // namespace g4c::passes

using namespace mlir;
using namespace g4c::g4;

namespace g4c::passes {
namespace {

struct FuseAttentionMaskPass : impl::FuseAttentionMaskBase<FuseAttentionMaskPass> {
  void runOnOperation() override {
    SmallVector<PVOp> pvs;
    getOperation().walk([&](PVOp op) { pvs.push_back(op); });
    for (PVOp pv : pvs) {
      // Match pv(softmax(mask(qk(q, keys), pos)), values) with keys/values of one kv_read.
      auto softmax = pv.getProbs().getDefiningOp<SoftmaxOp>();
      auto mask = softmax ? softmax.getInput().getDefiningOp<MaskOp>() : MaskOp();
      auto qk = mask ? mask.getScores().getDefiningOp<QKOp>() : QKOp();
      if (!qk) continue;
      auto read = qk.getKey().getDefiningOp<KVReadOp>();
      if (!read || pv.getValue() != read.getValue() || qk.getKey() != read.getKey()) continue;
      if (!softmax->hasOneUse() || !mask->hasOneUse() || !qk->hasOneUse()) continue;
      if (qk.getNumHeads() != pv.getNumHeads() || qk.getNumKvHeads() != pv.getNumKvHeads() ||
          qk.getHeadDim() != pv.getHeadDim()) {
        pv.emitOpError("head geometry differs from its qk op");
        return signalPassFailure();
      }
      OpBuilder b(pv);
      // Gemma 4 attention uses scale 1.0: the q/k norms replace 1/sqrt(head_dim).
      auto attn = AttentionOp::create(b, pv.getLoc(), pv.getType(), qk.getQuery(), mask.getPositions(),
                                      read.getLayerAttr(), mask.getWindowAttr(), pv.getNumHeadsAttr(),
                                      pv.getNumKvHeadsAttr(), pv.getHeadDimAttr(), b.getF64FloatAttr(1.0));
      copyLayer(pv, attn);
      pv.replaceAllUsesWith(attn.getResult());
      pv.erase();
      softmax.erase();
      mask.erase();
      qk.erase();
      if (read->use_empty()) read.erase();
    }
  }
};

}  // namespace
}  // namespace g4c::passes

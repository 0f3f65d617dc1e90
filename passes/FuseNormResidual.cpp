// g4-fuse-norm-residual: rms?(scale?(add(h, rms(x, @post)), @s), @next) -> g4.norm_residual.
#include "passes/PassUtils.h"
#include "passes/Passes.h"

namespace g4c::passes {
#define GEN_PASS_DEF_FUSENORMRESIDUAL
#include "passes/Passes.h.inc"
}  // namespace g4c::passes

using namespace mlir;
using namespace g4c::g4;

namespace g4c::passes {
namespace {

// A whole-row RMSNorm with a scale (the post- and pre-norms of the residual stream).
bool isRowNorm(RmsNormOp op) {
  return op && op.getWeightAttr() && op.getGroup() == cast<RankedTensorType>(op.getType()).getShape().back();
}

struct FuseNormResidualPass : impl::FuseNormResidualBase<FuseNormResidualPass> {
  void runOnOperation() override {
    SmallVector<AddOp> adds;
    getOperation().walk([&](AddOp op) { adds.push_back(op); });
    for (AddOp add : adds) {
      // The post-norm may be either operand of the residual add.
      Value residual = add.getLhs();
      auto post = add.getRhs().getDefiningOp<RmsNormOp>();
      if (!isRowNorm(post)) {
        residual = add.getRhs();
        post = add.getLhs().getDefiningOp<RmsNormOp>();
      }
      if (!isRowNorm(post) || !post->hasOneUse()) continue;
      // Optional layer_scalar: add must feed only the scale.
      Value stream = add.getResult();
      ScaleOp scale;
      if (add->hasOneUse()) scale = dyn_cast<ScaleOp>(*add->getUsers().begin());
      if (scale) stream = scale.getResult();
      // The next pre-norm: exactly one whole-row norm among the stream's users.
      RmsNormOp next;
      for (Operation* user : stream.getUsers()) {
        auto norm = dyn_cast<RmsNormOp>(user);
        if (!isRowNorm(norm) || norm.getInput() != stream) continue;
        if (next) { next = RmsNormOp(); break; }
        next = norm;
      }
      // The last layer has no next pre-norm (the final norm lives in g4.lm_head).
      if (next && next.getEps() != post.getEps()) next = RmsNormOp();
      // Create the fused op where the stream is produced; everything it reads dominates that point.
      Operation* anchor = scale ? scale.getOperation() : add.getOperation();
      OpBuilder b(anchor);
      auto fused = NormResidualOp::create(b, add.getLoc(), add.getType(), next ? add.getType() : Type(), residual,
                                          post.getInput(), post.getWeightAttr(),
                                          next ? next.getWeightAttr() : FlatSymbolRefAttr(),
                                          scale ? scale.getScalarAttr() : FlatSymbolRefAttr(), post.getEpsAttr());
      copyLayer(post, fused);
      if (next) {
        next.replaceAllUsesWith(fused.getNormed());
        next.erase();
      }
      stream.replaceAllUsesWith(fused.getNewResidual());
      if (scale) scale.erase();
      add.erase();
      post.erase();
    }
  }
};

}  // namespace
}  // namespace g4c::passes

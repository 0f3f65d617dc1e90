// g4-fuse-qk-norm-rope: rope(rms(q_raw, @q_norm)), kv_write(rope(rms(k_raw, @k_norm)),
// rms(v_raw)) -> one g4.qk_norm_rope_kv_write returning q.
#include "passes/PassUtils.h"
#include "passes/Passes.h"

namespace g4c::passes {
#define GEN_PASS_DEF_FUSEQKNORMROPE
#include "passes/Passes.h.inc"
}  // namespace g4c::passes

using namespace mlir;
using namespace g4c::g4;

namespace g4c::passes {
namespace {

// rope(rms_norm(raw, @w)) with a per-head norm of head_dim features.
struct NormRope {
  RmsNormOp norm;
  RopeOp rope;
};
std::optional<NormRope> matchNormRope(Value v) {
  auto rope = v.getDefiningOp<RopeOp>();
  auto norm = rope ? rope.getInput().getDefiningOp<RmsNormOp>() : RmsNormOp();
  if (!norm || !norm.getWeightAttr() || norm.getGroup() != rope.getHeadDim()) return std::nullopt;
  return NormRope{norm, rope};
}

struct FuseQKNormRopePass : impl::FuseQKNormRopeBase<FuseQKNormRopePass> {
  void runOnOperation() override {
    llvm::DenseMap<int64_t, AttentionOp> attentionOf;
    getOperation().walk([&](AttentionOp op) { attentionOf[op.getLayer()] = op; });
    SmallVector<KVWriteOp> writes;
    getOperation().walk([&](KVWriteOp op) { writes.push_back(op); });
    for (KVWriteOp write : writes) {
      AttentionOp attn = attentionOf.lookup(write.getLayer());
      if (!attn) continue;
      auto q = matchNormRope(attn.getQuery());
      auto k = matchNormRope(write.getKey());
      auto v = write.getValue().getDefiningOp<RmsNormOp>();
      if (!q || !k || !v || v.getWeightAttr()) continue;
      const int64_t d = attn.getHeadDim();
      if (k->rope.getHeadDim() != d || q->rope.getHeadDim() != d || v.getGroup() != d) continue;
      // One set of rope parameters and one eps for q, k and v.
      if (q->rope.getRotaryPairs() != k->rope.getRotaryPairs() || q->rope.getTheta() != k->rope.getTheta() ||
          q->norm.getEps() != k->norm.getEps() || v.getEps() != k->norm.getEps())
        continue;
      if (q->rope.getPositions() != write.getPositions() || k->rope.getPositions() != write.getPositions()) continue;
      if (!q->rope->hasOneUse() || !q->norm->hasOneUse()) continue;

      OpBuilder b(write);
      auto fused = QKNormRopeKVWriteOp::create(
          b, write.getLoc(), attn.getQuery().getType(), q->norm.getInput(), k->norm.getInput(), v.getInput(),
          write.getPositions(), q->norm.getWeightAttr(), k->norm.getWeightAttr(), k->norm.getEpsAttr(),
          attn.getNumHeadsAttr(), attn.getNumKvHeadsAttr(), attn.getHeadDimAttr(), k->rope.getRotaryPairsAttr(),
          k->rope.getThetaAttr(), write.getLayerAttr(), write.getWindowAttr());
      copyLayer(write, fused);
      attn.getQueryMutable().assign(fused.getResult());
      write.erase();
      for (Operation* op : {q->rope.getOperation(), q->norm.getOperation(), k->rope.getOperation(),
                            k->norm.getOperation(), v.getOperation()})
        if (op->use_empty()) op->erase();
    }
  }
};

}  // namespace
}  // namespace g4c::passes

// g4-fuse-dequant-gemm: matmul(x, dequant @w) -> linear(x, @w), and the MLP's
// mul(gelu_tanh(linear(m, @gate)), linear(m, @up)) -> gate_up(m, @gate, @up).
#include "passes/PassUtils.h"
#include "passes/Passes.h"

namespace g4c::passes {
#define GEN_PASS_DEF_FUSEDEQUANTGEMM
#include "passes/Passes.h.inc"
}  // namespace g4c::passes

using namespace mlir;
using namespace g4c::g4;

namespace g4c::passes {
namespace {

struct FuseDequantGemmPass : impl::FuseDequantGemmBase<FuseDequantGemmPass> {
  using FuseDequantGemmBase::FuseDequantGemmBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    // 1. matmul over a dequant -> linear. The dequant is erased once unused.
    SmallVector<MatmulOp> matmuls;
    module.walk([&](MatmulOp op) { matmuls.push_back(op); });
    for (MatmulOp mm : matmuls) {
      auto dq = mm.getWeight().getDefiningOp<DequantOp>();
      if (!dq) continue;
      OpBuilder b(mm);
      auto linear = LinearOp::create(b, mm.getLoc(), mm.getType(), mm.getInput(), dq.getWeightAttr());
      copyLayer(mm, linear);
      mm.replaceAllUsesWith(linear.getResult());
      mm.erase();
      if (dq->use_empty()) dq.erase();
    }
    if (!fuseGateUp) return;
    // 2. mul(gelu_tanh(linear(m, @g)), linear(m, @u)) -> gate_up(m, @g, @u).
    SmallVector<MulOp> muls;
    module.walk([&](MulOp op) { muls.push_back(op); });
    for (MulOp mul : muls) {
      auto gelu = mul.getLhs().getDefiningOp<GeluTanhOp>();
      if (!gelu || !gelu->hasOneUse()) continue;
      auto gate = gelu.getInput().getDefiningOp<LinearOp>();
      auto up = mul.getRhs().getDefiningOp<LinearOp>();
      if (!gate || !up || gate.getInput() != up.getInput()) continue;
      if (!gate->hasOneUse() || !up->hasOneUse()) continue;
      OpBuilder b(mul);
      auto fused = GateUpOp::create(b, mul.getLoc(), mul.getType(), gate.getInput(), gate.getWeightAttr(),
                                    up.getWeightAttr());
      copyLayer(mul, fused);
      mul.replaceAllUsesWith(fused.getResult());
      mul.erase();
      gelu.erase();
      gate.erase();
      up.erase();
    }
  }
};

}  // namespace
}  // namespace g4c::passes

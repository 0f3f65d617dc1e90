// g4-plan-buckets: decode batch-size buckets and prefill token buckets for
// CUDA Graph capture (one graph per graph bucket; a step is padded up to its bucket).
#include "passes/PassUtils.h"
#include "passes/Passes.h"

namespace g4c::passes {
#define GEN_PASS_DEF_PLANBUCKETS
#include "passes/Passes.h.inc"
}  // namespace g4c::passes

using namespace mlir;

namespace g4c::passes {
namespace {

// Powers of two in [lo, hi), then hi itself: every size in [1, hi] pads to at
// most twice its size (beyond lo), and the largest step needs no padding.
SmallVector<int64_t> powersUpTo(int64_t lo, int64_t hi) {
  SmallVector<int64_t> out;
  for (int64_t n = lo; n < hi; n *= 2) out.push_back(n);
  out.push_back(hi);
  return out;
}

struct PlanBucketsPass : impl::PlanBucketsBase<PlanBucketsPass> {
  using PlanBucketsBase::PlanBucketsBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (maxSeqs <= 0 || maxChunk <= 0 || minPrefill <= 0 || graphMaxTokens < 0) {
      module.emitError("g4-plan-buckets: max-seqs, max-chunk and min-prefill must be positive, graph-max-tokens not negative");
      return signalPassFailure();
    }
    Builder b(module.getContext());
    auto decode = powersUpTo(1, maxSeqs);
    auto prefill = powersUpTo(std::min<int64_t>(minPrefill, maxChunk), maxChunk);
    module->setAttr("g4.buckets", b.getDictionaryAttr({
        b.getNamedAttr("decode", b.getDenseI64ArrayAttr(decode)),
        b.getNamedAttr("prefill", b.getDenseI64ArrayAttr(prefill)),
        b.getNamedAttr("max_seqs", b.getI64IntegerAttr(maxSeqs)),
        b.getNamedAttr("graph_max_tokens", b.getI64IntegerAttr(graphMaxTokens)),
    }));
  }
};

}  // namespace
}  // namespace g4c::passes

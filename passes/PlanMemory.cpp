// g4-plan-memory: one activation arena per bucket, offsets by liveness.
//
// Every tensor value of the decoder function (arguments and op results) gets a
// byte range in the arena for each bucket; two values share bytes only if
// their live ranges [definition, last use] do not overlap. Packing is the
// classic greedy: largest first, lowest offset that fits (offsets aligned).
#include <algorithm>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "passes/PassUtils.h"
#include "passes/Passes.h"

namespace g4c::passes {
#define GEN_PASS_DEF_PLANMEMORY
#include "passes/Passes.h.inc"
}  // namespace g4c::passes

using namespace mlir;
using namespace g4c::g4;

namespace g4c::passes {
namespace {

struct Bucket {
  int64_t tokens, seqs;
  bool decode = false;  // a decode bucket (g4.buckets decode) rather than a prefill one
};

struct LiveValue {
  Value value;
  int64_t begin, end;  // op indices, inclusive
  int64_t bytes = 0;   // for the bucket being packed (aligned)
  int64_t offset = 0;
};

// Values with one row per sequence rather than per token: the logits and
// whatever elementwise ops (softcap, ...) or samplers follow them.
bool perSequence(Value v) {
  Operation* def = v.getDefiningOp();
  if (!def) return false;
  if (isa<LogitsOp, LMHeadOp>(def)) return true;
  if (isa<ArgmaxOp, SampleOp, SoftcapOp, ScaleOp, GeluTanhOp, AddOp, MulOp>(def))
    return perSequence(def->getOperand(0));
  return false;
}

int64_t alignUp(int64_t n, int64_t a) { return (n + a - 1) / a * a; }

struct PlanMemoryPass : impl::PlanMemoryBase<PlanMemoryPass> {
  using PlanMemoryBase::PlanMemoryBase;

  int64_t sizeOf(Value v, const Bucket& bucket) {
    auto type = dyn_cast<RankedTensorType>(v.getType());
    if (!type) return 0;
    int64_t n = std::max<int64_t>(1, type.getElementTypeBitWidth() / 8);
    bool firstDynamic = true;
    for (int64_t d : type.getShape()) {
      if (d != ShapedType::kDynamic) {
        n *= d;
      } else if (firstDynamic) {
        n *= perSequence(v) ? bucket.seqs : bucket.tokens;
        firstDynamic = false;
      } else {
        n *= maxSeqLen;  // key dimension of unfused attention scores
      }
    }
    return alignUp(n, alignment);
  }

  // Greedy packing; returns the peak (arena size).
  int64_t pack(SmallVector<LiveValue>& values) {
    SmallVector<LiveValue*> order;
    for (auto& v : values) order.push_back(&v);
    std::stable_sort(order.begin(), order.end(), [](LiveValue* a, LiveValue* b) { return a->bytes > b->bytes; });
    SmallVector<LiveValue*> placed;
    int64_t peak = 0;
    for (LiveValue* v : order) {
      SmallVector<std::pair<int64_t, int64_t>> busy;  // [offset, end) of overlapping live values
      for (LiveValue* p : placed)
        if (p->begin <= v->end && v->begin <= p->end) busy.push_back({p->offset, p->offset + p->bytes});
      llvm::sort(busy);
      int64_t offset = 0;
      for (auto [lo, hi] : busy) {
        if (offset + v->bytes <= lo) break;
        offset = std::max(offset, hi);
      }
      v->offset = offset;
      peak = std::max(peak, offset + v->bytes);
      placed.push_back(v);
    }
    return peak;
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (alignment <= 0 || tokens <= 0 || maxSeqLen <= 0) {
      module.emitError("g4-plan-memory: tokens, max-seq-len and alignment must be positive");
      return signalPassFailure();
    }
    auto funcs = llvm::to_vector(module.getOps<func::FuncOp>());
    if (funcs.size() != 1) {
      module.emitError() << "g4-plan-memory expects exactly one decoder function, found " << funcs.size();
      return signalPassFailure();
    }
    func::FuncOp fn = funcs.front();
    if (!fn.getBody().hasOneBlock()) {
      fn.emitError("g4-plan-memory expects a single-block function");
      return signalPassFailure();
    }

    // Buckets: (tokens, sequences) of each captured step shape.
    SmallVector<Bucket> buckets;
    if (auto dict = module->getAttrOfType<DictionaryAttr>("g4.buckets")) {
      const int64_t maxSeqs = i64Attr(dict, "max_seqs", 1);
      if (auto decode = dict.getAs<DenseI64ArrayAttr>("decode"))
        for (int64_t n : decode.asArrayRef()) buckets.push_back({n, n, true});
      if (auto prefill = dict.getAs<DenseI64ArrayAttr>("prefill"))
        for (int64_t n : prefill.asArrayRef()) buckets.push_back({n, std::min(n, maxSeqs)});
    }
    if (buckets.empty()) buckets.push_back({tokens, 1});

    // Live ranges over the op order; arguments are defined before op 0.
    Block& body = fn.getBody().front();
    llvm::DenseMap<Operation*, int64_t> index;
    int64_t i = 0;
    for (Operation& op : body) index[&op] = i++;
    SmallVector<LiveValue> values;
    auto addValue = [&](Value v, int64_t begin) {
      if (!isa<RankedTensorType>(v.getType())) return;
      int64_t end = begin;
      for (Operation* user : v.getUsers()) end = std::max(end, index.lookup(body.findAncestorOpInBlock(*user)));
      values.push_back({v, begin, end});
    };
    for (BlockArgument arg : body.getArguments()) addValue(arg, -1);
    for (Operation& op : body)
      for (Value r : op.getResults()) addValue(r, index[&op]);

    // offsets[value][bucket]
    llvm::DenseMap<Value, SmallVector<int64_t>> offsets;
    SmallVector<int64_t> peaks, tokenList, seqList, decodeList;
    for (const Bucket& bucket : buckets) {
      for (auto& v : values) v.bytes = sizeOf(v.value, bucket);
      peaks.push_back(pack(values));
      tokenList.push_back(bucket.tokens);
      seqList.push_back(bucket.seqs);
      decodeList.push_back(bucket.decode ? 1 : 0);
      for (auto& v : values) offsets[v.value].push_back(v.offset);
    }

    Builder b(module.getContext());
    for (Operation& op : body) {
      if (op.getNumResults() == 0) continue;
      SmallVector<Attribute> perResult;
      for (Value r : op.getResults()) perResult.push_back(b.getDenseI64ArrayAttr(offsets.lookup(r)));
      op.setAttr("g4.arena", b.getArrayAttr(perResult));
    }
    SmallVector<Attribute> perArg;
    for (BlockArgument arg : body.getArguments()) perArg.push_back(b.getDenseI64ArrayAttr(offsets.lookup(arg)));
    fn->setAttr("g4.arena_args", b.getArrayAttr(perArg));
    module->setAttr("g4.activations", b.getDictionaryAttr({
        b.getNamedAttr("tokens", b.getDenseI64ArrayAttr(tokenList)),
        b.getNamedAttr("seqs", b.getDenseI64ArrayAttr(seqList)),
        b.getNamedAttr("decode", b.getDenseI64ArrayAttr(decodeList)),
        b.getNamedAttr("peak_bytes", b.getDenseI64ArrayAttr(peaks)),
        b.getNamedAttr("max_peak_bytes", b.getI64IntegerAttr(*llvm::max_element(peaks))),
        b.getNamedAttr("alignment", b.getI64IntegerAttr(alignment)),
    }));
  }
};

}  // namespace
}  // namespace g4c::passes

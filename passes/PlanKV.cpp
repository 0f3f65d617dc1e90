// g4-plan-kv: one g4.kv_buffer per layer (paged blocks, or rings for sliding
// layers).
#include <algorithm>
#include "passes/PassUtils.h"
#include "passes/Passes.h"

namespace g4c::passes {
#define GEN_PASS_DEF_PLANKV
#include "passes/Passes.h.inc"
}  // namespace g4c::passes

using namespace mlir;
using namespace g4c::g4;

namespace g4c::passes {
namespace {

constexpr int64_t kBf16Bytes = 2;    // auto and bf16: BF16 elements
constexpr int64_t kFp8ScaleBytes = 4;  // fp8: an fp32 scale per (token, kv head) row

struct PlanKVPass : impl::PlanKVBase<PlanKVPass> {
  using PlanKVBase::PlanKVBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (blockSize <= 0 || maxChunk <= 0 || maxSeqs <= 0 || maxSeqLen <= 0) {
      module.emitError("g4-plan-kv: block-size, max-chunk, max-seqs and max-seq-len must be positive");
      return signalPassFailure();
    }
    if (slidingKv != "ring" && slidingKv != "paged" && slidingKv != "auto") {
      module.emitError("g4-plan-kv: sliding-kv must be ring, paged or auto, not '") << slidingKv << "'";
      return signalPassFailure();
    }
    if (kvDtype != "auto" && kvDtype != "bf16" && kvDtype != "fp8") {
      module.emitError("g4-plan-kv: kv-dtype must be auto, bf16 or fp8, not '") << kvDtype << "'";
      return signalPassFailure();
    }
    // Attention op of each layer (fused form); the unfused form has none.
    llvm::DenseMap<int64_t, AttentionOp> attentionOf;
    module.walk([&](AttentionOp op) { attentionOf[op.getLayer()] = op; });

    SmallVector<KVWriteOp> writes;
    module.walk([&](KVWriteOp op) { writes.push_back(op); });
    // Remove buffers of an earlier run so the pass is idempotent.
    for (auto old : llvm::make_early_inc_range(module.getOps<KVBufferOp>())) old.erase();

    OpBuilder b(module.getBodyRegion());
    b.setInsertionPointToStart(module.getBody());
    int64_t slidingBytes = 0, fullBytes = 0, totalPool = 0, windowPool = 0, fullPool = 0;
    llvm::DenseSet<int64_t> seen;
    for (KVWriteOp write : writes) {
      const int64_t layer = write.getLayer();
      if (!seen.insert(layer).second) {
        write.emitOpError() << "layer " << layer << " has more than one kv_write";
        return signalPassFailure();
      }
      AttentionOp attn = attentionOf.lookup(layer);
      int64_t headDim = 0, kvHeads = 0;
      if (attn) {
        headDim = attn.getHeadDim();
        kvHeads = attn.getNumKvHeads();
      } else {
        // Unfused graph: geometry from the kv_read consumers' qk op.
        module.walk([&](QKOp qk) {
          if (auto read = qk.getKey().getDefiningOp<KVReadOp>(); read && read.getLayer() == layer) {
            headDim = qk.getHeadDim();
            kvHeads = qk.getNumKvHeads();
          }
        });
      }
      const int64_t kvFeatures = cast<RankedTensorType>(write.getValue().getType()).getShape().back();
      if (headDim == 0) {
        write.emitOpError() << "no attention of layer " << layer << " reads this cache";
        return signalPassFailure();
      }
      if (kvHeads * headDim != kvFeatures) {
        write.emitOpError() << "value has " << kvFeatures << " features but the attention expects " << kvHeads
                            << " x " << headDim;
        return signalPassFailure();
      }
      // K and V of a token: BF16 elements, or FP8 codes and a scale per head.
      const int64_t perToken =
          kvDtype == "fp8" ? 2 * (kvFeatures + kvHeads * kFp8ScaleBytes) : 2 * kvFeatures * kBf16Bytes;
      // A chunk of C new tokens still needs the W-1 keys before its first token.
      const int64_t ringCapacity = write.getWindow() - 1 + maxChunk;
      const bool sliding = write.getWindow() > 0 && slidingKv == "ring";
      auto name = b.getStringAttr("kv.layer" + std::to_string(layer));
      KVBufferOp buffer;
      if (sliding) {
        const int64_t capacity = ringCapacity;
        const int64_t pool = capacity * perToken * maxSeqs;
        buffer = KVBufferOp::create(b, write.getLoc(), name, b.getI64IntegerAttr(layer), b.getStringAttr("ring"),
                                    b.getI64IntegerAttr(kvHeads), b.getI64IntegerAttr(headDim),
                                    b.getI64IntegerAttr(perToken), b.getI64IntegerAttr(pool),
                                    b.getI64IntegerAttr(capacity), b.getI64IntegerAttr(maxSeqs), IntegerAttr(),
                                    IntegerAttr(), IntegerAttr());
        slidingBytes += perToken;
        totalPool += pool;
      } else {
        // A full layer holds every block of a sequence. A paged sliding layer's blocks come from
        // the window pool, which takes them back as they leave the window: a sequence holds at
        // most the blocks spanning one chunk and the W - 1 keys before it, one more than they
        // fill. The runtime sizes both pools from what the budget leaves and admits requests by
        // their length; this is the plan's reservation for max-seqs sequences.
        const int64_t seqBlocks = (maxSeqLen + blockSize - 1) / blockSize;
        const int64_t windowBlocks = (write.getWindow() - 1 + maxChunk + blockSize - 1) / blockSize + 1;
        const int64_t blocks = maxSeqs * (write.getWindow() > 0 ? std::min(seqBlocks, windowBlocks) : seqBlocks);
        const int64_t pool = blocks * blockSize * perToken;
        buffer = KVBufferOp::create(b, write.getLoc(), name, b.getI64IntegerAttr(layer), b.getStringAttr("paged"),
                                    b.getI64IntegerAttr(kvHeads), b.getI64IntegerAttr(headDim),
                                    b.getI64IntegerAttr(perToken), b.getI64IntegerAttr(pool), IntegerAttr(),
                                    IntegerAttr(), b.getI64IntegerAttr(blockSize), b.getI64IntegerAttr(blocks),
                                    write.getWindow() > 0 ? b.getI64IntegerAttr(write.getWindow()) : IntegerAttr());
        (write.getWindow() > 0 ? slidingBytes : fullBytes) += perToken;
        (write.getWindow() > 0 ? windowPool : fullPool) += pool;
        totalPool += pool;
      }
      (void)buffer;
    }
    SmallVector<NamedAttribute> kvAttrs = {
        b.getNamedAttr("sliding_bytes_per_token", b.getI64IntegerAttr(slidingBytes)),
        b.getNamedAttr("full_bytes_per_token", b.getI64IntegerAttr(fullBytes)),
        b.getNamedAttr("pool_bytes", b.getI64IntegerAttr(totalPool)),
        b.getNamedAttr("window_pool_bytes", b.getI64IntegerAttr(windowPool)),
        b.getNamedAttr("full_pool_bytes", b.getI64IntegerAttr(fullPool)),
        b.getNamedAttr("block_size", b.getI64IntegerAttr(blockSize)),
        b.getNamedAttr("max_chunk", b.getI64IntegerAttr(maxChunk)),
        b.getNamedAttr("max_seqs", b.getI64IntegerAttr(maxSeqs)),
        b.getNamedAttr("max_seq_len", b.getI64IntegerAttr(maxSeqLen)),
    };
    if (kvDtype != "auto") kvAttrs.push_back(b.getNamedAttr("kv_dtype", b.getStringAttr(kvDtype)));
    module->setAttr("g4.kv", b.getDictionaryAttr(kvAttrs));
  }
};

}  // namespace
}  // namespace g4c::passes

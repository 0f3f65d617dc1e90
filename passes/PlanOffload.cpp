// g4-plan-offload: decide which weights stay resident on the device and which
// layers stream from pinned host memory, under a device budget.
#include <map>
#include <set>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "passes/MemoryTable.h"
#include "passes/PassUtils.h"
#include "passes/Passes.h"

namespace g4c::passes {
#define GEN_PASS_DEF_PLANOFFLOAD
#include "passes/Passes.h.inc"
}  // namespace g4c::passes

using namespace mlir;
using namespace g4c::g4;

namespace g4c::passes {
namespace {

constexpr int64_t kMiB = 1 << 20;

struct PlanOffloadPass : impl::PlanOffloadBase<PlanOffloadPass> {
  using PlanOffloadBase::PlanOffloadBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MemoryTable t;
    t.budget = budgetMiB * kMiB;
    t.context = contextMiB * kMiB;
    t.workspaces = workspaceMiB * kMiB;
    t.graph_pools = graphPoolMiB * kMiB;
    t.kv = i64Attr(module->getAttrOfType<DictionaryAttr>("g4.kv"), "pool_bytes");
    t.activations = i64Attr(module->getAttrOfType<DictionaryAttr>("g4.activations"), "max_peak_bytes");

    // Streamable weights: the Linears of each layer (2-D, tagged with a layer).
    int64_t totalWeights = 0;
    std::map<int64_t, int64_t> layerBytes;                 // layer -> streamable bytes
    std::map<int64_t, SmallVector<WeightOp>> layerWeights;
    for (WeightOp w : module.getOps<WeightOp>()) {
      totalWeights += w.storageBytes();
      if (w.getLayer() && w.getTensorType().getRank() == 2) {
        layerBytes[*w.getLayer()] += w.storageBytes();
        layerWeights[*w.getLayer()].push_back(w);
      }
    }
    // KV is elastic where it is paged: the runtime sizes the block pool from what the budget
    // leaves and admits requests by their length, so a paged buffer can shrink to one sequence's
    // blocks (num_blocks / max_seqs). Rings are per-sequence slots and stay whole. Weights that
    // stream cost a host copy per layer per step (PCIe, ~1% of HBM bandwidth); fewer sequences
    // resident cost far less, so streaming starts only when one full-length sequence does not fit
    // beside every resident weight. Without kv_buffer ops (hand-written modules) KV is fixed.
    const int64_t kvWant = t.kv;
    int64_t kvMin = 0, kvBuffers = 0;
    const int64_t seqs = i64Attr(module->getAttrOfType<DictionaryAttr>("g4.kv"), "max_seqs");
    for (KVBufferOp kv : module.getOps<KVBufferOp>()) {
      ++kvBuffers;
      const int64_t pool = kv.getPoolBytes();
      kvMin += kv.getKind() == "paged" && seqs > 1 ? (pool + seqs - 1) / seqs : pool;
    }
    if (kvBuffers == 0 || kvMin > kvWant) kvMin = kvWant;
    const int64_t fixedNoKv = t.activations + t.workspaces + t.graph_pools + t.context;

    // Stream the last k layers for the smallest k at which the weights and the smallest KV fit
    // (k = 0: all resident); KV then gets what is left, up to what was asked.
    std::vector<int64_t> layers;
    for (auto& [layer, bytes] : layerBytes) layers.push_back(layer);
    int64_t chosen = -1;
    for (size_t k = 0; k <= layers.size(); ++k) {
      int64_t streamed = 0, largest = 0;
      for (size_t j = layers.size() - k; j < layers.size(); ++j) {
        streamed += layerBytes[layers[j]];
        largest = std::max(largest, layerBytes[layers[j]]);
      }
      t.weights_resident = totalWeights - streamed;
      t.weights_streamed = streamed;
      t.staging = 2 * largest;  // two slots: layer i+1 lands while layer i runs
      t.streamed_layers = int64_t(k);
      const int64_t room = t.budget - (fixedNoKv + t.weights_resident + t.staging);
      t.kv = std::max(kvMin, std::min(kvWant, room));
      if (room >= kvMin) {
        chosen = int64_t(k);
        break;
      }
    }
    if (chosen < 0) {
      // Report the smallest possible footprint (everything streamable streamed).
      bool denseLinears = false;
      for (auto& [layer, ws] : layerWeights)
        for (WeightOp w : ws) denseLinears |= !w.getQuant();
      std::string msg = "the model does not fit the device budget of " + std::to_string(budgetMiB) +
                        " MiB even with every layer's weights streamed from host memory\n" + formatMemoryTable(t) +
                        "to fit, lower the KV cache (fewer sequences: --max-batch; shorter --max-seq-len; "
                        "smaller --max-chunk), " +
                        std::string(denseLinears ? "quantize the Linears to INT4, " : "") + "or raise --budget";
      module.emitError(msg);
      writeMemoryTable(module, t);
      return signalPassFailure();
    }

    std::set<int64_t> streamedLayers(layers.end() - chosen, layers.end());
    for (WeightOp w : module.getOps<WeightOp>()) {
      const bool streamed = w.getLayer() && streamedLayers.count(*w.getLayer()) && w.getTensorType().getRank() == 2;
      w.setResidencyAttr(StringAttr::get(&getContext(), streamed ? "streamed" : "resident"));
    }
    writeMemoryTable(module, t);
    if (failed(insertPrefetches(module, streamedLayers, layerWeights))) signalPassFailure();
  }

  // g4.prefetch of streamed layer L before the first op of layer L-1 (or at the
  // function entry), g4.wait before the first op of layer L. Slots alternate.
  LogicalResult insertPrefetches(ModuleOp module, const std::set<int64_t>& streamed,
                                 std::map<int64_t, SmallVector<WeightOp>>& layerWeights) {
    module.walk([](Operation* op) {
      if (isa<PrefetchOp, WaitOp>(op)) op->erase();
    });
    if (streamed.empty()) return success();
    auto funcs = llvm::to_vector(module.getOps<func::FuncOp>());
    if (funcs.size() != 1) return module.emitError("g4-plan-offload expects exactly one decoder function");
    Block& body = funcs.front().getBody().front();
    std::map<int64_t, Operation*> firstOp;
    for (Operation& op : body)
      if (auto layer = layerOf(&op)) firstOp.emplace(*layer, &op);
    int64_t ordinal = 0;
    for (int64_t layer : streamed) {
      if (!firstOp.count(layer)) return module.emitError() << "no op is tagged with streamed layer " << layer;
      const int64_t slot = ordinal++ % 2;
      SmallVector<Attribute> refs;
      for (WeightOp w : layerWeights[layer]) refs.push_back(FlatSymbolRefAttr::get(w.getSymNameAttr()));
      OpBuilder b(module.getContext());
      auto prev = firstOp.find(layer - 1);
      if (prev != firstOp.end()) b.setInsertionPoint(prev->second);
      else b.setInsertionPointToStart(&body);
      auto layerAttr = b.getI64IntegerAttr(layer), slotAttr = b.getI64IntegerAttr(slot);
      PrefetchOp::create(b, module.getLoc(), b.getArrayAttr(refs), layerAttr, slotAttr);
      b.setInsertionPoint(firstOp[layer]);
      WaitOp::create(b, module.getLoc(), layerAttr, slotAttr);
    }
    return success();
  }
};

}  // namespace
}  // namespace g4c::passes

// Codegen: planned g4 module -> runtime plan (see Codegen.h).
#include "codegen/Codegen.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "ir/G4Dialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "models/error.h"
#include "runtime/plan/plan_generated.h"
#include "runtime/plan/step_spec.h"

namespace g4c::codegen {
namespace {

using flatbuffers::Offset;
using namespace mlir;
namespace fb = g4c::plan::fb;
using plan::StepSpec;

int64_t i64(DictionaryAttr d, const char* k) {
  auto a = d ? d.getAs<IntegerAttr>(k) : IntegerAttr();
  if (!a) throw Error(std::string("codegen: the module lacks the planning attribute ") + k + " (run the g4c compile pipeline)");
  return a.getInt();
}

fb::DType dtypeOf(Type t) {
  if (t.isBF16()) return fb::DType::BF16;
  if (t.isF16()) return fb::DType::F16;
  if (t.isF32()) return fb::DType::F32;
  if (t.isInteger(32)) return fb::DType::I32;
  throw Error("codegen: no plan dtype for an element type");
}

class Lowering {
 public:
  Lowering(ModuleOp m, const models::ModelConfig& cfg, const CodegenOptions& o) : module_(m), cfg_(cfg), opts_(o) {}
  std::vector<uint8_t> run();

 private:
  int weight(FlatSymbolRefAttr sym);
  int weightOrNone(FlatSymbolRefAttr sym) { return sym ? weight(sym) : -1; }
  int value(Value v, const std::string& name, fb::RowSpace rows = fb::RowSpace::Tokens);
  int use(Value v, Operation* user);
  void lower(Operation* op);
  std::string tag(Operation* op) {
    auto l = op->getAttrOfType<IntegerAttr>("g4.layer");
    return l ? "L" + std::to_string(l.getInt()) + "." : "";
  }
  int layerOf(Operation* op) {
    auto l = op->getAttrOfType<IntegerAttr>("g4.layer");
    return l ? int(l.getInt()) : -1;
  }

  ModuleOp module_;
  const models::ModelConfig& cfg_;
  const CodegenOptions& opts_;
  flatbuffers::FlatBufferBuilder fbb_{1 << 16};
  SymbolTable* symbols_ = nullptr;
  std::vector<Offset<fb::Weight>> weights_;
  std::map<std::string, int> weightIds_;
  struct ValueSpec {
    Value v;
    std::string name;
    int cols;
    fb::RowSpace rows;
    fb::DType dtype;
  };
  std::vector<ValueSpec> values_;
  llvm::DenseMap<Value, int> valueIds_;
  std::vector<StepSpec> steps_;
  std::map<int64_t, int> kvIndex_;  // layer -> index in Plan.kv
  int logits_ = -1;
};

int Lowering::weight(FlatSymbolRefAttr sym) {
  auto it = weightIds_.find(sym.getValue().str());
  if (it != weightIds_.end()) return it->second;
  auto w = symbols_->lookup<g4::WeightOp>(sym.getValue());
  if (!w) throw Error("codegen: no g4.weight named " + sym.getValue().str());
  auto type = w.getTensorType();
  std::vector<int64_t> shape(type.getShape().begin(), type.getShape().end());
  const fb::Residency residency = w.isStreamed() ? fb::Residency::Streamed : fb::Residency::Resident;
  const std::string base = sym.getValue().str();
  Offset<fb::Weight> out;
  if (auto q = w.getQuant()) {
    const bool symmetric = q->getSymmetric().getValue();
    const std::string name = base + ".weight", zeros = symmetric ? "" : base + ".zeros";
    auto layout = fb::CreateInt4LayoutDirect(fbb_, (base + ".qweight").c_str(), (base + ".scales").c_str(),
                                             zeros.c_str(), dtypeOf(q->getScaleType()), int(q->getGroupSize()),
                                             symmetric, int(shape[1]), int(q->getPaddedIn()), int(shape[0]));
    out = fb::CreateWeightDirect(fbb_, name.c_str(), fb::DType::BF16, &shape, fb::WeightFormat::Int4, nullptr, layout,
                                 residency, uint64_t(w.storageBytes()));
  } else {
    const std::string key = w.getSource() ? w.getSource()->str() : base + ".weight";
    const auto format = w.getInt8Rows() ? fb::WeightFormat::Int8Rows : fb::WeightFormat::Dense;
    const int64_t read = type.getNumElements() * int64_t(type.getElementTypeBitWidth() / 8);
    out = fb::CreateWeightDirect(fbb_, key.c_str(), dtypeOf(type.getElementType()), &shape, format, key.c_str(),
                                 Offset<fb::Int4Layout>(), residency, uint64_t(read));
  }
  weights_.push_back(out);
  return weightIds_[base] = int(weights_.size()) - 1;
}

int Lowering::value(Value v, const std::string& name, fb::RowSpace rows) {
  auto type = cast<RankedTensorType>(v.getType());
  values_.push_back({v, name, int(type.getShape().back()), rows, dtypeOf(type.getElementType())});
  return valueIds_[v] = int(values_.size()) - 1;
}

int Lowering::use(Value v, Operation* user) {
  auto it = valueIds_.find(v);
  if (it == valueIds_.end()) {
    throw Error("codegen: " + user->getName().getStringRef().str() + " reads a value with no plan buffer");
  }
  return it->second;
}

void Lowering::lower(Operation* op) {
  const std::string t = tag(op);
  const int layer = layerOf(op);
  auto shortName = [](StringRef sym) { return sym.rsplit('.').second.str(); };
  if (auto e = dyn_cast<g4::EmbedOp>(op)) {
    steps_.push_back({.kernel = fb::KernelId::Embed, .outputs = {value(e, "h.embed")}, .weights = {weight(e.getTableAttr())},
                      .label = "embed", .scale = float(e.getScale().convertToDouble())});
  } else if (auto n = dyn_cast<g4::RmsNormOp>(op)) {
    std::string what = n.getWeightAttr() ? shortName(n.getWeightAttr().getValue()) : "norm";
    if (what == "input_layernorm") what = "input_norm";
    steps_.push_back({.kernel = fb::KernelId::RmsNorm, .layer = layer, .inputs = {use(n.getInput(), op)},
                      .outputs = {value(n, t + what)}, .weights = {weightOrNone(n.getWeightAttr())}, .label = t + what,
                      .eps = float(n.getEps().convertToDouble()), .norm_dim = int(n.getGroupAttr().getInt())});
  } else if (auto l = dyn_cast<g4::LinearOp>(op)) {
    const std::string what = shortName(l.getWeight());
    steps_.push_back({.kernel = fb::KernelId::Linear, .layer = layer, .inputs = {use(l.getInput(), op)},
                      .outputs = {value(l, t + what)}, .weights = {weight(l.getWeightAttr())}, .label = t + what});
  } else if (auto g = dyn_cast<g4::GateUpOp>(op)) {
    steps_.push_back({.kernel = fb::KernelId::Linear, .layer = layer, .inputs = {use(g.getInput(), op)},
                      .outputs = {value(g, t + "gate_up")}, .weights = {weight(g.getGateAttr()), weight(g.getUpAttr())},
                      .label = t + "gate_up", .epilogue = fb::Epilogue::GeluTanhGateUp});
  } else if (auto f = dyn_cast<g4::QKNormRopeKVWriteOp>(op)) {
    steps_.push_back({.kernel = fb::KernelId::QkNormRopeKvWrite, .layer = layer,
                      .inputs = {use(f.getQRaw(), op), use(f.getKRaw(), op), use(f.getVRaw(), op)},
                      .outputs = {value(f, t + "q")}, .weights = {weight(f.getQNormAttr()), weight(f.getKNormAttr())},
                      .label = t + "qk_norm_rope_kv", .eps = float(f.getEps().convertToDouble()),
                      .num_q_heads = int(f.getNumHeadsAttr().getInt()), .num_kv_heads = int(f.getNumKvHeadsAttr().getInt()),
                      .head_dim = int(f.getHeadDimAttr().getInt()), .rotary_pairs = int(f.getRotaryPairsAttr().getInt()),
                      .kv_layer = kvIndex_.at(f.getLayerAttr().getInt()), .rope_theta = f.getRopeTheta().convertToDouble(),
                      .v_from_k = f.getVRaw() == f.getKRaw()});
  } else if (auto a = dyn_cast<g4::AttentionOp>(op)) {
    steps_.push_back({.kernel = fb::KernelId::Attention, .layer = layer, .inputs = {use(a.getQuery(), op)},
                      .outputs = {value(a, t + "attention")}, .label = t + "attention",
                      .scale = float(a.getScale().convertToDouble()), .window = int(a.getWindowAttr().getInt()),
                      .num_q_heads = int(a.getNumHeadsAttr().getInt()),
                      .num_kv_heads = int(a.getNumKvHeadsAttr().getInt()), .head_dim = int(a.getHeadDimAttr().getInt()),
                      .kv_layer = kvIndex_.at(a.getLayerAttr().getInt())});
  } else if (auto r = dyn_cast<g4::NormResidualOp>(op)) {
    const bool attn = r.getPost().contains("post_attention");
    const std::string what = attn ? "attn_residual" : "ffn_residual";
    StepSpec s{.kernel = fb::KernelId::PostNormResidual, .layer = layer,
               .inputs = {use(r.getResidual(), op), use(r.getInput(), op)},
               .outputs = {value(r.getNewResidual(), t + what + ".h")},
               .weights = {weight(r.getPostAttr()), weightOrNone(r.getScalarAttr()), weightOrNone(r.getNextAttr())},
               .label = t + what, .eps = float(r.getEps().convertToDouble())};
    if (r.getNormed()) s.outputs.push_back(value(r.getNormed(), t + what + ".normed"));
    steps_.push_back(std::move(s));
  } else if (auto h = dyn_cast<g4::LMHeadOp>(op)) {
    logits_ = value(h, "logits", fb::RowSpace::LogitRows);
    steps_.push_back({.kernel = fb::KernelId::LmHead, .inputs = {use(h.getInput(), op)}, .outputs = {logits_},
                      .weights = {weight(h.getNormAttr()), weight(h.getTableAttr())}, .label = "lm_head",
                      .eps = float(h.getEps().convertToDouble()), .softcap = float(h.getSoftcap().convertToDouble())});
  } else if (isa<g4::PrefetchOp, g4::WaitOp, func::ReturnOp>(op)) {
    // Streaming is carried by Weight.residency; the runtime schedules the copies.
  } else {
    throw Error("codegen: op " + op->getName().getStringRef().str() +
                " has no kernel in runtime/plan/KERNELS.md (run the fusion passes of g4c compile)");
  }
}

std::vector<uint8_t> Lowering::run() {
  SymbolTable symbols(module_);
  symbols_ = &symbols;
  auto funcs = llvm::to_vector(module_.getOps<func::FuncOp>());
  if (funcs.size() != 1) throw Error("codegen: expected one decoder function");
  Block& body = funcs.front().getBody().front();

  // KV layout, ordered by layer.
  DictionaryAttr kvDict = module_->getAttrOfType<DictionaryAttr>("g4.kv");
  const int64_t maxChunk = i64(kvDict, "max_chunk"), blockSize = i64(kvDict, "block_size");
  auto buffers = llvm::to_vector(module_.getOps<g4::KVBufferOp>());
  llvm::sort(buffers, [](g4::KVBufferOp a, g4::KVBufferOp b) { return a.getLayerAttr().getInt() < b.getLayerAttr().getInt(); });
  // KV storage: g4-plan-kv's kv-dtype when it set one, else F32 / BF16 by the plan's kind.
  fb::DType kvType = opts_.kv_bf16 ? fb::DType::BF16 : fb::DType::F32;
  if (auto t = kvDict ? kvDict.getAs<StringAttr>("kv_dtype") : StringAttr()) {
    if (t.getValue() == "fp8")
      kvType = fb::DType::F8E4M3;
    else if (t.getValue() == "bf16")
      kvType = fb::DType::BF16;
    else
      throw Error("codegen: g4.kv has kv_dtype '" + t.getValue().str() + "' (bf16 or fp8)");
  }
  std::vector<Offset<fb::KvLayer>> kv;
  for (g4::KVBufferOp b : buffers) {
    const bool ring = b.getKind() == "ring";
    kvIndex_[b.getLayerAttr().getInt()] = int(kv.size());
    const int capacity = ring ? int(b.getCapacityAttr().getInt()) : 0;
    kv.push_back(fb::CreateKvLayer(fbb_, int(b.getLayerAttr().getInt()), ring ? fb::KvKind::Ring : fb::KvKind::Paged,
                                   int(b.getNumKvHeadsAttr().getInt()), int(b.getHeadDimAttr().getInt()),
                                   ring               ? int(capacity + 1 - maxChunk)
                                   : b.getWindowAttr() ? int(b.getWindowAttr().getInt())  // window pool
                                                       : 0,
                                   capacity, ring ? 0 : int(blockSize),
                                   /*kv_shared (deprecated)=*/false, kvType));
  }

  for (Operation& op : body) lower(&op);
  if (logits_ < 0) throw Error("codegen: the decoder has no g4.lm_head (run g4-fuse-lm-head)");

  // Buckets ascending by tokens, offsets from g4-plan-memory.
  DictionaryAttr act = module_->getAttrOfType<DictionaryAttr>("g4.activations");
  if (!act) throw Error("codegen: the module has no g4.activations (run g4-plan-memory)");
  auto tokens = act.getAs<DenseI64ArrayAttr>("tokens").asArrayRef();
  auto seqs = act.getAs<DenseI64ArrayAttr>("seqs").asArrayRef();
  auto peaks = act.getAs<DenseI64ArrayAttr>("peak_bytes").asArrayRef();
  // Decode flags (g4-plan-memory) and the largest prefill bucket replayed as a CUDA graph
  // (g4-plan-buckets); a module planned without buckets has neither and captures nothing.
  auto decodeAttr = act.getAs<DenseI64ArrayAttr>("decode");
  DictionaryAttr bucketsAttr = module_->getAttrOfType<DictionaryAttr>("g4.buckets");
  auto graphMaxAttr = bucketsAttr ? bucketsAttr.getAs<IntegerAttr>("graph_max_tokens") : IntegerAttr();
  const int64_t graphMax = graphMaxAttr ? graphMaxAttr.getInt() : 0;
  std::vector<size_t> order(tokens.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::pair(tokens[a], seqs[a]) < std::pair(tokens[b], seqs[b]);
  });
  std::vector<Offset<fb::Bucket>> buckets;
  for (size_t bi : order) {
    std::vector<uint64_t> offsets;
    for (const ValueSpec& v : values_) {
      Operation* def = v.v.getDefiningOp();
      auto arena = def ? def->getAttrOfType<ArrayAttr>("g4.arena") : ArrayAttr();
      if (!arena) throw Error("codegen: " + v.name + " has no arena offset (run g4-plan-memory)");
      auto perBucket = cast<DenseI64ArrayAttr>(arena[cast<OpResult>(v.v).getResultNumber()]).asArrayRef();
      offsets.push_back(uint64_t(perBucket[bi]));
    }
    const bool decode = bucketsAttr && decodeAttr && bi < decodeAttr.asArrayRef().size() && decodeAttr.asArrayRef()[bi] != 0;
    const bool graph = bucketsAttr && (decode || tokens[bi] <= graphMax);
    buckets.push_back(fb::CreateBucketDirect(fbb_, int(tokens[bi]), int(seqs[bi]), int(seqs[bi]), &offsets,
                                             uint64_t(peaks[bi]), decode, graph));
  }

  std::vector<Offset<fb::Value>> values;
  for (const ValueSpec& v : values_) values.push_back(fb::CreateValueDirect(fbb_, v.name.c_str(), v.dtype, v.cols, v.rows));
  std::vector<Offset<fb::Step>> steps;
  for (const StepSpec& s : steps_) steps.push_back(plan::write_step(fbb_, s));

  std::vector<Offset<fb::LayerConfig>> layers;
  for (const auto& g : cfg_.layers)
    layers.push_back(fb::CreateLayerConfig(
        fbb_, g.kind == models::LayerKind::Full ? fb::LayerKind::Full : fb::LayerKind::Sliding, g.num_kv_heads,
        g.head_dim, g.k_eq_v, g.window,
        g.rope.type == models::RopeType::Proportional ? fb::RopeType::Proportional : fb::RopeType::Default,
        g.rope.theta, g.rope.partial_rotary_factor, g.rotary_pairs()));
  auto model = fb::CreateModelConfigDirect(fbb_, cfg_.model_type.c_str(), cfg_.hidden_size, cfg_.num_layers,
                                           cfg_.num_q_heads, cfg_.intermediate_size, cfg_.vocab_size,
                                           cfg_.sliding_window, cfg_.rms_norm_eps, cfg_.final_logit_softcapping,
                                           float(cfg_.embed_scale()), cfg_.tie_word_embeddings, cfg_.bos_token_id,
                                           cfg_.pad_token_id, &cfg_.eos_token_ids, &layers);
  auto root = fb::CreatePlanDirect(fbb_, opts_.format_version, opts_.generator.c_str(), opts_.fingerprint,
                                   opts_.fingerprint_text.c_str(), model, &weights_, &kv, int(blockSize), int(maxChunk),
                                   &values, &buckets, &steps, logits_, 1, 0);
  fb::FinishPlanBuffer(fbb_, root);
  return std::vector<uint8_t>(fbb_.GetBufferPointer(), fbb_.GetBufferPointer() + fbb_.GetSize());
}

}  // namespace

std::vector<uint8_t> emit_plan(ModuleOp module, const models::ModelConfig& cfg, const CodegenOptions& opts) {
  return Lowering(module, cfg, opts).run();
}

}  // namespace g4c::codegen

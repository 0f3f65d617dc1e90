// The `g4` dialect: registration, the INT4 attribute and the op verifiers.
#include "ir/G4Dialect.h"

#include "llvm/ADT/TypeSwitch.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace g4c::g4;

#include "ir/G4Dialect.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "ir/G4Attrs.cpp.inc"

#define GET_OP_CLASSES
#include "ir/G4Ops.cpp.inc"

void G4Dialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "ir/G4Attrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "ir/G4Ops.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// Int4QuantAttr
//===----------------------------------------------------------------------===//

LogicalResult Int4QuantAttr::verify(function_ref<InFlightDiagnostic()> emitError, int64_t groupSize,
                                    BoolAttr symmetric, int64_t paddedIn, Type scaleType) {
  if (groupSize <= 0 || groupSize % 2 != 0)
    return emitError() << "group_size must be a positive even number, got " << groupSize;
  if (paddedIn <= 0 || paddedIn % groupSize != 0)
    return emitError() << "padded_in (" << paddedIn << ") must be a positive multiple of group_size (" << groupSize
                       << ")";
  if (!symmetric) return emitError() << "symmetric must be a bool";
  if (!scaleType.isF16() && !scaleType.isBF16()) return emitError() << "scale_type must be f16 or bf16";
  return success();
}

int64_t Int4QuantAttr::storageBytes(int64_t out) const {
  const int64_t groups = getPaddedIn() / getGroupSize();
  int64_t bytes = out * getPaddedIn() / 2 + out * groups * 2;  // codes + fp16/bf16 scales
  if (!getSymmetric().getValue()) bytes += out * groups;       // uint8 zero points
  return bytes;
}

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

namespace {

// Last (feature) dimension of an activation tensor.
int64_t features(Value v) { return cast<RankedTensorType>(v.getType()).getShape().back(); }
int64_t features(Type t) { return cast<RankedTensorType>(t).getShape().back(); }

// Resolves `sym` to a g4.weight, checking its logical shape when `shape` is given
// (kDynamic entries match anything).
FailureOr<WeightOp> lookupWeight(Operation* op, SymbolTableCollection& table, FlatSymbolRefAttr sym,
                                 StringRef role, ArrayRef<int64_t> shape = {}) {
  auto weight = table.lookupNearestSymbolFrom<WeightOp>(op, sym);
  if (!weight) {
    op->emitOpError() << role << " '" << sym.getValue() << "' does not name a g4.weight";
    return failure();
  }
  if (!shape.empty()) {
    ArrayRef<int64_t> actual = weight.getTensorType().getShape();
    bool ok = actual.size() == shape.size();
    for (size_t i = 0; ok && i < shape.size(); ++i)
      ok = shape[i] == ShapedType::kDynamic || shape[i] == actual[i];
    if (!ok) {
      auto diag = op->emitOpError() << role << " '" << sym.getValue() << "' has shape [";
      llvm::interleaveComma(actual, diag);
      diag << "], expected [";
      llvm::interleave(shape, diag, [&](int64_t d) { diag << (d == ShapedType::kDynamic ? std::string("?") : std::to_string(d)); }, ", ");
      diag << "]";
      return failure();
    }
  }
  return weight;
}

LogicalResult checkHeads(Operation* op, int64_t heads, int64_t kvHeads, int64_t headDim) {
  if (heads <= 0 || kvHeads <= 0 || headDim <= 0)
    return op->emitOpError("num_heads, num_kv_heads and head_dim must be positive");
  if (heads % kvHeads != 0)
    return op->emitOpError() << "num_heads (" << heads << ") must be a multiple of num_kv_heads (" << kvHeads << ")";
  return success();
}

LogicalResult checkFeatures(Operation* op, StringRef what, int64_t actual, int64_t expected) {
  if (actual != expected)
    return op->emitOpError() << what << " has " << actual << " features, expected " << expected;
  return success();
}

}  // namespace

//===----------------------------------------------------------------------===//
// Symbols
//===----------------------------------------------------------------------===//

LogicalResult WeightOp::verify() {
  auto type = getTensorType();
  if (!type.getElementType().isBF16() && !type.getElementType().isF16() && !type.getElementType().isF32())
    return emitOpError("weight type must be bf16, f16 or f32");
  if (auto quant = getQuant()) {
    if (type.getRank() != 2) return emitOpError("only 2-D [out, in] weights can be INT4-quantized");
    const int64_t in = type.getShape()[1];
    if (quant->getPaddedIn() < in || quant->getPaddedIn() - in >= quant->getGroupSize())
      return emitOpError() << "padded_in " << quant->getPaddedIn() << " must be ceil(" << in << " / "
                           << quant->getGroupSize() << ") * " << quant->getGroupSize();
  }
  if (getInt8Rows() && (type.getRank() != 2 || getQuant()))
    return emitOpError("int8_rows storage needs a 2-D weight without quant");
  if (auto r = getResidency(); r && *r != "resident" && *r != "streamed")
    return emitOpError() << "residency must be \"resident\" or \"streamed\", got \"" << *r << "\"";
  return success();
}

int64_t WeightOp::storageBytes() {
  auto type = getTensorType();
  if (auto quant = getQuant()) return quant->storageBytes(type.getShape()[0]);
  if (getInt8Rows()) return type.getNumElements() + type.getShape()[0] * 4;  // codes + fp32 scales
  return type.getNumElements() * int64_t(type.getElementTypeBitWidth() / 8);
}

LogicalResult KVBufferOp::verify() {
  if (getKind() == "ring") {
    if (!getCapacityAttr() || !getMaxSeqsAttr() || getCapacityAttr().getInt() <= 0 || getMaxSeqsAttr().getInt() <= 0)
      return emitOpError("a ring buffer needs positive capacity and max_seqs");
  } else if (getKind() == "paged") {
    if (!getBlockSizeAttr() || !getNumBlocksAttr() || getBlockSizeAttr().getInt() <= 0 || getNumBlocksAttr().getInt() <= 0)
      return emitOpError("a paged buffer needs positive block_size and num_blocks");
    if (getWindowAttr() && getWindowAttr().getInt() <= 0) return emitOpError("a window must be positive");
  } else {
    return emitOpError() << "kind must be \"ring\" or \"paged\", got \"" << getKind() << "\"";
  }
  // K and V of a token: BF16 elements, or FP8 codes and an fp32 scale per head (g4-plan-kv kv-dtype).
  const int64_t heads = getNumKvHeadsAttr().getInt(), dim = getHeadDimAttr().getInt();
  const int64_t perToken = 2 * heads * dim * 2, perTokenFp8 = 2 * heads * (dim + 4);
  if (getBytesPerTokenAttr().getInt() != perToken && getBytesPerTokenAttr().getInt() != perTokenFp8)
    return emitOpError() << "bytes_per_token " << getBytesPerTokenAttr().getInt() << " does not match " << perToken
                         << " (BF16 K and V) or " << perTokenFp8 << " (FP8 K and V with their scales)";
  return success();
}

//===----------------------------------------------------------------------===//
// Symbol uses
//===----------------------------------------------------------------------===//

LogicalResult EmbedOp::verifySymbolUses(SymbolTableCollection& t) {
  return lookupWeight(*this, t, getTableAttr(), "table", {ShapedType::kDynamic, features(getResult())});
}

LogicalResult RmsNormOp::verifySymbolUses(SymbolTableCollection& t) {
  if (!getWeightAttr()) return success();
  return lookupWeight(*this, t, getWeightAttr(), "weight", {getGroupAttr().getInt()});
}

LogicalResult DequantOp::verifySymbolUses(SymbolTableCollection& t) {
  auto w = lookupWeight(*this, t, getWeightAttr(), "weight");
  if (failed(w)) return failure();
  if (w->getTensorType().getShape() != cast<RankedTensorType>(getType()).getShape())
    return emitOpError("result shape differs from the weight's shape");
  return success();
}

LogicalResult ScaleOp::verifySymbolUses(SymbolTableCollection& t) {
  auto w = lookupWeight(*this, t, getScalarAttr(), "scalar");
  if (failed(w)) return failure();
  if (w->getTensorType().getNumElements() != 1) return emitOpError("scalar must name a one-element weight");
  return success();
}

LogicalResult LogitsOp::verifySymbolUses(SymbolTableCollection& t) {
  return lookupWeight(*this, t, getTableAttr(), "table", {features(getResult()), features(getInput())});
}

LogicalResult LinearOp::verifySymbolUses(SymbolTableCollection& t) {
  return lookupWeight(*this, t, getWeightAttr(), "weight", {features(getResult()), features(getInput())});
}

LogicalResult GateUpOp::verifySymbolUses(SymbolTableCollection& t) {
  if (failed(lookupWeight(*this, t, getGateAttr(), "gate", {features(getResult()), features(getInput())})))
    return failure();
  return lookupWeight(*this, t, getUpAttr(), "up", {features(getResult()), features(getInput())});
}

LogicalResult NormResidualOp::verifySymbolUses(SymbolTableCollection& t) {
  const int64_t h = features(getResidual());
  if (failed(lookupWeight(*this, t, getPostAttr(), "post", {h}))) return failure();
  if (getNextAttr() && failed(lookupWeight(*this, t, getNextAttr(), "next", {h}))) return failure();
  if (getScalarAttr()) {
    auto w = lookupWeight(*this, t, getScalarAttr(), "scalar");
    if (failed(w)) return failure();
    if (w->getTensorType().getNumElements() != 1) return emitOpError("scalar must name a one-element weight");
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Op verifiers
//===----------------------------------------------------------------------===//

LogicalResult RmsNormOp::verify() {
  if (getGroupAttr().getInt() <= 0 || features(getInput()) % getGroupAttr().getInt() != 0)
    return emitOpError() << "group " << getGroupAttr().getInt() << " must divide the " << features(getInput()) << " features";
  if (getEps().convertToDouble() <= 0) return emitOpError("eps must be positive");
  return success();
}

LogicalResult MatmulOp::verify() {
  auto w = cast<RankedTensorType>(getWeight().getType()).getShape();
  if (failed(checkFeatures(*this, "input", features(getInput()), w[1]))) return failure();
  return checkFeatures(*this, "result", features(getResult()), w[0]);
}

LogicalResult RopeOp::verify() {
  const int64_t d = getHeadDimAttr().getInt();
  if (d <= 0 || d % 2 != 0 || features(getInput()) % d != 0)
    return emitOpError() << "head_dim " << d << " must be even and divide the " << features(getInput()) << " features";
  if (getRotaryPairsAttr().getInt() < 0 || getRotaryPairsAttr().getInt() > d / 2)
    return emitOpError() << "rotary_pairs " << getRotaryPairsAttr().getInt() << " must be in [0, head_dim/2 = " << d / 2 << "]";
  if (getRopeType() == "default") {
    if (getRotaryPairsAttr().getInt() != d / 2) return emitOpError("default rope rotates all head_dim/2 pairs");
  } else if (getRopeType() != "proportional") {
    return emitOpError() << "rope_type must be \"default\" or \"proportional\", got \"" << getRopeType() << "\"";
  }
  if (getTheta().convertToDouble() <= 0) return emitOpError("theta must be positive");
  return success();
}

LogicalResult KVWriteOp::verify() {
  if (getKey().getType() != getValue().getType())
    return emitOpError("key and value must have the same type");
  if (getWindowAttr().getInt() < 0) return emitOpError("window must be >= 0 (0 = full attention)");
  if (getLayerAttr().getInt() < 0) return emitOpError("layer must be >= 0");
  return success();
}

LogicalResult QKOp::verify() {
  if (failed(checkHeads(*this, getNumHeadsAttr().getInt(), getNumKvHeadsAttr().getInt(), getHeadDimAttr().getInt()))) return failure();
  if (failed(checkFeatures(*this, "query", features(getQuery()), getNumHeadsAttr().getInt() * getHeadDimAttr().getInt()))) return failure();
  if (failed(checkFeatures(*this, "key", features(getKey()), getNumKvHeadsAttr().getInt() * getHeadDimAttr().getInt()))) return failure();
  if (cast<RankedTensorType>(getType()).getShape()[0] != getNumHeadsAttr().getInt())
    return emitOpError("result's first dimension must be num_heads");
  return success();
}

LogicalResult MaskOp::verify() {
  if (getWindowAttr().getInt() < 0) return emitOpError("window must be >= 0 (0 = causal)");
  return success();
}

LogicalResult PVOp::verify() {
  if (failed(checkHeads(*this, getNumHeadsAttr().getInt(), getNumKvHeadsAttr().getInt(), getHeadDimAttr().getInt()))) return failure();
  if (cast<RankedTensorType>(getProbs().getType()).getShape()[0] != getNumHeadsAttr().getInt())
    return emitOpError("probs' first dimension must be num_heads");
  if (failed(checkFeatures(*this, "value", features(getValue()), getNumKvHeadsAttr().getInt() * getHeadDimAttr().getInt()))) return failure();
  return checkFeatures(*this, "result", features(getResult()), getNumHeadsAttr().getInt() * getHeadDimAttr().getInt());
}

LogicalResult SoftcapOp::verify() {
  if (getCap().convertToDouble() <= 0) return emitOpError("cap must be positive");
  return success();
}

LogicalResult SampleOp::verify() {
  if (getTemperature().convertToDouble() < 0) return emitOpError("temperature must be >= 0");
  if (getTopKAttr().getInt() == 0 || getTopKAttr().getInt() < -1) return emitOpError("top_k must be -1 (off) or positive");
  const double p = getTopP().convertToDouble();
  if (!(p > 0 && p <= 1)) return emitOpError("top_p must be in (0, 1]");
  return success();
}

LogicalResult AttentionOp::verify() {
  if (failed(checkHeads(*this, getNumHeadsAttr().getInt(), getNumKvHeadsAttr().getInt(), getHeadDimAttr().getInt()))) return failure();
  if (failed(checkFeatures(*this, "query", features(getQuery()), getNumHeadsAttr().getInt() * getHeadDimAttr().getInt()))) return failure();
  if (getQuery().getType() != getResult().getType()) return emitOpError("result type must match the query type");
  if (getWindowAttr().getInt() < 0) return emitOpError("window must be >= 0 (0 = full attention)");
  return success();
}

LogicalResult NormResidualOp::verify() {
  if (bool(getNextAttr()) != bool(getNormed()))
    return emitOpError("has a normed result exactly when it has a next norm");
  if (getNormed() && getNormed().getType() != getResidual().getType())
    return emitOpError("normed result must have the residual's type");
  return success();
}

LogicalResult QKNormRopeKVWriteOp::verify() {
  const int64_t d = getHeadDimAttr().getInt();
  if (failed(checkHeads(*this, getNumHeadsAttr().getInt(), getNumKvHeadsAttr().getInt(), d))) return failure();
  if (failed(checkFeatures(*this, "q_raw", features(getQRaw()), getNumHeadsAttr().getInt() * d))) return failure();
  if (failed(checkFeatures(*this, "k_raw", features(getKRaw()), getNumKvHeadsAttr().getInt() * d))) return failure();
  if (getRotaryPairsAttr().getInt() < 0 || getRotaryPairsAttr().getInt() > d / 2)
    return emitOpError("rotary_pairs must be in [0, head_dim/2]");
  if (getWindowAttr().getInt() < 0) return emitOpError("window must be >= 0 (0 = full attention)");
  return success();
}

LogicalResult QKNormRopeKVWriteOp::verifySymbolUses(SymbolTableCollection& t) {
  if (failed(lookupWeight(*this, t, getQNormAttr(), "q_norm", {getHeadDimAttr().getInt()}))) return failure();
  return lookupWeight(*this, t, getKNormAttr(), "k_norm", {getHeadDimAttr().getInt()});
}

LogicalResult LMHeadOp::verifySymbolUses(SymbolTableCollection& t) {
  if (failed(lookupWeight(*this, t, getNormAttr(), "norm", {features(getInput())}))) return failure();
  return lookupWeight(*this, t, getTableAttr(), "table", {features(getResult()), features(getInput())});
}

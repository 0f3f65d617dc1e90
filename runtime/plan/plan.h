// The executable plan (.g4p): loading, verification against a checkpoint, printing.
//
// The schema is runtime/plan/plan.fbs (generated header runtime/plan/plan_generated.h);
// the kernel semantics are runtime/plan/KERNELS.md. A Plan owns its bytes; every accessor
// returns flatbuffers views into them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "runtime/plan/plan_generated.h"

namespace g4c::models {
struct ModelConfig;
class Checkpoint;
}  // namespace g4c::models

namespace g4c::plan {

// Bump with plan.fbs whenever the meaning of an existing field changes.
// 2: KvLayer.kv_shared and Attrs.k_from_v are deprecated (always false; format 1 gave kv_shared
//    another meaning). The loader refuses a plan that sets either.
// 3: Bucket.decode and Bucket.graph: the runtime replays CUDA graphs only for buckets marked
//    graph (a version-2 plan would read every bucket as eager).
inline constexpr uint32_t kPlanFormatVersion = 3;

class Plan {
 public:
  // Reads and verifies a .g4p file: flatbuffers verifier (truncation, bad offsets),
  // file identifier, format version, no deprecated field set (KvLayer.kv_shared,
  // Attrs.k_from_v), and the internal consistency of ids (every value / weight / kv id a
  // step names exists). Throws g4c::Error naming the file.
  static Plan load_file(const std::filesystem::path& path);
  static Plan from_bytes(std::vector<uint8_t> bytes, const std::string& name_for_messages);
  void save(const std::filesystem::path& path) const;

  const fb::Plan& root() const { return *fb::GetPlan(bytes_.data()); }
  const fb::Plan* operator->() const { return &root(); }
  const std::vector<uint8_t>& bytes() const { return bytes_; }
  const std::string& name() const { return name_; }

  // Index of the weight with this logical name, or -1.
  int find_weight(const std::string& name) const;
  // Index of the value with this name, or -1.
  int find_value(const std::string& name) const;
  // Steps [first, last) of decoder layer `layer` (contiguous in every plan the builders emit).
  std::pair<int, int> layer_steps(int layer) const;

 private:
  std::vector<uint8_t> bytes_;
  std::string name_;
};

// Fingerprint of a checkpoint: FNV-1a 64 over a canonical text of the model config
// (geometry of every layer) and every tensor's name, dtype and shape. `first_line`
// receives a short readable summary for error messages.
uint64_t checkpoint_fingerprint(const models::ModelConfig& cfg, const models::Checkpoint& ckpt,
                                std::string* first_line = nullptr);

// Throws g4c::Error (before any work) when the plan was built for another checkpoint:
// fingerprint mismatch, or a weight whose key / dtype / shape is not in the checkpoint.
void verify_plan_matches(const Plan& plan, const models::ModelConfig& cfg, const models::Checkpoint& ckpt);

// Bytes of K and V of one token in one KV layer as the plan's element type says: 2 × heads ×
// head_dim × element bytes; F8E4M3 adds an fp32 scale per head (2 × heads × (head_dim + 4)).
size_t kv_token_bytes(const fb::KvLayer& layer);
// The same as a backend holds the layer: FP8 codes and scales for F8E4M3, else elements of
// `element_bytes` whatever the plan's F32 / BF16 says (the CPU backend keeps 4-byte floats,
// the CUDA backend bf16: 2).
size_t kv_token_bytes(const fb::KvLayer& layer, size_t element_bytes);
// Summed over every KV layer of the plan.
size_t kv_token_bytes(const Plan& plan);

// Bytes the weight takes stored as the plan says: an Int8Rows table's codes and fp32 row scales,
// else what it reads from the checkpoint (Weight.checkpoint_bytes: BF16 / INT4 as stored there).
uint64_t weight_storage_bytes(const fb::Weight& w);

// Readable names.
const char* kernel_name(fb::KernelId k);
const char* epilogue_name(fb::Epilogue e);
// Whole plan as text (g4c inspect): header, config, weights, KV, values, buckets, program.
std::string describe(const Plan& plan, bool with_weights = true);

}  // namespace g4c::plan

// Host weight store: every weight of the plan as a row-major fp32 array, loaded from the
// checkpoint (BF16 / F16 / F32 dense, or the lab INT4 format dequantized at load).
//
// The CPU backend computes from these arrays directly. GPTQ replaces a Linear's data with
// fake-quantized values through replace(); backends that keep their own copy (CUDA) are
// told through Backend::weights_updated().
//
// A lazy store (load_lazy) converts a weight on its first data() call: the CUDA backend reads
// INT4 Linears raw from the checkpoint and never asks for their fp32 values, so a 12B INT4
// checkpoint no longer costs ~44 GB of host fp32 and the time to dequantize it at load.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "runtime/plan/plan.h"

namespace g4c::models {
struct TensorView;
}

namespace g4c::runtime {

// A dense BF16 / F16 / F32 tensor as fp32 into out[numel], split over up to `threads` threads
// (≤ 0: up to 8; runtime::parallel_chunks, 4M values each at least); throws for any other dtype.
void tensor_to_f32(const models::TensorView& v, float* out, int threads);

class WeightStore {
 public:
  // Loads every weight of `plan` from `ckpt` (verify_plan_matches first). `threads` > 1
  // converts weights in parallel. Throws g4c::Error naming the tensor on bad data.
  static std::unique_ptr<WeightStore> load(const plan::Plan& plan, const models::Checkpoint& ckpt, int threads = 1);
  // Converts each weight on first use; keeps the checkpoint alive meanwhile and refers to
  // `plan`, which the caller keeps alive (and in place) as long as the store.
  static std::unique_ptr<WeightStore> load_lazy(const plan::Plan& plan, std::shared_ptr<const models::Checkpoint> ckpt);

  int size() const { return int(data_.size()); }
  const float* data(int id) const {
    if (lazy_) materialize(id);
    if (!released_.empty() && released_[size_t(id)]) released_error(id);
    return data_[id].data();
  }
  size_t numel(int id) const;  // from the shape: never loads
  int loaded() const;          // weights converted so far (all of them for an eager store)
  const std::vector<int64_t>& shape(int id) const { return shapes_[id]; }
  const std::string& name(int id) const { return names_[id]; }
  int find(const std::string& name) const;  // -1 if absent
  // Replaces a weight's values (same number of elements; throws otherwise).
  void replace(int id, std::span<const float> values);
  // The weight's own array, to write its new values into in place (no allocation; a lazy store's
  // never-read weight gets an array without loading the old values). data(id) points into it.
  std::span<float> overwrite(int id);
  // Frees a weight's host values once every consumer holds its own copy (a device backend after
  // weights_updated: Backend::keeps_weight_copies); data(id) and overwrite(id) then throw.
  void release(int id);
  bool released(int id) const { return !released_.empty() && released_[size_t(id)]; }
  // Throws as replace() would for `count` new values of weight `id`; changes nothing.
  void check_replacement(int id, size_t count) const;
  // A lazy store's dense weight that still holds the checkpoint's values (never replace()d)
  // and is stored BF16 there: its bits in the (mapped) checkpoint, for a device backend to
  // upload without the fp32 round trip (the 12B tied embedding: 2 GB instead of 4 + 2 GB of
  // host conversion). Empty otherwise (eager store, INT4, other dtypes, replaced).
  std::span<const uint16_t> checkpoint_bf16(int id) const;
  size_t total_bytes() const;

 private:
  static std::unique_ptr<WeightStore> empty_store(const plan::Plan& plan);
  void materialize(int id) const;
  [[noreturn]] void released_error(int id) const;

  mutable std::vector<std::vector<float>> data_;
  std::vector<std::vector<int64_t>> shapes_;
  std::vector<std::string> names_;
  // Lazy stores only.
  bool lazy_ = false;
  const plan::Plan* plan_ = nullptr;
  std::shared_ptr<const models::Checkpoint> ckpt_;
  mutable std::unique_ptr<std::once_flag[]> once_;
  mutable std::unique_ptr<std::atomic<bool>[]> done_;  // read by loaded() while others convert
  std::vector<char> replaced_;
  std::vector<char> released_;  // lazy: sized at load; else on the first release()
};

}  // namespace g4c::runtime

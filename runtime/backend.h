// The backend interface: a narrow abstract class (ggml style) that executes plan steps.
//
// A backend owns the activation values and the KV storage; it never decides what to run
// (the engine and the scheduler do). The CPU backend (runtime/cpu/) is the reference; the
// CUDA backend implements the same interface with device memory and CUDA graphs per bucket.
//
// Life cycle:  prepare(plan, weights, kv sizes) once → execute(batch, steps) many times.
// Between execute() calls of the same batch the values keep their contents, so a caller
// may run the program in pieces (layer by layer, GPTQ) and read/write values in between.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "models/error.h"
#include "runtime/batch.h"
#include "runtime/plan/plan.h"
#include "runtime/sampler.h"
#include "runtime/weights.h"

namespace g4c::runtime {

struct KvSizes {
  int ring_slots = 1;  // sequences that can hold ring KV at once (every Ring layer)
  int num_blocks = 1;  // blocks of the paged pool (every Paged full layer has this many)
  int window_blocks = 0;  // blocks of the window pool (every Paged layer with a window)
  int table_blocks = 0;   // entries of one sequence's block table at most (0: num_blocks)
  // Not KV, but sized with it: the most token rows one step feeds (the engine's token budget),
  // so a budgeted backend holds its activation buffers before the KV pools take what is left.
  int step_tokens = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;

  // Binds the plan and the weights (the store must outlive the backend) and allocates
  // KV storage. Called once.
  virtual void prepare(const plan::Plan& plan, const WeightStore& weights, const KvSizes& kv) = 0;

  // The KV sizes prepare() allocated for `requested`: a backend with a memory budget may hold
  // fewer ring slots / paged blocks than asked (the engine then schedules within them).
  virtual KvSizes allocated_kv(const KvSizes& requested) const { return requested; }

  // Runs program steps [first_step, last_step) on `batch`. With first_step == 0 the values
  // are (re)sized for the batch; otherwise they keep what earlier calls left in them.
  virtual void execute(const BatchDesc& batch, int first_step, int last_step) = 0;
  // Returns when the work execute() queued has finished (a device backend's stream); the CPU
  // backend computes inside execute(). For timing what a forward costs apart from what follows.
  virtual void wait() const {}

  // Host copy of a value ([rows, cols] row-major, fp32) after execute(). Returns rows.
  virtual int read_value(int value, std::vector<float>* out) const = 0;
  // The value's storage ([rows, cols] row-major fp32) when the backend keeps values in host
  // memory (the CPU backend), valid until the next execute()/write_value(); empty otherwise,
  // and read_value then copies it out.
  virtual std::span<const float> host_value(int /*value*/) const { return {}; }
  // An fp32 value's rows in host memory the backend owns (the value itself where it lives on the
  // host; else a copy into a staging buffer), valid until the next read_value_view / read_value /
  // write_value / argmax_rows / sample_rows / execute(); empty where the backend cannot (use read_value).
  virtual std::span<const float> read_value_view(int value) const { return host_value(value); }
  // Greedy tokens of an fp32 [rows, cols] value (the logits) after execute(): per row the index
  // of its largest entry, lowest on ties (runtime::argmax's rule), computed where the value lives
  // so that only the token ids are copied. Returns rows, or -1 where the backend has no such path
  // (the caller then reads the value and samples on the host).
  virtual int argmax_rows(int /*value*/, std::vector<int32_t>* /*out*/) const { return -1; }
  // Sampled tokens of the same value: row r's token is runtime::sample_u(row r, draws[r].params,
  // draws[r].u) (sampler.h's definition; a device's float exp may move a token whose draw lies
  // within ~1e-6 of a boundary), computed where the value lives. Returns rows, or -1 where the
  // backend has no such path or it is off.
  virtual int sample_rows(int /*value*/, std::span<const RowDraw> /*draws*/, std::vector<int32_t>* /*out*/) const {
    return -1;
  }
  // Overwrites a value's rows (rows × cols floats) for the current batch.
  virtual void write_value(int value, std::span<const float> data) = 0;

  // A value the backend stores as bf16 (a device backend's activations) moved as its bf16 bits,
  // with no conversion: read_value_bf16 copies the current batch's rows into `out` (which must
  // hold them; returns rows), write_value_bf16 overwrites them. Only for values where
  // value_is_bf16(); with `out` / `data` in memory from pinned_host() the copy runs at the bus's rate.
  virtual bool value_is_bf16(int /*value*/) const { return false; }
  virtual int read_value_bf16(int /*value*/, std::span<uint16_t> /*out*/) const {
    throw Error(std::string(name()) + " backend: no bf16 values");
  }
  virtual void write_value_bf16(int /*value*/, std::span<const uint16_t> /*data*/) {
    throw Error(std::string(name()) + " backend: no bf16 values");
  }
  // `bytes` of page-locked host memory (freed with the last copy of the pointer) where the backend
  // copies to and from a device; null where it has none (plain memory serves then).
  virtual std::shared_ptr<void> pinned_host(size_t /*bytes*/) const { return nullptr; }

  // Called before every Linear step with the step index and its input x [rows, cols] (host
  // fp32). Used by GPTQ to collect activations. Empty function = no observer.
  using LinearObserver = std::function<void(int step, const float* x, int rows, int cols)>;
  virtual void set_linear_observer(LinearObserver observer) = 0;
  // The same with the input left in device memory: x [rows, cols] bf16 (ld = cols), valid for
  // work enqueued on the backend's stream inside the call. Returns false (and keeps nothing)
  // when the backend has no device memory; an empty function removes it. When both are set
  // the device observer is called.
  using DeviceLinearObserver = std::function<void(int step, const void* x_bf16, int rows, int cols)>;
  virtual bool set_device_linear_observer(DeviceLinearObserver) { return false; }
  // A value's rows in device memory as bf16 ([rows, cols], *rows set), or nullptr when the
  // backend keeps it elsewhere or in another type.
  virtual const void* device_value_bf16(int /*value*/, int* /*rows*/) const { return nullptr; }

  // True when the backend computes only from its own copies of the weights (made at prepare and
  // weights_updated) and never reads the store's values again: the engine may then free them
  // (Engine::release_host_weights). The CPU backend computes from the store.
  virtual bool keeps_weight_copies() const { return false; }

  // The weight store's data for `weights` changed (WeightStore::replace). One call for the
  // weights replaced together, so a backend that packs several into one buffer rebuilds it once.
  virtual void weights_updated(std::span<const int> weights) = 0;

  // Peak bytes this backend has held (weights it owns, KV, values, workspaces).
  virtual size_t peak_bytes() const = 0;
};

// Fault injection for tests, owned by one backend instance: asked before each allocation of
// KV storage or step values with its size and what it is for; returning true makes that
// allocation fail as an exhausted heap would (std::bad_alloc), which the backend reports as a
// g4c::Error naming the allocation.
using AllocationFault = std::function<bool(size_t bytes, const char* what)>;

// The CPU reference backend. threads <= 0: hardware concurrency.
std::unique_ptr<Backend> make_cpu_backend(int threads, AllocationFault fault = {});

}  // namespace g4c::runtime

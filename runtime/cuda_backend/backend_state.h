// Internal state of the CUDA backend shared by its .cpp files (not a public header).
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <map>
#include <span>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "runtime/cuda/kernels.h"
#include "runtime/cuda_backend/cuda_backend.h"
#include "runtime/cuda_backend/device.h"
#include "runtime/cuda_backend/extra_kernels.h"
#include "runtime/cuda_backend/graph_buckets.h"
#include "runtime/cuda_backend/meta.h"
#include "runtime/trace.h"

namespace g4c::models {
class Checkpoint;
}

namespace g4c::cudart {

class StagedUpload;
namespace fb = plan::fb;
using runtime::BatchDesc;

// One weight on the device.
struct DevWeight {
  enum Kind { kAbsent, kBf16, kInt4, kInt8Rows } kind = kAbsent;
  void* mem = nullptr;
  size_t bytes = 0;
  cuda::Bf16Weight bw;
  cuda::Int4Weight iw;
  cuda::Int8RowsWeight rw;  // kInt8Rows: codes at mem, then the fp32 row scales
  const bf16* ptr() const { return static_cast<const bf16*>(mem); }
  // Streamed (streaming.cpp): the device-format bytes live in pinned host memory and are copied
  // into a slot before their layer runs; `mem` (and the views' pointers) then point into the slot.
  void* host = nullptr;
  size_t slot_off = 0;  // offset in the layer's slot image
};

// Layers whose Linear weights stream from pinned host memory through two device slots
// (plan residency Streamed, or CudaOptions::stream_last_layers).
struct StreamedLayer {
  int layer = -1;                  // plan layer (Step.layer)
  std::vector<DevWeight*> weights;  // stable pointers: weights_, pairs_ nodes, siblings_[g].w
  size_t bytes = 0;                 // slot image bytes
};

// An activation buffer.
struct DevValue {
  VType type = VType::BF16;
  int cols = 0;
  fb::RowSpace rows = fb::RowSpace::Tokens;
  void* ptr = nullptr;
  size_t elem() const { return type == VType::BF16 ? 2 : 4; }
};

// One layer's KV cache: bf16 rows [slots][Hkv][D] in k / v, or, FP8 (plan dtype F8E4M3),
// E4M3 codes in k8 / v8 and a scale per (slot, kv head) in k_scale / v_scale.
struct DevKv {
  bf16* k = nullptr;
  bf16* v = nullptr;
  uint8_t* k8 = nullptr;
  uint8_t* v8 = nullptr;
  float* k_scale = nullptr;
  float* v_scale = nullptr;
  int row = 0;  // Hkv * D
  int heads = 0;
  int head_dim = 0;
  int group = 0;
  int window = 0;
};

class CudaBackend final : public runtime::Backend {
 public:
  explicit CudaBackend(const runtime::CudaOptions& o);
  ~CudaBackend() override;
  const char* name() const override { return "cuda"; }
  void prepare(const plan::Plan& plan, const runtime::WeightStore& weights, const runtime::KvSizes& kv) override;
  runtime::KvSizes allocated_kv(const runtime::KvSizes&) const override { return kv_sizes_; }
  void execute(const BatchDesc& batch, int first_step, int last_step) override;
  void wait() const override;
  int read_value(int value, std::vector<float>* out) const override;
  std::span<const float> read_value_view(int value) const override;
  int argmax_rows(int value, std::vector<int32_t>* out) const override;     // tokens.cpp
  int sample_rows(int value, std::span<const runtime::RowDraw> draws,
                  std::vector<int32_t>* out) const override;                // tokens.cpp
  void write_value(int value, std::span<const float> data) override;
  bool value_is_bf16(int value) const override { return values_.at(value).type == VType::BF16; }
  int read_value_bf16(int value, std::span<uint16_t> out) const override;
  void write_value_bf16(int value, std::span<const uint16_t> data) override;
  std::shared_ptr<void> pinned_host(size_t bytes) const override;
  void set_linear_observer(LinearObserver o) override {
    observer_ = std::move(o);
    drop_graphs();  // observed steps run eagerly
  }
  bool set_device_linear_observer(DeviceLinearObserver o) override {
    device_observer_ = std::move(o);
    drop_graphs();
    return true;
  }
  const void* device_value_bf16(int value, int* rows) const override;
  void weights_updated(std::span<const int> weights) override;
  // Every weight lives in a device buffer or a pinned host image made from the store at prepare()
  // and weights_updated(); the store is not read afterwards.
  bool keeps_weight_copies() const override { return true; }
  size_t peak_bytes() const override { return device_->peak_bytes(); }
  runtime::CudaInfo info() const;
  cudaStream_t stream() const { return device_->stream(); }
  void check_budget(const std::string& where) const { device_->check_budget(where.c_str(), breakdown()); }

 private:
  friend struct StepRunner;
  // memory
  void* dmalloc(size_t bytes, const char* what);
  void dfree(void*& p);
  void grow_buffers(int cap_T, int cap_S, int cap_R);  // cuda_backend.cpp, for ensure_capacity
  // Host → device copy ordered on the compute stream, complete on return. (A plain cudaMemcpy
  // from pageable memory runs on the legacy stream, which does not order the non-blocking
  // compute stream, and may return before its DMA has landed.)
  void upload(void* dst, const void* src, size_t bytes, const char* what);
  void zero(void* dst, size_t bytes, const char* what);  // cudaMemsetAsync on the compute stream
  std::string breakdown() const;
  // weights (cuda_weights.cpp)
  void load_weights();
  void upload_dense(int id);
  void upload_int8_rows(int id);  // plan WeightFormat Int8Rows: codes + row scales
  void upload_pair(int gate, int up, const models::Checkpoint* ck);
  DevWeight make_int4(int id, int up_id, const models::Checkpoint* ck);  // kAbsent when unsupported
  void free_weight(DevWeight& w);
  // Weight bytes to the device: through the pinned double buffer during load_weights()
  // (loader_), else upload() (synchronous; e.g. weights_updated).
  void upload_weight(void* dst, const void* src, size_t bytes, const char* what);
  // One device staging buffer for raw INT4 tensors / gate-up halves, reused in stream order
  // (grows with a synchronize; released after the load and after each weight update).
  void* stage(size_t bytes, const char* what);
  void release_stage();
  void find_siblings(const std::vector<int>& uses);
  void upload_siblings(int g, const models::Checkpoint* ck);
  void run_siblings(int index, int g);  // steps.cpp
  void observe_linear_input(int xid, int cols, std::span<const int> steps);  // steps.cpp
  // batch
  void ensure_capacity(int T, int S, int R);
  runtime::KvSizes fit_kv(const runtime::KvSizes& want);
  // Graphs + lazily loaded modules after KV sizing (fit_kv); 96 MiB fell short on the 12B.
  static constexpr int kKvReserveMiB = 160;
  void fill_meta(const BatchDesc& b, const Shape& sh);
  int rows_of(int value, const Shape& sh) const;
  void run_steps(int first, int last);
  void run_step(int index, const fb::Step& st);  // steps.cpp
  void drop_graphs();
  void flush_trace();
  bool trace_on() const { return trace_ != nullptr; }

  runtime::CudaOptions opts_;
  cuda::KernelOptions kopts_;  // the launches' options (launch_options of opts_)
  std::unique_ptr<Device> device_;
  DeviceLinearObserver device_observer_;
  std::unique_ptr<runtime::TraceWriter> trace_;
  const plan::Plan* plan_ = nullptr;
  const runtime::WeightStore* store_ = nullptr;
  runtime::KvSizes kv_sizes_;

  std::vector<DevWeight> weights_;             // by plan weight id
  std::map<std::pair<int, int>, DevWeight> pairs_;  // (gate, up) → fused gate_up weight
  std::vector<bool> standalone_;               // weight is bound outside a gate/up pair
  std::vector<DevValue> values_;
  // Sibling Linears (consecutive, same input, no epilogue: q/k/v, or q/k of a k_eq_v layer) run
  // as one GEMM over their row-concatenated weights (a load-time fusion like the gate/up pairs);
  // the outputs are copied out of sib_out_ ([rows, total] BF16).
  struct SiblingGroup {
    std::vector<int> steps, weights, cols;  // members in program order
    int total = 0;                          // sum of cols
    DevWeight w;
  };
  std::vector<SiblingGroup> siblings_;
  std::map<int, int> sibling_of_;  // step index → siblings_ index
  bf16* sib_out_ = nullptr;
  int sib_widest_ = 0;
  int sib_done_ = -1;  // group whose GEMM already ran in the current run_steps call
  int run_first_ = 0, run_last_ = 0;  // the step range of the current run_steps call
  std::vector<KvGroup> groups_;
  std::vector<DevKv> kv_;
  int max_blocks_ = 1;
  int value_logits_ = -1;

  // capacities and buffers
  int cap_T_ = 0, cap_S_ = 0, cap_R_ = 0;
  MetaLayout meta_;
  void* value_arena_ = nullptr;  // all values, placed by lifetime (compiled plans; see ensure_capacity)
  void* meta_dev_ = nullptr;
  unsigned char* meta_host_ = nullptr;  // pinned
  bf16* lm_tmp_ = nullptr;              // LmHead: normed rows [cap_R][H]
  int32_t* tokens_dev_ = nullptr;       // argmax_rows / sample_rows: [cap_R] (in lm_tmp_'s allocation)
  cuda::SampleRow* sample_rows_dev_ = nullptr;  // sample_rows: [cap_R] (the same allocation)
  // Token ids computed on the device for the logits `value` by launch(logits, rows, cols, tokens_dev_),
  // copied back; -1 where the value is not fp32 logit rows or exceeds the capacity (tokens.cpp).
  int tokens_on_device(int value, const char* what,
                       const std::function<cudaError_t(const float*, int, int)>& launch,
                       std::vector<int32_t>* out) const;
  void* gemm_ws_ = nullptr;
  size_t gemm_ws_bytes_ = 0;
  void* attn_ws_ = nullptr;
  size_t attn_ws_bytes_ = 0;
  void* read_staging(size_t bytes) const;  // read_host_, grown to at least `bytes`
  int stage_value(int value) const;        // the value's current rows into read_host_; returns rows
  void begin_write(const DevValue& v, size_t n, const char* what) const;  // rows check, stream idle
  int batch_rows(const DevValue& v) const;  // the current batch's rows of v's row space
  mutable void* read_host_ = nullptr;  // pinned staging for read_value / argmax_rows
  mutable size_t read_host_bytes_ = 0;
  int H_ = 0;

  Shape shape_;
  const BatchDesc* batch_ = nullptr;
  LinearObserver observer_;

  // graphs: the plan's graph buckets (graph_buckets.h); an executable graph per launch shape
  // (decode, T, S, R), captured the second time the shape is seen
  using GraphKey = std::tuple<bool, int, int, int>;
  std::vector<GraphBucket> graph_buckets_;
  std::map<GraphKey, cudaGraphExec_t> graphs_;
  std::map<GraphKey, int> bucket_seen_;
  long graph_replays_ = 0, prefill_graph_replays_ = 0, eager_steps_ = 0;
  int graphs_captured_ = 0;
  size_t graph_bytes_ = 0;  // device bytes the live graphs took when uploaded (cudaMemGetInfo)
  bool capturing_ = false;

  // accounting
  size_t weight_bytes_ = 0, kv_bytes_ = 0, arena_bytes_ = 0, ws_bytes_ = 0;
  // weight streaming (streaming.cpp)
  std::vector<StreamedLayer> streamed_;
  std::map<int, int> streamed_index_;  // plan layer → streamed_ index
  void* slot_[2] = {nullptr, nullptr};
  size_t slot_bytes_ = 0;
  cudaEvent_t copied_[2] = {nullptr, nullptr}, freed_[2] = {nullptr, nullptr};
  bool freed_recorded_[2] = {false, false};
  int slot_layer_[2] = {-1, -1};  // streamed_ index whose copy was issued into each slot
  int running_slot_ = -1;         // slot of the streamed layer the compute stream is in
  bool stream_weight(int first_id, int layer) const;  // plan residency / stream_last_layers
  void evict_to_host(DevWeight& w, int layer);        // built on the device → pinned host image
  void setup_streaming();                             // slots + events, after the load
  void stream_enter(int layer);                       // before a streamed layer's first step
  void stream_leave();                                // after its last step
  void issue_layer_copy(int index, int slot);
  void unstream(DevWeight& w);  // drops w from streaming (it then holds no device memory)
  // A weight update of a streamed weight: detach its host image, rebuild the device weight as
  // usual, then write the new bytes into the same image (same size) and drop stale slot copies.
  struct StreamKeep {
    int index = -1;  // streamed_ index, -1: w is resident
    void* host = nullptr;
    size_t slot_off = 0, bytes = 0;
  };
  StreamKeep stream_detach(DevWeight& w);
  void stream_reattach(DevWeight& w, const StreamKeep& k);
  void stream_abandon(DevWeight& w, const StreamKeep& k);  // after a failed rebuild/reattach
  void free_streaming();
  long streamed_copies_ = 0;
  StagedUpload* loader_ = nullptr;  // set while load_weights() runs
  void* stage_ = nullptr;
  size_t stage_bytes_ = 0;
  size_t load_bytes_ = 0;
  double load_seconds_ = 0;  // plan weights marked Streamed (streaming is not implemented: held resident)
  std::vector<void*> allocs_;

  // trace: CUDA events around eager steps / graph replays, resolved at the next sync
  struct Pending {
    std::string name, cat;
    int tid;
    int ev0, ev1;
  };
  std::vector<cudaEvent_t> events_;
  int next_event_ = 0;
  std::vector<Pending> pending_;
  cudaEvent_t trace_ref_ = nullptr;
  double trace_ref_us_ = 0;
  int event();
};

}  // namespace g4c::cudart

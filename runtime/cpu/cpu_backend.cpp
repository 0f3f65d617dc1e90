// The CPU reference backend: every kernel of KERNELS.md over fp32 host arrays.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "models/dtype.h"
#include "models/error.h"
#include "runtime/backend.h"
#include "runtime/cpu/attention.h"
#include "runtime/cpu/kernels.h"
#include "runtime/fp8.h"

namespace g4c::runtime {
namespace {

using plan::fb::KernelId;
namespace fb = plan::fb;

// KV storage of one layer: K and V as [units][tokens per unit][Hkv*D] where a unit is a
// ring (Ring layers) or a block (Paged layers). F32 and BF16 layers hold fp32 elements (BF16
// ones rounded to bf16 values); F8E4M3 layers hold codes there and a scale per (token, head)
// in [units][tokens per unit][Hkv] (runtime/fp8.h).
struct KvStore {
  fb::KvKind kind;
  fb::DType dtype = fb::DType::F32;
  bool windowed = false;  // Paged with a window: blocks of the window pool
  int row = 0;       // Hkv * D elements per token
  int head_dim = 0;  // D
  int unit = 0;      // tokens per ring (capacity) or per block (block_size)
  std::vector<float> k, v;               // F32 / BF16
  std::vector<uint8_t> k_codes, v_codes;  // F8E4M3
  std::vector<float> k_scales, v_scales;  // F8E4M3
  size_t bytes() const {
    return (k.size() + v.size() + k_scales.size() + v_scales.size()) * 4 + k_codes.size() + v_codes.size();
  }
};

class CpuBackend final : public Backend {
 public:
  CpuBackend(int threads, AllocationFault fault) : pool_(threads), fault_(std::move(fault)) {}
  const char* name() const override { return "cpu"; }

  void prepare(const plan::Plan& plan, const WeightStore& weights, const KvSizes& sizes) override {
    plan_ = &plan;
    weights_ = &weights;
    kv_.clear();
    for (const auto* l : *plan->kv()) {
      KvStore s;
      s.kind = l->kind();
      s.dtype = l->dtype();
      s.row = l->num_kv_heads() * l->head_dim();
      s.head_dim = l->head_dim();
      s.unit = l->kind() == fb::KvKind::Ring ? l->capacity() : l->block_size();
      s.windowed = l->kind() == fb::KvKind::Paged && l->window() > 0;
      const size_t units = l->kind() == fb::KvKind::Ring ? sizes.ring_slots
                           : s.windowed                  ? sizes.window_blocks
                                                         : sizes.num_blocks;
      const size_t n = units * s.unit * s.row;
      if (s.dtype == fb::DType::F8E4M3) {
        allocate(s.k_codes, n, "KV cache (K codes)");
        allocate(s.v_codes, n, "KV cache (V codes)");
        allocate(s.k_scales, n / s.head_dim, "KV cache (K scales)");
        allocate(s.v_scales, n / s.head_dim, "KV cache (V scales)");
      } else {
        allocate(s.k, n, "KV cache (K)");
        allocate(s.v, n, "KV cache (V)");
      }
      kv_.push_back(std::move(s));
    }
    values_.assign(plan->values()->size(), {});
    bytes_now_ = weights.total_bytes();
    for (const auto& s : kv_) bytes_now_ += s.bytes();
    peak_ = bytes_now_;
  }

  void execute(const BatchDesc& batch, int first, int last) override {
    if (!plan_) throw Error("cpu backend: execute() before prepare()");
    batch_ = &batch;
    const auto* vals = (*plan_)->values();
    if (first == 0) {
      size_t bytes = 0;
      for (int i = 0; i < int(vals->size()); ++i) {
        allocate(values_[i], size_t(rows_of(i)) * vals->Get(i)->cols(), "step values");
        bytes += values_[i].size() * 4;
      }
      peak_ = std::max(peak_, bytes_now_ + bytes);
    }
    const int max_chunk = (*plan_)->max_chunk_tokens();
    for (const auto& s : batch.seqs)
      if (s.num_rows > max_chunk)
        throw Error("cpu backend: a sequence feeds " + std::to_string(s.num_rows) + " tokens in one step, the plan allows " +
                    std::to_string(max_chunk));
    const auto* prog = (*plan_)->program();
    for (int s = first; s < last; ++s) run_step(s, *prog->Get(s));
  }

  int read_value(int value, std::vector<float>* out) const override {
    *out = values_.at(value);
    return int(values_[value].size() / (*plan_)->values()->Get(value)->cols());
  }

  std::span<const float> host_value(int value) const override { return values_.at(value); }

  void write_value(int value, std::span<const float> data) override {
    values_.at(value).assign(data.begin(), data.end());
  }

  void set_linear_observer(LinearObserver o) override { observer_ = std::move(o); }
  void weights_updated(std::span<const int>) override {}  // computes from the store directly
  size_t peak_bytes() const override { return peak_; }

 private:
  int rows_of(int value) const {
    switch ((*plan_)->values()->Get(value)->rows()) {
      case fb::RowSpace::LogitRows: return int(batch_->logit_rows.size());
      case fb::RowSpace::Sequences: return int(batch_->seqs.size());
      default: return batch_->num_tokens();
    }
  }
  // Sizes `v` to n elements (zero-filled where it grows); a failed allocation, real or
  // injected, becomes a g4c::Error naming it, and `v` keeps its old contents.
  template <typename T>
  void allocate(std::vector<T>& v, size_t n, const char* what) {
    try {
      if (n > v.size() && fault_ && fault_((n - v.size()) * sizeof(T), what)) throw std::bad_alloc();
      v.resize(n);
    } catch (const std::bad_alloc&) {
      throw Error("cpu backend: out of memory allocating " + std::to_string(n * sizeof(T)) + " bytes for " + what);
    } catch (const std::length_error&) {
      throw Error("cpu backend: " + std::to_string(n) + " elements for " + what + " exceed the address space");
    }
  }
  float* val(int id) { return values_[id].data(); }
  int cols(int id) const { return (*plan_)->values()->Get(id)->cols(); }
  const float* weight(const fb::Step& st, int i) const {
    if (!st.weights() || int(st.weights()->size()) <= i) return nullptr;
    int w = st.weights()->Get(i);
    return w < 0 ? nullptr : weights_->data(w);
  }
  int in(const fb::Step& st, int i) const { return st.inputs()->Get(i); }
  int out(const fb::Step& st, int i) const { return st.outputs()->Get(i); }
  int n_outputs(const fb::Step& st) const { return st.outputs() ? int(st.outputs()->size()) : 0; }

  // Index of the KV row of (sequence, position) in its layer's store.
  size_t kv_index(const KvStore& s, int seq, int pos) const {
    const auto& bs = batch_->seqs[seq];
    if (s.kind == fb::KvKind::Ring) return (size_t(bs.ring_slot) * s.unit + pos % s.unit) * s.row;
    const auto* tp = s.windowed ? bs.window_block_table : bs.block_table;
    const size_t block = size_t(pos / s.unit);
    if (!tp || block >= tp->size()) throw Error("cpu backend: position " + std::to_string(pos) + " has no KV block");
    const auto& table = *tp;
    if (table[block] < 0)
      throw Error("cpu backend: position " + std::to_string(pos) + " left the window: its KV block was released");
    return (size_t(table[block]) * s.unit + pos % s.unit) * s.row;
  }

  void kv_write(int kv_layer, const float* k, const float* v) {
    auto& s = kv_[kv_layer];
    for (int r = 0; r < batch_->num_tokens(); ++r) {
      const size_t at = kv_index(s, batch_->seq_of_row[r], batch_->positions[r]);
      const float* kr = k + size_t(r) * s.row;
      const float* vr = v + size_t(r) * s.row;
      if (s.dtype == fb::DType::F8E4M3) {
        for (size_t h = 0; h < size_t(s.row / s.head_dim); ++h) {
          const size_t e = h * s.head_dim;
          s.k_scales[at / s.head_dim + h] = quantize_row_e4m3(kr + e, s.head_dim, &s.k_codes[at + e]);
          s.v_scales[at / s.head_dim + h] = quantize_row_e4m3(vr + e, s.head_dim, &s.v_codes[at + e]);
        }
      } else if (s.dtype == fb::DType::BF16) {
        for (int e = 0; e < s.row; ++e) {
          s.k[at + e] = bf16_to_f32(f32_to_bf16(kr[e]));
          s.v[at + e] = bf16_to_f32(f32_to_bf16(vr[e]));
        }
      } else {
        std::memcpy(&s.k[at], kr, s.row * 4);
        std::memcpy(&s.v[at], vr, s.row * 4);
      }
    }
  }

  void attention(const fb::Step& st) {
    const auto* a = st.attrs();
    const KvStore& s = kv_[a->kv_layer()];
    cpu::KvRows rows{s.k.data(), s.v.data(), [&](int seq, int pos) { return kv_index(s, seq, pos); }};
    if (s.dtype == fb::DType::F8E4M3)
      rows = {nullptr, nullptr, std::move(rows.index), s.k_codes.data(), s.v_codes.data(), s.k_scales.data(),
              s.v_scales.data()};
    cpu::attention(pool_, *batch_, val(in(st, 0)), val(out(st, 0)), a->num_q_heads(), a->num_kv_heads(),
                   a->head_dim(), a->window(), a->scale(), rows);
  }

  void run_step(int index, const fb::Step& st) {
    const auto* a = st.attrs();
    const int T = batch_->num_tokens();
    switch (st.kernel()) {
      case KernelId::Embed: {
        const int H = cols(out(st, 0));
        const float* E = weight(st, 0);
        const int V = int(weights_->shape(st.weights()->Get(0))[0]);
        float* h = val(out(st, 0));
        for (int r = 0; r < T; ++r) {
          const int id = batch_->token_ids[r];
          if (id < 0 || id >= V) throw Error("cpu backend: token id " + std::to_string(id) + " outside the vocabulary");
          for (int c = 0; c < H; ++c) h[size_t(r) * H + c] = E[size_t(id) * H + c] * a->scale();
        }
        break;
      }
      case KernelId::RmsNorm: {
        const int x = in(st, 0);
        cpu::rms_norm(val(x), val(out(st, 0)), rows_of(x), cols(x), a->norm_dim(), weight(st, 0), a->eps());
        break;
      }
      case KernelId::Linear: {
        const int x = in(st, 0), y = out(st, 0);
        if (observer_) observer_(index, val(x), rows_of(x), cols(x));
        const float* residual = a->epilogue() == fb::Epilogue::ResidualAdd ? val(in(st, 1)) : nullptr;
        cpu::linear(pool_, val(x), rows_of(x), cols(x), weight(st, 0), weight(st, 1), cols(y), residual, val(y),
                    a->epilogue());
        break;
      }
      case KernelId::Rope: {
        const int x = in(st, 0), y = out(st, 0);
        if (x != y) values_[y] = values_[x];
        cpu::rope(val(y), T, cols(y), batch_->positions.data(), a->head_dim(), a->rotary_pairs(), a->rope_theta());
        break;
      }
      case KernelId::KvWrite: kv_write(a->kv_layer(), val(in(st, 0)), val(in(st, 1))); break;
      case KernelId::QkNormRopeKvWrite: {
        const int q_raw = in(st, 0), k_raw = in(st, 1), v_raw = in(st, 2), q = out(st, 0);
        const int D = a->head_dim();
        // V first: with v_from_k it reads the raw K projection.
        // Scratch kept across steps: a fresh multi-MB vector per step costs page faults.
        std::vector<float>& v = scratch_[0];
        std::vector<float>& k = scratch_[1];
        v.resize(values_[v_raw].size());
        k.resize(values_[k_raw].size());
        cpu::rms_norm(val(v_raw), v.data(), T, cols(v_raw), D, nullptr, a->eps());
        cpu::rms_norm(val(k_raw), k.data(), T, cols(k_raw), D, weight(st, 1), a->eps());
        cpu::rope(k.data(), T, cols(k_raw), batch_->positions.data(), D, a->rotary_pairs(), a->rope_theta());
        cpu::rms_norm(val(q_raw), val(q), T, cols(q_raw), D, weight(st, 0), a->eps());
        cpu::rope(val(q), T, cols(q), batch_->positions.data(), D, a->rotary_pairs(), a->rope_theta());
        kv_write(a->kv_layer(), k.data(), v.data());
        break;
      }
      case KernelId::Attention: attention(st); break;
      case KernelId::Add:
      case KernelId::Mul: {
        const float* x = val(in(st, 0));
        const float* y = val(in(st, 1));
        float* z = val(out(st, 0));
        const size_t n = values_[in(st, 0)].size();
        if (st.kernel() == KernelId::Add)
          for (size_t i = 0; i < n; ++i) z[i] = x[i] + y[i];
        else
          for (size_t i = 0; i < n; ++i) z[i] = x[i] * y[i];
        break;
      }
      case KernelId::Scale:
      case KernelId::GeluTanh:
      case KernelId::Softcap: {
        const int xi = in(st, 0);
        const float* x = val(xi);
        float* y = val(out(st, 0));
        const size_t n = values_[xi].size();
        const float* sw = st.kernel() == KernelId::Scale ? weight(st, 0) : nullptr;
        const float f = sw ? sw[0] : a->scale(), cap = a->softcap();
        for (size_t i = 0; i < n; ++i)
          y[i] = st.kernel() == KernelId::Scale ? x[i] * f
                 : st.kernel() == KernelId::GeluTanh ? cpu::gelu_tanh(x[i])
                                                     : cap * std::tanh(x[i] / cap);
        break;
      }
      case KernelId::SelectLogitRows: {
        const int x = in(st, 0), c = cols(x);
        float* y = val(out(st, 0));
        for (size_t r = 0; r < batch_->logit_rows.size(); ++r)
          std::memcpy(y + r * c, val(x) + size_t(batch_->logit_rows[r]) * c, c * 4);
        break;
      }
      case KernelId::PostNormResidual: {
        const int H = cols(in(st, 0));
        float* h = val(in(st, 0));
        float* x = val(in(st, 1));
        float* hout = val(out(st, 0));
        const float* scalar = weight(st, 1);
        const float* next = weight(st, 2);
        std::vector<float>& normed = scratch_[0];
        normed.resize(size_t(T) * H);
        cpu::rms_norm(x, normed.data(), T, H, H, weight(st, 0), a->eps());
        const float f = scalar ? scalar[0] : 1.0f;
        for (size_t i = 0; i < normed.size(); ++i) hout[i] = (h[i] + normed[i]) * f;
        if (next && n_outputs(st) > 1) cpu::rms_norm(hout, val(out(st, 1)), T, H, H, next, a->eps());
        break;
      }
      case KernelId::LmHead: {
        const int hv = in(st, 0), H = cols(hv), lv = out(st, 0), V = cols(lv);
        const int R = int(batch_->logit_rows.size());
        std::vector<float> rows(size_t(R) * H);
        for (int r = 0; r < R; ++r)
          std::memcpy(&rows[size_t(r) * H], val(hv) + size_t(batch_->logit_rows[r]) * H, H * 4);
        cpu::rms_norm(rows.data(), rows.data(), R, H, H, weight(st, 0), a->eps());
        float* logits = val(lv);
        cpu::linear(pool_, rows.data(), R, H, weight(st, 1), nullptr, V, nullptr, logits, fb::Epilogue::None);
        if (const float cap = a->softcap(); cap > 0)
          for (size_t i = 0; i < size_t(R) * V; ++i) logits[i] = cap * std::tanh(logits[i] / cap);
        break;
      }
      case KernelId::Argmax: {
        const int lv = in(st, 0), V = cols(lv);
        float* tok = val(out(st, 0));
        for (int r = 0; r < rows_of(lv); ++r) {
          const float* row = val(lv) + size_t(r) * V;
          tok[r] = float(std::max_element(row, row + V) - row);
        }
        break;
      }
      default:
        throw Error("cpu backend: kernel " + std::to_string(int(st.kernel())) + " is not implemented");
    }
  }

  ThreadPool pool_;
  const plan::Plan* plan_ = nullptr;
  const WeightStore* weights_ = nullptr;
  const BatchDesc* batch_ = nullptr;
  std::vector<KvStore> kv_;
  std::vector<std::vector<float>> values_;
  LinearObserver observer_;
  std::vector<float> scratch_[2];  // step temporaries (see QkNormRopeKvWrite)
  size_t bytes_now_ = 0, peak_ = 0;
  AllocationFault fault_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(int threads, AllocationFault fault) {
  return std::make_unique<CpuBackend>(threads, std::move(fault));
}

}  // namespace g4c::runtime

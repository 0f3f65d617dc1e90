// The CUDA backend: device state, batch metadata, eager execution and decode CUDA graphs
// (see cuda_backend.h). Weight upload: cuda_weights.cpp; the per-step kernel mapping: steps.cpp;
// reading and writing plan values: values.cpp.
#include "runtime/cuda_backend/cuda_backend.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "models/error.h"
#include "runtime/cuda_backend/backend_state.h"
#include "runtime/plan/value_arena.h"

namespace g4c::cudart {

CudaBackend::CudaBackend(const runtime::CudaOptions& o) : opts_(o) {
  DeviceOptions d;
  d.device = o.device;
  d.budget_bytes = o.budget_bytes;
  if (!o.emulate.empty()) {
    if (o.emulate != "1g.10gb")
      throw Error("cuda backend: unknown --emulate profile '" + o.emulate + "' (supported: 1g.10gb)");
    d.green_sms = 16;  // Hopper splits SMs in groups of 8; the real 1g.10gb slice has 14 (DESIGN.md §5)
    d.emulation = o.emulate;
    const size_t cap = 9984ull << 20;
    d.budget_bytes = d.budget_bytes ? std::min(d.budget_bytes, cap) : cap;
  }
  device_ = std::make_unique<Device>(d);
  if (!o.trace_path.empty()) {
    trace_ = std::make_unique<runtime::TraceWriter>(o.trace_path);
    trace_->name_track(runtime::TraceWriter::kCompute, "GPU compute stream (CUDA events)");
    trace_->name_track(runtime::TraceWriter::kCopy, "copies");
    trace_->name_track(runtime::TraceWriter::kGraph, "CUDA graph replays");
    check(cudaEventCreate(&trace_ref_), "cudaEventCreate");
    check(cudaEventRecord(trace_ref_, device_->stream()), "cudaEventRecord");
    check(cudaEventSynchronize(trace_ref_), "cudaEventSynchronize");
    trace_ref_us_ = trace_->now_us();
  }
}

CudaBackend::~CudaBackend() {
  if (!device_) return;
  cudaStreamSynchronize(device_->stream());
  try {
    flush_trace();
    if (trace_) {
      auto i = info();
      trace_->instant("peak device bytes " + mib(i.peak_device_bytes), "memory", trace_->now_us());
      trace_->close();
    }
  } catch (...) {
  }
  drop_graphs();
  free_streaming();
  for (auto e : events_) cudaEventDestroy(e);
  if (trace_ref_) cudaEventDestroy(trace_ref_);
  for (void* p : allocs_) cudaFree(p);
  if (meta_host_) cudaFreeHost(meta_host_);
  if (read_host_) cudaFreeHost(read_host_);
}

void* CudaBackend::dmalloc(size_t bytes, const char* what) {
  if (bytes == 0) return nullptr;
  bytes = align256(bytes);
  device_->reserve(bytes, what, breakdown());
  void* p = nullptr;
  const bool injected = opts_.alloc_fault && opts_.alloc_fault(bytes, what);
  check(injected ? cudaErrorMemoryAllocation : cudaMalloc(&p, bytes), what);
  allocs_.push_back(p);
  device_->check_budget(what, breakdown());
  return p;
}

void CudaBackend::upload(void* dst, const void* src, size_t bytes, const char* what) {
  if (!bytes) return;
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, device_->stream()), what);
  check(cudaStreamSynchronize(device_->stream()), what);
}

void CudaBackend::zero(void* dst, size_t bytes, const char* what) {
  if (bytes) check(cudaMemsetAsync(dst, 0, bytes, device_->stream()), what);
}

void CudaBackend::dfree(void*& p) {
  if (!p) return;
  auto it = std::find(allocs_.begin(), allocs_.end(), p);
  if (it != allocs_.end()) allocs_.erase(it);
  cudaFree(p);
  p = nullptr;
}

std::string CudaBackend::breakdown() const {
  return "  context " + mib(device_->context_bytes()) + ", weights " + mib(weight_bytes_) + ", KV " + mib(kv_bytes_) +
         ", activations " + mib(arena_bytes_) + ", workspaces " + mib(ws_bytes_) + ", CUDA graphs " +
         std::to_string(graphs_.size()) + " (" + mib(graph_bytes_) + ")" +
         (streamed_.empty() ? std::string()
                            : "\n  " + std::to_string(streamed_.size()) + " layers stream from pinned host memory (two " +
                                  mib(slot_bytes_) + " slots, counted in weights)");
}

void CudaBackend::prepare(const plan::Plan& plan, const runtime::WeightStore& weights, const runtime::KvSizes& kv) {
  plan_ = &plan;
  store_ = &weights;
  const auto* cfg = plan->model();
  H_ = cfg->hidden_size();
  value_logits_ = plan->logits_value();
  const auto t0 = trace_ ? trace_->now_us() : 0.0;

  // Values: BF16, except the logits (fp32) and Argmax outputs (int32).
  const auto* vals = plan->values();
  values_.assign(vals->size(), {});
  for (int i = 0; i < int(vals->size()); ++i) {
    values_[i].cols = vals->Get(i)->cols();
    values_[i].rows = vals->Get(i)->rows();
    if (vals->Get(i)->dtype() == fb::DType::I32) values_[i].type = VType::I32;
  }
  if (value_logits_ >= 0) values_[value_logits_].type = VType::F32;
  for (const auto* st : *plan->program()) {
    if (st->kernel() == fb::KernelId::LmHead) values_.at(st->outputs()->Get(0)).type = VType::F32;
    if (st->kernel() == fb::KernelId::Argmax) values_.at(st->outputs()->Get(0)).type = VType::I32;
  }

  // Weights first, then the activation arena and workspaces; the KV pools get what the budget
  // leaves (fit_kv), so a budget that cannot hold `kv` shrinks the pools instead of failing.
  // KV slot mappings: one per (kind, unit, pool); their sizes are set once the pools are fitted.
  groups_.clear();
  for (const auto* l : *plan->kv()) {
    const bool ring = l->kind() == fb::KvKind::Ring;
    const bool windowed = !ring && l->window() > 0;
    const int unit = ring ? l->capacity() : l->block_size();
    if (unit <= 0) throw Error("cuda backend: KV layer " + std::to_string(l->layer()) + " has no capacity/block size");
    bool seen = false;
    for (const auto& gr : groups_) seen |= gr.kind == l->kind() && gr.unit == unit && gr.windowed == windowed;
    if (!seen) groups_.push_back({l->kind(), unit, 0, windowed});
  }
  // Before load_weights: it sizes the GEMM workspace, which deterministic mode makes larger.
  kopts_ = launch_options(opts_, false);
  load_weights();
  // The decode-step kernels may start before the kernel before them ends (they read only
  // weights or already-cached keys until their wait) — not while a streamed weight can still be
  // landing in a slot.
  kopts_ = launch_options(opts_, !streamed_.empty());
  graph_buckets_ = graph_buckets(plan.root());
  max_blocks_ = std::max(1, kv.table_blocks > 0 ? kv.table_blocks : kv.num_blocks);  // block-table width: the most one sequence may need
  // Activations for the engine's largest step before KV is sized (growing later could not fit).
  ensure_capacity(std::max({1, opts_.max_tokens, std::min(kv.step_tokens, (*plan_)->max_chunk_tokens() * std::max(1, kv.ring_slots))}),
                  std::max(1, kv.ring_slots), std::max(16, kv.ring_slots));
  check(cudaStreamSynchronize(device_->stream()), "loading weights");
  kv_sizes_ = fit_kv(kv);
  for (auto& gr : groups_)
    gr.scratch = int64_t(gr.kind == fb::KvKind::Ring ? kv_sizes_.ring_slots
                         : gr.windowed                ? kv_sizes_.window_blocks
                                                      : kv_sizes_.num_blocks) *
                 gr.unit;

  // KV storage; one extra scratch slot per cache for padded rows. One allocation carved at 256 B:
  // per-cache cudaMallocs each round up to the driver's 2 MiB granularity (96 caches on the 12B:
  // up to 192 MiB unaccounted, measured 1 MiB over the budget).
  kv_.clear();
  size_t pool = 0;
  std::vector<std::array<size_t, 2>> cache_bytes;  // per K (and V): data, FP8 scales
  for (const auto* l : *plan->kv()) {
    const bool ring = l->kind() == fb::KvKind::Ring;
    const bool windowed = !ring && l->window() > 0;
    const int unit = ring ? l->capacity() : l->block_size();
    int g = 0;
    while (!(groups_[g].kind == l->kind() && groups_[g].unit == unit && groups_[g].windowed == windowed)) ++g;
    DevKv d;
    d.row = l->num_kv_heads() * l->head_dim();
    d.heads = l->num_kv_heads();
    d.head_dim = l->head_dim();
    d.group = g;
    d.window = l->window();
    const bool f8 = l->dtype() == fb::DType::F8E4M3;
    const size_t slots = size_t(groups_[g].scratch + 1);
    const std::array<size_t, 2> bytes{align256(slots * d.row * (f8 ? 1 : 2)), f8 ? align256(slots * d.heads * 4) : 0};
    cache_bytes.push_back(bytes);
    pool += 2 * (bytes[0] + bytes[1]);  // K and V
    kv_.push_back(d);
  }
  unsigned char* base = pool ? static_cast<unsigned char*>(dmalloc(pool, "KV cache pool")) : nullptr;
  kv_bytes_ = pool;
  for (size_t i = 0; i < kv_.size(); ++i) {
    auto& d = kv_[i];
    const auto [data, scales] = cache_bytes[i];
    if (scales) {
      d.k8 = base;
      d.v8 = base + data;
      d.k_scale = reinterpret_cast<float*>(base + 2 * data);
      d.v_scale = reinterpret_cast<float*>(base + 2 * data + scales);
    } else {
      d.k = reinterpret_cast<bf16*>(base);
      d.v = reinterpret_cast<bf16*>(base + data);
    }
    base += 2 * (data + scales);
  }
  device_->check_budget("after loading the weights and allocating KV + activations", breakdown());
  if (trace_)
    trace_->complete("prepare (weights, KV, arena)", "load", t0, trace_->now_us() - t0, runtime::TraceWriter::kHost,
                     {{"weight_bytes", std::to_string(weight_bytes_)}, {"kv_bytes", std::to_string(kv_bytes_)}});
}

// The KV pools the budget allows, given what is already held (context, weights, arena,
// workspaces) and a reserve for what comes later (CUDA graph executables, lazily loaded kernel
// modules, cudaMemGetInfo's 2 MiB granularity). Ring slots are capped by the batch, paged blocks
// by `want`; the full-layer and window pools shrink together, in the proportion asked; at least
// one ring slot and the blocks of one longest sequence must fit, else the budget is too small
// for this model and that is an error naming the numbers.
runtime::KvSizes CudaBackend::fit_kv(const runtime::KvSizes& want) {
  size_t per_slot = 0, per_block = 0, per_wblock = 0, fixed = 0;  // bytes per ring slot / full / window block
  for (const auto* l : *(*plan_)->kv()) {
    const bool ring = l->kind() == fb::KvKind::Ring;
    const size_t row = plan::kv_token_bytes(*l, 2);  // K and V of a token as stored here (bf16 or FP8)
    (ring ? per_slot : l->window() > 0 ? per_wblock : per_block) += size_t(ring ? l->capacity() : l->block_size()) * row;
    // The scratch row written by padded tokens + the 256-byte alignment of K and V (and of their
    // scales in an FP8 layer).
    fixed += row + (l->dtype() == fb::DType::F8E4M3 ? 4 : 2) * 256;
  }
  fixed += size_t(2) << 20;  // the pool's one allocation rounds up to the driver's 2 MiB granularity
  const size_t budget = device_->options().budget_bytes;
  if (!budget) return want;
  const size_t used = device_->used_bytes();
  const size_t reserve = size_t(kKvReserveMiB) << 20;
  const size_t avail = budget > used + reserve + fixed ? budget - used - reserve - fixed : 0;
  runtime::KvSizes got = want;
  const size_t seqs = size_t(std::max(1, want.ring_slots));
  const size_t one_seq_blocks = size_t(std::max(1, want.num_blocks)) / seqs;  // blocks of one longest sequence
  const size_t one_seq_wblocks = size_t(std::max(0, want.window_blocks)) / seqs;
  auto need = [&](size_t slots, size_t blocks, size_t wblocks) {
    return slots * per_slot + blocks * per_block + wblocks * per_wblock;
  };
  const size_t one_seq = need(0, per_block ? one_seq_blocks : 0, per_wblock ? one_seq_wblocks : 0);
  while (got.ring_slots > 1 && got.ring_slots * per_slot + one_seq > avail) --got.ring_slots;
  if (per_block || per_wblock) {
    const size_t left = avail > got.ring_slots * per_slot ? avail - got.ring_slots * per_slot : 0;
    const size_t asked = need(0, per_block ? size_t(want.num_blocks) : 0, per_wblock ? size_t(want.window_blocks) : 0);
    const double f = asked > left ? double(left) / double(asked) : 1.0;
    if (per_block) got.num_blocks = int(double(want.num_blocks) * f);
    if (per_wblock) got.window_blocks = int(double(want.window_blocks) * f);
  }
  if (got.ring_slots * per_slot + one_seq > avail || (per_block && size_t(got.num_blocks) < std::max<size_t>(1, one_seq_blocks)) ||
      (per_wblock && size_t(got.window_blocks) < std::max<size_t>(1, one_seq_wblocks)))
    throw Error("cuda backend: the budget of " + mib(budget) + " leaves " + mib(avail) +
                " for KV after the weights, activations and a " + std::to_string(kKvReserveMiB) +
                " MiB reserve, less than one sequence needs (" + mib(per_slot + one_seq) + ")\n" + breakdown());
  return got;
}

// Grows the activation arena, metadata and workspaces to hold T tokens / S sequences / R logit
// rows. Growing moves buffers, so captured graphs are dropped.
void CudaBackend::ensure_capacity(int T, int S, int R) {
  if (T <= cap_T_ && S <= cap_S_ && R <= cap_R_) return;
  check(cudaStreamSynchronize(device_->stream()), "synchronize before growing buffers");
  drop_graphs();
  const int want_T = std::max(cap_T_, T), want_S = std::max(cap_S_, S), want_R = std::max(cap_R_, R);
  // Everything is freed before anything is allocated (a tight budget holds one generation of
  // buffers); until all allocations succeeded the capacities read 0, so a failed growth (over
  // budget) leaves no null buffer behind a capacity that claims it exists.
  cap_T_ = cap_S_ = cap_R_ = 0;
  if (value_arena_) {
    dfree(value_arena_);
    for (auto& v : values_) v.ptr = nullptr;
  } else {
    for (auto& v : values_) dfree(v.ptr);
  }
  dfree(meta_dev_);
  dfree(reinterpret_cast<void*&>(lm_tmp_));
  tokens_dev_ = nullptr;
  dfree(attn_ws_);
  dfree(reinterpret_cast<void*&>(sib_out_));
  grow_buffers(want_T, want_S, want_R);
  cap_T_ = want_T;
  cap_S_ = want_S;
  cap_R_ = want_R;
}

// ensure_capacity's allocations, for cap_T × cap_S × cap_R (all buffers freed before).
void CudaBackend::grow_buffers(int cap_T, int cap_S, int cap_R) {
  arena_bytes_ = 0;
  ws_bytes_ = gemm_ws_bytes_ ? align256(gemm_ws_bytes_) : 0;
  // Value buffers. A reference plan reuses a dozen named values across layers: one buffer each
  // (measured: liveness sharing would save only 1.45x on the tiny plan). A compiled plan has a
  // value per layer result (144 on the tiny model, ~1.9 GB at 512 rows for 12B): its values are
  // placed in one arena by lifetime (value_arena.h; sibling outputs count as written at the
  // group's GEMM), which is used when it is at least 4x smaller than one buffer per value.
  std::vector<size_t> vbytes(values_.size());
  size_t separate = 0;
  for (size_t i = 0; i < values_.size(); ++i) {
    const auto& v = values_[i];
    const int rows = v.rows == fb::RowSpace::LogitRows ? cap_R : v.rows == fb::RowSpace::Sequences ? cap_S : cap_T;
    vbytes[i] = size_t(rows) * v.cols * v.elem();
    separate += align256(vbytes[i]);
  }
  auto life = plan::value_lifetimes(*plan_);
  const auto* prog = (*plan_)->program();
  for (const auto& g : siblings_)
    for (int k : g.steps) {
      auto& l = life[prog->Get(k)->outputs()->Get(0)];
      l.first = std::min(l.first, g.steps[0]);
    }
  for (size_t i = 0; i < life.size(); ++i)
    if (life[i].first < 0) life[i] = {0, int(prog->size())};  // untouched by the program: keep apart
  const plan::ArenaLayout layout = plan::place_values(life, vbytes);
  if (opts_.share_values == 1 || (opts_.share_values < 0 && layout.bytes * 4 <= separate)) {
    value_arena_ = dmalloc(layout.bytes, "activation arena (values placed by lifetime)");
    zero(value_arena_, align256(layout.bytes), "cudaMemset(arena)");
    for (size_t i = 0; i < values_.size(); ++i)
      values_[i].ptr = vbytes[i] ? static_cast<unsigned char*>(value_arena_) + layout.offset[i] : nullptr;
    arena_bytes_ += align256(layout.bytes);
  } else {
    for (size_t i = 0; i < values_.size(); ++i) {
      auto& v = values_[i];
      v.ptr = dmalloc(vbytes[i], "activation arena");
      zero(v.ptr, align256(vbytes[i]), "cudaMemset(arena)");
      arena_bytes_ += align256(vbytes[i]);
    }
  }
  // The LM head's normed rows, then argmax_rows' / sample_rows' tokens [cap_R], then sample_rows'
  // parameters [cap_R].
  const size_t lm_bytes = align256(size_t(cap_R) * H_ * 2), tok_bytes = align256(size_t(cap_R) * 4),
               row_bytes = align256(size_t(cap_R) * sizeof(cuda::SampleRow));
  lm_tmp_ = static_cast<bf16*>(dmalloc(lm_bytes + tok_bytes + row_bytes, "LM head rows, device tokens"));
  tokens_dev_ = reinterpret_cast<int32_t*>(reinterpret_cast<unsigned char*>(lm_tmp_) + lm_bytes);
  sample_rows_dev_ = reinterpret_cast<cuda::SampleRow*>(reinterpret_cast<unsigned char*>(lm_tmp_) + lm_bytes + tok_bytes);
  arena_bytes_ += lm_bytes + tok_bytes + row_bytes;
  if (sib_widest_ > 0) {
    sib_out_ = static_cast<bf16*>(dmalloc(size_t(cap_T) * sib_widest_ * 2, "sibling Linear outputs"));
    arena_bytes_ += align256(size_t(cap_T) * sib_widest_ * 2);
  }
  // Attention split-KV workspace: the most any step asks for — splits happen only for
  // decode-sized chunks (max_q_len · group ≤ 16), and fewer of them the more sequences a step
  // has (one wave of blocks, attention.cu), so the largest need is found by trying every
  // sequence count and chunk length with unbounded keys.
  size_t attn = 0;
  const int sms = cuda::gemm_stream_sms(device_->stream());
  for (const auto* st : *(*plan_)->program()) {
    if (st->kernel() != fb::KernelId::Attention) continue;
    const auto* a = st->attrs();
    const int hq = a->num_q_heads(), hkv = std::max(1, a->num_kv_heads()), d = a->head_dim();
    for (int n = 1; n <= cap_S; ++n)
      for (int q = 1; q * std::max(1, hq / hkv) <= 16; ++q) {
        cuda::AttnBatch b;
        b.num_requests = n;
        b.max_q_len = q;
        b.total_q = std::min(cap_T, n * q);
        b.max_kv_len = 1 << 30;
        attn = std::max(attn, cuda::attention_workspace_bytes(
                                  b, hq, d, cuda::attention_num_splits(b, hq, hkv, d, a->window(), sms)));
      }
  }
  attn_ws_bytes_ = attn;
  attn_ws_ = dmalloc(attn, "attention workspace");
  ws_bytes_ += align256(attn);
  // Metadata.
  MetaLayout m = layout_meta(cap_T, cap_S, cap_R, int(groups_.size()), max_blocks_);
  meta_ = m;
  meta_dev_ = dmalloc(m.bytes, "batch metadata");
  ws_bytes_ += align256(m.bytes);
  if (meta_host_) cudaFreeHost(meta_host_);
  check(cudaMallocHost(reinterpret_cast<void**>(&meta_host_), m.bytes), "cudaMallocHost(metadata)");
  std::memset(meta_host_, 0, m.bytes);
}

int CudaBackend::rows_of(int value, const Shape& sh) const {
  switch (values_[value].rows) {
    case fb::RowSpace::LogitRows: return sh.R;
    case fb::RowSpace::Sequences: return sh.S;
    default: return sh.T;
  }
}

void CudaBackend::fill_meta(const BatchDesc& b, const Shape& sh) {
  const size_t bytes = cudart::fill_meta(b, sh, groups_, meta_, max_blocks_, kv_sizes_.ring_slots, meta_host_);
  const int e0 = trace_on() ? event() : -1;
  if (e0 >= 0) check(cudaEventRecord(events_[e0], device_->stream()), "cudaEventRecord");
  check(cudaMemcpyAsync(meta_dev_, meta_host_, bytes, cudaMemcpyHostToDevice, device_->stream()), "metadata upload");
  if (e0 >= 0) {
    const int e1 = event();
    check(cudaEventRecord(events_[e1], device_->stream()), "cudaEventRecord");
    pending_.push_back({"batch metadata H2D " + std::to_string(bytes) + " B", "copy", runtime::TraceWriter::kCopy, e0, e1});
  }
}

void CudaBackend::wait() const { check(cudaStreamSynchronize(device_->stream()), "wait for the queued steps"); }

void CudaBackend::execute(const BatchDesc& batch, int first, int last) {
  if (!plan_) throw Error("cuda backend: execute() before prepare()");
  const int nsteps = int((*plan_)->program()->size());
  if (first < 0 || last > nsteps || first > last) throw Error("cuda backend: bad step range");
  // Values placed by whole-program lifetime may share bytes: a piece could find its inputs, or
  // leave its outputs, overwritten (value_arena.h). Refuse instead of computing garbage.
  if (value_arena_ && (first > 0 || last < nsteps))
    throw Error("cuda backend: piecewise execution (steps " + std::to_string(first) + ".." + std::to_string(last) +
                ") needs one buffer per value; this plan's values share an arena (CudaOptions::share_values = 0)");
  const double t0 = trace_ ? trace_->now_us() : 0.0;
  if (first == 0) {
    check(cudaStreamSynchronize(device_->stream()), "synchronize before a new batch");
    flush_trace();
    const int max_chunk = (*plan_)->max_chunk_tokens();
    Shape sh;
    sh.real_T = sh.T = batch.num_tokens();
    sh.real_S = sh.S = int(batch.seqs.size());
    sh.real_R = sh.R = int(batch.logit_rows.size());
    bool decode = sh.T > 0 && sh.T == sh.S && sh.R == sh.T;
    for (const auto& s : batch.seqs) {
      if (s.num_rows > max_chunk)
        throw Error("cuda backend: a sequence feeds " + std::to_string(s.num_rows) + " tokens in one step, the plan allows " +
                    std::to_string(max_chunk));
      sh.max_q_len = std::max(sh.max_q_len, s.num_rows);
      if (s.num_rows > 0) sh.max_kv_len = std::max(sh.max_kv_len, batch.positions[s.first_row + s.num_rows - 1] + 1);
      decode &= s.num_rows == 1;
    }
    ensure_capacity(sh.T, sh.S, sh.R);
    // Streamed layers alternate between two slots: their pointers change, so no graphs.
    const bool graphs_ok = opts_.graphs && !observer_ && !device_observer_ && streamed_.empty() && last == nsteps;
    // A bucket's sequences beyond the KV's ring slots would only pad (as decode always has).
    const int cap_S = std::min(cap_S_, std::max(1, kv_sizes_.ring_slots));
    const auto padded =
        graphs_ok && sh.T > 0 ? bucket_shape(graph_buckets_, sh, decode, cap_T_, cap_S, cap_R_) : std::nullopt;
    const bool graph = padded.has_value();
    if (graph) sh = *padded;
    shape_ = sh;
    batch_ = &batch;
    fill_meta(batch, sh);
    if (graph) {
      const GraphKey key{decode, sh.T, sh.S, sh.R};
      auto it = graphs_.find(key);
      if (it == graphs_.end() && bucket_seen_[key]++ > 0) {
        // Second sighting of this bucket: capture (the first ran eagerly, which also ran every
        // lazy one-time setup in the kernels outside the capture).
        cudaGraph_t g = nullptr;
        const size_t before = device_->used_bytes();
        check(cudaStreamBeginCapture(device_->stream(), cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
        capturing_ = true;
        try {
          run_steps(0, nsteps);
        } catch (...) {
          capturing_ = false;
          cudaStreamEndCapture(device_->stream(), &g);
          if (g) cudaGraphDestroy(g);
          throw;
        }
        capturing_ = false;
        check(cudaStreamEndCapture(device_->stream(), &g), "cudaStreamEndCapture");
        cudaGraphExec_t exec = nullptr;
        check(cudaGraphInstantiate(&exec, g, 0), "cudaGraphInstantiate");
        cudaGraphDestroy(g);
        it = graphs_.emplace(key, exec).first;
        ++graphs_captured_;
        // The executable's device memory, uploaded now so that it is counted here (cudaMemGetInfo
        // granularity: 2 MiB) and checked against the budget before the first replay.
        check(cudaGraphUpload(exec, device_->stream()), "cudaGraphUpload");
        check(cudaStreamSynchronize(device_->stream()), "synchronize after a graph upload");
        const size_t after = device_->used_bytes();
        graph_bytes_ += after > before ? after - before : 0;
        device_->check_budget("after capturing a CUDA graph", breakdown());
      }
      if (it != graphs_.end()) {
        const int e0 = trace_on() ? event() : -1;
        if (e0 >= 0) check(cudaEventRecord(events_[e0], device_->stream()), "cudaEventRecord");
        check(cudaGraphLaunch(it->second, device_->stream()), "cudaGraphLaunch");
        if (e0 >= 0) {
          const int e1 = event();
          check(cudaEventRecord(events_[e1], device_->stream()), "cudaEventRecord");
          pending_.push_back({decode ? "decode graph S=" + std::to_string(sh.S) + " (" + std::to_string(sh.real_S) + " live)"
                                     : "prefill graph T=" + std::to_string(sh.T) + " S=" + std::to_string(sh.S) + " (" +
                                           std::to_string(sh.real_T) + " tokens)",
                              "graph", runtime::TraceWriter::kGraph, e0, e1});
        }
        ++graph_replays_;
        if (!decode) ++prefill_graph_replays_;
        if (trace_)
          trace_->complete("step (graph)", "scheduler", t0, trace_->now_us() - t0, runtime::TraceWriter::kHost,
                           {{"tokens", std::to_string(sh.real_T)}, {"sequences", std::to_string(sh.real_S)}});
        return;
      }
    }
  } else if (batch_ != &batch) {
    throw Error("cuda backend: execute() with first_step > 0 needs the batch of the previous call");
  }
  run_steps(first, last);
  ++eager_steps_;
  if (trace_)
    trace_->complete("step", "scheduler", t0, trace_->now_us() - t0, runtime::TraceWriter::kHost,
                     {{"tokens", std::to_string(shape_.real_T)}, {"sequences", std::to_string(shape_.real_S)},
                      {"steps", std::to_string(last - first)}});
}

void CudaBackend::run_steps(int first, int last) {
  const auto* prog = (*plan_)->program();
  sib_done_ = -1;
  run_first_ = first;
  run_last_ = last;
  int in_layer = -2;  // layer of the previous step (streamed layers are entered and left around runs)
  bool in_streamed = false;
  // A throwing step still leaves its streamed layer: the slot-free event must follow the
  // kernels already queued on it.
  struct Leave {
    CudaBackend* b;
    bool* in;
    ~Leave() {
      if (*in) try {
          b->stream_leave();
        } catch (...) {
        }
    }
  } leave{this, &in_streamed};
  for (int i = first; i < last; ++i) {
    const auto* st = prog->Get(i);
    if (!streamed_.empty() && st->layer() != in_layer) {
      if (in_streamed) stream_leave();
      in_layer = st->layer();
      in_streamed = streamed_index_.count(in_layer) > 0;
      if (in_streamed) stream_enter(in_layer);
    }
    const bool timed = trace_on() && !capturing_;
    const int e0 = timed ? event() : -1;
    if (timed) check(cudaEventRecord(events_[e0], device_->stream()), "cudaEventRecord");
    run_step(i, *st);
    if (!capturing_) {
      const cudaError_t e = cudaGetLastError();
      if (e != cudaSuccess)
        throw Error(std::string("cuda backend: step ") + std::to_string(i) + " (" +
                    (st->label() ? st->label()->str() : "?") + "): " + cudaGetErrorString(e));
    }
    if (timed) {
      const int e1 = event();
      check(cudaEventRecord(events_[e1], device_->stream()), "cudaEventRecord");
      pending_.push_back({st->label() ? st->label()->str() : plan::kernel_name(st->kernel()),
                          plan::kernel_name(st->kernel()), runtime::TraceWriter::kCompute, e0, e1});
    }
  }
  if (in_streamed) {
    in_streamed = false;
    stream_leave();
  }
}

int CudaBackend::event() {
  if (next_event_ == int(events_.size())) {
    cudaEvent_t e;
    check(cudaEventCreate(&e), "cudaEventCreate");
    events_.push_back(e);
  }
  return next_event_++;
}

void CudaBackend::flush_trace() {
  if (!trace_ || pending_.empty()) {
    next_event_ = 0;
    return;
  }
  check(cudaStreamSynchronize(device_->stream()), "synchronize for the trace");
  if (!streamed_.empty()) check(cudaStreamSynchronize(device_->copy_stream()), "synchronize for the trace (copies)");
  for (const auto& p : pending_) {
    float a = 0, b = 0;
    check(cudaEventElapsedTime(&a, trace_ref_, events_[p.ev0]), "cudaEventElapsedTime");
    check(cudaEventElapsedTime(&b, trace_ref_, events_[p.ev1]), "cudaEventElapsedTime");
    trace_->complete(p.name, p.cat, trace_ref_us_ + a * 1000.0, (b - a) * 1000.0, p.tid);
  }
  pending_.clear();
  next_event_ = 0;
}

void CudaBackend::drop_graphs() {
  for (auto& [b, g] : graphs_) cudaGraphExecDestroy(g);
  graphs_.clear();
  graph_bytes_ = 0;
}

runtime::CudaInfo CudaBackend::info() const {
  runtime::CudaInfo i;
  i.device = device_->describe();
  i.emulation = device_->options().emulation;
  i.sms = device_->sms();
  i.budget_bytes = device_->options().budget_bytes;
  i.peak_device_bytes = device_->peak_bytes();
  i.context_bytes = device_->context_bytes();
  i.weight_bytes = weight_bytes_;
  i.kv_bytes = kv_bytes_;
  i.arena_bytes = arena_bytes_;
  i.workspace_bytes = ws_bytes_;
  i.streamed_layers = int(streamed_.size());
  for (const auto& L : streamed_) i.streamed_bytes += L.bytes;
  i.streamed_copies = streamed_copies_;
  i.load_bytes = load_bytes_;
  i.load_seconds = load_seconds_;
  i.graphs_captured = graphs_captured_;
  i.graph_replays = graph_replays_;
  i.prefill_graph_replays = prefill_graph_replays_;
  i.graph_bytes = graph_bytes_;
  i.eager_steps = eager_steps_;
  return i;
}

}  // namespace g4c::cudart

namespace g4c::runtime {

std::unique_ptr<Backend> make_cuda_backend(const CudaOptions& options) {
  return std::make_unique<cudart::CudaBackend>(options);
}

bool cuda_device_available() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

CudaInfo cuda_info(const Backend& b) {
  const auto* c = dynamic_cast<const cudart::CudaBackend*>(&b);
  if (!c) throw Error(std::string("cuda_info: backend '") + b.name() + "' is not the CUDA backend");
  return c->info();
}

namespace {
const cudart::CudaBackend& as_cuda(const Backend& b, const char* who) {
  const auto* c = dynamic_cast<const cudart::CudaBackend*>(&b);
  if (!c) throw Error(std::string(who) + ": backend '" + b.name() + "' is not the CUDA backend");
  return *c;
}
}  // namespace

void* cuda_stream(const Backend& b) { return as_cuda(b, "cuda_stream").stream(); }

void cuda_check_budget(const Backend& b, const std::string& where) { as_cuda(b, "cuda_check_budget").check_budget(where); }

size_t parse_budget(const std::string& text) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (...) {
    throw Error("--budget: '" + text + "' is not a size (e.g. 9984MiB, 10GB)");
  }
  std::string unit = text.substr(used);
  double mult = double(1 << 20);
  if (unit == "" || unit == "MiB" || unit == "M") mult = double(1 << 20);
  else if (unit == "GiB" || unit == "G") mult = double(1ull << 30);
  else if (unit == "MB") mult = 1e6;
  else if (unit == "GB") mult = 1e9;
  else if (unit == "B") mult = 1;
  else throw Error("--budget: unknown unit '" + unit + "' in '" + text + "' (MiB, GiB, MB, GB, B)");
  if (!(v >= 0)) throw Error("--budget: negative size '" + text + "'");
  return size_t(v * mult);
}

}  // namespace g4c::runtime

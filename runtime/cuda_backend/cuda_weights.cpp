// Weight upload of the CUDA backend: dense weights → BF16, INT4 Linears read raw from the
// checkpoint and repacked (cuda::int4_repack), gate/up pairs fused into one weight. During the
// load every host → device copy goes through a pinned double buffer (staging.h) and the raw
// tensors through one reused device staging buffer, all in stream order: no synchronize per
// tensor; progress bar over the bytes read.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "models/error.h"
#include "models/progress.h"
#include "models/safetensors.h"
#include "runtime/cuda_backend/backend_state.h"
#include "runtime/cuda_backend/bf16.h"
#include "runtime/cuda_backend/staging.h"
#include "runtime/int8_rows.h"
#include "runtime/thread_pool.h"

namespace g4c::cudart {
namespace {

// The BF16 bits of store weight `id` (numel values): the checkpoint's own bits while the store
// still holds them (WeightStore::checkpoint_bf16; the same bits to_bf16 gives back, without a
// copy), else converted from the store's fp32 values into `scratch` (e.g. after a GPTQ update).
const uint16_t* store_bf16(const runtime::WeightStore& store, int id, std::vector<uint16_t>& scratch) {
  const size_t n = store.numel(id);
  const std::span<const uint16_t> raw = store.checkpoint_bf16(id);
  if (raw.size() == n) return raw.data();
  scratch.resize(n);
  to_bf16(store.data(id), scratch.data(), n);
  return scratch.data();
}

}  // namespace

void CudaBackend::upload_weight(void* dst, const void* src, size_t bytes, const char* what) {
  if (loader_)
    loader_->copy(dst, src, bytes, what);
  else
    upload(dst, src, bytes, what);
}

void* CudaBackend::stage(size_t bytes, const char* what) {
  if (bytes <= stage_bytes_) return stage_;
  // Kernels enqueued earlier may still read the old buffer.
  check(cudaStreamSynchronize(device_->stream()), what);
  const size_t want = std::max(bytes, stage_bytes_ + stage_bytes_ / 4);  // fewer regrowths
  dfree(stage_);
  ws_bytes_ -= std::min(ws_bytes_, align256(stage_bytes_));
  stage_bytes_ = 0;
  stage_ = dmalloc(want, what);
  stage_bytes_ = want;
  ws_bytes_ += align256(want);
  return stage_;
}

void CudaBackend::release_stage() {
  if (!stage_) return;
  check(cudaStreamSynchronize(device_->stream()), "weight staging");
  dfree(stage_);
  ws_bytes_ -= std::min(ws_bytes_, align256(stage_bytes_));
  stage_bytes_ = 0;
}

void CudaBackend::free_weight(DevWeight& w) {
  if (w.host) unstream(w);
  if (w.mem) {
    weight_bytes_ -= std::min(weight_bytes_, align256(w.bytes));
    dfree(w.mem);
  }
  w = DevWeight{};
}

void CudaBackend::upload_int8_rows(int id) {
  DevWeight& w = weights_[id];
  free_weight(w);
  const auto& shape = store_->shape(id);
  const int64_t rows = shape[0], cols = shape[1];
  if (cols % 16 != 0) throw Error("cuda backend: the INT8 table " + store_->name(id) + " needs a multiple of 16 columns");
  // Codes and row scales on the host (runtime/int8_rows.h), from the checkpoint's BF16 bits while
  // the store holds them, else from its fp32 values (which already are the table's values: their
  // codes are the same and each scale within an ulp).
  const size_t codes = size_t(rows * cols), at = align256(codes);
  std::vector<unsigned char> host(at + size_t(rows) * 4);
  auto* q = reinterpret_cast<int8_t*>(host.data());
  auto* sc = reinterpret_cast<float*>(host.data() + at);
  const std::span<const uint16_t> raw = store_->checkpoint_bf16(id);
  const float* f32 = raw.size() == codes ? nullptr : store_->data(id);
  runtime::parallel_chunks(rows, 0, 1024, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r)
      sc[r] = f32 ? runtime::quantize_row_int8(f32 + r * cols, size_t(cols), q + r * cols)
                  : runtime::quantize_row_int8_bf16(raw.data() + r * cols, size_t(cols), q + r * cols);
  });
  w.bytes = host.size();
  w.mem = dmalloc(w.bytes, ("weight " + store_->name(id)).c_str());
  weight_bytes_ += align256(w.bytes);
  upload_weight(w.mem, host.data(), w.bytes, "INT8 table upload");  // returns once `host` is read
  w.kind = DevWeight::kInt8Rows;
  w.rw.q = static_cast<const int8_t*>(w.mem);
  w.rw.scale = reinterpret_cast<const float*>(static_cast<const unsigned char*>(w.mem) + at);
  w.rw.n = int(rows);
  w.rw.k = int(cols);
}

void CudaBackend::upload_dense(int id) {
  if ((*plan_)->weights()->Get(id)->format() == fb::WeightFormat::Int8Rows) return upload_int8_rows(id);
  DevWeight& w = weights_[id];
  free_weight(w);
  const size_t n = store_->numel(id);
  w.bytes = n * 2;
  w.mem = dmalloc(w.bytes, ("weight " + store_->name(id)).c_str());
  weight_bytes_ += align256(w.bytes);
  std::vector<uint16_t> scratch;
  upload_weight(w.mem, store_bf16(*store_, id, scratch), w.bytes, "weight upload");
  w.kind = DevWeight::kBf16;
  const auto& shape = store_->shape(id);
  if (shape.size() == 2) {
    w.bw.w = w.ptr();
    w.bw.n = int(shape[0]);
    w.bw.k = int(shape[1]);
    w.bw.ldw = int(shape[1]);
  }
}

DevWeight CudaBackend::make_int4(int id, int up_id, const models::Checkpoint* ck) {
  DevWeight out;
  const auto* ws = (*plan_)->weights();
  const auto* w = ws->Get(id);
  if (!ck || w->format() != fb::WeightFormat::Int4) return out;
  const auto* l = w->int4();
  const int n = l->out_features(), k = l->in_features(), group = l->group_size();
  if ((group != 64 && group != 128) || k % 8 != 0 || l->padded_in() != (k + group - 1) / group * group) return out;
  const fb::Int4Layout* lu = nullptr;
  if (up_id >= 0) {
    const auto* u = ws->Get(up_id);
    if (u->format() != fb::WeightFormat::Int4) return out;
    lu = u->int4();
    if (lu->out_features() != n || lu->in_features() != k || lu->group_size() != group ||
        lu->symmetric() != l->symmetric() || lu->scales_dtype() != l->scales_dtype())
      return out;
  }
  const bool asym = !l->symmetric();
  const bool sbf16 = l->scales_dtype() == fb::DType::BF16;
  // Raw lab-format tensors → the device staging buffer (one part each) → repack.
  const flatbuffers::String* keys[6] = {l->qweight_key(), l->scales_key(), asym ? l->zeros_key() : nullptr,
                                        lu ? lu->qweight_key() : nullptr, lu ? lu->scales_key() : nullptr,
                                        lu && asym ? lu->zeros_key() : nullptr};
  size_t total = 0;
  for (const auto* key : keys)
    if (key && key->size()) total += align256(ck->get(key->str()).bytes().size());
  unsigned char* base = static_cast<unsigned char*>(stage(total, "INT4 staging"));
  size_t at = 0;
  auto up = [&](const flatbuffers::String* key) -> void* {
    if (!key || key->size() == 0) return nullptr;
    auto bytes = ck->get(key->str()).bytes();
    void* d = base + at;
    at += align256(bytes.size());
    upload_weight(d, bytes.data(), bytes.size(), "INT4 upload");
    return d;
  };
  const uint8_t* q = static_cast<const uint8_t*>(up(keys[0]));
  const void* sc = up(keys[1]);
  const uint8_t* z = static_cast<const uint8_t*>(up(keys[2]));
  const uint8_t* uq = static_cast<const uint8_t*>(up(keys[3]));
  const void* us = up(keys[4]);
  const uint8_t* uz = static_cast<const uint8_t*>(up(keys[5]));
  out.bytes = cuda::int4_repacked_bytes(lu ? 2 * n : n, k, group, asym);
  out.mem = dmalloc(out.bytes, ("weight " + w->name()->str()).c_str());
  weight_bytes_ += align256(out.bytes);
  out.iw = cuda::int4_repack(q, sc, z, uq, us, uz, sbf16, n, k, group, out.mem, device_->stream());
  out.kind = DevWeight::kInt4;
  check(cudaGetLastError(), "int4_repack");  // the staging buffer is reused in stream order
  return out;
}

void CudaBackend::upload_pair(int gate, int up, const models::Checkpoint* ck) {
  DevWeight& dst = pairs_[{gate, up}];
  free_weight(dst);
  dst = make_int4(gate, up, ck);
  if (dst.kind == DevWeight::kInt4) return;
  // Dense: both halves as BF16, then interleaved by 8 rows per 16-row tile.
  const auto& shape = store_->shape(gate);
  if (shape.size() != 2 || store_->shape(up) != shape)
    throw Error("cuda backend: gate/up weights " + store_->name(gate) + " / " + store_->name(up) + " differ in shape");
  const int f = int(shape[0]), k = int(shape[1]);
  if (f % 8 != 0 || k % 8 != 0) throw Error("cuda backend: gate/up width and input must be multiples of 8");
  const size_t n = size_t(f) * k;
  std::vector<uint16_t> scratch;
  void* tg = stage(align256(n * 2) * 2, "gate/up staging");
  void* tu = static_cast<unsigned char*>(tg) + align256(n * 2);
  upload_weight(tg, store_bf16(*store_, gate, scratch), n * 2, "gate upload");
  upload_weight(tu, store_bf16(*store_, up, scratch), n * 2, "up upload");
  dst.bytes = 2 * n * 2;
  dst.mem = dmalloc(dst.bytes, ("weight " + store_->name(gate) + "+up").c_str());
  weight_bytes_ += align256(dst.bytes);
  cuda::interleave_gate_up_bf16(static_cast<const bf16*>(tg), static_cast<const bf16*>(tu), f, k,
                                static_cast<bf16*>(dst.mem), device_->stream());
  check(cudaGetLastError(), "interleave_gate_up_bf16");
  dst.kind = DevWeight::kBf16;
  dst.bw.w = dst.ptr();
  dst.bw.n = 2 * f;
  dst.bw.k = k;
  dst.bw.ldw = k;
  dst.bw.gate_up = true;
}

void CudaBackend::load_weights() {
  const auto* ws = (*plan_)->weights();
  const int n = int(ws->size());
  weights_.assign(n, {});
  standalone_.assign(n, false);
  std::vector<std::pair<int, int>> pairs;
  bool any_int4 = false;
  for (const auto* st : *(*plan_)->program()) {
    if (!st->weights()) continue;
    const bool pair = st->kernel() == fb::KernelId::Linear && st->attrs() &&
                      st->attrs()->epilogue() == fb::Epilogue::GeluTanhGateUp;
    for (int i = 0; i < int(st->weights()->size()); ++i) {
      const int w = st->weights()->Get(i);
      if (w < 0) continue;
      if (pair && i < 2) continue;
      standalone_[w] = true;
    }
    if (pair) {
      std::pair<int, int> p{st->weights()->Get(0), st->weights()->Get(1)};
      if (std::find(pairs.begin(), pairs.end(), p) == pairs.end()) pairs.push_back(p);
    }
  }
  std::vector<int> uses(n, 0), layer_of(n, -1);  // steps using each weight; the first one's layer
  for (const auto* st : *(*plan_)->program())
    if (st->weights())
      for (int w : *st->weights())
        if (w >= 0 && uses[w]++ == 0) layer_of[w] = st->layer();
  find_siblings(uses);
  for (const auto& g : siblings_)
    for (int w : g.weights) standalone_[w] = false;
  for (const auto* w : *ws) any_int4 |= w->format() == fb::WeightFormat::Int4;
  std::unique_ptr<models::Checkpoint> ck;
  if (any_int4 && !opts_.model_dir.empty()) ck = models::Checkpoint::open(opts_.model_dir);
  // Bytes the load reads (the progress bar's total): raw INT4 tensors, else BF16 of the value.
  uint64_t total = 0;
  for (int id = 0; id < n; ++id) {
    if (!uses[id]) continue;
    const auto* l = ws->Get(id)->format() == fb::WeightFormat::Int4 ? ws->Get(id)->int4() : nullptr;
    if (l && ck) {
      for (const auto* key : {l->qweight_key(), l->scales_key(), l->zeros_key()})
        if (key && key->size()) total += ck->get(key->str()).bytes().size();
    } else if (ws->Get(id)->format() == fb::WeightFormat::Int8Rows) {
      total += align256(store_->numel(id)) + uint64_t(store_->shape(id)[0]) * 4;
    } else {
      total += uint64_t(store_->numel(id)) * 2;
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  {
    Progress bar("load weights → GPU", total, Progress::Unit::Bytes);
    StagedUpload up(device_->stream(), &bar);
    loader_ = &up;
    try {
      for (int id = 0; id < n; ++id) {
        if (!standalone_[id]) continue;
        DevWeight w = make_int4(id, -1, ck.get());
        if (w.kind == DevWeight::kInt4)
          weights_[id] = w;
        else
          upload_dense(id);
        // Streamed layers: built like resident weights, then moved to pinned host memory.
        if (stream_weight(id, layer_of[id])) evict_to_host(weights_[id], layer_of[id]);
      }
      for (const auto& [g, u] : pairs) {
        upload_pair(g, u, ck.get());
        if (stream_weight(g, layer_of[g])) evict_to_host(pairs_[{g, u}], layer_of[g]);
      }
      for (int g = 0; g < int(siblings_.size()); ++g) {
        upload_siblings(g, ck.get());
        const int w0 = siblings_[g].weights[0];
        if (stream_weight(w0, layer_of[w0])) evict_to_host(siblings_[g].w, layer_of[w0]);
      }
      up.finish();
      check(cudaStreamSynchronize(device_->stream()), "loading weights (repacks)");
    } catch (...) {
      loader_ = nullptr;
      throw;
    }
    loader_ = nullptr;
    load_bytes_ = up.bytes();
    bar.finish();
  }
  release_stage();
  setup_streaming();
  load_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // Split-K workspace of the INT4 decode GEMM: the largest any weight needs; zeroed once.
  size_t ws_bytes = 0;
  auto need = [&](const DevWeight& w) {
    if (w.kind == DevWeight::kInt4)
      ws_bytes = std::max(ws_bytes, cuda::w4a16_workspace_bytes(cuda::kDecodeMaxRows, w.iw, kopts_));
  };
  for (const auto& w : weights_) need(w);
  for (const auto& [k, w] : pairs_) need(w);
  for (const auto& g : siblings_) need(g.w);
  if (ws_bytes) {
    gemm_ws_ = dmalloc(ws_bytes, "INT4 GEMM workspace");
    gemm_ws_bytes_ = ws_bytes;
    zero(gemm_ws_, ws_bytes, "cudaMemset(INT4 GEMM workspace)");
  }
}

void CudaBackend::weights_updated(std::span<const int> ids) {
  for (const int id : ids)
    if (!plan_ || id < 0 || id >= int(weights_.size())) throw Error("cuda backend: weights_updated of an unknown weight");
  auto updated = [&](int id) { return std::find(ids.begin(), ids.end(), id) != ids.end(); };
  check(cudaStreamSynchronize(device_->stream()), "synchronize before a weight update");
  drop_graphs();
  // The store now holds the new (e.g. fake-quantized) values: use them as dense BF16. A streamed
  // weight is rebuilt on the device and written back into its host image (weight streaming).
  auto refresh = [&](DevWeight& w, const auto& rebuild) {
    const StreamKeep k = stream_detach(w);
    try {
      rebuild();
      stream_reattach(w, k);
    } catch (...) {
      stream_abandon(w, k);
      throw;
    }
  };
  // Each device buffer holding an updated weight is rebuilt once.
  for (const int id : ids)
    if (standalone_[id]) refresh(weights_[id], [&] { upload_dense(id); });
  std::vector<std::pair<int, int>> hit;
  for (const auto& [k, w] : pairs_)
    if (updated(k.first) || updated(k.second)) hit.push_back(k);
  for (const auto& [g, u] : hit) refresh(pairs_[{g, u}], [&] { upload_pair(g, u, nullptr); });
  for (int g = 0; g < int(siblings_.size()); ++g)
    if (std::any_of(siblings_[g].weights.begin(), siblings_[g].weights.end(), updated))
      refresh(siblings_[g].w, [&] { upload_siblings(g, nullptr); });
  release_stage();
}

// Runs of consecutive Linear steps with the same input, no epilogue, BF16 token-row outputs and
// weights used by no other step, all INT4 with one layout or all dense with one in_features.
void CudaBackend::find_siblings(const std::vector<int>& uses) {
  siblings_.clear();
  sibling_of_.clear();
  sib_widest_ = 0;
  if (!opts_.fuse_siblings) return;
  const auto* prog = (*plan_)->program();
  const auto* ws = (*plan_)->weights();
  auto plain = [&](int i) {
    const auto* st = prog->Get(i);
    if (st->kernel() != fb::KernelId::Linear || !st->attrs() || st->attrs()->epilogue() != fb::Epilogue::None ||
        !st->weights() || st->weights()->size() < 1 || !st->inputs() || st->inputs()->size() < 1 ||
        !st->outputs() || st->outputs()->size() != 1)
      return false;
    const int w = st->weights()->Get(0), y = st->outputs()->Get(0);
    // values_ holds the device types (BF16 activations whatever the plan's dtype).
    return w >= 0 && uses[w] == 1 && values_.at(y).type == VType::BF16 && values_[y].rows == fb::RowSpace::Tokens &&
           store_->shape(w).size() == 2;
  };
  auto same_layout = [&](int a, int b) {
    const auto *wa = ws->Get(a), *wb = ws->Get(b);
    if (wa->format() != wb->format()) return false;
    if (store_->shape(a)[1] != store_->shape(b)[1]) return false;
    if (wa->format() != fb::WeightFormat::Int4) return true;
    const auto *la = wa->int4(), *lb = wb->int4();
    return la->in_features() == lb->in_features() && la->group_size() == lb->group_size() &&
           la->padded_in() == lb->padded_in() && la->symmetric() == lb->symmetric() &&
           la->scales_dtype() == lb->scales_dtype();
  };
  const int n = int(prog->size());
  for (int i = 0; i < n;) {
    if (!plain(i)) {
      ++i;
      continue;
    }
    const int x = prog->Get(i)->inputs()->Get(0), w0 = prog->Get(i)->weights()->Get(0);
    int j = i + 1;
    while (j < n && plain(j) && prog->Get(j)->inputs()->Get(0) == x && same_layout(w0, prog->Get(j)->weights()->Get(0)))
      ++j;
    if (j - i >= 2) {
      SiblingGroup g;
      for (int k = i; k < j; ++k) {
        g.steps.push_back(k);
        g.weights.push_back(prog->Get(k)->weights()->Get(0));
        g.cols.push_back(int(store_->shape(g.weights.back())[0]));
        g.total += g.cols.back();
        sibling_of_[k] = int(siblings_.size());
      }
      sib_widest_ = std::max(sib_widest_, g.total);
      siblings_.push_back(std::move(g));
    }
    i = j;
  }
}

// One device weight for a sibling group: INT4 members' raw lab tensors concatenated by rows and
// repacked once; otherwise (or after a weight update) their BF16 values concatenated.
void CudaBackend::upload_siblings(int gi, const models::Checkpoint* ck) {
  SiblingGroup& g = siblings_[gi];
  free_weight(g.w);
  const auto* ws = (*plan_)->weights();
  const int k = int(store_->shape(g.weights[0])[1]);
  const auto* l0 = ws->Get(g.weights[0])->int4();
  if (ck && ws->Get(g.weights[0])->format() == fb::WeightFormat::Int4 && l0 &&
      (l0->group_size() == 64 || l0->group_size() == 128) && k % 8 == 0 &&
      l0->padded_in() == (k + l0->group_size() - 1) / l0->group_size() * l0->group_size()) {
    const bool asym = !l0->symmetric();
    const bool sbf16 = l0->scales_dtype() == fb::DType::BF16;
    // Concatenate qweight / scales / zeros rows of every member into parts of the staging buffer.
    auto q_of = [](const fb::Int4Layout* l) { return l->qweight_key(); };
    auto s_of = [](const fb::Int4Layout* l) { return l->scales_key(); };
    auto z_of = [](const fb::Int4Layout* l) { return l->zeros_key(); };
    auto part_bytes = [&](auto key_of) {
      size_t total = 0;
      for (int w : g.weights) total += ck->get(key_of(ws->Get(w)->int4())->str()).bytes().size();
      return total;
    };
    const size_t qb = part_bytes(q_of), sb = part_bytes(s_of), zb = asym ? part_bytes(z_of) : 0;
    unsigned char* base =
        static_cast<unsigned char*>(stage(align256(qb) + align256(sb) + align256(zb), "INT4 staging (siblings)"));
    auto concat = [&](auto key_of, unsigned char* d, const char* what) -> void* {
      size_t off = 0;
      for (int w : g.weights) {
        auto b = ck->get(key_of(ws->Get(w)->int4())->str()).bytes();
        upload_weight(d + off, b.data(), b.size(), what);
        off += b.size();
      }
      return d;
    };
    void* q = concat(q_of, base, "INT4 upload (siblings)");
    void* sc = concat(s_of, base + align256(qb), "INT4 upload (siblings)");
    void* z = asym ? concat(z_of, base + align256(qb) + align256(sb), "INT4 upload (siblings)") : nullptr;
    g.w.bytes = cuda::int4_repacked_bytes(g.total, k, l0->group_size(), asym);
    g.w.mem = dmalloc(g.w.bytes, ("weight " + store_->name(g.weights[0]) + " + siblings").c_str());
    weight_bytes_ += align256(g.w.bytes);
    g.w.iw = cuda::int4_repack(static_cast<const uint8_t*>(q), sc, static_cast<const uint8_t*>(z), nullptr, nullptr,
                               nullptr, sbf16, g.total, k, l0->group_size(), g.w.mem, device_->stream());
    g.w.kind = DevWeight::kInt4;
    check(cudaGetLastError(), "int4_repack (siblings)");  // staging reused in stream order
    return;
  }
  std::vector<uint16_t> host(size_t(g.total) * k);
  size_t off = 0;
  std::vector<uint16_t> scratch;
  for (int w : g.weights) {
    std::memcpy(host.data() + off, store_bf16(*store_, w, scratch), store_->numel(w) * 2);
    off += store_->numel(w);
  }
  g.w.bytes = host.size() * 2;
  g.w.mem = dmalloc(g.w.bytes, ("weight " + store_->name(g.weights[0]) + " + siblings").c_str());
  weight_bytes_ += align256(g.w.bytes);
  upload_weight(g.w.mem, host.data(), g.w.bytes, "weight upload (siblings)");
  g.w.kind = DevWeight::kBf16;
  g.w.bw.w = g.w.ptr();
  g.w.bw.n = g.total;
  g.w.bw.k = k;
  g.w.bw.ldw = k;
}

}  // namespace g4c::cudart

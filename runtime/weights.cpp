// Weight store loading: dense conversion and INT4 dequantization (see weights.h).
#include "runtime/weights.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include "models/error.h"
#include "models/int4.h"
#include "models/safetensors.h"
#include "runtime/int8_rows.h"
#include "runtime/thread_pool.h"

namespace g4c::runtime {

void tensor_to_f32(const models::TensorView& v, float* out, int threads) {
  const int64_t n = v.info->numel();
  const DType dt = v.info->dtype;
  if (dt != DType::BF16 && dt != DType::F16 && dt != DType::F32)
    throw Error(v.info->file + ": tensor " + v.info->name + " is " + std::string(dtype_name(dt)) +
                ", expected a floating point weight");
  const auto* u = v.as<uint16_t>();
  auto work = [&](int64_t b, int64_t e) {
    switch (dt) {
      case DType::BF16: for (int64_t i = b; i < e; ++i) out[i] = bf16_to_f32(u[i]); break;
      case DType::F16: for (int64_t i = b; i < e; ++i) out[i] = f16_to_f32(u[i]); break;
      default: std::memcpy(out + b, v.data + b * 4, size_t(e - b) * 4); break;
    }
  };
  parallel_chunks(n, std::max(1, threads), int64_t(1) << 22, work);
}

namespace {

std::vector<float> load_one(const plan::fb::Weight& w, const models::Checkpoint& ckpt, int threads) {
  if (w.format() != plan::fb::WeightFormat::Int4) {
    auto v = ckpt.get(w.checkpoint_key()->str());
    std::vector<float> out(size_t(v.info->numel()));
    tensor_to_f32(v, out.data(), threads);
    if (w.format() == plan::fb::WeightFormat::Int8Rows) {  // the values the INT8 table holds
      const int64_t cols = w.shape()->Get(1), rows = int64_t(out.size()) / cols;
      parallel_chunks(rows, threads, 256, [&](int64_t b, int64_t e) {
        std::vector<int8_t> codes(static_cast<size_t>(cols));
        round_trip_rows_int8(out.data() + b * cols, size_t(e - b), size_t(cols), codes.data());
      });
    }
    return out;
  }
  const auto* l = w.int4();
  auto q = ckpt.get(l->qweight_key()->str());
  auto s = ckpt.get(l->scales_key()->str());
  models::int4::Params p;
  p.group_size = l->group_size();
  p.symmetric = l->symmetric();
  p.scale_dtype = s.info->dtype;
  const int64_t out = l->out_features(), in = l->in_features(), groups = l->padded_in() / l->group_size();
  if (q.info->numel() != out * l->padded_in() / 2 || s.info->numel() != out * groups)
    throw Error(ckpt.dir().string() + ": INT4 tensors of " + w.name()->str() + " do not match the plan's layout");
  std::span<const uint8_t> zeros;
  if (!l->symmetric()) {
    auto z = ckpt.get(l->zeros_key()->str());
    if (z.info->numel() != out * groups) throw Error(ckpt.dir().string() + ": zeros of " + w.name()->str() + " have the wrong size");
    zeros = z.bytes();
  }
  return models::int4::dequantize(q.bytes(), {s.as<uint16_t>(), size_t(out * groups)}, zeros, out, in, p);
}

}  // namespace

// Names and shapes of every plan weight; no data yet.
std::unique_ptr<WeightStore> WeightStore::empty_store(const plan::Plan& plan) {
  auto store = std::make_unique<WeightStore>();
  const auto* ws = plan->weights();
  store->data_.resize(ws->size());
  for (const auto* w : *ws) {
    store->shapes_.emplace_back(w->shape()->begin(), w->shape()->end());
    store->names_.push_back(w->name()->str());
  }
  return store;
}

std::unique_ptr<WeightStore> WeightStore::load(const plan::Plan& plan, const models::Checkpoint& ckpt, int threads) {
  auto store = empty_store(plan);
  const auto* ws = plan->weights();
  const int n = store->size();
  std::vector<std::string> errors(n);
  auto work = [&](int t, int nt) {
    for (int i = t; i < n; i += nt) try {
        store->data_[i] = load_one(*ws->Get(i), ckpt, 1);  // the loaders run one weight each
        int64_t numel = 1;
        for (auto d : store->shapes_[i]) numel *= d;
        if (int64_t(store->data_[i].size()) != numel)
          throw Error(ckpt.dir().string() + ": weight " + store->names_[i] + " has " +
                      std::to_string(store->data_[i].size()) + " elements, the plan says " + std::to_string(numel));
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
  };
  threads = std::max(1, std::min(threads, n));
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work, t, threads);
  work(0, threads);
  for (auto& th : pool) th.join();
  for (const auto& e : errors)
    if (!e.empty()) throw Error(e);
  return store;
}

std::unique_ptr<WeightStore> WeightStore::load_lazy(const plan::Plan& plan,
                                                   std::shared_ptr<const models::Checkpoint> ckpt) {
  auto store = empty_store(plan);
  const int n = store->size();
  store->lazy_ = true;
  store->plan_ = &plan;
  store->ckpt_ = std::move(ckpt);
  store->once_ = std::make_unique<std::once_flag[]>(size_t(n));
  store->done_ = std::make_unique<std::atomic<bool>[]>(size_t(n));
  store->replaced_.assign(size_t(n), 0);
  store->released_.assign(size_t(n), 0);  // sized now: data() may run on other threads when one is released
  return store;
}

std::span<const uint16_t> WeightStore::checkpoint_bf16(int id) const {
  if (!lazy_ || id < 0 || id >= size() || replaced_[size_t(id)] || released(id)) return {};
  const auto* w = (*plan_)->weights()->Get(id);
  if (w->format() == plan::fb::WeightFormat::Int4) return {};
  auto v = ckpt_->get(w->checkpoint_key()->str());
  if (v.info->dtype != DType::BF16 || size_t(v.info->numel()) != numel(id)) return {};
  return {v.as<uint16_t>(), numel(id)};
}

void WeightStore::materialize(int id) const {
  std::call_once(once_[size_t(id)], [&] {
    // One weight on first use (the caller waits for it): the conversion over up to 8 threads.
    auto v = load_one(*(*plan_)->weights()->Get(id), *ckpt_, /*threads=*/0);
    if (v.size() != numel(id))
      throw Error(ckpt_->dir().string() + ": weight " + names_[id] + " has " + std::to_string(v.size()) +
                  " elements, the plan says " + std::to_string(numel(id)));
    data_[id] = std::move(v);
    done_[size_t(id)].store(true, std::memory_order_release);
  });
}

size_t WeightStore::numel(int id) const {
  size_t n = 1;
  for (auto d : shapes_[id]) n *= size_t(d);
  return n;
}

int WeightStore::loaded() const {
  if (!lazy_) return size();
  int n = 0;
  for (int i = 0; i < size(); ++i) n += done_[size_t(i)].load(std::memory_order_acquire);
  return n;
}

int WeightStore::find(const std::string& name) const {
  for (int i = 0; i < size(); ++i)
    if (names_[i] == name) return i;
  return -1;
}

void WeightStore::check_replacement(int id, size_t count) const {
  if (id < 0 || id >= size()) throw Error("WeightStore::replace: no weight " + std::to_string(id));
  if (count != numel(id))
    throw Error("WeightStore::replace: " + names_[id] + " has " + std::to_string(numel(id)) + " elements, got " +
                std::to_string(count));
}

void WeightStore::replace(int id, std::span<const float> values) {
  check_replacement(id, values.size());
  if (lazy_) {
    replaced_[size_t(id)] = 1;
    bool filled = false;  // never converted: take the new values, skip loading the old ones
    std::call_once(once_[size_t(id)], [&] {
      data_[id].assign(values.begin(), values.end());
      done_[size_t(id)].store(true, std::memory_order_release);
      filled = true;
    });
    if (filled) return;
  }
  std::copy(values.begin(), values.end(), data_[id].begin());
}

std::span<float> WeightStore::overwrite(int id) {
  check_replacement(id, numel(id));
  if (released(id)) released_error(id);
  if (lazy_) {
    replaced_[size_t(id)] = 1;
    std::call_once(once_[size_t(id)], [&] {  // never converted: an array for the new values only
      data_[id].resize(numel(id));
      done_[size_t(id)].store(true, std::memory_order_release);
    });
  }
  return data_[id];
}

void WeightStore::release(int id) {
  if (id < 0 || id >= size()) throw Error("WeightStore::release: no weight " + std::to_string(id));
  if (lazy_)  // never loaded later: its values are gone, not the checkpoint's
    std::call_once(once_[size_t(id)], [&] { done_[size_t(id)].store(true, std::memory_order_release); });
  if (released_.empty()) released_.assign(data_.size(), 0);
  released_[size_t(id)] = 1;
  std::vector<float>().swap(data_[id]);
}

void WeightStore::released_error(int id) const {
  throw Error("WeightStore: " + names_[id] + " was released (its values live in the backend only)");
}

size_t WeightStore::total_bytes() const {
  size_t b = 0;
  for (const auto& d : data_) b += d.size() * sizeof(float);
  return b;
}

}  // namespace g4c::runtime

// Weight streaming of the CUDA backend (plan-offload's Streamed layers).
//
// At load a streamed layer's Linears are built on the device exactly as resident ones (upload,
// INT4 repack, gate/up interleave, sibling concatenation), copied into pinned host memory and
// freed, one weight at a time, so the load never holds more than the resident set + one weight.
// Two device slots of the largest streamed layer's size hold layer images. Entering streamed
// layer i (first step of its run in the program) the compute stream waits until i's copy has
// landed, the layer's weight views are pointed into its slot, and the copy of the next streamed
// layer is issued into the other slot on the copy stream — after the compute stream has left
// the layer that used that slot last (event `freed_`). So copies overlap the compute of the
// layer before; the trace shows them on the "copies" track. Decode steps run eagerly while any
// layer streams (the slot a layer lands in alternates, so a graph could not bake its pointers).
#include <cuda_runtime.h>

#include <algorithm>

#include "models/error.h"
#include "runtime/cuda_backend/backend_state.h"

namespace g4c::cudart {
namespace {

// Moves every pointer of `w`'s views by the distance from w.mem to `base`.
void rebase(DevWeight& w, void* base) {
  const ptrdiff_t d = static_cast<char*>(base) - static_cast<char*>(w.mem);
  auto move = [d](auto* p) { return p ? reinterpret_cast<decltype(p)>(reinterpret_cast<const char*>(p) + d) : p; };
  w.bw.w = move(w.bw.w);
  w.iw.qweight = move(w.iw.qweight);
  w.iw.scales = move(w.iw.scales);
  w.iw.zeros = move(w.iw.zeros);
  w.mem = base;
}

}  // namespace

bool CudaBackend::stream_weight(int first_id, int layer) const {
  if (layer < 0 || first_id < 0) return false;
  if ((*plan_)->weights()->Get(first_id)->residency() == fb::Residency::Streamed) return true;
  const int n = (*plan_)->model()->num_layers();
  return opts_.stream_last_layers > 0 && layer >= n - opts_.stream_last_layers &&
         store_->shape(first_id).size() == 2;
}

void CudaBackend::evict_to_host(DevWeight& w, int layer) {
  if (w.kind == DevWeight::kAbsent || !w.mem) return;
  auto it = streamed_index_.find(layer);
  if (it == streamed_index_.end()) {
    it = streamed_index_.emplace(layer, int(streamed_.size())).first;
    streamed_.push_back({layer, {}, 0});
  }
  StreamedLayer& L = streamed_[it->second];
  check(cudaHostAlloc(&w.host, w.bytes, cudaHostAllocDefault), "cudaHostAlloc (streamed weight)");
  w.slot_off = L.bytes;
  L.bytes += align256(w.bytes);
  L.weights.push_back(&w);  // from here free_streaming() owns w.host, also if a copy below fails
  // The weight was built by kernels on the compute stream: copy after them, then free. The
  // freed bytes are poisoned first, so a view left pointing at them reads NaN, not stale weights.
  check(cudaMemcpyAsync(w.host, w.mem, w.bytes, cudaMemcpyDeviceToHost, device_->stream()), "streamed weight → host");
  check(cudaMemsetAsync(w.mem, 0xFF, w.bytes, device_->stream()), "poison evicted weight");
  check(cudaStreamSynchronize(device_->stream()), "streamed weight → host");
  weight_bytes_ -= std::min(weight_bytes_, align256(w.bytes));
  void* dev = w.mem;
  dfree(dev);  // w.mem keeps the old address: the origin rebase() moves the views from
}

void CudaBackend::setup_streaming() {
  if (streamed_.empty()) return;
  for (const auto& L : streamed_) slot_bytes_ = std::max(slot_bytes_, L.bytes);
  for (int s = 0; s < 2; ++s) {
    slot_[s] = dmalloc(slot_bytes_, "weight streaming slot");
    weight_bytes_ += align256(slot_bytes_);
    check(cudaEventCreateWithFlags(&copied_[s], cudaEventDisableTiming), "cudaEventCreate");
    check(cudaEventCreateWithFlags(&freed_[s], cudaEventDisableTiming), "cudaEventCreate");
  }
  // Program order of first use, so "the next streamed layer" is the next one the program runs.
  std::vector<int> order;
  for (const auto* st : *(*plan_)->program()) {
    auto it = streamed_index_.find(st->layer());
    if (it != streamed_index_.end() && std::find(order.begin(), order.end(), it->second) == order.end())
      order.push_back(it->second);
  }
  std::vector<StreamedLayer> sorted;
  for (int i : order) sorted.push_back(std::move(streamed_[i]));
  streamed_ = std::move(sorted);
  streamed_index_.clear();
  for (int i = 0; i < int(streamed_.size()); ++i) streamed_index_[streamed_[i].layer] = i;
}

void CudaBackend::issue_layer_copy(int index, int s) {
  const cudaStream_t cs = device_->copy_stream();
  if (freed_recorded_[s]) check(cudaStreamWaitEvent(cs, freed_[s], 0), "cudaStreamWaitEvent (slot free)");
  const bool timed = trace_on();
  const int e0 = timed ? event() : -1;
  if (timed) check(cudaEventRecord(events_[e0], cs), "cudaEventRecord");
  const StreamedLayer& L = streamed_[index];
  for (const DevWeight* w : L.weights)
    check(cudaMemcpyAsync(static_cast<char*>(slot_[s]) + w->slot_off, w->host, w->bytes, cudaMemcpyHostToDevice, cs),
          "streamed weight copy");
  check(cudaEventRecord(copied_[s], cs), "cudaEventRecord (layer copied)");
  if (timed) {
    const int e1 = event();
    check(cudaEventRecord(events_[e1], cs), "cudaEventRecord");
    pending_.push_back({"L" + std::to_string(L.layer) + " weights → slot " + std::to_string(s) + " (" + mib(L.bytes) + ")",
                        "copy", runtime::TraceWriter::kCopy, e0, e1});
  }
  slot_layer_[s] = index;
  ++streamed_copies_;
}

void CudaBackend::stream_enter(int layer) {
  const int index = streamed_index_.at(layer);
  int s = slot_layer_[0] == index ? 0 : slot_layer_[1] == index ? 1 : -1;
  if (s < 0) {  // not prefetched (first step, or a piece of the program out of order)
    s = running_slot_ >= 0 ? running_slot_ ^ 1 : 0;
    issue_layer_copy(index, s);
  }
  check(cudaStreamWaitEvent(device_->stream(), copied_[s], 0), "cudaStreamWaitEvent (layer copied)");
  for (DevWeight* w : streamed_[index].weights) rebase(*w, static_cast<char*>(slot_[s]) + w->slot_off);
  running_slot_ = s;
  // Prefetch the next streamed layer (wrapping to the first: the next step's) into the other slot.
  const int next = (index + 1) % int(streamed_.size());
  if (next != index && slot_layer_[s ^ 1] != next) issue_layer_copy(next, s ^ 1);
}

void CudaBackend::stream_leave() {
  if (running_slot_ < 0) return;
  check(cudaEventRecord(freed_[running_slot_], device_->stream()), "cudaEventRecord (slot free)");
  freed_recorded_[running_slot_] = true;
}

void CudaBackend::unstream(DevWeight& w) {
  if (device_->copy_stream()) check(cudaStreamSynchronize(device_->copy_stream()), "synchronize (unstream)");
  for (auto& L : streamed_) L.weights.erase(std::remove(L.weights.begin(), L.weights.end(), &w), L.weights.end());
  cudaFreeHost(w.host);
  w.host = nullptr;
  w.mem = nullptr;  // points into a slot (or nowhere): nothing of its own to free
}

CudaBackend::StreamKeep CudaBackend::stream_detach(DevWeight& w) {
  StreamKeep k;
  if (!w.host) return k;
  for (int i = 0; i < int(streamed_.size()); ++i)
    if (std::find(streamed_[i].weights.begin(), streamed_[i].weights.end(), &w) != streamed_[i].weights.end())
      k.index = i;
  if (k.index < 0) throw Error("cuda backend: internal: a streamed weight is in no streamed layer");
  check(cudaStreamSynchronize(device_->copy_stream()), "synchronize (streamed weight update)");
  k.host = w.host;
  k.slot_off = w.slot_off;
  k.bytes = w.bytes;
  w.host = nullptr;
  w.mem = nullptr;  // nothing of its own on the device
  return k;
}

void CudaBackend::stream_reattach(DevWeight& w, const StreamKeep& k) {
  if (k.index < 0) return;
  if (w.bytes != k.bytes || !w.mem)
    throw Error("cuda backend: a weight update changed the device size of a streamed weight (" +
                std::to_string(k.bytes) + " → " + std::to_string(w.bytes) +
                " bytes; e.g. an INT4 weight replaced by dense values): streamed weights keep their layout");
  check(cudaMemcpyAsync(k.host, w.mem, w.bytes, cudaMemcpyDeviceToHost, device_->stream()), "streamed weight → host");
  check(cudaMemsetAsync(w.mem, 0xFF, w.bytes, device_->stream()), "poison rebuilt weight");
  check(cudaStreamSynchronize(device_->stream()), "streamed weight → host");
  weight_bytes_ -= std::min(weight_bytes_, align256(w.bytes));
  void* dev = w.mem;
  dfree(dev);  // w.mem keeps the old address as the rebase origin
  w.host = k.host;
  w.slot_off = k.slot_off;
  for (int s = 0; s < 2; ++s)
    if (slot_layer_[s] == k.index) slot_layer_[s] = -1;  // the slot holds the old bytes
}

void CudaBackend::stream_abandon(DevWeight& w, const StreamKeep& k) {
  // A failed update of a streamed weight: drop it from streaming and leave it absent, so a
  // later step using it fails with "no device weight" instead of reading a stale slot.
  if (k.index < 0) return;
  auto& ws = streamed_[k.index].weights;
  ws.erase(std::remove(ws.begin(), ws.end(), &w), ws.end());
  cudaFreeHost(k.host);
  if (w.mem && !w.host) {  // a rebuilt device buffer of its own
    weight_bytes_ -= std::min(weight_bytes_, align256(w.bytes));
    void* dev = w.mem;
    dfree(dev);
  }
  w = DevWeight{};
  for (int s = 0; s < 2; ++s)
    if (slot_layer_[s] == k.index) slot_layer_[s] = -1;
}

void CudaBackend::free_streaming() {
  if (device_->copy_stream()) cudaStreamSynchronize(device_->copy_stream());
  for (auto& L : streamed_)
    for (DevWeight* w : L.weights)
      if (w->host) {
        cudaFreeHost(w->host);
        w->host = nullptr;
      }
  for (int s = 0; s < 2; ++s) {
    if (copied_[s]) cudaEventDestroy(copied_[s]);
    if (freed_[s]) cudaEventDestroy(freed_[s]);
    copied_[s] = freed_[s] = nullptr;
  }
  streamed_.clear();
  streamed_index_.clear();
}

}  // namespace g4c::cudart

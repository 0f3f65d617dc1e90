// CudaBackend's plan values seen from the host (see cuda_backend.h): a value's device rows as
// BF16, its rows read back through the pinned staging buffer (as fp32, or viewed in place), and
// host rows written into it (converted on up to 8 threads), or its bf16 bits moved as they are.
#include "runtime/cuda_backend/cuda_backend.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include "models/error.h"
#include "runtime/cuda_backend/backend_state.h"
#include "runtime/cuda_backend/bf16.h"

namespace g4c::cudart {

// The rows value `v` holds for the current batch (its row space's count).
int CudaBackend::batch_rows(const DevValue& v) const {
  return v.rows == fb::RowSpace::LogitRows ? shape_.real_R : v.rows == fb::RowSpace::Sequences ? shape_.real_S : shape_.real_T;
}

const void* CudaBackend::device_value_bf16(int value, int* rows) const {
  const auto& v = values_.at(value);
  if (v.type != VType::BF16) return nullptr;
  *rows = batch_rows(v);
  return v.ptr;
}

// The pinned staging buffer of read_value / argmax_rows, grown to at least `bytes`.
void* CudaBackend::read_staging(size_t bytes) const {
  if (bytes > read_host_bytes_) {
    if (read_host_) cudaFreeHost(read_host_);
    read_host_ = nullptr;
    check(cudaMallocHost(&read_host_, bytes), "cudaMallocHost(read staging)");
    read_host_bytes_ = bytes;
  }
  return read_host_;
}

// The value's rows of the current batch copied into read_host_; returns the row count.
int CudaBackend::stage_value(int value) const {
  const auto& v = values_.at(value);
  check(cudaStreamSynchronize(device_->stream()), "synchronize before read_value");
  const_cast<CudaBackend*>(this)->flush_trace();
  const int rows = batch_rows(v);
  const size_t bytes = size_t(rows) * v.cols * v.elem();
  if (bytes) check(cudaMemcpy(read_staging(bytes), v.ptr, bytes, cudaMemcpyDeviceToHost), "read_value copy");
  return rows;
}

// fp32 values (the logits of sampled steps): the staging copy itself, no second copy.
std::span<const float> CudaBackend::read_value_view(int value) const {
  const auto& v = values_.at(value);
  if (v.type != VType::F32) return {};
  const int rows = stage_value(value);
  if (rows == 0) return {};
  return {static_cast<const float*>(read_host_), size_t(rows) * v.cols};
}

int CudaBackend::read_value(int value, std::vector<float>* out) const {
  const auto& v = values_.at(value);
  const int rows = stage_value(value);
  const size_t n = size_t(rows) * v.cols, bytes = n * v.elem();
  out->resize(n);
  if (v.type == VType::F32) {
    std::memcpy(out->data(), read_host_, bytes);
  } else if (v.type == VType::I32) {
    const int32_t* p = static_cast<const int32_t*>(read_host_);
    for (size_t i = 0; i < n; ++i) (*out)[i] = float(p[i]);
  } else {
    from_bf16(static_cast<const uint16_t*>(read_host_), out->data(), n);
  }
  return rows;
}


// Checks that `n` entries are whole rows of value `v` within its arena; waits for the stream.
void CudaBackend::begin_write(const DevValue& v, size_t n, const char* what) const {
  if (n % size_t(v.cols)) throw Error(std::string("cuda backend: ") + what + " size is not a multiple of the value's columns");
  const size_t rows = n / size_t(v.cols);
  const int cap = v.rows == fb::RowSpace::LogitRows ? cap_R_ : v.rows == fb::RowSpace::Sequences ? cap_S_ : cap_T_;
  if (rows > size_t(cap))
    throw Error(std::string("cuda backend: ") + what + " of " + std::to_string(rows) + " rows exceeds the arena");
  check(cudaStreamSynchronize(device_->stream()), what);
}

void CudaBackend::write_value(int value, std::span<const float> data) {
  auto& v = values_.at(value);
  begin_write(v, data.size(), "write_value");
  // Converted into the pinned staging buffer (free: the stream is idle), uploaded from there.
  const size_t bytes = data.size() * v.elem();
  void* host = read_staging(bytes);
  if (v.type == VType::F32) {
    std::memcpy(host, data.data(), bytes);
  } else if (v.type == VType::I32) {
    auto* p = static_cast<int32_t*>(host);
    for (size_t i = 0; i < data.size(); ++i) p[i] = int32_t(data[i]);
  } else {
    to_bf16(data.data(), static_cast<uint16_t*>(host), data.size());
  }
  upload(v.ptr, host, bytes, "write_value copy");
}

int CudaBackend::read_value_bf16(int value, std::span<uint16_t> out) const {
  const auto& v = values_.at(value);
  if (v.type != VType::BF16) throw Error("cuda backend: read_value_bf16 of a value that is not bf16");
  check(cudaStreamSynchronize(device_->stream()), "synchronize before read_value_bf16");
  const_cast<CudaBackend*>(this)->flush_trace();
  const int rows = batch_rows(v);
  const size_t n = size_t(rows) * v.cols;
  if (out.size() < n)
    throw Error("cuda backend: read_value_bf16 needs " + std::to_string(n) + " entries, has " + std::to_string(out.size()));
  if (n) check(cudaMemcpy(out.data(), v.ptr, n * 2, cudaMemcpyDeviceToHost), "read_value_bf16 copy");
  return rows;
}

void CudaBackend::write_value_bf16(int value, std::span<const uint16_t> data) {
  auto& v = values_.at(value);
  if (v.type != VType::BF16) throw Error("cuda backend: write_value_bf16 of a value that is not bf16");
  begin_write(v, data.size(), "write_value_bf16");
  upload(v.ptr, data.data(), data.size() * 2, "write_value_bf16 copy");
}

std::shared_ptr<void> CudaBackend::pinned_host(size_t bytes) const {
  void* p = nullptr;
  check(cudaMallocHost(&p, std::max<size_t>(bytes, 1)), "cudaMallocHost");
  return {p, [](void* q) { cudaFreeHost(q); }};
}

}  // namespace g4c::cudart

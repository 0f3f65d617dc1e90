// Next tokens chosen on the device (Backend::argmax_rows, Backend::sample_rows): a step then copies
// R token ids back instead of R × 262144 fp32 logits, and the host neither scans nor samples them.
#include <cuda_runtime.h>

#include "runtime/cuda_backend/backend_state.h"

namespace g4c::cudart {

int CudaBackend::tokens_on_device(int value, const char* what,
                                  const std::function<cudaError_t(const float*, int, int)>& launch,
                                  std::vector<int32_t>* out) const {
  const auto& v = values_.at(value);
  if (v.type != VType::F32 || v.rows != fb::RowSpace::LogitRows || !tokens_dev_) return -1;
  const int rows = shape_.real_R;
  if (rows > cap_R_) return -1;
  if (rows > 0) {
    check(launch(static_cast<const float*>(v.ptr), rows, v.cols), what);
    const size_t bytes = size_t(rows) * 4;
    check(cudaMemcpyAsync(read_staging(bytes), tokens_dev_, bytes, cudaMemcpyDeviceToHost, device_->stream()), what);
  }
  check(cudaStreamSynchronize(device_->stream()), what);
  const_cast<CudaBackend*>(this)->flush_trace();
  const int32_t* p = static_cast<const int32_t*>(read_host_);
  out->assign(p, p + rows);
  return rows;
}

// Greedy rows (cuda::argmax_rows, lowest index on ties as runtime::argmax).
int CudaBackend::argmax_rows(int value, std::vector<int32_t>* out) const {
  if (!opts_.device_argmax) return -1;
  return tokens_on_device(
      value, "argmax_rows",
      [&](const float* l, int rows, int cols) { return cuda::argmax_rows(l, rows, cols, cols, tokens_dev_, device_->stream()); },
      out);
}

// Sampled rows (cuda::sample_rows, runtime/sampler.h's definition), with CudaOptions::device_sample.
int CudaBackend::sample_rows(int value, std::span<const runtime::RowDraw> draws, std::vector<int32_t>* out) const {
  if (!opts_.device_sample || !sample_rows_dev_ || int(draws.size()) != shape_.real_R) return -1;
  std::vector<cuda::SampleRow> rows;
  for (const auto& d : draws) rows.push_back({d.params.temperature, d.params.top_k, d.params.top_p, 0, d.u});
  return tokens_on_device(
      value, "sample_rows",
      [&](const float* l, int m, int cols) {
        // (Pageable source: the copy is staged before it returns, and ordered before the kernel.)
        const cudaError_t e = cudaMemcpyAsync(sample_rows_dev_, rows.data(), rows.size() * sizeof(cuda::SampleRow),
                                              cudaMemcpyHostToDevice, device_->stream());
        return e != cudaSuccess ? e : cuda::sample_rows(l, m, cols, cols, sample_rows_dev_, tokens_dev_, device_->stream());
      },
      out);
}

}  // namespace g4c::cudart

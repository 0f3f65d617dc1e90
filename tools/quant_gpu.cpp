#include "tools/quant_gpu.h"

#include <memory>

#include "models/error.h"
#ifdef G4C_HAVE_CUDA_BACKEND
#include "passes/quant/cuda/gptq_device.h"
#include "runtime/cuda_backend/cuda_backend.h"
#endif

namespace g4c::tools {

#ifdef G4C_HAVE_CUDA_BACKEND
namespace {

class GpuHessianStore final : public quant::HessianStore {
 public:
  GpuHessianStore(std::shared_ptr<quant::GptqDevice> dev, int64_t n) : dev_(std::move(dev)), h_(*dev_, n) {}
  int64_t n() const override { return h_.n(); }
  int64_t rows() const override { return h_.rows(); }
  void add(const float* X, int64_t rows, int64_t ld) override { h_.add(X, rows, ld); }
  bool add_device_bf16(const void* X, int64_t rows, int64_t ld) override {
    h_.add_device_bf16(X, rows, ld);
    return true;
  }
  quant::GptqResult quantize(const float* W, int64_t out, const quant::GptqOptions& opt) override {
    if (!h_.prepared()) {
      dev_->release_scratch();  // observing is over: the factor needs the Gram's memory
      prep_ = h_.prepare(opt.damp, opt.act_order);
    }
    quant::GptqSolved s = h_.solve(W, out, opt.spec.group_size, opt.spec.symmetric, int(opt.block_size),
                                     opt.clip.enabled() ? opt.clip.grid : 0, opt.clip.enabled() ? opt.clip.steps : 0);
    quant::GptqResult r;
    quant::QuantizedLinear& q = r.q;
    q.out = out;
    q.in = h_.n();
    q.group_size = opt.spec.group_size;
    q.symmetric = opt.spec.symmetric;
    q.padded_in = quant::padded_in_features(q.in, q.group_size);
    q.codes = std::move(s.codes);
    q.scales = std::move(s.scales);
    q.zeros = std::move(s.zeros);
    for (const double l : s.row_loss) r.predicted_loss += l;  // row order, as the host sums
    r.dead_columns = prep_.dead_columns;
    r.damp_value = prep_.damp_value;
    return r;
  }

 private:
  std::shared_ptr<quant::GptqDevice> dev_;
  quant::DeviceHessian h_;
  quant::DeviceHessian::Prepared prep_;
};

}  // namespace

quant::HessianStoreFactory gpu_hessian_stores(const runtime::Backend& b) {
  // On the CUDA backend's stream (its green context under --emulate), inside its budget.
  auto dev = std::make_shared<quant::GptqDevice>(runtime::cuda_stream(b),
                                                 [&b](const std::string& where) { runtime::cuda_check_budget(b, where); });
  return [dev](int64_t n) -> std::unique_ptr<quant::HessianStore> { return std::make_unique<GpuHessianStore>(dev, n); };
}

void check_gpu_gptq_options(const quant::GptqOptions& opt) {
  quant::DeviceHessian::check_solve_options(opt.spec.group_size, opt.block_size, opt.act_order);
}
#else
void check_gpu_gptq_options(const quant::GptqOptions&) {
  throw Error("quantize: GPTQ on the GPU needs a g4c built with the CUDA backend");
}

quant::HessianStoreFactory gpu_hessian_stores(const runtime::Backend&) {
  throw Error("quantize: GPTQ on the GPU needs a g4c built with the CUDA backend");
}
#endif

}  // namespace g4c::tools

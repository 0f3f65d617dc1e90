#include "passes/quant/cuda/gptq_device.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <numeric>

#include "models/error.h"
#include "passes/quant/cuda/gptq_kernels.cuh"

namespace g4c::quant {

namespace {

constexpr int64_t kRowsPerPartial = 8192;  // quant::HessianAccumulator's fp32 partial length
constexpr int64_t kStageRows = 2048;       // rows of X staged per upload (the Gram chain continues)

std::string mib(size_t b) { return std::to_string((b + (1 << 20) - 1) >> 20) + " MiB"; }

void ok(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess) throw Error("gptq (cuda): " + what + ": " + cudaGetErrorString(e));
}

}  // namespace

struct GptqDevice::Impl {
  cudaStream_t stream = nullptr;
  std::function<void(const std::string&)> check;
  float* partial = nullptr;
  size_t partial_cap = 0;  // floats
  float* xs = nullptr;
  size_t xs_cap = 0;

  template <class T>
  T* alloc(size_t count, const std::string& what) {
    void* p = nullptr;
    if (count == 0) return nullptr;
    const cudaError_t e = cudaMalloc(&p, count * sizeof(T));
    if (e != cudaSuccess) {
      cudaGetLastError();
      throw Error("gptq (cuda): cannot allocate " + mib(count * sizeof(T)) + " for " + what + ": " +
                  cudaGetErrorString(e));
    }
    if (check) {
      try {
        check("allocating " + mib(count * sizeof(T)) + " for GPTQ's " + what);
      } catch (...) {
        cudaFree(p);
        throw;
      }
    }
    return static_cast<T*>(p);
  }
  static void release(void* p) {
    if (p) cudaFree(p);
  }
  template <class... P>
  static void release_all(P*... p) {
    (release(static_cast<void*>(p)), ...);
  }
  template <class T>
  void ensure(T*& p, size_t& cap, size_t count, const std::string& what) {
    if (cap >= count) return;
    release(p);
    p = nullptr;
    cap = 0;
    p = alloc<T>(count, what);
    cap = count;
  }
  void sync(const std::string& what) { ok(cudaStreamSynchronize(stream), what); }
};

GptqDevice::GptqDevice(void* stream, std::function<void(const std::string&)> check) : p_(std::make_unique<Impl>()) {
  p_->stream = static_cast<cudaStream_t>(stream);
  p_->check = std::move(check);
}

GptqDevice::~GptqDevice() { release_scratch(); }

void GptqDevice::release_scratch() {
  Impl::release(p_->partial);
  Impl::release(p_->xs);
  p_->partial = p_->xs = nullptr;
  p_->partial_cap = p_->xs_cap = 0;
}

struct DeviceHessian::Impl {
  GptqDevice::Impl& dev;
  int64_t n = 0, rows = 0;
  double* H = nullptr;  // [n, n] until prepare
  double* U = nullptr;  // [n, n] after prepare
  uint8_t* dead = nullptr;
  int64_t* perm = nullptr;  // act_order only
  bool act_order = false;

  Impl(GptqDevice::Impl& d, int64_t n_) : dev(d), n(n_) {}
  ~Impl() {
    GptqDevice::Impl::release_all(H, U, dead, perm);
  }
  size_t nn() const { return size_t(n) * size_t(n); }
  // Checks an add() of `rows` rows with leading dimension `ld` and readies the Gram partial
  // (`partial`: the fp32 path sums into it before adding to H); false when there is nothing to add.
  bool begin_add(int64_t nrows, int64_t ld, bool partial) {
    if (!H) throw Error("gptq (cuda): Hessian already prepared; add() after prepare()");
    if (nrows <= 0) return false;
    if (ld < n) throw Error("gptq: Hessian input has leading dimension " + std::to_string(ld) + " < " + std::to_string(n));
    if (partial) dev.ensure(dev.partial, dev.partial_cap, nn(), "Gram partial");
    return true;
  }
};

DeviceHessian::DeviceHessian(GptqDevice& dev, int64_t n) : p_(std::make_unique<Impl>(dev.impl(), n)) {
  if (n <= 0) throw Error("gptq (cuda): Hessian width must be positive");
  p_->H = p_->dev.alloc<double>(p_->nn(), "Hessian (" + std::to_string(n) + "²)");
  ok(cudaMemsetAsync(p_->H, 0, p_->nn() * 8, p_->dev.stream), "clearing the Hessian");
}

DeviceHessian::~DeviceHessian() = default;

int64_t DeviceHessian::n() const { return p_->n; }
int64_t DeviceHessian::rows() const { return p_->rows; }
bool DeviceHessian::prepared() const { return p_->U != nullptr; }

void DeviceHessian::add(const float* x, int64_t rows, int64_t ld) {
  if (!p_->begin_add(rows, ld, /*partial=*/true)) return;
  Impl& h = *p_;
  GptqDevice::Impl& d = h.dev;
  d.ensure(d.xs, d.xs_cap, size_t(kStageRows) * size_t(h.n), "staged calibration rows");
  for (int64_t r0 = 0; r0 < rows; r0 += kRowsPerPartial) {
    const int64_t nr = std::min(kRowsPerPartial, rows - r0);
    for (int64_t s0 = 0; s0 < nr; s0 += kStageRows) {
      const int64_t ns = std::min(kStageRows, nr - s0);
      ok(cudaMemcpy2DAsync(d.xs, size_t(h.n) * 4, x + (r0 + s0) * ld, size_t(ld) * 4, size_t(h.n) * 4, size_t(ns),
                           cudaMemcpyHostToDevice, d.stream),
         "uploading calibration rows");
      ok(cuda::gptq_gram_upper(d.xs, ns, h.n, h.n, d.partial, /*accumulate=*/s0 > 0, d.stream), "Gram kernel");
      // The next upload reuses xs: pageable copies are synchronous with the host, so wait for the kernel.
      d.sync("Gram kernel");
    }
    ok(cuda::gptq_hessian_add(d.partial, h.n, h.H, d.stream), "Hessian update");
  }
  d.sync("Hessian update");
  h.rows += rows;
}

void DeviceHessian::add_device_bf16(const void* x, int64_t rows, int64_t ld) {
  if (!p_->begin_add(rows, ld, /*partial=*/false)) return;
  Impl& h = *p_;
  GptqDevice::Impl& d = h.dev;
  const auto* xb = static_cast<const uint16_t*>(x);
  for (int64_t r0 = 0; r0 < rows; r0 += kRowsPerPartial) {
    const int64_t nr = std::min(kRowsPerPartial, rows - r0);
    ok(cuda::gptq_gram_add_bf16(xb + r0 * ld, nr, h.n, ld, h.H, d.stream), "Hessian update");
  }
  d.sync("Hessian update");  // the time is the Hessian's, not the next forward step's
  h.rows += rows;
}

std::vector<double> DeviceHessian::hessian() const {
  if (!p_->H) throw Error("gptq (cuda): the Hessian was released by prepare()");
  std::vector<double> out(p_->nn());
  ok(cudaMemcpyAsync(out.data(), p_->H, out.size() * 8, cudaMemcpyDeviceToHost, p_->dev.stream), "reading H");
  p_->dev.sync("reading H");
  return out;
}

void DeviceHessian::set_hessian(const std::vector<double>& H, int64_t rows) {
  if (!p_->H) throw Error("gptq (cuda): the Hessian was released by prepare()");
  if (H.size() != p_->nn()) throw Error("gptq (cuda): set_hessian: wrong size");
  ok(cudaMemcpyAsync(p_->H, H.data(), H.size() * 8, cudaMemcpyHostToDevice, p_->dev.stream), "writing H");
  p_->dev.sync("writing H");
  p_->rows = rows;
}

DeviceHessian::Prepared DeviceHessian::prepare(double damp, bool act_order) {
  Impl& h = *p_;
  GptqDevice::Impl& d = h.dev;
  if (!h.H) throw Error("gptq (cuda): prepare() called twice");
  const int64_t n = h.n;
  Prepared P;
  // Dead columns and the diagonal, then the host's column order and damping from it.
  h.dead = d.alloc<uint8_t>(size_t(n), "dead-column flags");
  double* diag_d = d.alloc<double>(size_t(n), "Hessian diagonal");
  std::vector<double> diag(static_cast<size_t>(n));
  std::vector<uint8_t> dead(static_cast<size_t>(n));
  ok(cuda::gptq_dead_columns(h.H, n, h.dead, diag_d, d.stream), "dead columns");
  ok(cudaMemcpyAsync(diag.data(), diag_d, size_t(n) * 8, cudaMemcpyDeviceToHost, d.stream), "reading the diagonal");
  ok(cudaMemcpyAsync(dead.data(), h.dead, size_t(n), cudaMemcpyDeviceToHost, d.stream), "reading dead columns");
  d.sync("reading the diagonal");
  GptqDevice::Impl::release(diag_d);
  for (const uint8_t x : dead) P.dead_columns += x;
  std::vector<int64_t> perm(static_cast<size_t>(n));
  std::iota(perm.begin(), perm.end(), 0);
  if (act_order) {
    std::stable_sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) { return diag[a] > diag[b]; });
    h.perm = d.alloc<int64_t>(size_t(n), "column order");
    ok(cudaMemcpyAsync(h.perm, perm.data(), size_t(n) * 8, cudaMemcpyHostToDevice, d.stream), "column order");
  }
  h.act_order = act_order;
  double mean_diag = 0.0;  // in the permuted order, as the host sums it
  for (int64_t j = 0; j < n; ++j) mean_diag += diag[size_t(perm[size_t(j)])];
  mean_diag /= double(n);
  P.damp_value = damp * mean_diag;

  // R = J·P·H·P·J + damp·I → L (in place) → L⁻¹ (into H's buffer) → U = J·L⁻¹·J (into R's).
  double* R = d.alloc<double>(h.nn(), "reversed Hessian (" + std::to_string(n) + "²)");
  int* fail = nullptr;
  try {
    fail = d.alloc<int>(1, "Cholesky flag");
    ok(cudaMemsetAsync(fail, 0, sizeof(int), d.stream), "Cholesky flag");
    ok(cuda::gptq_reverse_permute(h.H, act_order ? h.perm : nullptr, n, P.damp_value, R, d.stream), "reversing H");
    ok(cuda::gptq_cholesky_inverse(R, n, h.H, fail, d.stream), "Cholesky and triangular inverse");
    ok(cuda::gptq_reverse(h.H, n, R, d.stream), "reversing L⁻¹");
    int failed = 0;
    ok(cudaMemcpyAsync(&failed, fail, sizeof(int), cudaMemcpyDeviceToHost, d.stream), "Cholesky flag");
    d.sync("Cholesky");
    if (failed)
      throw Error("gptq: the damped Hessian (" + std::to_string(n) + "×" + std::to_string(n) + ", damp " +
                  std::to_string(damp) + ") is not positive definite; raise --damp");
  } catch (...) {
    GptqDevice::Impl::release_all(R, fail);
    throw;
  }
  GptqDevice::Impl::release(fail);
  GptqDevice::Impl::release(h.H);
  h.H = nullptr;
  h.U = R;
  return P;
}

void DeviceHessian::set_factor(const std::vector<double>& U, const std::vector<uint8_t>& dead,
                               const std::vector<int64_t>& perm) {
  Impl& h = *p_;
  GptqDevice::Impl& d = h.dev;
  if (U.size() != h.nn() || dead.size() != size_t(h.n) || (!perm.empty() && perm.size() != size_t(h.n)))
    throw Error("gptq (cuda): set_factor: wrong sizes");
  if (!h.U) h.U = d.alloc<double>(h.nn(), "GPTQ factor");
  if (!h.dead) h.dead = d.alloc<uint8_t>(size_t(h.n), "dead-column flags");
  ok(cudaMemcpyAsync(h.U, U.data(), U.size() * 8, cudaMemcpyHostToDevice, d.stream), "writing U");
  ok(cudaMemcpyAsync(h.dead, dead.data(), dead.size(), cudaMemcpyHostToDevice, d.stream), "writing dead columns");
  h.act_order = !perm.empty();
  if (h.act_order) {
    if (!h.perm) h.perm = d.alloc<int64_t>(size_t(h.n), "column order");
    ok(cudaMemcpyAsync(h.perm, perm.data(), perm.size() * 8, cudaMemcpyHostToDevice, d.stream), "column order");
  }
  d.sync("set_factor");
  GptqDevice::Impl::release(h.H);
  h.H = nullptr;
}

std::vector<double> DeviceHessian::factor() const {
  if (!p_->U) throw Error("gptq (cuda): factor() before prepare()");
  std::vector<double> out(p_->nn());
  ok(cudaMemcpyAsync(out.data(), p_->U, out.size() * 8, cudaMemcpyDeviceToHost, p_->dev.stream), "reading U");
  p_->dev.sync("reading U");
  return out;
}

void DeviceHessian::check_solve_options(int group, int block, bool act_order) {
  if (block <= 0 || block > 128)
    throw Error("gptq (cuda): --block-size " + std::to_string(block) + ": the GPU solve takes 1..128");
  if (!act_order && block % group)
    throw Error("gptq (cuda): --block-size " + std::to_string(block) + " must be a multiple of --group-size " +
                std::to_string(group) + " (without --act-order, groups are formed inside a column block)");
}

GptqSolved DeviceHessian::solve(const float* w, int64_t out, int group, bool symmetric, int block, int clip_grid,
                                int clip_steps) const {
  const Impl& h = *p_;
  GptqDevice::Impl& d = h.dev;
  if (!h.U) throw Error("gptq (cuda): solve() before prepare()");
  check_solve_options(group, block, h.act_order);
  const int64_t n = h.n, padded = (n + group - 1) / group * group, ng = padded / group;
  cuda::GptqSolveArgs a;
  a.out = out;
  a.n = n;
  a.padded_in = padded;
  a.group = group;
  a.block = block;
  a.symmetric = symmetric;
  a.act_order = h.act_order;
  a.clip_grid = clip_grid;
  a.clip_steps = clip_steps;
  a.static_groups = h.act_order;
  a.dead = h.dead;
  a.perm = h.perm;
  a.U = h.U;
  std::vector<void*> bufs;
  auto take = [&](auto* p) {
    bufs.push_back(p);
    return p;
  };
  GptqSolved s;
  try {
    const std::string what = "solve of a " + std::to_string(out) + "×" + std::to_string(n) + " Linear";
    float* wdev = take(d.alloc<float>(size_t(out * n), "weights (" + what + ")"));
    a.w = wdev;
    a.wd = take(d.alloc<double>(size_t(out * n), "float64 weights (" + what + ")"));
    a.err = take(d.alloc<double>(size_t(out) * cuda::kSolveErrBlocks * size_t(block), "block errors"));
    a.codes = take(d.alloc<uint8_t>(size_t(out * padded), "codes"));
    a.scales = take(d.alloc<float>(size_t(out * ng), "scales"));
    a.zeros = take(d.alloc<uint8_t>(size_t(out * ng), "zero points"));
    a.row_loss = take(d.alloc<double>(size_t(out), "row losses"));
    ok(cudaMemcpyAsync(wdev, w, size_t(out * n) * 4, cudaMemcpyHostToDevice, d.stream), "uploading weights");
    ok(cuda::gptq_solve(a, d.stream), "GPTQ solve");
    s.codes.resize(size_t(out * padded));
    s.scales.resize(size_t(out * ng));
    s.zeros.resize(size_t(out * ng));
    s.row_loss.resize(size_t(out));
    ok(cudaMemcpyAsync(s.codes.data(), a.codes, s.codes.size(), cudaMemcpyDeviceToHost, d.stream), "reading codes");
    ok(cudaMemcpyAsync(s.scales.data(), a.scales, s.scales.size() * 4, cudaMemcpyDeviceToHost, d.stream), "scales");
    ok(cudaMemcpyAsync(s.zeros.data(), a.zeros, s.zeros.size(), cudaMemcpyDeviceToHost, d.stream), "zeros");
    ok(cudaMemcpyAsync(s.row_loss.data(), a.row_loss, s.row_loss.size() * 8, cudaMemcpyDeviceToHost, d.stream),
       "row losses");
    d.sync("GPTQ solve");
  } catch (...) {
    for (void* p : bufs) GptqDevice::Impl::release(p);
    throw;
  }
  for (void* p : bufs) GptqDevice::Impl::release(p);
  return s;
}

}  // namespace g4c::quant

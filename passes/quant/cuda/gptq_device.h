// GPTQ's Hessians and column solves on the GPU (the 12B's GPTQ on the GPU inside the
// budget). No runtime here: tools/quant_gpu hands it the CUDA backend's stream and budget check
// and adapts it to passes/quant's HessianStore. The arithmetic is the host's (gptq_kernels.cuh):
//   DeviceHessian h(dev, n);
//   h.add(x, rows, ld);                 // H += 2·XᵀX, fp32 partials of ≤ 8192 rows, float64 sum
//   h.prepare(damp, act_order);         // dead columns, column order, damping, U = chol(H⁻¹)ᵀ
//   GptqSolved s = h.solve(w, out, group, symmetric, block);
// Everything runs on the given stream (the CUDA backend's: its green context under --emulate);
// after each allocation the `check` callback is called (the backend's budget check).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace g4c::quant {

// Scratch shared by the Hessians of one run (the fp32 partial and the staged rows of X).
class GptqDevice {
 public:
  // stream: a cudaStream_t (nullptr: the legacy default stream). check(what): throws when the
  // process is over its device budget.
  explicit GptqDevice(void* stream, std::function<void(const std::string& what)> check = {});
  ~GptqDevice();
  GptqDevice(const GptqDevice&) = delete;
  GptqDevice& operator=(const GptqDevice&) = delete;
  // Frees the Gram scratch (the observing pass is over; the solves need the memory).
  void release_scratch();

  struct Impl;
  Impl& impl() { return *p_; }

 private:
  std::unique_ptr<Impl> p_;
};

struct GptqSolved {
  std::vector<uint8_t> codes;   // [out, padded_in]
  std::vector<float> scales;    // [out, padded_in / group]
  std::vector<uint8_t> zeros;   // [out, padded_in / group]
  std::vector<double> row_loss; // [out]
};

class DeviceHessian {
 public:
  DeviceHessian(GptqDevice& dev, int64_t n);
  ~DeviceHessian();
  DeviceHessian(const DeviceHessian&) = delete;
  DeviceHessian& operator=(const DeviceHessian&) = delete;
  int64_t n() const;
  int64_t rows() const;
  // H += 2·XᵀX for host X [rows, ld] (ld ≥ n), in partials of ≤ 8192 rows as
  // quant::HessianAccumulator::add.
  void add(const float* x, int64_t rows, int64_t ld);
  // The same from bf16 rows already in device memory (x [rows, ld], on the device's stream), on
  // the tensor cores: each partial is the exact XᵀX of its rows up to fp32 summation error
  // (cuda::gptq_gram_add_bf16), not add()'s fma chain; needs no n² fp32 partial.
  void add_device_bf16(const void* x, int64_t rows, int64_t ld);
  std::vector<double> hessian() const;  // H (before prepare)
  void set_hessian(const std::vector<double>& H, int64_t rows);

  // quant::prepare_hessian on the device. Frees H; keeps the factor for solve().
  struct Prepared {
    int64_t dead_columns = 0;
    double damp_value = 0.0;
  };
  Prepared prepare(double damp, bool act_order);
  bool prepared() const;
  // Installs a factor computed elsewhere (tests: the host's, so the solve is compared to the host's alone).
  void set_factor(const std::vector<double>& U, const std::vector<uint8_t>& dead, const std::vector<int64_t>& perm);
  std::vector<double> factor() const;  // U [n, n] (after prepare)

  // GPTQ of one Linear W [out, n] (host, row-major) against the prepared factor. block ≤ 128 and,
  // without act_order, a multiple of group. clip_grid/clip_steps > 0: group ranges are the
  // MSE-optimal shrink (quant::ClipSearch), fixed before the solve (static groups).
  GptqSolved solve(const float* w, int64_t out, int group, bool symmetric, int block, int clip_grid = 0,
                   int clip_steps = 0) const;
  // What solve() accepts (throws g4c::Error otherwise): callers check before any long work.
  static void check_solve_options(int group, int block, bool act_order);

 private:
  struct Impl;
  std::unique_ptr<Impl> p_;
};

}  // namespace g4c::quant

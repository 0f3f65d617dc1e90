// GPTQ on the GPU at the 12B's shapes, phase by phase: the Gram of the calibration rows
// (DeviceHessian::add_device_bf16), the factor (prepare: Cholesky and triangular inverse) and the
// column solve of one Linear with and without the MSE clip search (solve). Whole GPU, or an N-SM
// green context (--green 16: the emulated 1g.10gb slice). Each phase is timed once after a
// warm-up on a smaller width, with the stream synchronized around it (wall time).
// Usage: g4c_bench_gptq [--green N] [--batches B]   (B batches of 4096 rows; default 16 = 128 × 512)
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/cuda/bench_util.h"
#include "passes/quant/cuda/gptq_device.h"

using namespace g4c;
using namespace g4c::gpubench;

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

struct Shape {
  const char* name;
  int64_t n, out;
};

void run(const Shape& s, int batches, bool print) {
  const int64_t rows = 4096;
  void* x = nullptr;
  CK(cudaMalloc(&x, size_t(rows * s.n) * 2));
  fill_random(x, size_t(rows * s.n) * 2, 7, /*bf16_normal=*/true);
  CK(cudaDeviceSynchronize());
  std::vector<float> w(size_t(s.out * s.n));
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.f, 0.02f);
  for (float& v : w) v = nd(rng);

  quant::GptqDevice dev(g_stream);
  quant::DeviceHessian h(dev, s.n);
  double t = now();
  for (int b = 0; b < batches; ++b) h.add_device_bf16(x, rows, s.n);
  const double t_gram = now() - t;
  CK(cudaFree(x));
  dev.release_scratch();
  t = now();
  h.prepare(0.01, /*act_order=*/false);
  const double t_factor = now() - t;
  t = now();
  h.solve(w.data(), s.out, 128, /*symmetric=*/true, 128);
  const double t_solve = now() - t;
  t = now();
  h.solve(w.data(), s.out, 128, /*symmetric=*/true, 128, /*clip_grid=*/100, /*clip_steps=*/80);
  const double t_clip = now() - t;
  if (!print) return;
  const double n = double(s.n), gram_flops = 2.0 * double(batches * rows) * n * n / 2;  // upper triangle
  const double factor_flops = 2.0 * n * n * n / 3, solve_flops = double(s.out) * n * n;
  std::printf("%-22s n %6lld out %6lld | Gram %7.3f s (%6.1f TFLOP/s bf16) | factor %7.3f s (%5.2f TFLOP/s fp64, "
              "2n³/3) | solve %7.3f s (%5.2f TFLOP/s, out·n²), with clip %7.3f s\n",
              s.name, (long long)s.n, (long long)s.out, t_gram, gram_flops / t_gram / 1e12, t_factor,
              factor_flops / t_factor / 1e12, t_solve, solve_flops / t_solve / 1e12, t_clip);
}

}  // namespace

int main(int argc, char** argv) {
  int green = 0, batches = 16;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--green") green = std::atoi(argv[i + 1]);
    if (std::string(argv[i]) == "--batches") batches = std::atoi(argv[i + 1]);
  }
  if (green > 0) g_stream = make_green_stream(green);
  std::printf("GPTQ phases, %d × 4096 calibration rows, %s\n", batches,
              green > 0 ? (std::to_string(green) + "-SM green context").c_str() : "whole GPU");
  run({"warm-up", 1024, 1024}, 1, false);
  // The 12B's Linears by input width: q/k/v and gate/up read 3840 columns (one factor serves the
  // group; the widest output is gate/up's 15360), down reads 15360 (out 3840).
  for (const Shape& s : {Shape{"gate/up (3840 in)", 3840, 15360}, Shape{"down (15360 in)", 15360, 3840}})
    run(s, batches, true);
  return 0;
}

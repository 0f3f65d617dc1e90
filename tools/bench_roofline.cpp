// Work model and device ceilings for `g4c bench` (see bench_roofline.h).
#include "tools/bench_roofline.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>

#include "runtime/cpu/gemm.h"

namespace g4c::bench {
namespace {

// Visible keys of a token at position t in layer g.
int64_t visible(const models::LayerGeometry& g, int64_t t) {
  return g.kind == models::LayerKind::Sliding ? std::min<int64_t>(t + 1, g.window) : t + 1;
}

// Σ_{t=a}^{b-1} visible(g, t) in closed form.
double visible_sum(const models::LayerGeometry& g, int64_t a, int64_t b) {
  auto full_sum = [](int64_t n) { return double(n) * double(n + 1) / 2; };  // Σ_{t<n} (t+1)
  if (b <= a) return 0;
  if (g.kind == models::LayerKind::Full) return full_sum(b) - full_sum(a);
  const int64_t W = g.window;
  auto sl = [&](int64_t n) {  // Σ_{t<n} min(t+1, W)
    return n <= W ? full_sum(n) : full_sum(W) + double(n - W) * double(W);
  };
  return sl(b) - sl(a);
}

// Σ out·in over the decoder Linears, and the tied LM head's H·V.
double linear_params(const models::ModelConfig& cfg) {
  double n = 0;
  for (const auto& l : models::linear_shapes(cfg)) n += double(l.out) * double(l.in);
  return n;
}
double head_params(const models::ModelConfig& cfg) { return double(cfg.hidden_size) * double(cfg.vocab_size); }

// K+V bytes of one token in layer li: as the backend holds it when given, else BF16.
double kv_bytes_of(const models::ModelConfig& cfg, size_t li, const std::vector<double>& kv_token_bytes) {
  return li < kv_token_bytes.size() ? kv_token_bytes[li] : double(cfg.layers[li].kv_bytes_per_token());
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

double checkpoint_bytes(const std::filesystem::path& model_dir) {
  double n = 0;
  for (const auto& e : std::filesystem::directory_iterator(model_dir))
    if (e.is_regular_file() && e.path().extension() == ".safetensors") n += double(e.file_size());
  return n;
}

WorkModel count_work(const models::ModelConfig& cfg, double weight_bytes, const std::vector<RequestShape>& requests,
                     const ScheduleShape& sched) {
  const double linear = linear_params(cfg), head = head_params(cfg);
  WorkModel m;
  int64_t prompt_total = 0, max_prompt_steps = 0, max_decode_tokens = 0;
  for (const auto& r : requests) {
    const int64_t P = r.prompt_tokens, G = r.generated_tokens;
    const int64_t D = std::max<int64_t>(G - 1, 0);  // decode feeds generated tokens but the last
    prompt_total += P;
    max_prompt_steps = std::max(max_prompt_steps, (P + sched.chunk_tokens - 1) / sched.chunk_tokens);
    max_decode_tokens = std::max(max_decode_tokens, D);
    m.prefill.tokens += P;
    m.decode.tokens += D;
    m.prefill.linear_flops += 2 * linear * double(P) + (G > 0 ? 2 * head : 0.0);
    m.decode.linear_flops += 2 * (linear + head) * double(D);
    for (size_t li = 0; li < cfg.layers.size(); ++li) {
      const auto& g = cfg.layers[li];
      const double per_key = 4.0 * cfg.num_q_heads * g.head_dim;
      const double kv = kv_bytes_of(cfg, li, sched.kv_token_bytes);
      m.prefill.attention_flops += per_key * visible_sum(g, 0, P);
      m.decode.attention_flops += per_key * visible_sum(g, P, P + D);
      m.prefill.kv_bytes += kv * double(P) + (P > 0 ? kv * double(visible(g, P - 1)) : 0.0);
      m.decode.kv_bytes += kv * (visible_sum(g, P, P + D) + double(D));
    }
  }
  m.prefill.steps = sched.measured_prefill_steps > 0
                        ? sched.measured_prefill_steps
                        : std::max((prompt_total + sched.token_budget - 1) / sched.token_budget, max_prompt_steps);
  m.decode.steps = std::max(sched.measured_steps - m.prefill.steps, max_decode_tokens);
  m.prefill.weight_bytes = weight_bytes * double(m.prefill.steps);
  m.decode.weight_bytes = weight_bytes * double(m.decode.steps);
  return m;
}

Ceilings measure_cpu_ceilings(int threads) {
  if (threads <= 0) threads = int(std::max(1u, std::thread::hardware_concurrency()));
  Ceilings c;
  {
    const size_t total = size_t(128) << 20, per = total / size_t(threads);
    std::vector<char> src(total, 1), dst(total, 0);
    double best = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      std::vector<std::thread> ts;
      for (int i = 0; i < threads; ++i)
        ts.emplace_back([&, i] { std::memcpy(dst.data() + i * per, src.data() + i * per, per); });
      for (auto& t : ts) t.join();
      best = std::min(best, seconds_since(t0));
    }
    c.bytes_per_s = 2.0 * double(per * threads) / best;
    c.bytes_source = "measured at start: memcpy of 128 MiB on " + std::to_string(threads) +
                     " threads, best of 3, read+write bytes";
  }
  {
    // The CPU backend's own GEMM (runtime/cpu/gemm.h: register-tiled, AVX-512/AVX2 chosen at
    // run time) on a 384×512·512 product per thread, A in L2 and B packed: the fastest fp32
    // matrix work this process can do, so a phase's fraction of it stays ≤ 1. (A plain
    // compiler-vectorised i-k-j loop read ~9 GFLOP/s here and put prefill at 578 %.)
    constexpr int M = 384, N = 512, K = 512, kReps = 4;
    std::vector<float> a(size_t(M) * K), b(size_t(N) * K);
    uint32_t x = 12345;  // not zeros: they can run faster than real data
    for (auto& v : a) v = float((x = x * 1664525u + 1013904223u) >> 9) * 0x1p-23f - 0.5f;
    for (auto& v : b) v = float((x = x * 1664525u + 1013904223u) >> 9) * 0x1p-23f - 0.5f;
    std::vector<float> packed(size_t(runtime::cpu::packed_b_floats(N, K)));
    runtime::cpu::pack_b({b.data(), K, 1}, N, K, packed.data(), 0, (N + runtime::cpu::kGemmNr - 1) / runtime::cpu::kGemmNr);
    const runtime::cpu::PanelB pb{packed.data(), runtime::cpu::kGemmNr, runtime::cpu::kGemmNr * K};
    std::vector<std::vector<float>> out(size_t(threads), std::vector<float>(size_t(M) * N));
    double best = 1e30;
    for (int rep = 0; rep < 4; ++rep) {  // the first is a warm-up (page faults, frequency ramp)
      const auto t0 = std::chrono::steady_clock::now();
      std::vector<std::thread> ts;
      for (int w = 0; w < threads; ++w)
        ts.emplace_back([&, w] {
          for (int r = 0; r < kReps; ++r)
            runtime::cpu::gemm_tile({a.data(), K, 1}, pb, M, N, K, out[size_t(w)].data(), N, false);
        });
      for (auto& t : ts) t.join();
      if (rep > 0) best = std::min(best, seconds_since(t0));
    }
    c.flops_per_s = 2.0 * double(M) * N * K * kReps * threads / best;
    c.flops_source = "measured at start: the CPU backend's fp32 GEMM (" +
                     std::string(runtime::cpu::cpu_uses_avx512() ? "AVX-512" : runtime::cpu::cpu_has_avx2_fma() ? "AVX2" : "portable") + "), " +
                     std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K) + " per thread on " +
                     std::to_string(threads) + " threads, best of 3 after a warm-up";
  }
  return c;
}

Ceilings cuda_ceilings(bool emulated) {
  Ceilings c;
  if (emulated) {
    c.flops_per_s = 110e12;
    c.bytes_per_s = 1.5e12;
    c.flops_source = "DESIGN.md §5, measured on the H200 in a 16-SM green context: bf16 matmul 110 TFLOP/s";
    c.bytes_source = "DESIGN.md §5, 16-SM green context: copy 1.2-1.5 TB/s (1.54 measured; upper end used)";
  } else {
    c.flops_per_s = 788e12;
    c.bytes_per_s = 4.2e12;
    c.flops_source = "DESIGN.md §5, measured on the H200 (full GPU): bf16 matmul 788 TFLOP/s";
    c.bytes_source = "DESIGN.md §5, measured on the H200 (full GPU): copy 4.2 TB/s";
  }
  return c;
}

nlohmann::json phase_json(const PhaseWork& w, double elapsed_s, const Ceilings& c) {
  const double t_flops = w.flops() / c.flops_per_s, t_bytes = w.bytes() / c.bytes_per_s;
  const double t_roof = std::max(t_flops, t_bytes);
  nlohmann::json j = {{"tokens", w.tokens},
                      {"steps_modelled", w.steps},
                      {"flops", w.flops()},
                      {"linear_flops", w.linear_flops},
                      {"attention_flops", w.attention_flops},
                      {"bytes", w.bytes()},
                      {"weight_bytes", w.weight_bytes},
                      {"kv_bytes", w.kv_bytes},
                      {"arithmetic_intensity", w.bytes() > 0 ? w.flops() / w.bytes() : 0.0},
                      {"elapsed_s", elapsed_s},
                      {"roofline_time_s", t_roof},
                      {"bound", t_flops >= t_bytes ? "compute" : "memory"}};
  j["achieved_flops_per_s"] = elapsed_s > 0 ? w.flops() / elapsed_s : 0.0;
  j["achieved_bytes_per_s"] = elapsed_s > 0 ? w.bytes() / elapsed_s : 0.0;
  j["roofline_fraction"] = elapsed_s > 0 ? t_roof / elapsed_s : 0.0;
  return j;
}

PhaseWork decode_batch_work(const models::ModelConfig& cfg, double weight_bytes, const DecodeBatch& b,
                            const std::vector<double>& kv_token_bytes) {
  PhaseWork w;
  w.tokens = b.rows;
  w.steps = b.steps;
  w.linear_flops = 2 * (linear_params(cfg) + head_params(cfg)) * double(b.rows);
  w.weight_bytes = weight_bytes * double(b.steps);
  for (size_t li = 0; li < cfg.layers.size(); ++li) {
    const auto& g = cfg.layers[li];
    const double seen = double(g.kind == models::LayerKind::Sliding ? b.window_keys : b.keys);
    const double kv = kv_bytes_of(cfg, li, kv_token_bytes);
    w.attention_flops += 4.0 * cfg.num_q_heads * g.head_dim * seen;
    w.kv_bytes += kv * (seen + double(b.rows));
  }
  return w;
}

nlohmann::json decode_batch_json(const models::ModelConfig& cfg, double weight_bytes, const DecodeBatch& b,
                                 const std::vector<double>& kv_token_bytes, const Ceilings& c) {
  nlohmann::json j = phase_json(decode_batch_work(cfg, weight_bytes, b, kv_token_bytes), b.seconds, c);
  j["rows_min"] = b.rows_lo;
  j["rows_max"] = b.rows_hi;
  j["steps"] = b.steps;
  j["mean_rows"] = b.steps > 0 ? double(b.rows) / double(b.steps) : 0.0;
  j["ms_per_step"] = b.steps > 0 ? 1e3 * b.seconds / double(b.steps) : 0.0;
  return j;
}

SliceCeilings real_slice_1g10gb() {
  SliceCeilings s;
  s.name = "1g.10gb";
  s.sms = 14;
  s.emulated_sms = 16;
  s.flops_per_s = 110e12 * 14 / 16;  // the 16-SM green context's measured bf16 matmul rate, per SM
  s.bytes_per_s = 3.35e12 / 8;       // one of the eight HBM3 memory slices of a 3.35 TB/s H100/H800 SXM5
  s.source =
      "DESIGN.md §5: 14 SMs and 1/8 of the memory (NVIDIA MIG user guide, 1g.10gb profile); HBM3 3.35 TB/s "
      "(H100/H800 SXM5 datasheet) / 8 = 0.42 TB/s; bf16 110 TFLOP/s measured on 16 SMs x 14/16 = 96 TFLOP/s";
  return s;
}

nlohmann::json project_phase(const PhaseWork& w, double measured_s, const SliceCeilings& s) {
  const double sm_scaled = measured_s * double(s.emulated_sms) / double(s.sms);
  const double memory = w.bytes() / s.bytes_per_s, compute = w.flops() / s.flops_per_s;
  return {{"measured_s", measured_s},
          {"sm_scaled_s", sm_scaled},
          {"memory_s", memory},
          {"compute_s", compute},
          {"projected_s", std::max({sm_scaled, memory, compute})},
          {"projected_upper_s", sm_scaled + memory}};
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = p / 100.0 * double(v.size() - 1);
  const size_t lo = size_t(std::floor(pos)), hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - double(lo));
}

}  // namespace g4c::bench

// Work model and device ceilings for `g4c bench` (DESIGN.md §5): per phase (prefill, decode)
// the FLOPs and bytes the workload needs, counted from the model config, and the roofline
// fraction against the device's ceilings.
//
// FLOPs: 2·(out·in) per token for every Linear it passes through; the tied LM head (2·H·V)
// for every token whose logits are needed (the last prompt token of each request in prefill,
// every fed token in decode); attention 4·Hq·head_dim·n per token and layer (QKᵀ and PV), with
// n = visible keys = t+1 (full) or min(t+1, W) (sliding). Norms, RoPE, softmax are not counted.
// Bytes: the checkpoint's tensor bytes (as stored: BF16 or INT4 codes + scales) once per step
// that the phase runs, plus KV cache traffic (K and V per layer, as the backend holds them: bf16
// on the GPU, fp32 on the CPU, or FP8 codes + scales; BF16 when no plan is given): prefill writes every
// prompt token and reads each request's visible context once; decode writes one token and reads
// every visible key per fed token and layer. Activations are not counted.
// Steps: prefill = the steps measured for the prefill-only workload when given, else
// max(ceil(prompt tokens / token budget), max over requests of ceil(prompt / chunk)); decode =
// measured steps − prefill steps (at least the longest request's generated − 1), i.e. the
// marginal steps that decoding adds, matching the marginal time (full − prefill-only) it is
// divided by.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/config.h"

namespace g4c::bench {

struct RequestShape {
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
};

struct PhaseWork {
  int64_t tokens = 0;  // tokens fed through the model in this phase
  int64_t steps = 0;   // modelled steps (see above)
  double linear_flops = 0, attention_flops = 0;
  double weight_bytes = 0, kv_bytes = 0;
  double flops() const { return linear_flops + attention_flops; }
  double bytes() const { return weight_bytes + kv_bytes; }
};

struct WorkModel {
  PhaseWork prefill, decode;
};

struct ScheduleShape {
  int64_t token_budget = 512;  // tokens per step
  int64_t chunk_tokens = 256;  // prefill tokens per sequence per step
  int64_t measured_steps = 0;  // steps the engine ran for the whole workload (0: unknown)
  int64_t measured_prefill_steps = 0;  // steps of the prefill-only workload (0: model them)
  // K+V bytes of one token per decoder layer as the backend holds them (plan::kv_token_bytes
  // with the backend's element size); empty: BF16 (models::LayerGeometry::kv_bytes_per_token).
  std::vector<double> kv_token_bytes;
};

// Tensor bytes of the checkpoint in `model_dir` (sum of *.safetensors file sizes).
double checkpoint_bytes(const std::filesystem::path& model_dir);

WorkModel count_work(const models::ModelConfig& cfg, double weight_bytes, const std::vector<RequestShape>& requests,
                     const ScheduleShape& sched);

struct Ceilings {
  double flops_per_s = 0;  // peak arithmetic rate used for the roofline
  double bytes_per_s = 0;  // peak memory bandwidth (read + write bytes per second)
  std::string flops_source, bytes_source;
};

// CPU: measured now: a memcpy of 128 MiB split over `threads` threads (best of 3, read + write
// bytes) and a simple fp32 GEMM 384³ on `threads` threads (best of 3). About half a second.
Ceilings measure_cpu_ceilings(int threads);
// CUDA: DESIGN.md §5, measured on the H200 (full GPU, or the 16-SM green context of
// --emulate 1g.10gb).
Ceilings cuda_ceilings(bool emulated);

// The phase entry of the report: work, elapsed, achieved rates, roofline time and fraction.
nlohmann::json phase_json(const PhaseWork& w, double elapsed_s, const Ceilings& c);

// Pure decode steps of one batch size range (rows_lo … rows_hi rows), as the engine counts them
// (runtime::DecodeBatchStats summed over the range): their work is every Linear and the LM head
// per row, attention over the keys each row sees (keys in full layers, window_keys in sliding
// ones), the checkpoint's bytes once per step, and K/V: every visible key read and one row written.
struct DecodeBatch {
  int rows_lo = 0, rows_hi = 0;
  int64_t steps = 0, rows = 0;  // steps, and rows over all of them
  double seconds = 0;
  int64_t keys = 0, window_keys = 0;
};
PhaseWork decode_batch_work(const models::ModelConfig& cfg, double weight_bytes, const DecodeBatch& b,
                            const std::vector<double>& kv_token_bytes);
// The report entry: rows, steps, ms per step and phase_json of the range's work and time.
nlohmann::json decode_batch_json(const models::ModelConfig& cfg, double weight_bytes, const DecodeBatch& b,
                                 const std::vector<double>& kv_token_bytes, const Ceilings& c);

// A real MIG slice, projected from a run in the emulated one (DESIGN.md §5): the emulation has
// `emulated_sms` SMs but the whole GPU's HBM bandwidth; the slice has `sms` SMs and a share of
// the HBM. Ceilings of the real slice: FLOP/s = the emulation's measured rate × sms /
// emulated_sms; bytes/s = its share of the HBM.
struct SliceCeilings {
  std::string name;
  int sms = 0, emulated_sms = 0;
  double flops_per_s = 0, bytes_per_s = 0;
  std::string source;
};
// 1g.10gb of an H100/H800 SXM5 (DESIGN.md §5 states the figures and their sources).
SliceCeilings real_slice_1g10gb();

// A phase measured in the emulation, projected to the real slice:
//  - sm_scaled_s   = measured × emulated_sms / sms (every kernel has fewer SMs);
//  - memory_s      = bytes / slice bytes/s, compute_s = FLOPs / slice FLOP/s (roofline floors);
//  - projected_s   = max(sm_scaled_s, memory_s, compute_s): the phase cannot run faster than
//    its measured work on fewer SMs, nor than its bytes through the slice's HBM (a lower bound
//    when the measured run overlapped memory and compute perfectly);
//  - projected_upper_s = sm_scaled_s + memory_s: no overlap of the HBM traffic with anything.
nlohmann::json project_phase(const PhaseWork& w, double measured_s, const SliceCeilings& s);

double percentile(std::vector<double> v, double p);  // linear interpolation, p in [0, 100]

}  // namespace g4c::bench

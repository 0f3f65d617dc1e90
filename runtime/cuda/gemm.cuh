// GEMM family: W4A16 (INT4 weights, BF16 activations) and BF16-weight GEMMs for the CUDA
// backend. Host API only (plain C++); kernels live in gemm.cu.
//
// Math: Y[m][n] = Σ_k X[m][k] · W[n][k] (a Linear, weight [out=n, in=k]), fp32 accumulation,
// BF16 in/out, then an epilogue (see Epilogue). KERNELS.md Linear (None / ResidualAdd /
// GeluTanhGateUp: W0, W1 repacked as one gate_up weight) and LmHead (SoftcapF32).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "runtime/cuda/kernel_options.h"

namespace g4c::cuda {

using bf16 = __nv_bfloat16;

// ---------------------------------------------------------------------------------------
// INT4 weights. Source = the lab format (DESIGN.md §3): qweight uint8 [n, kp/2], element 2j
// in the low nibble of byte j; scales fp16 or bf16 [n, kp/G]; zeros uint8 [n, kp/G] or
// absent (symmetric: w = (code−8)·s; asymmetric: w = (code−z)·s); kp = ceil(k/G)·G.
//
// Repacked (kernel) layout, made once at load time by int4_repack():
//   qweight: [ntiles = ceil(n/16)][kp/64][32 lanes][16 bytes]. The 16 bytes of one lane hold
//     its mma.m16n8k16 A fragments for the 4 k16 steps of a 64-wide k chunk of a 16-row
//     tile: word s (k16 step s), nibble i and i+4 = fragment register i (see dequant8 in
//     common.cuh). Rows past n get code 0 and scale 0 (contribute exactly 0).
//   scales : bf16 [ntiles][kp/G][16] (fp16 source scales are rounded to bf16: one extra
//            relative rounding of ≤ 2^-9 per group, same order as the bf16 weight rounding).
//   zeros  : uint8 [ntiles][kp/G][16], or null for symmetric weights.
// gate_up: the repack of a gate/up pair (same shape [f, k]) into one [2f, k] weight whose
//   16-row tile t holds gate rows 8t..8t+7 then up rows 8t..8t+7; used with GeluMul.
struct Int4Weight {
  const void* qweight = nullptr;  // 16-byte aligned
  const bf16* scales = nullptr;
  const uint8_t* zeros = nullptr;  // null → symmetric
  int n = 0;                        // packed rows (2f for a gate/up pair)
  int k = 0;                        // in_features, multiple of 8
  int kp = 0;                       // padded_in, multiple of group
  int group = 0;                    // 64 or 128
  bool gate_up = false;
};

// Bytes of device memory the repacked weight needs (qweight + scales + zeros, 256-aligned parts).
size_t int4_repacked_bytes(int n, int k, int group, bool asymmetric);

// Repacks device-resident lab-format tensors into `dst` (int4_repacked_bytes of device memory)
// and returns the view. For a gate/up pair pass both (up_* non-null) with n = f; the result
// has n = 2f and gate_up = true. Preconditions: group ∈ {64,128}; k % 8 == 0;
// scales_are_bf16 says the source scale dtype (else fp16); zeros null iff symmetric.
Int4Weight int4_repack(const uint8_t* qweight, const void* scales, const uint8_t* zeros,
                       const uint8_t* up_qweight, const void* up_scales, const uint8_t* up_zeros,
                       bool scales_are_bf16, int n, int k, int group, void* dst,
                       cudaStream_t stream);

// BF16 weight [n, k] row-major (row stride ldw elements). gate_up: rows interleaved as above
// (see interleave_gate_up_bf16).
struct Bf16Weight {
  const bf16* w = nullptr;  // 16-byte aligned, ldw % 8 == 0
  int n = 0;
  int k = 0;  // multiple of 8
  int ldw = 0;
  bool gate_up = false;
};
// dst [2f, k] ← gate [f, k] and up [f, k] interleaved by 8 rows per 16-row tile (f % 8 == 0).
void interleave_gate_up_bf16(const bf16* gate, const bf16* up, int f, int k, bf16* dst,
                             cudaStream_t stream);

enum class Epilogue : int {
  Store = 0,        // y[m][n] = bf16(acc)
  ResidualAdd = 1,  // y[m][n] = bf16(acc + residual[m][n]) (y may alias residual)
  GeluMul = 2,      // gate/up weight: y[m][j] = bf16(gelu_tanh(acc_gate_j) · acc_up_j), j < n/2
  SoftcapF32 = 3,   // y is float: y[m][n] = cap·tanh(acc/cap), = acc when cap = 0 (LM head)
};

struct GemmOut {
  void* y = nullptr;  // bf16 (float for SoftcapF32)
  int ldy = 0;        // elements
  const bf16* residual = nullptr;
  int ldr = 0;
  float softcap = 30.f;
};

// The most rows w4a16_gemm runs through the weight-streaming decode kernels.
constexpr int kDecodeMaxRows = 32;

// Workspace for the decode path (m ≤ kDecodeMaxRows): the streaming kernels' fp32 partials and tile
// counters (gemm_decode.cuh); size a shared workspace with m = kDecodeMaxRows and the options the
// launches use (deterministic mode needs more). It must be ZERO the first time it is used
// (cudaMemset once); the kernels leave it zero. One workspace must not be used by two launches
// running concurrently (different streams).
size_t w4a16_workspace_bytes(int m, const Int4Weight& w, const KernelOptions& ko = {});

// x: bf16 [m, ldx] (ldx % 8 == 0, 16-byte aligned), first w.k columns used.
// The weight-streaming decode kernels of gemm_decode.cu (one pass over the weights for all m
// rows; w4a16_decode_choice picks the variant; `ko` the launch by PDL and the summation order)
// for m ≤ 16, and for 17–32 rows unless w4a16_rows_take_wgmma says otherwise; else the
// warp-specialized persistent sm_90a wgmma kernel (w4a16_gemm_wgmma, gemm_sm90_rs.cu: one thread
// copies X and the packed INT4 tiles (tensor maps) into a stage ring; two consumer warpgroups
// dequantize their fragments in registers and issue wgmma with A from registers; persistent grid
// of one block per SM of the stream (green context aware); 32, 64, 128 or 256 tokens per tile,
// split-K over 2 or 4 blocks by shape). Returns cudaSuccess or the launch error.
cudaError_t w4a16_gemm(const bf16* x, int m, int ldx, const Int4Weight& w, Epilogue ep,
                       const GemmOut& out, void* workspace, size_t workspace_bytes,
                       cudaStream_t stream, const KernelOptions& ko = {});

// Whether w4a16_gemm runs `m` rows of an n-column weight on the wgmma kernel on `sms` SMs
// (g4c_bench_decode, BENCHMARKS.md "Kernels"). Past kDecodeMaxRows rows always: the decode
// kernels would read the weights twice. For 17–32 rows on a whole GPU (≥ 64 SMs) when
// 2048 ≤ n ≤ 8192: there a decode kernel's second token tile costs more than wgmma's whole tile
// (H100, 17–32 rows: sliding q, k|v, o, full q, full o at 0.50–0.99× the decode kernels' time,
// down 1.07× at 17 rows and 0.84× at 32), while gate+up (n 30720) and full q+k (8704) stay faster
// on the decode kernels and a narrower n leaves wgmma too few column tiles to fill the GPU. In a
// 16-SM slice the decode kernels are faster at 17–24 rows on every shape (gate+up 1.33× at 32).
bool w4a16_rows_take_wgmma(int m, int n, int sms);

// The wgmma kernel for any m ≥ 1 (128 or 256 tokens per tile from 64 rows; below, one tile of 32
// or 64 tokens): what w4a16_gemm runs where w4a16_rows_take_wgmma says so; g4c_bench_decode
// times it against the decode kernels at every row count.
cudaError_t w4a16_gemm_wgmma(const bf16* x, int m, int ldx, const Int4Weight& w, Epilogue ep, const GemmOut& out,
                             cudaStream_t stream);

// Dequantizes a repacked INT4 weight to bf16 [n][k] (row stride k); for benchmarks (the
// dequantize-then-cuBLAS baseline) and debugging. Value = bf16((code − z)·s) as the kernels use.
cudaError_t int4_dequantize(const Int4Weight& w, bf16* out, cudaStream_t stream);

// SMs available to kernels on `stream`: its green context's SM count, else the device's.
int gemm_stream_sms(cudaStream_t stream);

// Same contract with BF16 weights (BF16 path, LM head). m ≤ 16: mma.sync kernel with 16-token
// tiles (weight streaming); m ≥ 64: wgmma (256-token tiles when m ≥ 256 and k ≥ 8192 or
// n ≥ 16384, else 128); otherwise the mma.sync 128×128 kernel.
cudaError_t bf16_gemm(const bf16* x, int m, int ldx, const Bf16Weight& w, Epilogue ep,
                      const GemmOut& out, cudaStream_t stream);

}  // namespace g4c::cuda

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

// Workspace for the decode path (m ≤ 16): the legacy split-K kernel's partials and tickets, or
// the streaming kernels' fp32 partials and tile counters (gemm_decode.cuh); the size grows with
// m, so size a shared workspace with m = 16. It must be ZERO the first time it is used
// (cudaMemset once); both kernels leave it zero. One workspace must not be used by two launches
// running concurrently (different streams).
size_t w4a16_workspace_bytes(int m, const Int4Weight& w);

// x: bf16 [m, ldx] (ldx % 8 == 0, 16-byte aligned), first w.k columns used.
// m ≤ 16: weight-streaming decode kernels, one pass over the weights: the persistent streaming
// family of gemm_decode.cu, or the legacy split-K kernel where that was measured faster
// (w4a16_decode_choice).
// m ≥ 64: warp-specialized persistent sm_90a wgmma kernel (gemm_sm90_rs.cu: one thread
// copies X (TMA) and the packed INT4 tiles (bulk copies) into a stage ring; two consumer
// warpgroups dequantize their fragments in registers and issue wgmma with A from registers;
// persistent grid of one block per SM of the stream (green context aware); 128 rows × 256
// tokens per tile, 128 tokens when m ≤ 128). Measured on the H200 (BENCHMARKS.md).
// 16 < m < 64: the mma.sync tile kernel (128×128, INT4 dequantized in registers).
// Returns cudaSuccess or the launch error.
cudaError_t w4a16_gemm(const bf16* x, int m, int ldx, const Int4Weight& w, Epilogue ep,
                       const GemmOut& out, void* workspace, size_t workspace_bytes,
                       cudaStream_t stream);

// Dequantizes a repacked INT4 weight to bf16 [n][k] (row stride k); for benchmarks (the
// dequantize-then-cuBLAS baseline) and debugging. Value = bf16((code − z)·s) as the kernels use.
cudaError_t int4_dequantize(const Int4Weight& w, bf16* out, cudaStream_t stream);

// For tests and benchmarks: 0 (default) = the shape-based choice above (BF16: wgmma for every
// m ≥ 64, 128- or 256-token tiles by shape); 2 / 3 = all-warps wgmma with 256 / 128-token
// tiles for m ≥ 64; 1 = the mma.sync tile kernels for every m > 16; 4 / 5 = warp-specialized
// persistent wgmma with 256 / 128-token tiles (INT4 and BF16) for m ≥ 64; 6 / 7 = the same
// with one block per tile; 8 = the INT4 choice before the warp-specialized kernel (mma.sync,
// or all-warps wgmma 256 for m ≥ 256 with k ≥ 12288 or n ≥ 16384); 9 / 10 (INT4) = 4 / 5 with
// the consumers draining their wgmmas every k step (one stage more prefetch); 11 / 12 (INT4) =
// the register-A warp-specialized kernel with 256 / 128-token tiles, weights by bulk copies;
// 13 / 14 = the same with weights by tensor maps (the default for m ≥ 64). Not thread-safe.
void gemm_set_tensor_core_path(int path);
// For tests and benchmarks: split-K of the tensor-map register-A kernel: 0 (default) = by shape
// on path 0 (gemm.cu, rs_plan; none on paths 13 / 14), 1 = never, 2 / 4 = that many k splits
// on paths 13 / 14 (path 0: the best plan with splits, if any).
// Not thread-safe.
void gemm_set_split_k(int ks);
// For benchmarks: clusters of `ks` (2, 4) blocks of the split-K kernel with `bt`-token tiles the
// device holds at once (occupancy API; 0 when unknown).
int gemm_split_clusters(int bt, int ks);
// For tests: caps the persistent warp-specialized grid at `blocks` (0: the stream's SM count),
// so that blocks loop over several tiles. Not thread-safe.
void gemm_set_persistent_blocks(int blocks);
// SMs available to kernels on `stream`: its green context's SM count, else the device's.
int gemm_stream_sms(cudaStream_t stream);
// For benchmarks: decode kernel (0 default: by shape, w4a16_decode_choice; legacy split-K
// kernel forced: 1 = 4 loads in flight per lane, 3 blocks/SM, m ≤ 8 only; 2 = 8 loads, 2
// blocks/SM). Not thread-safe.
void gemm_set_decode_variant(int v);
// w4a16_gemm's decode kernels with the nibble shifts as IMAD.HI on the FMA pipe (lean variants 18
// and 19 in place of the rule's 14 and 17, gemm_decode_lean.cu) — for end-to-end A/Bs;
// process-wide, not thread-safe. Off by default: not yet measured faster (2026-12-04).
void gemm_set_decode_ims(bool on);
// w4a16_gemm's decode launches by programmatic dependent launch (DecodeTuning::pdl in
// gemm_decode.cuh: the register-direct kernels read weights, then wait for the previous kernel)
// — on or off, process-wide, not thread-safe. The CUDA backend turns it on when nothing streams.
void gemm_set_decode_pdl(bool on);
// w4a16_gemm's decode launches in deterministic mode (DecodeTuning::deterministic: bitwise the
// same output run after run; speed in BENCHMARKS.md) — process-wide, not thread-safe. Set it
// before sizing workspaces with w4a16_workspace_bytes (the mode needs more).
void gemm_set_decode_deterministic(bool on);
// w4a16_gemm's decode block ranges (DecodeTuning::whole_tiles): -1 the measured rule (default),
// 0 stream-K ranges in arrival order everywhere (as before 2026-12-04's sixth session), 1 whole
// tiles everywhere. Like the mode above, set before sizing workspaces.
void gemm_set_decode_whole_tiles(int mode);

// bf16_gemm's m ≤ 16 SoftcapF32 launches (the LM head of a decode step) by the register-direct
// kernel of gemv_bf16.cu instead of the shared-memory tile kernel, where the shapes allow (k % 32
// == 0, ldw == k, 16-byte-aligned x and weights) — on or off, process-wide, not thread-safe. Off by
// default: written 2026-12-05 and run only under the CPU emulation so far.
void gemm_set_bf16_decode_rd(bool on);

// Same contract with BF16 weights (BF16 path, LM head). m ≤ 16: mma.sync kernel with 16-token
// tiles (weight streaming); m ≥ 64: wgmma (256-token tiles when m ≥ 256 and k ≥ 8192 or
// n ≥ 16384, else 128); otherwise the mma.sync 128×128 kernel.
cudaError_t bf16_gemm(const bf16* x, int m, int ldx, const Bf16Weight& w, Epilogue ep,
                      const GemmOut& out, cudaStream_t stream);

}  // namespace g4c::cuda

// W4A16 decode GEMM (m ≤ 32), the streaming kernels w4a16_gemm dispatches to. Host API only
// (plain C++). Same math, weight layout, epilogues and numerics as w4a16_gemm (gemm.cuh).
//
// Design: a persistent grid sized to the SMs actually available (the stream's green context
// when it has one). K is cut into S splits of whole groups, as few as let one split's
// activation slice fit shared memory; a split's (16-row tile, group) units are dealt out as one
// contiguous range per block and, inside it, per warp. Each warp loads its weights straight into
// registers (16-byte evict-first loads, several chunks in flight), dequantizes them and
// multiplies with mma.sync m16n8k16 (weights as A, 16 output features; tokens as B, 8 per n8
// tile: one, two or four tiles, so the weights are read and dequantized once for up to 32
// tokens). A tile a warp owns entirely gets its epilogue straight from
// registers; tiles shared by warps of a block are summed in shared memory; tiles shared by blocks
// (range ends, S > 1) add into an fp32 workspace and the contributor that completes the tile's
// group count applies the epilogue — in arrival order (the last bit can differ between runs), or
// in a fixed order (whole-tile block ranges; DecodeTuning::deterministic, and by the whole_tiles
// rule). Kernels: gemm_decode_lean.cu (16 and 12 warps). Measured in BENCHMARKS.md "W4A16
// decode GEMM".
#pragma once

#include "runtime/cuda/gemm.cuh"

namespace g4c::cuda {

// The variants (w4a16_decode_choice).
constexpr int kDecodeLean16 = 0;  // lean, 16 warps, 8 chunks in flight, m ≤ 16
constexpr int kDecodeLean12 = 1;  // lean, 12 warps, 8 chunks in flight, m ≤ 32

// Launch parameters of one variant (compile-time in the kernel; listed for benchmarks).
struct DecodeVariantInfo {
  int warps;           // warps per block
  int blocks_per_sm;   // blocks per SM in the persistent grid
  int chunks;          // chunks in flight per lane (weights go to registers)
  int xcap_kb;         // activation slice budget per block (KB); more → fewer k splits
  int max_m;           // the most rows it runs (16 or 32)
  const char* name;
};
int w4a16_decode_num_variants();
DecodeVariantInfo w4a16_decode_variant_info(int v);

struct DecodeTuning {
  int variant = -1;  // -1: the default variant
  int sms = 0;       // > 0: size the grid for this many SMs (tests); 0: gemm_stream_sms(stream)
  int xcap = 0;      // > 0: activation slice budget in bytes (tests: forces k splits)
  // Programmatic dependent launch (KernelOptions::pdl): the kernel may start while the previous kernel in the stream is still running; it requests its
  // first weights, then waits (griddepcontrol.wait) for that kernel to finish before it reads x,
  // Σx or the workspace or writes y. Only for weights nothing in flight writes (not streamed).
  bool pdl = false;
  // Sum the parts of a tile in a fixed order, so the output
  // is bitwise the same in every run with the same inputs, plan and SM count (block ranges hold
  // whole tiles; speed vs arrival order in BENCHMARKS.md). Needs the larger workspace
  // w4a16_decode_workspace_bytes gives for it.
  bool deterministic = false;
  // Arrival-order mode (tests): every tile through the fp32 workspace, as when
  // the block-local tile sums do not fit in shared memory.
  bool no_block_sums = false;
  // When not `deterministic`: block ranges on tile boundaries, summed as in the
  // deterministic mode (so bitwise reproducible too), instead of stream-K ranges summed in
  // arrival order. -1: where w4a16_decode_whole_tiles says (measured faster there), 0: never (the
  // arrival-order kernels), 1: always (tests).
  int whole_tiles = -1;
};

// The rule of DecodeTuning::whole_tiles = -1: on more than 32 SMs, when a split's blocks get at
// most 4 tiles each (the 4-16 MB 12B shapes at m <= 8: stream-K ranges share most tiles between
// blocks there, and the red.global + ticket path costs more than whole tiles lose to imbalance;
// measured on the H200, BENCHMARKS.md "W4A16 decode GEMM"). True when the plan of
// variant `tuning.variant` (-1: w4a16_decode_choice's) for this m and grid sums in fixed order.
bool w4a16_decode_whole_tiles(int m, const Int4Weight& w, int sms, const DecodeTuning& tuning);

// Workspace: int tile counters, then fp32 partial-sum slots of 16 rows × 16 tokens (32 when m >
// 16; one per tile; in the deterministic mode one per (k split, tile)). Must be ZERO before first
// use (cudaMemset once); launches leave it zero. Enough for any m the variant runs, with variant
// `tuning.variant` (−1: any variant w4a16_decode_choice picks) on `tuning.sms` SMs (0: the
// device's) at activation budget `tuning.xcap`, in mode `tuning.deterministic`. Not shared by
// launches that run concurrently.
size_t w4a16_decode_workspace_bytes(const Int4Weight& w, const DecodeTuning& tuning);
size_t w4a16_decode_workspace_bytes(const Int4Weight& w);

// y = epilogue(x·Wᵀ) for 1 ≤ m ≤ the variant's max_m; arguments as w4a16_gemm. Returns the
// launch error, or cudaErrorInvalidValue (m out of range, workspace too small).
cudaError_t w4a16_decode(const bf16* x, int m, int ldx, const Int4Weight& w, Epilogue ep,
                         const GemmOut& out, void* workspace, size_t workspace_bytes,
                         const DecodeTuning& tuning, cudaStream_t stream);

// The variant w4a16_gemm uses for this shape on `sms` SMs (−1 when m is out of [1, 32]).
int w4a16_decode_choice(int m, const Int4Weight& w, int sms);

}  // namespace g4c::cuda

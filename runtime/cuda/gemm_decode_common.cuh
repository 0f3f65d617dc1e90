// Device code of the W4A16 decode kernels (gemm_decode_lean.cu): PTX helpers, the host-computed split plan (DecArgs) and the tile flush (direct epilogue, or fp32
// partials + tile counter, the last contributor applying the epilogue). Only included from .cu.
#pragma once

#include "runtime/cuda/common.cuh"
#include "runtime/cuda/gemm_epilogue.cuh"

namespace g4c::cuda::detail {

// ------------------------------------------------------------------ PTX helpers
// 16-byte streaming load: read-only path, no L1 allocation, L2 policy `pol` (evict-first here).
__device__ __forceinline__ uint4 ldg_stream(const uint4* p, uint64_t pol) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p), "l"(pol));
  return v;
}
__device__ __forceinline__ uint64_t evict_first_policy() {
  uint64_t p;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(p));
  return p;
}
__device__ __forceinline__ void red_add_v2(float* p, float a, float b) {
  asm volatile("red.relaxed.gpu.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(p), "f"(a), "f"(b) : "memory");
}
// mma without `volatile`: the compiler may interleave independent chains.
__device__ __forceinline__ void mma_bf16_nv(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Kernel arguments computed by the host plan.
struct DecArgs {
  int S;      // k splits
  int gps;    // groups per split (the last may hold fewer)
  int br;     // blocks per split
  int cpg;    // 64-chunks per group
  int ngroups;
  int ntiles;
  int mrows;  // m (≤ 32)
  int tok;    // tokens per Σx group entry and per workspace slot row: 16, or 32 when m > 16
  int xrow;   // bytes per activation row in smem (gps·G·2 + 16)
  int tsm;    // 1 = tiles inside a block are summed in shared memory, 0 = all tiles
              // through the workspace (their shared memory would not fit). Unused in the
              // deterministic mode.
};

// Where block blockIdx.x works: its k split (first group g0, gs groups) and its rank rb among
// the split's a.br blocks.
struct SplitPos {
  int rb, g0, gs, split;
};
__device__ __forceinline__ SplitPos decode_split_pos(const DecArgs& a) {
  const int split = blockIdx.x / a.br;
  const int g0 = split * a.gps;
  return SplitPos{int(blockIdx.x) - split * a.br, g0, min(a.gps, a.ngroups - g0), split};
}

// Group end: acc += s·(T − (128 + z)·Σx) in fp32, rows g (scale/zero low half) and g+8 (high).
// `sw`: the lane's bf16 scale pair; `zw`: its two zero codes (bits 0–7, 8–15).
template <int MT>
__device__ __forceinline__ void decode_group_fix(float (&acc)[MT][4], const float (&T)[MT][4], uint32_t sw, uint32_t zw,
                                                 const float (&xv)[MT][2]) {
  const float2 s2 = __bfloat1622float2(*reinterpret_cast<const bf162*>(&sw));
  const float zg = 128.f + float(zw & 0xFF), zg8 = 128.f + float((zw >> 8) & 0xFF);
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    acc[mt][0] += s2.x * (T[mt][0] - zg * xv[mt][0]);
    acc[mt][1] += s2.x * (T[mt][1] - zg * xv[mt][1]);
    acc[mt][2] += s2.y * (T[mt][2] - zg8 * xv[mt][0]);
    acc[mt][3] += s2.y * (T[mt][3] - zg8 * xv[mt][1]);
  }
}

// Epilogue of tile `tile` from per-lane values v (rows g, g+8 × tokens j·8+2t, +1).
template <int MT>
__device__ __forceinline__ void decode_finish(const EpiArgs& e, int tile, int g, int t, const float (&v)[MT][4]) {
  const int prow = tile * 16 + g;
#pragma unroll
  for (int j = 0; j < MT; ++j) {
    const int tok = j * 8 + 2 * t;
    if (e.ep == 2) {
      epi_write(e, prow, tok, v[j][0], v[j][2]);
      epi_write(e, prow, tok + 1, v[j][1], v[j][3]);
    } else {
      epi_write(e, prow, tok, v[j][0], 0.f);
      epi_write(e, prow, tok + 1, v[j][1], 0.f);
      epi_write(e, prow + 8, tok, v[j][2], 0.f);
      epi_write(e, prow + 8, tok + 1, v[j][3], 0.f);
    }
  }
}

// A warp's partial sums `av` of tile `tile` over `done` of its groups → the output (the warp
// holds all of k) or the fp32 workspace; the warp whose contribution completes the tile's group
// count reads the sums back (leaving them zero, counter reset) and applies the epilogue.
template <int MT>
__device__ __forceinline__ void decode_flush_tile(const DecArgs& a, const EpiArgs& e, float* __restrict__ ws,
                                                  int* __restrict__ counters, int tile, int done, int lane,
                                                  const float (&av)[MT][4]) {
  if (tile >= a.ntiles) return;
  const int g = lane >> 2, t = lane & 3;
  if (done == a.ngroups) {
    decode_finish<MT>(e, tile, g, t, av);
    return;
  }
  float* r0 = ws + (long(tile) * 16 + g) * a.tok;
  float* r1 = r0 + 8 * a.tok;
#pragma unroll
  for (int j = 0; j < MT; ++j) {
    const int tok = j * 8 + 2 * t;
    if (tok < a.mrows) {
      red_add_v2(r0 + tok, av[j][0], av[j][1]);
      red_add_v2(r1 + tok, av[j][2], av[j][3]);
    }
  }
  __threadfence();
  __syncwarp();
  int last = 0;
  if (lane == 0) last = atomicAdd(&counters[tile], done) + done == a.ngroups;
  last = __shfl_sync(0xffffffffu, last, 0);
  if (!last) return;
  __threadfence();
  float v[MT][4];
#pragma unroll
  for (int j = 0; j < MT; ++j) {
    const int tok = j * 8 + 2 * t;
    const bool ok = tok < a.mrows;
    v[j][0] = ok ? atomicExch(r0 + tok, 0.f) : 0.f;
    v[j][1] = ok ? atomicExch(r0 + tok + 1, 0.f) : 0.f;
    v[j][2] = ok ? atomicExch(r1 + tok, 0.f) : 0.f;
    v[j][3] = ok ? atomicExch(r1 + tok + 1, 0.f) : 0.f;
  }
  if (lane == 0) counters[tile] = 0;
  decode_finish<MT>(e, tile, g, t, v);
}

// Lean family (gemm_decode_lean.cu): [token tiles: m ≤ 8, ≤ 16, ≤ 32][group / 64 − 1][asym];
// kd: the deterministic-mode kernels. Null where the variant has no kernel for that m.
struct LeanKernels {
  const void* k[3][2][2];
  const void* kd[3][2][2];
};
LeanKernels lean_kernels(int i);

}  // namespace g4c::cuda::detail

// Warp-specialized, persistent Hopper (sm_90a) prefill attention (variants 9 … 13 of
// launch_attn_sm90; 9–11 2026-12-04, ninth session; 12 / 13 2026-12-05): the variant-5 tile loop
// (attention_sm90.cu: S = Q·Kᵀ and O += P·V on wgmma, softmax overlapping the previous tile's
// P·V, lazy rescale) fed by a producer warp, one block per SM walking a list of parts.
//
// Why (BENCHMARKS.md, Attention, eighth session): at hd 256 W1024 2k a variant-5 block spends
// 4.2–5.3 µs from its start to its first tile (96 KB of Q and K through per-thread cp.async
// issued by the threads that then wait) and 2.1 µs storing its output, twice on the critical
// path; and one block per query block leaves the busiest SM 32 key tiles against 24.7 on average
// (17-tile query blocks on 128 of the 132 SMs, then the 16- and 15-tile ones). Here the loads of part j + 1 run under part j's last tiles and stores (9 / 10), and
// variant 11 also shares the launch's key tiles evenly between the blocks (stream-K).
//
// Block = 3 warpgroups (384 threads):
//   warpgroup 0: warp 0 is the producer (setmaxnreg, see launch_attn_sm90_ws; warps 1–3
//     leave). It walks the block's parts; per part it publishes the part (shared memory +
//     mbarrier `pfull`), then loads Q (128 rows: 64 tokens × G heads; once the consumers
//     released the Q buffer) and per key tile K(i + 1) and V(i) into the tile's stage once
//     released: 16-byte cp.async per lane, one 512-byte row per warp instruction, the row's slot
//     (paged / ring) computed by lane (key mod 32) and shuffled. A group is published on the
//     buffer's `full` mbarrier once it has landed, each lane fencing its cp.async writes (generic
//     proxy) for the wgmmas (async proxy) first, as the warp-specialized GEMM's producer does.
//     Variants 12 / 13 (= 9 / 11 otherwise): each lane ends a group with
//     cp.async.mbarrier.arrive.noinc instead, so the barrier counts the lane's arrival when its
//     copies land and the producer waits only for `empty` barriers; the consumers fence after
//     their `full` waits.
//   warpgroups 1, 2 (consumers): 64 query rows each, the variant-5 loop; each waits `full` and
//     arrives on `empty` once its wgmmas reading the buffer have completed.
//     Output: normalized, staged per warpgroup in 16 KB of shared memory (half the columns at a
//     time, 16-byte chunks XOR-swizzled per row), stored as 256-byte row segments.
// Shared memory: Q 64 KB, two K and two V stages of 32 KB, 2 × 16 KB staging = 224 KB.
// Parts: 9 / 10 (SK = false, two register splits): whole query blocks (items), in variant 5's
// heavy-first order, block b taking items b, b + P, b + 2P … 11 (SK): the stream-K schedule of
// attention_sk.h over items in (request · kv head, query block) order, F units of fixed cost per
// item; a later piece of an item leaves its unnormalized state (O, m, l) in the block's workspace
// slot and releases a flag (a block with no units flags 2 at its start); the item's first piece
// merges them in block order before its output.
// d = 256, one KV split, 16-byte-aligned output only (launch_attn_sm90 routes the rest to 5).
// The barrier protocol (who waits for which phase, the part slots, the producer's one group in
// flight) has a model check: scripts/gpu/ws_protocol_model.py (random interleavings, no deadlock,
// no buffer overwritten while read); every wait traps after 10 s (ws_wait), so a protocol error
// fails the launch instead of hanging. Not yet run on a GPU (2026-12-04: no device was lent).
#include "runtime/cuda/attention.cuh"

#include "runtime/cuda/attention_impl.cuh"
#include "runtime/cuda/attention_sk.h"
#include "runtime/cuda/attention_sm90_tile.cuh"
#include "runtime/cuda/common.cuh"
#include "runtime/cuda/gemm.cuh"  // gemm_stream_sms
#include "runtime/cuda/mbarrier.cuh"
#include "runtime/cuda/wgmma.cuh"

#include <algorithm>

namespace g4c::cuda {
using namespace detail;

namespace {

constexpr int kWD = 256, kWBK = 64, kWRows = 128, kWThreads = 384;
constexpr int kWQ = kWRows * kWD * 2;  // 64 KB
constexpr int kWKV = kWBK * kWD * 2;   // 32 KB per K or V stage
constexpr int kWStg = 64 * 128 * 2;    // 16 KB per consumer warpgroup: 64 rows × 128 columns
constexpr int kWSmem = kWQ + 4 * kWKV + 2 * kWStg + 1024;  // + base alignment slack
// Stream-K workspace: flags of ≤ kSkMaxBlocks blocks, then a slot per block:
// [kWD / 8 column quads + 1 (m0 m1 l0 l1)][256 consumer threads] float4.
constexpr int kSkMaxBlocks = 1024;
constexpr size_t kSkFlagBytes = kSkMaxBlocks * 4;
constexpr size_t kSkSlotF4 = size_t(kWD / 8 + 1) * 256;


__device__ __forceinline__ void wg_bar(int id) { asm volatile("bar.sync %0, 128;\n" ::"r"(id) : "memory"); }
__device__ __forceinline__ void consumers_bar() { asm volatile("bar.sync 3, 256;\n" ::: "memory"); }
__device__ __forceinline__ void st_release_u32(unsigned* p, unsigned v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ unsigned ld_acquire_u32(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Nanoseconds on the GPU's global timer.
__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
// mbar_wait with a watchdog: a wait longer than 10 s can only be a broken protocol (a whole 8k
// prefill takes milliseconds, ~100× that under compute-sanitizer), so it traps — the launch fails
// with an error the caller sees — instead of hanging the process.
__device__ __forceinline__ void ws_wait(uint64_t* b, uint32_t parity) {
  uint64_t t0 = 0;
  for (uint32_t spins = 0;; ++spins) {
    if (mbar_try_wait(b, parity)) return;
    if (spins == 0) t0 = global_ns();
    else if ((spins & 1023) == 0 && global_ns() - t0 > 10000000000ull) __trap();
  }
}

// p + 16·i as one IMAD.WIDE.U32 (written `p + i`, the compiler formed lane + i in 64 bits and
// scaled it onto a uniform base: 4 instructions per row of the producer's loads).
__device__ __forceinline__ const void* at16(const void* p, uint32_t i) {
  const void* r;
  asm("mad.wide.u32 %0, %1, 16, %2;\n" : "=l"(r) : "r"(i), "l"(p));
  return r;
}

// A part as the producer publishes it (x < 0: no parts left).
struct WsPart {
  int x, t0, t1, mode;
  AttnBlock blk;
};

struct WsArgs {
  int nx, ny;       // items: request · kv head (nx) × query blocks (ny)
  int fixed;        // SK: F
  float4* slots;    // SK: workspace slots, one per block
  unsigned* flags;  // SK: zeroed by the launch
};

// Item x: SK = false in variant 5's heavy-first order (query blocks from the last down, request ·
// kv head minor); SK in (request · kv head, query block) order.
template <bool SK>
__device__ __forceinline__ AttnBlock ws_item(const AttnArgs& a, const WsArgs& w, int x) {
  return SK ? attn_block<kWBK>(a, kWRows, x % w.ny, x / w.ny, 0)
            : attn_block<kWBK>(a, kWRows, w.ny - 1 - x / w.nx, x % w.nx, 0);
}
__device__ __forceinline__ int ws_tiles(const AttnBlock& b) { return b.qt0 < b.qlen ? b.t_hi - b.t_lo : 0; }

// PR / CR: the producer's / consumers' registers (setmaxnreg). The block starts with 168 per
// thread (ptxas, __launch_bounds__(384, 1): 64512 in all); setmaxnreg.inc takes registers only
// from those the producer warpgroup's setmaxnreg.dec released to the block's pool, so
// PR·128 + CR·256 ≤ 168·384 — beyond it the consumers would wait for registers forever.
// NI (variants 12, 13): the producer never waits for its copies — each lane's
// cp.async.mbarrier.arrive.noinc makes the buffer's `full` barrier count that lane's arrival when
// its copies have landed — and each consumer thread fences (generic → async proxy) after its
// `full` wait, before the wgmmas read the buffer.
template <int PR, int CR, bool SK, bool NI>
__global__ void __launch_bounds__(kWThreads, 1) attn_sm90_ws_kernel(const AttnArgs a, const WsArgs w) {
  static_assert(PR * 128 + CR * 256 <= 168 * kWThreads && PR % 8 == 0 && CR % 8 == 0 && PR >= 24 && CR <= 256,
                "register split");
  extern __shared__ unsigned char smem_raw[];
  unsigned char* base = reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  const uint32_t qaddr = smem_u32(base), kaddr0 = qaddr + kWQ, vaddr0 = kaddr0 + 2 * kWKV, saddr0 = vaddr0 + 2 * kWKV;
  // full: count 32 (each producer lane, once its copies landed); empty: count 256 (every consumer thread);
  // pfull: count 1 (the producer's lane 0, after writing the part).
  __shared__ uint64_t qfull, qempty, kfull[2], kempty[2], vfull[2], vempty[2], pfull;
  __shared__ WsPart part[2];  // part j in part[j & 1]: rewritten for j + 2 after qempty(j + 1)
  __shared__ int sk_wsum[kWThreads / 32];
  __shared__ int sk_mhi;  // SK: a mode-2 part's other pieces are in the blocks (c, sk_mhi)
  __shared__ sk::Walk walk;  // the producer's (lane 0), set up here (its 64-bit divisions too)
  const int tid = threadIdx.x, lane = tid & 31;
  const int N = w.nx * w.ny, P = int(gridDim.x), c = int(blockIdx.x);
  if (tid == 0) {
    mbar_init(&qfull, 32);
    mbar_init(&qempty, 256);
    mbar_init(&pfull, 1);
    for (int s = 0; s < 2; ++s) {
      mbar_init(&kfull[s], 32);
      mbar_init(&vfull[s], 32);
      mbar_init(&kempty[s], 256);
      mbar_init(&vempty[s], 256);
    }
    walk = sk::Walk(0, P, c, w.fixed, N, N, 0);  // no parts (SK: replaced below when lo < W)
    sk_mhi = c + 1;
  }
  long W = 0;  // SK: the launch's units
  if constexpr (SK) {
    // Exclusive prefix of the items' units over contiguous chunks per thread, then the item
    // holding the block's first unit (attention_sk.h: Walk's start).
    const int per = (N + kWThreads - 1) / kWThreads, x0 = min(N, tid * per), x1 = min(N, x0 + per);
    int sum = 0;
    for (int x = x0; x < x1; ++x) {
      const int n = ws_tiles(ws_item<SK>(a, w, x));
      sum += n > 0 ? w.fixed + n : 0;
    }
    int incl = sum;
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
      const int v = __shfl_up_sync(0xffffffffu, incl, off);
      if (lane >= off) incl += v;
    }
    if (lane == 31) sk_wsum[tid >> 5] = incl;
    __syncthreads();
    int run = incl - sum;
    for (int k = 0; k < kWThreads / 32; ++k) {
      if (k < (tid >> 5)) run += sk_wsum[k];
      W += sk_wsum[k];
    }
    // (tid 0's defaults above are ordered before these writes by the barrier.) The block's first
    // unit lo starts its walk; its last unit hi − 1 lies in the item a mode-2 part would merge,
    // whose end gives sk_mhi (the 64-bit divisions stay out of the producer's and consumers'
    // register budgets). A block with an empty range flags 2 at once: nothing to merge from it.
    const long lo = sk::lo_of(W, P, c), hi = sk::lo_of(W, P, c + 1);
    if (lo == hi && tid == 0) st_release_u32(w.flags + c, 2u);
    for (int e = 0; e < 2; ++e) {
      const long at = e == 0 ? lo : hi - 1;
      if (hi <= lo || !(run <= at && at < run + sum)) continue;  // one thread each when lo < hi
      long px = run;
      for (int x = x0; x < x1; ++x) {
        const int n = ws_tiles(ws_item<SK>(a, w, x));
        const long u = n > 0 ? w.fixed + n : 0;
        if (px <= at && at < px + u) {
          if (e == 0) walk = sk::Walk(W, P, c, w.fixed, N, x, px);
          else sk_mhi = sk::merge_hi(W, P, c, px + u);
          break;
        }
        px += u;
      }
    }
  }
  __syncthreads();
  const int G = a.g;
  const QRows rows(G);  // row ρ: token rows.tok(ρ), head hk·G + rows.head(ρ)

  if (tid < 128) {
    // ------------------------------------------------------------------------------ producer
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(PR) : "memory");
    if (tid >= 32) return;
    const uint32_t kv16 = uint32_t(a.hkv) * (kWD / 8);  // 16-byte units per slot
    // Lane's chunk in row kr of a 64-row canonical tile: column block (lane / 8), 128-byte row,
    // chunk (lane & 7) swizzled by kr & 7 (cbs<64>, bytes).
    const uint32_t cb64 = uint32_t(lane >> 3) * (kWBK * 128);
    // The walk runs on lane 0 with its state in shared memory (registers: the load loop's).
    __shared__ int next_k;  // SK = false: the next item of the block's round robin
    if (lane == 0) next_k = c;
    auto tiles = [&](int x) { return ws_tiles(ws_item<SK>(a, w, x)); };
    // Each load (Q, a K or a V tile) is one cp.async group. A group is published once it has
    // landed: each lane waits for its own copies, fences (its cp.async writes are generic-proxy,
    // the wgmmas that read them async-proxy) and arrives on the buffer's `full` barrier (32
    // arrivals). One group stays in flight while the next is issued; before the warp blocks on an
    // `empty` barrier it publishes everything it has issued, so no consumer waits on a load that
    // the blocked producer holds back.
    // (32-bit shared address, not a pointer: a 64-bit one made ptxas spill in variant 11.)
    uint32_t pend = 0;  // the `full` barrier of the group in flight, 0: none
    auto publish = [&](uint32_t bar) {
      fence_proxy_async();
      mbar_arrive(bar);
    };
    auto issued = [&](uint64_t* full) {
      if constexpr (NI) {
        cp_async_arrive_noinc(smem_u32(full));
        return;
      }
      cp_async_commit();
      if (pend) {
        cp_async_wait<1>();
        publish(pend);
      }
      pend = smem_u32(full);
    };
    auto flush = [&] {
      if (pend) {
        cp_async_wait<0>();
        publish(pend);
        pend = 0;
      }
    };
    auto acquire = [&](uint64_t* empty, uint32_t parity) {
      if constexpr (NI) {
        ws_wait(empty, parity);
      } else if (!mbar_test(empty, parity)) {
        flush();
        ws_wait(empty, parity);
      }
    };
    uint32_t kt = 0;  // K/V tiles produced so far
    for (uint32_t pi = 0;; ++pi) {
      acquire(&qempty, (pi & 1) ^ 1);  // the consumers are done with part pi − 1's Q
      WsPart& pp = part[pi & 1];
      if (lane == 0) {
        sk::Part pt{-1, 0, 0, 0, 0L};  // (end: merge_hi's argument, taken from sk_mhi instead)
        if constexpr (SK) {
          if (!walk.next(pt, tiles)) pt.x = -1;
        } else {
          for (int k = next_k; k < N; k += P)
            if (const int n = tiles(k); n > 0) {
              pt = {k, 0, n, 0, 0L};
              next_k = k + P;
              break;
            }
        }
        pp = WsPart{pt.x, pt.t0, pt.t1, pt.mode, ws_item<SK>(a, w, pt.x < 0 ? 0 : pt.x)};
        mbar_arrive(&pfull);  // release: the consumers read the part after their wait
      }
      __syncwarp();
      const WsPart& pt = pp;
      const AttnBlock& blk = pt.blk;
      if (pt.x < 0) break;
      const int n = pt.t1 - pt.t0, t_lo = blk.t_lo + pt.t0;
      // Q: row ρ = (token, head) of QRows, lane = 16-byte chunk; rows past ntq zero.
      {
        const uint32_t cb128 = uint32_t(lane >> 3) * (kWRows * 128);
        const bf16* q = a.q + (long(blk.q0) + blk.qt0) * a.hq * kWD + long(blk.hk) * G * kWD + lane * 8;
#pragma unroll 8
        for (int rho = 0; rho < kWRows; ++rho) {
          const int tq = rows.tok(rho);
          const bool ok = tq < blk.ntq;
          const bf16* src = ok ? q + (long(tq) * a.hq + rows.head(rho)) * kWD : a.q;
          cp_async16_s(qaddr + cb128 + rho * 128 + ((uint32_t((lane & 7) ^ (rho & 7))) << 4), src, ok ? 16u : 0u);
        }
        issued(&qfull);
      }
      const uint4* kb = reinterpret_cast<const uint4*>(a.kv.k + long(blk.hk) * kWD) + lane;
      const uint4* vb = reinterpret_cast<const uint4*>(a.kv.v + long(blk.hk) * kWD) + lane;
      // Slots (16-byte units) of keys tile·64 + lane and + 32; keys ≥ kend take kend − 1's row
      // (finite bytes: P·V = 0 there; variant 5 does the same).
      auto offs = [&](int i, uint32_t& o0, uint32_t& o1) {
        const int j = (t_lo + i) * kWBK + lane;
        o0 = uint32_t(kv_slot(a.kv, blk.r, min(j, blk.kend - 1))) * kv16;
        o1 = uint32_t(kv_slot(a.kv, blk.r, min(j + 32, blk.kend - 1))) * kv16;
      };
      // Fully unrolled, so each row's source lane, half (o0 / o1) and swizzle phase are constants:
      // per row one SHFL, one 64-bit address and the cp.async (its row offset an immediate). (With
      // `unroll 16` the SASS had ~10 instructions per row — a select, a compare, a mask and a
      // 4-instruction address — 1.25 k per K + V tile on the scheduler the producer shares with
      // two consumer warps.)
      auto load = [&](uint32_t dst, const uint4* src, uint32_t o0, uint32_t o1, uint64_t* full) {
        uint32_t d8[8];  // row kr's chunk: d8[kr & 7] + kr · 128
#pragma unroll
        for (int c = 0; c < 8; ++c) d8[c] = dst + cb64 + (uint32_t((lane & 7) ^ c) << 4);
#pragma unroll
        for (int kr = 0; kr < kWBK; ++kr) {
          const uint32_t o = __shfl_sync(0xffffffffu, kr < 32 ? o0 : o1, kr & 31);
          cp_async16_s(d8[kr & 7] + kr * 128, at16(src, o));
        }
        issued(full);
      };
      uint32_t c0 = 0, c1 = 0, n0 = 0, n1 = 0;  // offsets of tile i (c) and i + 1 (n)
      if (n > 0) {
        offs(0, c0, c1);
        const uint32_t s = kt & 1;
        acquire(&kempty[s], ((kt >> 1) & 1) ^ 1);
        load(kaddr0 + s * kWKV, kb, c0, c1, &kfull[s]);
      }
      for (int i = 0; i < n; ++i) {  // K(i + 1), then V(i): the order the consumers need them
        if (i + 1 < n) {
          offs(i + 1, n0, n1);
          const uint32_t u = kt + i + 1, s = u & 1;
          acquire(&kempty[s], ((u >> 1) & 1) ^ 1);
          load(kaddr0 + s * kWKV, kb, n0, n1, &kfull[s]);
        }
        const uint32_t u = kt + i, s = u & 1;
        acquire(&vempty[s], ((u >> 1) & 1) ^ 1);
        load(vaddr0 + s * kWKV, vb, c0, c1, &vfull[s]);
        c0 = n0;
        c1 = n1;
      }
      kt += n;
    }
    // The last group, unless the last acquire published it (nothing in flight at exit); NI: the
    // copies still in flight land before the warp exits (their arrivals stay asynchronous). They
    // were never committed as a group, and wait_group waits only for committed groups: commit
    // first (= cp.async.wait_all).
    if constexpr (NI) {
      cp_async_commit();
      cp_async_wait<0>();
    } else {
      flush();
    }
    return;
  }

  // -------------------------------------------------------------------------------- consumers
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(CR) : "memory");
  const int ctid = tid - 128, cw = ctid >> 5, wg = cw >> 2;  // consumer warp 0..7, warpgroup 0..1
  const int g = lane >> 2, t = lane & 3;
  const int rho0 = cw * 16 + g, rho1 = rho0 + 8;  // block rows (warpgroup wg: 64·wg … 64·wg + 63)
  const uint64_t dq = sw128_desc(qaddr + wg * (64 * 128));
  const uint64_t dk[2] = {sw128_desc(kaddr0), sw128_desc(kaddr0 + kWKV)};
  const uint64_t dv[2] = {sw128_desc_mn(vaddr0, kWBK * 128), sw128_desc_mn(vaddr0 + kWKV, kWBK * 128)};
  uint32_t kt = 0;
  float o[kWD / 2];
  float s[kWBK / 2];
  uint32_t pa[kWBK / 16][4];
  for (uint32_t pi = 0;; ++pi) {
    ws_wait(&pfull, pi & 1);
    const WsPart& pt = part[pi & 1];
    if (pt.x < 0) break;
    const int n = pt.t1 - pt.t0, t_lo = pt.blk.t_lo + pt.t0;
    const int ntq = pt.blk.ntq, ctx = pt.blk.ctx, qt0 = pt.blk.qt0;
    const bool valid0 = rows.tok(rho0) < ntq, valid1 = rows.tok(rho1) < ntq;
    const int p0 = ctx + qt0 + rows.tok(rho0), p1 = ctx + qt0 + rows.tok(rho1);
    const int pmin = ctx + qt0, pmax = ctx + qt0 + ntq - 1;  // keys every valid row sees: ≤ pmin, > pmax − W
#pragma unroll
    for (int i = 0; i < kWD / 2; ++i) o[i] = 0.f;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;

    // The per-tile math (attention_sm90_tile.cuh, variant 5's), on stage u & 1 of tile count u.
    auto issue_s = [&](uint32_t u) { sm90_issue_s<kWD, kWBK, kWRows>(s, dq, (u & 1) ? dk[1] : dk[0]); };
    auto issue_pv = [&](uint32_t u) { sm90_issue_pv<kWBK>(o, pa, (u & 1) ? dv[1] : dv[0]); };
    const Sm90RowMask rmask{p0, p1, pmin, pmax, a.window, t, valid0, valid1, a.scale_log2};
    auto softmax = [&](int i, float& c0, float& c1) {
      sm90_softmax<kWBK>(s, m0, m1, l0, l1, c0, c1, (t_lo + i) * kWBK, rmask);
    };
    auto rescale_pack = [&](float c0, float c1) { sm90_rescale_pack<kWD, kWBK>(o, s, pa, c0, c1); };
    // NI: the copies landed (the barrier's phase completed); the fence orders the wgmmas' reads
    // (async proxy) after them (generic proxy), as the producer's own fence does otherwise.
    auto wait_full = [&](uint64_t* full, uint32_t u) {
      ws_wait(full, (u >> 1) & 1);
      if constexpr (NI) fence_proxy_async();
    };

    ws_wait(&qfull, pi & 1);
    if constexpr (NI) fence_proxy_async();
    float c0, c1;
    if (n > 0) {
      const uint32_t u = kt;
      wait_full(&kfull[u & 1], u);
      issue_s(u);
      wgmma_wait0();
      fence_regs(s);
      mbar_arrive(&kempty[u & 1]);
      softmax(0, c0, c1);
      rescale_pack(c0, c1);
    }
    for (int i = 1; i < n; ++i) {
      const uint32_t u = kt + i, v = u - 1;
      wait_full(&kfull[u & 1], u);
      issue_s(u);
      wait_full(&vfull[v & 1], v);
      issue_pv(v);
      wgmma_wait1();  // S(i) done; P·V(i − 1) may still run
      fence_regs(s);
      mbar_arrive(&kempty[u & 1]);
      softmax(i, c0, c1);
      wgmma_wait0();
      fence_regs(o);
      fence_regs(pa);
      mbar_arrive(&vempty[v & 1]);
      rescale_pack(c0, c1);
    }
    mbar_arrive(&qempty);  // every S of the part has completed: the producer may load the next Q
    if (n > 0) {
      const uint32_t v = kt + n - 1;
      wait_full(&vfull[v & 1], v);
      issue_pv(v);
      wgmma_wait0();
      fence_regs(o);
      mbar_arrive(&vempty[v & 1]);
    }
    kt += n;
#pragma unroll
    for (int off = 1; off <= 2; off <<= 1) {
      l0 += __shfl_xor_sync(0xffffffffu, l0, off);
      l1 += __shfl_xor_sync(0xffffffffu, l1, off);
    }

    if constexpr (SK) {
      const int mode = pt.mode;
      const int c = int(blockIdx.x);  // (re-read: the loop above runs at the consumers' register limit)
      if (mode == 1) {  // a later piece: the state to slot c, then its flag (release)
        float4* dst = w.slots + size_t(c) * kSkSlotF4 + ctid;
#pragma unroll
        for (int j = 0; j < kWD / 8; ++j) dst[j * 256] = make_float4(o[4 * j], o[4 * j + 1], o[4 * j + 2], o[4 * j + 3]);
        dst[(kWD / 8) * 256] = make_float4(m0, m1, l0, l1);
        __threadfence();
        consumers_bar();  // every consumer thread's stores precede the release
        if (ctid == 0) st_release_u32(w.flags + c, 1u);
        continue;
      }
      if (mode == 2) {  // the first piece: the later pieces' states (flag 1), in block order
        const int m_hi = sk_mhi;
        if (ctid == 0)
          for (int b = c + 1; b < m_hi; ++b)
            for (const uint64_t t0 = global_ns(); ld_acquire_u32(w.flags + b) == 0u;) {
              __nanosleep(64);
              if (global_ns() - t0 > 10000000000ull) __trap();  // as ws_wait
            }
        consumers_bar();
        for (int b = c + 1; b < m_hi; ++b) {
          if (__ldcg(w.flags + b) != 1u) continue;  // an empty range (flag 2)
          const float4* src = w.slots + size_t(b) * kSkSlotF4 + ctid;
          const float4 wt = sm90_merge_ml(m0, m1, l0, l1, __ldcg(src + (kWD / 8) * 256));
          const float a0 = wt.x, b0 = wt.y, a1 = wt.z, b1 = wt.w;
          // (o must stay in registers: fully unrolled. Eight loads in flight at a time: with all 32
          // hoisted, ptxas spilled at the consumers' register limit.)
#pragma unroll
          for (int j0 = 0; j0 < kWD / 8; j0 += 8) {
#pragma unroll
            for (int j = j0; j < j0 + 8; ++j) {
              const float4 q = __ldcg(src + j * 256);
              o[4 * j] = o[4 * j] * a0 + q.x * b0;
              o[4 * j + 1] = o[4 * j + 1] * a0 + q.y * b0;
              o[4 * j + 2] = o[4 * j + 2] * a1 + q.z * b1;
              o[4 * j + 3] = o[4 * j + 3] * a1 + q.w * b1;
            }
            asm volatile("" ::: "memory");
          }
        }
      }
    }

    // Output: normalized, through the warpgroup's staging buffer, 128 columns at a time.
    const float inv0 = l0 > 0.f ? 1.f / l0 : 0.f, inv1 = l1 > 0.f ? 1.f / l1 : 0.f;
    const uint32_t stg = saddr0 + wg * kWStg;
    const unsigned char* stg_p = base + (saddr0 - qaddr) + wg * kWStg;
    const int r0 = (cw & 3) * 16 + g;  // the thread's rows in the warpgroup's 64 (r0 & 7 = g)
    const int wtid = ctid & 127;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      wg_bar(1 + wg);  // the previous pass's reads of the staging buffer are done
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        const int nd = half * 16 + j;
        asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(stg + r0 * 256 + ((j ^ g) << 4) + 4 * t),
                     "r"(pack_bf162(o[4 * nd] * inv0, o[4 * nd + 1] * inv0)) : "memory");
        asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(stg + (r0 + 8) * 256 + ((j ^ g) << 4) + 4 * t),
                     "r"(pack_bf162(o[4 * nd + 2] * inv1, o[4 * nd + 3] * inv1)) : "memory");
      }
      wg_bar(1 + wg);
#pragma unroll
      for (int it = 0; it < 8; ++it) {
        const int idx = it * 128 + wtid, row = idx >> 4, ch = idx & 15;
        const int rho = wg * 64 + row;
        if (rows.tok(rho) < ntq) {
          const uint4 v = *reinterpret_cast<const uint4*>(stg_p + row * 256 + ((ch ^ (row & 7)) << 4));
          bf16* dst = a.out + rows.th(long(pt.blk.q0) + qt0, a.hq, pt.blk.hk, rho) * kWD + half * 128 + ch * 8;
          *reinterpret_cast<uint4*>(dst) = v;
        }
      }
    }
  }
}

template <int PR, int CR, bool SK, bool NI>
cudaError_t launch_ws(const AttnArgs& a, const WsArgs& w, int grid, cudaStream_t stream) {
  auto kern = attn_sm90_ws_kernel<PR, CR, SK, NI>;
  static const cudaError_t attr =  // once per instantiation (one device assumed)
      cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, kWSmem);
  if (attr != cudaSuccess) return attr;
  // The registers the block starts with must cover the split (see the kernel): ptxas gives
  // setmaxnreg kernels their launch bound's maximum (168 with nvcc 13.0); should a compiler give
  // fewer, refuse rather than let setmaxnreg.inc wait forever.
  static const int regs = [&] {
    cudaFuncAttributes fa{};
    return cudaFuncGetAttributes(&fa, kern) == cudaSuccess ? fa.numRegs : 0;
  }();
  if (regs * kWThreads < PR * 128 + CR * 256) return cudaErrorInvalidConfiguration;
  kern<<<grid, kWThreads, kWSmem, stream>>>(a, w);
  return cudaGetLastError();
}

int g_sk_blocks = 0, g_sk_fixed = 1;

}  // namespace

void attention_set_prefill_sk(int blocks, int fixed) {
  g_sk_blocks = std::max(0, blocks);
  g_sk_fixed = fixed < 0 ? 1 : fixed;
}

size_t attention_prefill_workspace_bytes(int sms) {
  const int p = std::min(kSkMaxBlocks, sms > 0 ? sms : gemm_stream_sms(nullptr));
  return kSkFlagBytes + size_t(p) * kSkSlotF4 * sizeof(float4);
}

// Register splits (ptxas 13.0, no spills in any of the three): variant 9 producer 48 / consumers
// 224; 10 and 11 (stream-K parts; 10 without the workspace): 72 / 216, 11's own, so 10 against 11
// isolates the schedule. (11 at 48 / 224 and 40 / 232 spilled 8 bytes in the consumers.) 12 / 13:
// 9 / 11 with the producer that never waits for its copies (NI), same splits.
cudaError_t launch_attn_sm90_ws(const AttnArgs& a, int max_q_len, int num_requests, int variant, void* ws,
                                size_t ws_bytes, cudaStream_t stream) {
  const int tq = kWRows / a.g;
  WsArgs w{num_requests * a.hkv, (max_q_len + tq - 1) / tq, g_sk_fixed, nullptr, nullptr};
  const long items = long(w.nx) * w.ny;
  if (items == 0) return cudaSuccess;
  const int sms = gemm_stream_sms(stream);
  if (attention_prefill_uses_workspace(variant)) {
    const int p = std::min({kSkMaxBlocks, sms, g_sk_blocks > 0 ? g_sk_blocks : sms});
    if (ws && ws_bytes >= kSkFlagBytes + size_t(p) * kSkSlotF4 * sizeof(float4)) {
      w.flags = static_cast<unsigned*>(ws);
      w.slots = reinterpret_cast<float4*>(static_cast<unsigned char*>(ws) + kSkFlagBytes);
      const cudaError_t e = cudaMemsetAsync(w.flags, 0, size_t(p) * 4, stream);
      if (e != cudaSuccess) return e;
      return variant == 13 ? launch_ws<72, 216, true, true>(a, w, p, stream)
                           : launch_ws<72, 216, true, false>(a, w, p, stream);
    }
  }
  // (11 without its workspace runs as 10; 13 as 12.)
  const int grid = int(std::min<long>(items, g_sk_blocks > 0 ? std::min(g_sk_blocks, sms) : sms));
  switch (variant) {
    case 9: return launch_ws<48, 224, false, false>(a, w, grid, stream);
    case 12: case 13: return launch_ws<48, 224, false, true>(a, w, grid, stream);
    default: return launch_ws<72, 216, false, false>(a, w, grid, stream);
  }
}

}  // namespace g4c::cuda

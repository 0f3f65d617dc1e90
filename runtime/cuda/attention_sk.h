// The stream-K schedule of the persistent prefill attention kernel (attention_sm90_ws.cu,
// variants 11 and 13): which key tiles of which query blocks each of P resident blocks runs, and which
// partial results it hands to, or takes from, the others. Host and device code (no CUDA
// dependency) so the CPU tests check it exhaustively (tests/runtime/test_attn_schedule.cpp).
//
// Items x = 0 … N−1 (query block · kv head · request) have n_x ≥ 0 key tiles (0: no queries).
// Laid end to end, item x weighs U_x = F + n_x units (0 when n_x = 0): F units of fixed cost (its
// Q load, pipeline fill, output), then one unit per key tile. With W = Σ U_x, block c takes the
// units [c·W/P, (c+1)·W/P) and, of each item those units meet, the tiles among them: a part
// (x, [t0, t1)). A block's parts are consecutive items; at most its first starts inside an item
// (t0 > 0: mode 1, its unnormalized state goes to workspace slot c and a flag releases it) and
// at most its last stops inside one (t0 = 0, t1 < n_x: mode 2, it merges the slots of the blocks
// [c + 1, m_hi) with non-empty ranges, which hold the rest of x, in block order). Every other
// part is a whole item (mode 0). Every block writes its mode-1 slot before it can wait in mode 2
// (mode 1 is its first part, mode 2 its last), so with every block resident no wait forms a
// cycle.
#pragma once

#if defined(__CUDACC__)
#define G4C_SK_HD __host__ __device__ __forceinline__
#else
#define G4C_SK_HD inline
#endif

namespace g4c::cuda::sk {

struct Part {
  int x, t0, t1;  // item, key tiles [t0, t1) of its n_x (relative to its first tile)
  int mode;       // 0 whole, 1 a later piece (state → slot), 2 the first piece (merges)
  long end;       // the first unit after item x (mode 2: merge_hi's argument)
};

// First unit of block b's range.
G4C_SK_HD long lo_of(long W, int P, int b) { return long(b) * W / P; }
// Block b's range is empty (W < P). (The kernel does not evaluate it: such a block flags 2.)
G4C_SK_HD bool empty(long W, int P, int b) { return lo_of(W, P, b) == lo_of(W, P, b + 1); }

// Mode 2 of block c, item ending at unit `end`: the item's other pieces are in the blocks
// (c, merge_hi) with non-empty ranges. (The kernel evaluates it once, in its setup, for the item
// holding the block's last unit: its 64-bit divisions stay off the producer and consumers.)
G4C_SK_HD int merge_hi(long W, int P, int c, long end) {
  int b = c + 1;
  while (b < P && lo_of(W, P, b) < end) ++b;
  return b;
}

// Block c's walk over its parts. Start: the item x0 whose units contain the block's first unit
// lo (pre(x0) ≤ lo < pre(x0 + 1); x0 = N when lo ≥ W) and pre(x0), its first unit.
struct Walk {
  long W, lo, hi, px;  // px: first unit of item x
  int x, N, F, P, c;
  Walk() = default;  // (trivial: the kernel keeps one in shared memory)
  G4C_SK_HD Walk(long W_, int P_, int c_, int F_, int N_, int x0, long pre_x0)
      : W(W_), lo(lo_of(W_, P_, c_)), hi(lo_of(W_, P_, c_ + 1)), px(pre_x0), x(x0), N(N_), F(F_), P(P_), c(c_) {}
  // The next part (false: none left). tiles(x): n_x.
  template <class Tiles>
  G4C_SK_HD bool next(Part& p, const Tiles& tiles) {
    while (x < N && px < hi) {
      const int n = tiles(x);
      const long first = px + F;  // unit of the item's tile 0
      const long end = n > 0 ? first + n : px;
      const int xx = x;
      px = end;
      ++x;
      if (n <= 0) continue;
      const long t0 = lo > first ? lo - first : 0, t1 = hi - first < n ? hi - first : n;
      if (t0 >= t1) continue;  // only fixed-cost units of x here
      p.x = xx;
      p.t0 = int(t0);
      p.t1 = int(t1);
      p.mode = t0 > 0 ? 1 : (t1 < n ? 2 : 0);
      p.end = end;
      return true;
    }
    return false;
  }
};

}  // namespace g4c::cuda::sk

// Flash attention kernel vs a float64 softmax reference: packed variable-length chunks, paged
// and ring KV caches, causal / sliding windows, GQA, head_dim 64…512, split-KV decode, FP8 KV.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>

#include "runtime/cuda/attention.cuh"
#include "runtime/fp8.h"
#include "tests/cuda_kernels/gpu_util.h"

namespace g4c::gputest {
namespace {

struct Req {
  int ctx, qlen;
};
struct AttnCase {
  int d, hq, hkv, window;
  bool paged;
  int block_size;  // paged
  std::vector<Req> reqs;
  int splits;  // 0 = attention_num_splits
  // Programmatic dependent launch (KernelOptions::pdl): Q (NaN until then) and the chunk's own
  // keys (other finite values until then) are written by a kernel that lets the attention launch
  // at once and writes 200 µs later; an attention that read either before its wait fails.
  bool pdl = false;
  // Split combine in the decode kernel (one thread-block cluster per row set, attention_decode.cu):
  // 1 = the launch must merge in clusters (attention_combine_cluster_size == splits); −1 = either.
  int combine = -1;
  // FP8 KV (KvCache::k8): K / V rows quantized per (token, kv head) by runtime/fp8.h; the reference
  // uses the dequantized values bf16(code · scale), which the kernels form in shared memory, and
  // the output must equal, bit for bit, the BF16 kernel's on a cache holding those values.
  bool fp8 = false;
};

// Tolerance: P is rounded to bf16 before P·V (≤ 2^-9 relative per weight) and the output to bf16
// (RMS ≈ 1.1e-3 relative); expected ‖Δ‖/‖ref‖ ≈ 2e-3. A wrong mask, key or head gives O(1).
constexpr double kAttnBound = 6e-3;

void run_attn(const AttnCase& c) {
  char nm[128];
  std::snprintf(nm, sizeof nm, "d=%d hq=%d hkv=%d W=%d %s splits=%d%s%s", c.d, c.hq, c.hkv, c.window,
                c.paged ? "paged" : "ring", c.splits, c.pdl ? " pdl" : "", c.fp8 ? " fp8" : "");
  SCOPED_TRACE(nm);
  std::mt19937_64 rng(test_seed() ^ (uint64_t(c.d) << 24) ^ (uint64_t(c.window) << 4) ^ c.reqs.size());
  const int R = int(c.reqs.size());
  const int G = c.hq / c.hkv;
  const long row = long(c.hkv) * c.d;
  std::vector<int> q_start(R + 1, 0), ctx(R);
  int max_q = 0, max_kv = 0;
  for (int r = 0; r < R; ++r) {
    q_start[r + 1] = q_start[r] + c.reqs[r].qlen;
    ctx[r] = c.reqs[r].ctx;
    max_q = std::max(max_q, c.reqs[r].qlen);
    max_kv = std::max(max_kv, c.reqs[r].ctx + c.reqs[r].qlen);
  }
  const int total_q = q_start[R];
  // Full K/V history per request (what the cache logically holds) and Q.
  std::vector<std::vector<bf16>> K(R), V(R);
  for (int r = 0; r < R; ++r) {
    const int L = c.reqs[r].ctx + c.reqs[r].qlen;
    K[r] = rand_bf16(rng, size_t(L) * row, 1.f);
    V[r] = rand_bf16(rng, size_t(L) * row, 1.f);
  }
  std::vector<std::vector<uint8_t>> K8(R), V8(R);
  std::vector<std::vector<float>> KS(R), VS(R);
  if (c.fp8) {
    auto quantize = [&](std::vector<bf16>& x, std::vector<uint8_t>& codes, std::vector<float>& scales) {
      codes.resize(x.size());
      scales.resize(x.size() / c.d);
      std::vector<float> row_f(c.d);
      for (size_t i = 0; i < scales.size(); ++i) {
        for (int e = 0; e < c.d; ++e) row_f[e] = bf(x[i * c.d + e]);
        scales[i] = runtime::quantize_row_e4m3(row_f.data(), c.d, &codes[i * c.d]);
        for (int e = 0; e < c.d; ++e) x[i * c.d + e] = tobf(runtime::fp8_e4m3_decode(codes[i * c.d + e]) * scales[i]);
      }
    };
    for (int r = 0; r < R; ++r) {
      quantize(K[r], K8[r], KS[r]);
      quantize(V[r], V8[r], VS[r]);
    }
  }
  // score std ≈ 2: a softmax neither flat nor one-hot.
  std::vector<bf16> q = rand_bf16(rng, size_t(total_q) * c.hq * c.d, 2.f / std::sqrt(float(c.d)));

  // Cache layout. Unwritten slots stay poisoned (NaN): reading one fails the test.
  std::vector<int> block_table, ring_base(R);
  int max_blocks = 0, slots = 0, capacity = 0;
  std::vector<std::vector<long>> slot_of(R);
  if (c.paged) {
    for (int r = 0; r < R; ++r)
      max_blocks = std::max(max_blocks, (c.reqs[r].ctx + c.reqs[r].qlen + c.block_size - 1) / c.block_size);
    const int pool = R * max_blocks + 3;
    std::vector<int> perm(pool);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    block_table.assign(size_t(R) * max_blocks, -1);
    int next = 0;
    for (int r = 0; r < R; ++r) {
      const int L = c.reqs[r].ctx + c.reqs[r].qlen;
      for (int b = 0; b < (L + c.block_size - 1) / c.block_size; ++b)
        block_table[size_t(r) * max_blocks + b] = perm[next++];
      slot_of[r].resize(L);
      for (int j = 0; j < L; ++j)
        slot_of[r][j] = long(block_table[size_t(r) * max_blocks + j / c.block_size]) * c.block_size +
                        j % c.block_size;
    }
    slots = pool * c.block_size;
  } else {
    capacity = c.window + max_q - 1 + 2;
    for (int r = 0; r < R; ++r) {
      ring_base[r] = (R - 1 - r) * capacity;  // reverse order: base is really used
      const int L = c.reqs[r].ctx + c.reqs[r].qlen;
      slot_of[r].assign(L, -1);
      for (int j = std::max(0, L - capacity); j < L; ++j) slot_of[r][j] = ring_base[r] + j % capacity;
    }
    slots = R * capacity;
  }
  std::vector<bf16> kc(size_t(slots) * row), vc(size_t(slots) * row);
  {
    uint16_t nanbits = 0xFFFF;
    bf16 nanv;
    std::memcpy(&nanv, &nanbits, 2);
    std::fill(kc.begin(), kc.end(), nanv);
    std::fill(vc.begin(), vc.end(), nanv);
  }
  for (int r = 0; r < R; ++r)
    for (size_t j = 0; j < slot_of[r].size(); ++j)
      if (slot_of[r][j] >= 0)
        for (long e = 0; e < row; ++e) {
          kc[slot_of[r][j] * row + e] = K[r][j * row + e];
          vc[slot_of[r][j] * row + e] = V[r][j * row + e];
        }
  // FP8 cache: unwritten codes 0x7F (NaN) and scales NaN.
  std::vector<uint8_t> kc8, vc8;
  std::vector<float> ksc, vsc;
  if (c.fp8) {
    kc8.assign(size_t(slots) * row, 0x7F);
    vc8.assign(size_t(slots) * row, 0x7F);
    ksc.assign(size_t(slots) * c.hkv, std::nanf(""));
    vsc.assign(size_t(slots) * c.hkv, std::nanf(""));
    for (int r = 0; r < R; ++r)
      for (size_t j = 0; j < slot_of[r].size(); ++j)
        if (slot_of[r][j] >= 0) {
          std::copy_n(K8[r].begin() + j * row, row, kc8.begin() + slot_of[r][j] * row);
          std::copy_n(V8[r].begin() + j * row, row, vc8.begin() + slot_of[r][j] * row);
          std::copy_n(KS[r].begin() + j * c.hkv, c.hkv, ksc.begin() + slot_of[r][j] * c.hkv);
          std::copy_n(VS[r].begin() + j * c.hkv, c.hkv, vsc.begin() + slot_of[r][j] * c.hkv);
        }
  }

  // Reference.
  std::vector<double> ref(size_t(total_q) * c.hq * c.d, 0.0);
  for (int r = 0; r < R; ++r)
    for (int i = 0; i < c.reqs[r].qlen; ++i) {
      const int p = c.reqs[r].ctx + i;
      const int lo = c.window > 0 ? std::max(0, p - c.window + 1) : 0;
      for (int h = 0; h < c.hq; ++h) {
        const int kh = h / G;
        const bf16* qv = &q[(size_t(q_start[r] + i) * c.hq + h) * c.d];
        std::vector<double> sc(p - lo + 1);
        double mx = -1e300;
        for (int j = lo; j <= p; ++j) {
          double s = 0;
          for (int e = 0; e < c.d; ++e) s += double(bf(qv[e])) * bf(K[r][size_t(j) * row + kh * c.d + e]);
          sc[j - lo] = s;
          mx = std::max(mx, s);
        }
        double l = 0;
        for (auto& s : sc) { s = std::exp(s - mx); l += s; }
        double* o = &ref[(size_t(q_start[r] + i) * c.hq + h) * c.d];
        for (int j = lo; j <= p; ++j)
          for (int e = 0; e < c.d; ++e) o[e] += sc[j - lo] / l * bf(V[r][size_t(j) * row + kh * c.d + e]);
      }
    }

  // PDL: the device cache starts with other finite values in the chunk's own key slots and Q is
  // NaN; a late kernel scatters the real Q, K and V rows (16-byte chunks) into place.
  std::vector<bf16> late_src;
  std::vector<size_t> late_off;  // element offset of each chunk: Q (< q.size()), then K / V rows
  std::vector<bool> late_is_v;
  if (c.pdl) {
    EXPECT_FALSE(c.fp8) << "run_attn's late scatter writes BF16 caches only";
    late_src = q;
    for (size_t i = 0; i < q.size(); i += 8) late_off.push_back(i), late_is_v.push_back(false);
    const std::vector<bf16> junk = rand_bf16(rng, size_t(row), 1.f);
    for (int r = 0; r < R; ++r)
      for (int j = c.reqs[r].ctx; j < c.reqs[r].ctx + c.reqs[r].qlen; ++j)
        for (int kvv = 0; kvv < 2; ++kvv) {
          std::vector<bf16>& cache = kvv ? vc : kc;
          const size_t base = size_t(slot_of[r][j]) * row;
          late_src.insert(late_src.end(), cache.begin() + base, cache.begin() + base + row);
          std::copy(junk.begin(), junk.end(), cache.begin() + base);
          for (long e = 0; e < row; e += 8) late_off.push_back(base + e), late_is_v.push_back(kvv == 1);
        }
  }
  DevBuf<bf16> dq(q), dk(kc), dv(vc), dout(ref.size());
  DevBuf<int> dqs(q_start), dctx(ctx), dbt(block_table), drb(ring_base);
  DevBuf<uint8_t> dk8(kc8), dv8(vc8);
  DevBuf<float> dks(ksc), dvs(vsc);
  cuda::KvCache kv;
  kv.k = dk.p;
  kv.v = dv.p;
  if (c.paged) {
    kv.block_table = dbt.p;
    kv.max_blocks = max_blocks;
    kv.block_size = c.block_size;
  } else {
    kv.ring_base = drb.p;
    kv.ring_capacity = capacity;
  }
  cuda::AttnBatch b;
  b.num_requests = R;
  b.q_start = dqs.p;
  b.ctx_len = dctx.p;
  b.total_q = total_q;
  b.max_q_len = max_q;
  b.max_kv_len = max_kv;
  const int splits = c.splits > 0 ? c.splits : cuda::attention_num_splits(b, c.hq, c.hkv, c.d, c.window);
  // Poisoned: a partial state read before it is written is NaN.
  const size_t wsb = cuda::attention_workspace_bytes(b, c.hq, c.d, splits);
  DevBuf<uint8_t> ws(std::max<size_t>(wsb, 1));
  poison(ws.p, ws.bytes());
  poison(dout.p, dout.bytes());
  if (c.pdl) {
    poison(dq.p, dq.bytes());
    std::vector<void*> dst(late_off.size());
    for (size_t i = 0; i < dst.size(); ++i)
      dst[i] = (i < q.size() / 8 ? dq.p : late_is_v[i] ? dv.p : dk.p) + late_off[i];
    launch_after_late_scatter(late_src, dst, [&](cudaStream_t s, const cuda::KernelOptions& ko) {
      return cuda::attention(dq.p, c.hq, c.hkv, c.d, kv, b, c.window, 1.0f, dout.p, splits, ws.p, wsb, s, ko);
    });
  } else {
    G4C_CUDA_OK(cuda::attention(dq.p, c.hq, c.hkv, c.d, kv, b, c.window, 1.0f, dout.p, splits, ws.p,
                                wsb, nullptr));
  }
  G4C_CUDA_OK(cudaDeviceSynchronize());
  if (c.fp8) {  // the BF16 output on the dequantized cache above, then the FP8 cache's
    const std::vector<bf16> out16 = dout.get();
    cuda::KvCache kv8 = kv;
    kv8.k = kv8.v = nullptr;
    kv8.k8 = dk8.p;
    kv8.v8 = dv8.p;
    kv8.k_scale = dks.p;
    kv8.v_scale = dvs.p;
    poison(ws.p, ws.bytes());
    poison(dout.p, dout.bytes());
    G4C_CUDA_OK(cuda::attention(dq.p, c.hq, c.hkv, c.d, kv8, b, c.window, 1.0f, dout.p, splits, ws.p, wsb, nullptr));
    G4C_CUDA_OK(cudaDeviceSynchronize());
    const std::vector<bf16> out8 = dout.get();
    size_t differ = 0;
    for (size_t i = 0; i < out8.size(); ++i) differ += std::memcmp(&out8[i], &out16[i], sizeof(bf16)) != 0;
    EXPECT_EQ(differ, 0u) << "FP8 output elements that differ from the BF16 kernel's on the dequantized cache";
  }
  size_t bad = 0;
  const double err = rel_err(ref, to_float(dout.get()), &bad);
  EXPECT_EQ(bad, 0u) << "non-finite outputs";
  EXPECT_LT(err, kAttnBound);
  std::fprintf(stderr, "[attn] %s (used splits %d) rel_err %.3e\n", nm, splits, err);
  if (c.combine >= 1) EXPECT_EQ(cuda::attention_combine_cluster_size(b, c.hq, c.hkv, c.d, splits, nullptr), splits);
}

TEST(GpuAttention, PrefillPagedFullTinyGeometry) {
  G4C_REQUIRE_GPU();
  run_attn({64, 4, 2, 0, true, 16, {{0, 37}, {50, 1}, {100, 70}}, 1});
  run_attn({128, 4, 1, 0, true, 32, {{0, 45}, {130, 1}, {17, 64}}, 1});
}

TEST(GpuAttention, PrefillRingSliding) {
  G4C_REQUIRE_GPU();
  run_attn({64, 4, 2, 128, false, 0, {{0, 150}, {200, 33}, {5, 1}}, 1});
  run_attn({256, 16, 8, 40, false, 0, {{0, 100}, {130, 17}, {7, 1}}, 1});
  // Small chunks (rows ≤ 16: one-warp blocks), window boundary inside a chunk.
  run_attn({256, 16, 8, 64, false, 0, {{100, 8}, {40, 3}}, 1});
}

// Sliding layers in paged blocks (g4-plan-kv sliding-kv=paged): the window masks by position
// while keys come through the shuffled block table; prefill chunks crossing the window, and
// split-KV decode at long context.
TEST(GpuAttention, SlidingWindowOverPagedBlocks) {
  G4C_REQUIRE_GPU();
  run_attn({256, 16, 8, 64, true, 16, {{0, 150}, {200, 33}, {5, 1}}, 1});
  run_attn({64, 4, 2, 128, true, 16, {{100, 8}, {300, 70}}, 1});
  run_attn({256, 16, 8, 1024, true, 16, {{3000, 1}, {700, 1}, {1500, 1}}, 0});
}

TEST(GpuAttention, PrefillFull512) {
  G4C_REQUIRE_GPU();
  run_attn({512, 16, 1, 0, true, 64, {{0, 20}, {300, 5}}, 1});
  run_attn({512, 4, 1, 0, true, 16, {{0, 33}, {3, 40}}, 1});
}

TEST(GpuAttention, DecodeSplitKv) {
  G4C_REQUIRE_GPU();
  run_attn({256, 16, 8, 1024, false, 0, {{3000, 1}, {700, 1}, {5000, 1}}, 0});
  run_attn({256, 16, 8, 1024, false, 0, {{3000, 1}, {700, 1}}, 1});
  run_attn({512, 16, 1, 0, true, 64, {{2000, 1}, {37, 1}}, 0});
  run_attn({512, 16, 1, 0, true, 64, {{2000, 1}, {37, 1}}, 3});
  run_attn({128, 4, 1, 0, true, 16, {{900, 2}, {0, 1}}, 5});
}

// The cooperative 4-warp decode kernel (attention_decode.cu) over every head dim and GQA width:
// the cases of DecodeSplitKv plus d 64 / 128 and G = 16, against the same float64 reference and
// bound.
TEST(GpuAttention, DecodeHeadDims) {
  G4C_REQUIRE_GPU();
  run_attn({256, 16, 8, 1024, false, 0, {{3000, 1}, {700, 1}, {5000, 1}}, 0});
  run_attn({256, 16, 8, 1024, false, 0, {{3000, 1}, {700, 1}}, 1});
  run_attn({256, 16, 8, 40, true, 16, {{100, 1}, {33, 1}, {0, 1}}, 3});  // window edges, first key
  run_attn({512, 16, 1, 0, true, 64, {{2000, 1}, {37, 1}}, 0});
  run_attn({512, 16, 1, 0, true, 64, {{2000, 1}, {37, 1}}, 3});
  run_attn({128, 4, 1, 0, true, 16, {{900, 2}, {0, 1}}, 5});
  run_attn({64, 8, 2, 0, true, 16, {{300, 1}, {5, 2}}, 2});
}

// Decode launched by programmatic dependent launch (the CUDA runtime's default): the
// cooperative kernel loads its first cached K/V tiles before it waits for the kernel ahead, Q and
// the chunk's own keys after; the split combine waits for the split kernel. The kernel ahead
// writes Q and the new keys 200 µs after letting the attention launch (run_attn's `pdl`): a
// ring that wraps (3000 > 1026 slots), paged blocks at d 512 with and without splits, a request
// whose first tile holds its new key (ctx 0, 33), two new keys per request, and one split.
TEST(GpuAttention, DecodePdlWaitsForQAndTheNewKeys) {
  G4C_REQUIRE_GPU();
  auto pdl = [](AttnCase c) {
    c.pdl = true;
    run_attn(c);
  };
  pdl({256, 16, 8, 1024, false, 0, {{3000, 1}, {700, 1}, {5000, 1}}, 0});
  pdl({256, 16, 8, 1024, false, 0, {{3000, 1}, {700, 1}}, 1});
  pdl({256, 16, 8, 40, true, 16, {{100, 1}, {33, 1}, {0, 1}}, 3});
  pdl({512, 16, 1, 0, true, 64, {{2000, 1}, {37, 1}}, 0});
  pdl({512, 16, 1, 0, true, 64, {{2000, 1}, {37, 1}}, 1});
  pdl({128, 4, 1, 0, true, 16, {{900, 2}, {0, 1}}, 5});
}

// Split-KV decode merged inside thread-block clusters (attention_decode.cu, the default for 2 ≤
// splits ≤ 8 when the clusters are resident at once): each case must take that path (except the
// 128-row-set case, whose 3-block clusters an H200 does not hold all at once: the combine kernel
// then merges) and match the float64 reference (same bound). Cases: splits with no keys (a 37-key request over 8
// splits), a wrapping ring, window edges and a request's first key, two queries per request (8
// rows), d 64 … 512, odd cluster sizes, 16 requests × 8 kv heads, PDL.
TEST(GpuAttention, DecodeClusterCombine) {
  G4C_REQUIRE_GPU();
  auto both = [](AttnCase c, int mode = 1) {
    c.combine = mode;
    run_attn(c);
  };
  both({512, 16, 1, 0, true, 64, {{2000, 1}, {37, 1}}, 8});
  both({512, 16, 1, 0, true, 64, {{2000, 1}, {37, 1}}, 3});
  both({256, 16, 8, 1024, false, 0, {{3000, 1}, {700, 1}, {5000, 1}}, 3});
  both({256, 16, 8, 40, true, 16, {{100, 1}, {33, 1}, {0, 1}}, 2});
  both({128, 4, 1, 0, true, 16, {{900, 2}, {0, 1}}, 5});
  both({64, 8, 2, 0, true, 16, {{300, 1}, {5, 2}}, 7});
  AttnCase big{256, 16, 8, 1024, true, 64, {}, 3};
  for (int r = 0; r < 16; ++r) big.reqs.push_back({600 + 37 * r, 1});
  both(big, -1);
  AttnCase p{512, 16, 1, 0, true, 64, {{2000, 1}, {37, 1}, {700, 1}}, 6};
  p.pdl = true;
  both(p);
  p = {256, 16, 8, 1024, false, 0, {{3000, 1}, {700, 1}}, 4};
  p.pdl = true;
  both(p);
}

// The prefill kernels at d 256 / 512 (attention_sm90.cu): the Hopper wgmma kernel, its key ranges
// split over 2-block clusters (d 256, no split-KV) when both blocks of every query block fit one
// wave (the small cases here), else not (the 2048-token chunk: 256 query blocks); the prefill
// cases above at d 256 / 512, plus chunks long enough for whole (unmasked) tiles and the skipped
// rescale, every GQA width the API allows at d 256 (G = 1 … 16: 64 … 4 tokens per block), and
// split-KV over a prefill chunk (the workspace path). Same reference and bound.
TEST(GpuAttention, PrefillHopperKernel) {
  G4C_REQUIRE_GPU();
  run_attn({256, 16, 8, 40, false, 0, {{0, 100}, {130, 17}, {7, 1}}, 1});
  run_attn({256, 16, 8, 64, true, 16, {{0, 150}, {200, 33}, {5, 1}}, 1});
  run_attn({256, 16, 8, 1024, true, 16, {{0, 700}, {1500, 130}}, 1});
  run_attn({256, 16, 8, 0, true, 64, {{0, 300}, {64, 65}}, 1});
  run_attn({256, 8, 8, 128, false, 0, {{0, 200}, {50, 70}}, 1});
  run_attn({256, 16, 4, 100, true, 16, {{0, 90}, {33, 40}}, 1});
  run_attn({256, 16, 1, 0, true, 16, {{0, 50}, {20, 9}}, 1});
  run_attn({256, 16, 8, 64, true, 16, {{0, 150}, {300, 40}}, 3});
  run_attn({256, 16, 8, 64, true, 16, {{0, 2048}}, 1});
  run_attn({512, 16, 1, 0, true, 64, {{0, 20}, {300, 5}}, 1});
  run_attn({512, 4, 1, 0, true, 16, {{0, 33}, {3, 40}}, 1});
  run_attn({512, 16, 1, 0, true, 64, {{0, 130}, {500, 70}}, 1});
  run_attn({512, 16, 1, 0, true, 64, {{0, 90}}, 2});
}

// FP8 KV (KvCache::k8) through every kernel the BF16 cases above take: the flash prefill kernel
// (d 64 / 128), the Hopper prefill kernel (d 256 with and without split keys, d 512, split-KV
// over a prefill chunk), the cooperative decode kernel (d 64 … 512, GQA widths, ring and paged,
// windows, split-KV with the combine kernel and with the in-cluster merge). Each must meet the
// float64 bound on the dequantized values and equal the BF16 kernel's output bit for bit.
TEST(GpuAttention, Fp8KvCache) {
  G4C_REQUIRE_GPU();
  auto f8 = [](AttnCase c) {
    c.fp8 = true;
    run_attn(c);
  };
  f8({64, 4, 2, 0, true, 16, {{0, 37}, {50, 1}, {100, 70}}, 1});
  f8({128, 4, 1, 0, true, 32, {{0, 45}, {130, 1}, {17, 64}}, 1});
  f8({64, 4, 2, 128, false, 0, {{0, 150}, {200, 33}, {5, 1}}, 1});
  f8({256, 16, 8, 40, false, 0, {{0, 100}, {130, 17}, {7, 1}}, 1});
  f8({256, 16, 8, 64, true, 16, {{0, 150}, {200, 33}, {5, 1}}, 1});
  f8({256, 16, 8, 1024, true, 16, {{0, 700}, {1500, 130}}, 1});
  f8({256, 16, 8, 64, true, 16, {{0, 150}, {300, 40}}, 3});
  f8({512, 16, 1, 0, true, 64, {{0, 130}, {500, 70}}, 1});
  f8({512, 4, 1, 0, true, 16, {{0, 33}, {3, 40}}, 1});
  f8({256, 16, 8, 1024, false, 0, {{3000, 1}, {700, 1}, {5000, 1}}, 0});
  f8({256, 16, 8, 40, true, 16, {{100, 1}, {33, 1}, {0, 1}}, 3});
  f8({512, 16, 1, 0, true, 64, {{2000, 1}, {37, 1}}, 0});
  f8({128, 4, 1, 0, true, 16, {{900, 2}, {0, 1}}, 5});
  f8({64, 8, 2, 0, true, 16, {{300, 1}, {5, 2}}, 2});
  AttnCase cl{512, 16, 1, 0, true, 64, {{2000, 1}, {37, 1}}, 3};
  cl.combine = 1;
  f8(cl);
  cl = {256, 16, 8, 1024, false, 0, {{3000, 1}, {700, 1}, {5000, 1}}, 3};
  cl.combine = 1;
  f8(cl);
}

}  // namespace
}  // namespace g4c::gputest

// The CUDA backend's batch metadata (runtime/cuda_backend/meta.h), on the CPU: KV slot of every
// row for ring and paged layers (KERNELS.md "KV cache addressing", computed here by hand),
// request starts / cached lengths, and the padding of a decode bucket (graph replay).
#include <gtest/gtest.h>

#include "models/error.h"
#include "runtime/cuda_backend/meta.h"
#include "runtime/kv.h"

using namespace g4c;
using cudart::KvGroup;
using cudart::Shape;

namespace {

struct View {
  const std::vector<unsigned char>& h;
  const cudart::MetaLayout& m;
  const int32_t* i32(size_t off) const { return reinterpret_cast<const int32_t*>(h.data() + off); }
  const int64_t* slots(int g) const { return reinterpret_cast<const int64_t*>(h.data() + m.slots[g]); }
};

Shape exact(const runtime::BatchDesc& b) {
  Shape s;
  s.T = s.real_T = b.num_tokens();
  s.S = s.real_S = int(b.seqs.size());
  s.R = s.real_R = int(b.logit_rows.size());
  return s;
}

}  // namespace

TEST(CudaMeta, SlotsOfRingAndPagedLayers) {
  // Ring: capacity 8 (window 5 + chunk 4 − 1), 3 ring slots; paged: block size 4, pool of 16 blocks.
  const std::vector<KvGroup> groups = {{plan::fb::KvKind::Ring, 8, 24}, {plan::fb::KvKind::Paged, 4, 64}};
  const int max_blocks = 16;
  auto m = cudart::layout_meta(16, 4, 16, 2, max_blocks);
  std::vector<unsigned char> h(m.bytes, 0xAB);
  runtime::BatchDesc b;
  const std::vector<int32_t> t0 = {11, 12, 13}, t1 = {21};
  const std::vector<int32_t> blocks0 = {7}, blocks1 = {2, 9, 5};
  b.add_sequence(t0.data(), 3, 0, /*ring_slot=*/2, &blocks0, false, true);   // prefill at 0..2
  b.add_sequence(t1.data(), 1, 9, /*ring_slot=*/0, &blocks1, false, true);   // decode at 9
  const size_t bytes = cudart::fill_meta(b, exact(b), groups, m, max_blocks, 3, h.data());
  EXPECT_EQ(bytes, m.block_table + size_t(2) * max_blocks * 4);
  View v{h, m};
  EXPECT_EQ(std::vector<int32_t>(v.i32(m.tokens), v.i32(m.tokens) + 4), (std::vector<int32_t>{11, 12, 13, 21}));
  EXPECT_EQ(std::vector<int32_t>(v.i32(m.positions), v.i32(m.positions) + 4), (std::vector<int32_t>{0, 1, 2, 9}));
  EXPECT_EQ(std::vector<int32_t>(v.i32(m.logit_rows), v.i32(m.logit_rows) + 2), (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(std::vector<int32_t>(v.i32(m.q_start), v.i32(m.q_start) + 3), (std::vector<int32_t>{0, 3, 4}));
  EXPECT_EQ(std::vector<int32_t>(v.i32(m.ctx_len), v.i32(m.ctx_len) + 2), (std::vector<int32_t>{0, 9}));
  // Ring: slot = ring_slot·capacity + p mod capacity → 16,17,18 and 0·8 + 9 mod 8 = 1.
  EXPECT_EQ(std::vector<int64_t>(v.slots(0), v.slots(0) + 4), (std::vector<int64_t>{16, 17, 18, 1}));
  EXPECT_EQ(v.i32(m.ring_base[0])[0], 16);
  EXPECT_EQ(v.i32(m.ring_base[0])[1], 0);
  // Paged: slot = table[p / 4]·4 + p mod 4 → block 7: 28,29,30; p = 9 → table[2] = 5: 20 + 1.
  EXPECT_EQ(std::vector<int64_t>(v.slots(1), v.slots(1) + 4), (std::vector<int64_t>{28, 29, 30, 21}));
  const int32_t* bt = v.i32(m.block_table);
  EXPECT_EQ(bt[0], 7);
  EXPECT_EQ(bt[1], 0);
  EXPECT_EQ(bt[max_blocks + 0], 2);
  EXPECT_EQ(bt[max_blocks + 1], 9);
  EXPECT_EQ(bt[max_blocks + 2], 5);
  EXPECT_EQ(bt[max_blocks + 3], 0);
}

TEST(CudaMeta, DecodeBucketPadding) {
  const std::vector<KvGroup> groups = {{plan::fb::KvKind::Ring, 8, 24}, {plan::fb::KvKind::Paged, 4, 64}};
  auto m = cudart::layout_meta(8, 4, 8, 2, 4);
  std::vector<unsigned char> h(m.bytes, 0xAB);
  runtime::BatchDesc b;
  const std::vector<int32_t> t = {5, 6}, blocks = {3, 1};
  b.add_sequence(&t[0], 1, 6, 1, &blocks, false, true);
  b.add_sequence(&t[1], 1, 4, 2, &blocks, false, true);
  Shape sh = exact(b);
  sh.T = sh.S = sh.R = 4;  // bucket of 4 sequences, 2 live
  sh.bucket = true;
  cudart::fill_meta(b, sh, groups, m, 4, 3, h.data());
  View v{h, m};
  EXPECT_EQ(std::vector<int32_t>(v.i32(m.tokens), v.i32(m.tokens) + 4), (std::vector<int32_t>{5, 6, 0, 0}));
  EXPECT_EQ(std::vector<int32_t>(v.i32(m.q_start), v.i32(m.q_start) + 5), (std::vector<int32_t>{0, 1, 2, 2, 2}));
  EXPECT_EQ(std::vector<int32_t>(v.i32(m.ctx_len), v.i32(m.ctx_len) + 4), (std::vector<int32_t>{6, 4, 0, 0}));
  // Padded rows write the scratch slot (one past the last real slot) of each group.
  EXPECT_EQ(std::vector<int64_t>(v.slots(0), v.slots(0) + 4), (std::vector<int64_t>{14, 20, 24, 24}));
  EXPECT_EQ(std::vector<int64_t>(v.slots(1), v.slots(1) + 4), (std::vector<int64_t>{6, 4, 64, 64}));
}

TEST(CudaMeta, MissingStorageIsAnError) {
  const std::vector<KvGroup> groups = {{plan::fb::KvKind::Paged, 4, 64}};
  auto m = cudart::layout_meta(4, 2, 4, 1, 4);
  std::vector<unsigned char> h(m.bytes);
  runtime::BatchDesc b;
  const std::vector<int32_t> t = {1}, blocks = {3};
  b.add_sequence(t.data(), 1, 4, 0, &blocks, false, true);  // position 4 needs a second block
  EXPECT_THROW(cudart::fill_meta(b, exact(b), groups, m, 4, 1, h.data()), Error);
  const std::vector<KvGroup> ring = {{plan::fb::KvKind::Ring, 8, 16}};
  runtime::BatchDesc r;
  r.add_sequence(t.data(), 1, 0, 5, &blocks, false, true);  // ring slot 5 of 2
  EXPECT_THROW(cudart::fill_meta(r, exact(r), ring, m, 4, 2, h.data()), Error);
}

// Paged sliding layers read the window pool's tables: a block that left the window is 0 in the
// device table (a real block the window mask never lets a kernel use), the slots of the rows
// come from the window table, and a row in a released block is an error.
TEST(CudaMeta, WindowPoolTablesForPagedSlidingLayers) {
  const std::vector<KvGroup> groups = {{plan::fb::KvKind::Paged, 4, 64, false}, {plan::fb::KvKind::Paged, 4, 32, true}};
  const int max_blocks = 8;
  auto m = cudart::layout_meta(8, 2, 8, 2, max_blocks);
  std::vector<unsigned char> h(m.bytes, 0xAB);
  runtime::BatchDesc b;
  const std::vector<int32_t> t = {5, 6};
  const std::vector<int32_t> full = {3, 1, 4}, window = {runtime::kReleasedBlock, 6, 2};
  b.add_sequence(t.data(), 2, 9, -1, &full, false, true, &window);  // positions 9, 10: block 2
  const size_t bytes = cudart::fill_meta(b, exact(b), groups, m, max_blocks, 1, h.data());
  EXPECT_EQ(bytes, m.window_block_table + size_t(1) * max_blocks * 4);
  View v{h, m};
  // Full: table[2] = 4 → 16 + 1, 16 + 2; window: table[2] = 2 → 8 + 1, 8 + 2.
  EXPECT_EQ(std::vector<int64_t>(v.slots(0), v.slots(0) + 2), (std::vector<int64_t>{17, 18}));
  EXPECT_EQ(std::vector<int64_t>(v.slots(1), v.slots(1) + 2), (std::vector<int64_t>{9, 10}));
  const int32_t* wt = v.i32(m.window_block_table);
  EXPECT_EQ(std::vector<int32_t>(wt, wt + 4), (std::vector<int32_t>{0, 6, 2, 0}));
  const int32_t* bt = v.i32(m.block_table);
  EXPECT_EQ(std::vector<int32_t>(bt, bt + 3), (std::vector<int32_t>{3, 1, 4}));
  runtime::BatchDesc r;
  r.add_sequence(t.data(), 1, 2, -1, &full, false, true, &window);  // position 2 lies in the released block
  EXPECT_THROW(cudart::fill_meta(r, exact(r), groups, m, max_blocks, 1, h.data()), Error);
}

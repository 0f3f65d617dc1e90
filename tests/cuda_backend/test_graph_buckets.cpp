// CUDA graph buckets (runtime/cuda_backend/graph_buckets.h), on the CPU: which plan buckets are
// graphs, and the padded launch shape of decode, prefill and mixed steps against sizes worked
// out by hand.
#include <gtest/gtest.h>

#include <optional>

#include "models/safetensors.h"
#include "models/config.h"
#include "runtime/cuda_backend/graph_buckets.h"
#include "runtime/plan/reference_builder.h"
#include "tests/cuda_backend/support.h"

using namespace g4c;
using cudart::GraphBucket;
using cudart::Shape;

namespace {

Shape real(int T, int S, int R) {
  Shape s;
  s.T = s.real_T = T;
  s.S = s.real_S = S;
  s.R = s.real_R = R;
  s.max_q_len = T;
  s.max_kv_len = 100;
  return s;
}

// As g4-plan-buckets writes them for max-seqs 8, max-chunk 512, min-prefill 16,
// graph-max-tokens 64 (prefill S = min(T, max-seqs), R = S); 128 and 512 are eager buckets.
const std::vector<GraphBucket> kBuckets = {
    {1, 1, 1, true},   {2, 2, 2, true},    {4, 4, 4, true},   {8, 8, 8, true},
    {16, 8, 8, false}, {32, 8, 8, false}, {64, 8, 8, false},
};

// A padded launch shape: the bucket's sizes, one query row per sequence (decode) or the
// bucket's tokens (prefill), attention splits for the longest context, the bucket flag.
void expect_bucket(const std::optional<Shape>& sh, int T, int S, int R, int max_q_len) {
  ASSERT_TRUE(sh);
  EXPECT_EQ(sh->T, T);
  EXPECT_EQ(sh->S, S);
  EXPECT_EQ(sh->R, R);
  EXPECT_EQ(sh->max_q_len, max_q_len);
  EXPECT_EQ(sh->max_kv_len, 1 << 30);
  EXPECT_TRUE(sh->bucket);
}

}  // namespace

TEST(GraphBuckets, DecodePadsToTheNextBatchSize) {
  auto sh = cudart::bucket_shape(kBuckets, real(3, 3, 3), true, 512, 8, 16);
  expect_bucket(sh, 4, 4, 4, 1);
  ASSERT_TRUE(sh);
  EXPECT_EQ(sh->real_T, 3);
  EXPECT_EQ(sh->real_S, 3);
  EXPECT_EQ(sh->real_R, 3);
  // Exactly a bucket: no padding.
  expect_bucket(cudart::bucket_shape(kBuckets, real(8, 8, 8), true, 512, 8, 16), 8, 8, 8, 1);
}

TEST(GraphBuckets, DecodeBucketIsClippedToTheSequenceCapacity) {
  // 5 sequences on a backend that holds 6: bucket 8 becomes 6.
  expect_bucket(cudart::bucket_shape(kBuckets, real(5, 5, 5), true, 512, 6, 16), 6, 6, 6, 1);
  // More sequences than any decode bucket: eager.
  EXPECT_FALSE(cudart::bucket_shape(kBuckets, real(9, 9, 9), true, 512, 16, 16));
}

TEST(GraphBuckets, PrefillPadsTokensAndClipsSequencesAndRows) {
  // 40 tokens of 3 sequences, 3 logit rows: bucket (64, 8, 8); the backend holds 6 sequences
  // and 16 logit rows, so S = 6, R = 8. Queries are padded to the bucket's tokens.
  const auto sh = cudart::bucket_shape(kBuckets, real(40, 3, 3), false, 512, 6, 16);
  expect_bucket(sh, 64, 6, 8, 64);
  ASSERT_TRUE(sh);
  EXPECT_EQ(sh->real_T, 40);
  // A decode-sized step that is not a decode (one sequence feeds 2 tokens): a prefill bucket.
  expect_bucket(cudart::bucket_shape(kBuckets, real(4, 3, 3), false, 512, 8, 16), 16, 8, 8, 16);
}

TEST(GraphBuckets, StepsNoGraphBucketHoldsRunEagerly) {
  // Beyond graph-max-tokens (65 tokens > 64).
  EXPECT_FALSE(cudart::bucket_shape(kBuckets, real(65, 2, 2), false, 512, 8, 16));
  // Logit rows beyond the bucket's (every position's logits: g4c eval).
  EXPECT_FALSE(cudart::bucket_shape(kBuckets, real(20, 1, 20), false, 512, 8, 32));
  // The bucket needs more token rows than the arena holds: eager, the arena does not grow.
  EXPECT_FALSE(cudart::bucket_shape(kBuckets, real(40, 2, 2), false, 48, 8, 16));
  EXPECT_FALSE(cudart::bucket_shape({}, real(1, 1, 1), true, 512, 8, 16));
}

TEST(GraphBuckets, ReferencePlanMarksDecodeAndSmallPrefillBuckets) {
  const auto dir = gpurt::tiny_dir();
  auto cfg = models::load_model_config(dir);
  auto ckpt = models::Checkpoint::open(dir);
  plan::ReferenceOptions o;  // decode 1 … 64, prefill 16 / 64 / 256 / 1024, graphs up to 256
  auto p = plan::build_reference_plan(cfg, *ckpt, o);
  const auto b = cudart::graph_buckets(p.root());
  std::vector<std::tuple<int, int, int, bool>> got;
  for (const auto& x : b) got.emplace_back(x.T, x.S, x.R, x.decode);
  const std::vector<std::tuple<int, int, int, bool>> want = {
      {1, 1, 1, true},       {2, 2, 2, true},     {4, 4, 4, true},       {8, 8, 8, true},  {16, 16, 16, true},
      {16, 16, 16, false},   {32, 32, 32, true},  {64, 64, 64, true},    {64, 64, 64, false},
      {256, 256, 256, false}};
  EXPECT_EQ(got, want);
  ASSERT_EQ(p->buckets()->size(), want.size() + 1);  // + the eager 1024-token bucket
  const auto* last = p->buckets()->Get(p->buckets()->size() - 1);
  EXPECT_EQ(last->max_tokens(), 1024);
  EXPECT_FALSE(last->graph());
  EXPECT_FALSE(last->decode());
}

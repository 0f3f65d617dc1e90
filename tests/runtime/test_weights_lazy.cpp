// The lazy weight store (WeightStore::load_lazy, used for device backends): nothing converted
// until asked, then exactly the eager store's values; replace() works on a never-read weight.
#include <gtest/gtest.h>

#include <cstring>

#include "models/config.h"
#include "models/safetensors.h"
#include "runtime/plan/reference_builder.h"
#include "runtime/weights.h"
#include "tests/runtime/support.h"

using namespace g4c;

TEST(WeightStore, LazyConvertsOnFirstUseAndEqualsEager) {
  const auto cfg = models::load_model_config(test::tiny_model_dir());
  std::shared_ptr<const models::Checkpoint> ckpt = models::Checkpoint::open(test::tiny_model_dir());
  auto p = plan::build_reference_plan(cfg, *ckpt);
  auto eager = runtime::WeightStore::load(p, *ckpt, 2);
  auto lazy = runtime::WeightStore::load_lazy(p, ckpt);
  ASSERT_EQ(lazy->size(), eager->size());
  EXPECT_EQ(lazy->loaded(), 0);
  for (int i = 0; i < lazy->size(); ++i) {
    EXPECT_EQ(lazy->numel(i), eager->numel(i)) << lazy->name(i);  // shapes only: still nothing loaded
    EXPECT_EQ(lazy->name(i), eager->name(i));
  }
  EXPECT_EQ(lazy->loaded(), 0);
  const int w = lazy->find("norm.weight");
  ASSERT_GE(w, 0);
  EXPECT_EQ(std::memcmp(lazy->data(w), eager->data(w), eager->numel(w) * 4), 0);
  EXPECT_EQ(lazy->loaded(), 1);
  // replace() of a weight never read: loads it, then overwrites it.
  const int e = lazy->find("embed_tokens.weight");
  ASSERT_GE(e, 0);
  std::vector<float> ones(lazy->numel(e), 1.0f);
  lazy->replace(e, ones);
  EXPECT_EQ(lazy->data(e)[lazy->numel(e) - 1], 1.0f);
  EXPECT_EQ(lazy->loaded(), 2);
  for (int i = 0; i < lazy->size(); ++i)
    if (i != e) EXPECT_EQ(std::memcmp(lazy->data(i), eager->data(i), eager->numel(i) * 4), 0) << lazy->name(i);
  EXPECT_EQ(lazy->loaded(), lazy->size());
}

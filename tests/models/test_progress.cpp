// Progress bar: thread-safe counting; with stderr not a TTY (as under ctest) it
// prints exactly one final line; disabled it prints nothing.
#include <unistd.h>

#include <algorithm>
#include <thread>

#include <gtest/gtest.h>

#include "models/progress.h"

using g4c::Progress;

TEST(Progress, ThreadsCountAndOneFinalLine) {
  Progress::set_enabled(true);
  testing::internal::CaptureStderr();
  {
    Progress p("unit-test", 4000, Progress::Unit::Count);
    std::vector<std::thread> ts;
    for (int t = 0; t < 4; ++t)
      ts.emplace_back([&] {
        for (int i = 0; i < 1000; ++i) p.add(1);
      });
    for (auto& t : ts) t.join();
    EXPECT_EQ(p.done(), 4000u);
    p.finish();
    p.finish();  // idempotent
  }
  std::string err = testing::internal::GetCapturedStderr();
  if (isatty(2)) GTEST_SKIP() << "stderr is a TTY: live redraws are expected";
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_NE(err.find("unit-test"), std::string::npos) << err;
  EXPECT_NE(err.find("4000/4000"), std::string::npos) << err;
}

TEST(Progress, DisabledIsSilent) {
  Progress::set_enabled(false);
  testing::internal::CaptureStderr();
  {
    Progress p("quiet", 10, Progress::Unit::Bytes);
    p.add(10);
  }
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  Progress::set_enabled(true);
}

TEST(Progress, HumanBytes) {
  EXPECT_EQ(Progress::human_bytes(999), "999 B");
  EXPECT_EQ(Progress::human_bytes(5.45e9), "5.45 GB");
}

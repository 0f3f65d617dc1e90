// The Chrome-trace writer: the file it writes is valid JSON with the events given, escaped.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "models/error.h"
#include "runtime/trace.h"

using namespace g4c;

namespace {
std::filesystem::path tmp(const std::string& name) {
  auto d = std::filesystem::temp_directory_path() / ("g4c_trace_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(d);
  return d / name;
}
}  // namespace

TEST(Trace, WritesChromeTraceJson) {
  const auto path = tmp("t.json");
  {
    runtime::TraceWriter t(path);
    t.name_track(runtime::TraceWriter::kCompute, "gpu");
    t.complete("L0.q_\"proj\"\n", "Linear", 10.5, 2.25, runtime::TraceWriter::kCompute, {{"rows", "7"}});
    t.instant("mark", "x", 20);
    t.counter("bytes", 30, 1024);
    EXPECT_EQ(t.num_events(), 5u);  // host track name + 4
  }
  std::ifstream f(path);
  auto j = nlohmann::json::parse(f);
  const auto& ev = j.at("traceEvents");
  ASSERT_EQ(ev.size(), 5u);
  const auto& x = ev[2];
  EXPECT_EQ(x.at("name"), "L0.q_\"proj\"\n");  // escaped and read back exactly
  EXPECT_EQ(x.at("ph"), "X");
  EXPECT_DOUBLE_EQ(x.at("ts").get<double>(), 10.5);
  EXPECT_DOUBLE_EQ(x.at("dur").get<double>(), 2.25);
  EXPECT_EQ(x.at("tid"), 1);
  EXPECT_EQ(x.at("args").at("rows"), 7);
  EXPECT_EQ(ev[3].at("ph"), "i");
  EXPECT_EQ(ev[4].at("args").at("bytes").get<double>(), 1024.0);
  std::filesystem::remove_all(path.parent_path());
}

TEST(Trace, UnwritablePathIsAnError) {
  runtime::TraceWriter t("/nonexistent_dir_g4c/x/trace.json");
  t.instant("a", "b", 1);
  EXPECT_THROW(t.close(), Error);
}

TEST(Trace, ClockIsMonotonic) {
  runtime::TraceWriter t(tmp("c.json"));
  const double a = t.now_us(), b = t.now_us();
  EXPECT_GE(b, a);
  EXPECT_GE(a, 0.0);
}

// Chrome-trace (Trace Event Format) JSON writer: complete ("X"), instant ("i") and counter
// ("C") events, opened by Perfetto / chrome://tracing, serialised with nlohmann::json; used by
// the CPU and CUDA paths alike (scheduler steps, kernels timed with CUDA events, copies, graph
// replays).
//
//   runtime::TraceWriter trace("trace.json");
//   auto t0 = trace.now_us();  ...;  trace.complete("step", "sched", t0, trace.now_us() - t0);
//   trace.close();  // (or the destructor) writes the file
//
// Timestamps are microseconds since the writer was created (steady clock). Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace g4c::runtime {

class TraceWriter {
 public:
  // Track ids (Chrome "tid") used by the runtime; any int works.
  enum Track : int { kHost = 0, kCompute = 1, kCopy = 2, kGraph = 3 };
  // Event arguments; values are JSON literals ("7", "\"text\"", "[1,2]"); a value that does
  // not parse as JSON is recorded as a string.
  using Args = std::vector<std::pair<std::string, std::string>>;

  explicit TraceWriter(std::filesystem::path path);
  ~TraceWriter();  // close()s; never throws
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  double now_us() const;
  // A span [start_us, start_us + dur_us) on track `tid`.
  void complete(const std::string& name, const std::string& cat, double start_us, double dur_us, int tid = kHost,
                const Args& args = {});
  void instant(const std::string& name, const std::string& cat, double ts_us, int tid = kHost);
  void counter(const std::string& name, double ts_us, double value);
  // Names a track in the viewer.
  void name_track(int tid, const std::string& name);
  size_t num_events() const;
  // Writes the JSON file (throws g4c::Error naming the path when it cannot); idempotent.
  void close();

  // JSON string literal of s (quotes and escapes).
  static std::string quote(const std::string& s);

 private:
  std::filesystem::path path_;
  std::chrono::steady_clock::time_point t0_;
  mutable std::mutex mu_;
  std::vector<nlohmann::json> events_;
  bool closed_ = false;
};

}  // namespace g4c::runtime

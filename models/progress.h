// A small thread-safe progress bar on stderr for long-running commands
// (synth, quantize, compile of big models, eval).
//
//   Progress bar("synth weights", total_bytes, Progress::Unit::Bytes);
//   ... bar.add(n) from any thread ...
//   bar.finish();   // (also done by the destructor)
//
// Redraws at most ~10 times a second with label, done/total, rate and ETA. When
// stderr is not a TTY it prints nothing until finish(), which prints one final line.
// Progress::set_enabled(false) (or G4C_NO_PROGRESS=1 in the environment) silences it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace g4c {

class Progress {
 public:
  enum class Unit { Count, Bytes };
  Progress(std::string label, uint64_t total, Unit unit = Unit::Count);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void add(uint64_t n);  // thread-safe
  void finish();         // final line; idempotent
  uint64_t done() const { return done_.load(std::memory_order_relaxed); }

  static void set_enabled(bool on);
  static bool enabled();
  // Formats "1.23 GB" / "456 KB" (decimal units) — also used by callers' summaries.
  static std::string human_bytes(double bytes);

 private:
  void draw(bool final_line);
  std::string label_;
  uint64_t total_;
  Unit unit_;
  bool tty_;
  std::atomic<uint64_t> done_{0};
  std::atomic<int64_t> next_draw_ns_{0};
  std::chrono::steady_clock::time_point start_;
  std::mutex mu_;
  bool finished_ = false;
};

}  // namespace g4c

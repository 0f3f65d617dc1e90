#include "models/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace g4c {

namespace {
std::atomic<int> g_enabled{-1};  // -1: not decided yet (read G4C_NO_PROGRESS)
constexpr int64_t kRedrawNs = 100'000'000;  // ~10 redraws per second

int64_t now_ns(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
}
}  // namespace

void Progress::set_enabled(bool on) { g_enabled = on ? 1 : 0; }

bool Progress::enabled() {
  int e = g_enabled.load();
  if (e < 0) {
    const char* v = std::getenv("G4C_NO_PROGRESS");
    e = (v && *v && std::string(v) != "0") ? 0 : 1;
    g_enabled = e;
  }
  return e == 1;
}

std::string Progress::human_bytes(double b) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (b >= 1000.0 && u < 4) { b /= 1000.0; ++u; }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", b, units[u]);
  return buf;
}

Progress::Progress(std::string label, uint64_t total, Unit unit)
    : label_(std::move(label)), total_(total), unit_(unit), tty_(isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()) {}

Progress::~Progress() { finish(); }

void Progress::add(uint64_t n) {
  done_.fetch_add(n, std::memory_order_relaxed);
  if (!tty_ || !enabled()) return;
  int64_t t = now_ns(start_), due = next_draw_ns_.load(std::memory_order_relaxed);
  if (t < due) return;
  // Only the thread that wins the exchange redraws; the others go on working.
  if (!next_draw_ns_.compare_exchange_strong(due, t + kRedrawNs)) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (!finished_) draw(false);
}

void Progress::finish() {
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) return;
  finished_ = true;
  if (enabled()) draw(true);
}

void Progress::draw(bool final_line) {
  double secs = now_ns(start_) * 1e-9;
  uint64_t d = done();
  double rate = secs > 0 ? d / secs : 0.0;
  auto fmt = [&](double v) {
    if (unit_ == Unit::Bytes) return human_bytes(v);
    char b[32];
    std::snprintf(b, sizeof b, "%.0f", v);
    return std::string(b);
  };
  std::string line = label_ + " ";
  if (total_ > 0) {
    double frac = std::min(1.0, double(d) / double(total_));
    constexpr int kWidth = 24;
    int filled = int(frac * kWidth);
    line += "[" + std::string(size_t(filled), '#') + std::string(size_t(kWidth - filled), '.') + "] ";
    char pct[16];
    std::snprintf(pct, sizeof pct, "%3.0f%% ", frac * 100);
    line += pct + fmt(double(d)) + "/" + fmt(double(total_));
  } else {
    line += fmt(double(d));
  }
  char tail[64];
  if (final_line) {
    std::snprintf(tail, sizeof tail, " in %.1f s", secs);
    line += tail;
    if (secs > 0) line += ", " + fmt(rate) + "/s";
  } else {
    line += ", " + fmt(rate) + "/s";
    if (total_ > 0 && rate > 0 && d < total_) {
      std::snprintf(tail, sizeof tail, ", ETA %.0f s", double(total_ - d) / rate);
      line += tail;
    }
  }
  if (tty_) std::fprintf(stderr, "\r\033[K%s%s", line.c_str(), final_line ? "\n" : "");
  else std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

}  // namespace g4c

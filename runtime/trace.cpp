// Chrome-trace JSON writer (see trace.h).
#include "runtime/trace.h"

#include <cstdio>
#include <fstream>

#include "models/error.h"

namespace g4c::runtime {

TraceWriter::TraceWriter(std::filesystem::path path) : path_(std::move(path)), t0_(std::chrono::steady_clock::now()) {
  name_track(kHost, "host / scheduler");
}

TraceWriter::~TraceWriter() {
  try {
    close();
  } catch (...) {
  }
}

double TraceWriter::now_us() const {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0_).count();
}

std::string TraceWriter::quote(const std::string& s) {
  std::string o = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += char(c);
    } else if (c < 0x20) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", c);
      o += b;
    } else {
      o += char(c);
    }
  }
  return o + "\"";
}

namespace {
std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3f", v);
  return b;
}
}  // namespace

void TraceWriter::complete(const std::string& name, const std::string& cat, double start_us, double dur_us, int tid,
                           const Args& args) {
  std::string e = "{\"name\":" + quote(name) + ",\"cat\":" + quote(cat) + ",\"ph\":\"X\",\"ts\":" + num(start_us) +
                  ",\"dur\":" + num(dur_us < 0 ? 0 : dur_us) + ",\"pid\":1,\"tid\":" + std::to_string(tid);
  if (!args.empty()) {
    e += ",\"args\":{";
    for (size_t i = 0; i < args.size(); ++i) e += (i ? "," : "") + quote(args[i].first) + ":" + args[i].second;
    e += "}";
  }
  e += "}";
  std::lock_guard<std::mutex> l(mu_);
  events_.push_back(std::move(e));
}

void TraceWriter::instant(const std::string& name, const std::string& cat, double ts_us, int tid) {
  std::string e = "{\"name\":" + quote(name) + ",\"cat\":" + quote(cat) + ",\"ph\":\"i\",\"s\":\"t\",\"ts\":" +
                  num(ts_us) + ",\"pid\":1,\"tid\":" + std::to_string(tid) + "}";
  std::lock_guard<std::mutex> l(mu_);
  events_.push_back(std::move(e));
}

void TraceWriter::counter(const std::string& name, double ts_us, double value) {
  std::string e = "{\"name\":" + quote(name) + ",\"ph\":\"C\",\"ts\":" + num(ts_us) + ",\"pid\":1,\"args\":{" +
                  quote(name) + ":" + num(value) + "}}";
  std::lock_guard<std::mutex> l(mu_);
  events_.push_back(std::move(e));
}

void TraceWriter::name_track(int tid, const std::string& name) {
  std::string e = "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":" + std::to_string(tid) +
                  ",\"args\":{\"name\":" + quote(name) + "}}";
  std::lock_guard<std::mutex> l(mu_);
  events_.push_back(std::move(e));
}

size_t TraceWriter::num_events() const {
  std::lock_guard<std::mutex> l(mu_);
  return events_.size();
}

void TraceWriter::close() {
  std::lock_guard<std::mutex> l(mu_);
  if (closed_) return;
  closed_ = true;
  std::ofstream f(path_, std::ios::binary | std::ios::trunc);
  if (!f) throw Error("trace: cannot write " + path_.string());
  f << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  for (size_t i = 0; i < events_.size(); ++i) f << events_[i] << (i + 1 < events_.size() ? ",\n" : "\n");
  f << "]}\n";
  if (!f) throw Error("trace: writing " + path_.string() + " failed");
}

}  // namespace g4c::runtime

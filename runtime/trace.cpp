// Chrome-trace JSON writer (see trace.h).
#include "runtime/trace.h"

#include <fstream>

#include "models/error.h"

namespace g4c::runtime {

using nlohmann::json;

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

std::string TraceWriter::quote(const std::string& s) { return json(s).dump(-1, ' ', false, json::error_handler_t::replace); }

void TraceWriter::complete(const std::string& name, const std::string& cat, double start_us, double dur_us, int tid,
                           const Args& args) {
  json e = {{"name", name}, {"cat", cat}, {"ph", "X"}, {"ts", start_us}, {"dur", dur_us < 0 ? 0.0 : dur_us},
            {"pid", 1},     {"tid", tid}};
  if (!args.empty()) {
    json a = json::object();
    for (const auto& [k, v] : args) {
      json parsed = json::parse(v, nullptr, /*allow_exceptions=*/false);
      a[k] = parsed.is_discarded() ? json(v) : std::move(parsed);
    }
    e["args"] = std::move(a);
  }
  std::lock_guard<std::mutex> l(mu_);
  events_.push_back(std::move(e));
}

void TraceWriter::instant(const std::string& name, const std::string& cat, double ts_us, int tid) {
  json e = {{"name", name}, {"cat", cat}, {"ph", "i"}, {"s", "t"}, {"ts", ts_us}, {"pid", 1}, {"tid", tid}};
  std::lock_guard<std::mutex> l(mu_);
  events_.push_back(std::move(e));
}

void TraceWriter::counter(const std::string& name, double ts_us, double value) {
  json e = {{"name", name}, {"ph", "C"}, {"ts", ts_us}, {"pid", 1}, {"args", {{name, value}}}};
  std::lock_guard<std::mutex> l(mu_);
  events_.push_back(std::move(e));
}

void TraceWriter::name_track(int tid, const std::string& name) {
  json e = {{"name", "thread_name"}, {"ph", "M"}, {"pid", 1}, {"tid", tid}, {"args", {{"name", name}}}};
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
  // One event per line: large traces stay greppable and diffable.
  f << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  for (size_t i = 0; i < events_.size(); ++i)
    f << events_[i].dump(-1, ' ', false, json::error_handler_t::replace) << (i + 1 < events_.size() ? ",\n" : "\n");
  f << "]}\n";
  if (!f) throw Error("trace: writing " + path_.string() + " failed");
}

}  // namespace g4c::runtime

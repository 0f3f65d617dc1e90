// The `g4c bench --plot` figure (see bench_plot.h), drawn with tools/bench_png.h.
#include "tools/bench_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "models/error.h"
#include "tools/bench_png.h"

namespace g4c::bench {
namespace {

constexpr Rgb kInk{20, 20, 20}, kGrid{215, 215, 215}, kFull{70, 110, 190}, kPrefill{230, 140, 40},
    kDecode{60, 160, 90};

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

// A "nice" axis maximum ≥ v (1, 2, 5 × 10^k).
double nice_max(double v) {
  if (v <= 0) return 1;
  const double p = std::pow(10.0, std::floor(std::log10(v)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= v) return m * p;
  return 10 * p;
}

std::string clip(std::string s, size_t n) { return s.size() <= n ? s : s.substr(0, n - 1) + "~"; }

struct Panel {
  int x, y, w, h;  // plot area
};

void axes(Canvas& c, const Panel& p, double ymax, const char* tick_fmt, const std::string& title) {
  c.text(p.x, p.y - 30, title, kInk, 2);
  for (int i = 0; i <= 4; ++i) {
    const int yy = p.y + p.h - p.h * i / 4;
    c.hline(p.x, p.x + p.w, yy, kGrid);
    const std::string t = fmt(tick_fmt, ymax * i / 4);
    c.text(p.x - Canvas::text_width(t, 1) - 4, yy - 4, t, kInk, 1);
  }
  c.vline(p.x, p.y, p.y + p.h, kInk);
  c.hline(p.x, p.x + p.w, p.y + p.h, kInk);
}

}  // namespace

void plot_reports(const std::vector<nlohmann::json>& reports, const std::filesystem::path& png) {
  if (reports.empty()) throw Error(png.string() + ": nothing to plot (no reports)");
  const int W = 1100, H = 560;
  Canvas c(W, H);
  const auto& r0 = reports.front();
  std::string title = "g4c bench: " + std::filesystem::path(r0.value("model", "")).filename().string() + " on " +
                      std::filesystem::path(r0.value("input", "")).filename().string();
  c.text(20, 12, clip(title, 88), kInk, 2);
  c.text(20, 36, clip(r0.value("date", "") + "  " + r0.value("device", ""), 170), kInk, 1);

  const int n = int(reports.size());
  // Left: elapsed per configuration.
  Panel L{80, 100, 440, 340};
  double emax = 0;
  for (const auto& r : reports) emax = std::max(emax, r["elapsed_s"]["max"].get<double>());
  emax = nice_max(emax * 1.1);
  axes(c, L, emax, "%.3g", "elapsed (s): median, min-max");
  const int slot = L.w / n, bw = std::max(8, std::min(70, slot * 3 / 5));
  for (int i = 0; i < n; ++i) {
    const auto& e = reports[i]["elapsed_s"];
    const double med = e["median"], lo = e["min"], hi = e["max"];
    auto ypix = [&](double v) { return L.y + L.h - int(std::lround(v / emax * L.h)); };
    const int cx = L.x + slot * i + slot / 2;
    c.fill_rect(cx - bw / 2, ypix(med), bw, L.y + L.h - ypix(med), kFull);
    c.vline(cx, ypix(hi), ypix(lo), kInk);
    c.hline(cx - 6, cx + 6, ypix(hi), kInk);
    c.hline(cx - 6, cx + 6, ypix(lo), kInk);
    const std::string v = fmt("%.3g s", med);
    c.text(cx - Canvas::text_width(v, 1) / 2, ypix(hi) - 12, v, kInk, 1);
    const std::string tps = fmt("%.4g tok/s", reports[i]["generated_tokens_per_s"].get<double>());
    const std::string label = clip(reports[i].value("label", "run"), size_t(std::max(4, slot / 6)));
    c.text(cx - Canvas::text_width(label, 1) / 2, L.y + L.h + 8, label, kInk, 1);
    c.text(cx - Canvas::text_width(tps, 1) / 2, L.y + L.h + 20, clip(tps, size_t(std::max(4, slot / 6))), kInk, 1);
  }

  // Right: roofline fraction per phase.
  Panel R{620, 100, 440, 340};
  double fmax = 0;
  for (const auto& r : reports)
    for (const char* ph : {"prefill", "decode"}) fmax = std::max(fmax, 100 * r["phases"][ph]["roofline_fraction"].get<double>());
  fmax = nice_max(std::max(fmax * 1.15, 1.0));
  axes(c, R, fmax, "%.4g%%", "roofline fraction per phase (%)");
  const int rslot = R.w / n, rbw = std::max(6, std::min(50, rslot * 2 / 5));
  for (int i = 0; i < n; ++i) {
    const int cx = R.x + rslot * i + rslot / 2;
    int k = 0;
    for (const char* ph : {"prefill", "decode"}) {
      const auto& p = reports[i]["phases"][ph];
      const double f = 100 * p["roofline_fraction"].get<double>();
      const int top = R.y + R.h - int(std::lround(std::min(f, fmax) / fmax * R.h));
      const int x0 = k == 0 ? cx - rbw - 2 : cx + 2;
      c.fill_rect(x0, top, rbw, R.y + R.h - top, k == 0 ? kPrefill : kDecode);
      const std::string v = fmt("%.3g%%", f);
      c.text(x0 + rbw / 2 - Canvas::text_width(v, 1) / 2, top - 22, v, kInk, 1);
      std::string b = p.value("bound", "") == "compute" ? "FLOP" : "mem";
      if (p.value("elapsed_uncertain", false)) b += "?";  // decode time within the run-to-run noise
      c.text(x0 + rbw / 2 - Canvas::text_width(b, 1) / 2, top - 11, b, kInk, 1);
      ++k;
    }
    const std::string label = clip(reports[i].value("label", "run"), size_t(std::max(4, rslot / 6)));
    c.text(cx - Canvas::text_width(label, 1) / 2, R.y + R.h + 8, label, kInk, 1);
  }
  // Legend.
  c.fill_rect(R.x, H - 70, 14, 14, kPrefill);
  c.text(R.x + 20, H - 69, "prefill", kInk, 2);
  c.fill_rect(R.x + 130, H - 70, 14, 14, kDecode);
  c.text(R.x + 150, H - 69, "decode", kInk, 2);
  c.text(R.x, H - 44, "mem/FLOP: bound by bytes or FLOPs at the ceiling; ?: time within run noise", kInk, 1);
  c.text(L.x, H - 44, clip("ceilings: " + fmt("%.3g GB/s, ", r0["ceilings"]["bytes_per_s"].get<double>() / 1e9) +
                               fmt("%.3g GFLOP/s", r0["ceilings"]["flops_per_s"].get<double>() / 1e9) + " (" +
                               r0.value("label", "") + ")", 85),
         kInk, 1);
  write_png(c, png);
}

}  // namespace g4c::bench

#include "passes/quant/awq.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "models/error.h"
#include "passes/quant/linalg.h"

namespace g4c::quant {

ActivationStats::ActivationStats(int64_t n) : gram_(n), abs_sum_(size_t(n), 0.0) {}

void ActivationStats::add(const float* X, int64_t rows, int64_t ld, int threads, const GramUpdate& gram) {
  if (rows <= 0) return;
  const int64_t n = gram_.n();
  gram_.add(X, rows, ld, threads, gram);  // checks ld ≥ n
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = X + r * ld;
    for (int64_t c = 0; c < n; ++c) abs_sum_[size_t(c)] += std::fabs(double(x[c]));
  }
}

std::vector<double> ActivationStats::mean_abs() const {
  std::vector<double> m(abs_sum_.size(), 0.0);
  if (rows() == 0) return m;
  for (size_t c = 0; c < m.size(); ++c) m[c] = abs_sum_[c] / double(rows());
  return m;
}

std::vector<float> awq_scales(std::span<const double> mean_abs, double alpha) {
  std::vector<double> s(mean_abs.size());
  double mx = 0.0, mn = HUGE_VAL;
  for (size_t c = 0; c < s.size(); ++c) {
    s[c] = std::pow(std::max(mean_abs[c], 1e-4), alpha);
    mx = std::max(mx, s[c]);
    mn = std::min(mn, s[c]);
  }
  const double norm = s.empty() ? 1.0 : std::sqrt(mx * mn);
  std::vector<float> out(s.size());
  for (size_t c = 0; c < s.size(); ++c) out[c] = float(s[c] / norm);
  return out;
}

namespace {

void check_shapes(std::span<const float* const> weights, std::span<const int64_t> outs, int64_t in,
                  std::span<const float> s, size_t gram_size) {
  if (weights.size() != outs.size() || weights.empty())
    throw Error("awq: " + std::to_string(weights.size()) + " weights but " + std::to_string(outs.size()) + " shapes");
  if (in <= 0 || int64_t(s.size()) != in)
    throw Error("awq: " + std::to_string(s.size()) + " scales for " + std::to_string(in) + " input channels");
  if (gram_size != size_t(in * in))
    throw Error("awq: the Gram matrix has " + std::to_string(gram_size) + " entries, expected " +
                std::to_string(in) + "²");
}

// E(s) with the Gram already in fp32: D = Q(W·diag(s))·diag(1/s) − W, T = D·G (fp32 GEMM),
// Σ T ⊙ D in float64.
double error_f32(std::span<const float* const> weights, std::span<const int64_t> outs, int64_t in,
                 std::span<const float> s, const std::vector<float>& G, const QuantSpec& spec, const ClipSearch& clip) {
  double e = 0.0;
  for (size_t k = 0; k < weights.size(); ++k) {
    const int64_t out = outs[k];
    std::vector<float> d(size_t(out * in));
    for (int64_t o = 0; o < out; ++o)
      for (int64_t c = 0; c < in; ++c) d[size_t(o * in + c)] = weights[k][o * in + c] * s[size_t(c)];
    const std::vector<float> q = quantize_rtn(d.data(), out, in, spec, clip).dequantized();
    for (int64_t o = 0; o < out; ++o)
      for (int64_t c = 0; c < in; ++c) {
        const size_t i = size_t(o * in + c);
        d[i] = q[i] / s[size_t(c)] - weights[k][o * in + c];
      }
    std::vector<float> t(d.size(), 0.f);
    sgemm_acc(out, in, in, d.data(), in, 1, G.data(), in, t.data(), in, 1);
    for (size_t i = 0; i < d.size(); ++i) e += double(t[i]) * double(d[i]);
  }
  return e;
}

std::vector<float> to_f32(const std::vector<double>& g) { return {g.begin(), g.end()}; }

}  // namespace

double awq_error(std::span<const float* const> weights, std::span<const int64_t> outs, int64_t in,
                 std::span<const float> s, const std::vector<double>& gram, const QuantSpec& spec,
                 const ClipSearch& clip) {
  check_shapes(weights, outs, in, s, gram.size());
  return error_f32(weights, outs, in, s, to_f32(gram), spec, clip);
}

AwqChoice awq_search(std::span<const float* const> weights, std::span<const int64_t> outs, int64_t in,
                     const ActivationStats& stats, const AwqOptions& opt) {
  if (opt.grid < 1) throw Error("awq: the α grid needs at least 1 step, got " + std::to_string(opt.grid));
  if (stats.n() != in)
    throw Error("awq: statistics of " + std::to_string(stats.n()) + " channels for Linears of " +
                std::to_string(in) + " inputs");
  if (stats.rows() == 0) throw Error("awq: no calibration rows were observed");
  const std::vector<double> m = stats.mean_abs();
  const std::vector<float> G = to_f32(stats.gram());
  check_shapes(weights, outs, in, awq_scales(m, 0.0), G.size());
  std::vector<double> err(size_t(opt.grid + 1));
  parallel_ranges(opt.grid + 1, opt.threads, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      err[size_t(i)] = error_f32(weights, outs, in, awq_scales(m, double(i) / opt.grid), G, opt.spec, opt.clip);
  });
  // The first (smallest α) of the least errors: no scaling wins ties.
  const size_t best = size_t(std::min_element(err.begin(), err.end()) - err.begin());
  AwqChoice c;
  c.alpha = double(best) / opt.grid;
  c.scales = awq_scales(m, c.alpha);
  c.error = err[best];
  c.error_unscaled = err[0];
  return c;
}

std::vector<float> fold_into_norm(std::span<float> w, std::span<const float> s,
                                  const std::function<float(float)>& round) {
  if (w.size() != s.size())
    throw Error("awq: " + std::to_string(s.size()) + " scales for a norm weight of " + std::to_string(w.size()));
  std::vector<float> t(w.size(), 1.f);
  for (size_t c = 0; c < w.size(); ++c) {
    if (!(s[c] > 0.f) || !std::isfinite(s[c])) throw Error("awq: scale " + std::to_string(c) + " is not positive");
    if (w[c] == 0.f) continue;  // the channel is zero whatever the Linears' column holds
    const float folded = round ? round(w[c] / s[c]) : w[c] / s[c];
    if (folded == 0.f || !std::isfinite(folded)) continue;  // keep w: no exact fold for this channel
    t[c] = w[c] / folded;
    w[c] = folded;
  }
  return t;
}

void scale_columns(std::span<float> W, int64_t out, int64_t in, std::span<const float> t) {
  if (int64_t(W.size()) != out * in || int64_t(t.size()) != in)
    throw Error("awq: column scales of " + std::to_string(t.size()) + " for a [" + std::to_string(out) + ", " +
                std::to_string(in) + "] weight");
  for (int64_t o = 0; o < out; ++o)
    for (int64_t c = 0; c < in; ++c) W[size_t(o * in + c)] *= t[size_t(c)];
}

void divide_rows(std::span<float> W, int64_t out, int64_t in, std::span<const float> s) {
  if (int64_t(W.size()) != out * in || int64_t(s.size()) != out)
    throw Error("awq: row scales of " + std::to_string(s.size()) + " for a [" + std::to_string(out) + ", " +
                std::to_string(in) + "] weight");
  for (int64_t o = 0; o < out; ++o)
    for (int64_t c = 0; c < in; ++c) W[size_t(o * in + c)] /= s[size_t(o)];
}

std::vector<AwqSiteReport> awq_layer(CalibrationExecutor& exec, int layer, const std::vector<AwqSite>& sites,
                                     const AwqDriverOptions& opt) {
  const std::string where = "awq: layer " + std::to_string(layer) + " ";
  // Statistics of every observed input, by the group's first Linear; each Linear → its group.
  std::map<std::string, std::unique_ptr<ActivationStats>> stats;
  std::map<std::string, std::vector<std::string>> group_of;
  exec.run_layer(
      layer,
      [&](const std::vector<std::string>& names, const float* x, int64_t rows, int64_t in) {
        if (names.empty()) return;
        auto& st = stats[names.front()];
        if (!st) st = std::make_unique<ActivationStats>(in);
        if (st->n() != in)
          throw Error(where + names.front() + " input width changed from " + std::to_string(st->n()) + " to " +
                      std::to_string(in));
        st->add(x, rows, in, opt.threads, opt.gram);
        for (const std::string& n : names) group_of[n] = names;
      },
      /*advance=*/true);
  std::map<std::string, int64_t> outs;
  for (const LinearInfo& li : exec.linears(layer)) outs[li.name] = li.out;
  std::vector<AwqSiteReport> reports;
  for (const AwqSite& site : sites) {
    if (site.linears.empty()) throw Error(where + "fold site of " + site.producer + " has no Linears");
    auto g = group_of.find(site.linears.front());
    if (g == group_of.end()) throw Error(where + site.linears.front() + " saw no calibration input");
    const std::set<std::string> want(site.linears.begin(), site.linears.end()), have(g->second.begin(), g->second.end());
    if (want != have) {
      std::string list;
      for (const auto& n : g->second) list += (list.empty() ? "" : ", ") + n;
      throw Error(where + "the Linears reading " + site.producer + "'s output in the graph are not those the " +
                  "executor reports reading one input (" + list + ")");
    }
    const ActivationStats& st = *stats.at(g->second.front());
    const int64_t in = st.n();
    std::vector<std::vector<float>> w;
    std::vector<const float*> ptrs;
    std::vector<int64_t> shape;
    for (const std::string& n : site.linears) {
      if (!outs.count(n)) throw Error(where + "has no Linear " + n + " in the executor");
      w.push_back(exec.weight(layer, n));
      shape.push_back(outs[n]);
      if (int64_t(w.back().size()) != shape.back() * in)
        throw Error(where + n + " has " + std::to_string(w.back().size()) + " weights, expected " +
                    std::to_string(shape.back()) + " × " + std::to_string(in));
      ptrs.push_back(w.back().data());
    }
    const AwqChoice c = awq_search(ptrs, shape, in, st, opt.awq);
    // The producer first: its fold decides the column scale t (a norm's storage rounding).
    std::vector<float> p = exec.weight(layer, site.producer), t;
    if (site.producer_is_linear) {
      if (int64_t(p.size()) % in != 0)
        throw Error(where + site.producer + " (" + std::to_string(p.size()) + " weights) does not produce " +
                    std::to_string(in) + " channels");
      divide_rows(p, in, int64_t(p.size()) / in, c.scales);
      t = c.scales;
    } else {
      t = fold_into_norm(p, c.scales, site.round);
    }
    exec.set_weight(layer, site.producer, p);
    if (opt.on_tensor) opt.on_tensor(layer, site.producer, p);
    for (size_t k = 0; k < w.size(); ++k) {
      scale_columns(w[k], shape[k], in, t);
      exec.set_weight(layer, site.linears[k], w[k]);
      if (opt.on_tensor) opt.on_tensor(layer, site.linears[k], w[k]);
    }
    AwqSiteReport r{layer, site.producer, site.linears, in, st.rows(), c.alpha, c.error, c.error_unscaled};
    r.max_scale = *std::max_element(t.begin(), t.end());
    r.min_scale = *std::min_element(t.begin(), t.end());
    if (opt.on_site) opt.on_site(r);
    reports.push_back(std::move(r));
  }
  return reports;
}

}  // namespace g4c::quant

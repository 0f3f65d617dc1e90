#include "passes/quant/quantease.h"

#include <algorithm>
#include <string>
#include <vector>

#include "models/error.h"
#include "passes/quant/linalg.h"

namespace g4c::quant {

QuantEaseStats quantease_refine(const float* W, int64_t out, int64_t in, const PreparedHessian& P, int sweeps,
                                int threads, QuantizedLinear& q) {
  const int64_t n = in, G = q.group_size;
  if (P.n != n || int64_t(P.h.size()) != n * n)
    throw Error("quantease: needs the damped Hessian of the Linear's " + std::to_string(n) +
                " inputs (prepare_hessian with keep_hessian)");
  if (q.out != out || q.in != in) throw Error("quantease: quantized Linear does not match the weights");
  const std::vector<double>& H = P.h;  // permuted: H[i·n + k] is columns perm[i], perm[k]
  const std::vector<int64_t>& perm = P.perm;
  std::vector<double> before(static_cast<size_t>(out), 0.0), after(static_cast<size_t>(out), 0.0);
  std::vector<int64_t> changed(static_cast<size_t>(out), 0);
  std::vector<int> ran(static_cast<size_t>(out), 0);
  auto refine_rows = [&](int64_t o0, int64_t o1) {
    std::vector<double> e(static_cast<size_t>(n)), r(static_cast<size_t>(n));
    for (int64_t o = o0; o < o1; ++o) {
      // e = w − ŵ and R = e·H, both in the visiting order.
      for (int64_t i = 0; i < n; ++i) {
        const int64_t col = perm[i];
        const double w = P.dead[col] ? 0.0 : double(W[o * n + col]);
        e[i] = w - double(q.dequant(o, col));
      }
      std::fill(r.begin(), r.end(), 0.0);
      for (int64_t k = 0; k < n; ++k) {
        if (e[k] == 0.0) continue;
        const double* hk = H.data() + k * n;
        for (int64_t i = 0; i < n; ++i) r[i] += e[k] * hk[i];
      }
      double obj = 0.0;
      for (int64_t i = 0; i < n; ++i) obj += e[i] * r[i];
      before[o] = obj / 2.0;
      for (int s = 0; s < sweeps; ++s) {
        int64_t ch = 0;
        for (int64_t i = 0; i < n; ++i) {
          const int64_t col = perm[i];
          if (P.dead[col]) continue;
          const double hjj = H[i * n + i];
          const GroupParams p = q.params(o, col / G);
          uint8_t& code = q.codes[o * q.padded_in + col];
          const double cur = double(dequantize_code(code, p));
          const int nc = quantize_code(float(cur + r[i] / hjj), p);
          if (nc == code) continue;
          const double delta = double(dequantize_code(nc, p)) - cur;
          if (!(-2.0 * delta * r[i] + delta * delta * hjj < 0.0)) continue;
          code = uint8_t(nc);
          e[i] -= delta;
          const double* hi = H.data() + i * n;
          for (int64_t k = 0; k < n; ++k) r[k] -= delta * hi[k];
          ++ch;
        }
        ran[o] = s + 1;
        changed[o] += ch;
        if (ch == 0) break;
      }
      obj = 0.0;
      for (int64_t i = 0; i < n; ++i) obj += e[i] * r[i];
      after[o] = obj / 2.0;
    }
  };
  parallel_ranges(out, int(std::clamp<int64_t>(threads, 1, std::max<int64_t>(1, out / 16))), 1, refine_rows);
  QuantEaseStats st;
  for (int64_t o = 0; o < out; ++o) {
    st.before += before[o];
    st.after += after[o];
    st.changed += changed[o];
    st.sweeps = std::max(st.sweeps, ran[o]);
  }
  // Each accepted move lowers its row's objective; the sums may differ from that only by rounding.
  if (st.after > st.before * (1.0 + 1e-9) + 1e-12)
    throw Error("quantease: objective rose from " + std::to_string(st.before) + " to " + std::to_string(st.after));
  return st;
}

}  // namespace g4c::quant

#include "passes/quant/quantizer.h"

#include <algorithm>
#include <cmath>

#include "models/dtype.h"
#include "models/error.h"
#include "passes/quant/linalg.h"

namespace g4c::quant {

namespace {

template <class T>
void range_of(const T* w, int64_t n, int64_t stride, float& amax, float& mn, float& mx) {
  amax = mn = mx = 0.f;  // the asymmetric range always includes 0
  for (int64_t k = 0; k < n; ++k) {
    const float v = float(w[k * stride]);
    amax = std::max(amax, std::fabs(v));
    mn = std::min(mn, v);
    mx = std::max(mx, v);
  }
}

template <class T>
double sq_error(const T* w, int64_t n, int64_t stride, const GroupParams& p) {
  double e = 0.0;
  for (int64_t k = 0; k < n; ++k) {
    const float v = float(w[k * stride]);
    const float deq = dequantize_code(quantize_code(v, p), p);
    const double d = double(v) - double(deq);
    e += d * d;
  }
  return e;
}

template <class T>
GroupParams group_params_impl(const T* w, int64_t n, int64_t stride, bool symmetric, const ClipSearch& clip) {
  float amax, mn, mx;
  range_of(w, n, stride, amax, mn, mx);
  GroupParams best = params_from_range(amax, mn, mx, symmetric);
  if (!clip.enabled()) return best;
  double best_err = sq_error(w, n, stride, best);
  for (int i = 1; i < clip.steps; ++i) {
    const float p = clip_shrink(clip, i);
    const GroupParams c = params_from_range(amax * p, mn * p, mx * p, symmetric);
    const double e = sq_error(w, n, stride, c);
    if (e < best_err) {
      best_err = e;
      best = c;
    }
  }
  return best;
}

}  // namespace

GroupParams params_from_range(float amax, float mn, float mx, bool symmetric) {
  GroupParams p;
  if (symmetric) {
    float s = std::max(amax, 1e-8f) / 7.0f;
    p.scale = f16_to_f32(f32_to_f16(s));
    p.zero = 8;
  } else {
    float s = std::max((mx - mn) / 15.0f, 1e-8f);
    float z = __builtin_nearbyintf(-mn / s);
    p.scale = f16_to_f32(f32_to_f16(s));
    p.zero = int(std::clamp(z, 0.f, 15.f));
  }
  return p;
}

GroupParams group_params(const float* w, int64_t n, int64_t stride, bool symmetric, const ClipSearch& clip) {
  return group_params_impl(w, n, stride, symmetric, clip);
}
GroupParams group_params(const double* w, int64_t n, int64_t stride, bool symmetric, const ClipSearch& clip) {
  return group_params_impl(w, n, stride, symmetric, clip);
}
double group_sq_error(const float* w, int64_t n, int64_t stride, const GroupParams& p) {
  return sq_error(w, n, stride, p);
}

GroupParams group_params(const float* w, int64_t n, int64_t stride, bool symmetric) {
  return group_params_impl(w, n, stride, symmetric, {});
}
GroupParams group_params(const double* w, int64_t n, int64_t stride, bool symmetric) {
  return group_params_impl(w, n, stride, symmetric, {});
}

int64_t padded_in_features(int64_t in, int group_size) {
  if (group_size <= 0 || group_size % 2) throw Error("quantize: group size must be positive and even, got " + std::to_string(group_size));
  return (in + group_size - 1) / group_size * group_size;
}

std::vector<float> QuantizedLinear::dequantized(int threads) const {
  std::vector<float> w(static_cast<size_t>(out * in));
  dequantize_into(w, threads);
  return w;
}

void QuantizedLinear::dequantize_into(std::span<float> w, int threads) const {
  if (w.size() != size_t(out * in))
    throw Error("dequantize: " + std::to_string(out) + "×" + std::to_string(in) + " values into an array of " +
                std::to_string(w.size()));
  const int64_t nt = std::clamp<int64_t>(threads, 1, std::max<int64_t>(1, out * in >> 20));  // ≥ 1M values each
  parallel_ranges(out, int(nt), 1, [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o)
      for (int64_t i = 0; i < in; ++i) w[o * in + i] = dequant(o, i);
  });
}

QuantizedLinear quantize_rtn(const float* W, int64_t out, int64_t in, const QuantSpec& spec, const ClipSearch& clip) {
  QuantizedLinear q;
  q.out = out;
  q.in = in;
  q.group_size = spec.group_size;
  q.symmetric = spec.symmetric;
  q.padded_in = padded_in_features(in, spec.group_size);
  const int64_t G = spec.group_size, ng = q.groups();
  q.codes.assign(size_t(out * q.padded_in), 0);
  q.scales.assign(size_t(out * ng), 0.f);
  q.zeros.assign(size_t(out * ng), 0);
  for (int64_t o = 0; o < out; ++o) {
    const float* row = W + o * in;
    for (int64_t g = 0; g < ng; ++g) {
      int64_t c0 = g * G, n = std::min<int64_t>(G, in - c0);
      GroupParams p = group_params(row + c0, n, 1, spec.symmetric, clip);
      q.scales[o * ng + g] = p.scale;
      q.zeros[o * ng + g] = uint8_t(p.zero);
      uint8_t* codes = q.codes.data() + o * q.padded_in + c0;
      for (int64_t k = 0; k < G; ++k) codes[k] = uint8_t(k < n ? quantize_code(row[c0 + k], p) : p.zero);
    }
  }
  return q;
}

}  // namespace g4c::quant

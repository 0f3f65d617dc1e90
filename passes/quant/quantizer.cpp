#include "passes/quant/quantizer.h"

#include <algorithm>
#include <cmath>

#include "models/dtype.h"
#include "models/error.h"

namespace g4c::quant {

namespace {

template <class T>
GroupParams group_params_impl(const T* w, int64_t n, int64_t stride, bool symmetric) {
  GroupParams p;
  if (symmetric) {
    float amax = 0.f;
    for (int64_t k = 0; k < n; ++k) amax = std::max(amax, std::fabs(float(w[k * stride])));
    float s = std::max(amax, 1e-8f) / 7.0f;
    p.scale = f16_to_f32(f32_to_f16(s));
    p.zero = 8;
  } else {
    float mn = 0.f, mx = 0.f;  // the range always includes 0
    for (int64_t k = 0; k < n; ++k) {
      float v = float(w[k * stride]);
      mn = std::min(mn, v);
      mx = std::max(mx, v);
    }
    float s = std::max((mx - mn) / 15.0f, 1e-8f);
    float z = __builtin_nearbyintf(-mn / s);
    p.scale = f16_to_f32(f32_to_f16(s));
    p.zero = int(std::clamp(z, 0.f, 15.f));
  }
  return p;
}

}  // namespace

GroupParams group_params(const float* w, int64_t n, int64_t stride, bool symmetric) {
  return group_params_impl(w, n, stride, symmetric);
}
GroupParams group_params(const double* w, int64_t n, int64_t stride, bool symmetric) {
  return group_params_impl(w, n, stride, symmetric);
}

int64_t padded_in_features(int64_t in, int group_size) {
  if (group_size <= 0 || group_size % 2) throw Error("quantize: group size must be positive and even, got " + std::to_string(group_size));
  return (in + group_size - 1) / group_size * group_size;
}

std::vector<float> QuantizedLinear::dequantized() const {
  std::vector<float> w(static_cast<size_t>(out * in));
  for (int64_t o = 0; o < out; ++o)
    for (int64_t i = 0; i < in; ++i) w[o * in + i] = dequant(o, i);
  return w;
}

QuantizedLinear quantize_rtn(const float* W, int64_t out, int64_t in, const QuantSpec& spec) {
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
      GroupParams p = group_params(row + c0, n, 1, spec.symmetric);
      q.scales[o * ng + g] = p.scale;
      q.zeros[o * ng + g] = uint8_t(p.zero);
      uint8_t* codes = q.codes.data() + o * q.padded_in + c0;
      for (int64_t k = 0; k < G; ++k) codes[k] = uint8_t(k < n ? quantize_code(row[c0 + k], p) : p.zero);
    }
  }
  return q;
}

}  // namespace g4c::quant

#include "models/int4.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "models/error.h"

namespace g4c::models::int4 {

namespace {

void check_params(const Params& p, const char* what) {
  if (p.group_size <= 0 || p.group_size % 2)
    throw Error(std::string(what) + ": group size " + std::to_string(p.group_size) + " must be even and positive");
  if (p.scale_dtype != DType::F16 && p.scale_dtype != DType::BF16)
    throw Error(std::string(what) + ": scale dtype must be F16 or BF16, got " + std::string(dtype_name(p.scale_dtype)));
}

uint16_t store_scale(float s, DType t) { return t == DType::F16 ? f32_to_f16(s) : f32_to_bf16(s); }
float load_scale(uint16_t b, DType t) { return t == DType::F16 ? f16_to_f32(b) : bf16_to_f32(b); }

}  // namespace

std::vector<uint8_t> pack_codes(std::span<const uint8_t> codes, int64_t rows, int64_t cols) {
  if (cols % 2 || int64_t(codes.size()) != rows * cols)
    throw Error("int4 pack: need an even column count and rows*cols codes");
  std::vector<uint8_t> out(size_t(rows * cols / 2));
  for (size_t j = 0; j < out.size(); ++j) {
    uint8_t lo = codes[2 * j], hi = codes[2 * j + 1];
    if (lo > 15 || hi > 15) throw Error("int4 pack: code " + std::to_string(std::max(lo, hi)) + " is not 4-bit");
    out[j] = uint8_t(lo | (hi << 4));
  }
  return out;
}

std::vector<uint8_t> unpack_codes(std::span<const uint8_t> packed, int64_t rows, int64_t cols) {
  if (cols % 2 || int64_t(packed.size()) * 2 != rows * cols)
    throw Error("int4 unpack: need an even column count and rows*cols/2 bytes");
  std::vector<uint8_t> out(size_t(rows * cols));
  for (size_t j = 0; j < packed.size(); ++j) {
    out[2 * j] = packed[j] & 0x0f;
    out[2 * j + 1] = packed[j] >> 4;
  }
  return out;
}

GroupQuant group_quant(const float* w, int64_t n, bool symmetric, DType scale_dtype) {
  GroupQuant g;
  if (symmetric) {
    float amax = 0.0f;
    for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(w[i]));
    g.zero = 8;
    g.scale = load_scale(store_scale(amax / 7.0f, scale_dtype), scale_dtype);
    return g;
  }
  float lo = 0.0f, hi = 0.0f;  // range includes 0 so that z lies in [0, 15]
  for (int64_t i = 0; i < n; ++i) {
    lo = std::min(lo, w[i]);
    hi = std::max(hi, w[i]);
  }
  g.scale = load_scale(store_scale((hi - lo) / 15.0f, scale_dtype), scale_dtype);
  g.zero = g.scale > 0 ? int(std::clamp(std::nearbyint(-lo / g.scale), 0.0f, 15.0f)) : 0;
  return g;
}

int quantize_value(float w, const GroupQuant& g) {
  if (!(g.scale > 0)) return g.zero;
  float q = std::nearbyint(w / g.scale) + float(g.zero);
  return int(std::clamp(q, 0.0f, 15.0f));
}

float QuantizedLinear::scale(int64_t row, int64_t group) const {
  return load_scale(scales[size_t(row * groups() + group)], params.scale_dtype);
}

QuantizedLinear quantize_rtn(std::span<const float> w, int64_t out, int64_t in, const Params& p) {
  check_params(p, "int4 quantize");
  if (out <= 0 || in <= 0 || int64_t(w.size()) != out * in)
    throw Error("int4 quantize: weight has " + std::to_string(w.size()) + " values, expected " + std::to_string(out) +
                " x " + std::to_string(in));
  QuantizedLinear q;
  q.out = out;
  q.in = in;
  q.params = p;
  q.padded_in = padded_in(in, p.group_size);
  const int64_t G = p.group_size, ng = q.groups();
  q.qweight.assign(size_t(out * q.padded_in / 2), 0);
  q.scales.assign(size_t(out * ng), 0);
  if (!p.symmetric) q.zeros.assign(size_t(out * ng), 0);
  std::vector<float> group(static_cast<size_t>(G));
  for (int64_t r = 0; r < out; ++r) {
    const float* row = w.data() + r * in;
    uint8_t* qrow = q.qweight.data() + r * q.padded_in / 2;
    for (int64_t gi = 0; gi < ng; ++gi) {
      const int64_t c0 = gi * G, n = std::min(G, in - c0);
      for (int64_t i = 0; i < n; ++i) {
        if (!std::isfinite(row[c0 + i]))
          throw Error("int4 quantize: non-finite weight at [" + std::to_string(r) + ", " + std::to_string(c0 + i) + "]");
        group[size_t(i)] = row[c0 + i];
      }
      for (int64_t i = n; i < G; ++i) group[size_t(i)] = 0.0f;  // padding columns are zero weights
      GroupQuant g = group_quant(group.data(), G, p.symmetric, p.scale_dtype);
      q.scales[size_t(r * ng + gi)] = store_scale(g.scale, p.scale_dtype);
      if (!p.symmetric) q.zeros[size_t(r * ng + gi)] = uint8_t(g.zero);
      for (int64_t i = 0; i < G; ++i) {
        int64_t c = c0 + i;
        uint8_t code = uint8_t(quantize_value(group[size_t(i)], g));
        qrow[c / 2] |= uint8_t(c % 2 ? code << 4 : code);
      }
    }
  }
  return q;
}

std::vector<float> dequantize(std::span<const uint8_t> qweight, std::span<const uint16_t> scales,
                              std::span<const uint8_t> zeros, int64_t out, int64_t in, const Params& p) {
  check_params(p, "int4 dequantize");
  const int64_t pin = padded_in(in, p.group_size), ng = pin / p.group_size;
  if (int64_t(qweight.size()) != out * pin / 2 || int64_t(scales.size()) != out * ng ||
      (!p.symmetric && int64_t(zeros.size()) != out * ng))
    throw Error("int4 dequantize: qweight/scales/zeros sizes do not match [" + std::to_string(out) + ", " +
                std::to_string(in) + "] with group size " + std::to_string(p.group_size));
  std::vector<float> w(size_t(out * in));
  for (int64_t r = 0; r < out; ++r)
    for (int64_t c = 0; c < in; ++c) {
      uint8_t byte = qweight[size_t(r * pin / 2 + c / 2)];
      int code = c % 2 ? byte >> 4 : byte & 0x0f;
      int64_t gi = r * ng + c / p.group_size;
      GroupQuant g{load_scale(scales[size_t(gi)], p.scale_dtype), p.symmetric ? 8 : int(zeros[size_t(gi)])};
      w[size_t(r * in + c)] = dequantize_value(code, g);
    }
  return w;
}

std::vector<float> dequantize(const QuantizedLinear& q) {
  return dequantize(q.qweight, q.scales, q.zeros, q.out, q.in, q.params);
}

}  // namespace g4c::models::int4

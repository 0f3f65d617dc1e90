#include "models/manifest.h"
#include "models/json_file.h"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "models/error.h"

namespace g4c::models {

using nlohmann::json;
namespace fs = std::filesystem;

QuantModule QuantModule::make(const std::string& name, int64_t out, int64_t in, const int4::Params& p) {
  QuantModule m;
  m.name = name;
  m.qweight_key = name + ".qweight";
  m.scales_key = name + ".scales";
  if (!p.symmetric) m.zeros_key = name + ".zeros";
  m.out = out;
  m.in = in;
  m.padded_in = int4::padded_in(in, p.group_size);
  m.group_size = p.group_size;
  m.symmetric = p.symmetric;
  m.scale_dtype = p.scale_dtype;
  return m;
}

const QuantModule* Manifest::find(const std::string& name) const {
  auto it = modules.find(name);
  return it == modules.end() ? nullptr : &it->second;
}

json manifest_to_json(const Manifest& m) {
  json mods = json::object();
  for (const auto& [name, q] : m.modules) {
    json e;
    e["qweight_key"] = q.qweight_key;
    e["scales_key"] = q.scales_key;
    e["zeros_key"] = q.symmetric ? json(nullptr) : json(q.zeros_key);
    e["shape"] = {q.out, q.in};
    e["out_features"] = q.out;
    e["in_features"] = q.in;
    e["padded_in_features"] = q.padded_in;
    e["qweight_shape"] = {q.out, q.padded_in / 2};
    e["scales_shape"] = {q.out, q.groups()};
    e["zeros_shape"] = q.symmetric ? json(nullptr) : json{q.out, q.groups()};
    e["bits"] = q.bits;
    e["group_size"] = q.group_size;
    e["symmetric"] = q.symmetric;
    e["scale_dtype"] = std::string(dtype_name(q.scale_dtype));
    e["packing"] = q.packing;
    mods[name] = e;
  }
  return json{{"format_version", m.format_version},
              {"method", {{"name", m.method_name}, {"version", m.method_version}}},
              {"modules", mods}};
}

Manifest parse_manifest(const json& j, const std::string& file) {
  auto fail = [&](const std::string& field, const std::string& what) {
    return Error(file + ": field '" + field + "' " + what);
  };
  if (!j.is_object()) throw Error(file + ": manifest must be a JSON object");
  Manifest m;
  if (!j.contains("format_version") || !j["format_version"].is_number_integer())
    throw fail("format_version", "is missing or not an integer");
  m.format_version = j["format_version"].get<int>();
  if (m.format_version != 1) throw fail("format_version", "is " + std::to_string(m.format_version) + ", only 1 is supported");
  if (!j.contains("method") || !j["method"].is_object()) throw fail("method", "is missing or not an object");
  const json& method = j["method"];
  if (!method.contains("name") || !method["name"].is_string()) throw fail("method.name", "is missing or not a string");
  m.method_name = method["name"].get<std::string>();
  if (method.contains("version")) {
    const json& v = method["version"];
    m.method_version = v.is_string() ? v.get<std::string>() : v.dump();
  }
  if (!j.contains("modules") || !(j["modules"].is_object() || j["modules"].is_array()))
    throw fail("modules", "is missing or not an object");
  auto parse_module = [&](const std::string& name, const json& e) {
    const std::string w = "modules." + name + ".";
    if (!e.is_object()) throw fail(w.substr(0, w.size() - 1), "is not an object");
    auto str = [&](const char* k) {
      if (!e.contains(k) || !e[k].is_string()) throw fail(w + k, "is missing or not a string");
      return e[k].get<std::string>();
    };
    auto integer = [&](const char* k) {
      if (!e.contains(k) || !e[k].is_number_integer() || e[k].get<int64_t>() <= 0)
        throw fail(w + k, "is missing or not a positive integer");
      return e[k].get<int64_t>();
    };
    QuantModule q;
    q.name = name;
    q.qweight_key = str("qweight_key");
    q.scales_key = str("scales_key");
    if (!e.contains("symmetric") || !e["symmetric"].is_boolean()) throw fail(w + "symmetric", "is missing or not a boolean");
    q.symmetric = e["symmetric"].get<bool>();
    if (!q.symmetric) q.zeros_key = str("zeros_key");
    q.bits = int(integer("bits"));
    if (q.bits != 4) throw fail(w + "bits", "is " + std::to_string(q.bits) + ", only 4 is supported");
    q.group_size = int(integer("group_size"));
    if (q.group_size % 2) throw fail(w + "group_size", "must be even");
    if (e.contains("shape")) {
      const json& s = e["shape"];
      if (!s.is_array() || s.size() != 2 || !s[0].is_number_integer() || !s[1].is_number_integer() ||
          s[0].get<int64_t>() <= 0 || s[1].get<int64_t>() <= 0)
        throw fail(w + "shape", "must be [out, in] with positive integers");
      q.out = s[0].get<int64_t>();
      q.in = s[1].get<int64_t>();
    } else {
      q.out = integer("out_features");
      q.in = integer("in_features");
    }
    // Bounded so padded_in and the byte sizes below stay far from int64 overflow.
    if (q.out > (int64_t(1) << 31) || q.in > (int64_t(1) << 31) || q.group_size > (1 << 30))
      throw fail(w + "shape", "is larger than 2^31 in a dimension (or group_size above 2^30)");
    q.padded_in = int4::padded_in(q.in, q.group_size);
    // The redundant fields, when present, must say what the shape implies: a manifest that
    // disagrees with itself is corrupt, and the tensors are checked against the implied shapes.
    auto agree = [&](const char* k, const std::vector<int64_t>& want) {
      if (!e.contains(k) || e[k].is_null()) return;
      const json& v = e[k];
      bool ok = v.is_array() && v.size() == want.size();
      for (size_t i = 0; ok && i < want.size(); ++i) ok = v[i].is_number_integer() && v[i].get<int64_t>() == want[i];
      if (!ok) {
        std::string ws = "[";
        for (size_t i = 0; i < want.size(); ++i) ws += (i ? ", " : "") + std::to_string(want[i]);
        throw fail(w + k, "is " + v.dump() + " but shape [" + std::to_string(q.out) + ", " + std::to_string(q.in) +
                              "] with group_size " + std::to_string(q.group_size) + " implies " + ws + "]");
      }
    };
    auto agree_int = [&](const char* k, int64_t want) {
      if (!e.contains(k) || e[k].is_null()) return;
      if (!e[k].is_number_integer() || e[k].get<int64_t>() != want)
        throw fail(w + k, "is " + e[k].dump() + " but the shape implies " + std::to_string(want));
    };
    agree_int("out_features", q.out);
    agree_int("in_features", q.in);
    agree_int("padded_in_features", q.padded_in);
    agree("qweight_shape", {q.out, q.padded_in / 2});
    agree("scales_shape", {q.out, q.padded_in / q.group_size});
    if (!q.symmetric) agree("zeros_shape", {q.out, q.padded_in / q.group_size});
    q.packing = e.contains("packing") ? str("packing") : "uint8_little_nibble";
    if (q.packing != "uint8_little_nibble")
      throw fail(w + "packing", "is '" + q.packing + "', only uint8_little_nibble is supported");
    std::string sd = e.contains("scale_dtype") ? str("scale_dtype") : "F16";
    if (!parse_dtype(sd, &q.scale_dtype) || (q.scale_dtype != DType::F16 && q.scale_dtype != DType::BF16))
      throw fail(w + "scale_dtype", "is '" + sd + "', expected F16 or BF16");
    m.modules[name] = q;
  };
  const json& mods = j["modules"];
  if (mods.is_object()) {
    for (auto it = mods.begin(); it != mods.end(); ++it) parse_module(it.key(), it.value());
  } else {
    for (const json& e : mods) {
      if (!e.is_object() || !e.contains("name") || !e["name"].is_string()) throw fail("modules[]", "entry has no name");
      parse_module(e["name"].get<std::string>(), e);
    }
  }
  return m;
}

Manifest read_manifest(const fs::path& path) {
  return parse_manifest(read_json_file(path), path.string());
}

void write_manifest(const Manifest& m, const fs::path& path) {
  std::ofstream out(path, std::ios::trunc);
  out << manifest_to_json(m).dump(2) << "\n";
  if (!out) throw Error(path.string() + ": write failed");
}

json quantization_config_json(const Manifest& m) {
  int g = 0;
  bool sym = true;
  std::string sd = "F16";
  if (!m.modules.empty()) {
    const QuantModule& q = m.modules.begin()->second;
    g = q.group_size;
    sym = q.symmetric;
    sd = std::string(dtype_name(q.scale_dtype));
  }
  return json{{"quant_method", "g4c_int4"}, {"method", m.method_name}, {"method_version", m.method_version},
              {"bits", 4}, {"group_size", g}, {"sym", sym}, {"scale_dtype", sd},
              {"packing", "uint8_little_nibble"}, {"manifest", "manifest.json"},
              {"num_quantized_modules", m.modules.size()}};
}

std::unique_ptr<Int4Checkpoint> Int4Checkpoint::open(const fs::path& dir, bool header_only) {
  std::unique_ptr<Int4Checkpoint> c(new Int4Checkpoint());
  const fs::path mpath = dir / "manifest.json";
  c->manifest_ = read_manifest(mpath);
  c->ck_ = Checkpoint::open(dir, header_only);
  auto check = [&](const QuantModule& q, const std::string& key, DType dtype, std::vector<int64_t> shape) {
    if (!c->ck_->has(key))
      throw Error(mpath.string() + ": module '" + q.name + "' names tensor '" + key + "', which is not in " + dir.string());
    const TensorInfo& t = c->ck_->info(key);
    if (t.dtype != dtype || t.shape != shape) {
      auto str = [](const std::vector<int64_t>& s) {
        std::string o = "[";
        for (size_t i = 0; i < s.size(); ++i) o += (i ? ", " : "") + std::to_string(s[i]);
        return o + "]";
      };
      throw Error(t.file + ": tensor '" + key + "' is " + std::string(dtype_name(t.dtype)) + " " + str(t.shape) +
                  " but manifest.json expects " + std::string(dtype_name(dtype)) + " " + str(shape));
    }
  };
  for (const auto& [name, q] : c->manifest_.modules) {
    check(q, q.qweight_key, DType::U8, {q.out, q.padded_in / 2});
    check(q, q.scales_key, q.scale_dtype, {q.out, q.groups()});
    if (!q.symmetric) check(q, q.zeros_key, DType::U8, {q.out, q.groups()});
  }
  return c;
}

Int4Checkpoint::LinearParts Int4Checkpoint::linear(const std::string& name) const {
  const QuantModule* q = manifest_.find(name);
  if (!q) throw Error(ck_->dir().string() + ": manifest.json has no quantized module '" + name + "'");
  LinearParts p;
  p.module = q;
  p.qweight = ck_->get(q->qweight_key);
  p.scales = ck_->get(q->scales_key);
  if (!q->symmetric) p.zeros = ck_->get(q->zeros_key);
  return p;
}

std::vector<float> Int4Checkpoint::dequantized(const std::string& name) const {
  LinearParts p = linear(name);
  const QuantModule& q = *p.module;
  std::span<const uint8_t> zeros;
  if (!q.symmetric) zeros = p.zeros.bytes();
  return int4::dequantize(p.qweight.bytes(), {p.scales.as<uint16_t>(), size_t(q.out * q.groups())}, zeros, q.out,
                          q.in, q.params());
}

}  // namespace g4c::models

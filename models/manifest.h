// The lab's INT4 checkpoint manifest (DESIGN.md §3): manifest.json next to the
// safetensors shards, plus quantization_config.json, and a helper that opens an
// INT4 checkpoint directory and finds a Linear's qweight/scales/zeros.
//
// manifest.json:
//   {"format_version": 1, "method": {"name": "rtn", "version": "1"},
//    "modules": {"layers.0.self_attn.q_proj": {
//        "qweight_key": "layers.0.self_attn.q_proj.qweight", "scales_key": "...scales",
//        "zeros_key": "...zeros" | null, "shape": [out, in], "in_features", "out_features",
//        "padded_in_features", "qweight_shape", "scales_shape", "zeros_shape" | null,
//        "bits": 4, "group_size": 128, "symmetric": true, "scale_dtype": "F16",
//        "packing": "uint8_little_nibble"}, ...}}
// Keys carry no "model." / "model.language_model." prefix.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "models/dtype.h"
#include "models/int4.h"
#include "models/safetensors.h"

namespace g4c::models {

struct QuantModule {
  std::string name;  // "layers.0.self_attn.q_proj"
  std::string qweight_key, scales_key, zeros_key;  // zeros_key empty when symmetric
  int64_t out = 0, in = 0, padded_in = 0;
  int bits = 4;
  int group_size = 128;
  bool symmetric = true;
  DType scale_dtype = DType::F16;
  std::string packing = "uint8_little_nibble";
  int64_t groups() const { return padded_in / group_size; }
  int4::Params params() const { return {group_size, symmetric, scale_dtype}; }
  // A module for Linear `name` [out, in] with the standard key names.
  static QuantModule make(const std::string& name, int64_t out, int64_t in, const int4::Params& p);
};

struct Manifest {
  int format_version = 1;
  std::string method_name = "rtn";
  std::string method_version = "1";
  std::map<std::string, QuantModule> modules;  // by module name
  const QuantModule* find(const std::string& name) const;
  void add(QuantModule m) { modules[m.name] = std::move(m); }
};

// Throws g4c::Error naming the file and the field.
Manifest parse_manifest(const nlohmann::json& j, const std::string& file);
Manifest read_manifest(const std::filesystem::path& path);
nlohmann::json manifest_to_json(const Manifest& m);
void write_manifest(const Manifest& m, const std::filesystem::path& path);
// quantization_config.json (a description for other tools; g4c reads manifest.json).
nlohmann::json quantization_config_json(const Manifest& m);

// An INT4 checkpoint directory: manifest.json + safetensors shards.
class Int4Checkpoint {
 public:
  // Checks that every module's tensors exist with the dtype and shape the manifest says.
  static std::unique_ptr<Int4Checkpoint> open(const std::filesystem::path& dir, bool header_only = false);
  static bool is_int4_dir(const std::filesystem::path& dir) { return std::filesystem::exists(dir / "manifest.json"); }
  const Manifest& manifest() const { return manifest_; }
  const Checkpoint& tensors() const { return *ck_; }
  bool is_quantized(const std::string& linear_name) const { return manifest_.find(linear_name) != nullptr; }

  struct LinearParts {
    const QuantModule* module = nullptr;
    TensorView qweight, scales, zeros;  // zeros.data == nullptr when symmetric
  };
  // `linear_name` like "layers.0.self_attn.q_proj". Throws if absent or header-only.
  LinearParts linear(const std::string& linear_name) const;
  // Dequantized [out, in] float weight of one Linear.
  std::vector<float> dequantized(const std::string& linear_name) const;

 private:
  Manifest manifest_;
  std::unique_ptr<Checkpoint> ck_;
};

}  // namespace g4c::models

// Safetensors checkpoints: mmap'd files, sharded index, tensor-name prefixes,
// and a writer (quantize and synth produce checkpoints).
//
// Format: 8-byte little-endian header length N, N bytes of JSON
// {"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}},
// then the data section; offsets are relative to the data section.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "models/dtype.h"

namespace g4c::models {

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint64_t offset = 0;  // byte offset of the data inside its file (absolute, header included)
  uint64_t nbytes = 0;
  std::string file;     // path of the shard holding it
  int64_t numel() const;
};

// A read-only view of one tensor's bytes inside a mapped file.
struct TensorView {
  const TensorInfo* info = nullptr;
  const uint8_t* data = nullptr;
  std::span<const uint8_t> bytes() const { return {data, info ? info->nbytes : 0}; }
  template <class T> const T* as() const { return reinterpret_cast<const T*>(data); }
};

// One .safetensors file, memory-mapped. Validates the header completely on open:
// JSON well-formed, every dtype known, shape×dtype == byte length, offsets inside
// the data section and not overlapping. Throws g4c::Error naming the file.
class SafetensorsFile {
 public:
  static std::unique_ptr<SafetensorsFile> open(const std::filesystem::path& path);
  // Parses and validates a header from memory (used by open() and the fuzzer).
  // `file_size` is the size of the whole file the header belongs to.
  static std::vector<TensorInfo> parse_header(std::span<const uint8_t> file_prefix, uint64_t file_size,
                                              const std::string& path_for_messages,
                                              std::map<std::string, std::string>* metadata = nullptr);
  ~SafetensorsFile();
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find(const std::string& name) const;
  TensorView view(const TensorInfo& t) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }

 private:
  SafetensorsFile() = default;
  std::string path_;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  int fd_ = -1;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

// A whole checkpoint directory: model.safetensors, or model.safetensors.index.json
// with its shards. Tensor names are looked up without the model prefix
// ("model." / "model.language_model."): get("layers.0.self_attn.q_proj.weight").
class Checkpoint {
 public:
  // header_only: parse headers but do not require/map the data (files written by
  // `g4c synth --header-only` hold no data section).
  static std::unique_ptr<Checkpoint> open(const std::filesystem::path& dir, bool header_only = false);
  bool has(const std::string& name) const;
  const TensorInfo& info(const std::string& name) const;  // throws naming the dir if absent
  TensorView get(const std::string& name) const;          // throws if header_only
  std::vector<std::string> names() const;                 // prefix-stripped, sorted
  const std::filesystem::path& dir() const { return dir_; }
  const std::string& prefix() const { return prefix_; }

 private:
  std::filesystem::path dir_;
  std::string prefix_;
  bool header_only_ = false;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::vector<std::vector<TensorInfo>> header_only_tensors_;
  std::map<std::string, std::pair<int, const TensorInfo*>> by_name_;
};

// Writes one or more shards plus model.safetensors.index.json. Tensors are
// added in order; a shard is closed when it would exceed max_shard_bytes.
class SafetensorsWriter {
 public:
  SafetensorsWriter(std::filesystem::path dir, std::string name_prefix, uint64_t max_shard_bytes = 4ull << 30);
  // Copies `bytes` into the output. Names get `name_prefix` prepended.
  void add(const std::string& name, DType dtype, std::vector<int64_t> shape, std::span<const uint8_t> bytes);
  // Writes the header for a tensor but no data (header-only checkpoints).
  void add_header_only(const std::string& name, DType dtype, std::vector<int64_t> shape);
  // Flushes the shards and writes the index; returns the files written.
  std::vector<std::filesystem::path> finish(bool header_only = false);

 private:
  struct Pending { std::string name; DType dtype; std::vector<int64_t> shape; std::vector<uint8_t> data; uint64_t nbytes; };
  std::filesystem::path dir_;
  std::string prefix_;
  uint64_t max_shard_bytes_;
  std::vector<std::vector<Pending>> shards_;
  uint64_t current_bytes_ = 0;
};

}  // namespace g4c::models

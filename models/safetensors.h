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
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

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
                                              std::map<std::string, std::string>* metadata = nullptr,
                                              bool header_only = false);
  // header_only: the data section may be absent (offsets are checked against the
  // data section the header describes, not against the file size).
  static std::unique_ptr<SafetensorsFile> open(const std::filesystem::path& path, bool header_only);
  // True when the file carries data for every tensor (not a header-only file).
  bool has_data() const { return has_data_; }
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
  bool has_data_ = true;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// model.safetensors.index.json: tensor name → shard file name (a plain file name, never a path).
struct SafetensorsIndex {
  std::vector<std::pair<std::string, std::string>> weight_map;  // (tensor, shard) in file order
  std::vector<std::string> shards;                              // distinct shard names, sorted
};
// Throws g4c::Error naming `file` and the field.
SafetensorsIndex parse_safetensors_index(const nlohmann::json& j, const std::string& file);

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
  bool header_only() const { return header_only_; }
  // All files of the checkpoint (one per shard).
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }

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
//
// Two ways to use it:
//  - add(): the bytes are copied; a shard is written out as soon as it is full, so
//    at most one shard (max_shard_bytes) is held in memory.
//  - declare() every tensor first, then write() each one's bytes in any order and
//    from any thread: shard headers are fixed at the first write() and the data goes
//    straight to its place in the file (pwrite), nothing is held in memory. This is
//    how synth streams a 24 GB checkpoint. add_header_only() is declare(), and
//    finish(true) then writes the headers with no data section.
// Names get `name_prefix` prepended. The two ways cannot be mixed in one writer.
class SafetensorsWriter {
 public:
  SafetensorsWriter(std::filesystem::path dir, std::string name_prefix, uint64_t max_shard_bytes = 4ull << 30);
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;
  // Copies `bytes` into the output. Names get `name_prefix` prepended.
  void add(const std::string& name, DType dtype, std::vector<int64_t> shape, std::span<const uint8_t> bytes);
  // Writes the header for a tensor but no data (header-only checkpoints).
  void add_header_only(const std::string& name, DType dtype, std::vector<int64_t> shape);
  // Declares a tensor whose bytes come later through write().
  void declare(const std::string& name, DType dtype, std::vector<int64_t> shape);
  // Writes a declared tensor's bytes (exactly its size). Thread-safe.
  void write(const std::string& name, std::span<const uint8_t> bytes);
  // Writes part of a declared tensor's bytes at `byte_offset` inside it. Thread-safe;
  // parts must not overlap, and finish() checks that they add up to the whole tensor.
  void write_range(const std::string& name, uint64_t byte_offset, std::span<const uint8_t> bytes);
  // Flushes the shards and writes the index; returns the files written.
  // header_only: declared tensors get headers but no data.
  std::vector<std::filesystem::path> finish(bool header_only = false);
  // Total data bytes of all tensors added/declared so far.
  uint64_t total_bytes() const { return total_bytes_; }

 private:
  struct Pending { std::string name; DType dtype; std::vector<int64_t> shape; std::vector<uint8_t> data; uint64_t nbytes; };
  struct Slot { int shard; uint64_t abs_offset; uint64_t nbytes; bool written; uint64_t bytes_written; };
  void flush_shard(size_t shard, bool header_only);
  void open_planned();
  std::filesystem::path shard_path(size_t shard) const;
  std::filesystem::path dir_;
  std::string prefix_;
  uint64_t max_shard_bytes_;
  std::vector<std::vector<Pending>> shards_;
  uint64_t current_bytes_ = 0;
  uint64_t total_bytes_ = 0;
  enum class Mode { None, Add, Planned } mode_ = Mode::None;
  bool finished_ = false;
  std::vector<std::string> written_names_;    // add mode: temp shard paths already written
  std::map<std::string, Slot> slots_;         // planned mode, by full name
  std::vector<int> fds_;                      // planned mode: one per shard once opened
  std::vector<std::string> weight_map_order_;
  std::map<std::string, int> weight_map_;     // full name -> shard
  std::mutex mu_;                             // planned mode: guards slots_ written flags
};

}  // namespace g4c::models

// Safetensors reading: mmap, complete header validation, sharded index, prefixes.
// The writer lives in safetensors_writer.cpp.
#include "models/safetensors.h"
#include "models/json_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "models/error.h"

namespace g4c::models {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// The safetensors reference implementation refuses headers over 100 MB; so do we,
// which also bounds what a corrupt length field can make us read.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;
constexpr char kHeaderOnlyKey[] = "g4c_header_only";

uint64_t read_le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<TensorInfo> SafetensorsFile::parse_header(std::span<const uint8_t> prefix, uint64_t file_size,
                                                      const std::string& path,
                                                      std::map<std::string, std::string>* metadata,
                                                      bool header_only) {
  auto fail = [&](const std::string& what) -> Error { return Error(path + ": " + what); };
  if (file_size < 8 || prefix.size() < 8)
    throw fail("truncated: " + std::to_string(file_size) + " bytes, shorter than the 8-byte header length");
  const uint64_t n = read_le64(prefix.data());
  if (n > kMaxHeaderBytes) throw fail("header length " + std::to_string(n) + " is over the 100 MB limit (corrupt?)");
  if (n > file_size - 8)
    throw fail("truncated: header length " + std::to_string(n) + " but only " + std::to_string(file_size - 8) +
               " bytes follow the length field");
  if (prefix.size() - 8 < n) throw fail("truncated: header cut short");
  const char* text = reinterpret_cast<const char*>(prefix.data() + 8);
  json h;
  try {
    h = json::parse(text, text + n);
  } catch (const json::exception& e) {
    throw fail(std::string("header is not valid JSON: ") + e.what());
  }
  if (!h.is_object()) throw fail("header is not a JSON object");

  std::map<std::string, std::string> local_meta;
  if (!metadata) metadata = &local_meta;
  if (h.contains("__metadata__")) {
    const json& v = h["__metadata__"];
    if (!v.is_object()) throw fail("__metadata__ is not an object");
    for (auto m = v.begin(); m != v.end(); ++m) {
      if (!m.value().is_string()) throw fail("__metadata__ value '" + m.key() + "' is not a string");
      (*metadata)[m.key()] = m.value().get<std::string>();
    }
  }
  const uint64_t data_start = 8 + n;
  const uint64_t data_size = file_size - data_start;
  std::vector<TensorInfo> out;
  out.reserve(h.size());
  std::vector<std::pair<uint64_t, uint64_t>> ranges;  // [begin, end) relative, per tensor
  for (auto it = h.begin(); it != h.end(); ++it) {
    const std::string& name = it.key();
    const json& v = it.value();
    if (name == "__metadata__") continue;
    auto bad = [&](const std::string& what) { return fail("tensor '" + name + "': " + what); };
    if (!v.is_object()) throw bad("entry is not an object");
    if (!v.contains("dtype") || !v["dtype"].is_string()) throw bad("dtype missing or not a string");
    TensorInfo t;
    t.name = name;
    t.file = path;
    const std::string dt = v["dtype"].get<std::string>();
    if (!parse_dtype(dt, &t.dtype)) throw bad("unknown dtype '" + dt + "'");
    if (!v.contains("shape") || !v["shape"].is_array()) throw bad("shape missing or not a list");
    uint64_t numel = 1;
    for (const json& d : v["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0) throw bad("shape entries must be non-negative integers");
      int64_t dim = d.get<int64_t>();
      t.shape.push_back(dim);
      if (__builtin_mul_overflow(numel, uint64_t(dim), &numel)) throw bad("shape overflows");
    }
    if (!v.contains("data_offsets") || !v["data_offsets"].is_array() || v["data_offsets"].size() != 2)
      throw bad("data_offsets missing or not [begin, end]");
    const json& off = v["data_offsets"];
    for (const json& o : off)
      if (!o.is_number_unsigned() && !(o.is_number_integer() && o.get<int64_t>() >= 0))
        throw bad("data_offsets must be non-negative integers");
    const uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
    if (end < begin) throw bad("data_offsets end " + std::to_string(end) + " < begin " + std::to_string(begin));
    uint64_t expect = 0;
    if (__builtin_mul_overflow(numel, uint64_t(dtype_size(t.dtype)), &expect)) throw bad("byte size overflows");
    if (end - begin != expect)
      throw bad("dtype " + dt + " x shape needs " + std::to_string(expect) + " bytes but data_offsets span " +
                std::to_string(end - begin));
    if (!header_only && end > data_size)
      throw bad("data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                ") outside the data section of " + std::to_string(data_size) + " bytes" +
                (metadata->count(kHeaderOnlyKey) ? " (a header-only file: open it header_only)" : ""));
    if (end > UINT64_MAX - data_start) throw bad("data_offsets overflow");
    t.offset = data_start + begin;
    t.nbytes = expect;
    ranges.push_back({begin, end});
    out.push_back(std::move(t));
  }
  // No two tensors may share bytes (zero-size tensors share nothing).
  std::vector<size_t> order(out.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ranges[a] < ranges[b]; });
  uint64_t prev_end = 0;
  const TensorInfo* prev = nullptr;
  for (size_t i : order) {
    if (ranges[i].first == ranges[i].second) continue;
    if (prev && ranges[i].first < prev_end)
      throw fail("tensors '" + prev->name + "' and '" + out[i].name + "' overlap in the data section");
    prev_end = ranges[i].second;
    prev = &out[i];
  }
  return out;
}

std::unique_ptr<SafetensorsFile> SafetensorsFile::open(const fs::path& path) { return open(path, false); }

std::unique_ptr<SafetensorsFile> SafetensorsFile::open(const fs::path& path, bool header_only) {
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path.string();
  f->fd_ = ::open(f->path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (f->fd_ < 0) throw Error(f->path_ + ": cannot open (" + std::strerror(errno) + ")");
  struct stat st {};
  if (fstat(f->fd_, &st) != 0 || !S_ISREG(st.st_mode)) throw Error(f->path_ + ": not a regular file");
  f->size_ = uint64_t(st.st_size);
  if (f->size_ > 0) {
    void* p = mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, f->fd_, 0);
    if (p == MAP_FAILED) throw Error(f->path_ + ": mmap failed (" + std::strerror(errno) + ")");
    f->base_ = static_cast<const uint8_t*>(p);
  }
  // A header-only file (synth --header-only) says so in its metadata; a normal
  // open of one fails on the offsets with a hint.
  std::span<const uint8_t> all(f->base_, f->size_);
  f->tensors_ = parse_header(all, f->size_, f->path_, &f->metadata_, header_only);
  f->has_data_ = !f->metadata_.count(kHeaderOnlyKey);
  if (f->has_data_ && header_only) {
    // Header-only mode also accepts complete files: then the data must be there.
    for (const TensorInfo& t : f->tensors_)
      if (t.offset + t.nbytes > f->size_) { f->has_data_ = false; break; }
  }
  for (size_t i = 0; i < f->tensors_.size(); ++i) f->index_[f->tensors_[i].name] = i;
  return f;
}

SafetensorsFile::~SafetensorsFile() {
  if (base_) munmap(const_cast<uint8_t*>(base_), size_);
  if (fd_ >= 0) ::close(fd_);
}

const TensorInfo* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

TensorView SafetensorsFile::view(const TensorInfo& t) const {
  if (!has_data_ || t.offset + t.nbytes > size_)
    throw Error(path_ + ": tensor '" + t.name + "' has no data (header-only file)");
  return TensorView{&t, base_ + t.offset};
}

// ---------------------------------------------------------------- Checkpoint

namespace {

std::string strip_prefix(const std::string& name, std::string* which) {
  for (const char* p : {"model.language_model.", "model."}) {
    size_t n = std::strlen(p);
    if (name.compare(0, n, p) == 0) {
      *which = p;
      return name.substr(n);
    }
  }
  which->clear();
  return name;
}

}  // namespace

SafetensorsIndex parse_safetensors_index(const json& j, const std::string& file) {
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    throw Error(file + ": field 'weight_map' is missing or not an object");
  SafetensorsIndex out;
  const json& weight_map = j["weight_map"];
  std::set<std::string> seen;
  for (auto it = weight_map.begin(); it != weight_map.end(); ++it) {
    if (!it.value().is_string()) throw Error(file + ": weight_map entry '" + it.key() + "' is not a file name");
    std::string s = it.value().get<std::string>();
    if (s.empty() || s.find('/') != std::string::npos || s.find('\0') != std::string::npos || s == "." || s == "..")
      throw Error(file + ": weight_map names shard '" + s + "', which is not a plain file name");
    if (seen.insert(s).second) out.shards.push_back(s);
    out.weight_map.emplace_back(it.key(), std::move(s));
  }
  std::sort(out.shards.begin(), out.shards.end());
  return out;
}

std::unique_ptr<Checkpoint> Checkpoint::open(const fs::path& dir, bool header_only) {
  std::unique_ptr<Checkpoint> ck(new Checkpoint());
  ck->dir_ = dir;
  ck->header_only_ = header_only;
  const fs::path index = dir / "model.safetensors.index.json";
  const fs::path single = dir / "model.safetensors";
  std::vector<std::string> shard_names;
  SafetensorsIndex parsed;
  if (fs::exists(index)) {
    parsed = parse_safetensors_index(read_json_file(index), index.string());
    shard_names = parsed.shards;
    for (const std::string& s : shard_names)
      if (!fs::exists(dir / s))
        throw Error(index.string() + ": shard '" + s + "' named in the index is missing from " + dir.string());
  } else if (fs::exists(single)) {
    shard_names.push_back("model.safetensors");
  } else {
    throw Error(dir.string() + ": no model.safetensors or model.safetensors.index.json");
  }

  std::map<std::string, int> prefix_votes;
  for (size_t i = 0; i < shard_names.size(); ++i) {
    ck->files_.push_back(SafetensorsFile::open(dir / shard_names[i], header_only));
    const SafetensorsFile& f = *ck->files_.back();
    for (const TensorInfo& t : f.tensors()) {
      std::string pfx;
      std::string key = strip_prefix(t.name, &pfx);
      ++prefix_votes[pfx];
      if (!ck->by_name_.emplace(key, std::make_pair(int(i), &t)).second)
        throw Error(dir.string() + ": tensor '" + key + "' appears twice (in " + f.path() + " and " +
                    ck->files_[size_t(ck->by_name_[key].first)]->path() + ")");
    }
  }
  // Every tensor the index names must be in the shard it names.
  for (const auto& [tensor, shard] : parsed.weight_map) {
    size_t idx = size_t(std::find(shard_names.begin(), shard_names.end(), shard) - shard_names.begin());
    if (!ck->files_[idx]->find(tensor))
      throw Error(index.string() + ": tensor '" + tensor + "' is mapped to " + shard + ", which does not contain it");
  }
  int best = -1;
  for (auto& [p, n] : prefix_votes)
    if (n > best) { best = n; ck->prefix_ = p; }
  return ck;
}

bool Checkpoint::has(const std::string& name) const { return by_name_.count(name) != 0; }

const TensorInfo& Checkpoint::info(const std::string& name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) throw Error(dir_.string() + ": checkpoint has no tensor '" + name + "'");
  return *it->second.second;
}

TensorView Checkpoint::get(const std::string& name) const {
  const TensorInfo& t = info(name);
  if (header_only_) throw Error(dir_.string() + ": tensor '" + name + "' requested from a checkpoint opened header-only");
  return files_[size_t(by_name_.at(name).first)]->view(t);
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  out.reserve(by_name_.size());
  for (auto& [k, v] : by_name_) out.push_back(k);
  return out;
}

}  // namespace g4c::models

// SafetensorsWriter: shards + model.safetensors.index.json, either buffered one
// shard at a time (add) or planned and streamed with pwrite (declare + write).
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "models/error.h"
#include "models/safetensors.h"

namespace g4c::models {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

struct HeaderEntry {
  const std::string* name;
  DType dtype;
  const std::vector<int64_t>* shape;
  uint64_t begin, end;
};

// The 8-byte length + JSON header, padded with spaces to a multiple of 8 so the
// data section starts 8-aligned.
std::string build_header(const std::vector<HeaderEntry>& entries, bool header_only) {
  json h = json::object();
  h["__metadata__"] = {{"format", "pt"}};
  if (header_only) h["__metadata__"]["g4c_header_only"] = "true";
  for (const HeaderEntry& e : entries)
    h[*e.name] = {{"dtype", std::string(dtype_name(e.dtype))}, {"shape", *e.shape}, {"data_offsets", {e.begin, e.end}}};
  std::string text = h.dump();
  while ((8 + text.size()) % 8) text.push_back(' ');
  std::string out(8, '\0');
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[size_t(i)] = char((n >> (8 * i)) & 0xff);
  return out + text;
}

void pwrite_all(int fd, const uint8_t* p, uint64_t n, uint64_t off, const std::string& path) {
  while (n > 0) {
    ssize_t w = ::pwrite(fd, p, size_t(std::min<uint64_t>(n, 1ull << 30)), off_t(off));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) throw Error(path + ": write failed (" + std::strerror(errno) + ")");
    p += w;
    n -= uint64_t(w);
    off += uint64_t(w);
  }
}

uint64_t nbytes_of(DType dtype, const std::vector<int64_t>& shape, const std::string& name) {
  uint64_t n = dtype_size(dtype);
  for (int64_t d : shape) {
    if (d < 0) throw Error("safetensors writer: tensor '" + name + "' has a negative dimension");
    n *= uint64_t(d);
  }
  return n;
}

}  // namespace

SafetensorsWriter::SafetensorsWriter(fs::path dir, std::string name_prefix, uint64_t max_shard_bytes)
    : dir_(std::move(dir)), prefix_(std::move(name_prefix)), max_shard_bytes_(max_shard_bytes) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) throw Error(dir_.string() + ": cannot create directory (" + ec.message() + ")");
}

SafetensorsWriter::~SafetensorsWriter() {
  for (int fd : fds_)
    if (fd >= 0) ::close(fd);
}

fs::path SafetensorsWriter::shard_path(size_t shard) const {
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", shard + 1, shards_.size());
  return dir_ / buf;
}

void SafetensorsWriter::declare(const std::string& name, DType dtype, std::vector<int64_t> shape) {
  if (finished_) throw Error(dir_.string() + ": safetensors writer already finished");
  if (mode_ == Mode::Add) throw Error(dir_.string() + ": writer: declare() after add()");
  if (!fds_.empty()) throw Error(dir_.string() + ": writer: declare('" + name + "') after the first write()");
  mode_ = Mode::Planned;
  const std::string full = prefix_ + name;
  if (weight_map_.count(full)) throw Error(dir_.string() + ": writer: tensor '" + full + "' added twice");
  uint64_t nbytes = nbytes_of(dtype, shape, full);
  if (shards_.empty() || (current_bytes_ > 0 && current_bytes_ + nbytes > max_shard_bytes_)) {
    shards_.emplace_back();
    current_bytes_ = 0;
  }
  int shard = int(shards_.size() - 1);
  slots_[full] = Slot{shard, current_bytes_, nbytes, nbytes == 0, 0};  // offset relative until open_planned()
  shards_.back().push_back(Pending{full, dtype, std::move(shape), {}, nbytes});
  current_bytes_ += nbytes;
  total_bytes_ += nbytes;
  weight_map_[full] = shard;
  weight_map_order_.push_back(full);
}

void SafetensorsWriter::add_header_only(const std::string& name, DType dtype, std::vector<int64_t> shape) {
  declare(name, dtype, std::move(shape));
}

void SafetensorsWriter::open_planned() {
  // Called under mu_ (or single-threaded from finish). Fixes the headers and the layout.
  for (size_t s = 0; s < shards_.size(); ++s) {
    std::vector<HeaderEntry> entries;
    for (const Pending& p : shards_[s]) {
      const Slot& sl = slots_.at(p.name);
      entries.push_back({&p.name, p.dtype, &p.shape, sl.abs_offset, sl.abs_offset + sl.nbytes});
    }
    std::string header = build_header(entries, false);
    const std::string path = shard_path(s).string();
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) throw Error(path + ": cannot create (" + std::strerror(errno) + ")");
    fds_.push_back(fd);
    pwrite_all(fd, reinterpret_cast<const uint8_t*>(header.data()), header.size(), 0, path);
    uint64_t data_bytes = 0;
    for (const Pending& p : shards_[s]) {
      Slot& sl = slots_.at(p.name);
      sl.abs_offset += header.size();
      data_bytes += sl.nbytes;
    }
    if (::ftruncate(fd, off_t(header.size() + data_bytes)) != 0)
      throw Error(path + ": cannot size the file (" + std::strerror(errno) + ")");
  }
}

void SafetensorsWriter::write(const std::string& name, std::span<const uint8_t> bytes) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = slots_.find(prefix_ + name);
    if (it != slots_.end() && bytes.size() != it->second.nbytes)
      throw Error(dir_.string() + ": writer: tensor '" + prefix_ + name + "' needs " +
                  std::to_string(it->second.nbytes) + " bytes, got " + std::to_string(bytes.size()));
  }
  write_range(name, 0, bytes);
}

void SafetensorsWriter::write_range(const std::string& name, uint64_t byte_offset, std::span<const uint8_t> bytes) {
  const std::string full = prefix_ + name;
  Slot slot;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_) throw Error(dir_.string() + ": safetensors writer already finished");
    auto it = slots_.find(full);
    if (it == slots_.end()) throw Error(dir_.string() + ": writer: tensor '" + full + "' was not declared");
    Slot& s = it->second;
    if (byte_offset > s.nbytes || bytes.size() > s.nbytes - byte_offset ||
        bytes.size() > s.nbytes - s.bytes_written)
      throw Error(dir_.string() + ": writer: bytes [" + std::to_string(byte_offset) + ", +" +
                  std::to_string(bytes.size()) + ") do not fit tensor '" + full + "' of " + std::to_string(s.nbytes) +
                  " bytes (or it was written twice)");
    if (fds_.empty()) open_planned();
    s.bytes_written += bytes.size();
    s.written = s.bytes_written == s.nbytes;
    slot = s;
  }
  pwrite_all(fds_[size_t(slot.shard)], bytes.data(), bytes.size(), slot.abs_offset + byte_offset,
             shard_path(size_t(slot.shard)).string());
}

void SafetensorsWriter::add(const std::string& name, DType dtype, std::vector<int64_t> shape,
                            std::span<const uint8_t> bytes) {
  if (finished_) throw Error(dir_.string() + ": safetensors writer already finished");
  if (mode_ == Mode::Planned) throw Error(dir_.string() + ": writer: add() after declare()");
  mode_ = Mode::Add;
  const std::string full = prefix_ + name;
  if (weight_map_.count(full)) throw Error(dir_.string() + ": writer: tensor '" + full + "' added twice");
  uint64_t nbytes = nbytes_of(dtype, shape, full);
  if (bytes.size() != nbytes)
    throw Error(dir_.string() + ": writer: tensor '" + full + "' needs " + std::to_string(nbytes) + " bytes, got " +
                std::to_string(bytes.size()));
  if (shards_.empty() || (current_bytes_ > 0 && current_bytes_ + nbytes > max_shard_bytes_)) {
    if (!shards_.empty()) flush_shard(shards_.size() - 1, false);
    shards_.emplace_back();
    current_bytes_ = 0;
  }
  shards_.back().push_back(Pending{full, dtype, std::move(shape), {bytes.begin(), bytes.end()}, nbytes});
  current_bytes_ += nbytes;
  total_bytes_ += nbytes;
  weight_map_[full] = int(shards_.size() - 1);
  weight_map_order_.push_back(full);
}

// Add mode: writes a full shard to a temporary name (the shard count is not known
// yet) and frees its buffers; finish() renames.
void SafetensorsWriter::flush_shard(size_t shard, bool header_only) {
  std::vector<HeaderEntry> entries;
  uint64_t off = 0;
  for (const Pending& p : shards_[shard]) {
    entries.push_back({&p.name, p.dtype, &p.shape, off, off + p.nbytes});
    off += p.nbytes;
  }
  std::string header = build_header(entries, header_only);
  fs::path tmp = dir_ / (".g4c-shard-" + std::to_string(shard) + ".tmp");
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(tmp.string() + ": cannot create");
  out.write(header.data(), std::streamsize(header.size()));
  for (Pending& p : shards_[shard]) {
    out.write(reinterpret_cast<const char*>(p.data.data()), std::streamsize(p.data.size()));
    std::vector<uint8_t>().swap(p.data);
  }
  out.close();
  if (!out) throw Error(tmp.string() + ": write failed");
  written_names_.push_back(tmp.string());
}

std::vector<fs::path> SafetensorsWriter::finish(bool header_only) {
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) throw Error(dir_.string() + ": safetensors writer already finished");
  finished_ = true;
  if (shards_.empty()) shards_.emplace_back();  // an empty checkpoint is still one valid file
  std::vector<fs::path> files;
  if (mode_ == Mode::Planned && header_only) {
    if (!fds_.empty()) throw Error(dir_.string() + ": writer: finish(header_only) after data was written");
    for (size_t s = 0; s < shards_.size(); ++s) {
      std::vector<HeaderEntry> entries;
      for (const Pending& p : shards_[s]) {
        const Slot& sl = slots_.at(p.name);
        entries.push_back({&p.name, p.dtype, &p.shape, sl.abs_offset, sl.abs_offset + sl.nbytes});
      }
      std::string header = build_header(entries, true);
      fs::path path = shard_path(s);
      std::ofstream out(path, std::ios::binary | std::ios::trunc);
      out.write(header.data(), std::streamsize(header.size()));
      if (!out) throw Error(path.string() + ": write failed");
      files.push_back(path);
    }
  } else if (mode_ == Mode::Planned) {
    if (fds_.empty()) open_planned();
    for (const std::string& n : weight_map_order_)
      if (!slots_.at(n).written) throw Error(dir_.string() + ": writer: tensor '" + n + "' declared but never written");
    for (size_t s = 0; s < fds_.size(); ++s) {
      if (::close(fds_[s]) != 0) throw Error(shard_path(s).string() + ": close failed (" + std::strerror(errno) + ")");
      fds_[s] = -1;
      files.push_back(shard_path(s));
    }
  } else {
    if (header_only) throw Error(dir_.string() + ": writer: finish(header_only) after add()");
    flush_shard(shards_.size() - 1, false);
    for (size_t s = 0; s < shards_.size(); ++s) {
      fs::path path = shard_path(s);
      fs::rename(written_names_[s], path);
      files.push_back(path);
    }
  }
  json wm = json::object();
  for (const std::string& n : weight_map_order_) wm[n] = shard_path(size_t(weight_map_.at(n))).filename().string();
  json index{{"metadata", {{"total_size", total_bytes_}}}, {"weight_map", wm}};
  fs::path ipath = dir_ / "model.safetensors.index.json";
  std::ofstream out(ipath, std::ios::trunc);
  out << index.dump(2) << "\n";
  if (!out) throw Error(ipath.string() + ": write failed");
  files.push_back(ipath);
  return files;
}

}  // namespace g4c::models

// Reading files users bring, with bounds: a directory, a device that never ends (/dev/zero) or
// an output path that names an input must give one clear error, never a hang, an unbounded
// allocation or a truncated input.
#pragma once

#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <string>

namespace g4c::models {

// Throws g4c::Error("<path>: <what> is a directory" / "does not exist") unless `path` names
// something that can be read as a file (a regular file, a FIFO or a character device).
void check_input_path(const std::filesystem::path& path, const std::string& what);

// The whole file, which must be a regular file of at most `max_bytes` (else g4c::Error naming it).
std::string read_regular_file(const std::filesystem::path& path, const std::string& what, uint64_t max_bytes);

// A bounded line reader for jsonl streams: a line longer than `max_line_bytes` is skipped (up to
// its '\n') and reported; the stream counts as ended after `max_total_bytes` or at a NUL byte
// (JSON text never holds one: /dev/zero or a binary file given as jsonl), both reported.
class LineReader {
 public:
  enum class Status { Line, TooLong, End, Binary, TooBig };
  LineReader(std::istream& in, size_t max_line_bytes, uint64_t max_total_bytes)
      : in_(in), max_line_(max_line_bytes), budget_(max_total_bytes) {}
  // Status::Line: `line` holds the next line (without '\n' or a trailing '\r' kept as is).
  Status next(std::string& line);
  int line_number() const { return line_no_; }  // 1-based number of the line last returned

 private:
  std::istream& in_;
  size_t max_line_;
  uint64_t budget_;
  int line_no_ = 0;
  bool ended_ = false;
};

// Refuses (g4c::Error) an output path that names the same file as an input, before either is
// opened for writing: `g4c run --input x --output x` must not truncate x.
void check_output_distinct(const std::filesystem::path& output, const std::string& output_flag,
                           const std::filesystem::path& input, const std::string& input_flag);

}  // namespace g4c::models

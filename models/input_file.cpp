#include "models/input_file.h"

#include <fstream>
#include <istream>

#include "models/error.h"

namespace g4c::models {

namespace fs = std::filesystem;

void check_input_path(const fs::path& path, const std::string& what) {
  std::error_code ec;
  const auto st = fs::status(path, ec);
  if (ec || !fs::exists(st)) throw Error(path.string() + ": " + what + " does not exist");
  if (fs::is_directory(st)) throw Error(path.string() + ": " + what + " is a directory, not a file");
}

std::string read_regular_file(const fs::path& path, const std::string& what, uint64_t max_bytes) {
  check_input_path(path, what);
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) throw Error(path.string() + ": " + what + " is not a regular file");
  const uint64_t size = fs::file_size(path, ec);
  if (ec) throw Error(path.string() + ": cannot stat " + what + ": " + ec.message());
  if (size > max_bytes)
    throw Error(path.string() + ": " + what + " of " + std::to_string(size) + " bytes is larger than the limit of " +
                std::to_string(max_bytes) + " bytes");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path.string() + ": cannot open " + what);
  std::string bytes(size, '\0');
  in.read(bytes.data(), std::streamsize(size));
  if (uint64_t(in.gcount()) != size) throw Error(path.string() + ": cannot read " + what + " (short read)");
  return bytes;
}

LineReader::Status LineReader::next(std::string& line) {
  line.clear();
  if (ended_) return Status::End;
  std::streambuf* sb = in_.rdbuf();
  bool any = false, too_long = false;
  for (;;) {
    const int c = sb->sbumpc();
    if (c == std::char_traits<char>::eof()) {
      ended_ = true;
      in_.setstate(std::ios::eofbit);
      if (!any) return Status::End;
      ++line_no_;
      return too_long ? Status::TooLong : Status::Line;
    }
    if (budget_ == 0) {
      ended_ = true;
      return Status::TooBig;
    }
    --budget_;
    any = true;
    if (c == '\0') {
      ended_ = true;
      ++line_no_;
      return Status::Binary;
    }
    if (c == '\n') {
      ++line_no_;
      return too_long ? Status::TooLong : Status::Line;
    }
    if (too_long) continue;
    if (line.size() >= max_line_) {
      too_long = true;
      std::string().swap(line);
      continue;
    }
    line.push_back(char(c));
  }
}

void check_output_distinct(const fs::path& output, const std::string& output_flag, const fs::path& input,
                           const std::string& input_flag) {
  std::error_code ec;
  if (!fs::exists(output, ec) || !fs::exists(input, ec)) return;
  if (fs::equivalent(output, input, ec) && !ec)
    throw Error(output.string() + ": " + output_flag + " names the same file as " + input_flag +
                " (refusing to overwrite the input)");
}

}  // namespace g4c::models

// Reading .xz files (liblzma): the 262k Gemma 3 tokenizer is committed as tokenizer.json.xz.
#pragma once

#include <filesystem>
#include <string>

namespace g4c::models {

// The decompressed contents of the .xz file at `path` (all concatenated streams). Throws
// g4c::Error naming the file when it cannot be read or is not valid .xz data.
std::string read_xz_file(const std::filesystem::path& path);

}  // namespace g4c::models

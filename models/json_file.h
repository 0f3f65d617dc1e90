// Reads a whole JSON file; g4c::Error names the file when it cannot be opened or parsed.
#pragma once

#include <filesystem>

#include <nlohmann/json.hpp>

namespace g4c::models {

nlohmann::json read_json_file(const std::filesystem::path& path);

}  // namespace g4c::models

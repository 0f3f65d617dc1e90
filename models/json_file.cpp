#include "models/json_file.h"

#include "models/error.h"
#include "models/input_file.h"

namespace g4c::models {

using json = nlohmann::json;

json read_json_file(const std::filesystem::path& p) {
  // 256 MiB: the largest JSON g4c reads (a 262k-entry tokenizer.json) is about 35 MB.
  const std::string text = read_regular_file(p, "JSON file", uint64_t(256) << 20);
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    throw Error(p.string() + ": not valid JSON: " + e.what());
  }
}

}  // namespace g4c::models

#include "models/json_file.h"

#include <fstream>
#include <sstream>

#include "models/error.h"

namespace g4c::models {

using json = nlohmann::json;

json read_json_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw Error(p.string() + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return json::parse(ss.str());
  } catch (const json::parse_error& e) {
    throw Error(p.string() + ": not valid JSON: " + e.what());
  }
}

}  // namespace g4c::models

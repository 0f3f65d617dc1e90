#include "tests/runtime/support.h"

#include <cstdlib>
#include <unistd.h>

namespace g4c::test {

std::filesystem::path tiny_model_dir() {
  const char* src = std::getenv("G4C_SOURCE_DIR");
  return std::filesystem::path(src ? src : ".") / "models" / "gemma4-tiny";
}

std::filesystem::path golden_dir() {
  const char* src = std::getenv("G4C_SOURCE_DIR");
  return std::filesystem::path(src ? src : ".") / "tests" / "data" / "golden" / "gemma4-tiny";
}

std::filesystem::path temp_dir(const std::string& tag) {
  auto dir = std::filesystem::temp_directory_path() / ("g4c_rt_" + tag + "_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace g4c::test

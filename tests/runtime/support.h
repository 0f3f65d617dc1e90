// Shared helpers of the runtime tests: paths of the vendored model and the goldens.
#pragma once

#include <filesystem>
#include <string>

namespace g4c::test {

// $G4C_SOURCE_DIR/models/gemma4-tiny (the vendored tiny checkpoint).
std::filesystem::path tiny_model_dir();
// $G4C_SOURCE_DIR/tests/data/golden/gemma4-tiny (the vendored HF goldens; see its README).
std::filesystem::path golden_dir();
// A fresh temporary directory for this test.
std::filesystem::path temp_dir(const std::string& tag);

}  // namespace g4c::test

// Shared by the libFuzzer targets: each parser must, on any bytes, either return a value that
// keeps its documented invariants or throw g4c::Error; anything else (another exception, a
// sanitizer report, an invariant broken) is a finding. G4C_FUZZ_SOURCE_DIR names the source tree
// (the tiny model and tokenizer the targets load once).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

namespace g4c::fuzz {

// A broken invariant: print it and abort, so libFuzzer saves the input as a crash.
[[noreturn]] inline void violated(const std::string& what) {
  std::fprintf(stderr, "invariant violated: %s\n", what.c_str());
  std::abort();
}

// JSON from fuzz bytes, or discarded (null) when not JSON: the JSON library is not under test.
inline nlohmann::json parse_or_null(const uint8_t* data, size_t size) {
  return nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
}

inline std::string source_dir() { return G4C_FUZZ_SOURCE_DIR; }

}  // namespace g4c::fuzz

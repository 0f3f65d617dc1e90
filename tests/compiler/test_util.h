// Helpers shared by the compiler tests.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>

#include "ir/G4Dialect.h"
#include "mlir/IR/BuiltinOps.h"

namespace g4c::test {

inline std::filesystem::path source_dir() {
  const char* s = std::getenv("G4C_SOURCE_DIR");
  return s ? std::filesystem::path(s) : std::filesystem::path(G4C_TEST_SOURCE_DIR);
}

// Number of ops of each name in the module ("g4.linear" -> 70).
inline std::map<std::string, int> op_counts(mlir::ModuleOp module) {
  std::map<std::string, int> n;
  module.walk([&](mlir::Operation* op) { ++n[op->getName().getStringRef().str()]; });
  return n;
}

}  // namespace g4c::test

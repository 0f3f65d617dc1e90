// g4c::Error — the one exception type every layer throws for bad input.
//
// The message always names the file (or request) and what is wrong, so the CLI
// and the Python module can print it unchanged.
#pragma once

#include <stdexcept>
#include <string>

namespace g4c {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace g4c

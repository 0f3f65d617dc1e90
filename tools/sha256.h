// SHA-256 (FIPS 180-4) of a byte string, as lowercase hex — the `dataset_sha256`
// field of the quality JSON.
#pragma once

#include <string>
#include <string_view>

namespace g4c::tools {

std::string sha256_hex(std::string_view data);

}  // namespace g4c::tools

// libFuzzer target: model.safetensors.index.json (parse_safetensors_index) on arbitrary bytes.
// An index that parses names only plain shard file names (no path can escape the checkpoint
// directory), lists each shard once, and maps every tensor to one of them.
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "models/error.h"
#include "models/safetensors.h"
#include "tests/fuzz/fuzz_common.h"

using namespace g4c;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto j = fuzz::parse_or_null(data, size);
  if (j.is_discarded()) return 0;
  try {
    const auto idx = models::parse_safetensors_index(j, "model.safetensors.index.json");
    for (const auto& s : idx.shards)
      if (s.empty() || s.find('/') != std::string::npos || s == "." || s == "..") fuzz::violated("shard name is a path: " + s);
    if (std::adjacent_find(idx.shards.begin(), idx.shards.end()) != idx.shards.end()) fuzz::violated("shard listed twice");
    for (const auto& [tensor, shard] : idx.weight_map)
      if (!std::binary_search(idx.shards.begin(), idx.shards.end(), shard)) fuzz::violated("tensor mapped to no shard");
  } catch (const Error&) {
  }
  return 0;
}

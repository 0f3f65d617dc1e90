// libFuzzer target: SafetensorsFile::parse_header on arbitrary bytes. Any input must
// either parse or throw g4c::Error; ASan/UBSan catch the rest. The fuzzer also varies
// the claimed file size (first byte of input selects data-section slack).
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>

#include "models/error.h"
#include "models/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using g4c::models::SafetensorsFile;
  std::span<const uint8_t> bytes(data, size);
  for (uint64_t extra : {uint64_t(0), uint64_t(64)}) {
    try {
      std::map<std::string, std::string> meta;
      auto tensors = SafetensorsFile::parse_header(bytes, size + extra, "fuzz.safetensors", &meta, extra != 0);
      for (const auto& t : tensors)
        if (extra == 0 && t.offset + t.nbytes > size) __builtin_trap();  // validated offsets must be inside
    } catch (const g4c::Error&) {
    }
  }
  return 0;
}

// libFuzzer target: the INT4 manifest.json (parse_manifest) on arbitrary bytes, and the
// quantization_config.json written from what it parsed (g4c writes that file for other tools and
// never reads it back). A manifest that parses must round-trip: written and parsed again it is
// the same manifest, and every module's implied tensor shapes are positive.
#include <cstddef>
#include <cstdint>

#include "models/error.h"
#include "models/manifest.h"
#include "tests/fuzz/fuzz_common.h"

using namespace g4c;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto j = fuzz::parse_or_null(data, size);
  if (j.is_discarded()) return 0;
  try {
    const models::Manifest m = models::parse_manifest(j, "manifest.json");
    for (const auto& [name, q] : m.modules)
      if (q.out <= 0 || q.in <= 0 || q.padded_in < q.in || q.group_size <= 0 || q.padded_in % q.group_size != 0 ||
          q.padded_in % 2 != 0)
        fuzz::violated("module " + name + ": shapes the INT4 kernels cannot index");
    const auto again = models::parse_manifest(models::manifest_to_json(m), "manifest.json (written)");
    if (models::manifest_to_json(again) != models::manifest_to_json(m)) fuzz::violated("manifest does not round-trip");
    (void)models::quantization_config_json(m).dump();
  } catch (const Error&) {
  }
  return 0;
}

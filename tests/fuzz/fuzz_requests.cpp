// libFuzzer target: a requests jsonl stream (runtime::parse_requests) on arbitrary bytes, with the
// tiny model's tokenizer for "prompt" text. Every non-blank line becomes exactly one request or
// one error naming its line; a request that parses has sampling values the sampler accepts
// (no narrowing of an out-of-range double: UBSan's float-cast-overflow checks that).
#include <cstddef>
#include <cstdint>
#include <sstream>

#include "models/tokenizer.h"
#include "runtime/serving.h"
#include "tests/fuzz/fuzz_common.h"

using namespace g4c;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto tok = models::Tokenizer::load(fuzz::source_dir() + "/models/gemma4-tiny/tokenizer.json");
  runtime::ServeOptions opts;
  opts.max_line_bytes = 4096;  // small bounds, so the fuzzer reaches the too-long / too-big paths
  opts.max_input_bytes = 1 << 16;
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  std::string stream_error;
  const auto reqs = runtime::parse_requests(in, "fuzz.jsonl", tok.get(), opts, &stream_error);
  for (size_t i = 0; i < reqs.size(); ++i) {
    const auto& p = reqs[i];
    if (!p.error.empty()) {
      if (p.error.rfind("fuzz.jsonl:", 0) != 0) fuzz::violated("error without file:line: " + p.error);
      continue;
    }
    if (p.request.id != std::to_string(i)) fuzz::violated("request id is not its index");
    const auto& s = p.request.sampling;
    if (!(s.temperature >= 0) || !(s.top_p > 0 && s.top_p <= 1) || (s.top_k != -1 && s.top_k < 1))
      fuzz::violated("sampling values out of range passed parsing");
    if (p.request.max_new_tokens < 0) fuzz::violated("negative max_new_tokens passed parsing");
  }
  return 0;
}

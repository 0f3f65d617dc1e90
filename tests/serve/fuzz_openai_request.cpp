// libFuzzer target: any bytes as a /v1/completions or /v1/chat/completions body must give a
// validated request or an ApiError (never a crash, an exception or a sanitizer report), and a
// validated request must satisfy what the server relies on.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "tools/serve/openai_request.h"

using namespace g4c::serve;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const Endpoint ep = data[0] & 1 ? Endpoint::kChat : Endpoint::kCompletions;
  const std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  auto r = parse_openai_request(ep, body);
  if (auto* e = std::get_if<ApiError>(&r)) {
    if (e->status != 400 || e->message.empty()) std::abort();
    (void)e->to_json().dump();
    return 0;
  }
  const auto& a = std::get<ApiRequest>(r);
  if (ep == Endpoint::kCompletions && !a.prompt_text && a.prompt_ids.empty()) std::abort();
  if (ep == Endpoint::kChat && (!a.messages.is_array() || a.messages.empty())) std::abort();
  if (a.max_tokens && *a.max_tokens < 0) std::abort();
  if (!(a.top_p > 0 && a.top_p <= 1) || !(a.temperature >= 0)) std::abort();
  for (const auto& s : a.stop)
    if (s.empty()) std::abort();
  if (a.include_usage && !a.stream) std::abort();
  return 0;
}

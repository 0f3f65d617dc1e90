// The OpenAI request bodies g4c serve accepts — POST /v1/completions and
// POST /v1/chat/completions — parsed and validated into an ApiRequest, or an ApiError (HTTP
// 400) naming the offending field. Pure: no model, no tokenizer, no engine (the libFuzzer
// target tests/serve/fuzz_openai_request.cpp drives it with arbitrary bytes).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace g4c::serve {

// {"error": {"message", "type", "param", "code"}} with its HTTP status.
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // the field at fault ("" = none)
  std::string code;   // "" = null
  nlohmann::json to_json() const;
};

enum class Endpoint { kCompletions, kChat };

struct ApiRequest {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string model;                  // "" when absent
  // Completions: a prompt string, or token ids.
  std::optional<std::string> prompt_text;
  std::vector<int32_t> prompt_ids;
  // Chat: the messages array as given (validated: objects with string role, string or
  // text-part content).
  nlohmann::json messages;
  std::optional<int64_t> max_tokens;  // absent: the endpoint's default
  double temperature = 1.0;           // OpenAI's default
  double top_p = 1.0;
  int top_k = -1;
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;      // stop strings (not returned)
  bool stream = false;
  bool include_usage = false;         // stream_options.include_usage
  bool return_token_ids = false;      // extension: choices[i].token_ids
  bool ignore_eos = false;            // extension (vLLM's name): generate to max_tokens
};

struct ParseLimits {
  size_t max_stop_strings = 16;
  size_t max_stop_length = 256;
};

// Parses a request body. Never throws for any input.
std::variant<ApiRequest, ApiError> parse_openai_request(Endpoint endpoint, const std::string& body,
                                                        const ParseLimits& limits = {});

}  // namespace g4c::serve

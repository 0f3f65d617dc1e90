// Validation of OpenAI request bodies (see openai_request.h).
#include "tools/serve/openai_request.h"

#include <cmath>
#include <limits>
#include <set>

namespace g4c::serve {
namespace {

using nlohmann::json;

struct Bad {
  std::string param, message;
};

// Fields accepted only at their default (clients such as the openai package may send them).
bool is_default(const std::string& key, const json& v) {
  if (v.is_null()) return true;
  if (key == "frequency_penalty" || key == "presence_penalty") return v.is_number() && v.get<double>() == 0.0;
  if (key == "logprobs" || key == "echo" || key == "parallel_tool_calls") return v.is_boolean() && !v.get<bool>();
  if (key == "best_of") return v.is_number_integer() && v.get<int64_t>() == 1;
  if (key == "logit_bias") return v.is_object() && v.empty();
  return false;
}

double number(const json& j, const std::string& key, double lo, double hi) {
  const json& v = j[key];
  if (!v.is_number()) throw Bad{key, key + " must be a number"};
  const double x = v.get<double>();
  if (!(x >= lo && x <= hi)) throw Bad{key, key + " must be in [" + json(lo).dump() + ", " + json(hi).dump() + "]"};
  return x;
}

int64_t integer(const json& j, const std::string& key, int64_t lo, int64_t hi) {
  const json& v = j[key];
  if (!v.is_number_integer()) throw Bad{key, key + " must be an integer"};
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
    throw Bad{key, key + " must be at most " + std::to_string(hi)};
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) throw Bad{key, key + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]"};
  return x;
}

bool boolean(const json& j, const std::string& key) {
  if (!j[key].is_boolean()) throw Bad{key, key + " must be a boolean"};
  return j[key].get<bool>();
}

void parse_messages(const json& m) {
  if (!m.is_array()) throw Bad{"messages", "messages must be an array"};
  if (m.empty()) throw Bad{"messages", "messages must not be empty"};
  static const std::set<std::string> roles = {"system", "developer", "user", "assistant", "tool"};
  for (size_t i = 0; i < m.size(); ++i) {
    const std::string at = "messages[" + std::to_string(i) + "]";
    const json& x = m[i];
    if (!x.is_object()) throw Bad{at, at + " must be an object"};
    if (!x.contains("role") || !x["role"].is_string()) throw Bad{at + ".role", at + ".role must be a string"};
    if (!roles.count(x["role"].get<std::string>()))
      throw Bad{at + ".role", at + ".role must be one of system, developer, user, assistant, tool"};
    for (auto it = x.begin(); it != x.end(); ++it)
      if (it.key() != "role" && it.key() != "content" && it.key() != "name")
        throw Bad{at + "." + it.key(), at + "." + it.key() + " is not supported"};
    if (!x.contains("content")) throw Bad{at + ".content", at + ".content is required"};
    const json& c = x["content"];
    if (c.is_string()) continue;
    if (!c.is_array()) throw Bad{at + ".content", at + ".content must be a string or an array of text parts"};
    for (size_t k = 0; k < c.size(); ++k) {
      const std::string pat = at + ".content[" + std::to_string(k) + "]";
      if (!c[k].is_object() || !c[k].contains("type") || c[k]["type"] != "text" || !c[k].contains("text") ||
          !c[k]["text"].is_string())
        throw Bad{pat, pat + " must be {\"type\": \"text\", \"text\": string} (only text parts are supported)"};
    }
    if (x.contains("name") && !x["name"].is_string()) throw Bad{at + ".name", at + ".name must be a string"};
  }
}

ApiRequest parse(Endpoint endpoint, const json& j, const ParseLimits& limits) {
  if (!j.is_object()) throw Bad{"", "the request body must be a JSON object"};
  const bool chat = endpoint == Endpoint::kChat;
  static const std::set<std::string> common = {"model", "max_tokens", "temperature", "top_p", "top_k", "seed",
                                               "stop", "stream", "stream_options", "n", "user",
                                               "return_token_ids", "ignore_eos"};
  ApiRequest r;
  r.endpoint = endpoint;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    if (common.count(k)) continue;
    if (chat && (k == "messages" || k == "max_completion_tokens")) continue;
    if (!chat && k == "prompt") continue;
    if (is_default(k, it.value())) continue;
    throw Bad{k, k + " is not supported"};
  }
  if (j.contains("model") && !j["model"].is_null()) {
    if (!j["model"].is_string()) throw Bad{"model", "model must be a string"};
    r.model = j["model"].get<std::string>();
  }
  if (chat) {
    if (!j.contains("messages")) throw Bad{"messages", "messages is required"};
    parse_messages(j["messages"]);
    r.messages = j["messages"];
  } else {
    if (!j.contains("prompt")) throw Bad{"prompt", "prompt is required"};
    const json& p = j["prompt"];
    if (p.is_string()) {
      if (p.get_ref<const std::string&>().empty()) throw Bad{"prompt", "prompt must not be empty"};
      r.prompt_text = p.get<std::string>();
    } else if (p.is_array() && !p.empty() && p[0].is_number()) {
      for (const auto& x : p) {
        if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() > std::numeric_limits<int32_t>::max())
          throw Bad{"prompt", "prompt token ids must be non-negative integers"};
        r.prompt_ids.push_back(int32_t(x.get<int64_t>()));
      }
    } else if (p.is_array() && p.size() == 1 && p[0].is_string() && !p[0].get_ref<const std::string&>().empty()) {
      r.prompt_text = p[0].get<std::string>();
    } else if (p.is_array() && p.size() > 1) {
      throw Bad{"prompt", "prompt: only one prompt per request is supported"};
    } else {
      throw Bad{"prompt", "prompt must be a non-empty string or a non-empty array of token ids"};
    }
  }
  for (const char* key : {"max_tokens", "max_completion_tokens"})
    if (j.contains(key) && !j[key].is_null()) r.max_tokens = integer(j, key, 0, std::numeric_limits<int32_t>::max());
  if (j.contains("temperature") && !j["temperature"].is_null()) r.temperature = number(j, "temperature", 0.0, 100.0);
  if (j.contains("top_p") && !j["top_p"].is_null()) {
    r.top_p = number(j, "top_p", 0.0, 1.0);
    if (r.top_p <= 0) throw Bad{"top_p", "top_p must be > 0"};
  }
  if (j.contains("top_k") && !j["top_k"].is_null()) r.top_k = int(integer(j, "top_k", -1, std::numeric_limits<int32_t>::max()));
  if (j.contains("seed") && !j["seed"].is_null()) {
    const json& v = j["seed"];
    if (!v.is_number_integer()) throw Bad{"seed", "seed must be an integer"};
    r.seed = v.is_number_unsigned() ? v.get<uint64_t>() : uint64_t(v.get<int64_t>());
  }
  if (j.contains("n") && !j["n"].is_null()) {
    if (!j["n"].is_number_integer()) throw Bad{"n", "n must be an integer"};
    if (j["n"].get<int64_t>() != 1) throw Bad{"n", "n: only n = 1 is supported"};
  }
  if (j.contains("user") && !j["user"].is_null() && !j["user"].is_string()) throw Bad{"user", "user must be a string"};
  if (j.contains("stop") && !j["stop"].is_null()) {
    const json& s = j["stop"];
    std::vector<json> items;
    if (s.is_string()) items.push_back(s);
    else if (s.is_array()) items.assign(s.begin(), s.end());
    else throw Bad{"stop", "stop must be a string or an array of strings"};
    if (items.size() > limits.max_stop_strings)
      throw Bad{"stop", "stop holds more than " + std::to_string(limits.max_stop_strings) + " strings"};
    for (const auto& x : items) {
      if (!x.is_string()) throw Bad{"stop", "stop must be a string or an array of strings"};
      const auto& str = x.get_ref<const std::string&>();
      if (str.empty()) throw Bad{"stop", "stop strings must not be empty"};
      if (str.size() > limits.max_stop_length)
        throw Bad{"stop", "stop strings must be at most " + std::to_string(limits.max_stop_length) + " bytes"};
      r.stop.push_back(str);
    }
  }
  if (j.contains("stream") && !j["stream"].is_null()) r.stream = boolean(j, "stream");
  if (j.contains("stream_options") && !j["stream_options"].is_null()) {
    const json& so = j["stream_options"];
    if (!so.is_object()) throw Bad{"stream_options", "stream_options must be an object"};
    if (!r.stream) throw Bad{"stream_options", "stream_options is only allowed with stream: true"};
    for (auto it = so.begin(); it != so.end(); ++it) {
      if (it.key() != "include_usage") throw Bad{"stream_options." + it.key(), "stream_options." + it.key() + " is not supported"};
      if (!it.value().is_boolean()) throw Bad{"stream_options.include_usage", "stream_options.include_usage must be a boolean"};
      r.include_usage = it.value().get<bool>();
    }
  }
  if (j.contains("return_token_ids") && !j["return_token_ids"].is_null()) r.return_token_ids = boolean(j, "return_token_ids");
  if (j.contains("ignore_eos") && !j["ignore_eos"].is_null()) r.ignore_eos = boolean(j, "ignore_eos");
  return r;
}

}  // namespace

nlohmann::json ApiError::to_json() const {
  return {{"error",
           {{"message", message},
            {"type", type},
            {"param", param.empty() ? json(nullptr) : json(param)},
            {"code", code.empty() ? json(nullptr) : json(code)}}}};
}

std::variant<ApiRequest, ApiError> parse_openai_request(Endpoint endpoint, const std::string& body,
                                                        const ParseLimits& limits) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    ApiError e;
    e.message = "the request body is not valid JSON";
    return e;
  }
  try {
    return parse(endpoint, j, limits);
  } catch (const Bad& b) {
    ApiError e;
    e.message = b.message;
    e.param = b.param;
    return e;
  } catch (const std::exception& ex) {  // a type error of the json library: still a 400
    ApiError e;
    e.message = std::string("invalid request: ") + ex.what();
    return e;
  }
}

}  // namespace g4c::serve

// libFuzzer target of the chat template engine. The first input byte picks the mode:
//   even: the rest is template text, parsed and rendered on a fixed conversation;
//   odd:  the rest is JSON, rendered as `messages` (or as the whole variable set when it
//         is an object) by one of the real templates (picked by the second byte).
// Every input must render or throw g4c::Error; ASan/UBSan catch the rest. Limits are small
// so that runaway templates end quickly.
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/chat_template_ast.h"
#include "models/chat_template_eval.h"
#include "models/error.h"

namespace {

using namespace g4c::models::jinja;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Fixture {
  std::vector<Body> templates;
  Value messages;
  Limits limits;
  Fixture() {
    const std::string src = G4C_FUZZ_SOURCE_DIR;
    std::vector<std::string> sources = {
        nlohmann::json::parse(read_file(src + "/tokenizers/gemma3/tokenizer_config.json")).at("chat_template"),
        read_file(src + "/tests/models/chat_templates/gemma4_tools.jinja"),
    };
    for (const auto& s : sources) templates.push_back(parse(tokenize(s, "fuzz"), "fuzz"));
    messages = Value::from_json(nlohmann::json::parse(R"([
      {"role": "system", "content": "sys"},
      {"role": "user", "content": [{"type": "text", "text": " hi 👋 "}, {"type": "image"}]},
      {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": {"a": [1, 2.5, null]}}}]},
      {"role": "tool", "name": "f", "content": {"ok": true}},
      {"role": "assistant", "content": "done"},
      {"role": "user", "content": "again"}])"));
    limits.max_string_bytes = size_t(1) << 20;
    limits.max_list_items = 1 << 14;
    limits.max_steps = 200'000;
    limits.max_call_depth = 32;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Fixture fx;
  if (size < 2) return 0;
  const std::string rest(reinterpret_cast<const char*>(data) + 2, size - 2);
  std::vector<std::pair<std::string, Value>> globals = {
      {"bos_token", Value::string("<bos>")},
      {"eos_token", Value::string("<eos>")},
      {"add_generation_prompt", Value::boolean(data[1] & 1)},
  };
  try {
    if ((data[0] & 1) == 0) {
      const Body body = parse(tokenize(rest, "fuzz"), "fuzz");
      globals.emplace_back("messages", fx.messages);
      globals.emplace_back("tools", Value::from_json(nlohmann::json::parse(R"([{"function": {"name": "f"}}])")));
      const std::string out = render(body, "fuzz", globals, fx.limits);
      if (out.size() > fx.limits.max_string_bytes) __builtin_trap();  // the output limit must hold
    } else {
      const auto j = nlohmann::json::parse(rest, nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded()) return 0;
      if (j.is_object()) {
        for (auto it = j.begin(); it != j.end(); ++it) globals.emplace_back(it.key(), Value::from_json(it.value()));
      } else {
        globals.emplace_back("messages", Value::from_json(j));
      }
      const Body& body = fx.templates[(data[1] >> 1) % fx.templates.size()];
      render(body, "fuzz", globals, fx.limits);
    }
  } catch (const g4c::Error&) {
  }
  return 0;
}

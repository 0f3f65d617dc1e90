// ChatTemplate: loading a model's chat template, rendering messages, and the end-of-turn
// strings of the template.
//
// End of turn. The rule: render the template on a probe conversation (one user turn, one
// assistant turn with a sentinel content, no generation prompt); the text the template
// writes right after the assistant's content, up to the next whitespace, is the end-of-turn
// string ("<end_of_turn>" for Gemma). A model folder adds the strings of the ids listed as
// eos_token_id in generation_config.json (mapped through tokenizer_config.json's
// added_tokens_decoder), other than the EOS token itself.
#include "models/chat_template.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "models/chat_template_ast.h"
#include "models/chat_template_eval.h"
#include "models/error.h"

namespace g4c::models {

struct ChatTemplate::Impl {
  std::string origin;
  jinja::Body body;
  std::string bos_token, eos_token;
  std::vector<std::string> end_of_turn;
  jinja::Limits limits;
};

namespace {

constexpr const char* kProbe = "g4cEndOfTurnProbe";

std::string read_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw g4c::Error(path.string() + ": is a directory, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw g4c::Error(path.string() + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw g4c::Error(path.string() + ": read error");
  return ss.str();
}

// A special token in tokenizer_config.json: a string or an AddedToken {"content": ...}.
std::string token_string(const nlohmann::json& config, const char* key, const std::filesystem::path& path) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) return (*it)["content"].get<std::string>();
  throw g4c::Error(path.string() + ": field '" + key + "' must be a string or an object with a string 'content'");
}

void derive_end_of_turn(ChatTemplate::Impl& impl) {
  const nlohmann::json probe = nlohmann::json::array(
      {{{"role", "user"}, {"content", "hello"}}, {{"role", "assistant"}, {"content", kProbe}}});
  std::string text;
  try {
    text = jinja::render(impl.body, impl.origin,
                         {{"messages", jinja::Value::from_json(probe)},
                          {"bos_token", jinja::Value::string(impl.bos_token)},
                          {"eos_token", jinja::Value::string(impl.eos_token)},
                          {"add_generation_prompt", jinja::Value::boolean(false)}},
                         impl.limits);
  } catch (const g4c::Error&) {
    return;  // a template that rejects the probe (e.g. needs a system turn): no derived string
  }
  const size_t at = text.rfind(kProbe);
  if (at == std::string::npos) return;
  size_t b = at + std::string(kProbe).size();
  while (b < text.size() && (text[b] == ' ' || text[b] == '\n' || text[b] == '\t' || text[b] == '\r')) ++b;
  size_t e = b;
  while (e < text.size() && text[e] != ' ' && text[e] != '\n' && text[e] != '\t' && text[e] != '\r') ++e;
  if (e > b) impl.end_of_turn.push_back(text.substr(b, e - b));
}

void add_unique(std::vector<std::string>& list, const std::string& s) {
  if (!s.empty() && std::find(list.begin(), list.end(), s) == list.end()) list.push_back(s);
}

}  // namespace

ChatTemplate::ChatTemplate(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;
ChatTemplate::~ChatTemplate() = default;

ChatTemplate ChatTemplate::parse(const std::string& source, std::string bos_token, std::string eos_token) {
  auto impl = std::make_unique<Impl>();
  impl->origin = "chat template";
  impl->body = jinja::parse(jinja::tokenize(source, impl->origin), impl->origin);
  impl->bos_token = std::move(bos_token);
  impl->eos_token = std::move(eos_token);
  derive_end_of_turn(*impl);
  return ChatTemplate(std::move(impl));
}

ChatTemplate ChatTemplate::load(const std::filesystem::path& model_dir) {
  const auto config_path = model_dir / "tokenizer_config.json";
  const auto jinja_path = model_dir / "chat_template.jinja";
  nlohmann::json config = nlohmann::json::object();
  std::error_code ec;
  if (std::filesystem::exists(config_path, ec)) {
    try {
      config = nlohmann::json::parse(read_file(config_path));
    } catch (const nlohmann::json::exception& e) {
      throw g4c::Error(config_path.string() + ": not valid JSON: " + e.what());
    }
    if (!config.is_object()) throw g4c::Error(config_path.string() + ": expected a JSON object");
  }
  std::string source, origin;
  if (std::filesystem::exists(jinja_path, ec)) {
    source = read_file(jinja_path);
    origin = jinja_path.string();
  } else if (config.contains("chat_template")) {
    const auto& t = config["chat_template"];
    origin = config_path.string() + " (chat_template)";
    if (t.is_string()) {
      source = t.get<std::string>();
    } else if (t.is_array()) {
      bool found = false;
      for (const auto& entry : t) {
        if (entry.is_object() && entry.value("name", "") == "default" && entry.contains("template") &&
            entry["template"].is_string()) {
          source = entry["template"].get<std::string>();
          found = true;
        }
      }
      if (!found) throw g4c::Error(config_path.string() + ": field 'chat_template' is a list without an entry named \"default\"");
      origin = config_path.string() + " (chat_template \"default\")";
    } else {
      throw g4c::Error(config_path.string() + ": field 'chat_template' must be a string or a list of {name, template}");
    }
  } else {
    throw g4c::Error(model_dir.string() + ": no chat template (neither chat_template.jinja nor a 'chat_template' field in tokenizer_config.json)");
  }
  auto impl = std::make_unique<Impl>();
  impl->origin = origin;
  impl->body = jinja::parse(jinja::tokenize(source, origin), origin);
  impl->bos_token = token_string(config, "bos_token", config_path);
  impl->eos_token = token_string(config, "eos_token", config_path);
  derive_end_of_turn(*impl);

  // The hint of generation_config.json: its EOS ids that name added tokens.
  const auto gen_path = model_dir / "generation_config.json";
  if (std::filesystem::exists(gen_path, ec) && config.contains("added_tokens_decoder") &&
      config["added_tokens_decoder"].is_object()) {
    nlohmann::json gen;
    try {
      gen = nlohmann::json::parse(read_file(gen_path));
    } catch (const nlohmann::json::exception& e) {
      throw g4c::Error(gen_path.string() + ": not valid JSON: " + e.what());
    }
    std::vector<int64_t> ids;
    if (gen.is_object() && gen.contains("eos_token_id")) {
      const auto& eos = gen["eos_token_id"];
      if (eos.is_number_integer()) ids.push_back(eos.get<int64_t>());
      if (eos.is_array())
        for (const auto& x : eos)
          if (x.is_number_integer()) ids.push_back(x.get<int64_t>());
    }
    const auto& decoder = config["added_tokens_decoder"];
    for (int64_t id : ids) {
      auto it = decoder.find(std::to_string(id));
      if (it == decoder.end() || !it->is_object() || !it->contains("content") || !(*it)["content"].is_string()) continue;
      const std::string content = (*it)["content"].get<std::string>();
      if (content != impl->eos_token) add_unique(impl->end_of_turn, content);
    }
  }
  return ChatTemplate(std::move(impl));
}

std::string ChatTemplate::render(const nlohmann::json& messages, const ChatRenderOptions& opts) const {
  if (!messages.is_array()) throw g4c::Error(impl_->origin + ": messages must be a JSON array");
  if (!opts.extra.is_object()) throw g4c::Error(impl_->origin + ": extra template variables must be a JSON object");
  std::vector<std::pair<std::string, jinja::Value>> globals = {
      {"messages", jinja::Value::from_json(messages)},
      {"bos_token", jinja::Value::string(impl_->bos_token)},
      {"eos_token", jinja::Value::string(impl_->eos_token)},
      {"add_generation_prompt", jinja::Value::boolean(opts.add_generation_prompt)},
  };
  for (auto it = opts.extra.begin(); it != opts.extra.end(); ++it) {
    for (const auto& [name, v] : globals)
      if (name == it.key())
        throw g4c::Error(impl_->origin + ": extra template variable '" + it.key() + "' clashes with a built-in variable");
    globals.emplace_back(it.key(), jinja::Value::from_json(it.value()));
  }
  return jinja::render(impl_->body, impl_->origin, globals, impl_->limits);
}

const std::vector<std::string>& ChatTemplate::end_of_turn() const { return impl_->end_of_turn; }

}  // namespace g4c::models

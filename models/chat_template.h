// Chat templates: the model's own Jinja `chat_template` (tokenizer_config.json or
// chat_template.jinja) rendered by a Jinja engine that implements the subset real Gemma chat
// templates use. A construct outside that subset is an error at parse time (naming the line
// and the construct), never a silently wrong prompt.
//
//   auto tpl = ChatTemplate::load(model_dir);            // throws models::Error when absent/bad
//   std::string prompt = tpl.render(messages, {.add_generation_prompt = true});
//
// `messages` is the OpenAI-style array [{"role": "...", "content": "..." | [parts]}, ...];
// rendering binds messages, bos_token, eos_token, add_generation_prompt (and any `extra`
// variables, e.g. tools) and applies raise_exception() as a models::Error.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace g4c::models {

struct ChatRenderOptions {
  bool add_generation_prompt = true;
  nlohmann::json extra = nlohmann::json::object();  // further top-level variables (tools, ...)
};

class ChatTemplate {
 public:
  // Parses template source; throws models::Error on syntax outside the supported subset.
  static ChatTemplate parse(const std::string& source, std::string bos_token, std::string eos_token);
  // The template of a model folder: chat_template.jinja, else tokenizer_config.json's
  // "chat_template" (a string, or the entry named "default" of a list); bos/eos tokens from
  // tokenizer_config.json.
  static ChatTemplate load(const std::filesystem::path& model_dir);

  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;
  ~ChatTemplate();

  std::string render(const nlohmann::json& messages, const ChatRenderOptions& opts = {}) const;
  // The strings that end an assistant turn in this template (e.g. "<end_of_turn>"), which a
  // chat answer stops at besides the model's EOS ids.
  const std::vector<std::string>& end_of_turn() const;

  struct Impl;

 private:
  explicit ChatTemplate(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace g4c::models

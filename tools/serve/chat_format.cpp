// Loading a model's chat template as a ChatFormat (see chat_format.h).
#include "tools/serve/chat_format.h"

#include <memory>

#if G4C_HAVE_CHAT_TEMPLATE
#include "models/chat_template.h"
#endif

namespace g4c::serve {

ChatFormat load_chat_format(const std::filesystem::path& model_dir, std::string* note) {
  ChatFormat f;
#if G4C_HAVE_CHAT_TEMPLATE
  const bool has = std::filesystem::exists(model_dir / "chat_template.jinja") ||
                   std::filesystem::exists(model_dir / "tokenizer_config.json");
  if (!has) {
    if (note) *note = "no chat template in " + model_dir.string() + ": /v1/chat/completions answers 400";
    return f;
  }
  auto tpl = std::make_shared<models::ChatTemplate>(models::ChatTemplate::load(model_dir));
  f.end_of_turn = tpl->end_of_turn();
  f.render = [tpl](const nlohmann::json& messages) { return tpl->render(messages, {.add_generation_prompt = true}); };
#else
  if (note) *note = "this build has no chat template engine: /v1/chat/completions answers 400";
#endif
  return f;
}

}  // namespace g4c::serve

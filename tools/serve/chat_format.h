// The chat format of a model folder: its chat template (models/chat_template.h) as the
// server's ChatFormat. Without a template (or in a build without the template engine) the
// format is empty and chat requests answer 400 naming `messages`.
#pragma once

#include <filesystem>
#include <string>

#include "tools/serve/server.h"

namespace g4c::serve {

// Throws g4c::Error when the folder has a template the engine cannot parse.
ChatFormat load_chat_format(const std::filesystem::path& model_dir, std::string* note);

}  // namespace g4c::serve

// Evaluator of the chat template engine (internal to models/chat_template*.cpp).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "models/chat_template_ast.h"
#include "models/chat_template_builtins.h"
#include "models/chat_template_value.h"

namespace g4c::models::jinja {

// Renders parsed statements with the given top-level variables. Runtime errors, limits and
// raise_exception() throw g4c::Error naming `origin` and the template line.
std::string render(const Body& body, const std::string& origin, const std::vector<std::pair<std::string, Value>>& globals,
                   const Limits& limits);

}  // namespace g4c::models::jinja

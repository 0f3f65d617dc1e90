// g4c compile — placeholder until its issue lands; says so and exits non-zero.
#include "tools/cli.h"

namespace g4c::cli {

void add_compile_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("compile", "compile (not implemented yet)");
  cmd->allow_extras();
  cmd->callback([] { throw NotImplemented{"compile"}; });
}

}  // namespace g4c::cli

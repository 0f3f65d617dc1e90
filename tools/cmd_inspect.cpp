// g4c inspect — placeholder until its issue lands; says so and exits non-zero.
#include "tools/cli.h"

namespace g4c::cli {

void add_inspect_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("inspect", "inspect (not implemented yet)");
  cmd->allow_extras();
  cmd->callback([] { throw NotImplemented{"inspect"}; });
}

}  // namespace g4c::cli

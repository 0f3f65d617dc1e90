// g4c opt — placeholder until its issue lands; says so and exits non-zero.
#include "tools/cli.h"

namespace g4c::cli {

void add_opt_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("opt", "opt (not implemented yet)");
  cmd->allow_extras();
  cmd->callback([] { throw NotImplemented{"opt"}; });
}

}  // namespace g4c::cli

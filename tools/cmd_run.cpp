// g4c run — placeholder until its issue lands; says so and exits non-zero.
#include "tools/cli.h"

namespace g4c::cli {

void add_run_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("run", "run (not implemented yet)");
  cmd->allow_extras();
  cmd->callback([] { throw NotImplemented{"run"}; });
}

}  // namespace g4c::cli

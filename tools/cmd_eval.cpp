// g4c eval — placeholder until its issue lands; says so and exits non-zero.
#include "tools/cli.h"

namespace g4c::cli {

void add_eval_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("eval", "eval (not implemented yet)");
  cmd->allow_extras();
  cmd->callback([] { throw NotImplemented{"eval"}; });
}

}  // namespace g4c::cli

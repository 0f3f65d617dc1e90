// g4c synth — placeholder until its issue lands; says so and exits non-zero.
#include "tools/cli.h"

namespace g4c::cli {

void add_synth_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("synth", "synth (not implemented yet)");
  cmd->allow_extras();
  cmd->callback([] { throw NotImplemented{"synth"}; });
}

}  // namespace g4c::cli

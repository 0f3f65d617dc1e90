// g4c bench — placeholder until its issue lands; says so and exits non-zero.
#include "tools/cli.h"

namespace g4c::cli {

void add_bench_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "bench (not implemented yet)");
  cmd->allow_extras();
  cmd->callback([] { throw NotImplemented{"bench"}; });
}

}  // namespace g4c::cli

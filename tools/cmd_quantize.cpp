// g4c quantize — placeholder until its issue lands; says so and exits non-zero.
#include "tools/cli.h"

namespace g4c::cli {

void add_quantize_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("quantize", "quantize (not implemented yet)");
  cmd->allow_extras();
  cmd->callback([] { throw NotImplemented{"quantize"}; });
}

}  // namespace g4c::cli

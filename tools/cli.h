// Shared pieces of the g4c CLI: each subcommand lives in its own cmd_<name>.cpp
// and registers itself on the CLI11 app with add_<name>_command().
#pragma once

#include <CLI/CLI.hpp>

namespace g4c::cli {

void add_compile_command(CLI::App& app);
void add_opt_command(CLI::App& app);
void add_run_command(CLI::App& app);
void add_quantize_command(CLI::App& app);
void add_eval_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_synth_command(CLI::App& app);
void add_inspect_command(CLI::App& app);

// Thrown by a subcommand that is not implemented yet: main prints it and exits 2.
struct NotImplemented {
  const char* command;
};

}  // namespace g4c::cli

// g4c — Gemma 4 dataflow graph compiler and runtime. Entry point of the CLI.
#include <cstdio>
#include <cstring>
#include <exception>

#include "models/error.h"
#include "tools/cli.h"

namespace g4c::cli {
int run_opt(int argc, char** argv);  // tools/cmd_opt.cpp
void add_serve_command(CLI::App& app);    // tools/cmd_serve.cpp
void add_chat_command(CLI::App& app);     // tools/cmd_chat.cpp
void add_loadgen_command(CLI::App& app);  // tools/cmd_loadgen.cpp
}

int main(int argc, char** argv) {
  // `g4c opt` is an MlirOptMain-style tool with its own (LLVM) option parser:
  // hand it the raw argv instead of going through CLI11.
  if (argc >= 2 && std::strcmp(argv[1], "opt") == 0) return g4c::cli::run_opt(argc - 1, argv + 1);
  CLI::App app{"g4c — compiler and runtime for Gemma 4 text models"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "g4c 0.1");
  g4c::cli::add_compile_command(app);
  g4c::cli::add_opt_command(app);
  g4c::cli::add_run_command(app);
  g4c::cli::add_quantize_command(app);
  g4c::cli::add_eval_command(app);
  g4c::cli::add_bench_command(app);
  g4c::cli::add_synth_command(app);
  g4c::cli::add_inspect_command(app);
  g4c::cli::add_serve_command(app);
  g4c::cli::add_chat_command(app);
  g4c::cli::add_loadgen_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const g4c::cli::NotImplemented& e) {
    std::fprintf(stderr, "g4c %s: not implemented yet\n", e.command);
    return 2;
  } catch (const g4c::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "internal error: %s\n", e.what());
    return 3;
  }
  return 0;
}

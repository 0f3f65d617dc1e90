// g4c opt — an mlir-opt for the g4 dialect: parses a .mlir file, runs the
// passes named on the command line (--g4-fuse-dequant-gemm, --pass-pipeline=...,
// --mlir-print-ir-after-all, --split-input-file, --verify-diagnostics, ...) and
// prints the result. It uses LLVM's own option parser: main() hands it argv
// before CLI11 sees it; the CLI11 subcommand below only lists it in `g4c --help`.
#include "ir/G4Dialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "passes/Passes.h"
#include "tools/cli.h"

namespace g4c::cli {

void add_opt_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("opt", "run g4 passes on a .mlir file (mlir-opt options; see `g4c opt --help`)");
  cmd->allow_extras();
}

// argv[0] is "opt"; the rest are mlir-opt style arguments.
int run_opt(int argc, char** argv) {
  mlir::DialectRegistry registry;
  registry.insert<g4c::g4::G4Dialect, mlir::func::FuncDialect>();
  g4c::passes::registerG4Passes();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  return mlir::asMainReturnCode(mlir::MlirOptMain(argc, argv, "g4c opt: g4 dialect optimizer\n", registry));
}

}  // namespace g4c::cli

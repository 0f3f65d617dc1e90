// The default `g4c compile` pipeline and its per-pass dumps.
#include "passes/Pipeline.h"

#include <cstdio>
#include <filesystem>
#include <mutex>

#include "llvm/Support/raw_ostream.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "passes/Passes.h"

namespace g4c::passes {

std::vector<std::string> pipeline_passes(const PipelineOptions& o) {
  auto n = [](int64_t v) { return std::to_string(v); };
  std::vector<std::string> p = o.pre_passes;
  p.push_back(std::string("g4-fuse-dequant-gemm{fuse-gate-up=") + (o.fuse_gate_up ? "true" : "false") + "}");
  p.push_back("g4-fuse-attention-mask");
  p.push_back("g4-fuse-lm-head");
  if (o.table_dtype != "bf16") p.push_back("g4-quantize-table{dtype=" + o.table_dtype + "}");
  p.push_back("g4-fuse-norm-residual");
  p.push_back("g4-plan-kv{block-size=" + n(o.kv_block_size) + " max-chunk=" + n(o.max_chunk) + " max-seqs=" +
              n(o.max_seqs) + " max-seq-len=" + n(o.max_seq_len) + " sliding-kv=" + o.sliding_kv +
              (o.kv_dtype == "auto" ? "" : " kv-dtype=" + o.kv_dtype) + "}");
  p.push_back("g4-fuse-qk-norm-rope");
  p.push_back("g4-plan-buckets{max-seqs=" + n(o.max_seqs) + " max-chunk=" + n(o.max_chunk) +
              " graph-max-tokens=" + n(o.graph_max_tokens) + "}");
  p.push_back("g4-plan-memory{max-seq-len=" + n(o.max_seq_len) + "}");
  p.push_back("g4-plan-offload{budget-mib=" + n(o.budget_mib) + " context-mib=" + n(o.context_mib) +
              " workspace-mib=" + n(o.workspace_mib) + " graph-pool-mib=" + n(o.graph_pool_mib) + "}");
  return p;
}

void register_passes_once() {
  static std::once_flag once;
  std::call_once(once, [] { registerG4Passes(); });
}

namespace {

bool dump(mlir::ModuleOp module, const std::filesystem::path& file, std::string* diagnostics) {
  std::error_code ec;
  llvm::raw_fd_ostream os(file.string(), ec);
  if (ec) {
    *diagnostics += "cannot write " + file.string() + ": " + ec.message() + "\n";
    return false;
  }
  module.print(os);
  return true;
}

}  // namespace

bool run_pipeline(mlir::ModuleOp module, const PipelineOptions& opts, const std::string& dump_dir,
                  std::string* diagnostics) {
  register_passes_once();
  mlir::MLIRContext* ctx = module.getContext();
  std::string captured;
  mlir::ScopedDiagnosticHandler handler(ctx, [&](mlir::Diagnostic& diag) {
    llvm::raw_string_ostream os(captured);
    os << diag << "\n";
    return mlir::success();
  });
  std::filesystem::path dir(dump_dir);
  if (!dump_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) {
      *diagnostics = "cannot create " + dump_dir + ": " + ec.message();
      return false;
    }
    if (!dump(module, dir / "00-frontend.mlir", diagnostics)) return false;
  }
  int index = 1;
  for (const std::string& pass : pipeline_passes(opts)) {
    mlir::PassManager pm(ctx, "builtin.module");
    std::string parseErrors;
    llvm::raw_string_ostream errs(parseErrors);
    if (mlir::failed(mlir::parsePassPipeline(pass, pm, errs))) {
      *diagnostics = "bad pass pipeline element '" + pass + "': " + parseErrors;
      return false;
    }
    if (mlir::failed(pm.run(module))) {
      *diagnostics = "pass " + pass + " failed:\n" + captured;
      return false;
    }
    if (!dump_dir.empty()) {
      const std::string name = pass.substr(0, pass.find('{'));
      char prefix[8];
      std::snprintf(prefix, sizeof prefix, "%02d-", index);
      if (!dump(module, dir / (prefix + name + ".mlir"), diagnostics)) return false;
    }
    ++index;
  }
  return true;
}

}  // namespace g4c::passes

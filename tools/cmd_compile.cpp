// g4c compile — builds the g4 graph of a checkpoint (frontend), runs the fusion
// and planning passes under a device budget, prints the memory table, and with
// -o writes the executable plan (codegen).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>

#include "frontend/Frontend.h"
#include "ir/G4Dialect.h"
#include "mlir/IR/MLIRContext.h"
#include "models/error.h"
#include "passes/MemoryTable.h"
#include "passes/Pipeline.h"
#include "tools/cli.h"
#include "codegen/Codegen.h"
#include "models/safetensors.h"
#include "runtime/plan/plan.h"
#include "tools/compile_plan.h"

namespace g4c::cli {

namespace {

struct CompileArgs {
  std::string model;
  std::string budget = "9984MiB";
  std::string dump_dir;
  std::string output;
  passes::PipelineOptions pipeline;
  bool bf16_activations = false;
  std::string table_dtype = "auto";
};

// "9984MiB", "10GiB", "9.5GB", "512MB", "1048576" (bytes) -> MiB (rounded down).
int64_t parse_budget_mib(const std::string& text) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  const std::string unit = text.substr(used);
  static const std::map<std::string, double> units = {
      {"", 1.0},        {"B", 1.0},         {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0},
      {"KB", 1e3},      {"MB", 1e6},        {"GB", 1e9},     {"K", 1024.0},      {"M", 1048576.0},
      {"G", 1073741824.0}};
  auto it = units.find(unit);
  if (used == 0 || it == units.end() || !(value > 0) || !std::isfinite(value))
    throw Error("--budget '" + text + "': expected a size like 9984MiB, 10GiB or 9.5GB");
  return int64_t(value * it->second / 1048576.0);
}

void run_compile(const CompileArgs& args) {
  const auto start = std::chrono::steady_clock::now();
  passes::PipelineOptions opts = args.pipeline;
  opts.budget_mib = parse_budget_mib(args.budget);
  // GPU plans store K/V as FP8 and the table as INT8 unless asked otherwise, as `g4c run/bench` on
  // cuda compile them.
  opts.kv_dtype = cli::resolve_kv_dtype(opts.kv_dtype, args.bf16_activations);
  opts.table_dtype = cli::resolve_table_dtype(args.table_dtype, args.bf16_activations);

  mlir::MLIRContext ctx(mlir::MLIRContext::Threading::DISABLED);
  frontend::FrontendOptions fopts;
  fopts.bf16_activations = args.bf16_activations;
  const models::ModelConfig cfg = models::load_model_config(args.model);
  auto module = frontend::build_decoder(ctx, cfg, frontend::checkpoint_weights(cfg, args.model), fopts);

  std::string diagnostics;
  if (!passes::run_pipeline(*module, opts, args.dump_dir, &diagnostics))
    throw Error("compile " + args.model + ": " + diagnostics);

  int64_t attention = 0, linears = 0, int4_linears = 0, streamed = 0, int8_tables = 0;
  module->walk([&](mlir::Operation* op) {
    if (mlir::isa<g4::AttentionOp>(op)) ++attention;
    if (mlir::isa<g4::LinearOp, g4::GateUpOp>(op)) ++linears;
    if (auto w = mlir::dyn_cast<g4::WeightOp>(op)) {
      if (w.getQuant()) ++int4_linears;
      if (w.getInt8Rows()) ++int8_tables;
      if (w.isStreamed()) ++streamed;
    }
  });
  int sliding = 0;
  for (const auto& l : cfg.layers) sliding += l.kind == models::LayerKind::Sliding;
  std::printf("model %s: %s, %d layers (%d sliding, %d full), hidden %d, vocab %d\n", args.model.c_str(),
              cfg.model_type.c_str(), cfg.num_layers, sliding, cfg.num_layers - sliding, cfg.hidden_size,
              cfg.vocab_size);
  std::printf("graph: %lld attention ops, %lld linear ops, %lld INT4 weights, %lld INT8 tables, %lld streamed weights\n",
              (long long)attention, (long long)linears, (long long)int4_linears, (long long)int8_tables,
              (long long)streamed);
  if (auto kv = (*module)->getAttrOfType<mlir::DictionaryAttr>("g4.kv")) {
    auto get = [&](const char* k) { return double(kv.getAs<mlir::IntegerAttr>(k).getInt()) / 1024.0; };
    std::printf("KV: sliding layers %.2f KiB/token, full layers %.2f KiB/token; %d sequences, chunk %lld%s\n",
                get("sliding_bytes_per_token"), get("full_bytes_per_token"), int(opts.max_seqs),
                (long long)opts.max_chunk, opts.kv_dtype == "auto" ? "" : ("; " + opts.kv_dtype).c_str());
  }
  passes::MemoryTable table;
  if (passes::readMemoryTable(*module, &table)) std::printf("%s", passes::formatMemoryTable(table).c_str());
  if (!args.output.empty()) {
    // The plan is tied to this checkpoint by the runtime's fingerprint; the loader
    // verifies the bytes (ids, version) before they are written.
    auto ckpt = models::Checkpoint::open(args.model, /*header_only=*/true);
    codegen::CodegenOptions copts;
    copts.format_version = plan::kPlanFormatVersion;
    copts.fingerprint = plan::checkpoint_fingerprint(cfg, *ckpt, &copts.fingerprint_text);
    copts.kv_bf16 = args.bf16_activations;
    plan::Plan p = plan::Plan::from_bytes(codegen::emit_plan(*module, cfg, copts), args.output);
    p.save(args.output);
    std::printf("plan: %u steps, %u values, %u buckets -> %s\n", p->program()->size(), p->values()->size(),
                p->buckets()->size(), args.output.c_str());
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("compiled in %.2f s%s\n", seconds,
              args.dump_dir.empty() ? "" : (", dumps in " + args.dump_dir).c_str());
}

}  // namespace

plan::Plan compile_plan(const std::string& model_dir, const passes::PipelineOptions& opts, bool bf16_activations,
                        const std::string& dump_dir) {
  mlir::MLIRContext ctx(mlir::MLIRContext::Threading::DISABLED);
  frontend::FrontendOptions fopts;
  fopts.bf16_activations = bf16_activations;
  const models::ModelConfig cfg = models::load_model_config(model_dir);
  auto module = frontend::build_decoder(ctx, cfg, frontend::checkpoint_weights(cfg, model_dir), fopts);
  std::string diagnostics;
  if (!passes::run_pipeline(*module, opts, dump_dir, &diagnostics))
    throw Error("compile " + model_dir + ": " + diagnostics);
  auto ckpt = models::Checkpoint::open(model_dir, /*header_only=*/true);
  codegen::CodegenOptions copts;
  copts.format_version = plan::kPlanFormatVersion;
  copts.fingerprint = plan::checkpoint_fingerprint(cfg, *ckpt, &copts.fingerprint_text);
  copts.kv_bf16 = bf16_activations;
  return plan::Plan::from_bytes(codegen::emit_plan(*module, cfg, copts), model_dir + " (compiled in process)");
}

void add_compile_command(CLI::App& app) {
  auto args = std::make_shared<CompileArgs>();
  auto* cmd = app.add_subcommand("compile", "compile a checkpoint to a plan: g4 graph, fusion, memory planning");
  cmd->add_option("--model", args->model, "checkpoint directory (config.json + safetensors [+ manifest.json])")
      ->required();
  cmd->add_option("--budget", args->budget, "device memory budget (e.g. 9984MiB, 10GiB)")->capture_default_str();
  cmd->add_option("--dump-after-all", args->dump_dir, "write the module after every pass into this folder");
  cmd->add_option("-o,--output", args->output, "write the executable plan (.g4p)");
  cmd->add_option("--max-batch", args->pipeline.max_seqs, "sequences alive at once")->capture_default_str();
  cmd->add_option("--max-chunk", args->pipeline.max_chunk, "prefill chunk (tokens per sequence per step)")
      ->capture_default_str();
  cmd->add_option("--max-sequence-length", args->pipeline.max_seq_len, "longest sequence")->capture_default_str();
  cmd->add_option("--kv-block-size", args->pipeline.kv_block_size, "paged KV block size")->capture_default_str();
  cmd->add_option("--graph-max-tokens", args->pipeline.graph_max_tokens,
                  "largest prefill step replayed as a CUDA graph (0: prefill runs eagerly)")
      ->capture_default_str();
  cmd->add_option("--context-mib", args->pipeline.context_mib, "CUDA context estimate")->capture_default_str();
  cmd->add_option("--workspace-mib", args->pipeline.workspace_mib, "workspace estimate")->capture_default_str();
  cmd->add_option("--graph-pool-mib", args->pipeline.graph_pool_mib, "CUDA graph pool estimate")
      ->capture_default_str();
  cmd->add_flag("--bf16-activations", args->bf16_activations, "BF16 activations (GPU) instead of f32");
  cli::add_kv_dtype_option(cmd, args->pipeline.kv_dtype, "F32 with f32 activations, FP8 with --bf16-activations");
  cli::add_table_dtype_option(cmd, args->table_dtype, "int8 with --bf16-activations, the GPU plan; else bf16");
  cmd->callback([args] { run_compile(*args); });
}

}  // namespace g4c::cli

// Shared pieces of the g4c CLI: each subcommand lives in its own cmd_<name>.cpp
// and registers itself on the CLI11 app with add_<name>_command().
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace g4c::cli {

void add_compile_command(CLI::App& app);
void add_opt_command(CLI::App& app);
void add_run_command(CLI::App& app);
void add_quantize_command(CLI::App& app);
void add_eval_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_synth_command(CLI::App& app);
void add_inspect_command(CLI::App& app);

// --kv-dtype auto|bf16|fp8 into `target`; `auto_means` says what auto stores for this command.
inline CLI::Option* add_kv_dtype_option(CLI::App* cmd, std::string& target, const std::string& auto_means) {
  return cmd
      ->add_option("--kv-dtype", target,
                   "KV cache storage: auto (" + auto_means +
                       "), bf16, or fp8 (E4M3 codes, an fp32 scale per token and kv head: about half "
                       "the bytes of bf16)")
      ->check(CLI::IsMember({"auto", "bf16", "fp8"}))
      ->capture_default_str();
}

// --table-dtype auto|bf16|int8 into `target`; `auto_means` says what auto stores for this command.
inline CLI::Option* add_table_dtype_option(CLI::App* cmd, std::string& target, const std::string& auto_means) {
  return cmd
      ->add_option("--table-dtype", target,
                   "embedding / LM head table storage: auto (" + auto_means +
                       "), bf16, or int8 (codes and an fp32 scale per row, quantized at load: half "
                       "the bytes of bf16)")
      ->check(CLI::IsMember({"auto", "bf16", "int8"}))
      ->capture_default_str();
}

// The KV storage --kv-dtype asks for. auto is `fp8` for a GPU plan: within the quality bounds of
// BENCHMARKS.md (tiny model ΔNLL +0.001 against BF16 KV, 12B logits cosine >= 0.9994, the same
// tokens on performance_public) and faster on every benchmark set; otherwise auto stays auto,
// which g4-plan-kv stores as F32 in a CPU plan.
inline std::string resolve_kv_dtype(const std::string& option, bool gpu_plan) {
  return option == "auto" && gpu_plan ? "fp8" : option;
}

// The table storage --table-dtype asks for. auto is `int8` for a GPU plan: half the table's bytes
// (Gemma-4-12B: 1.0 GB more for KV, half the LM head's bytes per decode step) for ΔNLL +0.0001 on
// the tiny model, the 12B's logits at cosine 0.9996 to the BF16 table's and performance_large
// 1.15× faster (docs/QUANTIZATION.md "The table", BENCHMARKS.md). A CPU plan keeps the
// checkpoint's BF16 table: memory does not bind there, and its weight store holds fp32 values
// either way.
inline std::string resolve_table_dtype(const std::string& option, bool gpu_plan) {
  if (option != "auto") return option;
  return gpu_plan ? "int8" : "bf16";
}

// Thrown by a subcommand that is not implemented yet: main prints it and exits 2.
struct NotImplemented {
  const char* command;
};

}  // namespace g4c::cli

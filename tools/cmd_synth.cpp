// g4c synth — writes a synthetic Gemma 4 checkpoint (HF bf16 layout or the lab's INT4
// format), seeded and deterministic; --header-only writes headers without data so the
// compiler can be tested at full size anywhere. The work is in models/synth.cpp.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "models/error.h"
#include "models/progress.h"
#include "models/synth.h"
#include "tools/cli.h"

namespace g4c::cli {

namespace fs = std::filesystem;

namespace {

struct SynthArgs {
  std::string preset = "gemma4-tiny";
  std::string dtype = "bf16";
  int group_size = 128;
  bool symmetric = true;
  bool asymmetric = false;
  std::string scale_dtype = "f16";
  uint64_t seed = 0;
  bool header_only = false;
  std::string out;
  std::string tokenizer;
  bool no_tokenizer = false;
  int threads = 0;
  bool no_progress = false;
};

// The repository holding the default tokenizers: $G4C_SOURCE_DIR, the parents of the
// executable (build/bin/g4c → repo), or the working directory.
fs::path find_tokenizer(const std::string& preset) {
  std::vector<fs::path> roots;
  if (const char* s = std::getenv("G4C_SOURCE_DIR")) roots.emplace_back(s);
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec)
    for (fs::path p = exe.parent_path(); p.has_relative_path(); p = p.parent_path()) roots.push_back(p);
  roots.push_back(fs::current_path());
  for (const fs::path& r : roots) {
    fs::path t = models::default_tokenizer(preset, r);
    if (fs::exists(t)) return t;
  }
  throw Error("synth: cannot find the default tokenizer of " + preset +
              " (" + models::default_tokenizer(preset, "<repo>").string() +
              "); pass --tokenizer FILE, --no-tokenizer, or set G4C_SOURCE_DIR");
}

void run_synth(const SynthArgs& a) {
  models::SynthOptions o;
  o.preset = a.preset;
  if (a.dtype != "bf16" && a.dtype != "int4") throw Error("synth: --dtype must be bf16 or int4, got " + a.dtype);
  o.int4 = a.dtype == "int4";
  o.int4_params.group_size = a.group_size;
  o.int4_params.symmetric = !a.asymmetric;
  if (a.scale_dtype == "f16") o.int4_params.scale_dtype = DType::F16;
  else if (a.scale_dtype == "bf16") o.int4_params.scale_dtype = DType::BF16;
  else throw Error("synth: --scale-dtype must be f16 or bf16, got " + a.scale_dtype);
  o.seed = a.seed;
  o.header_only = a.header_only;
  o.out_dir = a.out;
  o.threads = a.threads;
  o.progress = !a.no_progress;
  if (!a.tokenizer.empty()) o.tokenizer = a.tokenizer;
  else if (!a.no_tokenizer) o.tokenizer = find_tokenizer(a.preset);
  models::SynthResult r = models::synthesize(o);
  std::fprintf(stderr,
               "synth: %s %s%s -> %s: %zu tensors (%zu quantized linears), %s of tensor data%s "
               "[bf16 %s, qweight %s, scales %s, zeros %s], tokenizer: %s, %.2f s\n",
               a.preset.c_str(), a.dtype.c_str(), o.int4 ? (" g" + std::to_string(a.group_size) + (a.asymmetric ? " asym" : " sym")).c_str() : "",
               a.out.c_str(), r.tensors, r.quantized_linears, Progress::human_bytes(double(r.data_bytes)).c_str(),
               a.header_only ? " (header-only: not written)" : "", Progress::human_bytes(double(r.bf16_bytes)).c_str(),
               Progress::human_bytes(double(r.qweight_bytes)).c_str(), Progress::human_bytes(double(r.scale_bytes)).c_str(),
               Progress::human_bytes(double(r.zero_bytes)).c_str(),
               o.tokenizer.empty() ? "none" : o.tokenizer.string().c_str(), r.seconds);
}

}  // namespace

void add_synth_command(CLI::App& app) {
  auto a = std::make_shared<SynthArgs>();
  auto* cmd = app.add_subcommand("synth", "write a synthetic, seeded Gemma 4 checkpoint (bf16 or INT4)");
  cmd->add_option("--preset", a->preset, "gemma4-tiny | gemma4-12b | gemma4-31b")
      ->check(CLI::IsMember({"gemma4-tiny", "gemma4-12b", "gemma4-31b"}));
  cmd->add_option("--dtype", a->dtype, "bf16 (HF layout) | int4 (the lab's INT4 format)")
      ->check(CLI::IsMember({"bf16", "int4"}));
  cmd->add_option("--group-size", a->group_size, "INT4 group size G (even)");
  auto* sym = cmd->add_flag("--symmetric", a->symmetric, "INT4 symmetric codes, no zeros (default)");
  cmd->add_flag("--asymmetric", a->asymmetric, "INT4 asymmetric codes with uint8 zeros")->excludes(sym);
  cmd->add_option("--scale-dtype", a->scale_dtype, "INT4 scale dtype: f16 | bf16");
  cmd->add_option("--seed", a->seed, "random seed (weights are deterministic per seed)");
  cmd->add_flag("--header-only", a->header_only, "write safetensors headers without data");
  cmd->add_option("-o,--output", a->out, "output directory")->required();
  cmd->add_option("--tokenizer", a->tokenizer, "tokenizer.json or tokenizer.json.xz to copy (default: the preset's)");
  cmd->add_flag("--no-tokenizer", a->no_tokenizer, "do not write a tokenizer");
  cmd->add_option("--threads", a->threads, "worker threads (default: all cores)");
  cmd->add_flag("--no-progress", a->no_progress, "no progress bar");
  cmd->callback([a] { run_synth(*a); });
}

}  // namespace g4c::cli

// g4c quantize — writes the lab's INT4 checkpoint (DESIGN.md §3) from a BF16 model
// with round-to-nearest (rtn) or sequential GPTQ (gptq).
//
// Quantized: q/k/v/o, gate/up/down of every layer. Embedding, norms and layer_scalar
// are copied unchanged (BF16). config.json, generation_config.json and the tokenizer
// files are copied. manifest.json describes every quantized Linear;
// quantization_config.json records the method, its options and per-layer metadata
// (dead columns, GPTQ objective, time).
//
// GPTQ runs layer by layer on calibration activations recomputed through the
// already-quantized earlier layers (passes/quant/calibration.h), executed by the
// runtime Engine's CPU backend (tools/quant_executor.h). --awq first folds activation-aware
// per-channel scales into the norms and Linears (g4-awq-scale, passes/quant/awq.h) through the
// same executor; the norm weights it rewrote are written in their checkpoint dtype.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <thread>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "models/config.h"
#include "models/dtype.h"
#include "models/error.h"
#include "models/int4.h"
#include "models/manifest.h"
#include "models/progress.h"
#include "models/safetensors.h"
#include "models/tokenizer.h"
#include "frontend/Frontend.h"
#include "mlir/Pass/PassManager.h"
#include "passes/AWQScale.h"
#include "passes/GPTQ.h"
#include "passes/quant/calibration.h"
#include "passes/quant/quantizer.h"
#include "runtime/cuda_backend/select.h"
#include "tools/cli.h"
#include "tools/quant_executor.h"
#include "tools/quant_gpu.h"
#include "tools/quant_writer.h"

namespace g4c::cli {

namespace fs = std::filesystem;

namespace {

struct QuantArgs {
  std::string model, method = "gptq", calibration, output;
  int group = 128;
  bool asymmetric = false, symmetric = false;
  double damp = 0.01;
  int block = 128;
  bool act_order = false;
  int quantease = 0;  // sweeps of QuantEase coordinate descent after GPTQ (0: off)
  bool true_sequential = false;
  bool gptaq = false;  // solve against the full-precision model's outputs (quant/gptaq.h)
  std::string clip = "mse";  // none | mse (quant::ClipSearch): the best measured (docs/QUANTIZATION.md)
  bool awq = false;          // fold activation-aware scales first (g4-awq-scale)
  int awq_grid = 20;         // α = i / grid
  int samples = 128, length = 512;
  int threads = 0;
  bool fake_quant = false;
  bool host_solve = false;  // --device cuda: Hessians and solves on the host anyway
  runtime::DeviceFlags dev;  // --device cuda: calibration forwards on the GPU
};

std::vector<float> tensor_f32(const models::Checkpoint& ck, const std::string& name) {
  const models::TensorView v = ck.get(name);
  const int64_t n = v.info->numel();
  std::vector<float> w(static_cast<size_t>(n));
  const auto* u = v.as<uint16_t>();
  switch (v.info->dtype) {
    case DType::BF16: for (int64_t i = 0; i < n; ++i) w[i] = bf16_to_f32(u[i]); break;
    case DType::F16: for (int64_t i = 0; i < n; ++i) w[i] = f16_to_f32(u[i]); break;
    case DType::F32: std::memcpy(w.data(), v.data, size_t(n) * 4); break;
    default: throw Error("quantize: " + name + " in " + v.info->file + " is not BF16/F16/F32");
  }
  return w;
}

std::vector<std::vector<int32_t>> calibration_set(const QuantArgs& a, const models::Tokenizer& tok) {
  std::ifstream in(a.calibration);
  if (!in) throw Error("quantize: cannot open calibration set " + a.calibration);
  std::vector<std::vector<int32_t>> seqs;
  std::string line;
  int64_t lineno = 0, used = 0;
  while (used < a.samples && std::getline(in, line)) {
    ++lineno;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const std::exception& e) {
      throw Error("quantize: " + a.calibration + " line " + std::to_string(lineno) + ": " + e.what());
    }
    if (!j.contains("text") || !j["text"].is_string())
      throw Error("quantize: " + a.calibration + " line " + std::to_string(lineno) + " has no \"text\"");
    ++used;  // as the reference: the first N texts, keeping those with at least L tokens
    std::vector<int32_t> ids = tok.encode(j["text"].get<std::string>(), true);
    if (int64_t(ids.size()) < a.length) continue;
    ids.resize(size_t(a.length));
    seqs.push_back(std::move(ids));
  }
  if (seqs.empty())
    throw Error("quantize: no text of " + a.calibration + " has " + std::to_string(a.length) + " tokens");
  return seqs;
}

void copy_side_files(const fs::path& from, const fs::path& to) {
  for (const char* f : {"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                        "special_tokens_map.json", "tokenizer.model", "chat_template.jinja"})
    if (fs::exists(from / f)) fs::copy_file(from / f, to / f, fs::copy_options::overwrite_existing);
}

// Wall time by stage, so that nothing of a run lies outside a timer: the GPTQ pass's own
// breakdown (quant::GptqTimings) plus the stages around it; `other` is what remains.
struct StageTimes {
  using clock = std::chrono::steady_clock;
  clock::time_point start = clock::now(), mark = start;
  std::vector<std::pair<std::string, double>> stages;
  // Closes the stage that began at the last mark.
  void lap(const std::string& name) {
    const auto now = clock::now();
    stages.emplace_back(name, std::chrono::duration<double>(now - mark).count());
    mark = now;
  }
  double total() const { return std::chrono::duration<double>(clock::now() - start).count(); }
};

void run_quantize(const QuantArgs& a) {
  StageTimes st;
  const auto t0 = st.start;
  if (a.method != "rtn" && a.method != "gptq") throw Error("quantize: --method must be rtn or gptq, got " + a.method);
  if (a.group != 64 && a.group != 128) throw Error("quantize: --group-size must be 64 or 128");
  if (a.symmetric && a.asymmetric) throw Error("quantize: --symmetric and --asymmetric exclude each other");
  if (a.method == "rtn" && (a.act_order || a.true_sequential || a.gptaq))
    throw Error(std::string("quantize: ") + (a.act_order ? "--act-order" : a.gptaq ? "--gptaq" : "--true-sequential") +
                " is a GPTQ option; --method rtn has no column order or calibration");
  if (a.method == "rtn" && a.dev.device != "cpu")
    throw Error("quantize: --device runs GPTQ's calibration forwards; --method rtn runs none");
  if (a.awq && a.dev.device != "cpu") throw Error("quantize: --awq runs its calibration forwards on the CPU (--device cpu)");
  if (a.awq && a.calibration.empty()) throw Error("quantize: --awq needs --calibration FILE.jsonl");
  if (a.awq_grid < 1) throw Error("quantize: --awq-grid must be at least 1");
  if (a.quantease < 0) throw Error("quantize: --quantease must be ≥ 0");
  if (a.quantease > 0 && a.method != "gptq") throw Error("quantize: --quantease refines GPTQ's codes (--method gptq)");
  if (a.clip != "none" && a.clip != "mse") throw Error("quantize: --clip must be none or mse, got " + a.clip);
  const quant::ClipSearch clip = a.clip == "mse" ? quant::ClipSearch::mse() : quant::ClipSearch{};
  const bool sym = !a.asymmetric;
  const int threads = a.threads > 0 ? a.threads : int(std::max(1u, std::thread::hardware_concurrency()));
  const fs::path src(a.model), dst(a.output);
  if (models::Int4Checkpoint::is_int4_dir(src)) throw Error("quantize: " + a.model + " is already an INT4 checkpoint");
  if (fs::exists(dst) && fs::equivalent(src, dst)) throw Error("quantize: output must differ from the model directory");
  const models::ModelConfig cfg = models::load_model_config(src);
  auto ck = models::Checkpoint::open(src);
  const std::vector<models::LinearShape> shapes = models::linear_shapes(cfg);
  st.lap("open_model");

  quant::QuantSpec spec{a.group, sym};
  // The output: each tensor as soon as it is known (on the writer's thread).
  QuantCheckpointWriter writer(dst, *ck, shapes, models::int4::Params{a.group, sym, DType::F16}, a.fake_quant);
  size_t quantized = 0;  // Linears handed to the writer
  double value_io = 0.0;  // of the calibration forwards: moving layer values host <-> backend
  nlohmann::json layers_meta = nlohmann::json::array();
  nlohmann::json calib_meta;
  quant::GptqTimings timings;
  // Tensors the AWQ folds rewrote, by checkpoint name ("layers.0.input_layernorm.weight"): the
  // norms are written from here and, with RTN, the Linears quantized from here (GPTQ takes them
  // from the executor, so they are not kept then).
  std::map<std::string, std::vector<float>> rewritten;
  nlohmann::json awq_meta = nlohmann::json::array();
  if (a.method == "gptq" || a.awq) {
    if (a.calibration.empty()) throw Error("quantize: --method gptq needs --calibration FILE.jsonl");
    auto tok = models::Tokenizer::load(src / "tokenizer.json");
    const auto seqs = calibration_set(a, *tok);
    st.lap("calibration_set");
    // --device cuda: every Linear streams from pinned host memory (GPTQ runs one layer at a time,
    // so two layer slots suffice and a BF16 12B fits the budget), one buffer per value (the
    // executor runs a layer's steps piecewise); batches of 4096 tokens (8 × 512, measured on the 12B
    // at a peak of 9643 MiB) bound KV + activations (one sequence per batch past 4096 tokens).
    runtime::DeviceFlags dev = a.dev;
    dev.stream_last_layers = cfg.num_layers;
    dev.share_values = 0;
    dev.fuse_siblings = false;  // GPTQ replaces q/k/v one at a time: keep them separate GEMMs
    auto backend = runtime::backend_for_flags(dev, src);
    const bool gpu = backend != nullptr;
    if (a.host_solve && !gpu) throw Error("quantize: --host-solve goes with --device cuda");
    const bool gpu_solve = gpu && !a.host_solve;
    if (gpu_solve && a.quantease > 0) throw Error("quantize: --quantease runs on the host (--device cpu or --host-solve)");
    if (gpu_solve) {  // before any forward: the solve's own check, not a copy of it
      quant::GptqOptions o;
      o.spec = spec;
      o.block_size = a.block;
      o.act_order = a.act_order;
      o.clip = clip;
      tools::check_gpu_gptq_options(o);
    }
    const int batch_seqs = gpu ? std::max(1, 4096 / a.length) : 16;
    if (a.gptaq && gpu) throw Error("quantize: --gptaq runs its two calibration models on the CPU (--device cpu)");
    auto exec = std::make_unique<tools::EngineCalibrationExecutor>(src, seqs, a.length, threads, batch_seqs,
                                                                   std::move(backend));
    // GPTAQ: the same model, never quantized, fed the same sequences in the same batches.
    std::unique_ptr<tools::EngineCalibrationExecutor> reference;
    if (a.gptaq) reference = std::make_unique<tools::EngineCalibrationExecutor>(src, seqs, a.length, threads, batch_seqs);
    st.lap("executor_setup");  // the Engine (weights loaded or staged), the calibration embeddings
    calib_meta = {{"dataset", a.calibration}, {"executor", gpu ? "runtime-cuda" : "runtime-cpu"},
                  {"samples_requested", a.samples}, {"samples", seqs.size()},
                  {"sequence_length", a.length}, {"tokens", int64_t(seqs.size()) * a.length},
                  {"hessians_and_solves", gpu_solve ? "cuda" : "host"}, {"batch_sequences", batch_seqs}};
    quant::GptqDriverOptions opt;
    opt.gptq.spec = spec;
    opt.gptq.damp = a.damp;
    opt.gptq.block_size = a.block;
    opt.gptq.act_order = a.act_order;
    opt.gptq.clip = clip;
    opt.gptq.quantease_sweeps = a.quantease;
    opt.true_sequential = a.true_sequential;
    opt.reference = reference.get();
    opt.threads = threads;
    opt.gptq.threads = threads;
    opt.timings = &timings;
    opt.gram = tools::cpu_gram_update(threads);
    if (gpu_solve) opt.stores = tools::gpu_hessian_stores(exec->backend());
    Progress bar(std::string(a.method == "gptq" ? "gptq " : "awq ") + std::to_string(cfg.num_layers) + " layers (" +
                     std::to_string(seqs.size()) + "×" + std::to_string(a.length) + " calibration tokens)",
                 uint64_t(cfg.num_layers));
    opt.on_linear = [&](const quant::LinearReport& r, const quant::QuantizedLinear& q) {
      const std::string name = "layers." + std::to_string(r.layer) + "." + r.name;
      writer.linear(name, q);
      ++quantized;
      layers_meta.push_back({{"name", name}, {"out_features", r.out}, {"in_features", r.in},
                             {"dead_columns", r.dead_columns}, {"predicted_loss", r.predicted_loss},
                             {"calibration_rows", r.calibration_rows}, {"seconds", r.seconds}});
      if (a.quantease > 0) {
        layers_meta.back()["gptq_loss"] = r.gptq_loss;
        layers_meta.back()["quantease_changed"] = r.quantease_changed;
      }
    };
    // Logs (stderr not a terminal) get a line per layer: the bar prints only at the end there.
    const bool log_layers = !isatty(STDERR_FILENO) && Progress::enabled();
    quant::GptqTimings prev;
    double prev_io = 0.0;
    opt.on_layer = [&, log_layers](int layer, double secs) {
      bar.add(1);
      if (log_layers)
        std::fprintf(stderr,
                     "gptq: layer %d/%d in %.1f s (forwards %.1f + %.1f, of which value I/O %.1f; Hessians %.1f, "
                     "solves %.1f, weight I/O %.1f of which reads %.1f; %.1f s so far)\n",
                     layer + 1, cfg.num_layers, secs, timings.observe_forward - prev.observe_forward,
                     timings.advance_forward - prev.advance_forward, exec->value_io_seconds() - prev_io,
                     timings.hessian - prev.hessian, timings.solve - prev.solve, timings.weights - prev.weights,
                     timings.weights_read - prev.weights_read,
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      prev = timings;
      prev_io = exec->value_io_seconds();
    };
    // AWQ and GPTQ as graph-level passes: the g4 graph of the model names the Linears and
    // the fold sites, the passes drive them layer by layer through the executor.
    mlir::MLIRContext ctx;
    frontend::load_dialects(ctx);
    mlir::OwningOpRef<mlir::ModuleOp> module = frontend::build_from_model_dir(ctx, src);
    st.lap("graph");
    if (a.awq) {
      quant::AwqDriverOptions ao;
      ao.awq.spec = spec;
      ao.awq.clip = clip;  // the search scores α with the quantizer the run writes
      ao.awq.grid = a.awq_grid;
      ao.awq.threads = threads;
      ao.threads = threads;
      ao.gram = opt.gram;
      ao.on_tensor = [&](int layer, const std::string& name, const std::vector<float>& values) {
        const std::string key = "layers." + std::to_string(layer) + "." + name + ".weight";
        if (a.method == "rtn" || !writer.quantizes(key)) rewritten[key] = values;
        // GPTAQ's full-precision model takes the same folds: its Linear inputs are then in the
        // scaled model's channels, and its outputs are unchanged.
        if (reference) reference->set_weight(layer, name, values);
      };
      ao.on_site = [&, log = !isatty(STDERR_FILENO) && Progress::enabled()](const quant::AwqSiteReport& r) {
        std::string lin;
        for (const auto& n : r.linears) lin += (lin.empty() ? "" : ",") + n;
        awq_meta.push_back({{"layer", r.layer}, {"producer", r.producer}, {"linears", r.linears},
                            {"alpha", r.alpha}, {"error", r.error}, {"error_unscaled", r.error_unscaled},
                            {"min_scale", r.min_scale}, {"max_scale", r.max_scale},
                            {"calibration_rows", r.calibration_rows}});
        if (log)
          std::fprintf(stderr, "awq: layer %d %s -> %s: alpha %.2f, error %.4g -> %.4g, scales [%.3g, %.3g]\n",
                       r.layer, r.producer.c_str(), lin.c_str(), r.alpha, r.error_unscaled, r.error, r.min_scale,
                       r.max_scale);
      };
      mlir::PassManager awq_pm(&ctx);
      awq_pm.addPass(passes::createAwqScalePass({exec.get(), ao}));
      if (mlir::failed(awq_pm.run(*module))) throw Error("quantize: the g4-awq-scale pass failed on " + a.model);
      st.lap("awq_pass");
    }
    writer.others(rewritten);  // the folds are done: every tensor but the Linears is final
    if (a.method == "gptq") {
      mlir::PassManager pm(&ctx);
      pm.addPass(passes::createGptqPass({exec.get(), opt}));
      if (mlir::failed(pm.run(*module))) throw Error("quantize: the g4-gptq pass failed on " + a.model);
      st.lap("gptq_pass");
    }
    if (gpu) runtime::add_device_summary(exec->backend(), calib_meta["device"]);
    value_io = exec->value_io_seconds();
  }  // the pass, the GPU stores and the Engine (its device memory) go here
  if (a.method == "gptq" || a.awq) st.lap("executor_teardown");
  if (a.method == "rtn") {
    if (!a.awq) writer.others(rewritten);
    Progress bar("rtn " + std::to_string(shapes.size()) + " linears", shapes.size());
    for (const auto& s : shapes) {
      auto t = std::chrono::steady_clock::now();
      auto r = rewritten.find(s.name + ".weight");
      const std::vector<float> w = r != rewritten.end() ? r->second : tensor_f32(*ck, s.name + ".weight");
      writer.linear(s.name, quant::quantize_rtn(w.data(), s.out, s.in, spec, clip));
      ++quantized;
      layers_meta.push_back({{"name", s.name}, {"out_features", s.out}, {"in_features", s.in},
                             {"seconds", std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count()}});
      bar.add(1);
    }
    st.lap("rtn");
  }

  // The rest of the queue (the last layer's Linears), then the files' end and the index.
  const models::Manifest man = writer.finish(a.method);
  copy_side_files(src, dst);
  st.lap("write_checkpoint");
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  nlohmann::json qc = a.fake_quant ? nlohmann::json::object() : models::quantization_config_json(man);
  qc["method"] = a.method;
  qc["group_size"] = a.group;
  qc["sym"] = sym;
  qc["fake_quantized"] = a.fake_quant;
  qc["clip"] = clip.enabled() ? nlohmann::json{{"method", "mse"}, {"grid", clip.grid}, {"steps", clip.steps}}
                              : nlohmann::json("none");
  qc["awq"] = a.awq ? nlohmann::json{{"grid", a.awq_grid}, {"sites", awq_meta}}
                    : nlohmann::json(false);
  if (a.awq && a.method == "rtn") qc["calibration"] = calib_meta;
  if (a.method == "gptq") {
    qc["damp_percent"] = a.damp;
    qc["block_size"] = a.block;
    qc["act_order"] = a.act_order;
    qc["static_groups"] = a.act_order;
    // false: all Linears of a layer see that layer's unquantized inputs
    qc["true_sequential"] = a.true_sequential;
    qc["gptaq"] = a.gptaq;
    qc["quantease_sweeps"] = a.quantease;
    qc["calibration"] = calib_meta;
  }
  // Every stage of the run: the GPTQ pass split into its parts (its remainder: pass_other), the
  // stages around it, and `other` (the rest up to this point: the reports, side files).
  nlohmann::json tj = nlohmann::json::object();
  double accounted = 0.0;
  for (const auto& [name, t] : st.stages) {
    if (name == "gptq_pass") {
      const double parts = timings.observe_forward + timings.hessian + timings.solve + timings.advance_forward +
                           timings.weights;
      tj["observe_forward"] = timings.observe_forward;
      tj["hessian"] = timings.hessian;
      tj["solve"] = timings.solve;
      tj["advance_forward"] = timings.advance_forward;
      tj["weights"] = timings.weights;
      tj["weights_read"] = timings.weights_read;  // part of weights
      tj["pass_other"] = t - parts;
      tj["forwards_value_io"] = value_io;  // part of observe_forward + advance_forward
    } else {
      tj[name] = t;
    }
    accounted += t;
  }
  tj["other"] = st.total() - accounted;
  tj["total"] = st.total();
  qc["timing_seconds"] = tj;
  qc["source_model"] = a.model;
  qc["seconds"] = secs;
  qc["threads"] = threads;
  qc["layers"] = layers_meta;
  if (!a.fake_quant) models::write_manifest(man, dst / "manifest.json");
  std::ofstream(dst / "quantization_config.json") << qc.dump(2) << "\n";
  double loss = 0.0, gptq_loss = 0.0;
  int64_t changed = 0;
  for (const auto& l : layers_meta) {
    if (l.contains("predicted_loss")) loss += l["predicted_loss"].get<double>();
    if (l.contains("gptq_loss")) gptq_loss += l["gptq_loss"].get<double>();
    if (l.contains("quantease_changed")) changed += l["quantease_changed"].get<int64_t>();
  }
  std::string objective;
  if (a.method == "gptq") objective = ", total GPTQ objective " + std::to_string(loss);
  if (a.quantease > 0)
    objective += " (QuantEase: from " + std::to_string(gptq_loss) + ", " + std::to_string(changed) + " codes changed)";
  std::fprintf(stderr, "quantize: %s %s g%d, %zu linears in %.1f s%s -> %s\n", a.method.c_str(), sym ? "sym" : "asym",
               a.group, quantized, secs, objective.c_str(), a.output.c_str());
  std::string line;
  for (const auto& [name, t] : tj.items()) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%s%s %.1f", line.empty() ? "" : ", ", name.c_str(), t.get<double>());
    line += buf;
  }
  std::fprintf(stderr, "quantize: seconds by stage: %s\n", line.c_str());
}

}  // namespace

void add_quantize_command(CLI::App& app) {
  auto a = std::make_shared<QuantArgs>();
  auto* cmd = app.add_subcommand("quantize", "INT4 quantization (RTN or GPTQ) into the lab's checkpoint format");
  cmd->add_option("--model", a->model, "BF16 model directory")->required();
  cmd->add_option("--method", a->method, "rtn | gptq")->check(CLI::IsMember({"rtn", "gptq"}));
  cmd->add_option("--calibration", a->calibration, "calibration jsonl ({\"text\"} per line), for gptq");
  cmd->add_option("--group-size", a->group, "64 | 128")->check(CLI::IsMember({64, 128}));
  cmd->add_flag("--symmetric", a->symmetric, "symmetric codes (the default)");
  cmd->add_flag("--asymmetric", a->asymmetric, "asymmetric codes with zero points");
  cmd->add_option("--damp", a->damp, "GPTQ damping, fraction of mean(diag H)");
  cmd->add_option("--block-size", a->block, "GPTQ column block")->check(CLI::PositiveNumber);
  cmd->add_flag("--act-order", a->act_order, "GPTQ: quantize columns by decreasing diag H (static groups)");
  cmd->add_option("--quantease", a->quantease,
                  "GPTQ: after each Linear's solve, up to N sweeps of QuantEase coordinate descent on its codes "
                  "(group scales/zeros fixed; host solve; 0 = off)")
      ->capture_default_str();
  cmd->add_option("--clip", a->clip,
                  "group ranges: mse (MSE-optimal shrink of each group's range; GPTQ searches it when the solve "
                  "reaches the group, on the error-updated weights) | none (min/max)")
      ->check(CLI::IsMember({"none", "mse"}))
      ->capture_default_str();
  cmd->add_flag("--true-sequential", a->true_sequential,
                "GPTQ: within a layer, observe each input group (q/k/v, o, gate/up, down) with the groups "
                "before it already quantized");
  cmd->add_flag("--gptaq", a->gptaq,
                "GPTQ: solve each Linear against its output in the full-precision model (GPTAQ), which runs "
                "beside it on the same calibration tokens (CPU)");
  cmd->add_flag("--awq", a->awq,
                "fold activation-aware per-input-channel scales (AWQ) into the RMSNorm / Linear before each "
                "Linear where the fold is exact, searched on the calibration set with the run's quantizer (--clip), "
                "before RTN or GPTQ (CPU)");
  cmd->add_option("--awq-grid", a->awq_grid, "AWQ: alpha = i / grid, i = 0 … grid")->capture_default_str();
  cmd->add_option("--calibration-samples", a->samples, "first N calibration texts")->check(CLI::PositiveNumber);
  cmd->add_option("--calibration-length", a->length, "tokens per calibration sample (BOS included)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--threads", a->threads, "worker threads (default: all cores)");
  cmd->add_option("--device", a->dev.device,
                  "cpu | cuda: calibration forwards, Hessians and GPTQ solves on the GPU, Linears streamed "
                  "from pinned host memory")
      ->capture_default_str();
  cmd->add_option("--emulate", a->dev.emulate, "cuda: in a 16-SM green context emulating 1g.10gb");
  cmd->add_flag("--host-solve", a->host_solve,
                "with --device cuda: accumulate the Hessians and solve on the host (the GPU runs only the "
                "calibration forwards)");
  cmd->add_option("--budget", a->dev.budget, "cuda: whole-process device bytes (e.g. 9984MiB; 0 = none)")
      ->capture_default_str();
  cmd->add_flag("--fake-quant", a->fake_quant,
                "write dequantized F32 weights instead of INT4 (for checking the INT4 path)");
  cmd->add_option("-o,--output", a->output, "output directory")->required();
  cmd->callback([a] { run_quantize(*a); });
}

}  // namespace g4c::cli

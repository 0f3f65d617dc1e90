// g4c_bench_cudart: end-to-end benchmark of the CUDA backend without the g4c CLI (no MLIR): a
// checkpoint synthesized in process, last-position logits for scripts/gpu/check_12b_logits.py,
// and a serving run.
//
//   g4c_bench_cudart tokenize IN.jsonl TOKENIZER.json OUT.jsonl   (prompts → input_ids, on the host)
//   g4c_bench_cudart synth DIR [--bf16] [--seed S]                (gemma4-12b, INT4 g128 sym by default)
//   g4c_bench_cudart run MODEL REQUESTS.jsonl [--emulate 1g.10gb] [--budget MiB] [--batch N]
//                    [--ignore-eos] [--no-graphs] [--trace F] [--label L]
//   g4c_bench_cudart logits MODEL IDS.jsonl OUT_PREFIX [--budget MiB] [--emulate 1g.10gb] [--max N]
//                    last-position softcapped fp32 logits of each line's input_ids → OUT_PREFIX.<i>.f32
// `run` warms up (short generations of the same prompts: CUDA graphs captured, kernels loaded)
// and then times the whole request set; it prints one JSON summary line.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/error.h"
#include "models/synth.h"
#include "models/tokenizer.h"
#include "runtime/cuda_backend/cuda_backend.h"
#include "runtime/engine.h"

using namespace g4c;
using json = nlohmann::json;

namespace {

double pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(p * double(v.size() - 1) + 0.5))];
}

int tokenize(int argc, char** argv) {
  if (argc < 5) throw Error("usage: tokenize IN.jsonl TOKENIZER.json OUT.jsonl");
  auto tok = models::Tokenizer::load(argv[3]);
  std::ifstream in(argv[2]);
  std::ofstream out(argv[4]);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto j = json::parse(line);
    json o;
    o["input_ids"] = j.contains("input_ids") ? j["input_ids"].get<std::vector<int32_t>>()
                                             : tok->encode(j.at("prompt").get<std::string>(), true);
    o["max_new_tokens"] = j.value("max_new_tokens", 32);
    out << o.dump() << "\n";
    ++n;
  }
  std::printf("tokenized %d requests\n", n);
  return 0;
}

int synth(int argc, char** argv) {
  if (argc < 3) throw Error("usage: synth DIR [--bf16] [--seed S]");
  models::SynthOptions o;
  o.preset = "gemma4-12b";
  o.int4 = true;
  o.out_dir = argv[2];
  for (int i = 3; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--bf16") o.int4 = false;
    else if (a == "--seed" && i + 1 < argc) o.seed = std::stoull(argv[++i]);
  }
  auto r = models::synthesize(o);
  std::printf("synth: %zu tensors, %.2f GB in %.1f s (%.2f GB/s)\n", r.tensors, r.data_bytes / 1e9, r.seconds,
              r.data_bytes / 1e9 / std::max(r.seconds, 1e-9));
  return 0;
}

int last_logits(int argc, char** argv) {
  if (argc < 5) throw Error("usage: logits MODEL IDS.jsonl OUT_PREFIX [options]");
  runtime::CudaOptions co;
  co.model_dir = argv[2];
  size_t max_lines = 1u << 30;
  for (int i = 5; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--budget" && i + 1 < argc) co.budget_bytes = runtime::parse_budget(argv[++i]);
    else if (a == "--emulate" && i + 1 < argc) co.emulate = argv[++i];
    else if (a == "--max" && i + 1 < argc) max_lines = std::stoul(argv[++i]);
    else throw Error("unknown option " + a);
  }
  std::vector<std::vector<int32_t>> seqs;
  std::ifstream in(argv[3]);
  if (!in) throw Error(std::string("cannot read ") + argv[3]);
  std::string line;
  while (std::getline(in, line) && seqs.size() < max_lines)
    if (!line.empty()) seqs.push_back(json::parse(line).at("input_ids").get<std::vector<int32_t>>());
  size_t longest = 0;
  for (const auto& q : seqs) longest = std::max(longest, q.size());
  runtime::EngineOptions eo;
  eo.max_sequences = 1;
  eo.max_seq_len = int(longest) + 16;
  eo.threads = 16;
  auto engine = runtime::Engine::open(co.model_dir, std::nullopt, eo, runtime::make_cuda_backend(co));
  for (size_t i = 0; i < seqs.size(); ++i) {
    std::vector<float> last;
    const int total = int(seqs[i].size());
    engine->logits(seqs[i], 256, [&](int first, int rows, const float* l) {
      if (first + rows == total) last.assign(l + size_t(rows - 1) * engine->vocab_size(), l + size_t(rows) * engine->vocab_size());
    });
    const std::string path = std::string(argv[4]) + "." + std::to_string(i) + ".f32";
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(last.data()), std::streamsize(last.size() * 4));
    std::printf("%s: %d tokens, %zu logits\n", path.c_str(), total, last.size());
  }
  std::printf("%s\n", runtime::cuda_info(engine->backend()).device.c_str());
  return 0;
}

int run(int argc, char** argv) {
  if (argc < 4) throw Error("usage: run MODEL REQUESTS.jsonl [options]");
  runtime::CudaOptions co;
  co.model_dir = argv[2];
  runtime::EngineOptions eo;
  eo.max_sequences = 8;
  eo.threads = 16;
  bool ignore_eos = false;
  std::string label = "run";
  for (int i = 4; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw Error(a + " needs a value");
      return argv[++i];
    };
    if (a == "--emulate") co.emulate = next();
    else if (a == "--budget") co.budget_bytes = runtime::parse_budget(next());
    else if (a == "--batch") eo.max_sequences = std::stoi(next());
    else if (a == "--ignore-eos") ignore_eos = true;
    else if (a == "--no-graphs") co.graphs = false;
    else if (a == "--trace") co.trace_path = next();
    else if (a == "--label") label = next();
    else throw Error("unknown option " + a);
  }
  std::vector<runtime::GenerationRequest> reqs;
  {
    std::ifstream in(argv[3]);
    if (!in) throw Error(std::string("cannot read ") + argv[3]);
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      auto j = json::parse(line);
      runtime::GenerationRequest r;
      r.id = std::to_string(reqs.size());
      r.prompt = j.at("input_ids").get<std::vector<int32_t>>();
      r.max_new_tokens = j.value("max_new_tokens", 32);
      r.ignore_eos = ignore_eos;
      reqs.push_back(std::move(r));
    }
  }
  int longest = 0;
  for (const auto& r : reqs) longest = std::max<int>(longest, int(r.prompt.size()) + r.max_new_tokens);
  eo.max_seq_len = longest + 16;
  const auto t_load = std::chrono::steady_clock::now();
  auto engine = runtime::Engine::open(co.model_dir, std::nullopt, eo, runtime::make_cuda_backend(co));
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count();
  std::fprintf(stderr, "[%s] loaded in %.1f s\n", label.c_str(), load_s);
  // Warm-up: the same prompts, 4 new tokens each (all decode buckets seen twice → graphs).
  {
    auto w = reqs;
    for (auto& r : w) r.max_new_tokens = std::min(r.max_new_tokens, 4), r.ignore_eos = true;
    engine->generate(w);
    engine->generate(w);
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto res = engine->generate(reqs);
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  long gen = 0;
  std::vector<double> ttft, tpot, itl;
  int errors = 0;
  for (const auto& r : res) {
    gen += long(r.tokens.size());
    errors += r.finish_reason == "error";
    ttft.push_back(r.prefill_latency_s);
    if (double t = runtime::time_per_output_token(r); t >= 0) tpot.push_back(t);
    itl.insert(itl.end(), r.decode_latencies_s.begin(), r.decode_latencies_s.end());
  }
  auto info = runtime::cuda_info(engine->backend());
  json s;
  s["label"] = label;
  s["requests"] = res.size();
  s["errors"] = errors;
  s["generated_tokens"] = gen;
  s["elapsed_s"] = elapsed;
  s["generated_tokens_per_s"] = gen / elapsed;
  s["requests_per_s"] = double(res.size()) / elapsed;
  s["batch_size"] = engine->options().max_sequences;  // what the budget allowed (asked: --batch)
  s["batch_asked"] = eo.max_sequences;
  s["kv_blocks"] = engine->options().kv_blocks;
  s["ttft_p50_s"] = pct(ttft, 0.5);
  s["ttft_p99_s"] = pct(ttft, 0.99);
  s["tpot_p50_s"] = pct(tpot, 0.5);
  s["tpot_p99_s"] = pct(tpot, 0.99);
  s["itl_p50_s"] = pct(itl, 0.5);
  s["itl_p99_s"] = pct(itl, 0.99);
  s["peak_device_bytes"] = info.peak_device_bytes;
  s["peak_device_mib"] = double(info.peak_device_bytes) / (1 << 20);
  s["context_mib"] = double(info.context_bytes) / (1 << 20);
  s["weight_mib"] = double(info.weight_bytes) / (1 << 20);
  s["kv_mib"] = double(info.kv_bytes) / (1 << 20);
  s["arena_mib"] = double(info.arena_bytes) / (1 << 20);
  s["device"] = info.device;
  s["graphs_captured"] = info.graphs_captured;
  s["graph_replays"] = info.graph_replays;
  s["eager_steps"] = info.eager_steps;
  s["load_s"] = load_s;
  std::printf("%s\n", s.dump().c_str());
  return errors ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "tokenize") return tokenize(argc, argv);
    if (mode == "synth") return synth(argc, argv);
    if (mode == "logits") return last_logits(argc, argv);
    if (mode == "run") {
      if (!runtime::cuda_device_available()) {
        std::fprintf(stderr, "no CUDA device\n");
        return 77;
      }
      return run(argc, argv);
    }
    std::fprintf(stderr, "usage: g4c_bench_cudart tokenize|synth|run ...\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}

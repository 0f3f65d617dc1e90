// g4c bench — loads the model once (the plan `g4c run` runs: compiled in process, or --plan), warms
// up, then runs the whole requests jsonl N times in one process (through the serving library of
// `g4c run`) and writes a report JSON: elapsed
// median/min/max, generated tokens/s, TTFT/TPOT/ITL p50/p99 (pooled over the timed runs), peak
// device bytes, and per phase (prefill, decode) FLOPs and bytes against the device ceilings
// (DESIGN.md §5; work model in tools/bench_roofline.h). Phase times: prefill = median elapsed of
// runs of the same requests with max_new_tokens 1; decode = median full elapsed − that.
// --plot draws the report (and any --compare reports) as a PNG (tools/bench_plot.h).
#include <sys/resource.h>

#include <chrono>
#include <climits>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "models/config.h"
#include "models/error.h"
#include "models/input_file.h"
#include "models/progress.h"
#include "models/tokenizer.h"
#include "runtime/cuda_backend/select.h"
#include "runtime/engine.h"
#include "runtime/serving.h"
#include "tools/bench_plot.h"
#include "tools/bench_roofline.h"
#include "tools/cli.h"
#include "tools/run_options.h"

namespace g4c::cli {
namespace {

using nlohmann::json;

// The options shared with `g4c run` (tools/run_options.h; max_seq_len 0: the longest request)
// and bench's own.
struct BenchArgs : RunOptions {
  std::string input, report, plot, label;
  std::vector<std::string> compare;
  bool plot_only = false;
  int repeat = 3, warmup = 1, warmup_requests = 0;
};

// The requests file, whole: a regular file of at most 1 GiB (the serving read's bound) holding at
// least one request line.
std::string read_requests(const std::string& path) {
  std::string text = models::read_regular_file(path, "requests file", runtime::ServeOptions{}.max_input_bytes);
  if (text.find('\0') != std::string::npos)
    throw Error(path + ": binary data (a NUL byte): not a jsonl requests file");
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (line.find_first_not_of(" \t\r") != std::string::npos) return text;
  throw Error(path + ": no requests (the file holds no non-blank line): nothing to time");
}

// The same requests with max_new_tokens 1: the prefill-only workload. Lines that are not JSON
// objects are kept as they are (the serving library reports them).
std::string prefill_only(const std::string& jsonl) {
  std::istringstream in(jsonl);
  std::string line, out;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object()) {
      j["max_new_tokens"] = 1;
      line = j.dump();
    }
    out += line + "\n";
  }
  return out;
}

// The longest request (prompt tokens, BOS included, + max_new_tokens): the default
// --max-sequence-length, so no request is cut short by the engine's length cap.
int longest_request(const std::string& jsonl, const models::Tokenizer* tok, int default_new) {
  std::istringstream in(jsonl);
  std::string line;
  int longest = 2;
  while (std::getline(in, line)) {
    json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) continue;
    size_t prompt = 0;
    if (j.contains("input_ids") && j["input_ids"].is_array()) prompt = j["input_ids"].size();
    else if (tok && j.contains("prompt") && j["prompt"].is_string()) prompt = tok->encode(j["prompt"].get<std::string>(), true).size();
    const int64_t n = j.contains("max_new_tokens") && j["max_new_tokens"].is_number_integer()
                          ? j["max_new_tokens"].get<int64_t>()
                          : default_new;
    // Clamped to int: the engine caps lengths there (and rejects what does not fit its KV).
    longest = int(std::min<int64_t>(INT32_MAX, std::max<int64_t>(longest, int64_t(prompt) + std::max<int64_t>(0, n))));
  }
  return longest;
}

// The first n requests (n <= 0: all): the warm-up workload of --warmup-requests.
std::string first_requests(const std::string& jsonl, int n) {
  if (n <= 0) return jsonl;
  std::istringstream in(jsonl);
  std::string line, out;
  while (n > 0 && std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    out += line + "\n";
    --n;
  }
  return out;
}

struct RunRecord {
  json summary;
  std::vector<runtime::GenerationResult> results;  // in request order
  int64_t steps = 0;
  std::map<int, runtime::DecodeBatchStats> decode_by_rows;  // this run's pure decode steps
};

RunRecord run_once(runtime::Engine& engine, const models::Tokenizer* tok, const std::string& jsonl,
                   const std::string& file, const runtime::ServeOptions& so) {
  RunRecord rec;
  std::istringstream in(jsonl);
  std::ostringstream out;  // outputs jsonl: not kept
  const int64_t steps0 = engine.stats().steps;
  const auto by_rows0 = engine.stats().decode_by_rows;
  std::vector<runtime::GenerationResult> done;
  auto s = runtime::serve_jsonl(engine, tok, in, file, out, so,
                                [&](const runtime::GenerationResult& r) { done.push_back(r); });
  if (s.failed > 0)
    throw Error(file + ": " + std::to_string(s.failed) + " of " + std::to_string(s.requests) +
                " requests failed (run `g4c run` on it to see which)");
  rec.steps = engine.stats().steps - steps0;
  for (const auto& [rows, b] : engine.stats().decode_by_rows) {
    runtime::DecodeBatchStats d = b;
    if (const auto it = by_rows0.find(rows); it != by_rows0.end()) d -= it->second;
    if (d.steps > 0) rec.decode_by_rows[rows] = d;
  }
  rec.summary = std::move(s.json);
  rec.summary["steps"] = rec.steps;
  std::sort(done.begin(), done.end(), [](const auto& a, const auto& b) { return std::stoll(a.id) < std::stoll(b.id); });
  rec.results = std::move(done);
  return rec;
}

// FNV-1a over every request's generated token ids, in request order.
uint64_t tokens_hash(const std::vector<runtime::GenerationResult>& rs) {
  uint64_t h = 1469598103934665603ull;
  for (const auto& r : rs) {
    for (int32_t t : r.tokens)
      for (int k = 0; k < 4; ++k) h = (h ^ ((uint32_t(t) >> (8 * k)) & 0xFF)) * 1099511628211ull;
    h = (h ^ 0xFF) * 1099511628211ull;  // request separator
  }
  return h;
}

json run_json(const RunRecord& r) {
  const double e = r.summary["elapsed_s"], g = r.summary["generated_tokens"].get<double>();
  return {{"elapsed_s", e},
          {"generated_tokens", r.summary["generated_tokens"]},
          {"generated_tokens_per_s", e > 0 ? g / e : 0.0},
          {"ttft_p50_s", r.summary["ttft_p50_s"]},
          {"ttft_p99_s", r.summary["ttft_p99_s"]},
          {"tpot_p50_s", r.summary["tpot_p50_s"]},
          {"tpot_p99_s", r.summary["tpot_p99_s"]},
          {"itl_p50_s", r.summary["itl_p50_s"]},
          {"itl_p99_s", r.summary["itl_p99_s"]},
          {"steps", r.steps},
          {"preemptions", r.summary["preemptions"]},
          {"max_running_sequences", r.summary["max_running_sequences"]},
          {"tokens_fnv1a", std::to_string(tokens_hash(r.results))}};
}

json stats_of(const std::vector<double>& v) {
  return {{"median", bench::percentile(v, 50)},
          {"min", *std::min_element(v.begin(), v.end())},
          {"max", *std::max_element(v.begin(), v.end())}};
}

// The KV storage of a plan's layers ("f32", "bf16", "fp8"; "mixed" if they differ, "none").
std::string kv_storage(const plan::Plan& p) {
  std::string out;
  for (const auto* l : *p->kv()) {
    const std::string d = l->dtype() == plan::fb::DType::F8E4M3 ? "fp8" : l->dtype() == plan::fb::DType::BF16 ? "bf16" : "f32";
    if (out.empty()) out = d;
    else if (out != d) return "mixed";
  }
  return out.empty() ? "none" : out;
}

// The storage of a plan's embedding / LM head table: "int8" when it is an Int8Rows weight.
std::string table_storage(const plan::Plan& p) {
  for (const auto* w : *p->weights())
    if (w->format() == plan::fb::WeightFormat::Int8Rows) return "int8";
  return "dense";
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  char b[32];
  std::strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return b;
}

json bench(const BenchArgs& a) {
  const std::filesystem::path dir = a.model;
  const std::string jsonl = read_requests(a.input), prefill_jsonl = prefill_only(jsonl);
  std::unique_ptr<models::Tokenizer> tok;
  if (std::filesystem::exists(dir / "tokenizer.json")) tok = models::Tokenizer::load(dir / "tokenizer.json");

  // Ceilings first, before the model's weights and threads are up.
  const bench::Ceilings ceil =
      a.dev.device == "cuda" ? bench::cuda_ceilings(!a.dev.emulate.empty()) : bench::measure_cpu_ceilings(a.threads);

  // The longest request, within the model's context (a larger max_new_tokens stops at the cap).
  const int context = models::load_model_config(dir).max_position_embeddings;
  int max_seq_len = a.max_seq_len > 0 ? a.max_seq_len : longest_request(jsonl, tok.get(), a.max_new_tokens);
  if (a.max_seq_len <= 0 && context > 0) max_seq_len = std::min(max_seq_len, context);
  if (context > 0 && max_seq_len > context)
    throw Error("--max-sequence-length " + std::to_string(max_seq_len) + " exceeds the model's context of " +
                std::to_string(context) + " tokens (max_position_embeddings in " + (dir / "config.json").string() + ")");
  const runtime::EngineOptions eo = engine_options(a, max_seq_len);
  // The plan `g4c run` runs with the same options (compiled in process, or --plan), not timed.
  auto plan = plan_for(a, max_seq_len);
  const auto t_load = std::chrono::steady_clock::now();
  auto engine = runtime::Engine::open(dir, std::move(plan), eo, runtime::backend_for_flags(a.dev, dir));
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count();
  runtime::ServeOptions so;
  so.default_max_new_tokens = a.max_new_tokens;
  so.ignore_eos = a.ignore_eos;
  so.device = std::string(engine->backend().name()) + " (" + engine->plan()->generator()->str() + ")";

  Progress bar("bench " + std::filesystem::path(a.input).filename().string(), uint64_t(a.warmup + 2 * a.repeat));
  const std::string warm = first_requests(jsonl, a.warmup_requests);
  for (int i = 0; i < a.warmup; ++i, bar.add(1)) run_once(*engine, tok.get(), warm, a.input, so);
  std::vector<RunRecord> full, pre;
  for (int i = 0; i < a.repeat; ++i, bar.add(1)) full.push_back(run_once(*engine, tok.get(), jsonl, a.input, so));
  for (int i = 0; i < a.repeat; ++i, bar.add(1))
    pre.push_back(run_once(*engine, tok.get(), prefill_jsonl, a.input, so));
  bar.finish();

  json rep;
  rep["schema"] = "g4c-bench/1";
  rep["model"] = a.model;
  rep["input"] = a.input;
  rep["date"] = utc_now();
  rep["label"] = a.label;
  rep["options"] = {{"repeat", a.repeat},         {"warmup", a.warmup}, {"warmup_requests", a.warmup_requests},         {"batch_size", engine->options().max_sequences}, {"batch_size_asked", a.batch_size},
                    {"batch_size_reason", engine->batch_reason()},
                    {"max_new_tokens", a.max_new_tokens}, {"ignore_eos", a.ignore_eos},
                    {"device", a.dev.device},     {"emulate", a.dev.emulate},   {"budget", a.dev.budget},
                    {"plan", a.plan.empty() ? json("compiled in process") : json(a.plan)},
                    {"deterministic", a.dev.deterministic},
                    {"token_budget", engine->options().token_budget},
                    {"chunk_tokens", engine->options().chunk_tokens},
                    {"mixed_prefill_tokens", engine->options().mixed_prefill_tokens},
                    {"kv_dtype", kv_storage(engine->plan())},
                    {"table_dtype", table_storage(engine->plan())}};
  rep["load_s"] = load_s;
  rep["requests"] = full[0].summary["requests"];
  std::vector<double> el, pel, ttft, tpot, itl;
  std::vector<bench::RequestShape> shapes;
  int64_t prompt_total = 0;
  for (const auto& r : full[0].results) {
    shapes.push_back({r.prompt_tokens, int64_t(r.tokens.size())});
    prompt_total += r.prompt_tokens;
  }
  rep["prompt_tokens"] = prompt_total;
  json runs = json::array(), pruns = json::array();
  for (const auto& r : full) {
    runs.push_back(run_json(r));
    el.push_back(r.summary["elapsed_s"]);
    for (const auto& x : r.results) {
      if (!x.tokens.empty()) ttft.push_back(x.prefill_latency_s);
      if (double t = runtime::time_per_output_token(x); t >= 0) tpot.push_back(t);
      itl.insert(itl.end(), x.decode_latencies_s.begin(), x.decode_latencies_s.end());
    }
  }
  for (const auto& r : pre) {
    pruns.push_back(run_json(r));
    pel.push_back(r.summary["elapsed_s"]);
  }
  rep["runs"] = runs;
  rep["prefill_runs"] = pruns;
  rep["elapsed_s"] = stats_of(el);
  rep["generated_tokens"] = full[0].summary["generated_tokens"];
  const double med = rep["elapsed_s"]["median"];
  rep["generated_tokens_per_s"] = med > 0 ? full[0].summary["generated_tokens"].get<double>() / med : 0.0;
  rep["ttft_s"] = {{"p50", bench::percentile(ttft, 50)}, {"p99", bench::percentile(ttft, 99)}};
  rep["tpot_s"] = {{"p50", bench::percentile(tpot, 50)}, {"p99", bench::percentile(tpot, 99)}};
  rep["itl_s"] = {{"p50", bench::percentile(itl, 50)}, {"p99", bench::percentile(itl, 99)}};
  rep["percentiles_over"] =
      "every request of every timed run (TTFT; TPOT = its mean interval between tokens) / every interval between "
      "consecutive tokens of them (ITL)";
  json dev = full.back().summary;  // peak_device_bytes, steps; the CUDA backend adds its fields
  runtime::add_device_summary(engine->backend(), dev);
  rep["device"] = dev["device"];
  rep["emulation"] = dev.value("emulation", json(nullptr));
  rep["peak_device_bytes"] = dev["peak_device_bytes"];
  if (dev.contains("cuda_graphs")) rep["cuda_graphs"] = dev["cuda_graphs"];
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  rep["peak_rss_bytes"] = int64_t(ru.ru_maxrss) * 1024;  // Linux: KiB
  if (rep["label"].get<std::string>().empty())
    rep["label"] = a.dev.device + (a.dev.emulate.empty() ? "" : " " + a.dev.emulate) + " b" +
                   std::to_string(engine->options().max_sequences);

  rep["ceilings"] = {{"flops_per_s", ceil.flops_per_s},
                     {"bytes_per_s", ceil.bytes_per_s},
                     {"flops_source", ceil.flops_source},
                     {"bytes_source", ceil.bytes_source}};
  bench::ScheduleShape sched{engine->options().token_budget, engine->options().chunk_tokens, full[0].steps,
                            pre[0].steps};
  for (const auto& g : engine->config().layers) sched.kv_token_bytes.push_back(double(g.kv_bytes_per_token()));
  // As the backend holds each layer: bf16 on the GPU, fp32 on the CPU, or FP8 codes + scales.
  const size_t kv_elem = std::string(engine->backend().name()) == "cuda" ? 2 : 4;
  for (const auto* l : *engine->plan()->kv())
    if (l->layer() >= 0 && size_t(l->layer()) < sched.kv_token_bytes.size())
      sched.kv_token_bytes[size_t(l->layer())] = double(plan::kv_token_bytes(*l, kv_elem));
  const double ckpt_bytes = bench::checkpoint_bytes(dir);
  // The weight bytes a step reads: the checkpoint's, less what an INT8 table saves over its BF16
  // tensor (codes + fp32 row scales are what the LM head streams).
  double step_weight_bytes = ckpt_bytes;
  for (const auto* w : *engine->plan()->weights())
    step_weight_bytes -= double(w->checkpoint_bytes()) - double(plan::weight_storage_bytes(*w));
  const auto work = bench::count_work(engine->config(), step_weight_bytes, shapes, sched);
  const double pmed = bench::percentile(pel, 50);
  rep["phases"] = {{"prefill", bench::phase_json(work.prefill, pmed, ceil)},
                   {"decode", bench::phase_json(work.decode, std::max(0.0, med - pmed), ceil)}};
  // The decode time is a difference of two medians: when it is not larger than the spread of the
  // runs it is noise (e.g. a prefill-dominated CPU workload on a loaded machine); say so.
  const double spread = (rep["elapsed_s"]["max"].get<double>() - rep["elapsed_s"]["min"].get<double>()) +
                        (*std::max_element(pel.begin(), pel.end()) - *std::min_element(pel.begin(), pel.end()));
  rep["phases"]["decode"]["elapsed_uncertain"] = med - pmed <= spread;
  rep["phase_spread_s"] = spread;
  rep["phase_method"] =
      "prefill elapsed = median of the prefill runs (same requests, max_new_tokens 1); decode elapsed = median "
      "elapsed - prefill elapsed; FLOPs/bytes counted from the config (tools/bench_roofline.h); roofline fraction = "
      "max(FLOPs/peak FLOP/s, bytes/peak B/s) / elapsed";
  rep["checkpoint_bytes"] = ckpt_bytes;
  rep["step_weight_bytes"] = step_weight_bytes;
  // Pure decode steps of the timed runs by their exact row count (summed over the runs): how
  // often each size runs, and so how much a CUDA-graph bucket pads them (the plan's decode
  // buckets: g4c inspect).
  std::map<int, runtime::DecodeBatchStats> rows_sum;
  for (const auto& r : full)
    for (const auto& [rows, d] : r.decode_by_rows) rows_sum[rows] += d;
  json by_rows = json::array();
  for (const auto& [rows, d] : rows_sum)
    by_rows.push_back({{"rows", rows}, {"steps", d.steps}, {"ms_per_step", 1e3 * d.seconds / double(d.steps)}});
  // The same steps by batch size (row ranges 1, 2, 3-4, 5-8, 9-16, 17-32, 33 and more; rows_min /
  // rows_max: the counts seen in the range): their own measured time and roofline fraction.
  json by_batch = json::array();
  constexpr int kRanges[][2] = {{1, 1}, {2, 2}, {3, 4}, {5, 8}, {9, 16}, {17, 32}, {33, INT_MAX}};
  for (const auto& [lo, hi] : kRanges) {
    runtime::DecodeBatchStats sum;
    bench::DecodeBatch b;
    b.rows_lo = INT_MAX;
    for (const auto& [rows, d] : rows_sum)
      if (rows >= lo && rows <= hi) {
        b.rows_lo = std::min(b.rows_lo, rows);
        b.rows_hi = std::max(b.rows_hi, rows);
        b.rows += d.steps * rows;
        sum += d;
      }
    if (sum.steps == 0) continue;
    b.steps = sum.steps;
    b.seconds = sum.seconds;
    b.keys = sum.keys;
    b.window_keys = sum.window_keys;
    by_batch.push_back(bench::decode_batch_json(engine->config(), step_weight_bytes, b, sched.kv_token_bytes, ceil));
  }
  rep["decode_by_batch"] = by_batch;
  rep["decode_steps_by_rows"] = by_rows;
  if (a.dev.emulate == "1g.10gb") {
    // The emulation has the whole GPU's HBM bandwidth; a real slice has 1/8 of it: project.
    const auto slice = bench::real_slice_1g10gb();
    const double dmed = std::max(0.0, med - pmed);
    json pj = {{"prefill", bench::project_phase(work.prefill, pmed, slice)},
               {"decode", bench::project_phase(work.decode, dmed, slice)}};
    const double lo = pj["prefill"]["projected_s"].get<double>() + pj["decode"]["projected_s"].get<double>();
    const double hi = pj["prefill"]["projected_upper_s"].get<double>() + pj["decode"]["projected_upper_s"].get<double>();
    rep["real_slice_projection"] = {{"slice", slice.name},
                                    {"sms", slice.sms},
                                    {"flops_per_s", slice.flops_per_s},
                                    {"bytes_per_s", slice.bytes_per_s},
                                    {"source", slice.source},
                                    {"phases", pj},
                                    {"measured_elapsed_s", med},
                                    {"projected_elapsed_s", lo},
                                    {"projected_elapsed_upper_s", hi},
                                    {"projected_generated_tokens_per_s",
                                     lo > 0 ? full[0].summary["generated_tokens"].get<double>() / lo : 0.0}};
    std::fprintf(stderr,
                 "emulated 1g.10gb: %.2f s measured; a real 1g.10gb slice (14 SMs, %.2f TB/s): %.2f-%.2f s projected\n",
                 med, slice.bytes_per_s / 1e12, lo, hi);
  }
  return rep;
}

void run_bench(const BenchArgs& a) {
  std::vector<json> reports;
  if (!a.plot_only) {
    if (a.model.empty() || a.input.empty()) throw Error("bench: --model and --input are required (or --plot-only)");
    if (!a.report.empty()) models::check_output_distinct(a.report, "--report", a.input, "--input");
    if (a.repeat < 1) throw Error("bench: --repeat must be at least 1");
    if (a.warmup < 0) throw Error("bench: --warmup must be non-negative");
    json rep = bench(a);
    if (!a.report.empty()) {
      std::ofstream f(a.report);
      if (!f) throw Error(a.report + ": cannot write report");
      f << rep.dump(2) << "\n";
      f.close();
      if (!f) throw Error(a.report + ": write failed (disk full or I/O error): the report is not written");
    }
    if (!rep["decode_by_batch"].empty()) {  // before the summary line (scripts read the last line)
      std::string line = "decode steps by batch (rows: ms per step, roofline):";
      for (const auto& b : rep["decode_by_batch"]) {
        const int lo = b["rows_min"], hi = b["rows_max"];
        char buf[96];
        std::snprintf(buf, sizeof buf, " %s%s: %.2f ms %.0f%%;", std::to_string(lo).c_str(),
                      hi > lo ? ("-" + std::to_string(hi)).c_str() : "", b["ms_per_step"].get<double>(),
                      100 * b["roofline_fraction"].get<double>());
        line += buf;
      }
      line.pop_back();
      std::fprintf(stderr, "%s\n", line.c_str());
    }
    std::fprintf(stderr,
                 "%s: median %.3f s (min %.3f, max %.3f), %.1f tok/s, TPOT p50/p99 %.1f/%.1f ms, ITL p50/p99 "
                 "%.1f/%.1f ms, roofline prefill %.1f%% decode %.1f%%\n",
                 rep["label"].get<std::string>().c_str(), rep["elapsed_s"]["median"].get<double>(),
                 rep["elapsed_s"]["min"].get<double>(), rep["elapsed_s"]["max"].get<double>(),
                 rep["generated_tokens_per_s"].get<double>(), 1e3 * rep["tpot_s"]["p50"].get<double>(),
                 1e3 * rep["tpot_s"]["p99"].get<double>(), 1e3 * rep["itl_s"]["p50"].get<double>(),
                 1e3 * rep["itl_s"]["p99"].get<double>(),
                 100 * rep["phases"]["prefill"]["roofline_fraction"].get<double>(),
                 100 * rep["phases"]["decode"]["roofline_fraction"].get<double>());
    reports.push_back(std::move(rep));
  }
  for (const auto& path : a.compare) {
    try {
      reports.push_back(json::parse(models::read_regular_file(path, "bench report", uint64_t(256) << 20)));
    } catch (const json::exception& e) {
      throw Error(path + ": not a bench report JSON (" + e.what() + ")");
    }
  }
  if (!a.plot.empty()) bench::plot_reports(reports, a.plot);
  else if (a.plot_only) throw Error("bench: --plot-only needs --plot");
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  auto* cmd = app.add_subcommand("bench", "time a requests jsonl N times in one process; report JSON (+ PNG plot)");
  add_run_options(cmd, *a, "longest prompt + generation (0: the longest request of the input)");
  cmd->add_option("--input", a->input, "requests jsonl");
  cmd->add_option("--report", a->report, "report JSON to write");
  cmd->add_option("--plot", a->plot, "PNG: elapsed per configuration + roofline fraction per phase");
  cmd->add_option("--compare", a->compare, "other bench reports to draw next to this one (repeatable)");
  cmd->add_flag("--plot-only", a->plot_only, "run nothing: plot the --compare reports");
  cmd->add_option("--label", a->label, "configuration name in the report and plot");
  cmd->add_option("--repeat", a->repeat, "timed runs of the whole workload")->capture_default_str();
  cmd->add_option("--warmup", a->warmup, "untimed runs first")->capture_default_str();
  cmd->add_option("--warmup-requests", a->warmup_requests, "warm up on the first N requests only (0: all)")
      ->capture_default_str();
  cmd->callback([a] { run_bench(*a); });
}

}  // namespace g4c::cli

// Requests jsonl → engine → outputs jsonl + summary (see serving.h).
#include "runtime/serving.h"

#include <algorithm>
#include <chrono>
#include <istream>
#include <ostream>

#include "models/tokenizer.h"

namespace g4c::runtime {
namespace {

using nlohmann::json;

std::vector<int32_t> int_list(const json& j, const char* field) {
  if (!j.is_array()) throw std::invalid_argument(std::string(field) + " must be a list of token ids");
  std::vector<int32_t> out;
  for (const auto& x : j) {
    if (!x.is_number_integer()) throw std::invalid_argument(std::string(field) + " must hold only integers");
    const auto v = x.get<int64_t>();
    if (v < INT32_MIN || v > INT32_MAX) throw std::invalid_argument(std::string(field) + " holds an id out of range");
    out.push_back(int32_t(v));
  }
  return out;
}

GenerationRequest to_request(const json& j, const models::Tokenizer* tok, const ServeOptions& opts) {
  if (!j.is_object()) throw std::invalid_argument("a request must be a JSON object");
  GenerationRequest r;
  if (j.contains("input_ids")) {
    r.prompt = int_list(j["input_ids"], "input_ids");
  } else if (j.contains("prompt")) {
    if (!j["prompt"].is_string()) throw std::invalid_argument("prompt must be a string");
    if (!tok) throw std::invalid_argument("prompt given but the model has no tokenizer.json");
    const auto text = j["prompt"].get<std::string>();
    if (text.empty()) throw std::invalid_argument("empty prompt");
    r.prompt = tok->encode(text, /*add_bos=*/true);
  } else {
    throw std::invalid_argument("neither \"prompt\" nor \"input_ids\"");
  }
  r.max_new_tokens = opts.default_max_new_tokens;
  if (j.contains("max_new_tokens")) {
    if (!j["max_new_tokens"].is_number_integer()) throw std::invalid_argument("max_new_tokens must be an integer");
    const auto m = j["max_new_tokens"].get<int64_t>();
    if (m < 0) throw std::invalid_argument("negative max_new_tokens " + std::to_string(m));
    r.max_new_tokens = int(std::min<int64_t>(m, INT32_MAX));
  }
  if (j.contains("stop_token_ids")) r.stop_token_ids = int_list(j["stop_token_ids"], "stop_token_ids");
  r.ignore_eos = opts.ignore_eos;
  if (j.contains("sampling_params")) {
    const auto& s = j["sampling_params"];
    if (!s.is_object()) throw std::invalid_argument("sampling_params must be an object");
    auto num = [&](const char* k, double dflt) {
      if (!s.contains(k) || s[k].is_null()) return dflt;
      if (!s[k].is_number()) throw std::invalid_argument(std::string("sampling_params.") + k + " must be a number");
      return s[k].get<double>();
    };
    r.sampling.temperature = float(num("temperature", 0.0));
    r.sampling.top_k = int(num("top_k", -1));
    r.sampling.top_p = float(num("top_p", 1.0));
    if (r.sampling.temperature < 0) throw std::invalid_argument("sampling_params.temperature must be >= 0");
    if (!(r.sampling.top_p > 0)) throw std::invalid_argument("sampling_params.top_p must be > 0");
    if (s.contains("seed") && !s["seed"].is_null()) {
      if (!s["seed"].is_number_integer()) throw std::invalid_argument("sampling_params.seed must be an integer");
      r.sampling.seed = s["seed"].get<uint64_t>();
    }
  }
  return r;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const double pos = p / 100.0 * double(v.size() - 1);
  const size_t lo = size_t(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - double(lo));
}

}  // namespace

std::vector<ParsedRequest> parse_requests(std::istream& in, const std::string& file, const models::Tokenizer* tok,
                                          const ServeOptions& opts) {
  std::vector<ParsedRequest> out;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;  // blank lines are not requests
    ParsedRequest p;
    p.request.id = std::to_string(out.size());
    try {
      p.request = to_request(json::parse(line), tok, opts);
      p.request.id = std::to_string(out.size());
    } catch (const std::exception& e) {
      p.error = file + ":" + std::to_string(line_no) + ": " + e.what();
    }
    out.push_back(std::move(p));
  }
  return out;
}

json result_json(const GenerationResult& r, const models::Tokenizer* tok, size_t peak_bytes) {
  json j;
  j["request_id"] = std::stoll(r.id);
  j["token_ids"] = r.tokens;
  j["text"] = tok ? tok->decode(r.tokens, /*skip_special=*/true) : std::string();
  j["prompt_tokens"] = r.prompt_tokens;
  j["generated_tokens"] = r.tokens.size();
  j["finish_reason"] = r.finish_reason;
  if (r.finish_reason == "error") j["error"] = r.error;
  j["metrics"] = {{"prefill_latency_s", r.prefill_latency_s},
                  {"decode_latencies_s", r.decode_latencies_s},
                  {"total_latency_s", r.total_latency_s},
                  {"peak_allocated_bytes", peak_bytes},
                  {"peak_reserved_bytes", peak_bytes}};
  return j;
}

ServeSummary serve_jsonl(Engine& engine, const models::Tokenizer* tok, std::istream& requests, const std::string& file,
                         std::ostream& out, const ServeOptions& opts,
                         const std::function<void(const GenerationResult&)>& on_finish) {
  auto parsed = parse_requests(requests, file, tok, opts);
  const auto start = std::chrono::steady_clock::now();
  std::vector<GenerationRequest> good;
  std::vector<int> good_index;
  std::vector<GenerationResult> results(parsed.size());
  for (size_t i = 0; i < parsed.size(); ++i) {
    if (!parsed[i].error.empty()) {
      results[i].id = std::to_string(i);
      results[i].index = int(i);
      results[i].finish_reason = "error";
      results[i].error = parsed[i].error;
      if (on_finish) on_finish(results[i]);
      continue;
    }
    good.push_back(std::move(parsed[i].request));
    good_index.push_back(int(i));
  }
  auto served = engine.generate(std::move(good), on_finish);
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (size_t k = 0; k < served.size(); ++k) {
    served[k].index = good_index[k];
    results[good_index[k]] = std::move(served[k]);
  }
  ServeSummary s;
  std::vector<double> ttft, tpot;
  const size_t peak = engine.backend().peak_bytes();
  for (const auto& r : results) {
    // Decoded text may cut a UTF-8 sequence (byte-fallback tokens): replace, never throw.
    out << result_json(r, tok, peak).dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
    ++s.requests;
    if (r.finish_reason == "error") {
      ++s.failed;
      continue;
    }
    s.generated_tokens += int64_t(r.tokens.size());
    if (!r.tokens.empty()) ttft.push_back(r.prefill_latency_s);
    for (double d : r.decode_latencies_s) tpot.push_back(d);
  }
  out.flush();
  s.json = {{"requests", s.requests},
            {"generated_tokens", s.generated_tokens},
            {"elapsed_s", elapsed},
            {"requests_per_s", elapsed > 0 ? s.requests / elapsed : 0.0},
            {"generated_tokens_per_s", elapsed > 0 ? double(s.generated_tokens) / elapsed : 0.0},
            {"batch_size", engine.options().max_sequences},
            {"batch_size_reason", engine.batch_reason()},
            {"max_running_sequences", engine.stats().max_running},
            {"failed_requests", s.failed},
            {"peak_device_bytes", peak},
            {"ttft_p50_s", percentile(ttft, 50)},
            {"ttft_p99_s", percentile(ttft, 99)},
            {"tpot_p50_s", percentile(tpot, 50)},
            {"tpot_p99_s", percentile(tpot, 99)},
            {"steps", engine.stats().steps},
            {"preemptions", engine.stats().preemptions},
            {"device", opts.device}};
  return s;
}

}  // namespace g4c::runtime

// Requests jsonl → engine → outputs jsonl + summary (see serving.h).
#include "runtime/serving.h"

#include <algorithm>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <istream>
#include <ostream>

#include "models/error.h"
#include "models/input_file.h"
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
    const json& m = j["max_new_tokens"];
    if (!m.is_number_integer()) throw std::invalid_argument("max_new_tokens must be an integer");
    // Above INT32_MAX (up to 2^64-1, read unsigned) it means "until the length cap".
    if (m.is_number_unsigned()) {
      r.max_new_tokens = int(std::min<uint64_t>(m.get<uint64_t>(), INT32_MAX));
    } else {
      const auto v = m.get<int64_t>();
      if (v < 0) throw std::invalid_argument("negative max_new_tokens " + std::to_string(v));
      r.max_new_tokens = int(std::min<int64_t>(v, INT32_MAX));
    }
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
    // Checked as doubles before any narrowing: a float or int cast of an out-of-range double is
    // undefined behaviour (1e10 as top_k, 1e300 as temperature).
    const double temperature = num("temperature", 0.0), top_p = num("top_p", 1.0);
    if (!(temperature >= 0 && temperature <= FLT_MAX))
      throw std::invalid_argument("sampling_params.temperature must be a finite number >= 0");
    if (!(top_p > 0 && top_p <= 1)) throw std::invalid_argument("sampling_params.top_p must be in (0, 1]");
    r.sampling.temperature = float(temperature);
    r.sampling.top_p = float(top_p);
    if (s.contains("top_k") && !s["top_k"].is_null()) {
      const json& k = s["top_k"];
      // As vLLM: -1 disables the filter; otherwise at least 1 (above the vocabulary: all tokens).
      if (!k.is_number_integer()) throw std::invalid_argument("sampling_params.top_k must be an integer (-1: no top-k)");
      if (k.is_number_unsigned()) {  // (every non-negative JSON integer)
        if (k.get<uint64_t>() == 0) throw std::invalid_argument("sampling_params.top_k must be -1 (no top-k) or >= 1, not 0");
        r.sampling.top_k = int(std::min<uint64_t>(k.get<uint64_t>(), INT32_MAX));
      } else {
        const auto v = k.get<int64_t>();
        if (v != -1 && v < 1) throw std::invalid_argument("sampling_params.top_k must be -1 (no top-k) or >= 1, not " + std::to_string(v));
        r.sampling.top_k = int(std::min<int64_t>(v, INT32_MAX));
      }
    }
    if (s.contains("seed") && !s["seed"].is_null()) {
      if (!s["seed"].is_number_unsigned()) throw std::invalid_argument("sampling_params.seed must be a non-negative integer");
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
                                          const ServeOptions& opts, std::string* stream_error) {
  std::vector<ParsedRequest> out;
  std::string line;
  models::LineReader reader(in, opts.max_line_bytes, opts.max_input_bytes);
  for (;;) {
    const auto st = reader.next(line);
    if (st == models::LineReader::Status::End) break;
    const std::string where = file + ":" + std::to_string(reader.line_number()) + ": ";
    if (st == models::LineReader::Status::Binary || st == models::LineReader::Status::TooBig) {
      const std::string why =
          st == models::LineReader::Status::Binary
              ? where + "binary data (a NUL byte): not a jsonl file; the rest of it is not read"
              : file + ": larger than " + std::to_string(opts.max_input_bytes) + " bytes; the rest of it is not read";
      if (stream_error) *stream_error = why;
      break;
    }
    if (st == models::LineReader::Status::Line && line.find_first_not_of(" \t\r") == std::string::npos)
      continue;  // blank lines are not requests
    ParsedRequest p;
    p.request.id = std::to_string(out.size());
    p.line = reader.line_number();
    if (st == models::LineReader::Status::TooLong) {
      p.error = where + "line longer than " + std::to_string(opts.max_line_bytes) + " bytes";
    } else {
      try {
        p.request = to_request(json::parse(line), tok, opts);
        p.request.id = std::to_string(out.size());
      } catch (const std::exception& e) {
        p.error = where + e.what();
      }
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

namespace {
struct Interrupted {};
}  // namespace

ServeSummary serve_jsonl(Engine& engine, const models::Tokenizer* tok, std::istream& requests, const std::string& file,
                         std::ostream& out, const ServeOptions& opts,
                         const std::function<void(const GenerationResult&)>& on_finish) {
  ServeSummary s;
  auto parsed = parse_requests(requests, file, tok, opts, &s.input_error);
  const auto start = std::chrono::steady_clock::now();
  std::vector<GenerationRequest> good;
  std::vector<int> good_index;
  std::vector<GenerationResult> results(parsed.size());
  std::vector<char> done(parsed.size(), 0);
  size_t written = 0;
  std::vector<double> ttft, tpot, itl;
  // Writes every finished result of the done prefix, one flushed line each.
  auto write_ready = [&] {
    while (written < results.size() && done[written]) {
      const auto& r = results[written];
      // Decoded text may cut a UTF-8 sequence (byte-fallback tokens): replace, never throw.
      out << result_json(r, tok, engine.backend().peak_bytes()).dump(-1, ' ', false, json::error_handler_t::replace)
          << "\n";
      out.flush();
      if (!out) throw Error(opts.output_name + ": write failed (disk full or I/O error) at request " + std::to_string(written));
      ++s.requests;
      ++written;
      if (r.finish_reason == "error") {
        ++s.failed;
        continue;
      }
      s.generated_tokens += int64_t(r.tokens.size());
      if (!r.tokens.empty()) ttft.push_back(r.prefill_latency_s);
      if (double t = time_per_output_token(r); t >= 0) tpot.push_back(t);
      itl.insert(itl.end(), r.decode_latencies_s.begin(), r.decode_latencies_s.end());
    }
  };
  auto finished = [&](size_t i, GenerationResult r) {
    results[i] = std::move(r);
    done[i] = 1;
    if (on_finish) on_finish(results[i]);
    write_ready();
    if (opts.interrupt && opts.interrupt->load()) throw Interrupted{};
  };
  try {
    for (size_t i = 0; i < parsed.size(); ++i) {
      if (!parsed[i].error.empty()) {
        GenerationResult r;
        r.id = std::to_string(i);
        r.index = int(i);
        r.finish_reason = "error";
        r.error = parsed[i].error;
        finished(i, std::move(r));
        continue;
      }
      good.push_back(std::move(parsed[i].request));
      good_index.push_back(int(i));
    }
    if (opts.interrupt && opts.interrupt->load()) throw Interrupted{};
    engine.generate(std::move(good), [&](const GenerationResult& r) {
      GenerationResult c = r;
      const size_t i = size_t(good_index.at(size_t(r.index)));
      c.index = int(i);
      // The engine names the request; the user needs its line.
      if (c.finish_reason == "error") c.error = file + ":" + std::to_string(parsed[i].line) + ": " + c.error;
      finished(i, std::move(c));
    });
  } catch (const Interrupted&) {
    s.interrupted = true;
  }
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const size_t peak = engine.backend().peak_bytes();
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
            {"itl_p50_s", percentile(itl, 50)},
            {"itl_p99_s", percentile(itl, 99)},
            {"steps", engine.stats().steps},
            {"preemptions", engine.stats().preemptions},
            {"device", opts.device}};
  if (s.interrupted) {
    s.json["interrupted"] = true;
    s.json["requests_in_input"] = parsed.size();
  }
  if (!s.input_error.empty()) s.json["input_error"] = s.input_error;
  return s;
}

}  // namespace g4c::runtime

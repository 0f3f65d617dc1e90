// The lab-compatible serving formats of DESIGN.md §3, shared by `g4c run` and the tests:
// requests jsonl in, outputs jsonl + summary JSON out.
//
// A bad request (malformed JSON line, no prompt, empty prompt, prompt too long, unknown token
// id, negative or non-integer max_new_tokens, bad sampling_params) becomes a result with
// finish_reason "error" and an "error" message naming the line / request; all other requests
// are served; ServeSummary::failed counts them so the CLI can exit non-zero.
#pragma once

#include <atomic>
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/engine.h"

namespace g4c::models {
class Tokenizer;
}

namespace g4c::runtime {

struct ParsedRequest {
  GenerationRequest request;  // request.id = the request's index (0-based line number of non-blank lines)
  std::string error;          // non-empty: the line could not be turned into a request
  int line = 0;               // 1-based line of the stream it came from
};

struct ServeOptions {
  int default_max_new_tokens = 32;  // when a request has none
  bool ignore_eos = false;          // --ignore-eos: stop only on stop_token_ids / length
  std::string device = "cpu";       // written into the summary
  std::string output_name = "outputs";  // names the output stream in write errors
  // Bounds on the requests stream: a longer line is one failed request; past the total (or at
  // a NUL byte: not text) the rest of the stream is not read and ServeSummary::input_error says
  // why. 16 MiB holds a prompt of the longest context as text or as input_ids.
  size_t max_line_bytes = size_t(16) << 20;
  uint64_t max_input_bytes = uint64_t(1) << 30;
  // Polled when a request finishes: once true, serving stops, the finished prefix of the
  // outputs stays written (whole lines) and the summary says "interrupted" (SIGINT in g4c run).
  const std::atomic<bool>* interrupt = nullptr;
};

// Parses a requests jsonl stream. `tokenizer` encodes "prompt" text with BOS (may be null
// when every request has "input_ids"). `file` names the stream in messages. `stream_error`
// (optional) receives why the stream was not read to its end (binary data, too large).
std::vector<ParsedRequest> parse_requests(std::istream& in, const std::string& file, const models::Tokenizer* tokenizer,
                                          const ServeOptions& opts, std::string* stream_error = nullptr);

// One outputs.jsonl object.
nlohmann::json result_json(const GenerationResult& r, const models::Tokenizer* tokenizer, size_t peak_bytes);

struct ServeSummary {
  nlohmann::json json;  // the summary JSON (lab fields + ours)
  int requests = 0, failed = 0;
  bool interrupted = false;  // ServeOptions::interrupt stopped serving: `requests` lines were written
  std::string input_error;   // the requests stream was not read to its end (see parse_requests)
  int64_t generated_tokens = 0;
};

// Parses, generates and writes every result line (in request order) to `out`, each as soon as
// it and every request before it are done, flushed: a write error throws g4c::Error naming
// ServeOptions::output_name. `on_finish` is told of each finished request (progress bar).
ServeSummary serve_jsonl(Engine& engine, const models::Tokenizer* tokenizer, std::istream& requests,
                         const std::string& file, std::ostream& out, const ServeOptions& opts,
                         const std::function<void(const GenerationResult&)>& on_finish = {});

}  // namespace g4c::runtime

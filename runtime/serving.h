// The lab-compatible serving formats of DESIGN.md §3, shared by `g4c run` and the tests:
// requests jsonl in, outputs jsonl + summary JSON out.
//
// A bad request (malformed JSON line, no prompt, empty prompt, prompt too long, unknown token
// id, negative or non-integer max_new_tokens, bad sampling_params) becomes a result with
// finish_reason "error" and an "error" message naming the line / request; all other requests
// are served; ServeSummary::failed counts them so the CLI can exit non-zero.
#pragma once

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
};

struct ServeOptions {
  int default_max_new_tokens = 32;  // when a request has none
  bool ignore_eos = false;          // --ignore-eos: stop only on stop_token_ids / length
  std::string device = "cpu";       // written into the summary
};

// Parses a requests jsonl stream. `tokenizer` encodes "prompt" text with BOS (may be null
// when every request has "input_ids"). `file` names the stream in messages.
std::vector<ParsedRequest> parse_requests(std::istream& in, const std::string& file, const models::Tokenizer* tokenizer,
                                          const ServeOptions& opts);

// One outputs.jsonl object.
nlohmann::json result_json(const GenerationResult& r, const models::Tokenizer* tokenizer, size_t peak_bytes);

struct ServeSummary {
  nlohmann::json json;  // the summary JSON (lab fields + ours)
  int requests = 0, failed = 0;
  int64_t generated_tokens = 0;
};

// Parses, generates and writes every result line (in request order) to `out`.
// `on_finish` is told of each finished request (progress bar).
ServeSummary serve_jsonl(Engine& engine, const models::Tokenizer* tokenizer, std::istream& requests,
                         const std::string& file, std::ostream& out, const ServeOptions& opts,
                         const std::function<void(const GenerationResult&)>& on_finish = {});

}  // namespace g4c::runtime

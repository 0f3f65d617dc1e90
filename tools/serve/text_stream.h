// Incremental detokenization of one generated sequence, for streaming: text is released only
// when it is final — never half a UTF-8 character (a run of byte-fallback tokens is decoded
// only once a token after it ends the run) and never a possible beginning of a stop string
// (held until it is known not to be one). A stop string ends the text before it and is not
// returned.
//
// The released pieces concatenate to the tokenizer's decode of the whole sequence (Gemma's
// decoder — Replace, ByteFallback, Fuse — decodes each token independently of the others,
// except that a byte run decodes as a whole), cut at the first stop string.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace g4c::models {
class Tokenizer;
}

namespace g4c::serve {

class TextStream {
 public:
  // `hidden`: token ids that end the answer without text (EOS, end of turn); special tokens
  // are skipped as in decode(skip_special = true).
  TextStream(const models::Tokenizer& tokenizer, std::vector<std::string> stop, std::vector<int32_t> hidden);

  // Adds a generated token; returns the text released by it (often empty). Tokens after a stop
  // string are ignored.
  std::string push(int32_t token);
  // The end of generation: releases what was held back (an incomplete UTF-8 tail decodes to
  // U+FFFD as in the tokenizer's decode).
  std::string finish();
  bool stopped() const { return stopped_; }  // a stop string was found
  const std::string& text() const { return text_; }  // everything released so far

 private:
  std::string release(bool final);

  const models::Tokenizer& tok_;
  std::vector<std::string> stop_;
  std::vector<int32_t> hidden_;
  std::vector<int32_t> window_;  // tokens not yet decoded into held_
  std::string held_;             // decoded, not yet released
  std::string text_;
  bool stopped_ = false;
};

}  // namespace g4c::serve

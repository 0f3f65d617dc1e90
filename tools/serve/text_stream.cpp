// Incremental detokenization with stop strings (see text_stream.h).
#include "tools/serve/text_stream.h"

#include <algorithm>
#include <cctype>

#include "models/tokenizer.h"

namespace g4c::serve {
namespace {

// A byte-fallback token (<0xNN>): runs of them decode together (valid UTF-8, or one U+FFFD
// per byte of the whole run), so a run is decoded only once a token after it ends it.
bool is_byte_token(const std::string& t) {
  return t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' && std::isxdigit(static_cast<unsigned char>(t[3])) &&
         std::isxdigit(static_cast<unsigned char>(t[4]));
}

}  // namespace

TextStream::TextStream(const models::Tokenizer& tokenizer, std::vector<std::string> stop, std::vector<int32_t> hidden)
    : tok_(tokenizer), stop_(std::move(stop)), hidden_(std::move(hidden)) {}

std::string TextStream::push(int32_t token) {
  if (stopped_ || std::find(hidden_.begin(), hidden_.end(), token) != hidden_.end()) return "";
  window_.push_back(token);
  if (is_byte_token(tok_.id_to_token(token))) return "";  // the byte run may go on
  const std::string w = tok_.decode(window_, /*skip_special=*/true);
  window_.clear();
  held_ += w;
  return release(false);
}

std::string TextStream::finish() {
  if (stopped_) return "";
  if (!window_.empty()) held_ += tok_.decode(window_, /*skip_special=*/true);
  window_.clear();
  return release(true);
}

std::string TextStream::release(bool final) {
  // The first stop string in held_ (held_ starts where no stop string can have begun earlier).
  size_t cut = std::string::npos;
  for (const auto& s : stop_) cut = std::min(cut, held_.find(s));
  std::string out;
  if (cut != std::string::npos) {
    out = held_.substr(0, cut);
    held_.clear();
    stopped_ = true;
  } else {
    // Hold back the longest suffix of held_ that is a proper prefix of a stop string.
    size_t keep = 0;
    if (!final)
      for (const auto& s : stop_)
        for (size_t n = std::min(s.size() - 1, held_.size()); n > keep; --n)
          if (held_.compare(held_.size() - n, n, s, 0, n) == 0) {
            keep = n;
            break;
          }
    out = held_.substr(0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
  }
  text_ += out;
  return out;
}

}  // namespace g4c::serve

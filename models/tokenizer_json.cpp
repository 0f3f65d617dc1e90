// SAX reader for tokenizer.json: streams model.vocab / model.merges, DOM for the rest.
#include "models/tokenizer_json.h"

#include "models/error.h"

namespace g4c::models::tokenizer_detail {
namespace {

using json = nlohmann::json;

// Handler for nlohmann::json::sax_parse (duck-typed, no virtual calls). Invariant:
// `mode` says which streamed member we are inside; DOM frames are pushed only in
// Mode::Dom, so the DOM stack never holds pointers into vocab/merges.
class Reader {
 public:
  explicit Reader(TokenizerJson& doc) : doc_(doc) {}

  bool null() { return scalar(json(nullptr), "null"); }
  bool boolean(bool v) { return scalar(json(v), "a boolean"); }
  bool number_integer(json::number_integer_t v) {
    if (mode_ == Mode::Vocab) {
      if (v < 0) return fail("model.vocab[\"" + vocab_key_ + "\"] has a negative id " + std::to_string(v));
      return add_vocab(v);
    }
    return scalar(json(v), "a number");
  }
  bool number_unsigned(json::number_unsigned_t v) {
    if (mode_ == Mode::Vocab) {
      if (v > static_cast<json::number_unsigned_t>(INT32_MAX))
        return fail("model.vocab[\"" + vocab_key_ + "\"] has an id out of range");
      return add_vocab(static_cast<int64_t>(v));
    }
    return scalar(json(v), "a number");
  }
  bool number_float(json::number_float_t v, const std::string&) { return scalar(json(v), "a float"); }
  bool binary(json::binary_t&) { return fail("unexpected binary value"); }

  bool string(std::string& s) {
    switch (mode_) {
      case Mode::Vocab:
        return fail("model.vocab[\"" + vocab_key_ + "\"] must be an integer id, not a string");
      case Mode::Merges: {
        // Pre-0.20 format: "left right" with exactly one space.
        const size_t sp = s.find(' ');
        if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
          return fail("model.merges[" + std::to_string(doc_.merges.size()) + "] is not \"left right\": \"" +
                      s.substr(0, 64) + "\"");
        const TextRef left = add_merge_text(std::string_view(s).substr(0, sp));
        doc_.merges.emplace_back(left, add_merge_text(std::string_view(s).substr(sp + 1)));
        return true;
      }
      case Mode::MergePair:
        if (pair_size_ >= 2) return fail(merge_shape_error());
        pair_[pair_size_++] = add_merge_text(s);
        return true;
      case Mode::Dom:
        place(json(std::move(s)));
        return true;
    }
    return true;
  }

  bool start_object(std::size_t) {
    if (mode_ != Mode::Dom) return fail(mode_ == Mode::Vocab ? "model.vocab values must be integer ids"
                                                              : merge_shape_error());
    if (in_model_member("vocab")) {
      mode_ = Mode::Vocab;
      doc_.has_vocab = true;
      doc_.vocab.clear();
      doc_.vocab_text.clear();
      return true;
    }
    const bool is_model = stack_.size() == 1 && stack_.back().is_object && stack_.back().key == "model";
    json* node = place(json::object());
    stack_.push_back(Frame{node, true, is_model, {}});
    return true;
  }
  bool end_object() {
    if (mode_ == Mode::Vocab) {
      mode_ = Mode::Dom;
      return true;
    }
    stack_.pop_back();
    return true;
  }
  bool key(std::string& k) {
    if (mode_ == Mode::Vocab) {
      vocab_key_ = std::move(k);
    } else {
      stack_.back().key = std::move(k);
    }
    return true;
  }
  bool start_array(std::size_t) {
    switch (mode_) {
      case Mode::Vocab: return fail("model.vocab values must be integer ids");
      case Mode::MergePair: return fail(merge_shape_error());
      case Mode::Merges:
        mode_ = Mode::MergePair;
        pair_size_ = 0;
        return true;
      case Mode::Dom: break;
    }
    if (in_model_member("merges")) {
      mode_ = Mode::Merges;
      doc_.has_merges = true;
      doc_.merges.clear();
      doc_.merge_text.clear();
      return true;
    }
    json* node = place(json::array());
    stack_.push_back(Frame{node, false, false, {}});
    return true;
  }
  bool end_array() {
    if (mode_ == Mode::MergePair) {
      if (pair_size_ != 2) return fail(merge_shape_error());
      doc_.merges.emplace_back(pair_[0], pair_[1]);
      mode_ = Mode::Merges;
      return true;
    }
    if (mode_ == Mode::Merges) {
      mode_ = Mode::Dom;
      return true;
    }
    stack_.pop_back();
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& ex) {
    if (error_.empty()) error_ = "malformed JSON at byte " + std::to_string(position) + ": " + ex.what();
    return false;
  }

  const std::string& error() const { return error_; }

 private:
  enum class Mode { Dom, Vocab, Merges, MergePair };
  struct Frame {
    json* node;
    bool is_object;
    bool is_model;  // the root's "model" member
    std::string key;
  };

  bool add_vocab(int64_t id) {
    if (doc_.vocab_text.size() + vocab_key_.size() > UINT32_MAX) return fail("model.vocab is larger than 4 GiB");
    const TextRef ref{static_cast<uint32_t>(doc_.vocab_text.size()), static_cast<uint32_t>(vocab_key_.size())};
    doc_.vocab_text += vocab_key_;
    doc_.vocab.emplace_back(ref, id);
    return true;
  }
  TextRef add_merge_text(std::string_view s) {
    // Buffers past 4 GiB cannot come from a JSON text nlohmann accepts here (see
    // parse_tokenizer_json's size check).
    const TextRef ref{static_cast<uint32_t>(doc_.merge_text.size()), static_cast<uint32_t>(s.size())};
    doc_.merge_text += s;
    return ref;
  }
  bool in_model_member(const char* name) const {
    return !stack_.empty() && stack_.back().is_model && stack_.back().key == name;
  }
  std::string merge_shape_error() const {
    return "model.merges[" + std::to_string(doc_.merges.size()) + "] must be \"left right\" or [left, right]";
  }
  bool fail(std::string message) {
    if (error_.empty()) error_ = std::move(message);
    return false;
  }
  bool scalar(json v, const char* what) {
    if (mode_ == Mode::Vocab) return fail("model.vocab[\"" + vocab_key_ + "\"] must be an integer id, not " + what);
    if (mode_ != Mode::Dom) return fail(merge_shape_error());
    place(std::move(v));
    return true;
  }
  // Stores `v` in the innermost DOM container (or as the document) and returns it.
  // Object members live in a std::map and array elements are only appended while
  // no deeper frame is open, so the returned pointer stays valid while it is on
  // the stack.
  json* place(json v) {
    if (stack_.empty()) {
      doc_.rest = std::move(v);
      return &doc_.rest;
    }
    Frame& top = stack_.back();
    if (top.is_object) {
      json& slot = (*top.node)[top.key];
      slot = std::move(v);
      return &slot;
    }
    top.node->push_back(std::move(v));
    return &top.node->back();
  }

  TokenizerJson& doc_;
  std::vector<Frame> stack_;
  Mode mode_ = Mode::Dom;
  std::string vocab_key_;
  TextRef pair_[2];
  int pair_size_ = 0;
  std::string error_;
};

}  // namespace

TokenizerJson parse_tokenizer_json(std::string_view text, const std::string& name) {
  if (text.size() >= UINT32_MAX) throw Error(name + ": tokenizer.json larger than 4 GiB");
  TokenizerJson doc;
  doc.vocab_text.reserve(text.size() / 4);
  doc.merge_text.reserve(text.size() / 4);
  Reader reader(doc);
  bool ok = false;
  try {
    ok = json::sax_parse(text.begin(), text.end(), &reader);
  } catch (const nlohmann::json::exception& e) {
    throw Error(name + ": malformed JSON: " + e.what());
  }
  if (!ok) throw Error(name + ": " + (reader.error().empty() ? "malformed JSON" : reader.error()));
  return doc;
}

}  // namespace g4c::models::tokenizer_detail

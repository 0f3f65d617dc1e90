// Tokenizer: assembles a tokenizer.json (tokenizer_json.cpp) into added tokens,
// normalizer, pre-tokenizer, BPE model, post-processor and decoder, and runs them in
// Hugging Face tokenizers' order.
#include "models/tokenizer.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <unordered_map>

#include "models/error.h"
#include "models/tokenizer_bpe.h"
#include "models/tokenizer_json.h"
#include "models/tokenizer_pipeline.h"
#include "models/xz.h"

namespace g4c::models {
namespace {

using json = nlohmann::json;
using namespace tokenizer_detail;

const json& member_or_null(const json& object, const char* key) {
  static const json null_value;
  const auto it = object.find(key);
  return it == object.end() ? null_value : *it;
}

bool flag(const json& object, const char* key, bool fallback, const std::string& where) {
  const json& v = member_or_null(object, key);
  if (v.is_null()) return fallback;
  if (!v.is_boolean()) throw Error(where + "." + key + " must be a boolean");
  return v.get<bool>();
}

BpeOptions bpe_options(const json& model, const std::string& name) {
  BpeOptions options;
  const json& unk = member_or_null(model, "unk_token");
  if (unk.is_string()) {
    options.unk_token = unk.get<std::string>();
  } else if (!unk.is_null()) {
    throw Error(name + ": model.unk_token must be a string or null");
  }
  options.byte_fallback = flag(model, "byte_fallback", false, name + ": model");
  options.fuse_unk = flag(model, "fuse_unk", false, name + ": model");
  options.ignore_merges = flag(model, "ignore_merges", false, name + ": model");
  const json& dropout = member_or_null(model, "dropout");
  if (!dropout.is_null() && !(dropout.is_number() && (dropout.get<double>() == 0.0 || dropout.get<double>() == 1.0)))
    throw Error(name + ": model.dropout must be null (BPE dropout is not supported)");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const json& v = member_or_null(model, key);
    if (!v.is_null() && !(v.is_string() && v.get<std::string>().empty()))
      throw Error(name + ": model." + key + " is not supported (must be null)");
  }
  return options;
}

class HfTokenizer final : public Tokenizer {
 public:
  HfTokenizer(TokenizerJson doc, const std::string& name);

  std::vector<int32_t> encode(std::string_view text, bool add_bos) const override;
  std::string decode(std::span<const int32_t> ids, bool skip_special) const override;
  int32_t vocab_size() const override { return vocab_size_; }
  int32_t bos_id() const override { return bos_id_; }
  int32_t eos_id() const override { return eos_id_; }
  bool is_special(int32_t id) const override {
    return id >= 0 && id < vocab_size_ && special_[static_cast<size_t>(id)];
  }
  std::string id_to_token(int32_t id) const override { return std::string(token_of(id).value_or("")); }
  int32_t token_to_id(std::string_view token) const override {
    const auto it = added_ids_.find(std::string(token));
    return it != added_ids_.end() ? it->second : model_->token_to_id(token);
  }

 private:
  struct Workspace {
    BpeScratch bpe;
    std::vector<std::string> words;
    std::string normalized;
  };

  std::optional<std::string_view> token_of(int32_t id) const;
  void parse_added_tokens(const json& list);
  void parse_post_processor(const json& config);
  // Normalizes, pre-tokenizes and BPE-encodes text between raw added tokens.
  void encode_section(std::string_view section, bool first_section, std::vector<int32_t>& ids, Workspace& ws) const;
  void encode_normalized(std::string_view normalized, bool first_section, std::vector<int32_t>& ids,
                         Workspace& ws) const;

  std::string name_;
  std::unique_ptr<BpeModel> model_;
  std::vector<AddedToken> added_;
  std::unordered_map<int32_t, size_t> added_by_id_;
  std::unordered_map<std::string, int32_t> added_ids_;
  AddedTokenMatcher raw_matcher_;         // normalized = false: matched on the input text
  AddedTokenMatcher normalized_matcher_;  // normalized = true: matched after normalization
  Normalizer normalizer_;
  PreTokenizer pre_tokenizer_;
  Decoder decoder_;
  bool has_decoder_ = false;
  // Post-processor template for a single sequence: runs of special ids around it.
  bool has_template_ = false;
  std::vector<int32_t> template_before_, template_after_;
  int32_t vocab_size_ = 0;
  int32_t bos_id_ = -1;
  int32_t eos_id_ = -1;
  std::vector<bool> special_;
};

HfTokenizer::HfTokenizer(TokenizerJson doc, const std::string& name) : name_(name) {
  const json& root = doc.rest;
  if (!root.is_object()) throw Error(name_ + ": not a tokenizer.json (the top level is not a JSON object)");
  const json& model = member_or_null(root, "model");
  if (!model.is_object()) throw Error(name_ + ": model is missing or not an object");
  const json& type = member_or_null(model, "type");
  if (!type.is_null() && !type.is_string()) throw Error(name_ + ": model.type must be a string");
  if (type.is_string() && type.get<std::string>() != "BPE")
    throw Error(name_ + ": unsupported tokenizer model type \"" + type.get<std::string>() +
                "\" (only BPE is supported)");
  if (!doc.has_vocab) throw Error(name_ + ": model.vocab is missing or not an object of token → id");
  if (!doc.has_merges && model.contains("merges")) throw Error(name_ + ": model.merges must be an array");
  model_ = std::make_unique<BpeModel>(doc, bpe_options(model, name_), name_);

  normalizer_ = Normalizer::parse(member_or_null(root, "normalizer"), name_ + ": normalizer");
  pre_tokenizer_ = PreTokenizer::parse(member_or_null(root, "pre_tokenizer"), name_ + ": pre_tokenizer");
  has_decoder_ = !member_or_null(root, "decoder").is_null();
  decoder_ = Decoder::parse(member_or_null(root, "decoder"), name_ + ": decoder");
  parse_added_tokens(member_or_null(root, "added_tokens"));

  special_.assign(static_cast<size_t>(vocab_size_), false);
  for (const AddedToken& token : added_) special_[static_cast<size_t>(token.id)] = token.special;
  parse_post_processor(member_or_null(root, "post_processor"));
  if (bos_id_ < 0) bos_id_ = token_to_id("<bos>");
  eos_id_ = token_to_id("<eos>");
  if (eos_id_ < 0) eos_id_ = token_to_id("</s>");
}

void HfTokenizer::parse_added_tokens(const json& list) {
  vocab_size_ = model_->size();
  if (list.is_null()) return;
  if (!list.is_array()) throw Error(name_ + ": added_tokens must be an array");
  // Ids past the model vocab are allowed (Gemma 3's <image_soft_token>) but bounded.
  const int64_t id_limit = static_cast<int64_t>(model_->size()) + 2 * static_cast<int64_t>(list.size()) + 1024;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string where = name_ + ": added_tokens[" + std::to_string(i) + "]";
    const json& entry = list[i];
    if (!entry.is_object()) throw Error(where + " must be an object");
    const json& id = member_or_null(entry, "id");
    if (!id.is_number_unsigned() || id.get<uint64_t>() >= static_cast<uint64_t>(id_limit))
      throw Error(where + ".id is missing or not an id in [0, " + std::to_string(id_limit) + ")");
    const json& content = member_or_null(entry, "content");
    if (!content.is_string() || content.get<std::string>().empty())
      throw Error(where + ".content is missing or not a non-empty string");
    AddedToken token;
    token.id = static_cast<int32_t>(id.get<uint64_t>());
    token.content = content.get<std::string>();
    token.special = flag(entry, "special", false, where);
    token.lstrip = flag(entry, "lstrip", false, where);
    token.rstrip = flag(entry, "rstrip", false, where);
    token.single_word = flag(entry, "single_word", false, where);
    token.normalized = flag(entry, "normalized", !token.special, where);
    vocab_size_ = std::max(vocab_size_, token.id + 1);
    added_by_id_[token.id] = added_.size();
    added_ids_[token.content] = token.id;
    if (token.normalized && !normalizer_.empty()) {
      std::string pattern = token.content;
      normalizer_.apply(pattern);
      normalized_matcher_.add(token, std::move(pattern));
    } else {
      raw_matcher_.add(token, token.content);
    }
    added_.push_back(std::move(token));
  }
}

void HfTokenizer::parse_post_processor(const json& config) {
  const std::string where = name_ + ": post_processor";
  if (config.is_null()) return;
  if (!config.is_object() || !member_or_null(config, "type").is_string())
    throw Error(where + " must be an object with a string type");
  const std::string type = config["type"].get<std::string>();
  if (type != "TemplateProcessing")
    throw Error(where + ": unsupported post_processor type \"" + type + "\" (only TemplateProcessing)");
  const json& single = member_or_null(config, "single");
  const json& special_tokens = member_or_null(config, "special_tokens");
  if (!single.is_array()) throw Error(where + ".single must be an array");
  if (!special_tokens.is_null() && !special_tokens.is_object())
    throw Error(where + ".special_tokens must be an object");
  bool seen_sequence = false;
  for (size_t i = 0; i < single.size(); ++i) {
    const std::string item_where = where + ".single[" + std::to_string(i) + "]";
    const json& item = single[i];
    if (!item.is_object() || item.size() != 1) throw Error(item_where + " must be {\"SpecialToken\": ...} or {\"Sequence\": ...}");
    if (item.contains("Sequence")) {
      const json& id = member_or_null(item["Sequence"], "id");
      if (seen_sequence || !id.is_string() || id.get<std::string>() != "A")
        throw Error(item_where + ": a single-sequence template must contain Sequence \"A\" once");
      seen_sequence = true;
      continue;
    }
    const json& special = member_or_null(item, "SpecialToken");
    if (!special.is_object() || !member_or_null(special, "id").is_string())
      throw Error(item_where + " must be {\"SpecialToken\": {\"id\": name}} or {\"Sequence\": ...}");
    const std::string token_name = special["id"].get<std::string>();
    const json& entry = special_tokens.is_object() ? member_or_null(special_tokens, token_name.c_str()) : json();
    const json& ids = entry.is_object() ? member_or_null(entry, "ids") : json();
    if (!ids.is_array()) throw Error(item_where + ": special token \"" + token_name + "\" has no ids in special_tokens");
    for (const json& v : ids) {
      if (!v.is_number_unsigned() || v.get<uint64_t>() >= static_cast<uint64_t>(vocab_size_))
        throw Error(where + ".special_tokens[\"" + token_name + "\"].ids has an id outside the vocabulary");
      (seen_sequence ? template_after_ : template_before_).push_back(static_cast<int32_t>(v.get<uint64_t>()));
    }
  }
  if (!seen_sequence) throw Error(where + ".single has no Sequence \"A\"");
  has_template_ = true;
  if (!template_before_.empty()) bos_id_ = template_before_.front();
}

std::optional<std::string_view> HfTokenizer::token_of(int32_t id) const {
  const auto it = added_by_id_.find(id);
  if (it != added_by_id_.end()) return added_[it->second].content;
  return model_->id_to_token(id);
}

void HfTokenizer::encode_normalized(std::string_view normalized, bool first_section, std::vector<int32_t>& ids,
                                    Workspace& ws) const {
  if (normalized.empty()) return;
  if (pre_tokenizer_.empty()) {
    model_->encode_word(normalized, ids, ws.bpe);
    return;
  }
  pre_tokenizer_.apply(normalized, first_section, ws.words);
  for (const std::string& word : ws.words) model_->encode_word(word, ids, ws.bpe);
}

void HfTokenizer::encode_section(std::string_view section, bool first_section, std::vector<int32_t>& ids,
                                 Workspace& ws) const {
  if (section.empty()) return;
  std::string_view normalized = section;
  if (!normalizer_.empty()) {
    ws.normalized.assign(section);
    normalizer_.apply(ws.normalized);
    normalized = ws.normalized;
  }
  if (normalized_matcher_.empty()) {
    encode_normalized(normalized, first_section, ids, ws);
    return;
  }
  // Copy: encode_normalized reuses the workspace buffers.
  const std::string text(normalized);
  size_t at = 0;
  AddedTokenMatcher::Match match;
  while (normalized_matcher_.find(text, at, &match)) {
    encode_normalized(std::string_view(text).substr(at, match.begin - at), first_section && at == 0, ids, ws);
    ids.push_back(normalized_matcher_.token(match.token).id);
    at = match.end;
  }
  encode_normalized(std::string_view(text).substr(at), first_section && at == 0, ids, ws);
}

std::vector<int32_t> HfTokenizer::encode(std::string_view text, bool add_bos) const {
  Workspace ws;
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  const bool templated = add_bos && has_template_;
  if (templated) ids.insert(ids.end(), template_before_.begin(), template_before_.end());
  size_t at = 0;
  AddedTokenMatcher::Match match;
  while (raw_matcher_.find(text, at, &match)) {
    encode_section(text.substr(at, match.begin - at), at == 0, ids, ws);
    ids.push_back(raw_matcher_.token(match.token).id);
    at = match.end;
  }
  encode_section(text.substr(at), at == 0, ids, ws);
  if (templated) ids.insert(ids.end(), template_after_.begin(), template_after_.end());
  return ids;
}

std::string HfTokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (const int32_t id : ids) {
    const std::optional<std::string_view> token = token_of(id);
    if (!token)
      throw Error(name_ + ": cannot decode id " + std::to_string(id) + " (not a token of this vocabulary of " +
                  std::to_string(vocab_size_) + " ids)");
    if (skip_special && is_special(id)) continue;
    tokens.emplace_back(*token);
  }
  if (!has_decoder_) {
    // Hugging Face joins tokens with spaces when there is no decoder.
    std::string text;
    for (size_t i = 0; i < tokens.size(); ++i) text += (i ? " " : "") + tokens[i];
    return text;
  }
  return decoder_.apply(std::move(tokens));
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_json_text(std::string_view json_text, const std::string& name_for_messages) {
  return std::make_unique<HfTokenizer>(parse_tokenizer_json(json_text, name_for_messages), name_for_messages);
}

std::unique_ptr<Tokenizer> Tokenizer::load(const std::filesystem::path& tokenizer_json) {
  const std::string name = tokenizer_json.string();
  if (tokenizer_json.extension() == ".xz") return from_json_text(read_xz_file(tokenizer_json), name);
  // mmap: no zero-filled 33 MB buffer and no copy (the file is read once, by the parser).
  const int fd = ::open(name.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(name + ": cannot open tokenizer.json: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(name + ": not a regular file");
  }
  const auto size = static_cast<size_t>(st.st_size);
  if (size == 0) {
    ::close(fd);
    return from_json_text("", name);  // reports malformed JSON
  }
  void* data = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
  ::close(fd);
  if (data == MAP_FAILED) throw Error(name + ": cannot map tokenizer.json: " + std::strerror(errno));
  ::madvise(data, size, MADV_SEQUENTIAL);
  struct Unmap {
    void* data;
    size_t size;
    ~Unmap() { ::munmap(data, size); }
  } unmap{data, size};
  return from_json_text(std::string_view(static_cast<const char*>(data), size), name);
}

}  // namespace g4c::models

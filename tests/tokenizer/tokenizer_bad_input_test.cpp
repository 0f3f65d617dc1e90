// Bad tokenizer.json inputs: each gives one g4c::Error naming the file and what is
// wrong, and nothing crashes (run under ASan+UBSan in scripts/test.sh).
#include "models/error.h"
#include "models/tokenizer.h"
#include "tests/tokenizer/test_util.h"

namespace g4c::tokenizer_test {
namespace {

using models::Tokenizer;
using json = nlohmann::json;

json small() { return toy_tokenizer({"a", "b", "ab"}, {{"a", "b"}}); }

// Expects from_json_text to throw a g4c::Error whose message names the file and
// contains `what`.
void expect_text_error(const std::string& text, const std::string& what) {
  try {
    Tokenizer::from_json_text(text, "bad/tokenizer.json");
    ADD_FAILURE() << "no error; wanted: " << what;
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("bad/tokenizer.json"), std::string::npos) << message;
    EXPECT_NE(message.find(what), std::string::npos) << "message: " << message << "\nwanted: " << what;
  }
}

void expect_error(const json& config, const std::string& what) { expect_text_error(config.dump(), what); }

TEST(TokenizerBadInput, TheValidBaseLoads) {
  const auto tok = Tokenizer::from_json_text(small().dump(), "ok.json");
  EXPECT_EQ(tok->encode("ab"), (std::vector<int32_t>{2, 262}));  // <bos>, "ab" (id 260 + 2)
}

TEST(TokenizerBadInput, UnsupportedModelTypes) {
  json c = small();
  c["model"]["type"] = "WordPiece";
  expect_error(c, "unsupported tokenizer model type \"WordPiece\"");
  c["model"] = {{"type", "Unigram"}, {"vocab", json::array({json::array({"a", -1.0})})}, {"unk_id", 0}};
  expect_error(c, "unsupported tokenizer model type \"Unigram\"");
  c["model"] = {{"type", "WordLevel"}, {"vocab", {{"a", 0}}}};
  expect_error(c, "unsupported tokenizer model type \"WordLevel\"");
}

TEST(TokenizerBadInput, MalformedJson) {
  const std::string text = small().dump();
  expect_text_error(text.substr(0, text.size() / 2), "malformed JSON");
  expect_text_error("", "malformed JSON");
  expect_text_error("{\"model\": {\"vocab\": {\"a\": 0,}}}", "malformed JSON");
  expect_text_error("[1, 2, 3]", "not a tokenizer.json");
  expect_text_error("\"just a string\"", "not a tokenizer.json");
  // Every truncation of a real tokenizer.json fails cleanly.
  const std::string tiny = read_file(env_path("G4C_SOURCE_DIR") / "models/gemma4-tiny/tokenizer.json");
  if (!tiny.empty()) {
    for (size_t cut = 0; cut < tiny.size(); cut += tiny.size() / 97 + 1)
      expect_text_error(tiny.substr(0, cut), "malformed JSON");
  }
}

TEST(TokenizerBadInput, StrictJsonStrings) {
  // Lone surrogates, raw control characters, invalid UTF-8 and bad escapes are not JSON.
  expect_text_error(R"({"model": {"vocab": {"\ud83d": 0}}})", "malformed JSON");
  expect_text_error(R"({"model": {"vocab": {"\ude00": 0}}})", "malformed JSON");
  expect_text_error("{\"model\": {\"vocab\": {\"a\tb\": 0}}}", "control character");
  expect_text_error("{\"model\": {\"vocab\": {\"\xC3\": 0}}}", "invalid UTF-8");
  expect_text_error(R"({"model": {"vocab": {"\q": 0}}})", "bad escape");
  expect_text_error(R"({"model": {"type": "BPE", "vocab": {"a": 0}}} trailing)", "after the top-level value");
  // Deep nesting is an error, not a stack overflow.
  expect_text_error(std::string(100000, '[') + std::string(100000, ']'), "nested deeper");
  expect_text_error("{\"x\": " + std::string(100000, '[') + std::string(100000, ']') + "}", "nested deeper");
}

TEST(TokenizerBadInput, MissingOrIllTypedFields) {
  json c = small();
  c.erase("model");
  expect_error(c, "model is missing");
  c = small();
  c["model"].erase("vocab");
  expect_error(c, "model.vocab is missing");
  c = small();
  c["model"]["vocab"] = json::array({"a", "b"});
  expect_error(c, "model.vocab is missing or not an object");
  c = small();
  c["model"]["vocab"]["a"] = "zero";
  expect_error(c, "model.vocab[\"a\"] must be an integer id");
  c = small();
  c["model"]["vocab"]["a"] = -3;
  expect_error(c, "negative id");
  c = small();
  c["model"]["vocab"]["a"] = 99999999;
  expect_error(c, "far beyond");
  c = small();
  c["model"]["vocab"]["a"] = 261;  // the id of "b"
  expect_error(c, "is used by both");
  c = small();
  c["model"]["merges"] = json::array({json::array({"a", "zz"})});
  expect_error(c, "model.merges[0] (\"a\", \"zz\"): its right token is not in model.vocab");
  c = small();
  c["model"]["merges"] = json::array({json::array({"b", "a"})});
  expect_error(c, "the merged token is not in model.vocab");
  c = small();
  c["model"]["merges"] = json::array({json::array({"a", "b", "c"})});
  expect_error(c, "model.merges[0] must be");
  c = small();
  c["model"]["merges"] = json::array({"ab"});
  expect_error(c, "is not \"left right\"");
  c = small();
  c["model"]["merges"] = "a b";
  expect_error(c, "model.merges must be an array");
  c = small();
  c["model"]["byte_fallback"] = "yes";
  expect_error(c, "model.byte_fallback must be a boolean");
  c = small();
  c["model"]["dropout"] = 0.1;
  expect_error(c, "dropout");
  c = small();
  c["added_tokens"][0].erase("id");
  expect_error(c, "added_tokens[0].id is missing");
  c = small();
  c["added_tokens"][1]["content"] = 7;
  expect_error(c, "added_tokens[1].content");
  c = small();
  c["added_tokens"] = {{"a", 1}};
  expect_error(c, "added_tokens must be an array");
}

TEST(TokenizerBadInput, UnsupportedPipelineStages) {
  json c = small();
  c["normalizer"] = {{"type", "NFKC"}};
  expect_error(c, "unsupported normalizer type \"NFKC\"");
  c = small();
  c["normalizer"] = {{"type", "Replace"}, {"pattern", {{"Regex", "\\s"}}}, {"content", "_"}};
  expect_error(c, "Regex patterns are not supported");
  c = small();
  c["pre_tokenizer"] = {{"type", "ByteLevel"}};
  expect_error(c, "unsupported pre_tokenizer type \"ByteLevel\"");
  c = small();
  c["pre_tokenizer"]["behavior"] = "Sideways";
  expect_error(c, "\"Sideways\" is not a split behavior");
  c = small();
  c["decoder"]["decoders"][1] = {{"type", "WordPiece"}};
  expect_error(c, "decoder.decoders[1]: unsupported decoder type \"WordPiece\"");
  c = small();
  c["post_processor"] = {{"type", "BertProcessing"}};
  expect_error(c, "unsupported post_processor type \"BertProcessing\"");
  c = small();
  c["post_processor"]["special_tokens"] = json::object();
  expect_error(c, "special token \"<bos>\" has no ids");
  c = small();
  c["normalizer"] = {{"pattern", {{"String", " "}}}};
  expect_error(c, "normalizer.type is missing");
}

TEST(TokenizerBadInput, FilesAndIds) {
  EXPECT_THROW(Tokenizer::load("/nonexistent/tokenizer.json"), Error);
  try {
    Tokenizer::load("/nonexistent/tokenizer.json");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/tokenizer.json"), std::string::npos);
  }
  const auto tok = Tokenizer::from_json_text(small().dump(), "ok.json");
  EXPECT_THROW(tok->decode(std::vector<int32_t>{1 << 30}), Error);
  EXPECT_THROW(tok->decode(std::vector<int32_t>{-5}), Error);
  EXPECT_EQ(tok->id_to_token(-5), "");
  EXPECT_FALSE(tok->is_special(1 << 30));
}

}  // namespace
}  // namespace g4c::tokenizer_test

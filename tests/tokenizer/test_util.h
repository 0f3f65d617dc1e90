// Shared helpers of the tokenizer tests: locating assets and building small
// tokenizer.json texts by hand.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace g4c::tokenizer_test {

inline std::filesystem::path env_path(const char* var) {
  const char* v = std::getenv(var);
  return v ? std::filesystem::path(v) : std::filesystem::path();
}

inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A toy BPE tokenizer.json with every byte token, so results can be worked out by hand:
//   ids 0..3 <pad> <eos> <bos> <unk>; 4..259 <0x00>..<0xFF>; then `extra` tokens in order.
inline nlohmann::json toy_tokenizer(const std::vector<std::string>& extra,
                                    const std::vector<std::pair<std::string, std::string>>& merges) {
  using json = nlohmann::json;
  json vocab = json::object();
  const char* specials[] = {"<pad>", "<eos>", "<bos>", "<unk>"};
  for (int i = 0; i < 4; ++i) vocab[specials[i]] = i;
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    vocab[buf] = 4 + b;
  }
  for (size_t i = 0; i < extra.size(); ++i) vocab[extra[i]] = 260 + static_cast<int>(i);
  json merge_list = json::array();
  for (const auto& [a, b] : merges) merge_list.push_back(json::array({a, b}));
  json added = json::array();
  for (int i = 0; i < 4; ++i)
    added.push_back({{"id", i}, {"content", specials[i]}, {"single_word", false}, {"lstrip", false},
                     {"rstrip", false}, {"normalized", false}, {"special", true}});
  return json{
      {"version", "1.0"},
      {"added_tokens", added},
      {"normalizer", {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\xE2\x96\x81"}}},
      {"pre_tokenizer",
       {{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "MergedWithPrevious"}, {"invert", false}}},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", json::array({{{"SpecialToken", {{"id", "<bos>"}, {"type_id", 0}}}},
                                {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
        {"special_tokens", {{"<bos>", {{"id", "<bos>"}, {"ids", {2}}, {"tokens", {"<bos>"}}}}}}}},
      {"decoder",
       {{"type", "Sequence"},
        {"decoders", json::array({{{"type", "Replace"}, {"pattern", {{"String", "\xE2\x96\x81"}}}, {"content", " "}},
                                  {{"type", "ByteFallback"}},
                                  {{"type", "Fuse"}}})}}},
      {"model",
       {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", "<unk>"}, {"fuse_unk", true}, {"byte_fallback", true},
        {"vocab", vocab}, {"merges", merge_list}}}};
}

}  // namespace g4c::tokenizer_test

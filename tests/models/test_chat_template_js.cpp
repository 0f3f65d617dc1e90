// Differential test of the chat template engine against @huggingface/jinja (the engine of
// transformers.js): the chat_template.js_reference fixture renders the real templates
// (Gemma 3, gemma4-tiny, the Gemma 4 style tools template) on ≥ 500 generated message lists
// with the npm package and writes each case with its output or its error; this test renders
// the same cases with models::ChatTemplate. 0 mismatches: same bytes, or an error on both
// sides (with the same message when the template raised it through raise_exception()).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "models/chat_template.h"
#include "models/error.h"

namespace g4c::models {
namespace {

std::filesystem::path env_path(const char* var) {
  const char* v = std::getenv(var);
  return v ? std::filesystem::path(v) : std::filesystem::path();
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string config_template(const std::filesystem::path& path) {
  return nlohmann::json::parse(read_file(path)).at("chat_template").get<std::string>();
}

TEST(ChatTemplateHuggingFaceJinja, SameRenderingsOnGeneratedConversations) {
  const auto reference = env_path("G4C_CHAT_TEMPLATE_JS_REFERENCE");
  if (reference.empty() || !std::filesystem::exists(reference))
    GTEST_SKIP() << "no @huggingface/jinja reference at '" << reference.string()
                 << "': the chat_template.js_reference fixture skipped or failed (node/npm missing or no "
                    "network; see its output)";
  const auto src = env_path("G4C_SOURCE_DIR");
  ASSERT_FALSE(src.empty());
  std::map<std::string, ChatTemplate> templates;
  templates.emplace("gemma3", ChatTemplate::parse(config_template(src / "tokenizers/gemma3/tokenizer_config.json"), "<bos>", "<eos>"));
  templates.emplace("gemma4-tiny", ChatTemplate::parse(config_template(src / "models/gemma4-tiny/tokenizer_config.json"), "<bos>", "<eos>"));
  templates.emplace("gemma4_tools", ChatTemplate::parse(read_file(src / "tests/models/chat_templates/gemma4_tools.jinja"), "<bos>", "<eos>"));

  std::ifstream in(reference);
  size_t cases = 0, rendered = 0, raised = 0, mismatches = 0;
  std::map<std::string, size_t> per_template;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const auto record = nlohmann::json::parse(line);
    const std::string name = record.at("template");
    ASSERT_TRUE(templates.count(name)) << name;
    ++cases;
    ++per_template[name];
    ChatRenderOptions opts;
    opts.add_generation_prompt = record.at("add_generation_prompt").get<bool>();
    opts.extra = record.at("extra");
    std::string ours, our_error;
    bool ok = true;
    try {
      ours = templates.at(name).render(record.at("messages"), opts);
    } catch (const g4c::Error& e) {
      ok = false;
      our_error = e.what();
    }
    const bool want_ok = record.contains("output");
    std::string problem;
    if (ok && want_ok && ours != record["output"].get<std::string>()) {
      problem = "outputs differ:\n  ours: " + nlohmann::json(ours).dump() + "\n  @huggingface/jinja: " + record["output"].dump();
    } else if (ok != want_ok) {
      problem = ok ? "ours rendered " + nlohmann::json(ours).dump() + ", @huggingface/jinja raised " + record["error"].dump()
                   : "ours raised '" + our_error + "', @huggingface/jinja rendered " + record["output"].dump();
    } else if (!ok) {
      const std::string marker = "raised an exception: ";
      const auto at = our_error.find(marker);
      if (at != std::string::npos && our_error.substr(at + marker.size()) != record["error"].get<std::string>())
        problem = "different raise_exception messages: ours '" + our_error + "', @huggingface/jinja " + record["error"].dump();
    }
    if (!problem.empty()) {
      if (++mismatches <= 8) ADD_FAILURE() << "case " << cases << " (" << name << "): " << problem << "\n  messages: " << record["messages"].dump();
      continue;
    }
    (ok ? rendered : raised) += 1;
  }
  EXPECT_GE(cases, 500u);
  EXPECT_GE(rendered, 500u) << "too few cases render without an error to be a meaningful comparison";
  EXPECT_EQ(mismatches, 0u);
  std::cout << cases << " cases (" << rendered << " rendered, " << raised << " raised on both sides), " << mismatches
            << " mismatches; per template:";
  for (const auto& [name, n] : per_template) std::cout << " " << name << "=" << n;
  std::cout << "\n";
}

}  // namespace
}  // namespace g4c::models

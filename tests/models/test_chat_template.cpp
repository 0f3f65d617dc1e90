// Unit tests of the chat template engine (models/chat_template*.cpp): the real Gemma
// templates on hand-written conversations (expected strings worked out by reading the
// templates), the Jinja constructs of the supported subset (expected strings worked out by
// hand from Jinja's semantics), end-of-turn derivation, and errors (unsupported constructs,
// bad syntax with line numbers, raise_exception, runaway templates).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "models/chat_template.h"
#include "models/error.h"

namespace g4c::models {
namespace {

using json = nlohmann::json;

std::filesystem::path source_dir() {
  const char* v = std::getenv("G4C_SOURCE_DIR");
  return v ? std::filesystem::path(v) : std::filesystem::path(G4C_TEST_SOURCE_DIR);
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

ChatTemplate gemma3() {
  const auto config = json::parse(read_file(source_dir() / "tokenizers/gemma3/tokenizer_config.json"));
  return ChatTemplate::parse(config.at("chat_template").get<std::string>(), "<bos>", "<eos>");
}

ChatTemplate gemma4_tools() {
  return ChatTemplate::parse(read_file(source_dir() / "tests/models/chat_templates/gemma4_tools.jinja"), "<bos>", "<eos>");
}

// Renders `source` with `vars` as extra variables and no messages.
std::string render(const std::string& source, json vars = json::object()) {
  ChatRenderOptions opts;
  opts.add_generation_prompt = false;
  opts.extra = std::move(vars);
  return ChatTemplate::parse(source, "<bos>", "<eos>").render(json::array(), opts);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const g4c::Error& e) {
    return e.what();
  }
  return "(no error)";
}

// ---- the real templates ----

TEST(ChatTemplateGemma3, SystemTurnFoldsIntoTheFirstUserTurn) {
  const json messages = json::parse(R"([
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "  Hi there \n"},
    {"role": "assistant", "content": "Hello."},
    {"role": "user", "content": "Bye 👋"}])");
  EXPECT_EQ(gemma3().render(messages),
            "<bos><start_of_turn>user\nYou are terse.\n\nHi there<end_of_turn>\n"
            "<start_of_turn>model\nHello.<end_of_turn>\n"
            "<start_of_turn>user\nBye 👋<end_of_turn>\n"
            "<start_of_turn>model\n");
}

TEST(ChatTemplateGemma3, PartsAndNoGenerationPrompt) {
  const json messages = json::parse(R"([
    {"role": "user", "content": [{"type": "text", "text": " Look: "}, {"type": "image"}, {"type": "text", "text": "什么？"}]},
    {"role": "assistant", "content": ""}])");
  ChatRenderOptions opts;
  opts.add_generation_prompt = false;
  EXPECT_EQ(gemma3().render(messages, opts),
            "<bos><start_of_turn>user\nLook:<start_of_image>什么？<end_of_turn>\n<start_of_turn>model\n<end_of_turn>\n");
}

TEST(ChatTemplateGemma3, SystemAsPartsAndEmptyConversation) {
  const json messages = json::parse(R"([{"role": "system", "content": [{"type": "text", "text": "Sys"}]}])");
  EXPECT_EQ(gemma3().render(messages), "<bos><start_of_turn>model\n");
  EXPECT_EQ(gemma3().render(json::array()), "<bos><start_of_turn>model\n");
}

TEST(ChatTemplateGemma3, RaisesOnBrokenAlternationAndBadContent) {
  const auto alternation = error_of([] {
    gemma3().render(json::parse(R"([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])"));
  });
  EXPECT_NE(alternation.find("chat template raised an exception: Conversation roles must alternate "
                             "user/assistant/user/assistant/..."),
            std::string::npos)
      << alternation;
  EXPECT_NE(alternation.find("chat template:19:"), std::string::npos) << alternation;  // the raise_exception line
  const auto content = error_of([] { gemma3().render(json::parse(R"([{"role": "user", "content": 7}])")); });
  EXPECT_NE(content.find("raised an exception: Invalid content type"), std::string::npos) << content;
}

TEST(ChatTemplateGemma3, LongConversationStaysWithinTheStepLimit) {
  // 2,000 turns: far beyond a real chat's length; must render under the default limits.
  json messages = json::array();
  std::string want = "<bos>";
  for (int i = 0; i < 2000; ++i) {
    const std::string text = "turn " + std::to_string(i) + " " + std::string(100, 'x');
    messages.push_back({{"role", i % 2 ? "assistant" : "user"}, {"content", text}});
    want += std::string("<start_of_turn>") + (i % 2 ? "model" : "user") + "\n" + text + "<end_of_turn>\n";
  }
  ChatRenderOptions opts;
  opts.add_generation_prompt = false;
  EXPECT_EQ(gemma3().render(messages, opts), want);
}

TEST(ChatTemplateGemma4Tools, ToolDeclarationsCallsAndResponses) {
  const json messages = json::parse(R"([
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}}]},
    {"role": "tool", "name": "get_weather", "content": {"temp": 21}},
    {"role": "tool", "content": "sunny"},
    {"role": "assistant", "content": "Sunny, 21 °C."}])");
  ChatRenderOptions opts;
  opts.extra = json::parse(R"({"tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]})");
  EXPECT_EQ(gemma4_tools().render(messages, opts),
            "<bos><start_of_turn>system\nBe brief.\n\nYou can call the following functions.\n"
            "<start_function_declaration>{\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\"}}"
            "<end_function_declaration><end_of_turn>\n"
            "<start_of_turn>user\nWeather in Paris?<end_of_turn>\n"
            "<start_of_turn>model\n<start_function_call>call:get_weather{city=\"Paris\",days=2}<end_function_call><end_of_turn>\n"
            "<start_of_turn>tool\n<start_function_response>get_weather:{\"temp\": 21}<end_function_response>"
            "<start_function_response>sunny<end_function_response><end_of_turn>\n"
            "<start_of_turn>model\nSunny, 21 °C.<end_of_turn>\n"
            "<start_of_turn>model\n");
}

TEST(ChatTemplateGemma4Tools, RaisesOnUnknownRoleAndOrphanToolMessage) {
  EXPECT_NE(error_of([] { gemma4_tools().render(json::parse(R"([{"role": "narrator", "content": "x"}])")); })
                .find("raised an exception: Unknown role: narrator"),
            std::string::npos);
  EXPECT_NE(error_of([] { gemma4_tools().render(json::parse(R"([{"role": "tool", "content": "x"}])")); })
                .find("raised an exception: A tool message must follow an assistant message with tool calls"),
            std::string::npos);
}

// ---- end of turn ----

TEST(ChatTemplateEndOfTurn, DerivedFromTheTemplate) {
  EXPECT_EQ(gemma3().end_of_turn(), std::vector<std::string>{"<end_of_turn>"});
  EXPECT_EQ(gemma4_tools().end_of_turn(), std::vector<std::string>{"<end_of_turn>"});
  const auto tiny = ChatTemplate::load(source_dir() / "models/gemma4-tiny");
  EXPECT_EQ(tiny.end_of_turn(), std::vector<std::string>{"<end_of_turn>"});
  // A ChatML-like template: the string after the assistant's content.
  const auto chatml = ChatTemplate::parse(
      "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}", "", "");
  EXPECT_EQ(chatml.end_of_turn(), std::vector<std::string>{"<|im_end|>"});
  // A template that writes nothing after the content has no derived string.
  EXPECT_TRUE(ChatTemplate::parse("{% for m in messages %}{{ m.content }}{% endfor %}", "", "").end_of_turn().empty());
}

TEST(ChatTemplateEndOfTurn, GenerationConfigHint) {
  const auto dir = std::filesystem::temp_directory_path() / ("g4c_chat_template_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "chat_template.jinja") << "{% for m in messages %}{{ m.content }}{% endfor %}";
  std::ofstream(dir / "tokenizer_config.json")
      << R"({"bos_token": {"content": "<s>"}, "eos_token": "</s>", "added_tokens_decoder": {"1": {"content": "</s>"}, "7": {"content": "<|eot|>"}}})";
  std::ofstream(dir / "generation_config.json") << R"({"eos_token_id": [1, 7]})";
  const auto tpl = ChatTemplate::load(dir);
  EXPECT_EQ(tpl.end_of_turn(), std::vector<std::string>{"<|eot|>"});
  std::filesystem::remove_all(dir);
}

// ---- the language subset ----

TEST(ChatTemplateLanguage, WhitespaceControlAndBlockTrimming) {
  EXPECT_EQ(render("a  {{- 'b' -}}  c"), "abc");
  EXPECT_EQ(render("a {#- note -#} b"), "ab");
  // trim_blocks drops the newline after a block tag; lstrip_blocks the indentation before it.
  EXPECT_EQ(render("x\n    {% if true %}\n  y\n    {% endif %}\nz\n"), "x\n  y\nz");
  EXPECT_EQ(render("{{ 'a' }}\n{{ 'b' }}"), "a\nb");  // expression tags keep their newline
}

TEST(ChatTemplateLanguage, ForLoopVariablesElseAndScoping) {
  EXPECT_EQ(render("{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ x }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}",
                   {{"xs", {"a", "b"}}}),
            "10atruefalse2;21bfalsetrue2;");
  EXPECT_EQ(render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for k, v in d | items %}{{ k }}={{ v }} {% endfor %}", {{"d", {{"a", 1}, {"b", true}}}}),
            "a=1 b=true ");
  // `set` in a loop stays in the loop; a namespace carries state out.
  EXPECT_EQ(render("{% set n = 0 %}{% set ns = namespace(n=0) %}{% for x in [1, 2, 3] %}{% set n = n + x %}"
                   "{% set ns.n = ns.n + x %}{% endfor %}{{ n }},{{ ns.n }}"),
            "0,6");
  EXPECT_EQ(render("{% for x in [1, 2, 3, 4] %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}"
                   "{% endif %}{{ x }}{% endfor %}"),
            "13");
}

TEST(ChatTemplateLanguage, ExpressionsAndLiterals) {
  EXPECT_EQ(render("{{ [1, 2, 3][1:] }}|{{ 'hello'[1:3] }}|{{ [1, 2, 3][::-1] }}|{{ [1, 2, 3][-1] }}"),
            "[2, 3]|el|[3, 2, 1]|3");
  EXPECT_EQ(render("{{ 'a' ~ 1 ~ missing }}|{{ 'a' + 'b' }}|{{ 1 + 2 * 3 }}|{{ 7 // 2 }}|{{ -7 % 3 }}|{{ 1 / 2 }}"),
            "a1|ab|7|3|2|0.5");
  EXPECT_EQ(render("{{ 'b' in 'abc' }}{{ 'x' not in ['x'] }}{{ 'k' in {'k': 1} }}{{ not none }}"), "truefalsetruetrue");
  EXPECT_EQ(render("{{ 'y' if 1 > 2 else 'n' }}{{ 'z' if false }}|{{ 0 or 'd' }}{{ 1 and 'e' }}"), "n|de");
  EXPECT_EQ(render("{{ {'a': [1, none, true, 'x']} }}"), "{\"a\": [1, null, true, \"x\"]}");
  EXPECT_EQ(render("{{ " + std::string(400, '9') + ".5 > 1 }}"), "true");  // overflows a double: inf, no crash
  EXPECT_EQ(render("{{ 'it\\'s\\n' }}{{ \"q\\\"\" }}"), "it's\nq\"");
  // Undefined: attribute of undefined is undefined and prints as nothing.
  EXPECT_EQ(render("[{{ missing }}{{ missing.attr.deeper }}{{ d.nope }}]{{ missing is defined }}{{ d.k is defined }}",
                   {{"d", {{"k", 1}}}}),
            "[]falsetrue");
}

TEST(ChatTemplateLanguage, FiltersTestsAndMethods) {
  EXPECT_EQ(render("{{ '  x \u3000' | trim }}|{{ 'Ab' | upper }}{{ 'Ab' | lower }}|{{ [1, 2] | length }}{{ 'héllo' | length }}"),
            "x|ABab|25");
  EXPECT_EQ(render("{{ ['a', 'b'] | join(', ') }}|{{ [3, 4] | first }}{{ [3, 4] | last }}|{{ 'a-b' | replace('-', '+') }}"),
            "a, b|34|a+b");
  EXPECT_EQ(render("{{ missing | default('dflt') }}|{{ '' | default('e', true) }}|{{ 5 | string }}{{ '12' | int + 1 }}"),
            "dflt|e|513");
  EXPECT_EQ(render("{{ {'b': 1, 'a': 'é'} | tojson }}|{{ [1, 'x'] | tojson(indent=2) }}"),
            "{\"b\": 1, \"a\": \"é\"}|[\n  1,\n  \"x\"\n]");
  EXPECT_EQ(render("{{ 'x' is string }}{{ [1] is iterable }}{{ {} is mapping }}{{ none is none }}{{ 1.5 is number }}"
                   "{{ 'ab' is sequence }}{{ 3 is not string }}"),
            "truetruetruetruetruetruetrue");
  EXPECT_EQ(render("{{ '  a b '.strip() }}|{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith(('x', 'c')) }}|"
                   "{{ 'a,b'.split(',') }}|{{ d.get('k') }}{{ d.get('z', 'no') }}",
                   {{"d", {{"k", "v"}}}}),
            "a b|truetrue|[\"a\", \"b\"]|vno");
}

TEST(ChatTemplateLanguage, Macros) {
  EXPECT_EQ(render("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}"
                   "{{ greet('A') }} {{ greet('B', '?') }} {{ greet(punct='.', name='C') }}"),
            "Hi A! Hi B? Hi C.");
}

// ---- errors ----

TEST(ChatTemplateErrors, UnsupportedConstructsNameLineAndConstruct) {
  const auto include = error_of([] { ChatTemplate::parse("a\nb\n{% include 'other.jinja' %}", "", ""); });
  EXPECT_NE(include.find("chat template:3:"), std::string::npos) << include;
  EXPECT_NE(include.find("unsupported construct '{% include %}'"), std::string::npos) << include;
  const auto filter_block = error_of([] { ChatTemplate::parse("{% filter upper %}x{% endfilter %}", "", ""); });
  EXPECT_NE(filter_block.find("unsupported construct '{% filter %}'"), std::string::npos) << filter_block;
  const auto loop_filter = error_of([] { ChatTemplate::parse("{% for x in xs if x %}{% endfor %}", "", ""); });
  EXPECT_NE(loop_filter.find("'for ... if'"), std::string::npos) << loop_filter;
}

TEST(ChatTemplateErrors, BadSyntaxNamesTheLine) {
  const auto unclosed = error_of([] { ChatTemplate::parse("line one\n{{ x ", "", ""); });
  EXPECT_NE(unclosed.find(":2: chat template: unterminated tag"), std::string::npos) << unclosed;
  const auto missing_end = error_of([] { ChatTemplate::parse("{% if x %}\nyes\n", "", ""); });
  EXPECT_NE(missing_end.find("missing '{% endif %}'"), std::string::npos) << missing_end;
  const auto stray = error_of([] { ChatTemplate::parse("\n\n\n{% endfor %}", "", ""); });
  EXPECT_NE(stray.find(":4: chat template: '{% endfor %}' without its opening statement"), std::string::npos) << stray;
  const auto expr = error_of([] { ChatTemplate::parse("{{ 1 + }}", "", ""); });
  EXPECT_NE(expr.find(":1: chat template: unexpected '}}' in an expression"), std::string::npos) << expr;
  const auto character = error_of([] { ChatTemplate::parse("{{ a ; b }}", "", ""); });
  EXPECT_NE(character.find("unexpected character ';'"), std::string::npos) << character;
  const auto comment = error_of([] { ChatTemplate::parse("{# never closed", "", ""); });
  EXPECT_NE(comment.find("unterminated comment"), std::string::npos) << comment;
}

TEST(ChatTemplateErrors, RuntimeErrorsNameTheLine) {
  const auto raised = error_of([] { render("\n{{ raise_exception('bad input: ' ~ 3) }}"); });
  EXPECT_NE(raised.find("chat template:2: chat template raised an exception: bad input: 3"), std::string::npos) << raised;
  const auto filter = error_of([] { render("{{ 1 | frobnicate }}"); });
  EXPECT_NE(filter.find("unknown filter 'frobnicate'"), std::string::npos) << filter;
  const auto none_math = error_of([] { render("{{ none + 1 }}"); });
  EXPECT_NE(none_math.find("'+' on none"), std::string::npos) << none_math;
  const auto ns = error_of([] { render("{% set d = {} %}{% set d.x = 1 %}"); });
  EXPECT_NE(ns.find("only a namespace() can be assigned to"), std::string::npos) << ns;
}

TEST(ChatTemplateErrors, RunawayTemplatesHitLimits) {
  // Output doubling: 2^30 bytes would be rendered without a limit.
  const auto doubling = error_of([] {
    render("{% set ns = namespace(s='x') %}{% for i in range(30) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}");
  });
  EXPECT_NE(doubling.find("larger than"), std::string::npos) << doubling;
  const auto loops = error_of([] {
    render("{% for a in range(1000) %}{% for b in range(1000) %}{% for c in range(1000) %}{% endfor %}{% endfor %}{% endfor %}");
  });
  EXPECT_NE(loops.find("steps"), std::string::npos) << loops;
  const auto recursion = error_of([] { render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"); });
  EXPECT_NE(recursion.find("nested deeper than"), std::string::npos) << recursion;
  const auto nesting = error_of([] { ChatTemplate::parse("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}", "", ""); });
  EXPECT_NE(nesting.find("nesting deeper than"), std::string::npos) << nesting;
}

TEST(ChatTemplateLoad, ModelFolders) {
  const auto tiny = ChatTemplate::load(source_dir() / "models/gemma4-tiny");
  EXPECT_EQ(tiny.render(json::parse(R"([{"role": "user", "content": "hi"}])")),
            "<bos><start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n");
  const auto dir = std::filesystem::temp_directory_path() / ("g4c_chat_template_list_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tokenizer_config.json")
      << R"({"chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D{{ eos_token }}"}], "eos_token": "<e>"})";
  EXPECT_EQ(ChatTemplate::load(dir).render(json::array()), "D<e>");
  std::ofstream(dir / "tokenizer_config.json") << R"({"eos_token": "<e>"})";
  EXPECT_NE(error_of([&] { ChatTemplate::load(dir); }).find("no chat template"), std::string::npos);
  std::ofstream(dir / "tokenizer_config.json") << R"({"chat_template": 5})";
  EXPECT_NE(error_of([&] { ChatTemplate::load(dir); }).find("field 'chat_template' must be"), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace g4c::models

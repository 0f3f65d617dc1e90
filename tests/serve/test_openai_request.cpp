// parse_openai_request: accepted bodies map to the right fields; every rejection is a 400
// naming the field at fault (the OpenAI error shape).
#include <gtest/gtest.h>

#include "tools/serve/openai_request.h"

namespace g4c::serve {
namespace {

ApiRequest ok(Endpoint ep, const std::string& body) {
  auto r = parse_openai_request(ep, body);
  if (auto* e = std::get_if<ApiError>(&r)) ADD_FAILURE() << body << " → " << e->message;
  return std::holds_alternative<ApiRequest>(r) ? std::get<ApiRequest>(r) : ApiRequest{};
}

ApiError bad(Endpoint ep, const std::string& body) {
  auto r = parse_openai_request(ep, body);
  if (!std::holds_alternative<ApiError>(r)) {
    ADD_FAILURE() << body << " was accepted";
    return {};
  }
  return std::get<ApiError>(r);
}

TEST(OpenAiRequest, CompletionFields) {
  auto r = ok(Endpoint::kCompletions,
              R"({"model":"m","prompt":"hi","max_tokens":5,"temperature":0.5,"top_p":0.9,"top_k":7,"seed":3,
                  "stop":["a","bc"],"stream":true,"stream_options":{"include_usage":true},"n":1,"user":"u",
                  "frequency_penalty":0,"presence_penalty":0,"logprobs":null,"echo":false})");
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(*r.prompt_text, "hi");
  EXPECT_EQ(*r.max_tokens, 5);
  EXPECT_DOUBLE_EQ(r.temperature, 0.5);
  EXPECT_DOUBLE_EQ(r.top_p, 0.9);
  EXPECT_EQ(r.top_k, 7);
  EXPECT_EQ(*r.seed, 3u);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"a", "bc"}));
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
}

TEST(OpenAiRequest, Defaults) {
  auto r = ok(Endpoint::kCompletions, R"({"prompt":"hi"})");
  EXPECT_FALSE(r.max_tokens);
  EXPECT_DOUBLE_EQ(r.temperature, 1.0);  // OpenAI's default
  EXPECT_FALSE(r.stream);
  EXPECT_TRUE(r.stop.empty());
  EXPECT_EQ(ok(Endpoint::kCompletions, R"({"prompt":"hi","stop":"x"})").stop, std::vector<std::string>{"x"});
}

TEST(OpenAiRequest, TokenIdPrompt) {
  auto r = ok(Endpoint::kCompletions, R"({"prompt":[2,10,20]})");
  EXPECT_EQ(r.prompt_ids, (std::vector<int32_t>{2, 10, 20}));
  EXPECT_FALSE(r.prompt_text);
  EXPECT_EQ(*ok(Endpoint::kCompletions, R"({"prompt":["one"]})").prompt_text, "one");
}

TEST(OpenAiRequest, Chat) {
  auto r = ok(Endpoint::kChat, R"({"messages":[{"role":"system","content":"s"},
      {"role":"user","content":[{"type":"text","text":"t"}]}],"max_completion_tokens":4})");
  EXPECT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(*r.max_tokens, 4);
  EXPECT_EQ(r.endpoint, Endpoint::kChat);
}

TEST(OpenAiRequest, ErrorsNameTheField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"prompt":"x","n":2})", "n"},
      {R"({"prompt":"x","best_of":2})", "best_of"},
      {R"({"prompt":"x","logit_bias":{"1":1}})", "logit_bias"},
      {R"({"prompt":"x","presence_penalty":0.5})", "presence_penalty"},
      {R"({"prompt":"x","suffix":"y"})", "suffix"},
      {R"({"prompt":"x","max_tokens":-1})", "max_tokens"},
      {R"({"prompt":"x","max_tokens":1.5})", "max_tokens"},
      {R"({"prompt":"x","temperature":"hot"})", "temperature"},
      {R"({"prompt":"x","top_p":0})", "top_p"},
      {R"({"prompt":"x","top_p":1.5})", "top_p"},
      {R"({"prompt":"x","seed":"s"})", "seed"},
      {R"({"prompt":"x","stop":[""]})", "stop"},
      {R"({"prompt":"x","stop":{"a":1}})", "stop"},
      {R"({"prompt":"x","stream":"yes"})", "stream"},
      {R"({"prompt":"x","stream_options":{"include_usage":true}})", "stream_options"},
      {R"({"prompt":"x","stream":true,"stream_options":{"foo":1}})", "stream_options.foo"},
      {R"({"prompt":"x","model":5})", "model"},
      {R"({"prompt":""})", "prompt"},
      {R"({"prompt":[]})", "prompt"},
      {R"({"prompt":["a","b"]})", "prompt"},
      {R"({"prompt":[1,-2]})", "prompt"},
      {R"({"prompt":7})", "prompt"},
      {R"({"max_tokens":3})", "prompt"},
      {R"({"prompt":"x","messages":[]})", "messages"},
  };
  for (const auto& [body, param] : cases) {
    const ApiError e = bad(Endpoint::kCompletions, body);
    EXPECT_EQ(e.status, 400) << body;
    EXPECT_EQ(e.param, param) << body << ": " << e.message;
    EXPECT_NE(e.message.find(param), std::string::npos) << body << ": " << e.message;
    const auto j = e.to_json();
    EXPECT_TRUE(j["error"]["message"].is_string() && j["error"]["type"] == "invalid_request_error" &&
                j["error"]["param"] == param && j["error"]["code"].is_null());
  }
  const std::vector<std::pair<std::string, std::string>> chat = {
      {R"({"messages":"hi"})", "messages"},
      {R"({"messages":[]})", "messages"},
      {R"({"messages":[{"content":"x"}]})", "messages[0].role"},
      {R"({"messages":[{"role":"user","content":"a"},{"role":"robot","content":"x"}]})", "messages[1].role"},
      {R"({"messages":[{"role":"user"}]})", "messages[0].content"},
      {R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{}}]}]})", "messages[0].content[0]"},
      {R"({"messages":[{"role":"user","content":"x","tool_calls":[]}]})", "messages[0].tool_calls"},
      {R"({"messages":[{"role":"user","content":"x"}],"tools":[{}]})", "tools"},
      {R"({"messages":[{"role":"user","content":"x"}],"prompt":"p"})", "prompt"},
  };
  for (const auto& [body, param] : chat) EXPECT_EQ(bad(Endpoint::kChat, body).param, param) << body;
}

TEST(OpenAiRequest, MalformedBodies) {
  for (const char* body : {"", "{", "[1,2]", "null", "\"x\"", "{\"prompt\": \"\xff\xfe\"}", "{\"prompt\":\"x\",}"}) {
    const ApiError e = bad(Endpoint::kCompletions, body);
    EXPECT_EQ(e.status, 400) << body;
    EXPECT_FALSE(e.message.empty());
  }
  // Deep nesting is an error, not a stack overflow.
  EXPECT_EQ(bad(Endpoint::kCompletions, std::string(100000, '[') + std::string(100000, ']')).status, 400);
}

}  // namespace
}  // namespace g4c::serve

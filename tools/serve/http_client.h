// A small client of the server's OpenAI endpoints, for the load generator (`g4c loadgen`):
// posts one request, reads the answer (Server-Sent Events when streamed) and times it.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace g4c::serve {

struct ClientResult {
  int status = 0;                 // HTTP status; 0 when the connection failed
  std::string error;              // transport error or the error body
  std::string text;               // the generated text (choices[0].text / message.content / deltas)
  std::string finish_reason;
  int prompt_tokens = 0, completion_tokens = 0;  // from usage
  double ttft_s = 0;              // send → first content (streamed; = e2e when not streamed)
  std::vector<double> itl_s;      // between consecutive content chunks (streamed)
  double e2e_s = 0;               // send → end of the answer
};

// Posts `body` to http://host:port`path`. `body["stream"]` decides how the answer is read.
ClientResult post_openai(const std::string& host, int port, const std::string& path, const nlohmann::json& body,
                         double timeout_s);

// "http://host:port" → host, port (throws g4c::Error on anything else).
void split_url(const std::string& url, std::string* host, int* port);

}  // namespace g4c::serve

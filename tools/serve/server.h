// g4c serve's HTTP front: the OpenAI endpoints on cpp-httplib over one EngineLoop.
//
//   POST /v1/completions, POST /v1/chat/completions  (stream: Server-Sent Events)
//   GET  /v1/models, /health, /metrics
//
// HTTP threads validate, tokenize, render the chat template and submit to the RequestFront;
// only the engine thread touches the engine. Every answer is chunked and read from the
// request's sink; a client that goes away (its socket no longer writable) cancels its
// sequence, which the engine finishes at its next step.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/engine.h"

namespace g4c::models {
class Tokenizer;
}

namespace g4c::serve {

// How chat messages become a prompt (the model's chat template), and the strings that end an
// assistant turn. Empty `render`: the model has no chat template (/v1/chat/completions
// answers 400).
struct ChatFormat {
  std::function<std::string(const nlohmann::json& messages)> render;
  std::vector<std::string> end_of_turn;
};

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                      // 0: any free port (bound_port() tells which)
  std::string served_model_name;        // the id in /v1/models and the `model` requests must name
  size_t max_body_bytes = 1 << 20;      // larger bodies: 413
  int max_waiting = 256;                // queued requests before 429
  int http_threads = 64;                // connections served at once
  int default_max_tokens = 16;          // /v1/completions without max_tokens (OpenAI's default)
  std::chrono::milliseconds drain_timeout{30000};  // SIGTERM: running requests get this long
};

class Server {
 public:
  Server(runtime::Engine& engine, const models::Tokenizer& tokenizer, ChatFormat chat, ServerOptions opts);
  ~Server();
  // Binds the socket (throws g4c::Error when it cannot); returns the port.
  int bind();
  // Serves on this thread until shutdown() is called from another thread; then stops taking
  // requests (503), lets running ones finish within drain_timeout (then cancels them), answers
  // every open connection and returns.
  void serve();
  void shutdown();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace g4c::serve

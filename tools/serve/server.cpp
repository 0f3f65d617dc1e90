// The OpenAI endpoints over the engine loop (see server.h).
#include "tools/serve/server.h"

#include <httplib.h>

#include <atomic>
#include <ctime>
#include <thread>

#include "models/error.h"
#include "models/tokenizer.h"
#include "runtime/engine_loop.h"
#include "runtime/request_front.h"
#include "tools/serve/metrics.h"
#include "tools/serve/openai_request.h"
#include "tools/serve/text_stream.h"

namespace g4c::serve {
namespace {

using nlohmann::json;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(dump(e.to_json()), "application/json");
}

ApiError error(int status, std::string message, std::string param = "", std::string type = "invalid_request_error",
               std::string code = "") {
  ApiError e;
  e.status = status;
  e.message = std::move(message);
  e.param = std::move(param);
  e.type = std::move(type);
  e.code = std::move(code);
  return e;
}

// One request in flight: its parsed form, its sink and its text.
struct Generation {
  ApiRequest api;
  std::string id, endpoint;
  int64_t created = 0;
  int prompt_tokens = 0;
  std::shared_ptr<runtime::RequestSink> sink;
  std::unique_ptr<TextStream> text;
  int generated = 0;
  std::vector<int32_t> token_ids;
  bool sent_role = false;
  bool done = false;
};

}  // namespace

struct Server::Impl {
  runtime::Engine& engine;
  const models::Tokenizer& tok;
  ChatFormat chat;
  ServerOptions opts;
  std::vector<int32_t> end_of_turn_ids;
  Metrics metrics;
  runtime::RequestFront front;
  std::unique_ptr<runtime::EngineLoop> loop;
  httplib::Server http;
  std::atomic<int64_t> next_id{0};
  std::atomic<bool> draining{false};
  std::atomic<int> answering{0};  // answers whose last byte is not yet written

  Impl(runtime::Engine& e, const models::Tokenizer& t, ChatFormat c, ServerOptions o)
      : engine(e), tok(t), chat(std::move(c)), opts(std::move(o)), front(opts.max_waiting) {
    for (const auto& s : chat.end_of_turn) {
      const int32_t id = tok.token_to_id(s);
      if (id >= 0) end_of_turn_ids.push_back(id);
    }
    loop = std::make_unique<runtime::EngineLoop>(engine, front,
                                                 [this](const runtime::GenerationResult& r) { metrics.observe(r); });
    routes();
  }

  void routes() {
    const int threads = opts.http_threads;
    http.new_task_queue = [threads] { return new httplib::ThreadPool(size_t(threads)); };
    http.set_payload_max_length(opts.max_body_bytes);
    http.set_keep_alive_timeout(2);
    http.set_read_timeout(30);
    http.set_write_timeout(30);
    http.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      ApiError e;
      e.status = res.status;
      if (res.status == 413) {
        e.message = "the request body is larger than " + std::to_string(opts.max_body_bytes) + " bytes";
        metrics.count_request(req.path, "client_error");
      } else if (res.status == 404) {
        e.message = "no route " + req.method + " " + req.path;
        e.type = "not_found_error";
      } else {
        e.message = "HTTP " + std::to_string(res.status);
      }
      send_error(res, e);
    });
    http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      const bool ok = !draining.load() && !front.stats().failed;
      res.status = ok ? 200 : 503;
      res.set_content(ok ? "{\"status\":\"ok\"}" : "{\"status\":\"unavailable\"}", "application/json");
    });
    http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(metrics.render(front.stats()), "text/plain; version=0.0.4");
    });
    http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
      json m = {{"id", opts.served_model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "g4c"},
                {"max_model_len", engine.options().max_seq_len}};
      res.set_content(dump({{"object", "list"}, {"data", json::array({m})}}), "application/json");
    });
    http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      generate(Endpoint::kCompletions, req, res);
    });
    http.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
      generate(Endpoint::kChat, req, res);
    });
  }

  // Builds the engine request, or the 400 that says why not.
  std::variant<runtime::GenerationRequest, ApiError> to_request(const ApiRequest& a) {
    runtime::GenerationRequest g;
    const bool chat_req = a.endpoint == Endpoint::kChat;
    if (!a.model.empty() && a.model != opts.served_model_name)
      return error(400, "the model `" + a.model + "` does not exist (this server serves `" + opts.served_model_name + "`)",
                   "model", "invalid_request_error", "model_not_found");
    std::string prompt_param = chat_req ? "messages" : "prompt";
    try {
      if (chat_req) {
        if (!chat.render) return error(400, "this model has no chat template", "messages");
        // The template writes <bos> itself.
        g.prompt = tok.encode(chat.render(a.messages), /*add_bos=*/false);
        g.stop_token_ids = end_of_turn_ids;
      } else if (a.prompt_text) {
        g.prompt = tok.encode(*a.prompt_text, /*add_bos=*/true);  // as `g4c run` encodes "prompt"
      } else {
        g.prompt = a.prompt_ids;
      }
    } catch (const std::exception& e) {
      return error(400, e.what(), prompt_param);
    }
    const int64_t max_len = engine.options().max_seq_len;
    const int64_t n = int64_t(g.prompt.size());
    if (n >= max_len)
      return error(400,
                   "the prompt is " + std::to_string(n) + " tokens; this model's maximum context length is " +
                       std::to_string(max_len) + " tokens (prompt + at least one generated token)",
                   prompt_param, "invalid_request_error", "context_length_exceeded");
    const int64_t max_tokens = a.max_tokens ? *a.max_tokens : chat_req ? max_len - n : opts.default_max_tokens;
    if (n + max_tokens > max_len)
      return error(400,
                   "prompt (" + std::to_string(n) + " tokens) + max_tokens (" + std::to_string(max_tokens) +
                       ") exceeds this model's maximum context length of " + std::to_string(max_len) + " tokens",
                   "max_tokens", "invalid_request_error", "context_length_exceeded");
    g.max_new_tokens = int(max_tokens);
    g.ignore_eos = a.ignore_eos;
    g.sampling.temperature = float(a.temperature);
    g.sampling.top_p = float(a.top_p);
    g.sampling.top_k = a.top_k;
    g.sampling.seed = a.seed;
    if (const std::string bad = engine.check_request(g); !bad.empty()) return error(400, bad, prompt_param);
    return g;
  }

  json usage(const Generation& g) const {
    return {{"prompt_tokens", g.prompt_tokens},
            {"completion_tokens", g.generated},
            {"total_tokens", g.prompt_tokens + g.generated}};
  }

  // One streamed chunk (delta text, or the final one with finish_reason).
  json chunk(Generation& g, const std::string& text, const std::string& finish) {
    json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", finish.empty() ? json(nullptr) : json(finish)}};
    json j = {{"id", g.id}, {"created", g.created}, {"model", opts.served_model_name}};
    if (g.api.endpoint == Endpoint::kChat) {
      j["object"] = "chat.completion.chunk";
      json delta = json::object();
      if (!g.sent_role) delta["role"] = "assistant";
      g.sent_role = true;
      if (!text.empty() || finish.empty()) delta["content"] = text;
      choice["delta"] = delta;
    } else {
      j["object"] = "text_completion";
      choice["text"] = text;
    }
    j["choices"] = json::array({choice});
    if (g.api.stream && g.api.include_usage) j["usage"] = nullptr;
    return j;
  }

  json whole(Generation& g, const std::string& finish) {
    json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", finish}};
    json j = {{"id", g.id}, {"created", g.created}, {"model", opts.served_model_name}};
    if (g.api.endpoint == Endpoint::kChat) {
      j["object"] = "chat.completion";
      choice["message"] = {{"role", "assistant"}, {"content", g.text->text()}};
    } else {
      j["object"] = "text_completion";
      choice["text"] = g.text->text();
    }
    if (g.api.return_token_ids) choice["token_ids"] = g.token_ids;
    j["choices"] = json::array({choice});
    j["usage"] = usage(g);
    return j;
  }

  static bool write(httplib::DataSink& sink, const std::string& s) { return sink.write(s.data(), s.size()); }
  static std::string sse(const json& j) { return "data: " + dump(j) + "\n\n"; }

  // Writes what the sink produced; false when the client is gone.
  bool pump(Generation& g, httplib::DataSink& sink) {
    while (!g.done) {
      if (!sink.is_writable()) {
        g.sink->cancel();
        metrics.count_request(g.endpoint, "cancelled");
        return false;
      }
      auto u = g.sink->wait(std::chrono::milliseconds(100));
      std::string delta;
      std::string finish;
      for (int32_t t : u.tokens) {
        if (g.text->stopped()) break;
        ++g.generated;
        g.token_ids.push_back(t);
        delta += g.text->push(t);
        if (g.text->stopped()) {
          g.sink->cancel();  // the engine frees the sequence at its next step
          finish = "stop";
        }
      }
      if (finish.empty() && u.result) {
        const auto& r = *u.result;
        if (r.finish_reason == "error") {
          metrics.count_request(g.endpoint, "server_error");
          const ApiError e = error(500, r.error, "", "server_error");
          write(sink, g.api.stream ? sse(e.to_json()) + "data: [DONE]\n\n" : dump(e.to_json()));
          sink.done();
          g.done = true;
          return true;
        }
        delta += g.text->finish();
        finish = r.finish_reason;
      }
      if (g.api.stream) {
        std::string out;
        if (!delta.empty() || (!g.sent_role && g.api.endpoint == Endpoint::kChat)) out += sse(chunk(g, delta, ""));
        if (!finish.empty()) {
          out += sse(chunk(g, "", finish));
          if (g.api.include_usage)
            out += sse({{"id", g.id},
                        {"object", g.api.endpoint == Endpoint::kChat ? "chat.completion.chunk" : "text_completion"},
                        {"created", g.created},
                        {"model", opts.served_model_name},
                        {"choices", json::array()},
                        {"usage", usage(g)}});
          out += "data: [DONE]\n\n";
        }
        if (!out.empty() && !write(sink, out)) {
          g.sink->cancel();
          metrics.count_request(g.endpoint, "cancelled");
          return false;
        }
      } else if (!finish.empty()) {
        if (!write(sink, dump(whole(g, finish)))) {
          metrics.count_request(g.endpoint, "cancelled");
          return false;
        }
      }
      if (!finish.empty()) {
        metrics.count_request(g.endpoint, "ok");
        sink.done();
        g.done = true;
      }
    }
    return true;
  }

  void generate(Endpoint ep, const httplib::Request& req, httplib::Response& res) {
    const std::string name = ep == Endpoint::kChat ? "chat" : "completions";
    auto parsed = parse_openai_request(ep, req.body);
    if (auto* e = std::get_if<ApiError>(&parsed)) {
      metrics.count_request(name, "client_error");
      return send_error(res, *e);
    }
    auto g = std::make_shared<Generation>();
    g->api = std::move(std::get<ApiRequest>(parsed));
    g->endpoint = name;
    auto built = to_request(g->api);
    if (auto* e = std::get_if<ApiError>(&built)) {
      metrics.count_request(name, "client_error");
      return send_error(res, *e);
    }
    auto& gr = std::get<runtime::GenerationRequest>(built);
    g->prompt_tokens = int(gr.prompt.size());
    const int64_t n = next_id.fetch_add(1);
    g->id = (ep == Endpoint::kChat ? "chatcmpl-" : "cmpl-") + std::to_string(n);
    gr.id = g->id;
    g->created = int64_t(std::time(nullptr));
    std::vector<int32_t> hidden = gr.stop_token_ids;
    if (!gr.ignore_eos)
      for (int32_t e : engine.scheduler_options().eos_token_ids) hidden.push_back(e);
    g->text = std::make_unique<TextStream>(tok, g->api.stop, hidden);
    if (draining.load()) {
      metrics.count_request(name, "unavailable");
      res.set_header("Connection", "close");
      return send_error(res, error(503, "the server is shutting down", "", "server_error"));
    }
    auto sub = front.submit(std::move(gr));
    if (sub.status == runtime::RequestFront::Status::kQueueFull) {
      metrics.count_request(name, "queue_full");
      res.set_header("Retry-After", "1");
      return send_error(res, error(429, "the waiting queue is full (" + std::to_string(opts.max_waiting) +
                                            " requests); retry later", "", "rate_limit_error"));
    }
    if (sub.status != runtime::RequestFront::Status::kQueued) {
      metrics.count_request(name, "unavailable");
      res.set_header("Connection", "close");
      return send_error(res, error(503, "the server is shutting down", "", "server_error"));
    }
    g->sink = sub.sink;
    answering.fetch_add(1);
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");  // nginx: pass SSE through unbuffered
    res.set_chunked_content_provider(
        g->api.stream ? "text/event-stream" : "application/json",
        [this, g](size_t, httplib::DataSink& sink) { return pump(*g, sink); },
        [this, g](bool) {
          if (!g->done) g->sink->cancel();  // connection ended early: free the sequence
          answering.fetch_sub(1);
        });
  }
};

Server::Server(runtime::Engine& engine, const models::Tokenizer& tokenizer, ChatFormat chat, ServerOptions opts)
    : impl_(std::make_unique<Impl>(engine, tokenizer, std::move(chat), std::move(opts))) {}

Server::~Server() {
  if (impl_) impl_->loop->stop();
}

int Server::bind() {
  auto& o = impl_->opts;
  if (o.port == 0) {
    const int port = impl_->http.bind_to_any_port(o.host);
    if (port < 0) throw Error("serve: cannot bind " + o.host);
    o.port = port;
    return port;
  }
  if (!impl_->http.bind_to_port(o.host, o.port))
    throw Error("serve: cannot bind " + o.host + ":" + std::to_string(o.port) + " (in use, or not an address of this host)");
  return o.port;
}

void Server::serve() { impl_->http.listen_after_bind(); }

void Server::shutdown() {
  impl_->draining.store(true);
  impl_->front.close();
  impl_->loop->drain(impl_->opts.drain_timeout);
  // Every sink has its result now; wait until the handlers have written it out (cpp-httplib
  // ends chunked answers still being written once stop() closes the listening socket), then
  // stop() joins the HTTP threads. The wait is bounded: a client that stopped reading cannot
  // hold the server (its write times out after the write timeout).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(35);
  while (impl_->answering.load() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  impl_->http.stop();
}

}  // namespace g4c::serve

// g4c serve — an OpenAI-compatible HTTP server over the continuous-batching engine
// (tools/serve/server.h). Loads the model once, serves until SIGINT/SIGTERM, then stops taking
// requests, lets running ones finish (or cancels them after --drain-timeout), answers every
// open connection and exits 0.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <thread>

#include "models/tokenizer.h"
#include "tools/cli.h"
#include "tools/run_options.h"
#include "tools/serve/chat_format.h"
#include "tools/serve/server.h"

namespace g4c::cli {
namespace {

struct ServeArgs {
  RunOptions engine;  // the engine options of g4c run (tools/run_options.h)
  serve::ServerOptions server;
  double drain_timeout_s = 30;
};

void run_serve(ServeArgs& a) {
  // SIGINT/SIGTERM are taken by one waiting thread: block them before any thread starts.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  std::signal(SIGPIPE, SIG_IGN);  // a client gone mid-write is an error return, not a signal

  const std::filesystem::path dir = a.engine.model;
  if (!std::filesystem::exists(dir / "tokenizer.json")) throw Error(dir.string() + ": no tokenizer.json (serve needs one)");
  auto tokenizer = models::Tokenizer::load(dir / "tokenizer.json");
  std::string note;
  serve::ChatFormat chat = serve::load_chat_format(dir, &note);
  if (!note.empty()) std::fprintf(stderr, "serve: %s\n", note.c_str());
  auto engine = open_engine(a.engine, a.engine.max_seq_len);
  if (a.server.served_model_name.empty()) a.server.served_model_name = dir.filename().string();
  a.server.drain_timeout = std::chrono::milliseconds(int64_t(a.drain_timeout_s * 1000));
  serve::Server server(*engine, *tokenizer, std::move(chat), a.server);
  const int port = server.bind();
  std::fprintf(stderr, "serve: %s on http://%s:%d (%s)\n", a.server.served_model_name.c_str(), a.server.host.c_str(),
               port, engine->backend().name());
  std::fflush(stderr);
  std::atomic<bool> signalled{false};
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&sigs, &sig);
    signalled.store(true);
    std::fprintf(stderr, "serve: %s: finishing running requests\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    server.shutdown();
  });
  server.serve();
  if (!signalled.load()) kill(getpid(), SIGTERM);  // the listener ended by itself: release the waiter
  waiter.join();
  std::fprintf(stderr, "serve: stopped\n");
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto args = std::make_shared<ServeArgs>();
  auto* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server (completions, chat, streaming, metrics)");
  args->engine.max_seq_len = 2048;
  add_engine_options(cmd, args->engine, "longest prompt + generation");
  cmd->get_option("--model")->required();
  auto& s = args->server;
  cmd->add_option("--host", s.host, "address to listen on")->capture_default_str();
  cmd->add_option("--port", s.port, "port (0: any free port)")->capture_default_str();
  cmd->add_option("--served-model-name", s.served_model_name, "model id of /v1/models and requests (default: the folder name)");
  cmd->add_option("--max-waiting", s.max_waiting, "queued requests before 429 Too Many Requests")->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-body-bytes", s.max_body_bytes, "larger request bodies get 413")->capture_default_str();
  cmd->add_option("--http-threads", s.http_threads, "connections served at once")->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--default-max-tokens", s.default_max_tokens, "/v1/completions max_tokens when a request has none")
      ->capture_default_str();
  cmd->add_option("--drain-timeout", args->drain_timeout_s, "on SIGINT/SIGTERM, seconds running requests get before they are cancelled")
      ->capture_default_str();
  cmd->callback([args] { run_serve(*args); });
}

}  // namespace g4c::cli

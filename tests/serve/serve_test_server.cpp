// A `g4c serve` without the compiler half: the tiny model on the runtime's reference plan,
// CPU backend. The sanitizer build (no MLIR, so no g4c binary) runs the load-and-fault test
// against it. Options: --model DIR --host H --port P --threads N --batch-size B
// --max-waiting W --max-body-bytes N --served-model-name S --max-sequence-length L.
#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "models/error.h"
#include "models/tokenizer.h"
#include "runtime/engine.h"
#include "tools/serve/chat_format.h"
#include "tools/serve/server.h"

int main(int argc, char** argv) {
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  std::string model;
  g4c::serve::ServerOptions so;
  g4c::runtime::EngineOptions eo;
  eo.max_seq_len = 2048;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--model") model = v;
    else if (k == "--host") so.host = v;
    else if (k == "--port") so.port = std::stoi(v);
    else if (k == "--threads") eo.threads = std::stoi(v);
    else if (k == "--batch-size") eo.max_sequences = std::stoi(v);
    else if (k == "--max-waiting") so.max_waiting = std::stoi(v);
    else if (k == "--max-body-bytes") so.max_body_bytes = std::stoul(v);
    else if (k == "--served-model-name") so.served_model_name = v;
    else if (k == "--max-sequence-length") eo.max_seq_len = std::stoi(v);
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  try {
    auto tok = g4c::models::Tokenizer::load(std::filesystem::path(model) / "tokenizer.json");
    auto chat = g4c::serve::load_chat_format(model, nullptr);
    auto engine = g4c::runtime::Engine::open(model, std::nullopt, eo);
    if (so.served_model_name.empty()) so.served_model_name = std::filesystem::path(model).filename().string();
    g4c::serve::Server server(*engine, *tok, std::move(chat), so);
    const int port = server.bind();
    std::fprintf(stderr, "serve: %s on http://%s:%d (cpu)\n", so.served_model_name.c_str(), so.host.c_str(), port);
    std::thread waiter([&] {
      int sig = 0;
      sigwait(&sigs, &sig);
      server.shutdown();
    });
    server.serve();
    waiter.join();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}

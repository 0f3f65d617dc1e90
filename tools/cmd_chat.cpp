// g4c chat — an interactive terminal chat: the model's chat template, answers streamed as they
// are generated (the server's engine loop and incremental detokenizer), history kept.
//   /reset  forget the conversation        /exit (or end of input)  quit
//   Ctrl-C  stops the current answer (at the prompt: quits)
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <iostream>

#include "models/tokenizer.h"
#include "runtime/engine_loop.h"
#include "tools/cli.h"
#include "tools/run_options.h"
#include "tools/serve/chat_format.h"
#include "tools/serve/text_stream.h"

namespace g4c::cli {
namespace {

std::atomic<bool> g_interrupt{false};  // set by SIGINT, read by the chat loop only
extern "C" void on_chat_sigint(int) { g_interrupt.store(true); }

struct ChatArgs {
  RunOptions engine;  // the engine options of g4c run (tools/run_options.h)
  std::string system;
  int max_tokens = 512;
  float temperature = 0.0f, top_p = 1.0f;
  int top_k = -1;
  int64_t seed = -1;
};

void run_chat(const ChatArgs& a) {
  const std::filesystem::path dir = a.engine.model;
  auto tok = models::Tokenizer::load(dir / "tokenizer.json");
  std::string note;
  serve::ChatFormat chat = serve::load_chat_format(dir, &note);
  if (!chat.render) throw Error(note.empty() ? dir.string() + ": no chat template" : note);
  auto engine = open_engine(a.engine, a.engine.max_seq_len);
  runtime::RequestFront front(1);
  runtime::EngineLoop loop(*engine, front);
  std::vector<int32_t> hidden;
  for (const auto& s : chat.end_of_turn)
    if (int32_t id = tok->token_to_id(s); id >= 0) hidden.push_back(id);
  const std::vector<int32_t> stop_ids = hidden;
  for (int32_t e : engine->scheduler_options().eos_token_ids) hidden.push_back(e);

  struct sigaction sa {};
  sa.sa_handler = on_chat_sigint;  // no SA_RESTART: Ctrl-C at the prompt ends the read
  sigaction(SIGINT, &sa, nullptr);

  const bool tty = isatty(STDIN_FILENO);
  nlohmann::json messages = nlohmann::json::array();
  auto reset = [&] {
    messages = nlohmann::json::array();
    if (!a.system.empty()) messages.push_back({{"role", "system"}, {"content", a.system}});
  };
  reset();
  std::string line;
  int turn = 0;
  for (;;) {
    if (tty) std::fputs("> ", stdout), std::fflush(stdout);
    g_interrupt.store(false);
    if (!std::getline(std::cin, line)) break;
    if (line == "/exit" || line == "/quit") break;
    if (line == "/reset") {
      reset();
      std::puts("(conversation reset)");
      std::fflush(stdout);
      continue;
    }
    if (line.empty()) continue;
    messages.push_back({{"role", "user"}, {"content", line}});
    runtime::GenerationRequest r;
    r.id = std::to_string(turn++);
    r.prompt = tok->encode(chat.render(messages), /*add_bos=*/false);
    if (int(r.prompt.size()) >= engine->options().max_seq_len) {
      std::fprintf(stderr, "the conversation (%zu tokens) no longer fits --max-sequence-length %d: /reset\n",
                   r.prompt.size(), engine->options().max_seq_len);
      messages.erase(messages.end() - 1);
      continue;
    }
    r.max_new_tokens = std::min(a.max_tokens, engine->options().max_seq_len - int(r.prompt.size()));
    r.stop_token_ids = stop_ids;
    r.sampling.temperature = a.temperature;
    r.sampling.top_p = a.top_p;
    r.sampling.top_k = a.top_k;
    if (a.seed >= 0) r.sampling.seed = uint64_t(a.seed);
    auto sub = front.submit(std::move(r));
    if (!sub.sink) throw Error("chat: the engine stopped");
    serve::TextStream text(*tok, {}, hidden);
    bool interrupted = false;
    for (;;) {
      if (g_interrupt.load() && !interrupted) {
        sub.sink->cancel();
        interrupted = true;
      }
      auto u = sub.sink->wait(std::chrono::milliseconds(50));
      for (int32_t t : u.tokens) std::fputs(text.push(t).c_str(), stdout);
      if (u.result) {
        if (u.result->finish_reason == "error") throw Error("chat: " + u.result->error);
        std::fputs(text.finish().c_str(), stdout);
        break;
      }
      std::fflush(stdout);
    }
    std::fputs(interrupted ? " [stopped]\n" : "\n", stdout);
    std::fflush(stdout);
    messages.push_back({{"role", "assistant"}, {"content", text.text()}});
  }
  if (tty) std::fputs("\n", stdout);
}

}  // namespace

void add_chat_command(CLI::App& app) {
  auto a = std::make_shared<ChatArgs>();
  auto* cmd = app.add_subcommand("chat", "interactive chat in the terminal (the model's chat template, streamed)");
  a->engine.max_seq_len = 2048;
  add_engine_options(cmd, a->engine, "longest prompt + generation");
  cmd->get_option("--model")->required();
  cmd->add_option("--system", a->system, "system message at the start of every conversation");
  cmd->add_option("--max-tokens", a->max_tokens, "longest answer")->capture_default_str();
  cmd->add_option("--temperature", a->temperature, "0: greedy")->capture_default_str();
  cmd->add_option("--top-p", a->top_p, "nucleus")->capture_default_str();
  cmd->add_option("--top-k", a->top_k, "-1: off")->capture_default_str();
  cmd->add_option("--seed", a->seed, "sampling seed (-1: per turn)")->capture_default_str();
  cmd->callback([a] { run_chat(*a); });
}

}  // namespace g4c::cli

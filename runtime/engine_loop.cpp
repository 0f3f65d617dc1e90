// The engine thread of a server (see engine_loop.h).
#include "runtime/engine_loop.h"

#include <algorithm>

namespace g4c::runtime {

EngineLoop::EngineLoop(Engine& engine, RequestFront& front, std::function<void(const GenerationResult&)> on_finish)
    : engine_(engine),
      front_(front),
      on_finish_(std::move(on_finish)),
      sched_(engine.scheduler_options(), &engine.ring_slots(), engine.block_pool(), engine.window_pool()) {
  thread_ = std::thread([this] { run(); });
}

EngineLoop::~EngineLoop() { stop(); }

void EngineLoop::deliver() {
  for (const auto& e : sched_.take_emitted()) {
    auto it = std::find(open_index_.begin(), open_index_.end(), e.index);
    if (it != open_index_.end()) open_[it - open_index_.begin()]->push(e.token);
  }
  for (auto& r : sched_.take_finished()) {
    if (on_finish_) on_finish_(r);
    auto it = std::find(open_index_.begin(), open_index_.end(), r.index);
    if (it == open_index_.end()) continue;
    const size_t k = size_t(it - open_index_.begin());
    open_[k]->finish(std::move(r));
    open_.erase(open_.begin() + long(k));
    open_index_.erase(open_index_.begin() + long(k));
  }
}

void EngineLoop::run() {
  bool failed = false;
  std::string failure;
  while (!stop_.load() || !open_.empty()) {
    const bool idle = sched_.done();
    for (auto& a : front_.take(idle && !stop_.load(), std::chrono::milliseconds(50))) {
      if (failed) {
        GenerationResult r;
        r.id = a.request.id;
        r.index = a.index;
        r.finish_reason = "error";
        r.error = failure;
        a.sink->finish(std::move(r));
        continue;
      }
      open_.push_back(a.sink);
      open_index_.push_back(a.index);
      sched_.add(std::move(a.request), a.index, a.queued);
    }
    const bool cancel_all = cancel_all_.load() || stop_.load();
    const auto now = Scheduler::Clock::now();
    for (size_t k = 0; k < open_.size(); ++k)
      if (cancel_all || open_[k]->cancelled()) sched_.cancel(open_index_[k], now);
    deliver();
    if (!sched_.done() && !failed) {
      try {
        engine_.step(sched_);
      } catch (const std::exception& e) {
        // A failed step leaves the device state unknown: fail every open request, take no more.
        failed = true;
        failure = std::string("engine step failed: ") + e.what();
        for (size_t k = 0; k < open_.size(); ++k) {
          GenerationResult r;
          r.index = open_index_[k];
          r.finish_reason = "error";
          r.error = failure;
          if (on_finish_) on_finish_(r);
          open_[k]->finish(std::move(r));
        }
        open_.clear();
        open_index_.clear();
      }
      deliver();
    }
    FrontStats s;
    s.running = sched_.num_running();
    s.waiting = sched_.num_waiting();
    s.kv_blocks_used = sched_.kv_blocks_used();
    s.kv_blocks_total = sched_.kv_blocks_total();
    s.preemptions = sched_.total_preemptions();
    s.steps = engine_.stats().steps;
    s.failed = failed;
    front_.publish(s);
  }
  // Closed before stop: what is still in the inbox never started.
  for (auto& a : front_.take(false, std::chrono::milliseconds(0))) {
    GenerationResult r;
    r.id = a.request.id;
    r.index = a.index;
    r.finish_reason = "cancelled";
    r.prompt_tokens = int(a.request.prompt.size());
    if (on_finish_) on_finish_(r);
    a.sink->finish(std::move(r));
  }
  front_.publish({});
}

void EngineLoop::drain(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto busy = [&] {
    const FrontStats s = front_.stats();
    return s.running > 0 || s.waiting > 0;
  };
  while (busy() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  cancel_all_.store(true);
  while (busy()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

void EngineLoop::stop() {
  if (!thread_.joinable()) return;
  front_.close();
  stop_.store(true);
  thread_.join();
}

}  // namespace g4c::runtime

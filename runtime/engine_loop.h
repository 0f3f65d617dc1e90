// The engine thread of a server: owns one Scheduler over the Engine's ring slots and block
// pool, and is the only thread that touches the engine (and so the device). Each iteration it
// takes new requests from the RequestFront, finishes cancelled ones (their KV freed by the
// scheduler's normal finish path), runs one step, pushes each new token into its request's
// sink and finishes the sinks of finished requests. No lock is held while the device runs.
//
//   RequestFront front(max_waiting);
//   EngineLoop loop(*engine, front, on_finish);   // starts the thread
//   ... HTTP threads: front.submit(request) → sink->wait(...)
//   front.close(); loop.drain(deadline); loop.stop();
#pragma once

#include <atomic>
#include <functional>
#include <thread>

#include "runtime/engine.h"
#include "runtime/request_front.h"

namespace g4c::runtime {

class EngineLoop {
 public:
  // `on_finish` (may be empty) sees every result on the engine thread before its sink does
  // (metrics).
  EngineLoop(Engine& engine, RequestFront& front, std::function<void(const GenerationResult&)> on_finish = {});
  ~EngineLoop();  // stop()
  EngineLoop(const EngineLoop&) = delete;
  EngineLoop& operator=(const EngineLoop&) = delete;

  // Waits until no request is queued or running, or until `timeout` passes; then cancels what is
  // left (finish_reason "cancelled") and waits for those to be delivered. Call after
  // front.close() so that nothing new arrives.
  void drain(std::chrono::milliseconds timeout);
  // Cancels everything still open and joins the thread.
  void stop();

 private:
  void run();
  void deliver();

  Engine& engine_;
  RequestFront& front_;
  std::function<void(const GenerationResult&)> on_finish_;
  Scheduler sched_;
  std::vector<std::shared_ptr<RequestSink>> open_;  // by request index - first_open_
  std::vector<int> open_index_;
  std::atomic<bool> cancel_all_{false}, stop_{false};
  std::thread thread_;
};

}  // namespace g4c::runtime

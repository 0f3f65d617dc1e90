// The request front of a server: what HTTP threads and the engine thread share, and nothing
// else (no sockets, no JSON). HTTP threads submit() requests and read their RequestSink; the
// engine thread (runtime/engine_loop.h) takes the inbox, pushes tokens into sinks as they are
// produced and finishes them. Cancellation is a flag on the sink that the engine reads at its
// next step boundary; the sequence then finishes through the scheduler's normal path.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "runtime/scheduler.h"

namespace g4c::runtime {

// One request's stream of tokens: written by the engine thread, read by one HTTP thread.
class RequestSink {
 public:
  struct Update {
    std::vector<int32_t> tokens;             // tokens produced since the last wait()
    std::optional<GenerationResult> result;  // set once, with the last tokens
  };
  // Waits until tokens or the result arrive, or `timeout` passes; returns what arrived.
  Update wait(std::chrono::milliseconds timeout);
  // The reader gives up (client gone): the engine cancels the sequence at its next step.
  void cancel() { cancelled_.store(true); }
  bool cancelled() const { return cancelled_.load(); }

  // Engine side.
  void push(int32_t token);
  void finish(GenerationResult result);

 private:
  std::mutex m_;
  std::condition_variable cv_;
  std::vector<int32_t> tokens_;
  std::optional<GenerationResult> result_;
  bool result_taken_ = false;
  std::atomic<bool> cancelled_{false};
};

// What /metrics and /health read of the engine side (published by the engine thread each step).
struct FrontStats {
  int running = 0;       // sequences in the scheduler's running set
  int waiting = 0;       // queued: in the inbox or the scheduler's waiting queue
  int kv_blocks_used = 0;
  int kv_blocks_total = 0;
  int64_t preemptions = 0;
  int64_t steps = 0;
  bool failed = false;   // the engine stopped on an error (every open request got it)
};

class RequestFront {
 public:
  explicit RequestFront(int max_waiting) : max_waiting_(max_waiting) {}

  enum class Status { kQueued, kQueueFull, kClosed };
  struct Submitted {
    Status status = Status::kClosed;
    std::shared_ptr<RequestSink> sink;  // set when queued
  };
  // Queues a request (already validated) unless the waiting queue holds max_waiting requests
  // or the front is closed.
  Submitted submit(GenerationRequest request);
  // No further submissions (draining for shutdown); wakes the engine thread.
  void close();
  bool closed() const;
  FrontStats stats() const;

  // Engine side.
  struct Arrival {
    int index = 0;
    GenerationRequest request;
    std::shared_ptr<RequestSink> sink;
    Scheduler::Clock::time_point queued;
  };
  // The inbox; waits up to `timeout` for an arrival (or close()) when `block`.
  std::vector<Arrival> take(bool block, std::chrono::milliseconds timeout);
  void publish(const FrontStats& engine_side);  // `waiting` = the scheduler's waiting queue

 private:
  const int max_waiting_;
  mutable std::mutex m_;
  std::condition_variable cv_;
  std::vector<Arrival> inbox_;
  FrontStats published_;
  bool closed_ = false;
  int next_index_ = 0;
};

}  // namespace g4c::runtime

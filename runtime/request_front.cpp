// Request sinks and the bounded inbox (see request_front.h).
#include "runtime/request_front.h"

namespace g4c::runtime {

RequestSink::Update RequestSink::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(m_);
  cv_.wait_for(lock, timeout, [&] { return !tokens_.empty() || (result_ && !result_taken_); });
  Update u;
  u.tokens.swap(tokens_);
  if (result_ && !result_taken_) {
    u.result = std::move(result_);
    result_taken_ = true;
  }
  return u;
}

void RequestSink::push(int32_t token) {
  {
    std::lock_guard<std::mutex> lock(m_);
    tokens_.push_back(token);
  }
  cv_.notify_all();
}

void RequestSink::finish(GenerationResult result) {
  {
    std::lock_guard<std::mutex> lock(m_);
    result_ = std::move(result);
  }
  cv_.notify_all();
}

RequestFront::Submitted RequestFront::submit(GenerationRequest request) {
  Submitted out;
  {
    std::lock_guard<std::mutex> lock(m_);
    if (closed_ || published_.failed) return out;
    if (int(inbox_.size()) + published_.waiting >= max_waiting_) {
      out.status = Status::kQueueFull;
      return out;
    }
    out.status = Status::kQueued;
    out.sink = std::make_shared<RequestSink>();
    inbox_.push_back({next_index_++, std::move(request), out.sink, Scheduler::Clock::now()});
  }
  cv_.notify_all();
  return out;
}

void RequestFront::close() {
  {
    std::lock_guard<std::mutex> lock(m_);
    closed_ = true;
  }
  cv_.notify_all();
}

bool RequestFront::closed() const {
  std::lock_guard<std::mutex> lock(m_);
  return closed_;
}

FrontStats RequestFront::stats() const {
  std::lock_guard<std::mutex> lock(m_);
  FrontStats s = published_;
  s.waiting += int(inbox_.size());
  return s;
}

std::vector<RequestFront::Arrival> RequestFront::take(bool block, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(m_);
  if (block) cv_.wait_for(lock, timeout, [&] { return !inbox_.empty() || closed_; });
  std::vector<Arrival> out;
  out.swap(inbox_);
  // Until the engine publishes again, the taken requests still count as waiting.
  published_.waiting += int(out.size());
  return out;
}

void RequestFront::publish(const FrontStats& engine_side) {
  std::lock_guard<std::mutex> lock(m_);
  published_ = engine_side;
}

}  // namespace g4c::runtime

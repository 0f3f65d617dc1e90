// Continuous-batching scheduler: owns the request queues and decides, step by step, which
// tokens of which sequences run. Policy (nano-vllm / vLLM v1 style):
//  - decode first: every running sequence whose prompt is done feeds its last token;
//  - then chunked prefill under the per-step token budget (at most chunk_tokens per
//    sequence per step): running sequences still prefilling first, then admission of waiting
//    requests in arrival order while a ring slot is free and the block pools can hold the
//    request (admission by KV capacity). With reserve_generation (the default) a request is
//    admitted only when the pools hold its whole life — prompt + max_new_tokens, capped at
//    max_seq_len, in the full layers' pool; in the sliding layers' pool the window of its
//    largest chunk while it prefills, of one token once it decodes (window_need) — beside what
//    the running sequences have reserved and not yet taken: the KV fills with sequences that
//    all finish, and none is preempted to make room for another's growth.
//    Without it only the known tokens count (more sequences at once, preemptions when they grow);
//  - when a running sequence cannot get the block it needs, the most recently admitted
//    running sequence is preempted: its KV is freed and it goes back to the head of the
//    queue with prompt + generated tokens, to be recomputed (no output changes);
//  - sliding layers in paged blocks (a window pool): before each of a sequence's chunks, the
//    blocks whose positions no query of it will see again go back to the pool;
//  - a sequence that finishes (stop token, EOS, max_new_tokens, max sequence length)
//    frees its ring slot and blocks in the same step.
// The scheduler never touches device memory: it works on RingSlots/BlockPool ids; the
// engine turns a schedule into a BatchDesc for whichever backend runs it.
#pragma once

#include <chrono>
#include <deque>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "runtime/kv.h"
#include "runtime/sampler.h"

namespace g4c::runtime {
class ThreadPool;

struct GenerationRequest {
  std::string id;                      // request_id as written to outputs
  std::vector<int32_t> prompt;         // token ids (BOS included)
  int max_new_tokens = 32;
  std::vector<int32_t> stop_token_ids; // extra stop ids of this request
  bool ignore_eos = false;             // do not stop on the model's EOS ids
  SamplingParams sampling;
};

struct GenerationResult {
  std::string id;
  int index = 0;                       // position of the request in the input
  std::vector<int32_t> tokens;         // generated tokens (stop token included when hit)
  std::string finish_reason;           // "length" | "stop" | "error"
  std::string error;                   // message when finish_reason == "error"
  int prompt_tokens = 0;
  double prefill_latency_s = 0;        // queued → first token
  std::vector<double> decode_latencies_s;  // between consecutive tokens
  double total_latency_s = 0;          // queued → last token
  int preemptions = 0;
};

// Time per output token of one request, as serving benchmarks define it (vLLM, genai-perf): its
// mean interval between consecutive tokens, (last token - first token) / (tokens - 1); -1 when it
// generated fewer than two tokens. The intervals themselves are the inter-token latencies (ITL).
inline double time_per_output_token(const GenerationResult& r) {
  if (r.decode_latencies_s.empty()) return -1;
  double s = 0;
  for (double d : r.decode_latencies_s) s += d;
  return s / double(r.decode_latencies_s.size());
}

struct SchedulerOptions {
  int max_sequences = 8;    // running sequences at once (ring slots)
  int token_budget = 512;   // tokens per step, all sequences together
  int chunk_tokens = 256;   // tokens one sequence feeds per step (<= plan max_chunk_tokens)
  // Prefill tokens of a step that also decodes (0: the whole token_budget). A decode step waits
  // for the prefill chunks batched with it: this bounds the wait (TPOT p99) while steps without
  // decodes still prefill token_budget tokens.
  int mixed_prefill_tokens = 0;
  int max_seq_len = 2048;   // prompt + generated
  std::vector<int32_t> eos_token_ids;
  int window = 0;           // W of the sliding layers in the window pool (0: no window pool)
  bool reserve_generation = true;  // admission reserves each request's whole life (see above)
};

// One sequence's share of a step.
struct ScheduledChunk {
  int seq = 0;              // scheduler sequence id (index of the request)
  const int32_t* tokens = nullptr;
  int num_tokens = 0;
  int position = 0;         // position of tokens[0]
  int ring_slot = -1;
  const BlockTable* blocks = nullptr;
  const BlockTable* window_blocks = nullptr;  // sliding layers' blocks (window pool)
  bool needs_logits = false;  // the last token's logits decide the next token
  bool decode = false;        // one token of a sequence that has generated before (not prompt)
};

class Scheduler {
 public:
  using Clock = std::chrono::steady_clock;
  // blocks may be null when the model has no paged full-attention layer, window_blocks when no
  // sliding layer is paged.
  Scheduler(SchedulerOptions opts, RingSlots* rings, BlockPool* blocks, BlockPool* window_blocks = nullptr);
  ~Scheduler();

  // Queues a request (validated by the caller). `index` identifies it in results.
  void add(GenerationRequest request, int index, Clock::time_point queued);
  bool done() const { return waiting_.empty() && running_.empty(); }
  int num_running() const { return int(running_.size()); }
  int num_waiting() const { return int(waiting_.size()); }
  int total_preemptions() const { return preemptions_; }
  int max_running() const { return max_running_; }  // most sequences running at once so far

  // The next step's chunks; empty only when done().
  std::vector<ScheduledChunk> schedule();
  // Logits (row r for the r-th chunk with needs_logits) of the step just run: samples,
  // appends, finishes and frees.
  void complete(const std::vector<ScheduledChunk>& chunks, const float* logits, int vocab, Clock::time_point now);
  // The rows' parameters and draws (one per chunk with needs_logits, in order), taken from each
  // sequence's generator now: for a backend that samples on its device (then complete_tokens),
  // or the host (the overload below). Call once per step.
  std::vector<RowDraw> draws(const std::vector<ScheduledChunk>& chunks);
  // complete() with the draws already taken.
  void complete(const std::vector<ScheduledChunk>& chunks, const float* logits, int vocab,
                const std::vector<RowDraw>& draws, Clock::time_point now);
  // The same with the next tokens already chosen (row r's token for the r-th chunk with
  // needs_logits), e.g. greedy tokens computed on the device.
  void complete_tokens(const std::vector<ScheduledChunk>& chunks, const int32_t* tokens, Clock::time_point now);
  // True when every chunk with needs_logits samples greedily (temperature <= 0): its token is
  // the argmax of its logits row, lowest index on ties.
  bool greedy(const std::vector<ScheduledChunk>& chunks) const;
  // Results of requests finished since the last call.
  std::vector<GenerationResult> take_finished();
  // Tokens appended since the last call, in order: (request index, token). A server streams them.
  struct Emitted {
    int index = 0;
    int32_t token = 0;
  };
  std::vector<Emitted> take_emitted();
  // Finishes the waiting or running request `index` with finish_reason "cancelled" (its KV and ring
  // slot freed through the same path as any finish). Call between steps (after complete*, before
  // schedule). False when no such request is waiting or running (already finished or unknown).
  bool cancel(int index, Clock::time_point now);
  // Paged KV blocks in use / in the pool (0 / 0 without paged layers).
  int kv_blocks_used() const;
  int kv_blocks_total() const;

 private:
  struct Sequence;
  bool try_admit(Sequence& s, int& budget, std::vector<ScheduledChunk>& out);
  void preempt(Sequence* s);
  void finish(Sequence* s, const std::string& reason, const std::string& error, Clock::time_point now);
  ScheduledChunk chunk_of(Sequence& s, int n) const;
  // KV growth of `s` to `total` tokens (its next chunk ends there): window blocks that left the
  // window go back first; can_grow says whether both pools can, grow takes the blocks.
  bool can_grow(Sequence& s, int total);
  void grow(Sequence& s, int total);
  // The most window-pool blocks `s` holds from now on: the keys of its largest chunk still to
  // come and the W - 1 before it while it prefills, of one token once it decodes (a long
  // prompt's prefill peak goes back when its decode starts), never more than its whole life.
  int window_need(const Sequence& s) const;
  // Blocks `s` needs from now on in each pool and has not taken yet (reserve_generation).
  int unreserved(const Sequence& s, const BlockPool& pool, bool window) const;
  bool fits_reservation(const Sequence& s) const;

  SchedulerOptions opts_;
  RingSlots* rings_;
  BlockPool* blocks_;
  BlockPool* window_blocks_;
  std::vector<std::unique_ptr<Sequence>> all_;
  std::deque<Sequence*> waiting_;
  std::vector<Sequence*> running_;  // admission order
  std::vector<GenerationResult> finished_;
  std::vector<Emitted> emitted_;
  int preemptions_ = 0;
  int max_running_ = 0;
  std::unique_ptr<ThreadPool> sample_pool_;  // complete(): rows of large vocabularies in parallel
};

}  // namespace g4c::runtime

// Continuous-batching scheduler (see scheduler.h for the policy).
#include "runtime/scheduler.h"

#include <algorithm>
#include <utility>

#include "models/error.h"
#include "runtime/thread_pool.h"

namespace g4c::runtime {

struct Scheduler::Sequence {
  GenerationRequest req;
  int id = 0, index = 0;
  std::vector<int32_t> tokens;  // prompt + generated: everything whose KV the model needs
  int computed = 0;             // tokens whose KV is in the cache
  int ring_slot = -1;
  BlockTable blocks;
  BlockTable window_blocks;     // sliding layers (window pool); released entries are kReleasedBlock
  std::vector<int32_t> generated;
  std::mt19937_64 rng;
  Clock::time_point queued, last_token;
  std::vector<double> decode_latencies;
  double prefill_latency = 0;
  int preemptions = 0;
  int remaining() const { return int(tokens.size()) - computed; }
  // Tokens whose KV the sequence holds when it finishes at the latest: its last token is
  // sampled, never fed.
  int final_kv(int max_seq_len) const {
    return std::max(int(tokens.size()), std::min(int(req.prompt.size()) + req.max_new_tokens, max_seq_len) - 1);
  }
};

Scheduler::Scheduler(SchedulerOptions opts, RingSlots* rings, BlockPool* blocks, BlockPool* window_blocks)
    : opts_(std::move(opts)), rings_(rings), blocks_(blocks), window_blocks_(window_blocks) {
  if (window_blocks_ && opts_.window <= 0) throw Error("scheduler: a window block pool needs the window (W > 0)");
  if (opts_.token_budget < opts_.max_sequences)
    throw Error("scheduler: the token budget (" + std::to_string(opts_.token_budget) +
                ") must hold one decode token of every running sequence (" + std::to_string(opts_.max_sequences) + ")");
  if (opts_.chunk_tokens <= 0) throw Error("scheduler: chunk_tokens must be positive");
}

Scheduler::~Scheduler() = default;

void Scheduler::add(GenerationRequest request, int index, Clock::time_point queued) {
  auto s = std::make_unique<Sequence>();
  s->id = int(all_.size());
  s->index = index;
  s->tokens = request.prompt;
  s->rng.seed(request.sampling.seed ? *request.sampling.seed : 0x9e3779b97f4a7c15ull * uint64_t(index + 1));
  s->queued = s->last_token = queued;
  s->req = std::move(request);
  Sequence* p = s.get();
  all_.push_back(std::move(s));
  if (p->req.max_new_tokens <= 0) {  // nothing to generate
    finish(p, "length", "", queued);
    return;
  }
  waiting_.push_back(p);
}

ScheduledChunk Scheduler::chunk_of(Sequence& s, int n) const {
  ScheduledChunk c;
  c.seq = s.id;
  c.tokens = s.tokens.data() + s.computed;
  c.num_tokens = n;
  c.position = s.computed;
  c.ring_slot = s.ring_slot;
  c.blocks = &s.blocks;
  c.window_blocks = &s.window_blocks;
  c.needs_logits = s.computed + n == int(s.tokens.size());
  return c;
}

void Scheduler::preempt(Sequence* s) {
  running_.erase(std::find(running_.begin(), running_.end(), s));
  if (s->ring_slot >= 0) rings_->free(s->ring_slot);
  s->ring_slot = -1;
  if (blocks_) blocks_->free(s->blocks);
  if (window_blocks_) window_blocks_->free(s->window_blocks);
  s->computed = 0;  // recompute prompt + generated when re-admitted
  ++s->preemptions;
  ++preemptions_;
  waiting_.push_front(s);
}

void Scheduler::finish(Sequence* s, const std::string& reason, const std::string& error, Clock::time_point now) {
  auto it = std::find(running_.begin(), running_.end(), s);
  if (it != running_.end()) running_.erase(it);
  if (s->ring_slot >= 0) rings_->free(s->ring_slot);
  s->ring_slot = -1;
  if (blocks_) blocks_->free(s->blocks);
  if (window_blocks_) window_blocks_->free(s->window_blocks);
  GenerationResult r;
  r.id = s->req.id;
  r.index = s->index;
  r.tokens = std::move(s->generated);
  r.finish_reason = reason;
  r.error = error;
  r.prompt_tokens = int(s->req.prompt.size());
  r.prefill_latency_s = s->prefill_latency;
  r.decode_latencies_s = std::move(s->decode_latencies);
  r.total_latency_s = std::chrono::duration<double>(now - s->queued).count();
  r.preemptions = s->preemptions;
  finished_.push_back(std::move(r));
  all_[s->id].reset();  // a long-running server must not keep every finished sequence
}

bool Scheduler::can_grow(Sequence& s, int total) {
  if (window_blocks_) window_blocks_->release_before(s.window_blocks, s.computed - opts_.window + 1);
  return (!blocks_ || blocks_->can_append(s.blocks, total)) &&
         (!window_blocks_ || window_blocks_->can_append(s.window_blocks, total));
}

void Scheduler::grow(Sequence& s, int total) {
  if (window_blocks_) {
    window_blocks_->release_before(s.window_blocks, s.computed - opts_.window + 1);
    window_blocks_->append(s.window_blocks, total);
  }
  if (blocks_) blocks_->append(s.blocks, total);
}

int Scheduler::window_need(const Sequence& s) const {
  const int life = window_blocks_->blocks_for(s.final_kv(opts_.max_seq_len));
  const int r = s.remaining();
  const int chunk = r > 1 ? std::min({opts_.chunk_tokens, opts_.token_budget, r}) : 1;
  return std::min(life, window_blocks_->window_blocks(opts_.window, chunk));
}

int Scheduler::unreserved(const Sequence& s, const BlockPool& pool, bool window) const {
  const int need = window ? window_need(s) : pool.blocks_for(s.final_kv(opts_.max_seq_len));
  const int held = window ? BlockPool::held(s.window_blocks) : int(s.blocks.size());
  return std::max(0, need - held);
}

bool Scheduler::fits_reservation(const Sequence& s) const {
  auto fits = [&](const BlockPool* pool, bool window) {
    if (!pool) return true;
    int outstanding = 0;
    for (const Sequence* r : running_) outstanding += unreserved(*r, *pool, window);
    return pool->num_free() - outstanding >= unreserved(s, *pool, window);
  };
  return fits(blocks_, false) && fits(window_blocks_, true);
}

bool Scheduler::try_admit(Sequence& s, int& budget, std::vector<ScheduledChunk>& out) {
  if (!rings_->can_allocate() || int(running_.size()) >= opts_.max_sequences) return false;
  const int known = int(s.tokens.size());
  const bool fits_known = (!blocks_ || blocks_->can_allocate(known)) &&
                          (!window_blocks_ || std::min(window_blocks_->blocks_for(known), window_need(s)) <=
                                                  window_blocks_->num_free());
  // A request whose life does not fit even an empty pool still runs alone on its known tokens
  // (it may then fail for want of blocks, with a message naming the pool).
  if (!fits_known || (opts_.reserve_generation && !running_.empty() && !fits_reservation(s))) return false;
  const int n = std::min({s.remaining(), opts_.chunk_tokens, budget});
  s.ring_slot = rings_->allocate();
  grow(s, s.computed + n);
  running_.push_back(&s);
  out.push_back(chunk_of(s, n));
  budget -= n;
  return true;
}

std::vector<ScheduledChunk> Scheduler::schedule() {
  for (;;) {
    std::vector<ScheduledChunk> out;
    int budget = opts_.token_budget;
    // 1. Decode: one token for every running sequence whose known tokens are all computed but one.
    for (size_t i = 0; i < running_.size(); ++i) {
      Sequence* s = running_[i];
      if (s->remaining() != 1) continue;
      bool dropped = false;
      while (!can_grow(*s, s->computed + 1)) {
        Sequence* victim = running_.back();
        if (victim == s && running_.size() == 1) {
          const BlockPool* pool = blocks_ ? blocks_ : window_blocks_;
          finish(s, "error", "request " + s->req.id + " needs more KV blocks than the whole pool holds (" +
                                 std::to_string(pool->num_blocks()) + " blocks of " +
                                 std::to_string(pool->block_size()) + " tokens)", Clock::now());
          dropped = true;
          break;
        }
        preempt(victim);
        if (victim == s) {
          dropped = true;
          break;
        }
      }
      if (dropped) break;  // s was the last running sequence: nothing after it
      grow(*s, s->computed + 1);
      out.push_back(chunk_of(*s, 1));
      out.back().decode = !s->generated.empty();
      --budget;
    }
    // Steps 2 and 3 prefill; with decodes in this step, at most mixed_prefill_tokens of them.
    if (!out.empty() && opts_.mixed_prefill_tokens > 0) budget = std::min(budget, opts_.mixed_prefill_tokens);
    // 2. Chunked prefill of running sequences that are still prefilling.
    for (Sequence* s : running_) {
      if (s->remaining() <= 1 || budget <= 0) continue;
      const int n = std::min({s->remaining(), opts_.chunk_tokens, budget});
      if (!can_grow(*s, s->computed + n)) continue;
      grow(*s, s->computed + n);
      out.push_back(chunk_of(*s, n));
      budget -= n;
    }
    // 3. Admission in arrival order, by KV capacity.
    while (!waiting_.empty() && budget > 0) {
      Sequence* s = waiting_.front();
      if (!try_admit(*s, budget, out)) {
        if (running_.empty() && out.empty() && (blocks_ || window_blocks_)) {
          waiting_.pop_front();  // can never fit: fail it rather than wait forever
          finish(s, "error", "request " + s->req.id + " needs more KV blocks than the whole pool holds", Clock::now());
          continue;
        }
        break;
      }
      waiting_.pop_front();
    }
    max_running_ = std::max(max_running_, int(running_.size()));
    if (!out.empty() || done()) return out;
    if (running_.empty()) continue;  // only errors were produced; look again
    // Every running sequence is blocked on KV: free the newest one and try again.
    preempt(running_.back());
  }
}

std::vector<RowDraw> Scheduler::draws(const std::vector<ScheduledChunk>& chunks) {
  // In row order, each from its sequence's generator, so the tokens do not depend on where or on
  // how many threads the rows are then sampled.
  std::vector<RowDraw> d;
  for (const auto& c : chunks) {
    if (!c.needs_logits) continue;
    Sequence* s = all_[c.seq].get();
    d.push_back({s->req.sampling, sample_draw(s->req.sampling, s->rng)});
  }
  return d;
}

void Scheduler::complete(const std::vector<ScheduledChunk>& chunks, const float* logits, int vocab,
                         Clock::time_point now) {
  complete(chunks, logits, vocab, draws(chunks), now);
}

void Scheduler::complete(const std::vector<ScheduledChunk>& chunks, const float* logits, int vocab,
                         const std::vector<RowDraw>& d, Clock::time_point now) {
  const int64_t rows = int64_t(d.size());
  std::vector<int32_t> tokens(static_cast<size_t>(rows));
  auto run = [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) tokens[r] = sample_u(logits + r * vocab, vocab, d[r].params, d[r].u);
  };
  // A row of the 262k vocabulary takes 0.2 ms greedy and 0.2–2 ms sampled (2-core AMD EPYC VM,
  // 2026-12-05): 16 rows are tens of ms a step, against a few ms of device time — so rows of
  // large vocabularies go to a pool.
  if (rows >= 2 && int64_t(vocab) * rows >= (int64_t(1) << 18)) {
    if (!sample_pool_) sample_pool_ = std::make_unique<ThreadPool>(0);
    sample_pool_->parallel_for(rows, 1, run);
  } else {
    run(0, rows);
  }
  complete_tokens(chunks, tokens.data(), now);
}

bool Scheduler::greedy(const std::vector<ScheduledChunk>& chunks) const {
  for (const auto& c : chunks)
    if (c.needs_logits && all_[c.seq]->req.sampling.temperature > 0.0f) return false;
  return true;
}

void Scheduler::complete_tokens(const std::vector<ScheduledChunk>& chunks, const int32_t* tokens,
                                Clock::time_point now) {
  int row = 0;
  for (const auto& c : chunks) {
    Sequence* s = all_[c.seq].get();
    s->computed += c.num_tokens;
    if (!c.needs_logits) continue;
    const int32_t tok = tokens[row++];
    if (s->generated.empty())
      s->prefill_latency = std::chrono::duration<double>(now - s->queued).count();
    else
      s->decode_latencies.push_back(std::chrono::duration<double>(now - s->last_token).count());
    s->last_token = now;
    s->generated.push_back(tok);
    s->tokens.push_back(tok);
    emitted_.push_back({s->index, tok});
    const auto& stop = s->req.stop_token_ids;
    const auto& eos = opts_.eos_token_ids;
    if (std::find(stop.begin(), stop.end(), tok) != stop.end() ||
        (!s->req.ignore_eos && std::find(eos.begin(), eos.end(), tok) != eos.end()))
      finish(s, "stop", "", now);
    else if (int(s->generated.size()) >= s->req.max_new_tokens || int(s->tokens.size()) >= opts_.max_seq_len)
      finish(s, "length", "", now);
  }
}

std::vector<GenerationResult> Scheduler::take_finished() { return std::exchange(finished_, {}); }

std::vector<Scheduler::Emitted> Scheduler::take_emitted() { return std::exchange(emitted_, {}); }

bool Scheduler::cancel(int index, Clock::time_point now) {
  for (auto it = waiting_.begin(); it != waiting_.end(); ++it)
    if ((*it)->index == index) {
      Sequence* s = *it;
      waiting_.erase(it);
      finish(s, "cancelled", "", now);
      return true;
    }
  for (Sequence* s : running_)
    if (s->index == index) {
      finish(s, "cancelled", "", now);  // erases it from running_
      return true;
    }
  return false;
}

// Both paged pools: the full layers' and the sliding layers' window pool.
int Scheduler::kv_blocks_used() const {
  return (blocks_ ? blocks_->num_blocks() - blocks_->num_free() : 0) +
         (window_blocks_ ? window_blocks_->num_blocks() - window_blocks_->num_free() : 0);
}
int Scheduler::kv_blocks_total() const {
  return (blocks_ ? blocks_->num_blocks() : 0) + (window_blocks_ ? window_blocks_->num_blocks() : 0);
}

}  // namespace g4c::runtime

// Engine: loading, the serving loop, scoring and low-level execution (see engine.h).
#include "runtime/engine.h"

#include <algorithm>

#include "models/error.h"
#include "models/safetensors.h"
#include "runtime/plan/reference_builder.h"

namespace g4c::runtime {

Engine::Engine(plan::Plan plan, models::ModelConfig cfg, const EngineOptions& opts)
    : plan_(std::move(plan)), cfg_(std::move(cfg)), opts_(opts) {}

Engine::~Engine() = default;

std::unique_ptr<Engine> Engine::open(const std::filesystem::path& model_dir, std::optional<plan::Plan> plan,
                                     const EngineOptions& options, std::unique_ptr<Backend> backend) {
  models::ModelConfig cfg = models::load_model_config(model_dir);
  auto ckpt = models::Checkpoint::open(model_dir);
  if (!plan) {
    plan::ReferenceOptions ro;
    const int budget = options.token_budget > 0 ? options.token_budget : std::max(512, options.max_sequences);
    ro.max_chunk_tokens = options.reference_max_chunk_tokens > 0 ? options.reference_max_chunk_tokens
                                                                 : std::max(256, std::min(options.max_seq_len, budget));
    ro.max_seq_len = options.max_seq_len;
    ro.kv_shared = options.reference_kv_shared;
    plan = plan::build_reference_plan(cfg, *ckpt, ro);
  }
  plan::verify_plan_matches(*plan, cfg, *ckpt);  // before any weight is read

  EngineOptions o = options;
  const int max_chunk = (*plan)->max_chunk_tokens();
  if (o.max_sequences <= 0) throw Error("engine: max_sequences (batch size) must be positive");
  if (o.max_seq_len <= 1) throw Error("engine: max_seq_len must be at least 2");
  if (o.chunk_tokens <= 0 || o.chunk_tokens > max_chunk) o.chunk_tokens = max_chunk;
  if (o.token_budget <= 0) o.token_budget = std::max(512, o.max_sequences);
  o.token_budget = std::max(o.token_budget, o.max_sequences);

  std::unique_ptr<Engine> e(new Engine(std::move(*plan), std::move(cfg), o));
  bool paged = false;
  for (const auto* l : *e->plan_->kv()) paged |= l->kind() == plan::fb::KvKind::Paged;
  const int block = std::max(1, e->plan_->kv_block_size());
  int blocks = o.kv_blocks > 0 ? o.kv_blocks : o.max_sequences * ((o.max_seq_len + block - 1) / block);
  e->opts_.kv_blocks = blocks;
  // Device backends keep their own copy of the weights (INT4 read raw from the checkpoint): their
  // host store converts a weight only when asked. The CPU backend computes from the store.
  if (backend && std::string(backend->name()) != "cpu")
    e->weights_ = WeightStore::load_lazy(e->plan_, std::shared_ptr<const models::Checkpoint>(std::move(ckpt)));
  else
    e->weights_ = WeightStore::load(e->plan_, *ckpt, o.threads > 0 ? o.threads : 4);
  e->backend_ = backend ? std::move(backend) : make_cpu_backend(o.threads);
  const KvSizes want{o.max_sequences, paged ? blocks : 1, o.token_budget};
  e->backend_->prepare(e->plan_, *e->weights_, want);
  // A budgeted backend may hold fewer sequences / blocks than asked: schedule within what it has.
  const KvSizes got = e->backend_->allocated_kv(want);
  e->opts_.max_sequences = std::min(o.max_sequences, got.ring_slots);
  if (paged) e->opts_.kv_blocks = got.num_blocks;
  e->rings_ = std::make_unique<RingSlots>(got.ring_slots);
  if (paged) e->blocks_ = std::make_unique<BlockPool>(got.num_blocks, block);
  return e;
}

void Engine::forward(const BatchDesc& batch, int first_step, int last_step) {
  if (last_step < 0) last_step = int(plan_->program()->size());
  backend_->execute(batch, first_step, last_step);
}

std::vector<float> Engine::last_logits() const {
  std::vector<float> out;
  backend_->read_value(plan_->logits_value(), &out);
  return out;
}

Engine::SequenceKv Engine::open_sequence() {
  SequenceKv kv;
  kv.ring_slot = rings_->allocate();
  return kv;
}

void Engine::grow_sequence(SequenceKv& kv, int total_tokens) {
  if (blocks_) blocks_->append(kv.blocks, total_tokens);
}

void Engine::close_sequence(SequenceKv& kv) {
  if (kv.ring_slot >= 0) rings_->free(kv.ring_slot);
  kv.ring_slot = -1;
  if (blocks_) blocks_->free(kv.blocks);
}

std::vector<float> Engine::logits(std::span<const int32_t> tokens, int chunk, const LogitSink& sink) {
  const int T = int(tokens.size()), V = cfg_.vocab_size;
  const int max_chunk = plan_->max_chunk_tokens();
  if (chunk <= 0 || chunk > max_chunk) chunk = max_chunk;
  for (int i = 0; i < T; ++i)
    if (tokens[i] < 0 || tokens[i] >= V)
      throw Error("logits: token id " + std::to_string(tokens[i]) + " at position " + std::to_string(i) +
                  " is outside the vocabulary (" + std::to_string(V) + ")");
  std::vector<float> all;
  if (!sink) all.resize(size_t(T) * V);
  SequenceKv kv = open_sequence();
  try {
    for (int start = 0; start < T; start += chunk) {
      const int n = std::min(chunk, T - start);
      grow_sequence(kv, start + n);
      BatchDesc batch;
      batch.add_sequence(tokens.data() + start, n, start, kv.ring_slot, &kv.blocks, /*all_logits=*/true, false);
      forward(batch);
      ++stats_.steps;
      stats_.tokens_computed += n;
      std::vector<float> rows = last_logits();
      if (sink)
        sink(start, n, rows.data());
      else
        std::copy(rows.begin(), rows.end(), all.begin() + size_t(start) * V);
    }
  } catch (...) {
    close_sequence(kv);
    throw;
  }
  close_sequence(kv);
  return all;
}

SchedulerOptions Engine::scheduler_options() const {
  SchedulerOptions so;
  so.max_sequences = opts_.max_sequences;
  so.token_budget = opts_.token_budget;
  so.chunk_tokens = opts_.chunk_tokens;
  so.max_seq_len = opts_.max_seq_len;
  so.eos_token_ids = cfg_.eos_token_ids;
  if (so.eos_token_ids.empty()) so.eos_token_ids = {cfg_.eos_token_id};
  return so;
}

bool Engine::step(Scheduler& sched) {
  auto chunks = sched.schedule();
  if (chunks.empty()) return false;
  BatchDesc batch;
  for (const auto& c : chunks) {
    batch.add_sequence(c.tokens, c.num_tokens, c.position, c.ring_slot, c.blocks, false, c.needs_logits);
    stats_.tokens_computed += c.num_tokens;
  }
  forward(batch);
  ++stats_.steps;
  // Greedy rows: the backend's argmax where it has one; sampled rows: its sampler where it has
  // one (either way only token ids leave the device); else the logits on the host.
  std::vector<int32_t> tokens;
  if (sched.greedy(chunks) && backend_->argmax_rows(plan_->logits_value(), &tokens) >= 0) {
    sched.complete_tokens(chunks, tokens.data(), Scheduler::Clock::now());
  } else if (const auto d = sched.draws(chunks); backend_->sample_rows(plan_->logits_value(), d, &tokens) >= 0) {
    sched.complete_tokens(chunks, tokens.data(), Scheduler::Clock::now());
  } else {
    // (In place on the host backend; the CUDA backend's pinned staging copy; else a copy.)
    const std::span<const float> view = backend_->read_value_view(plan_->logits_value());
    if (view.empty()) backend_->read_value(plan_->logits_value(), &step_logits_);
    sched.complete(chunks, view.empty() ? step_logits_.data() : view.data(), cfg_.vocab_size, d,
                   Scheduler::Clock::now());
  }
  return true;
}

std::string Engine::check_request(const GenerationRequest& r) const {
  if (r.prompt.empty()) return "empty prompt";
  if (int(r.prompt.size()) >= opts_.max_seq_len)
    return "prompt of " + std::to_string(r.prompt.size()) + " tokens does not fit the maximum sequence length " +
           std::to_string(opts_.max_seq_len) + " (with at least one generated token)";
  if (r.max_new_tokens < 0) return "negative max_new_tokens " + std::to_string(r.max_new_tokens);
  for (size_t j = 0; j < r.prompt.size(); ++j)
    if (r.prompt[j] < 0 || r.prompt[j] >= cfg_.vocab_size)
      return "token id " + std::to_string(r.prompt[j]) + " at position " + std::to_string(j) +
             " is outside the vocabulary (" + std::to_string(cfg_.vocab_size) + ")";
  return "";
}

std::vector<GenerationResult> Engine::generate(std::vector<GenerationRequest> requests,
                                               const std::function<void(const GenerationResult&)>& on_finish) {
  Scheduler sched(scheduler_options(), rings_.get(), blocks_.get());
  const int n = int(requests.size());
  std::vector<GenerationResult> results(n);
  auto start = Scheduler::Clock::now();
  for (int i = 0; i < n; ++i) {
    auto& r = requests[i];
    const std::string bad = check_request(r);
    if (!bad.empty()) {
      results[i].id = r.id;
      results[i].index = i;
      results[i].finish_reason = "error";
      results[i].error = "request " + r.id + ": " + bad;
      results[i].prompt_tokens = int(r.prompt.size());
      if (on_finish) on_finish(results[i]);
      continue;
    }
    sched.add(std::move(r), i, start);
  }
  auto collect = [&] {
    for (auto& r : sched.take_finished()) {
      if (on_finish) on_finish(r);
      results[r.index] = std::move(r);
    }
  };
  collect();
  while (!sched.done()) {
    step(sched);
    collect();  // finished requests, and those the scheduler had to fail
  }
  sched.take_emitted();
  stats_.preemptions += sched.total_preemptions();
  return results;
}

void Engine::replace_weight(const std::string& name, std::span<const float> values) {
  const int id = weights_->find(name);
  if (id < 0) throw Error("replace_weight: the plan has no weight " + name);
  weights_->replace(id, values);
  backend_->weight_updated(id);
}

}  // namespace g4c::runtime

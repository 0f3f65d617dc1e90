// Engine: loading, the serving loop, scoring and low-level execution (see engine.h).
#include "runtime/engine.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>

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
    ro.kv_dtype = options.reference_kv_dtype;
    ro.table_dtype = options.reference_table_dtype;
    plan = plan::build_reference_plan(cfg, *ckpt, ro);
  }
  plan::verify_plan_matches(*plan, cfg, *ckpt);  // before any weight is read

  EngineOptions o = options;
  const int max_chunk = (*plan)->max_chunk_tokens();
  if (o.max_sequences < 0) throw Error("engine: max_sequences (batch size) must be positive, or 0 for auto");
  if (o.max_seq_len <= 1) throw Error("engine: max_seq_len must be at least 2");
  if (o.chunk_tokens <= 0 || o.chunk_tokens > max_chunk) o.chunk_tokens = max_chunk;
  const bool cpu = !backend || std::string(backend->name()) == "cpu";
  const bool auto_batch = o.max_sequences == 0;

  // Pools: paged full layers (every block of a sequence), paged sliding layers (the window pool).
  bool paged = false;
  int window = 0;
  const int block = std::max(1, (*plan)->kv_block_size());
  double seq_bytes = 0;  // host KV of one max_seq_len sequence (CPU backend: fp32 or FP8)
  for (const auto* l : *(*plan)->kv()) {
    // K and V of a token as the CPU backend holds them: fp32 (BF16 layers too) or FP8 codes
    // and scales.
    const double row = double(plan::kv_token_bytes(*l, 4));
    if (l->kind() == plan::fb::KvKind::Ring) {
      seq_bytes += row * l->capacity();
    } else if (l->window() > 0) {
      window = std::max(window, l->window());
      seq_bytes += row * block * std::min((o.max_seq_len + block - 1) / block,
                                          BlockPool::window_blocks_for(l->window(), 1, block));
    } else {
      paged = true;
      seq_bytes += row * o.max_seq_len;
    }
  }
  if (auto_batch) {
    if (cpu) {
      // The host holds the KV of max_sequences full-length sequences: a quarter of its memory.
      const double host = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGESIZE));
      const int fit = seq_bytes > 0 ? int(std::min<double>(kMaxAutoBatch, host / 4 / seq_bytes)) : kMaxAutoBatch;
      o.max_sequences = std::max(1, fit);
    } else {
      o.max_sequences = kMaxAutoBatch;  // the device backend fits its pools to the budget
    }
  }
  if (o.token_budget <= 0) o.token_budget = std::max(512, o.max_sequences);
  o.token_budget = std::max(o.token_budget, o.max_sequences);

  std::unique_ptr<Engine> e(new Engine(std::move(*plan), std::move(cfg), o));
  e->window_ = window;
  for (const auto& g : e->cfg_.layers)
    if (g.kind == models::LayerKind::Sliding) e->sliding_window_ = std::max(e->sliding_window_, g.window);
  // The window pool is sized by what decoding sequences hold (the window of one token) plus the
  // prefill peak (the window of its chunk; Scheduler::window_need) of as many sequences as one
  // step's token budget can prefill at once.
  const int seq_blocks = (o.max_seq_len + block - 1) / block;
  const int window_cap = window > 0 ? std::min(seq_blocks, BlockPool::window_blocks_for(window, 1, block)) : 0;
  const int prefill_cap =
      window > 0 ? std::min(seq_blocks, BlockPool::window_blocks_for(window, std::min(o.chunk_tokens, o.token_budget), block))
                 : 0;
  const int prefill_tokens = std::max(1, std::min({o.chunk_tokens, o.token_budget, o.max_seq_len}));
  const int prefilling = std::clamp((o.token_budget + prefill_tokens - 1) / prefill_tokens, 1, o.max_sequences);
  int blocks = o.kv_blocks > 0 ? o.kv_blocks : o.max_sequences * seq_blocks;
  const int window_blocks = window == 0           ? 0
                            : o.window_blocks > 0 ? o.window_blocks
                                                  : o.max_sequences * window_cap + prefilling * (prefill_cap - window_cap);
  e->opts_.kv_blocks = blocks;
  e->opts_.window_blocks = window_blocks;
  // Device backends keep their own copy of the weights (INT4 read raw from the checkpoint): their
  // host store converts a weight only when asked. The CPU backend computes from the store.
  if (backend && std::string(backend->name()) != "cpu")
    e->weights_ = WeightStore::load_lazy(e->plan_, std::shared_ptr<const models::Checkpoint>(std::move(ckpt)));
  else
    e->weights_ = WeightStore::load(e->plan_, *ckpt, o.threads > 0 ? o.threads : 4);
  e->backend_ = backend ? std::move(backend) : make_cpu_backend(o.threads);
  KvSizes want{o.max_sequences, paged || window ? blocks : 1, window_blocks, (o.max_seq_len + block - 1) / block,
               o.token_budget};
  e->backend_->prepare(e->plan_, *e->weights_, want);
  // A budgeted backend may hold fewer sequences / blocks than asked: schedule within what it has.
  const KvSizes got = e->backend_->allocated_kv(want);
  e->opts_.max_sequences = std::min(o.max_sequences, got.ring_slots);
  if (paged) e->opts_.kv_blocks = got.num_blocks;
  if (window) e->opts_.window_blocks = got.window_blocks;
  e->rings_ = std::make_unique<RingSlots>(got.ring_slots);
  if (paged) e->blocks_ = std::make_unique<BlockPool>(got.num_blocks, block);
  if (window) e->window_blocks_ = std::make_unique<BlockPool>(got.window_blocks, block);
  // A prefilling sequence holds the window of its chunk: a small pool takes smaller chunks.
  if (window) e->opts_.chunk_tokens = std::clamp((got.window_blocks - 1) * block - window + 1, 1, e->opts_.chunk_tokens);
  const int chunk_peak = std::min(e->opts_.chunk_tokens, e->opts_.token_budget);

  // Why the batch is what it is.
  const int S = e->opts_.max_sequences;
  std::string pools;
  if (paged) pools += ", full-layer pool " + std::to_string(got.num_blocks) + " blocks of " + std::to_string(block) + " tokens";
  if (window)
    pools += ", window pool " + std::to_string(got.window_blocks) + " blocks of " + std::to_string(block) +
             " tokens (a sequence holds at most " + std::to_string(window_cap) + " while it decodes, " +
             std::to_string(BlockPool::window_blocks_for(window, chunk_peak, block)) + " while it prefills)";
  std::string admission = o.reserve_generation ? "prompt + max_new_tokens" : "known tokens";
  if (!auto_batch)
    e->batch_reason_ = "--batch-size " + std::to_string(options.max_sequences) +
                       (S < options.max_sequences ? ", of which the budget holds " + std::to_string(S) + " ring slots" : "");
  else if (cpu)
    e->batch_reason_ = "auto: " + std::to_string(S) + " = min(" + std::to_string(kMaxAutoBatch) +
                       ", the full-length sequences a quarter of the host memory holds)";
  else
    e->batch_reason_ = "auto: up to " + std::to_string(S) + " sequences" +
                       (S < kMaxAutoBatch ? " (the ring slots the budget holds)" : " (the most decode rows a step takes)") +
                       ", admitted while the KV pools hold their " + admission;
  e->batch_reason_ += pools;
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

void Engine::grow_sequence(SequenceKv& kv, int total_tokens, int first_query) {
  if (window_blocks_) {
    window_blocks_->release_before(kv.window_blocks, first_query - window_ + 1);
    window_blocks_->append(kv.window_blocks, total_tokens);
  }
  if (blocks_) blocks_->append(kv.blocks, total_tokens);
}

void Engine::close_sequence(SequenceKv& kv) {
  if (kv.ring_slot >= 0) rings_->free(kv.ring_slot);
  kv.ring_slot = -1;
  if (blocks_) blocks_->free(kv.blocks);
  if (window_blocks_) window_blocks_->free(kv.window_blocks);
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
      grow_sequence(kv, start + n, start);
      BatchDesc batch;
      batch.add_sequence(tokens.data() + start, n, start, kv.ring_slot, &kv.blocks, /*all_logits=*/true, false,
                         &kv.window_blocks);
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
  so.mixed_prefill_tokens = opts_.mixed_prefill_tokens;
  so.max_seq_len = opts_.max_seq_len;
  so.eos_token_ids = cfg_.eos_token_ids;
  if (so.eos_token_ids.empty()) so.eos_token_ids = {cfg_.eos_token_id};
  so.window = window_;
  so.reserve_generation = opts_.reserve_generation;
  return so;
}

bool Engine::step(Scheduler& sched) {
  const auto t0 = Scheduler::Clock::now();
  auto chunks = sched.schedule();
  if (chunks.empty()) return false;
  const bool pure_decode =
      std::all_of(chunks.begin(), chunks.end(), [](const ScheduledChunk& c) { return c.decode; });
  int64_t keys = 0, window_keys = 0;
  if (pure_decode)
    for (const auto& c : chunks) {
      keys += c.position + 1;
      window_keys += sliding_window_ > 0 ? std::min(c.position + 1, sliding_window_) : c.position + 1;
    }
  BatchDesc batch;
  for (const auto& c : chunks) {
    batch.add_sequence(c.tokens, c.num_tokens, c.position, c.ring_slot, c.blocks, false, c.needs_logits,
                       c.window_blocks);
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
  if (pure_decode)
    stats_.decode_by_rows[int(chunks.size())] +=
        {1, std::chrono::duration<double>(Scheduler::Clock::now() - t0).count(), keys, window_keys};
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
  Scheduler sched(scheduler_options(), rings_.get(), blocks_.get(), window_blocks_.get());
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
  stats_.max_running = std::max(stats_.max_running, sched.max_running());
  return results;
}

void Engine::replace_weight(const std::string& name, std::span<const float> values) {
  replace_weights({&name, 1}, {&values, 1});
}

namespace {

// The store ids of `names` (all found before anything changes); `what` names the caller.
std::vector<int> weight_ids(const WeightStore& store, std::span<const std::string> names, const char* what) {
  std::vector<int> ids;
  for (const std::string& name : names) {
    const int id = store.find(name);
    if (id < 0) throw Error(std::string(what) + ": the plan has no weight " + name);
    ids.push_back(id);
  }
  return ids;
}

}  // namespace

void Engine::replace_weights(std::span<const std::string> names, std::span<const std::span<const float>> values) {
  if (names.size() != values.size())
    throw Error("replace_weights: " + std::to_string(names.size()) + " names for " + std::to_string(values.size()) +
                " value arrays");
  const std::vector<int> ids = weight_ids(*weights_, names, "replace_weight");
  for (size_t i = 0; i < ids.size(); ++i) weights_->check_replacement(ids[i], values[i].size());  // all before any
  for (size_t i = 0; i < ids.size(); ++i) weights_->replace(ids[i], values[i]);
  backend_->weights_updated(ids);
}

void Engine::rewrite_weights(std::span<const std::string> names, const WeightFill& fill) {
  const std::vector<int> ids = weight_ids(*weights_, names, "rewrite_weights");
  for (size_t i = 0; i < ids.size(); ++i) {
    try {
      fill(i, weights_->overwrite(ids[i]));
    } catch (...) {  // the weights written so far (and the one in progress) are new to the backend
      backend_->weights_updated(std::span<const int>(ids).first(i + 1));
      throw;
    }
  }
  backend_->weights_updated(ids);
}

bool Engine::release_host_weights(std::span<const std::string> names) {
  if (!backend_->keeps_weight_copies()) return false;
  for (const int id : weight_ids(*weights_, names, "release_host_weights")) weights_->release(id);
  return true;
}

}  // namespace g4c::runtime

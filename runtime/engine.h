// The Engine: one loaded model (plan + checkpoint + weights + backend + KV managers) and
// the entry points every consumer uses.
//
//   auto engine = Engine::open("models/gemma4-tiny", std::nullopt, {.max_sequences = 8});
//
//  - Serving (`g4c run`, Python generate): generate(requests) runs the continuous-batching
//    Scheduler to completion; results come back in input order, each also reported through
//    `on_finish` as soon as it is done.
//  - Scoring (`g4c eval`, Python logits): logits(token_ids, chunk) feeds one sequence through
//    the KV cache in chunks (eval uses 128) and returns the softcapped fp32 logits of EVERY
//    position [T, vocab] (or streams them to a sink chunk by chunk). Log-softmax is the
//    caller's (fp32).
//  - GPTQ / layer-by-layer execution: open_sequence() + forward(batch, first, last) run any
//    step range of the program (plan().layer_steps(i) gives layer i's range); values persist
//    between calls and are read/written through backend().read_value/write_value (the values
//    at a layer boundary are "h" and "a" — residual stream and its input norm);
//    backend().set_linear_observer() sees the input of every Linear step (plan step index →
//    plan()->program()->Get(i)->label() and ->weights()); replace_weight() swaps a weight's data
//    (e.g. fake-quantized) in place for all later execution.
//  - CUDA: pass another Backend to open(); the scheduler, KV managers and plan are the same.
//
// An Engine is single-threaded from the caller's side (the backend may use threads inside).
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "models/config.h"
#include "runtime/backend.h"
#include "runtime/kv.h"
#include "runtime/plan/plan.h"
#include "runtime/scheduler.h"
#include "runtime/weights.h"

namespace g4c::models {
class Checkpoint;
}

namespace g4c::runtime {

// --batch-size 0: as many sequences as the KV holds, up to this many decode rows a step.
inline constexpr int kMaxAutoBatch = 64;

struct EngineOptions {
  // Running sequences at once (= --batch-size); ring slots. 0: chosen by open() (auto_batch):
  // on a device with a memory budget, kMaxAutoBatch ring slots as far as the pools the budget
  // leaves hold them, and admission by KV capacity decides how many of them run; on the CPU,
  // as many full-length sequences as a quarter of the host memory holds, up to kMaxAutoBatch.
  int max_sequences = 0;
  int max_seq_len = 2048;  // longest prompt + generation
  int token_budget = 0;    // tokens per step; 0: max(512, max_sequences)
  int chunk_tokens = 0;    // prefill tokens per sequence per step; 0: plan max_chunk_tokens
  int mixed_prefill_tokens = 0;  // prefill tokens of a step that also decodes; 0: token_budget
  int kv_blocks = 0;       // paged pool blocks; 0: enough for max_sequences full-length sequences
  // Window pool blocks (paged sliding layers); 0: max_sequences x the blocks one sequence holds.
  int window_blocks = 0;
  bool reserve_generation = true;  // SchedulerOptions::reserve_generation
  int threads = 0;         // CPU threads; 0: hardware concurrency
  // Only when open() builds the reference plan: its max_chunk_tokens (ring capacity W-1+this).
  // 0: max(256, min(max_seq_len, token budget)), so one step can prefill a whole calibration
  // sequence when the budget allows it.
  int reference_max_chunk_tokens = 0;
  // Only when open() builds the reference plan: its KV storage type (ReferenceOptions::kv_dtype:
  // auto = F32, bf16, fp8).
  std::string reference_kv_dtype = "auto";
  // Only when open() builds the reference plan: its table storage (ReferenceOptions::table_dtype).
  std::string reference_table_dtype = "bf16";
};

// Steps whose every row decodes one token (no prompt tokens), for one row count: how many, their
// wall time (schedule → tokens back on the host) and the keys their rows attend to: Σ (position
// + 1) in a full-attention layer, and the same capped at the sliding window in a sliding one.
struct DecodeBatchStats {
  int64_t steps = 0;
  double seconds = 0;
  int64_t keys = 0;
  int64_t window_keys = 0;
  DecodeBatchStats& operator+=(const DecodeBatchStats& o) {
    steps += o.steps;
    seconds += o.seconds;
    keys += o.keys;
    window_keys += o.window_keys;
    return *this;
  }
  DecodeBatchStats& operator-=(const DecodeBatchStats& o) {
    steps -= o.steps;
    seconds -= o.seconds;
    keys -= o.keys;
    window_keys -= o.window_keys;
    return *this;
  }
};

struct RunStats {
  int steps = 0;
  int preemptions = 0;
  int max_running = 0;          // most sequences running in one step
  int64_t tokens_computed = 0;  // tokens fed through the model (prefill + decode + recompute)
  std::map<int, DecodeBatchStats> decode_by_rows;  // pure decode steps by their row count
};

class Engine {
 public:
  // Loads config + checkpoint from model_dir; uses `plan` or, when absent, builds the reference
  // plan (runtime/plan/reference_builder.h); verifies the plan against the checkpoint BEFORE
  // loading any weight; backend defaults to the CPU backend.
  static std::unique_ptr<Engine> open(const std::filesystem::path& model_dir, std::optional<plan::Plan> plan,
                                      const EngineOptions& options, std::unique_ptr<Backend> backend = nullptr);
  ~Engine();

  const models::ModelConfig& config() const { return cfg_; }
  const plan::Plan& plan() const { return plan_; }
  const EngineOptions& options() const { return opts_; }
  WeightStore& weights() { return *weights_; }
  Backend& backend() { return *backend_; }
  BlockPool* block_pool() { return blocks_.get(); }  // null without paged full layers
  BlockPool* window_pool() { return window_blocks_.get(); }  // null without paged sliding layers
  // Why max_sequences is what it is (auto or asked, and what the KV pools hold), for summaries.
  const std::string& batch_reason() const { return batch_reason_; }
  RingSlots& ring_slots() { return *rings_; }
  int vocab_size() const { return cfg_.vocab_size; }
  const RunStats& stats() const { return stats_; }

  // Serving: runs every request to completion (results in input order).
  std::vector<GenerationResult> generate(std::vector<GenerationRequest> requests,
                                         const std::function<void(const GenerationResult&)>& on_finish = {});

  // The scheduler options of this engine (batch, budget, chunk, length, EOS ids), and one step
  // of a scheduler over this engine's ring slots and block pool: schedule, run, complete.
  // False when the step had nothing to run. generate() is a loop of these; a server
  // (runtime/engine_loop.h) interleaves them with arrivals and cancellations.
  SchedulerOptions scheduler_options() const;
  bool step(Scheduler& sched);
  // Why `request` cannot be served by this engine ("" when it can): empty prompt, prompt too
  // long for max_seq_len, negative max_new_tokens, token id outside the vocabulary.
  std::string check_request(const GenerationRequest& request) const;

  // Scoring: logits of every position [T, vocab], fed in chunks of `chunk` tokens (0: plan
  // max). With a sink, rows are handed over chunk by chunk and the return value is empty.
  using LogitSink = std::function<void(int first_row, int rows, const float* logits)>;
  std::vector<float> logits(std::span<const int32_t> tokens, int chunk = 0, const LogitSink& sink = {});

  // Low level: KV of one sequence outside the scheduler, and running a step range.
  struct SequenceKv {
    int ring_slot = -1;
    BlockTable blocks;
    BlockTable window_blocks;  // paged sliding layers (window pool)
  };
  SequenceKv open_sequence();
  // Grows kv to hold `total_tokens` (throws when a pool is exhausted). With first_query, the
  // position of the first token the next step feeds, window blocks no query from there on sees
  // go back to the window pool first.
  void grow_sequence(SequenceKv& kv, int total_tokens, int first_query = 0);
  void close_sequence(SequenceKv& kv);
  void forward(const BatchDesc& batch, int first_step = 0, int last_step = -1);
  // Logits rows of the last forward() (R × vocab).
  std::vector<float> last_logits() const;

  // Replaces weight `name` (plan weight name, e.g. "layers.0.mlp.up_proj.weight").
  void replace_weight(const std::string& name, std::span<const float> values);
  // Replaces several weights at once: names[i] gets values[i]; the backend rebuilds each of its
  // device buffers once, however many of the weights it packs together.
  void replace_weights(std::span<const std::string> names, std::span<const std::span<const float>> values);
  // The same writing the new values in place: fill(i, out) writes names[i]'s values into its own
  // array `out` in the weight store (no copies, no allocation); the backend then rebuilds once.
  using WeightFill = std::function<void(size_t i, std::span<float> out)>;
  void rewrite_weights(std::span<const std::string> names, const WeightFill& fill);
  // Frees the host values of `names` in the weight store when the backend keeps its own copies
  // (Backend::keeps_weight_copies: GPTQ's finished layers on the GPU); false (nothing freed)
  // when the backend computes from the store.
  bool release_host_weights(std::span<const std::string> names);

 private:
  Engine(plan::Plan plan, models::ModelConfig cfg, const EngineOptions& opts);
  plan::Plan plan_;
  models::ModelConfig cfg_;
  EngineOptions opts_;
  std::unique_ptr<WeightStore> weights_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<RingSlots> rings_;
  std::unique_ptr<BlockPool> blocks_;
  std::unique_ptr<BlockPool> window_blocks_;
  int window_ = 0;  // W of the paged sliding layers
  int sliding_window_ = 0;  // W of the sliding layers (config), 0: none
  std::string batch_reason_;
  RunStats stats_;
  // The logits rows of sampled steps where the backend has no view of them, reused: a fresh
  // vector of R × 262k floats each step costs its page faults again (≈ 1 ms at 6 rows).
  std::vector<float> step_logits_;
};

}  // namespace g4c::runtime

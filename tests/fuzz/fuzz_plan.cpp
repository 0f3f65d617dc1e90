// libFuzzer target: the plan loader (plan::Plan::from_bytes: flatbuffers Verifier + the
// semantic checks of runtime/plan/plan.cpp) on arbitrary bytes, then what the runtime does
// with a plan that loads: describe() (g4c inspect), verify_plan_matches() against the tiny
// model, and — when it matches — one prefill step of two sequences and one decode step on the
// CPU backend. The invariant under test: a plan that loads never makes the runtime read or
// write out of bounds (ASan) or overflow (UBSan); it runs or throws g4c::Error.
//
// Seeds: the tiny model's reference plan and codegen plan (tests/fuzz/corpus/plan/). Mutations
// of the program, values and KV tables keep the checkpoint fingerprint and reach execution.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "models/config.h"
#include "models/error.h"
#include "models/safetensors.h"
#include "runtime/backend.h"
#include "runtime/plan/plan.h"
#include "runtime/weights.h"
#include "tests/fuzz/fuzz_common.h"

using namespace g4c;

namespace {

struct Tiny {
  models::ModelConfig cfg;
  std::unique_ptr<models::Checkpoint> ckpt;
  // The last weight store loaded and the weight table it was loaded for: mutations mostly keep
  // the table, and loading 28 MB of weights per input would make the target 100x slower.
  std::string weights_key;
  std::unique_ptr<runtime::WeightStore> weights;
};

Tiny& tiny() {
  static Tiny t = [] {
    Tiny x;
    const std::string dir = fuzz::source_dir() + "/models/gemma4-tiny";
    x.cfg = models::load_model_config(dir);
    x.ckpt = models::Checkpoint::open(dir);
    return x;
  }();
  return t;
}

std::string weights_key(const plan::Plan& p) {
  std::string k;
  for (const auto* w : *p->weights()) {
    k += w->name()->str() + '/' + std::to_string(int(w->format())) + '/' + std::to_string(int(w->dtype())) + '/' +
         (w->checkpoint_key() ? w->checkpoint_key()->str() : std::string()) + '/';
    for (auto d : *w->shape()) k += std::to_string(d) + ',';
    k += ';';
  }
  return k;
}

void run_steps(const plan::Plan& p, Tiny& t) {
  const std::string key = weights_key(p);
  if (key != t.weights_key || !t.weights) {
    t.weights.reset();
    t.weights = runtime::WeightStore::load(p, *t.ckpt, 1);
    t.weights_key = key;
  }
  auto backend = runtime::make_cpu_backend(1);
  const int block = std::max(1, p->kv_block_size());
  backend->prepare(p, *t.weights, runtime::KvSizes{2, 2 * ((16 + block - 1) / block), 16});
  // Block tables of two sequences, 16 positions each (blocks 0.. and the next ones).
  std::vector<int32_t> b0, b1;
  for (int i = 0; i < (16 + block - 1) / block; ++i) {
    b0.push_back(i);
    b1.push_back(i + (16 + block - 1) / block);
  }
  const int32_t prompt0[3] = {2, 818, 2050}, prompt1[2] = {2, 7};
  const int chunk = std::min(3, p->max_chunk_tokens());
  runtime::BatchDesc prefill;
  prefill.add_sequence(prompt0, chunk, 0, 0, &b0, false, true);
  prefill.add_sequence(prompt1, std::min(2, chunk), 0, 1, &b1, false, true);
  backend->execute(prefill, 0, int(p->program()->size()));
  std::vector<float> logits;
  backend->read_value(p->logits_value(), &logits);
  const int32_t next[1] = {5};
  runtime::BatchDesc decode;
  decode.add_sequence(next, 1, chunk, 0, &b0, false, true);
  backend->execute(decode, 0, int(p->program()->size()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Tiny& t = tiny();
  try {
    const plan::Plan p = plan::Plan::from_bytes(std::vector<uint8_t>(data, data + size), "fuzz.g4p");
    (void)plan::describe(p, true);
    plan::verify_plan_matches(p, t.cfg, *t.ckpt);
    run_steps(p, t);
  } catch (const Error&) {
  }
  return 0;
}

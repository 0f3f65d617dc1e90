// Plan loading, verification and printing (see plan.h).
#include "runtime/plan/plan.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "models/config.h"
#include "models/error.h"
#include "models/input_file.h"
#include "models/safetensors.h"

namespace g4c::plan {
namespace {

std::string fmt(const char* f, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, f, args...);
  return buf;
}

// The flatbuffers verifier checks a vector's length field and bounds, not that 8-byte elements
// are 8-byte aligned (a builder always aligns them); a plan whose [long] / [ulong] data is
// misaligned is corrupt, and reading it would be undefined behaviour.
void check_alignment(const fb::Plan& p, const std::string& name) {
  auto aligned = [](const auto* v) { return !v || reinterpret_cast<uintptr_t>(v->Data()) % 8 == 0; };
  bool ok = true;
  if (p.weights())
    for (const auto* w : *p.weights()) ok &= aligned(w->shape());
  if (p.buckets())
    for (const auto* b : *p.buckets()) ok &= aligned(b->arena_offsets());
  if (!ok) throw Error(name + ": plan file is corrupt (misaligned 64-bit vector data)");
}

// Every id a step names must exist: a plan that passes this never indexes out of range.
// No deprecated field may be set: a plan that stores K=V once (KvLayer.kv_shared, Attrs.k_from_v)
// has no kernel here.
void check_ids(const fb::Plan& p, const std::string& name) {
  auto bad = [&](const std::string& what) { throw Error(name + ": inconsistent plan: " + what); };
  auto deprecated = [&](const std::string& what) {
    throw Error(name + ": plan sets the deprecated " + what +
                ": K=V stored once is not supported, every layer stores K and V (recompile the plan with g4c compile)");
  };
  if (!p.model() || !p.model()->layers() || !p.weights() || !p.values() || !p.program() || !p.kv())
    bad("missing model, weights, values, kv or program");
  const int nv = int(p.values()->size()), nw = int(p.weights()->size()), nk = int(p.kv()->size());
  if (int(p.model()->layers()->size()) != p.model()->num_layers()) bad("layer count differs from layers table");
  for (int i = 0; i < nw; ++i) {
    const auto* w = p.weights()->Get(i);
    if (!w->name() || !w->shape()) bad(fmt("weight %d has no name or shape", i));
    if (w->format() == fb::WeightFormat::Int4 && !w->int4()) bad("INT4 weight " + w->name()->str() + " without layout");
    if (w->format() != fb::WeightFormat::Int4 && !w->checkpoint_key()) bad("weight " + w->name()->str() + " without key");
    if (w->format() == fb::WeightFormat::Int8Rows && w->shape()->size() != 2)
      bad("INT8 table " + w->name()->str() + " is not two-dimensional");
  }
  for (int i = 0; i < nv; ++i)
    if (p.values()->Get(i)->cols() <= 0) bad(fmt("value %d has %d columns", i, p.values()->Get(i)->cols()));
  for (int i = 0; i < nk; ++i) {
    const auto* k = p.kv()->Get(i);
    if (k->kv_shared()) deprecated(fmt("KvLayer.kv_shared of kv %d (layer %d)", i, k->layer()));
    if (k->num_kv_heads() <= 0 || k->head_dim() <= 0) bad(fmt("kv %d has no heads", i));
    if (k->kind() == fb::KvKind::Ring && k->capacity() < k->window() - 1 + p.max_chunk_tokens())
      bad(fmt("ring kv %d: capacity %d < window - 1 + max_chunk_tokens", i, k->capacity()));
    if (k->kind() == fb::KvKind::Paged && k->block_size() <= 0) bad(fmt("paged kv %d has block size 0", i));
    if (k->dtype() != fb::DType::F32 && k->dtype() != fb::DType::BF16 && k->dtype() != fb::DType::F8E4M3)
      bad(fmt("kv %d stores %s elements (F32, BF16 or F8E4M3)", i, fb::EnumNameDType(k->dtype())));
  }
  for (int s = 0; s < int(p.program()->size()); ++s) {
    const auto* st = p.program()->Get(s);
    if (uint16_t(st->kernel()) > uint16_t(fb::KernelId::MAX)) bad(fmt("step %d: unknown kernel id %d", s, int(st->kernel())));
    if (!st->attrs()) bad(fmt("step %d has no attrs", s));
    if (st->attrs()->k_from_v()) deprecated(fmt("Attrs.k_from_v of step %d", s));
    if (st->inputs())
      for (int v : *st->inputs())
        if (v < 0 || v >= nv) bad(fmt("step %d input value %d out of range", s, v));
    if (st->outputs())
      for (int v : *st->outputs())
        if (v < 0 || v >= nv) bad(fmt("step %d output value %d out of range", s, v));
    if (st->weights())
      for (int w : *st->weights())
        if (w < -1 || w >= nw) bad(fmt("step %d weight %d out of range", s, w));
    int kvl = st->attrs()->kv_layer();
    bool uses_kv = st->kernel() == fb::KernelId::KvWrite || st->kernel() == fb::KernelId::QkNormRopeKvWrite ||
                   st->kernel() == fb::KernelId::Attention;
    if (uses_kv && (kvl < 0 || kvl >= nk)) bad(fmt("step %d kv_layer %d out of range", s, kvl));
  }
  if (p.logits_value() < 0 || p.logits_value() >= nv) bad("logits_value out of range");
  if (p.max_chunk_tokens() <= 0) bad("max_chunk_tokens must be positive");
}

// Arity and shape agreement of every step with KERNELS.md, so that no backend indexes a
// value or weight out of its bounds on a (corrupt or hand-made) plan that passes verification.
void check_shapes(const fb::Plan& p, const std::string& name) {
  auto bad = [&](int s, const std::string& what) {
    throw Error(name + ": inconsistent plan: step " + std::to_string(s) + " (" +
                fb::EnumNameKernelId(p.program()->Get(s)->kernel()) + "): " + what);
  };
  auto cols = [&](int v) { return int64_t(p.values()->Get(v)->cols()); };
  auto wshape = [&](int w) -> std::vector<int64_t> {
    if (w < 0) return {};
    const auto* sh = p.weights()->Get(w)->shape();
    return {sh->begin(), sh->end()};
  };
  auto numel = [&](int w) {
    int64_t n = 1;
    for (auto d : wshape(w)) n *= d;
    return w < 0 ? int64_t(0) : n;
  };
  for (int s = 0; s < int(p.program()->size()); ++s) {
    const auto* st = p.program()->Get(s);
    const auto* a = st->attrs();
    const int ni = st->inputs() ? int(st->inputs()->size()) : 0;
    const int no = st->outputs() ? int(st->outputs()->size()) : 0;
    const int nw = st->weights() ? int(st->weights()->size()) : 0;
    auto in = [&](int i) { return st->inputs()->Get(i); };
    auto out = [&](int i) { return st->outputs()->Get(i); };
    auto w = [&](int i) { return i < nw ? st->weights()->Get(i) : -1; };
    auto need = [&](int i_, int o_, int w_) {
      if (ni < i_ || no < o_ || nw < w_)
        bad(s, "needs " + std::to_string(i_) + " inputs, " + std::to_string(o_) + " outputs, " + std::to_string(w_) + " weights");
    };
    auto same_cols = [&](int x, int y) {
      if (cols(x) != cols(y)) bad(s, "values of different widths");
    };
    auto heads_ok = [&](int64_t c, int d) {
      if (d <= 0 || c % d != 0) bad(s, "width " + std::to_string(c) + " is not a multiple of head_dim " + std::to_string(d));
    };
    auto kv_row = [&]() {
      const auto* k = p.kv()->Get(a->kv_layer());
      return int64_t(k->num_kv_heads()) * k->head_dim();
    };
    // Row spaces: SelectLogitRows / LmHead go from Tokens to LogitRows; every other kernel
    // keeps one row space, and the per-token kernels (positions, KV) need Tokens.
    auto rows = [&](int v) { return p.values()->Get(v)->rows(); };
    const bool to_logit_rows = st->kernel() == fb::KernelId::SelectLogitRows || st->kernel() == fb::KernelId::LmHead;
    const bool per_token = st->kernel() == fb::KernelId::Embed || st->kernel() == fb::KernelId::Rope ||
                           st->kernel() == fb::KernelId::KvWrite || st->kernel() == fb::KernelId::QkNormRopeKvWrite ||
                           st->kernel() == fb::KernelId::Attention;
    for (int i = 0; i < ni; ++i) {
      const auto want = to_logit_rows || per_token ? fb::RowSpace::Tokens : (ni ? rows(in(0)) : rows(out(0)));
      if (rows(in(i)) != want) bad(s, "input " + std::to_string(i) + " is in the wrong row space");
    }
    for (int i = 0; i < no; ++i) {
      const auto want = to_logit_rows ? fb::RowSpace::LogitRows
                        : per_token   ? fb::RowSpace::Tokens
                                      : (ni ? rows(in(0)) : rows(out(0)));
      if (rows(out(i)) != want) bad(s, "output " + std::to_string(i) + " is in the wrong row space");
    }
    switch (st->kernel()) {
      case fb::KernelId::Embed: {
        need(0, 1, 1);
        auto sh = wshape(w(0));
        if (sh.size() != 2 || sh[1] != cols(out(0))) bad(s, "embedding is not [vocab, width of the output]");
        break;
      }
      case fb::KernelId::RmsNorm:
        need(1, 1, 0);
        same_cols(in(0), out(0));
        if (a->norm_dim() <= 0 || cols(in(0)) % a->norm_dim()) bad(s, "norm_dim does not divide the width");
        if (w(0) >= 0 && numel(w(0)) != a->norm_dim()) bad(s, "norm weight has not norm_dim elements");
        break;
      case fb::KernelId::Linear: {
        const bool gate = a->epilogue() == fb::Epilogue::GeluTanhGateUp, res = a->epilogue() == fb::Epilogue::ResidualAdd;
        need(res ? 2 : 1, 1, gate ? 2 : 1);
        for (int i = 0; i < (gate ? 2 : 1); ++i) {
          auto sh = wshape(w(i));
          if (sh.size() != 2 || sh[0] != cols(out(0)) || sh[1] != cols(in(0))) bad(s, "weight is not [out width, in width]");
        }
        if (res) same_cols(in(1), out(0));
        if (p.values()->Get(in(0))->rows() != p.values()->Get(out(0))->rows()) bad(s, "input and output rows differ");
        break;
      }
      case fb::KernelId::Rope:
        need(1, 1, 0);
        same_cols(in(0), out(0));
        heads_ok(cols(in(0)), a->head_dim());
        if (a->rotary_pairs() < 0 || 2 * a->rotary_pairs() > a->head_dim()) bad(s, "rotary_pairs > head_dim/2");
        break;
      case fb::KernelId::KvWrite:
        need(2, 0, 0);
        if (cols(in(0)) != kv_row() || cols(in(1)) != kv_row()) bad(s, "k/v width differs from the KV layer");
        break;
      case fb::KernelId::QkNormRopeKvWrite:
        need(3, 1, 2);
        if (a->num_q_heads() <= 0 || cols(in(0)) != int64_t(a->num_q_heads()) * a->head_dim()) bad(s, "q width");
        same_cols(in(0), out(0));
        if (cols(in(1)) != kv_row() || cols(in(2)) != kv_row()) bad(s, "k/v width differs from the KV layer");
        if (numel(w(0)) != a->head_dim() || numel(w(1)) != a->head_dim()) bad(s, "q/k norm weights are not head_dim");
        if (a->rotary_pairs() < 0 || 2 * a->rotary_pairs() > a->head_dim()) bad(s, "rotary_pairs > head_dim/2");
        break;
      case fb::KernelId::Attention: {
        need(1, 1, 0);
        const auto* k = p.kv()->Get(a->kv_layer());
        if (a->num_kv_heads() != k->num_kv_heads() || a->head_dim() != k->head_dim() || a->num_kv_heads() <= 0 ||
            a->num_q_heads() % a->num_kv_heads() != 0)
          bad(s, "heads do not match the KV layer");
        if (cols(in(0)) != int64_t(a->num_q_heads()) * a->head_dim()) bad(s, "q width");
        same_cols(in(0), out(0));
        if (k->kind() == fb::KvKind::Ring && (a->window() <= 0 || a->window() > k->capacity()))
          bad(s, "a ring KV layer needs a window within its capacity");
        if (k->kind() == fb::KvKind::Paged && k->window() > 0 && a->window() != k->window())
          bad(s, "a paged sliding KV layer releases blocks by its window: the attention must use the same window");
        break;
      }
      case fb::KernelId::Add:
      case fb::KernelId::Mul:
        need(2, 1, 0);
        same_cols(in(0), in(1));
        same_cols(in(0), out(0));
        break;
      case fb::KernelId::Scale:
      case fb::KernelId::GeluTanh:
      case fb::KernelId::Softcap:
        need(1, 1, 0);
        same_cols(in(0), out(0));
        if (st->kernel() == fb::KernelId::Scale && w(0) >= 0 && numel(w(0)) != 1) bad(s, "scale weight is not a scalar");
        if (st->kernel() == fb::KernelId::Softcap && !(a->softcap() > 0)) bad(s, "softcap must be > 0");
        break;
      case fb::KernelId::SelectLogitRows:
        need(1, 1, 0);
        same_cols(in(0), out(0));
        break;
      case fb::KernelId::PostNormResidual:
        need(2, 1, 1);
        same_cols(in(0), in(1));
        same_cols(in(0), out(0));
        if (numel(w(0)) != cols(in(0))) bad(s, "post norm weight width");
        if (w(1) >= 0 && numel(w(1)) != 1) bad(s, "layer scalar is not a scalar");
        if (no > 1 && (w(2) < 0 || numel(w(2)) != cols(in(0)))) bad(s, "second output needs a next-norm weight");
        if (no > 1) same_cols(in(0), out(1));
        break;
      case fb::KernelId::LmHead: {
        need(1, 1, 2);
        auto sh = wshape(w(1));
        if (numel(w(0)) != cols(in(0)) || sh.size() != 2 || sh[1] != cols(in(0)) || sh[0] != cols(out(0)))
          bad(s, "final norm / embedding do not match the hidden and vocab widths");
        break;
      }
      case fb::KernelId::Argmax:
        need(1, 1, 0);
        break;
    }
  }
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace

Plan Plan::from_bytes(std::vector<uint8_t> bytes, const std::string& name) {
  if (bytes.size() < 8) throw Error(name + ": not a g4c plan (file of " + std::to_string(bytes.size()) + " bytes)");
  if (!fb::PlanBufferHasIdentifier(bytes.data()))
    throw Error(name + ": not a g4c plan (file identifier is not \"G4CP\")");
  flatbuffers::Verifier verifier(bytes.data(), bytes.size(), /*max_depth=*/64, /*max_tables=*/10'000'000);
  if (!fb::VerifyPlanBuffer(verifier))
    throw Error(name + ": plan file is truncated or corrupt (flatbuffers verification failed)");
  const fb::Plan* root = fb::GetPlan(bytes.data());
  if (root->format_version() != kPlanFormatVersion)
    throw Error(name + ": plan format version " + std::to_string(root->format_version()) + ", this g4c reads version " +
                std::to_string(kPlanFormatVersion) + " (recompile the plan)");
  check_alignment(*root, name);
  check_ids(*root, name);
  check_shapes(*root, name);
  Plan p;
  p.bytes_ = std::move(bytes);
  p.name_ = name;
  return p;
}

Plan Plan::load_file(const std::filesystem::path& path) {
  // A plan holds no weights: the 12B plan is under 1 MB, so 256 MiB bounds a wrong file.
  const std::string text = models::read_regular_file(path, "plan file", uint64_t(256) << 20);
  return from_bytes(std::vector<uint8_t>(text.begin(), text.end()), path.string());
}

void Plan::save(const std::filesystem::path& path) const {
  std::ofstream out(path, std::ios::binary);
  if (!out) throw Error(path.string() + ": cannot open plan file for writing");
  out.write(reinterpret_cast<const char*>(bytes_.data()), std::streamsize(bytes_.size()));
  out.close();
  if (!out) throw Error(path.string() + ": cannot write plan file (write error)");
}

int Plan::find_weight(const std::string& n) const {
  const auto* ws = root().weights();
  for (int i = 0; i < int(ws->size()); ++i)
    if (ws->Get(i)->name()->str() == n) return i;
  return -1;
}

int Plan::find_value(const std::string& n) const {
  const auto* vs = root().values();
  for (int i = 0; i < int(vs->size()); ++i)
    if (vs->Get(i)->name() && vs->Get(i)->name()->str() == n) return i;
  return -1;
}

std::pair<int, int> Plan::layer_steps(int layer) const {
  int first = -1, last = -1;
  const auto* prog = root().program();
  for (int s = 0; s < int(prog->size()); ++s)
    if (prog->Get(s)->layer() == layer) {
      if (first < 0) first = s;
      last = s + 1;
    }
  if (first < 0) throw Error(name_ + ": no steps for layer " + std::to_string(layer));
  return {first, last};
}

uint64_t checkpoint_fingerprint(const models::ModelConfig& cfg, const models::Checkpoint& ckpt, std::string* first_line) {
  std::ostringstream head;
  head << cfg.model_type << " H=" << cfg.hidden_size << " L=" << cfg.num_layers << " Hq=" << cfg.num_q_heads
       << " FFN=" << cfg.intermediate_size << " V=" << cfg.vocab_size << " W=" << cfg.sliding_window;
  std::ostringstream all;
  all << head.str() << "\n";
  for (const auto& l : cfg.layers)
    all << int(l.kind) << ' ' << l.num_kv_heads << ' ' << l.head_dim << ' ' << l.k_eq_v << ' ' << l.window << ' '
        << l.rope.theta << ' ' << l.rotary_pairs() << '\n';
  for (const auto& n : ckpt.names()) {
    const auto& t = ckpt.info(n);
    all << n << ' ' << dtype_name(t.dtype);
    for (auto d : t.shape) all << ' ' << d;
    all << '\n';
  }
  if (first_line) *first_line = head.str();
  return fnv1a(all.str());
}

void verify_plan_matches(const Plan& plan, const models::ModelConfig& cfg, const models::Checkpoint& ckpt) {
  const std::string where = plan.name() + " vs checkpoint " + ckpt.dir().string();
  std::string line;
  uint64_t fp = checkpoint_fingerprint(cfg, ckpt, &line);
  if (fp != plan->fingerprint())
    throw Error(where + ": plan was built for another checkpoint (plan: \"" +
                (plan->fingerprint_text() ? plan->fingerprint_text()->str() : std::string("?")) + "\", checkpoint: \"" +
                line + "\", fingerprints differ)");
  for (const auto* w : *plan->weights()) {
    auto check_key = [&](const flatbuffers::String* key) {
      if (!key || key->size() == 0) return;
      if (!ckpt.has(key->str())) throw Error(where + ": tensor " + key->str() + " of the plan is not in the checkpoint");
    };
    if (w->format() != fb::WeightFormat::Int4) {
      check_key(w->checkpoint_key());
      const auto& t = ckpt.info(w->checkpoint_key()->str());
      std::vector<int64_t> shape(w->shape()->begin(), w->shape()->end());
      if (t.shape != shape || uint8_t(t.dtype) != uint8_t(w->dtype()))
        throw Error(where + ": tensor " + t.name + " has another dtype or shape than the plan says");
    } else {
      check_key(w->int4()->qweight_key());
      check_key(w->int4()->scales_key());
      check_key(w->int4()->zeros_key());
    }
  }
}

size_t kv_token_bytes(const fb::KvLayer& l) {
  const size_t heads = size_t(l.num_kv_heads()), d = size_t(l.head_dim());
  switch (l.dtype()) {
    case fb::DType::F8E4M3: return 2 * heads * (d + 4);  // codes + an fp32 scale per head
    case fb::DType::BF16: return 2 * heads * d * 2;
    default: return 2 * heads * d * 4;
  }
}

size_t kv_token_bytes(const fb::KvLayer& l, size_t element_bytes) {
  if (l.dtype() == fb::DType::F8E4M3) return kv_token_bytes(l);
  return 2 * size_t(l.num_kv_heads()) * size_t(l.head_dim()) * element_bytes;
}

uint64_t weight_storage_bytes(const fb::Weight& w) {
  if (w.format() != fb::WeightFormat::Int8Rows || !w.shape() || w.shape()->size() != 2) return w.checkpoint_bytes();
  const uint64_t rows = uint64_t(w.shape()->Get(0)), cols = uint64_t(w.shape()->Get(1));
  return rows * cols + rows * 4;
}

size_t kv_token_bytes(const Plan& plan) {
  size_t n = 0;
  for (const auto* l : *plan->kv()) n += kv_token_bytes(*l);
  return n;
}

const char* kernel_name(fb::KernelId k) { return fb::EnumNameKernelId(k); }
const char* epilogue_name(fb::Epilogue e) { return fb::EnumNameEpilogue(e); }

std::string describe(const Plan& plan, bool with_weights) {
  const fb::Plan& p = plan.root();
  std::ostringstream o;
  const auto* m = p.model();
  o << "plan " << plan.name() << "\n  format_version " << p.format_version() << ", generator "
    << (p.generator() ? p.generator()->str() : "?") << ", " << plan.bytes().size() << " bytes\n"
    << "  fingerprint " << std::hex << p.fingerprint() << std::dec << " ("
    << (p.fingerprint_text() ? p.fingerprint_text()->str() : "") << ")\n";
  o << "model " << (m->model_type() ? m->model_type()->str() : "?") << ": hidden " << m->hidden_size() << ", layers "
    << m->num_layers() << ", q heads " << m->num_q_heads() << ", ffn " << m->intermediate_size() << ", vocab "
    << m->vocab_size() << ", window " << m->sliding_window() << ", eps " << m->rms_norm_eps() << ", softcap "
    << m->final_logit_softcapping() << ", embed_scale " << m->embed_scale() << "\n";
  for (int i = 0; i < int(m->layers()->size()); ++i) {
    const auto* l = m->layers()->Get(i);
    o << fmt("  layer %2d %-7s kv_heads %d head_dim %d k_eq_v %d window %d rope %s theta %g pairs %d\n", i,
             fb::EnumNameLayerKind(l->kind()), l->num_kv_heads(), l->head_dim(), int(l->k_eq_v()), l->window(),
             fb::EnumNameRopeType(l->rope_type()), l->rope_theta(), l->rotary_pairs());
  }
  if (with_weights) {
    o << "weights (" << p.weights()->size() << ")\n";
    for (int i = 0; i < int(p.weights()->size()); ++i) {
      const auto* w = p.weights()->Get(i);
      std::string shape;
      for (auto d : *w->shape()) shape += (shape.empty() ? "" : "x") + std::to_string(d);
      o << fmt("  w%-4d %-48s %-5s %-10s %-5s %s", i, w->name()->c_str(), fb::EnumNameDType(w->dtype()), shape.c_str(),
               fb::EnumNameWeightFormat(w->format()), fb::EnumNameResidency(w->residency()));
      if (w->int4()) o << fmt(" G=%d %s padded_in=%d", w->int4()->group_size(), w->int4()->symmetric() ? "sym" : "asym", w->int4()->padded_in());
      o << "\n";
    }
  }
  o << "kv (block_size " << p.kv_block_size() << ", max_chunk_tokens " << p.max_chunk_tokens() << ")\n";
  for (int i = 0; i < int(p.kv()->size()); ++i) {
    const auto* k = p.kv()->Get(i);
    o << fmt("  kv%-3d layer %2d %-5s heads %d dim %d window %d capacity %d block %d %s %zu B/token\n", i, k->layer(),
             fb::EnumNameKvKind(k->kind()), k->num_kv_heads(), k->head_dim(), k->window(), k->capacity(), k->block_size(),
             fb::EnumNameDType(k->dtype()), kv_token_bytes(*k));
  }
  o << fmt("  K and V per token, all layers: %zu bytes\n", kv_token_bytes(plan));
  o << "values (" << p.values()->size() << ")\n";
  for (int i = 0; i < int(p.values()->size()); ++i) {
    const auto* v = p.values()->Get(i);
    o << fmt("  v%-3d %-16s %-4s %-9s x %d\n", i, v->name() ? v->name()->c_str() : "", fb::EnumNameDType(v->dtype()),
             fb::EnumNameRowSpace(v->rows()), v->cols());
  }
  if (p.buckets()) {
    o << "buckets (" << p.buckets()->size() << ")\n";
    for (const auto* b : *p.buckets())
      o << fmt("  %-7s tokens %d sequences %d logit_rows %d arena %llu bytes%s\n", b->decode() ? "decode" : "prefill",
               b->max_tokens(), b->max_sequences(), b->max_logit_rows(), (unsigned long long)b->arena_bytes(),
               b->graph() ? " (CUDA graph)" : "");
  }
  o << "program (" << p.program()->size() << " steps, logits in v" << p.logits_value() << ")\n";
  auto ids = [](const flatbuffers::Vector<int32_t>* v, char c) {
    std::string s;
    if (v)
      for (int x : *v) s += (s.empty() ? "" : ",") + (x < 0 ? std::string("-") : c + std::to_string(x));
    return s;
  };
  for (int s = 0; s < int(p.program()->size()); ++s) {
    const auto* st = p.program()->Get(s);
    const auto* a = st->attrs();
    o << fmt("  %4d %-18s %-20s in[%s] out[%s] w[%s]", s, kernel_name(st->kernel()),
             st->label() ? st->label()->c_str() : "", ids(st->inputs(), 'v').c_str(), ids(st->outputs(), 'v').c_str(),
             ids(st->weights(), 'w').c_str());
    switch (st->kernel()) {
      case fb::KernelId::Embed: case fb::KernelId::Scale: o << fmt(" scale=%g", a->scale()); break;
      case fb::KernelId::RmsNorm: o << fmt(" eps=%g norm_dim=%d", a->eps(), a->norm_dim()); break;
      case fb::KernelId::Linear: o << " epilogue=" << epilogue_name(a->epilogue()); break;
      case fb::KernelId::Rope: o << fmt(" D=%d pairs=%d theta=%g", a->head_dim(), a->rotary_pairs(), a->rope_theta()); break;
      case fb::KernelId::KvWrite: o << fmt(" kv=%d", a->kv_layer()); break;
      case fb::KernelId::QkNormRopeKvWrite:
        o << fmt(" heads=%d/%d D=%d pairs=%d theta=%g eps=%g kv=%d v_from_k=%d", a->num_q_heads(), a->num_kv_heads(),
                 a->head_dim(), a->rotary_pairs(), a->rope_theta(), a->eps(), a->kv_layer(), int(a->v_from_k()));
        break;
      case fb::KernelId::Attention:
        o << fmt(" heads=%d/%d D=%d window=%d scale=%g kv=%d", a->num_q_heads(), a->num_kv_heads(), a->head_dim(),
                 a->window(), a->scale(), a->kv_layer());
        break;
      case fb::KernelId::Softcap: o << fmt(" softcap=%g", a->softcap()); break;
      case fb::KernelId::PostNormResidual: o << fmt(" eps=%g", a->eps()); break;
      case fb::KernelId::LmHead: o << fmt(" eps=%g softcap=%g", a->eps(), a->softcap()); break;
      default: break;
    }
    if (st->stream() != 0) o << " stream=" << st->stream();
    o << "\n";
  }
  return o.str();
}

}  // namespace g4c::plan

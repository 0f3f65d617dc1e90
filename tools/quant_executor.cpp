#include "tools/quant_executor.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "models/dtype.h"
#include "models/error.h"
#include "models/manifest.h"
#include "models/safetensors.h"
#include "passes/quant/linalg.h"

namespace g4c::tools {

using models::ModelConfig;

namespace {

typedef float v8f __attribute__((vector_size(32), aligned(4)));

std::vector<float> to_f32(const models::TensorView& v, const std::string& name) {
  const int64_t n = v.info->numel();
  std::vector<float> out(static_cast<size_t>(n));
  switch (v.info->dtype) {
    case DType::BF16: {
      const uint16_t* p = v.as<uint16_t>();
      for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_f32(p[i]);
      break;
    }
    case DType::F16: {
      const uint16_t* p = v.as<uint16_t>();
      for (int64_t i = 0; i < n; ++i) out[i] = f16_to_f32(p[i]);
      break;
    }
    case DType::F32:
      std::memcpy(out.data(), v.data, size_t(n) * 4);
      break;
    default:
      throw Error("tensor " + name + " in " + v.info->file + " has dtype " + std::string(dtype_name(v.info->dtype)) +
                  ", expected BF16, F16 or F32");
  }
  return out;
}

// exp for x ≤ 0-ish ranges used by softmax (x clamped to [−87, 88]); Cephes polynomial,
// relative error ≈ 2e-7. Branch-free so that loops over it vectorize.
inline float fast_exp(float x) {
  x = std::min(88.f, std::max(-87.f, x));
  const float n = __builtin_rintf(x * 1.44269504088896341f);
  float r = x - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.f;
  int32_t bits = (int32_t(n) + 127) << 23;
  float s;
  std::memcpy(&s, &bits, 4);
  return p * s;
}

}  // namespace

namespace detail {

// Softcapped log-softmax NLL of one logits row: z = cap·tanh(l/cap) (cap 0 = none).
__attribute__((target_clones("arch=x86-64-v3", "default"))) double row_nll(float* logits, int64_t n, float cap,
                                                                           int32_t target) {
  if (cap > 0.f) {
    const float inv = 1.f / cap;
    for (int64_t i = 0; i < n; ++i) {  // tanh(y) = 1 − 2/(e^{2y}+1)
      const float e = fast_exp(2.f * logits[i] * inv);
      logits[i] = cap * (1.f - 2.f / (e + 1.f));
    }
  }
  float mx = -INFINITY;
  for (int64_t i = 0; i < n; ++i) mx = std::max(mx, logits[i]);
  float sum = 0.f;
  for (int64_t i = 0; i < n; ++i) sum += fast_exp(logits[i] - mx);
  return double(mx) + std::log(double(sum)) - double(logits[target]);
}

// y[i] = gelu_tanh(g[i]) · u[i]; tanh(z) = 1 − 2/(e^{2z}+1) with the fast exp.
__attribute__((target_clones("arch=x86-64-v3", "default"))) void gelu_mul(float* g, const float* u, int64_t n) {
  const float k = 0.7978845608028654f;
  for (int64_t i = 0; i < n; ++i) {
    const float x = g[i];
    const float e = fast_exp(2.f * k * (x + 0.044715f * x * x * x));
    g[i] = 0.5f * x * (2.f - 2.f / (e + 1.f)) * u[i];
  }
}

// p[i] = exp(p[i] − mx); returns Σ p.
__attribute__((target_clones("arch=x86-64-v3", "default"))) float exp_shift_sum(float* p, int64_t n, float mx) {
  float s = 0.f;
  for (int64_t i = 0; i < n; ++i) {
    p[i] = fast_exp(p[i] - mx);
    s += p[i];
  }
  return s;
}

__attribute__((target_clones("arch=x86-64-v3", "default"))) float dot(const float* a, const float* b, int64_t n) {
  v8f acc = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) acc += *reinterpret_cast<const v8f*>(a + i) * *reinterpret_cast<const v8f*>(b + i);
  float s = acc[0] + acc[1] + acc[2] + acc[3] + acc[4] + acc[5] + acc[6] + acc[7];
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

__attribute__((target_clones("arch=x86-64-v3", "default"))) void axpy(float a, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

}  // namespace detail

namespace {

struct Linear {
  int64_t out = 0, in = 0;
  std::vector<float> wt;  // [in, out] (transposed: the GEMM's B operand)
};

struct LayerW {
  std::map<std::string, Linear> lin;
  std::vector<float> in_norm, post_attn_norm, pre_ffn_norm, post_ffn_norm, q_norm, k_norm;
  float scalar = 1.f;
};

struct Rope {
  int D = 0;
  std::vector<float> cos, sin;  // [pos, D/2]
};

// rms(x, w) = x · (mean(x²) + eps)^−½ · w (w may be null: no weight), in place over rows.
void rms_rows(float* x, int64_t rows, int64_t n, const float* w, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    float* v = x + r * n;
    double ss = 0.0;
    for (int64_t i = 0; i < n; ++i) ss += double(v[i]) * v[i];
    const float inv = float(1.0 / std::sqrt(ss / double(n) + eps));
    if (w)
      for (int64_t i = 0; i < n; ++i) v[i] = v[i] * inv * w[i];
    else
      for (int64_t i = 0; i < n; ++i) v[i] *= inv;
  }
}

void rope_rows(float* x, int64_t heads, const Rope& r, int64_t pos) {
  const int64_t h2 = r.D / 2;
  const float* c = r.cos.data() + pos * h2;
  const float* s = r.sin.data() + pos * h2;
  for (int64_t h = 0; h < heads; ++h) {
    float* v = x + h * r.D;
    for (int64_t j = 0; j < h2; ++j) {
      const float a = v[j], b = v[j + h2];
      v[j] = a * c[j] - b * s[j];
      v[j + h2] = b * c[j] + a * s[j];
    }
  }
}

void parallel_for(int64_t n, int threads, const std::function<void(int64_t)>& fn) {
  if (threads <= 1 || n <= 1) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<int64_t> next{0};
  std::vector<std::thread> pool;
  std::exception_ptr err;
  std::mutex mu;
  for (int t = 0; t < std::min<int64_t>(threads, n); ++t)
    pool.emplace_back([&] {
      for (int64_t i; (i = next.fetch_add(1)) < n;) {
        try {
          fn(i);
        } catch (...) {
          std::lock_guard<std::mutex> lk(mu);
          if (!err) err = std::current_exception();
        }
      }
    });
  for (auto& th : pool) th.join();
  if (err) std::rethrow_exception(err);
}



// Per-thread activation buffers, reused across layers and chunks (no page faults per call).
struct Work {
  std::vector<float> a, q, k, v, attn, o, m, gt, up, logits, sc;
};
Work& work() {
  thread_local Work w;
  return w;
}

}  // namespace

struct RefModel::Impl {
  ModelConfig cfg;
  bool int4 = false;
  int threads = 1;
  std::vector<float> embed;    // [vocab, H]
  std::vector<float> embed_t;  // [H, vocab]
  std::vector<float> final_norm;
  std::vector<LayerW> layers;
  Rope rope_sliding, rope_full;
  int64_t max_pos = 0;

  const Rope& rope(int layer) const { return cfg.is_full(layer) ? rope_full : rope_sliding; }

  // y [rows, out] = x [rows, in] · Wᵀ
  void matmul(const Linear& l, const float* x, int64_t rows, float* y, int thr) const {
    std::fill(y, y + rows * l.out, 0.f);
    quant::sgemm_acc(rows, l.out, l.in, x, l.in, 1, l.wt.data(), l.out, y, l.out, thr);
  }

  // Attention core for one sequence: q [T, Hq·D] at positions p0.., keys/values
  // cache [0, p0+T) of [pos, Hkv·D]; out [T, Hq·D].
  void attend(int layer, const float* q, int64_t T, int64_t p0, const float* K, const float* V, float* out) const {
    const auto& g = cfg.layers[layer];
    const int64_t D = g.head_dim, Hq = cfg.num_q_heads, Hkv = g.num_kv_heads, group = Hq / Hkv;
    std::vector<float>& sc = work().sc;
    sc.resize(size_t(p0 + T));
    for (int64_t t = 0; t < T; ++t) {
      const int64_t pos = p0 + t;
      const int64_t lo = g.kind == models::LayerKind::Full ? 0 : std::max<int64_t>(0, pos - g.window + 1);
      for (int64_t h = 0; h < Hq; ++h) {
        const float* qh = q + t * Hq * D + h * D;
        const int64_t kh = h / group;
        float mx = -INFINITY;
        for (int64_t j = lo; j <= pos; ++j) {
          sc[j] = detail::dot(qh, K + j * Hkv * D + kh * D, D);  // attention scale 1.0
          mx = std::max(mx, sc[j]);
        }
        const float sum = detail::exp_shift_sum(sc.data() + lo, pos + 1 - lo, mx);
        float* o = out + t * Hq * D + h * D;
        std::fill(o, o + D, 0.f);
        const float inv = 1.f / sum;
        for (int64_t j = lo; j <= pos; ++j) detail::axpy(sc[j] * inv, V + j * Hkv * D + kh * D, o, D);
      }
    }
  }

  // One decoder layer over `nseq` sequences of T new tokens at positions p0..p0+T−1.
  // K/V caches (one per sequence, [max_pos, Hkv·D] each) receive the new positions.
  void layer(int li, float* h, int64_t nseq, int64_t T, int64_t p0, std::vector<float>* Kc, std::vector<float>* Vc,
             const quant::CalibrationExecutor::Observer* obs, int thr) const {
    const LayerW& w = layers[li];
    const auto& g = cfg.layers[li];
    const int64_t H = cfg.hidden_size, D = g.head_dim, Hq = cfg.num_q_heads, Hkv = g.num_kv_heads;
    const int64_t rows = nseq * T, I = cfg.intermediate_size;
    const float eps = float(cfg.rms_norm_eps);
    Work& W = work();
    std::vector<float>& a = W.a;
    a.assign(h, h + rows * H);
    rms_rows(a.data(), rows, H, w.in_norm.data(), eps);
    const bool has_v = w.lin.count("self_attn.v_proj") > 0;
    if (obs) {
      std::vector<std::string> names = {"self_attn.q_proj", "self_attn.k_proj"};
      if (has_v) names.push_back("self_attn.v_proj");
      (*obs)(names, a.data(), rows, H);
    }
    std::vector<float>&q = W.q, &k = W.k, &v = W.v;
    q.resize(size_t(rows * Hq * D));
    k.resize(size_t(rows * Hkv * D));
    v.resize(size_t(rows * Hkv * D));
    matmul(w.lin.at("self_attn.q_proj"), a.data(), rows, q.data(), thr);
    matmul(w.lin.at("self_attn.k_proj"), a.data(), rows, k.data(), thr);
    if (has_v)
      matmul(w.lin.at("self_attn.v_proj"), a.data(), rows, v.data(), thr);
    else
      v = k;  // k_eq_v: V is the raw k projection
    rms_rows(q.data(), rows * Hq, D, w.q_norm.data(), eps);
    rms_rows(k.data(), rows * Hkv, D, w.k_norm.data(), eps);
    rms_rows(v.data(), rows * Hkv, D, nullptr, eps);
    const Rope& rp = rope(li);
    std::vector<float>& attn = W.attn;
    attn.resize(size_t(rows * Hq * D));
    parallel_for(nseq, thr, [&](int64_t s) {
      for (int64_t t = 0; t < T; ++t) {
        const int64_t r = s * T + t;
        rope_rows(q.data() + r * Hq * D, Hq, rp, p0 + t);
        rope_rows(k.data() + r * Hkv * D, Hkv, rp, p0 + t);
        std::memcpy(Kc[s].data() + (p0 + t) * Hkv * D, k.data() + r * Hkv * D, size_t(Hkv * D) * 4);
        std::memcpy(Vc[s].data() + (p0 + t) * Hkv * D, v.data() + r * Hkv * D, size_t(Hkv * D) * 4);
      }
      attend(li, q.data() + s * T * Hq * D, T, p0, Kc[s].data(), Vc[s].data(), attn.data() + s * T * Hq * D);
    });
    if (obs) (*obs)({"self_attn.o_proj"}, attn.data(), rows, Hq * D);
    std::vector<float>& o = W.o;
    o.resize(size_t(rows * H));
    matmul(w.lin.at("self_attn.o_proj"), attn.data(), rows, o.data(), thr);
    rms_rows(o.data(), rows, H, w.post_attn_norm.data(), eps);
    for (int64_t i = 0; i < rows * H; ++i) h[i] += o[i];
    std::vector<float>& m = W.m;
    m.assign(h, h + rows * H);
    rms_rows(m.data(), rows, H, w.pre_ffn_norm.data(), eps);
    if (obs) (*obs)({"mlp.gate_proj", "mlp.up_proj"}, m.data(), rows, H);
    std::vector<float>&gt = W.gt, &up = W.up;
    gt.resize(size_t(rows * I));
    up.resize(size_t(rows * I));
    matmul(w.lin.at("mlp.gate_proj"), m.data(), rows, gt.data(), thr);
    matmul(w.lin.at("mlp.up_proj"), m.data(), rows, up.data(), thr);
    detail::gelu_mul(gt.data(), up.data(), rows * I);
    if (obs) (*obs)({"mlp.down_proj"}, gt.data(), rows, I);
    matmul(w.lin.at("mlp.down_proj"), gt.data(), rows, o.data(), thr);
    rms_rows(o.data(), rows, H, w.post_ffn_norm.data(), eps);
    for (int64_t i = 0; i < rows * H; ++i) h[i] = (h[i] + o[i]) * w.scalar;
  }
};

RefModel::RefModel() : p_(std::make_unique<Impl>()) {}
RefModel::~RefModel() = default;
const ModelConfig& RefModel::config() const { return p_->cfg; }
bool RefModel::is_int4() const { return p_->int4; }
int RefModel::threads() const { return p_->threads; }

std::unique_ptr<RefModel> RefModel::load(const std::filesystem::path& dir, int threads) {
  std::unique_ptr<RefModel> m(new RefModel());
  Impl& P = *m->p_;
  P.cfg = models::load_model_config(dir);
  P.threads = std::max(1, threads);
  const ModelConfig& c = P.cfg;
  if (c.hidden_size_per_layer_input != 0)
    throw Error(dir.string() + ": per-layer inputs (hidden_size_per_layer_input " +
                std::to_string(c.hidden_size_per_layer_input) + ") are not supported");
  std::unique_ptr<models::Int4Checkpoint> q4;
  std::unique_ptr<models::Checkpoint> own;
  const models::Checkpoint* ck = nullptr;
  if (models::Int4Checkpoint::is_int4_dir(dir)) {
    q4 = models::Int4Checkpoint::open(dir);
    ck = &q4->tensors();
    P.int4 = true;
  } else {
    own = models::Checkpoint::open(dir);
    ck = own.get();
  }
  auto get = [&](const std::string& name) { return to_f32(ck->get(name), name); };
  P.embed = get("embed_tokens.weight");
  const int64_t H = c.hidden_size, V = c.vocab_size;
  if (int64_t(P.embed.size()) != H * V) throw Error(dir.string() + ": embed_tokens.weight is not [vocab, hidden]");
  if (!c.tie_word_embeddings) throw Error(dir.string() + ": untied LM heads are not supported by eval");
  P.embed_t.resize(size_t(H * V));
  for (int64_t v = 0; v < V; ++v)
    for (int64_t i = 0; i < H; ++i) P.embed_t[i * V + v] = P.embed[v * H + i];
  P.final_norm = get("norm.weight");
  P.layers.resize(c.num_layers);
  for (int li = 0; li < c.num_layers; ++li) {
    LayerW& L = P.layers[li];
    const std::string pre = "layers." + std::to_string(li) + ".";
    L.in_norm = get(pre + "input_layernorm.weight");
    L.post_attn_norm = get(pre + "post_attention_layernorm.weight");
    L.pre_ffn_norm = get(pre + "pre_feedforward_layernorm.weight");
    L.post_ffn_norm = get(pre + "post_feedforward_layernorm.weight");
    L.q_norm = get(pre + "self_attn.q_norm.weight");
    L.k_norm = get(pre + "self_attn.k_norm.weight");
    L.scalar = ck->has(pre + "layer_scalar") ? get(pre + "layer_scalar").at(0) : 1.f;
  }
  for (const auto& ls : models::linear_shapes(c)) {
    // "layers.3.self_attn.q_proj" → layer 3, "self_attn.q_proj"
    const size_t dot1 = ls.name.find('.'), dot2 = ls.name.find('.', dot1 + 1);
    const int li = std::stoi(ls.name.substr(dot1 + 1, dot2 - dot1 - 1));
    const std::string local = ls.name.substr(dot2 + 1);
    std::vector<float> w;
    if (q4 && q4->is_quantized(ls.name))
      w = q4->dequantized(ls.name);
    else
      w = get(ls.name + ".weight");
    if (int64_t(w.size()) != ls.out * ls.in)
      throw Error(dir.string() + ": " + ls.name + " has " + std::to_string(w.size()) + " values, expected " +
                  std::to_string(ls.out) + "×" + std::to_string(ls.in));
    Linear& l = P.layers[li].lin[local];
    l.out = ls.out;
    l.in = ls.in;
    l.wt.resize(w.size());
    for (int64_t o = 0; o < ls.out; ++o)
      for (int64_t i = 0; i < ls.in; ++i) l.wt[i * ls.out + o] = w[o * ls.in + i];
  }
  P.max_pos = std::max<int64_t>(c.max_position_embeddings, 8192);
  for (int full = 0; full < 2; ++full) {
    int li = -1;
    for (int i = 0; i < c.num_layers; ++i)
      if (c.is_full(i) == bool(full)) li = i;
    if (li < 0) continue;
    const auto& g = c.layers[li];
    Rope& r = full ? P.rope_full : P.rope_sliding;
    r.D = g.head_dim;
    const int64_t h2 = r.D / 2, R = g.rotary_pairs();
    r.cos.resize(size_t(P.max_pos * h2));
    r.sin.resize(size_t(P.max_pos * h2));
    for (int64_t pos = 0; pos < P.max_pos; ++pos)
      for (int64_t j = 0; j < h2; ++j) {
        const double inv = j < R ? std::pow(g.rope.theta, -2.0 * double(j) / double(r.D)) : 0.0;
        r.cos[pos * h2 + j] = float(std::cos(double(pos) * inv));
        r.sin[pos * h2 + j] = float(std::sin(double(pos) * inv));
      }
  }
  return m;
}

std::vector<quant::LinearInfo> RefModel::linears(int layer) const {
  std::vector<quant::LinearInfo> out;
  for (const char* n : {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
                        "mlp.up_proj", "mlp.down_proj"}) {
    auto it = p_->layers.at(layer).lin.find(n);
    if (it != p_->layers[layer].lin.end()) out.push_back({n, it->second.out, it->second.in});
  }
  return out;
}

std::vector<float> RefModel::weight(int layer, const std::string& linear) const {
  const Linear& l = p_->layers.at(layer).lin.at(linear);
  std::vector<float> w(static_cast<size_t>(l.out * l.in));
  for (int64_t o = 0; o < l.out; ++o)
    for (int64_t i = 0; i < l.in; ++i) w[o * l.in + i] = l.wt[i * l.out + o];
  return w;
}

void RefModel::set_weight(int layer, const std::string& linear, std::span<const float> w) {
  Linear& l = p_->layers.at(layer).lin.at(linear);
  if (int64_t(w.size()) != l.out * l.in) throw Error("set_weight: wrong size for layer " + std::to_string(layer) + " " + linear);
  for (int64_t o = 0; o < l.out; ++o)
    for (int64_t i = 0; i < l.in; ++i) l.wt[i * l.out + o] = w[o * l.in + i];
}

void RefModel::embed(std::span<const int32_t> ids, float* h) const {
  const int64_t H = p_->cfg.hidden_size;
  const float scale = float(p_->cfg.embed_scale());
  for (size_t t = 0; t < ids.size(); ++t) {
    if (ids[t] < 0 || ids[t] >= p_->cfg.vocab_size) throw Error("token id " + std::to_string(ids[t]) + " out of range");
    const float* e = p_->embed.data() + int64_t(ids[t]) * H;
    for (int64_t i = 0; i < H; ++i) h[t * H + i] = e[i] * scale;
  }
}

void RefModel::layer_forward(int layer, float* h, int64_t n_seq, int64_t len,
                             const quant::CalibrationExecutor::Observer* obs) const {
  const auto& g = p_->cfg.layers[layer];
  if (len > p_->max_pos) throw Error("sequence of " + std::to_string(len) + " tokens exceeds the RoPE table");
  thread_local std::vector<std::vector<float>> K, V;  // reused: no page faults per call
  if (int64_t(K.size()) < n_seq) {
    K.resize(size_t(n_seq));
    V.resize(size_t(n_seq));
  }
  for (int64_t s = 0; s < n_seq; ++s) {
    K[s].resize(size_t(len * g.num_kv_heads * g.head_dim));
    V[s].resize(size_t(len * g.num_kv_heads * g.head_dim));
  }
  p_->layer(layer, h, n_seq, len, 0, K.data(), V.data(), obs, p_->threads);
}

double RefModel::score_sequence(std::span<const int32_t> ids, int chunk) const {
  const Impl& P = *p_;
  const ModelConfig& c = P.cfg;
  const int64_t n = int64_t(ids.size()), H = c.hidden_size, V = c.vocab_size;
  if (n < 2) return 0.0;
  if (n > P.max_pos) throw Error("sequence of " + std::to_string(n) + " tokens exceeds the RoPE table");
  if (chunk <= 0) throw Error("chunk size must be positive");
  std::vector<std::vector<float>> K(c.num_layers), Vc(c.num_layers);
  for (int li = 0; li < c.num_layers; ++li) {
    K[li].resize(size_t(n * c.layers[li].num_kv_heads * c.layers[li].head_dim));
    Vc[li].resize(K[li].size());
  }
  double nll = 0.0;
  std::vector<float> h;
  std::vector<float>& logits = work().logits;
  for (int64_t p0 = 0; p0 < n; p0 += chunk) {
    const int64_t T = std::min<int64_t>(chunk, n - p0);
    h.assign(size_t(T * H), 0.f);
    embed(ids.subspan(size_t(p0), size_t(T)), h.data());
    for (int li = 0; li < c.num_layers; ++li) P.layer(li, h.data(), 1, T, p0, &K[li], &Vc[li], nullptr, 1);
    rms_rows(h.data(), T, H, P.final_norm.data(), float(c.rms_norm_eps));
    // Positions whose next token exists: p0+t+1 < n.
    const int64_t scored = std::min<int64_t>(T, n - 1 - p0);
    if (scored <= 0) break;
    logits.assign(size_t(scored * V), 0.f);
    quant::sgemm_acc(scored, V, H, h.data(), H, 1, P.embed_t.data(), V, logits.data(), V, 1);
    for (int64_t t = 0; t < scored; ++t)
      nll += detail::row_nll(logits.data() + t * V, V, float(c.final_logit_softcapping), ids[size_t(p0 + t + 1)]);
  }
  return nll;
}

// ---- calibration executor ----

RefCalibrationExecutor::RefCalibrationExecutor(RefModel& model, const std::vector<std::vector<int32_t>>& seqs,
                                               int64_t len, int64_t batch)
    : model_(model), n_seq_(int64_t(seqs.size())), len_(len), batch_(std::max<int64_t>(1, batch)) {
  const int64_t H = model.config().hidden_size;
  h_.resize(size_t(n_seq_ * len_ * H));
  for (int64_t s = 0; s < n_seq_; ++s) {
    if (int64_t(seqs[s].size()) != len_)
      throw Error("calibration sequence " + std::to_string(s) + " has " + std::to_string(seqs[s].size()) +
                  " tokens, expected " + std::to_string(len_));
    model.embed(seqs[s], h_.data() + s * len_ * H);
  }
}

int RefCalibrationExecutor::num_layers() const { return model_.config().num_layers; }
std::vector<quant::LinearInfo> RefCalibrationExecutor::linears(int layer) const { return model_.linears(layer); }
std::vector<float> RefCalibrationExecutor::weight(int layer, const std::string& linear) const {
  return model_.weight(layer, linear);
}
void RefCalibrationExecutor::set_weight(int layer, const std::string& linear, std::span<const float> w) {
  model_.set_weight(layer, linear, w);
}

void RefCalibrationExecutor::run_layer(int layer, const Observer& observe, bool advance) {
  const int64_t H = model_.config().hidden_size;
  std::vector<float> scratch;
  for (int64_t s0 = 0; s0 < n_seq_; s0 += batch_) {
    const int64_t nb = std::min(batch_, n_seq_ - s0);
    float* h = h_.data() + s0 * len_ * H;
    if (!advance) {
      scratch.assign(h, h + nb * len_ * H);
      h = scratch.data();
    }
    model_.layer_forward(layer, h, nb, len_, observe ? &observe : nullptr);
  }
}

}  // namespace g4c::tools

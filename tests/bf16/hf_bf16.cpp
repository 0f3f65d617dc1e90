// See hf_bf16.h for the rounding points; the numbers in comments refer to that list.
#include "tests/bf16/hf_bf16.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "models/dtype.h"
#include "models/error.h"
#include "models/safetensors.h"

namespace g4c::bf16emu {

float round_bf16(float x) { return bf16_to_f32(f32_to_bf16(x)); }

namespace {

constexpr float kLog2e = 1.4426950408889634f;

std::vector<float> load(const models::Checkpoint& ck, const std::string& name) {
  auto v = ck.get(name);
  if (v.info->dtype != DType::BF16) throw Error("hf_bf16: " + name + " is not BF16");
  std::vector<float> out(static_cast<size_t>(v.info->numel()));
  const uint16_t* p = v.as<uint16_t>();
  for (size_t i = 0; i < out.size(); ++i) out[i] = bf16_to_f32(p[i]);
  return out;
}

// fp32 accumulation of bf16-valued operands (8 partial sums: vectorizable, order irrelevant at
// the bf16 output precision).
float dot(const float* a, const float* b, int n) {
  float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) s[k] += a[i + k] * b[i + k];
  float r = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
  for (; i < n; ++i) r += a[i] * b[i];
  return r;
}

// Point 3: y = bf16(W·x), W [out][in]. round=false keeps fp32 (ablations only).
void linear(const std::vector<float>& w, const float* x, int in, int out, float* y, bool round = true) {
  for (int o = 0; o < out; ++o) {
    const float v = dot(w.data() + size_t(o) * in, x, in);
    y[o] = round ? round_bf16(v) : v;
  }
}

// Point 2 (w may be null: no weight). round=false keeps fp32 (ablations only).
void rms(const float* x, int n, const float* w, float eps, float* y, bool round = true) {
  float ss = 0.f;
  for (int i = 0; i < n; ++i) ss += x[i] * x[i];
  const float r = 1.f / std::sqrt(ss / float(n) + eps);
  for (int i = 0; i < n; ++i) {
    float v = x[i] * r;
    if (w) v *= w[i];
    y[i] = round ? round_bf16(v) : v;
  }
}

float gelu_tanh(float x) {
  const float k0 = 0.7978845608028654f;  // torch: M_SQRT2 * M_2_SQRTPI * 0.5
  return 0.5f * x * (1.f + std::tanh(k0 * (x + 0.044715f * x * x * x)));
}

// Partial attention state over some key blocks (point 6).
struct Acc {
  float m = -INFINITY, l = 0.f;
  std::vector<float> o;
};

enum class ExpStyle {
  Flash,    // flash-attn 2: P = exp2(fma(s, log2e, −fp32(m·log2e))), rescale exp2((m_old−m)·log2e)
  MemEff,   // cutlass mem-efficient / g4c: f = fp32(s·log2e); P = exp2(f − max f)
};

// Keys [k0, k1) (kv indices) of one block; `key(j)`/`val(j)` give rows; visible keys only.
template <class KeyFn>
void run_block(Acc& a, const float* q, int d, int k0, int k1, ExpStyle style, KeyFn&& kv) {
  if (k0 >= k1) return;
  std::vector<float> s(static_cast<size_t>(k1 - k0));
  float mx = -INFINITY;
  for (int j = k0; j < k1; ++j) {
    float v = dot(q, kv(j).first, d);
    if (style == ExpStyle::MemEff) v *= kLog2e;
    s[j - k0] = v;
    mx = std::max(mx, v);
  }
  const float mn = std::max(a.m, mx);
  float c = 0.f;
  if (a.m != -INFINITY) c = style == ExpStyle::Flash ? std::exp2((a.m - mn) * kLog2e) : std::exp2(a.m - mn);
  a.l *= c;
  for (float& x : a.o) x *= c;
  const float ms = mn * kLog2e;
  for (int j = k0; j < k1; ++j) {
    const float p = style == ExpStyle::Flash ? std::exp2(std::fma(s[j - k0], kLog2e, -ms)) : std::exp2(s[j - k0] - mn);
    a.l += p;
    const float pb = round_bf16(p);
    const float* v = kv(j).second;
    for (int i = 0; i < d; ++i) a.o[i] += pb * v[i];
  }
  a.m = mn;
}

// Visible keys [lo, hi] (kv indices), blocks of bn aligned at kv index 0.
template <class KeyFn>
Acc run_range(const float* q, int d, int lo, int hi, int bn, bool reverse, ExpStyle style, KeyFn&& kv) {
  Acc a;
  a.o.assign(static_cast<size_t>(d), 0.f);
  const int b0 = lo / bn, b1 = hi / bn;
  for (int i = 0; i <= b1 - b0; ++i) {
    const int b = reverse ? b1 - i : b0 + i;
    run_block(a, q, d, std::max(lo, b * bn), std::min(hi + 1, (b + 1) * bn), style, kv);
  }
  return a;
}

void finish(const Acc& a, int d, float* out) {
  const float inv = a.l > 0.f ? 1.f / a.l : 0.f;
  for (int i = 0; i < d; ++i) out[i] = round_bf16(a.o[i] * inv);
}

// flash-attn 2's num_splits_heuristic (flash_api.cpp), num_SMs = 2 × 132 on an H200.
int num_splits_heuristic(int batch_nheads_mblocks, int num_sms, int num_n_blocks, int max_splits) {
  if (batch_nheads_mblocks >= 0.8f * num_sms) return 1;
  max_splits = std::min({max_splits, num_sms, num_n_blocks});
  auto cdiv = [](int a, int b) { return (a + b - 1) / b; };
  auto eligible = [&](int s) { return s == 1 || cdiv(num_n_blocks, s) != cdiv(num_n_blocks, s - 1); };
  std::vector<float> eff;
  float best = 0.f;
  for (int s = 1; s <= max_splits; ++s) {
    float e = 0.f;
    if (eligible(s)) {
      const float waves = float(batch_nheads_mblocks * s) / float(num_sms);
      e = waves / std::ceil(waves);
      best = std::max(best, e);
    }
    eff.push_back(e);
  }
  for (int s = 1; s <= max_splits; ++s)
    if (eligible(s) && eff[size_t(s - 1)] >= 0.85f * best) return s;
  return 1;
}

}  // namespace

Model::Model(const std::filesystem::path& dir, Options opt) : cfg_(models::load_model_config(dir)), opt_(opt) {
  auto ck = models::Checkpoint::open(dir);
  embed_ = load(*ck, "embed_tokens.weight");
  final_norm_ = load(*ck, "norm.weight");
  const int H = cfg_.hidden_size;
  for (int i = 0; i < cfg_.num_layers; ++i) {
    const std::string p = "layers." + std::to_string(i) + ".";
    Layer L;
    L.q = load(*ck, p + "self_attn.q_proj.weight");
    L.k = load(*ck, p + "self_attn.k_proj.weight");
    if (!cfg_.layers[i].k_eq_v) L.v = load(*ck, p + "self_attn.v_proj.weight");
    L.o = load(*ck, p + "self_attn.o_proj.weight");
    L.gate = load(*ck, p + "mlp.gate_proj.weight");
    L.up = load(*ck, p + "mlp.up_proj.weight");
    L.down = load(*ck, p + "mlp.down_proj.weight");
    L.in_norm = load(*ck, p + "input_layernorm.weight");
    L.post_attn = load(*ck, p + "post_attention_layernorm.weight");
    L.pre_ff = load(*ck, p + "pre_feedforward_layernorm.weight");
    L.post_ff = load(*ck, p + "post_feedforward_layernorm.weight");
    L.q_norm = load(*ck, p + "self_attn.q_norm.weight");
    L.k_norm = load(*ck, p + "self_attn.k_norm.weight");
    L.scalar = ck->has(p + "layer_scalar") ? load(*ck, p + "layer_scalar")[0] : 1.f;
    if (int64_t(L.in_norm.size()) != H) throw Error("hf_bf16: unexpected norm size");
    layers_.push_back(std::move(L));

    // Point 5: HF computes inv_freq in fp32 on the host: 1.0 / (θ ** (fp32(2j) / D)).
    const auto& g = cfg_.layers[i];
    const int D = g.head_dim, R = g.rotary_pairs();
    std::vector<float> inv(static_cast<size_t>(D / 2), 0.f);
    for (int j = 0; j < R; ++j) {
      if (opt_.rope_bf16)
        inv[j] = 1.f / std::pow(float(g.rope.theta), float(2 * j) / float(D));
      else
        inv[j] = float(1.0 / std::pow(g.rope.theta, double(2 * j) / double(D)));
    }
    inv_freq_.push_back(std::move(inv));
  }
}

void Model::attend(const float* q, const Seq& seq, int layer, int pos, int prefill_len, float* out) const {
  const auto& g = cfg_.layers[layer];
  const int d = g.head_dim, hkv = g.num_kv_heads, W = g.window;
  const int lo = W > 0 ? std::max(0, pos - W + 1) : 0;
  // kv index = position − base (HF's sliding cache drops the oldest keys in decode).
  int base = 0;
  int bn = 0, splits = 1, bn_split = 0;
  bool reverse = true;
  ExpStyle style = ExpStyle::Flash;
  switch (opt_.attn) {
    case AttnKernel::FinalMax: bn = 1 << 30; break;
    case AttnKernel::Online32: bn = 32; reverse = false; style = ExpStyle::MemEff; break;
    case AttnKernel::HfSdpa: {
      // HF skips the mask (→ is_causal / no mask → flash) unless a sliding layer's kv length
      // reaches the window (masking_utils._ignore_causal_mask_sdpa: kv_length < window); with a
      // mask, sdpa runs the mem-efficient kernel (64 × 64 tiles for d ≤ 64).
      const int kv_len = prefill_len > 0 ? prefill_len : (W > 0 ? std::min(pos, W - 1) + 1 : pos + 1);
      if (prefill_len == 0 && W > 0) base = pos + 1 - kv_len;
      const bool masked = W > 0 && kv_len >= W;
      const int flash_bn = d <= 64 ? 128 : 64;  // Flash_fwd_kernel_traits on sm90
      if (masked) {
        bn = 64;
        reverse = false;
        style = ExpStyle::MemEff;
      } else if (prefill_len > 0) {
        bn = flash_bn;
      } else {
        bn = flash_bn;
        bn_split = d <= 64 ? 256 : d <= 128 ? 128 : 64;
        splits = num_splits_heuristic(hkv, 2 * 132, (kv_len + bn_split - 1) / bn_split, 128);
      }
      break;
    }
  }
  const int hq = cfg_.num_q_heads, grp = hq / hkv;
  for (int h = 0; h < hq; ++h) {
    const int kh = h / grp;
    auto kv = [&](int j) {
      const size_t off = (static_cast<size_t>(j + base) * hkv + kh) * d;
      return std::make_pair(seq.k[layer].data() + off, seq.v[layer].data() + off);
    };
    const float* qh = q + size_t(h) * d;
    if (splits <= 1) {
      finish(run_range(qh, d, lo - base, pos - base, bn, reverse, style, kv), d, out + size_t(h) * d);
      continue;
    }
    // flash-attn 2 split-KV: each split normalizes its own blocks, a combine kernel merges by lse.
    const int nb = (pos - base) / bn_split + 1, per = (nb + splits - 1) / splits;
    std::vector<Acc> parts;
    for (int s = 0; s < splits; ++s) {
      const int k0 = std::max(lo - base, s * per * bn_split), k1 = std::min(pos - base, (s + 1) * per * bn_split - 1);
      if (k0 > k1) continue;
      parts.push_back(run_range(qh, d, k0, k1, bn_split, true, style, kv));
    }
    float lse_max = -INFINITY;
    std::vector<float> lse;
    for (auto& a : parts) {
      lse.push_back(a.m * 1.f + std::log(a.l));
      lse_max = std::max(lse_max, lse.back());
    }
    float sum = 0.f;
    for (float x : lse) sum += std::exp(x - lse_max);
    const float lse_log = std::log(sum) + lse_max;
    std::vector<float> o(static_cast<size_t>(d), 0.f);
    for (size_t s = 0; s < parts.size(); ++s) {
      const float sc = std::exp(lse[s] - lse_log), inv = 1.f / parts[s].l;
      for (int i = 0; i < d; ++i) o[i] += sc * (parts[s].o[i] * inv);
    }
    for (int i = 0; i < d; ++i) out[size_t(h) * d + i] = round_bf16(o[i]);
  }
}

std::vector<float> Model::step(Seq& seq, int id, int prefill_len, bool want_logits) {
  const int H = cfg_.hidden_size, I = cfg_.intermediate_size, hq = cfg_.num_q_heads;
  const float eps = float(cfg_.rms_norm_eps);
  const int pos = seq.len;
  if (seq.k.empty()) {
    seq.k.resize(layers_.size());
    seq.v.resize(layers_.size());
  }
  std::vector<float> h(static_cast<size_t>(H)), a(static_cast<size_t>(H)), t(static_cast<size_t>(H)), g(static_cast<size_t>(I)), u(static_cast<size_t>(I));
  // Point 1.
  const float scale = round_bf16(float(cfg_.embed_scale()));
  for (int i = 0; i < H; ++i) h[i] = round_bf16(embed_[size_t(id) * H + i] * scale);

  for (size_t li = 0; li < layers_.size(); ++li) {
    const Layer& L = layers_[li];
    const auto& geo = cfg_.layers[li];
    const int d = geo.head_dim, hkv = geo.num_kv_heads;
    rms(h.data(), H, L.in_norm.data(), eps, a.data());
    std::vector<float> q(static_cast<size_t>(hq) * d), k(static_cast<size_t>(hkv) * d), v(static_cast<size_t>(hkv) * d);
    linear(L.q, a.data(), H, hq * d, q.data());
    linear(L.k, a.data(), H, hkv * d, k.data());
    if (geo.k_eq_v) v = k;
    else linear(L.v, a.data(), H, hkv * d, v.data());

    // Points 4–5. cos/sin of this position (bf16 when rope_bf16).
    std::vector<float> cs(static_cast<size_t>(d / 2)), sn(static_cast<size_t>(d / 2));
    for (int j = 0; j < d / 2; ++j) {
      const float ang = inv_freq_[li][j] * float(pos);
      cs[j] = std::cos(ang);
      sn[j] = std::sin(ang);
      if (opt_.rope_bf16) {
        cs[j] = round_bf16(cs[j]);
        sn[j] = round_bf16(sn[j]);
      }
    }
    auto norm_rope = [&](float* x, const float* w) {
      std::vector<float> y(static_cast<size_t>(d));
      rms(x, d, w, eps, y.data(), opt_.rope_bf16);
      for (int j = 0; j < d / 2; ++j) {
        const float x1 = y[j], x2 = y[j + d / 2];
        if (opt_.rope_bf16) {
          x[j] = round_bf16(round_bf16(x1 * cs[j]) + round_bf16(-x2 * sn[j]));
          x[j + d / 2] = round_bf16(round_bf16(x2 * cs[j]) + round_bf16(x1 * sn[j]));
        } else {
          x[j] = round_bf16(x1 * cs[j] - x2 * sn[j]);
          x[j + d / 2] = round_bf16(x2 * cs[j] + x1 * sn[j]);
        }
      }
    };
    for (int hh = 0; hh < hq; ++hh) norm_rope(q.data() + size_t(hh) * d, L.q_norm.data());
    for (int hh = 0; hh < hkv; ++hh) {
      norm_rope(k.data() + size_t(hh) * d, L.k_norm.data());
      rms(v.data() + size_t(hh) * d, d, nullptr, eps, v.data() + size_t(hh) * d);
    }
    seq.k[li].insert(seq.k[li].end(), k.begin(), k.end());
    seq.v[li].insert(seq.v[li].end(), v.begin(), v.end());

    std::vector<float> att(static_cast<size_t>(hq) * d);
    attend(q.data(), seq, int(li), pos, prefill_len, att.data());
    linear(L.o, att.data(), hq * d, H, t.data());
    // Point 7.
    rms(t.data(), H, L.post_attn.data(), eps, t.data());
    for (int i = 0; i < H; ++i) h[i] = round_bf16(h[i] + t[i]);
    // Point 8.
    rms(h.data(), H, L.pre_ff.data(), eps, a.data());
    linear(L.gate, a.data(), H, I, g.data(), opt_.mlp_bf16);
    linear(L.up, a.data(), H, I, u.data(), opt_.mlp_bf16);
    for (int i = 0; i < I; ++i)
      g[i] = opt_.mlp_bf16 ? round_bf16(round_bf16(gelu_tanh(g[i])) * u[i]) : round_bf16(gelu_tanh(g[i]) * u[i]);
    linear(L.down, g.data(), I, H, t.data());
    rms(t.data(), H, L.post_ff.data(), eps, t.data());
    // Points 7, 9.
    for (int i = 0; i < H; ++i) h[i] = round_bf16(round_bf16(h[i] + t[i]) * L.scalar);
  }
  seq.len++;
  if (!want_logits) return {};
  // Points 10–11.
  rms(h.data(), H, final_norm_.data(), eps, a.data());
  const int V = cfg_.vocab_size;
  std::vector<float> logits(static_cast<size_t>(V));
  linear(embed_, a.data(), H, V, logits.data(), opt_.softcap_bf16);
  const float cap = float(cfg_.final_logit_softcapping);
  if (cap > 0.f) {
    const float inv_cap = 1.f / cap;
    for (float& x : logits) {
      if (opt_.softcap_bf16)
        x = round_bf16(round_bf16(std::tanh(round_bf16(x * inv_cap))) * cap);
      else
        x = cap * std::tanh(x / cap);
    }
  }
  return logits;
}

std::vector<std::vector<float>> Model::prompt_logits(const std::vector<int>& ids) {
  Seq seq;
  std::vector<std::vector<float>> out;
  for (int id : ids) out.push_back(step(seq, id, int(ids.size()), true));
  return out;
}

std::vector<float> Model::logits_after(const std::vector<int>& prompt, const std::vector<int>& generated) {
  Seq seq;
  std::vector<float> logits;
  for (size_t i = 0; i < prompt.size(); ++i)
    logits = step(seq, prompt[i], int(prompt.size()), i + 1 == prompt.size());
  for (int id : generated) logits = step(seq, id, 0, true);
  return logits;
}

std::vector<int> Model::generate(const std::vector<int>& prompt, int n) {
  Seq seq;
  std::vector<float> logits;
  for (size_t i = 0; i < prompt.size(); ++i)
    logits = step(seq, prompt[i], int(prompt.size()), i + 1 == prompt.size());
  std::vector<int> out;
  for (int k = 0; k < n; ++k) {
    // Point 12: first maximal id.
    const int next = int(std::max_element(logits.begin(), logits.end()) - logits.begin());
    out.push_back(next);
    if (k + 1 < n) logits = step(seq, next, 0, true);
  }
  return out;
}

}  // namespace g4c::bf16emu

// A test-only, deliberately plain CPU forward of a Gemma 4 text model that rounds to bf16 at
// exactly the points where Hugging Face transformers 5.17 (torch 2.11, CUDA) does in a bf16 run.
// It exists to prove the rounding-point list below against the HF bf16 goldens before the CUDA
// kernels follow it; it is not a runtime backend (no batching, one token at a time, fp32 weights).
//
// HF bf16 rounding points (modeling_gemma4.py; every tensor between ops is bf16):
//  1. embed:   h = bf16(E[id] · bf16(sqrt(H)))                  (Gemma4TextScaledWordEmbedding)
//  2. RMSNorm: bf16((x·(mean(x²)+eps)^-½)·w) computed in fp32    (Gemma4RMSNorm, type_as)
//  3. every Linear: fp32 accumulate of bf16 operands, output rounded to bf16
//  4. q/k norm: bf16 (point 2, per head); v_norm: bf16(x·r) (no weight)
//  5. RoPE: inv_freq fp32 = 1/fp32pow(θ, fp32(2j)/D) (0 for proportional pairs j ≥ R);
//     angle = fp32(inv_freq·pos); cos, sin = bf16(cosf), bf16(sinf)   (rotary_emb .to(bf16))
//     out_j = bf16(bf16(x_j·c) + bf16(−x_{j+D/2}·s)), out_{j+D/2} = bf16(bf16(x_{j+D/2}·c) + bf16(x_j·s))
//  6. attention (sdpa → torch flash / mem-efficient kernels): S = q·k fp32, P = exp(S − m) fp32
//     rounded to bf16 for P·V (m: the kernel's running max, see AttnKernel), O = Σ bf16(P)·v in
//     fp32, out = bf16(O / Σ P) with Σ P over the fp32 P
//  7. residual: h = bf16(h + bf16(rms(x, w_post)))
//  8. MLP: g = bf16(x·Wg), u = bf16(x·Wu), a = bf16(gelu_tanh(g)), y = bf16(a·u), then Linear
//  9. layer end: h = bf16(h · layer_scalar)  (bf16 buffer)
// 10. final norm: point 2; logits = bf16(x·Eᵀ)
// 11. softcap, three bf16 ops: bf16(bf16(tanh(bf16(l·fp32(1/30)))) · 30)  (torch divides a
//     tensor by a CPU scalar as a multiply by its fp32 reciprocal)
// 12. greedy: argmax over the bf16 logits, ties → the smallest id (torch.argmax)
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include "models/config.h"

namespace g4c::bf16emu {

// How the attention kernel forms P before rounding it to bf16 (point 6).
enum class AttnKernel {
  HfSdpa,    // what torch 2.11 sdpa runs in HF's bf16 generation on an H200 (see attend()):
             // flash-attn 2 (key blocks of 128 for d=64, 64 for d=128, processed last block
             // first, split-KV for decode past 128 keys) when HF skips the mask, the
             // mem-efficient kernel (64-key blocks, first block first) when it passes one
  FinalMax,  // one pass with the row's true max (what a single key block gives)
  Online32,  // 32-key tiles, first tile first, P = exp2(s·log2e − m) (g4c's CUDA kernel before)
};

struct Options {
  AttnKernel attn = AttnKernel::HfSdpa;
  bool rope_bf16 = true;     // point 5; false: normed q/k and cos/sin in fp32, one rounding at the end
  bool mlp_bf16 = true;      // point 8; false: bf16(gelu(g)·u) from fp32 g, u (one rounding)
  bool softcap_bf16 = true;  // points 10–11; false: fp32 logits and fp32 softcap
};

class Model {
 public:
  Model(const std::filesystem::path& dir, Options opt);
  const models::ModelConfig& config() const { return cfg_; }

  // Logits (softcapped) of every position of one prompt run as a single prefill.
  std::vector<std::vector<float>> prompt_logits(const std::vector<int>& ids);
  // Greedy generation of n tokens after the prompt (HF generate: prefill, then one token per step).
  std::vector<int> generate(const std::vector<int>& prompt, int n);
  // The logits generate() sees after the prompt and then `generated` fed one token per step.
  std::vector<float> logits_after(const std::vector<int>& prompt, const std::vector<int>& generated);

 private:
  struct Layer {
    std::vector<float> q, k, v, o, gate, up, down;  // [out][in]
    std::vector<float> in_norm, post_attn, pre_ff, post_ff, q_norm, k_norm;
    float scalar = 1.f;
  };
  struct Seq {
    std::vector<std::vector<float>> k, v;  // per layer: [pos][hkv][d]
    int len = 0;
  };
  // One token at position seq.len; `prefill_len` > 0 while inside a prefill of that many tokens
  // (selects the attention kernel HF would use); returns logits when `want_logits`.
  std::vector<float> step(Seq& seq, int id, int prefill_len, bool want_logits);
  void attend(const float* q, const Seq& seq, int layer, int pos, int prefill_len, float* out) const;

  models::ModelConfig cfg_;
  Options opt_;
  std::vector<float> embed_, final_norm_;
  std::vector<Layer> layers_;
  std::vector<std::vector<float>> inv_freq_;  // per layer, D/2
};

float round_bf16(float x);

}  // namespace g4c::bf16emu

#!/usr/bin/env python3
"""On the GPU host: g4c's last-position logits on the synthetic Gemma-4-12B vs
Hugging Face transformers (bf16) on the same weights.

  check_12b_logits.py --bf16 DIR --int4 DIR --ids IDS.jsonl --g4c-bf16 PREFIX --g4c-int4 PREFIX --out OUT.json

PREFIX.<i>.f32 are written by `g4c_bench_cudart logits` (bench/cuda/bench_cudart.cpp) (262144 fp32 each, softcapped). HF runs
Gemma4ForCausalLM in bfloat16 with logits_to_keep=1:
  * on the BF16 checkpoint (reference for the g4c BF16 run);
  * on a fake-quant BF16 model built from the INT4 checkpoint itself: every Linear dequantized as
    w = (code - z) * s (z = 8 when symmetric; DESIGN.md §3 layout), rounded once to bf16, every
    other tensor taken as stored (reference for the g4c INT4 run).
Criterion: cosine >= 0.999 per prompt. Also reported: top-1 agreement, max |dlogit|.
"""
import argparse, json, os
import numpy as np
import torch
from safetensors import safe_open
from transformers import Gemma4ForCausalLM


def last_logits(model, seqs):
    out = []
    with torch.no_grad():
        for ids in seqs:
            x = torch.tensor([ids], device="cuda")
            out.append(model(input_ids=x, logits_to_keep=1).logits[0, -1].float().cpu().numpy())
    return out


def int4_tensors(d):
    idx = os.path.join(d, "model.safetensors.index.json")
    files = sorted(set(json.load(open(idx))["weight_map"].values())) if os.path.exists(idx) else ["model.safetensors"]
    t = {}
    for f in files:
        with safe_open(os.path.join(d, f), "pt") as h:
            for k in h.keys():
                t[k] = h.get_tensor(k)
    return t


def dequant(t, base, in_features, group, symmetric):
    q = t[base + ".qweight"].cuda()
    codes = torch.stack([q & 15, q >> 4], dim=-1).reshape(q.shape[0], -1).float()
    s = t[base + ".scales"].cuda().float().repeat_interleave(group, dim=1)
    z = 8.0 if symmetric else t[base + ".zeros"].cuda().float().repeat_interleave(group, dim=1)
    return ((codes - z) * s)[:, :in_features].to(torch.bfloat16)


def make_fake_quant(model, int4_dir):
    """Overwrites the (BF16-checkpoint) model's parameters in place with the INT4 checkpoint's:
    Linears dequantized, everything else as stored. Every parameter must be found."""
    man = json.load(open(os.path.join(int4_dir, "manifest.json")))["modules"]
    t = int4_tensors(int4_dir)
    done = 0
    with torch.no_grad():
        for k, p in model.named_parameters():
            short = k
            for pre in ("model.language_model.", "model."):
                if short.startswith(pre):
                    short = short[len(pre):]
                    break
            base = short[: -len(".weight")] if short.endswith(".weight") else None
            if base and base + ".qweight" in t:
                m = man[base]
                p.copy_(dequant(t, base, p.shape[1], int(m["group_size"]), bool(m["symmetric"])))
            elif short in t:
                p.copy_(t[short].to(p.dtype))
            elif k == "lm_head.weight":
                continue  # tied to the embedding
            else:
                raise SystemExit("fake-quant: no tensor for " + k)
            done += 1
        for k, b in model.named_buffers():  # persistent buffers stored in the checkpoint (e.g. layer_scalar)
            short = k.split("model.", 1)[-1].replace("language_model.", "", 1)
            if short in t and t[short].shape == b.shape:
                b.copy_(t[short].to(b.dtype))
                done += 1
    print("fake-quant: %d tensors from %s" % (done, int4_dir))
    return model


def compare(name, refs, prefix):
    rows = []
    for i, r in enumerate(refs):
        g = np.fromfile("%s.%d.f32" % (prefix, i), dtype=np.float32)
        cos = float(np.dot(g, r) / (np.linalg.norm(g) * np.linalg.norm(r)))
        rows.append({"prompt": i, "cosine": cos, "top1_equal": bool(g.argmax() == r.argmax()),
                     "max_abs_dlogit": float(np.abs(g - r).max()), "ref_top1": int(r.argmax()), "g4c_top1": int(g.argmax())})
        print("%s prompt %d: cosine %.6f top1 %s max|d| %.4f" % (name, i, cos, rows[-1]["top1_equal"], rows[-1]["max_abs_dlogit"]))
    return rows


def main():
    p = argparse.ArgumentParser()
    for a in ("--bf16", "--int4", "--ids", "--g4c-bf16", "--g4c-int4", "--out"):
        p.add_argument(a)
    p.add_argument("--max", type=int, default=3)
    a = p.parse_args()
    seqs = [json.loads(l)["input_ids"] for l in open(a.ids) if l.strip()][: a.max]
    res = {"prompt_tokens": [len(s) for s in seqs], "criterion": "cosine >= 0.999"}
    m = Gemma4ForCausalLM.from_pretrained(a.bf16, dtype=torch.bfloat16).cuda().eval()
    if a.g4c_bf16:
        res["bf16_vs_hf"] = compare("bf16 vs HF", last_logits(m, seqs), a.g4c_bf16)
    if a.int4 and a.g4c_int4:
        make_fake_quant(m, a.int4)
        res["int4_vs_fake_quant_hf"] = compare("int4 vs fake-quant HF", last_logits(m, seqs), a.g4c_int4)
    cos = [r["cosine"] for k in ("bf16_vs_hf", "int4_vs_fake_quant_hf") for r in res.get(k, [])]
    res["pass"] = bool(cos) and min(cos) >= 0.999
    json.dump(res, open(a.out, "w"), indent=1)
    print("min cosine %.6f -> %s" % (min(cos) if cos else float("nan"), "PASS" if res["pass"] else "FAIL"))


if __name__ == "__main__":
    main()

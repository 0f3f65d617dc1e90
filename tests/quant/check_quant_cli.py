#!/usr/bin/env python3
"""End-to-end checks of `g4c eval` and `g4c quantize` on models/gemma4-tiny (CPU).

usage: check_quant_cli.py G4C_BINARY CASE WORKDIR
  eval_golden   NLL of the three golden prompts vs the per-position NLL of the Hugging
                Face fp32 golden logits (p{i}.nll_fp32 of the vendored
                tests/data/golden/gemma4-tiny/golden_logits.safetensors); token counts
                exact (BOS tokenization); chunk sizes 128 / 16 / 1 agree; quality JSON
                schema and dataset_sha256 (vs hashlib).
  int4_vs_fake  INT4 checkpoints (RTN asym g64, small-calibration GPTQ sym g128) load
                and give the same NLL as the fake-quantized F32 weights (quantized on
                another thread count); the manifest
                and tensor shapes follow DESIGN.md §3; GPTQ beats RTN on held-out text.
  awq_gptaq     --awq with --gptaq: the full-precision reference model gets the same AWQ
                folds, so layer 0 (the same inputs in both models) is quantized exactly as
                without --gptaq, while later layers differ (GPTAQ at work).
Needs G4C_SOURCE_DIR (defaults to the repository holding this file).
"""
import array, hashlib, json, math, os, struct, subprocess, sys

SKIP = 77
g4c, case, work = sys.argv[1], sys.argv[2], sys.argv[3]
src = os.environ.get("G4C_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
model = os.path.join(src, "models", "gemma4-tiny")
os.makedirs(work, exist_ok=True)
env = dict(os.environ, G4C_NO_PROGRESS="1")


def run(*args):
    r = subprocess.run([g4c, *args], env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"FAIL: g4c {' '.join(args)} exited {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r


def check(cond, msg):
    if not cond:
        sys.exit("FAIL: " + msg)
    print("ok:", msg)


def read_safetensors(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    return b, h, 8 + n


def tensor(b, h, base, key):
    e = h[key]
    s, t = e["data_offsets"]
    a = array.array({"F32": "f", "I32": "i"}[e["dtype"]])
    a.frombytes(b[base + s:base + t])
    return a, e["shape"]


def evaluate(model_dir, dataset, out, *extra):
    run("eval", "--model", model_dir, "--dataset", dataset, "--output", out, *extra)
    return json.load(open(out))


if case == "eval_golden":
    gold = os.path.join(src, "tests", "data", "golden", "gemma4-tiny")
    b, h, base = read_safetensors(os.path.join(gold, "golden_logits.safetensors"))
    gen = json.load(open(os.path.join(gold, "golden_generate.json")))
    prompts = []
    for e in gen:  # the first three distinct prompts are p0..p2 of golden_logits
        if e["prompt"] not in prompts:
            prompts.append(e["prompt"])
    ref_sum, ref_tokens = 0.0, 0
    for i in range(3):
        ids, _ = tensor(b, h, base, f"p{i}.input_ids")
        nll, _ = tensor(b, h, base, f"p{i}.nll_fp32")  # -log softmax(HF fp32 logits)[next id]
        check(list(ids) == [e for e in gen if e["prompt"] == prompts[i]][0]["prompt_ids"], f"p{i} ids are prompt {i}")
        check(len(nll) == len(ids) - 1, f"p{i}: one NLL per predicted token")
        ref_sum += math.fsum(nll)
        ref_tokens += len(ids) - 1
    ds = os.path.join(work, "golden3.jsonl")
    with open(ds, "w", encoding="utf-8") as f:
        for p in prompts[:3]:
            f.write(json.dumps({"text": p}) + "\n")
    res = {}
    for chunk in (128, 16, 1):
        res[chunk] = evaluate(model, ds, os.path.join(work, f"golden3-c{chunk}.json"), "--chunk-size", str(chunk))
    q = res[128]
    check(q["token_count"] == ref_tokens, f"token_count {q['token_count']} == {ref_tokens} (BOS + golden ids)")
    check(q["sequence_count"] == 3, "sequence_count 3")
    # The fp32 CPU logits match HF fp32 to ≤2e-3 (test_golden's bound); the NLL, an average
    # of log-softmax differences, then agrees to ~1e-4 per token. 5e-4 leaves margin
    # while still catching a wrong softcap (≈1e-2) or a missing layer_scalar (≫1).
    check(abs(q["mean_nll"] - ref_sum / ref_tokens) < 5e-4,
          f"mean NLL {q['mean_nll']:.6f} vs HF fp32 goldens {ref_sum / ref_tokens:.6f}")
    for chunk in (16, 1):  # same math in another order: fp32 rounding only
        check(abs(res[chunk]["nll_sum"] - q["nll_sum"]) < 1e-5 * q["nll_sum"],
              f"chunk {chunk} nll_sum {res[chunk]['nll_sum']:.6f} == chunk 128 {q['nll_sum']:.6f}")
    check(q["dataset_sha256"] == hashlib.sha256(open(ds, "rb").read()).hexdigest(), "dataset_sha256 (hashlib)")
    lab = os.path.join(src, "datasets", "lab", "quality_public.jsonl")
    ql = evaluate(model, lab, os.path.join(work, "lab1.json"), "--limit", "1", "--max-sequence-length", "64")
    ref = json.load(open(os.path.join(src, "datasets", "lab", "reference", "bf16-public-quality.json")))
    check(ql["dataset_sha256"] == ref["dataset_sha256"], "dataset_sha256 of the lab set equals the lab's")
    for k in ("schema_version", "model", "dataset", "dataset_sha256", "chunk_size", "nll_sum", "token_count",
              "sequence_count", "mean_nll", "perplexity", "by_bucket"):
        check(k in q, f"quality JSON has {k}")
    check(q["schema_version"] == 2 and abs(q["perplexity"] - math.exp(q["mean_nll"])) < 1e-9, "schema 2, perplexity")
    check(sum(v["token_count"] for v in q["by_bucket"].values()) == q["token_count"], "buckets sum to the total")
    t1 = evaluate(model, ds, os.path.join(work, "golden3-t1.json"), "--threads", "1")
    t2 = evaluate(model, ds, os.path.join(work, "golden3-t2.json"), "--threads", "2")
    # Each sequence is scored whole by one worker and the sums are added in dataset order:
    # the thread count must not change a single bit.
    check(t1["nll_sum"] == t2["nll_sum"] == q["nll_sum"],
          f"--threads 1 nll_sum {t1['nll_sum']!r} == --threads 2 {t2['nll_sum']!r} == default {q['nll_sum']!r}")
    withref = evaluate(model, ds, os.path.join(work, "golden3-ref.json"), "--reference", os.path.join(work, "golden3-c16.json"))
    check(abs(withref["delta_nll"] - (withref["mean_nll"] - res[16]["mean_nll"])) < 1e-12 and
          withref["reference_mean_nll"] == res[16]["mean_nll"], "--reference gives reference_mean_nll and delta_nll")
    # Per-sequence sums, added in dataset order to nll_sum: Python's left-to-right sum of the same
    # doubles (JSON keeps them exact) is the same number to the bit.
    check(len(q["sequence_nll"]) == 3 and sum(q["sequence_nll"]) == q["nll_sum"] and
          sum(q["sequence_tokens"]) == q["token_count"], "sequence_nll / sequence_tokens add up to the totals")
    # The paired standard error of ΔNLL (ratio estimator over sequences), recomputed in float64
    # against a model that differs per sequence (the INT8 table); only the order of the sums
    # differs, so 1e-9 relative.
    i8 = evaluate(model, ds, os.path.join(work, "golden3-i8.json"), "--table-dtype", "int8",
                  "--reference", os.path.join(work, "golden3-c128.json"))
    d = [a - b for a, b in zip(i8["sequence_nll"], q["sequence_nll"])]
    n = i8["sequence_tokens"]
    delta = sum(d) / sum(n)
    se = math.sqrt(len(d) / (len(d) - 1) * sum((x - delta * t) ** 2 for x, t in zip(d, n))) / sum(n)
    check(se > 0 and i8["paired_sequences"] == 3 and abs(i8["delta_nll_se"] - se) <= 1e-9 * se,
          f"delta_nll_se {i8['delta_nll_se']!r} == float64 {se!r}")
    lo, hi = i8["delta_nll_ci95"]
    check(abs(lo - (delta - 1.96 * se)) <= 1e-9 * se and abs(hi - (delta + 1.96 * se)) <= 1e-9 * se,
          "ci95 = ΔNLL ± 1.96 SE")
    # A reference of other sequences (the lab's file: no per-sequence NLLs) gives ΔNLL alone.
    lab_ref = os.path.join(src, "datasets", "lab", "reference", "bf16-public-quality.json")
    qr = evaluate(model, ds, os.path.join(work, "golden3-labref.json"), "--reference", lab_ref)
    check("delta_nll" in qr and "delta_nll_se" not in qr, "no paired error against other sequences")
    sys.exit(0)

if case == "int4_vs_fake":
    quality = os.path.join(src, "datasets", "quality_public.jsonl")
    calib = os.path.join(src, "datasets", "calibration-256.jsonl")
    sub = ["--limit", "4", "--max-sequence-length", "384"]
    nll = {}
    for tag, args in (("rtn-asym-g64", ["--method", "rtn", "--asymmetric", "--group-size", "64"]),
                      ("gptq-sym-g128", ["--method", "gptq", "--symmetric", "--group-size", "128",
                                         "--calibration", calib, "--calibration-samples", "16",
                                         "--calibration-length", "256"]),
                      ("gptq-asym-g128-ts", ["--method", "gptq", "--asymmetric", "--true-sequential",
                                             "--calibration", calib, "--calibration-samples", "16",
                                             "--calibration-length", "256"]),
                      ("rtn-sym-g128", ["--method", "rtn", "--group-size", "128"])):
        q4 = os.path.join(work, tag)
        fake = os.path.join(work, tag + "-fake")
        # Different thread counts: the CPU kernels split work by output tiles only, so the
        # GPTQ result (and hence the NLL below) must not depend on them.
        run("quantize", "--model", model, *args, "--threads", "2", "-o", q4)
        run("quantize", "--model", model, *args, "--threads", "1", "--fake-quant", "-o", fake)
        man = json.load(open(os.path.join(q4, "manifest.json")))
        check(man["format_version"] == 1 and len(man["modules"]) == 82, f"{tag}: manifest with 82 Linears (12×7 − 2 v_proj)")
        m = man["modules"]["layers.5.mlp.down_proj"]
        G = m["group_size"]
        check(m["qweight_shape"] == [256, 512] and m["scales_shape"] == [256, 1024 // G] and m["bits"] == 4 and
              m["packing"] == "uint8_little_nibble", f"{tag}: down_proj shapes (padded_in 1024, G {G})")
        check((m["zeros_key"] is None) == m["symmetric"], f"{tag}: zeros only when asymmetric")
        idx = json.load(open(os.path.join(q4, "model.safetensors.index.json")))["weight_map"]
        check(not any(k.endswith("q_proj.weight") for k in idx) and any(k.endswith("embed_tokens.weight") for k in idx),
              f"{tag}: Linears replaced by qweight/scales; embedding kept")
        for f in ("tokenizer.json", "config.json", "quantization_config.json"):
            check(os.path.exists(os.path.join(q4, f)), f"{tag}: {f} present")
        a = evaluate(q4, quality, os.path.join(work, tag + ".json"), *sub)
        b = evaluate(fake, quality, os.path.join(work, tag + "-fake.json"), *sub)
        # Same fp32 weights (INT4 dequantized at load vs stored dequantized, quantized on 2 vs
        # 1 threads): identical math.
        check(a["nll_sum"] == b["nll_sum"], f"{tag}: INT4 NLL {a['mean_nll']:.6f} == fake-quant {b['mean_nll']:.6f}")
        nll[tag] = a["mean_nll"]
    base = evaluate(model, quality, os.path.join(work, "bf16.json"), *sub)["mean_nll"]
    # Quantization costs NLL; GPTQ (even with 16×256 calibration tokens) loses less than RTN.
    check(base < nll["gptq-sym-g128"] < nll["rtn-sym-g128"],
          f"bf16 {base:.4f} < gptq sym {nll['gptq-sym-g128']:.4f} < rtn sym {nll['rtn-sym-g128']:.4f}")
    qc = json.load(open(os.path.join(work, "gptq-sym-g128", "quantization_config.json")))
    check(len(qc["layers"]) == 82 and all(l["predicted_loss"] > 0 for l in qc["layers"]) and
          qc["calibration"]["samples"] == 16, "gptq per-layer metadata (objective, dead columns, time)")
    ts = json.load(open(os.path.join(work, "gptq-asym-g128-ts", "quantization_config.json")))
    check(ts["true_sequential"] is True and qc["true_sequential"] is False, "true_sequential recorded")
    # GPTQ-only flags on RTN are refused with a message, and nothing is written.
    bad = os.path.join(work, "rtn-act-order")
    r = subprocess.run([g4c, "quantize", "--model", model, "--method", "rtn", "--act-order", "-o", bad],
                       env=env, capture_output=True, text=True)
    check(r.returncode != 0 and "--act-order is a GPTQ option" in r.stderr and not os.path.exists(bad),
          "rtn --act-order refused: " + r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "no message")
    sys.exit(0)

if case == "awq_gptaq":
    calib = os.path.join(src, "datasets", "calibration-256.jsonl")
    common = ["--method", "gptq", "--asymmetric", "--clip", "none", "--awq", "--awq-grid", "4", "--calibration",
              calib, "--calibration-samples", "6", "--calibration-length", "96", "--fake-quant"]
    tensors = {}
    for tag, extra in (("awq", []), ("awq-gptaq", ["--gptaq"])):
        out = os.path.join(work, tag)
        run("quantize", "--model", model, *common, *extra, "-o", out)
        t = {}
        for f in sorted(os.listdir(out)):
            if f.endswith(".safetensors"):
                b, h, base = read_safetensors(os.path.join(out, f))
                for k, e in h.items():
                    if k != "__metadata__":
                        t[k] = b[base + e["data_offsets"][0]:base + e["data_offsets"][1]]
        tensors[tag] = t
    qc = json.load(open(os.path.join(work, "awq-gptaq", "quantization_config.json")))
    check(qc["gptaq"] is True and qc["awq"]["grid"] == 4, "awq + gptaq recorded")
    # The check below means something only if layer 0's inputs were rescaled (α > 0 on a norm).
    folded0 = [x for x in qc["awq"]["sites"] if x["layer"] == 0 and x["alpha"] > 0 and "layernorm" in x["producer"]]
    check(len(folded0) > 0, f"layer 0 has a norm fold with alpha > 0 ({len(folded0)} sites)")
    a, g = tensors["awq"], tensors["awq-gptaq"]
    check(a.keys() == g.keys(), "same tensors with and without --gptaq")
    l0 = [k for k in a if ".layers.0." in k or k.startswith("layers.0.")]
    check(len(l0) >= 9 and all(a[k] == g[k] for k in l0),
          f"layer 0 ({len(l0)} tensors, folded norms included) bitwise equal with --gptaq: the reference has the folds")
    later = [k for k in a if k.endswith("_proj.weight") and k not in l0 and a[k] != g[k]]
    check(len(later) > 0, f"{len(later)} Linears past layer 0 differ with --gptaq")
    sys.exit(0)

sys.exit(f"unknown case {case}")

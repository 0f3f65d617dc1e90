#!/usr/bin/env python3
"""Side-by-side markdown table of g4c bench reports and hf_peer.py summaries (issue 8).

  bench_table.py RESULTS_DIR      (files: g4c_<ds>_<full|emulated>.json, hf_<ds>_<batched|serial>.json,
                                    *.skip with the reason a run was skipped, <step>.rc exit codes,
                                    device.txt, date.txt, hf_versions.txt)
"""
import json, os, sys

d = sys.argv[1]


def load(name):
    p = os.path.join(d, name)
    return json.load(open(p)) if os.path.exists(p) else None


def text(name, default=""):
    p = os.path.join(d, name)
    return open(p).read().strip() if os.path.exists(p) else default


def status(step):
    skip = text(step + ".skip")
    if skip:
        return skip
    rc = text(step + ".rc")
    if rc == "124":
        return "failed: timed out (see %s.log)" % step
    return ("failed: exit %s (see %s.log)" % (rc, step)) if rc else "not run"


def ms(x):
    return "%.1f" % (1e3 * x)


print("Device: %s; date %s; %s" % (text("device.txt", "?"), text("date.txt", "?"), text("hf_versions.txt", "HF versions ?")))
print()
print("| dataset | system | weights | configuration | requests | new tokens | elapsed s (median [min–max]) "
      "| tokens/s | TTFT p50 / p99 ms | TPOT p50 / p99 ms | peak device MiB | prefill / decode roofline |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
# Result files are g4c_<ds>_<mode>.json / hf_<ds>_<mode>.json (+ .rc/.skip/.log of the same step);
# other files (hf_versions.txt, g4c_public_trace_summary.json) name no dataset.
datasets = sorted({f.split("_")[1] for f in os.listdir(d)
                   if f.startswith(("g4c_", "hf_")) and f.count("_") == 2
                   and f.rsplit("_", 1)[1].split(".")[0] in ("full", "emulated", "batched", "serial")})
for ds in datasets:
    for mode in ("full", "emulated"):
        step = "g4c_%s_%s" % (ds, mode)
        r = load(step + ".json")
        cfg = "H200, --budget 9984MiB" if mode == "full" else "--emulate 1g.10gb (16 SMs, 9984 MiB)"
        if r is None:
            print("| %s | g4c | INT4 g128 | %s | | | %s | | | | | |" % (ds, cfg, status(step)))
            continue
        cfg += ", batch %d" % r["options"]["batch_size"]
        e = r["elapsed_s"]
        ph = r["phases"]
        print("| %s | g4c | INT4 g128 | %s | %d | %d | %.2f [%.2f–%.2f] (%d runs) | %.1f | %s / %s | %s / %s | %.0f | %.1f%% / %.1f%% |" % (
            ds, cfg, r["requests"], r["generated_tokens"], e["median"], e["min"], e["max"], len(r["runs"]),
            r["generated_tokens_per_s"], ms(r["ttft_s"]["p50"]), ms(r["ttft_s"]["p99"]), ms(r["tpot_s"]["p50"]),
            ms(r["tpot_s"]["p99"]), r["peak_device_bytes"] / 2**20, 100 * ph["prefill"]["roofline_fraction"],
            100 * ph["decode"]["roofline_fraction"]))
    for mode in ("batched", "serial"):
        step = "hf_%s_%s" % (ds, mode)
        r = load(step + ".json")
        cfg = "transformers generate, %s" % ("all requests at once, left-padded" if mode == "batched" else "one request at a time")
        if r is None:
            print("| %s | HF | BF16 | %s | | | %s | | | | | |" % (ds, cfg, status(step)))
            continue
        print("| %s | HF | BF16 | %s | %d | %d | %.2f (1 run) | %.1f | – | – | %.0f (allocated) | – |" % (
            ds, cfg, r["requests"], r["generated_tokens"], r["elapsed_s"], r["generated_tokens_per_s"],
            r["peak_allocated_bytes"] / 2**20))
print()
print("g4c: `g4c bench --ignore-eos` (warm-up, then timed runs of the whole workload in one process; "
      "TTFT/TPOT pooled over the timed runs; roofline = max(FLOPs/peak, bytes/peak)/elapsed with DESIGN.md §5 "
      "ceilings). HF: `hf_peer.py run` (greedy, exactly max_new_tokens, one warm-up generate). "
      "Both read the same requests file (input_ids pre-tokenized with the synth tokenizer, BOS first, "
      "when the tokenizers package is there; else the prompt text).")

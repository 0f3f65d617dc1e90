#!/usr/bin/env python3
"""End-to-end `g4c bench` on models/gemma4-tiny + datasets/performance_small.jsonl (CPU backend).

  check_bench_cli.py G4C CASE WORKDIR
  report:   --repeat 3 --warmup 1 --warmup-requests 1 --ignore-eos: report fields present and consistent (min <= median <=
            max, median is the middle of the recorded runs, tokens/s = generated/elapsed per run and
            for the median, TTFT/TPOT p50 <= p99), 3 runs + 3 prefill runs recorded, greedy token ids
            identical across repeats (same count and FNV hash), generated tokens = sum of the
            requests' max_new_tokens (independent: read from the jsonl), FLOP/byte fields.
  plot:     --repeat 1 --warmup 0 --plot: a valid PNG (signature, IHDR dims, every chunk CRC via
            zlib.crc32, IDAT inflated by zlib to h*(1+3w) bytes, filter bytes 0, more than 2
            colours), then --plot-only --compare of that report redraws it.
  bad_args: --repeat 0 and a missing --input file exit non-zero with a message naming the problem.
"""
import json, os, struct, subprocess, sys, zlib

g4c, case, work = sys.argv[1], sys.argv[2], sys.argv[3]
src = os.environ.get("G4C_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
model = os.path.join(src, "models", "gemma4-tiny")
data = os.path.join(src, "datasets", "performance_small.jsonl")
os.makedirs(work, exist_ok=True)
env = dict(os.environ, G4C_NO_PROGRESS="1")
fails = []


def check(cond, what):
    if not cond:
        fails.append(what)
        print("FAIL:", what)


def bench(*extra, expect_ok=True):
    cmd = [g4c, "bench", "--model", model, "--input", data, "--threads", "2", *extra]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=240)
    if expect_ok and p.returncode != 0:
        print(p.stdout, p.stderr)
        sys.exit(f"g4c bench failed ({p.returncode}): {' '.join(cmd)}")
    return p


def close(a, b, rel=1e-9):  # values recomputed from the same doubles: only rounding differs
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-300)


if case == "report":
    rep_path = os.path.join(work, "report.json")
    bench("--repeat", "3", "--warmup", "1", "--warmup-requests", "1", "--ignore-eos", "--report", rep_path)
    r = json.load(open(rep_path))
    for k in ["runs", "prefill_runs", "elapsed_s", "generated_tokens", "generated_tokens_per_s", "ttft_s", "tpot_s", "itl_s",
              "peak_device_bytes", "peak_rss_bytes", "ceilings", "phases", "device", "date", "requests"]:
        check(k in r, f"report has {k}")
    reqs = [json.loads(l) for l in open(data) if l.strip()]
    want_gen = sum(int(q.get("max_new_tokens", 32)) for q in reqs)
    check(r["requests"] == len(reqs), "requests counted")
    check(len(r["runs"]) == 3 and len(r["prefill_runs"]) == 3, "3 timed runs and 3 prefill runs recorded")
    els = sorted(x["elapsed_s"] for x in r["runs"])
    e = r["elapsed_s"]
    check(e["min"] <= e["median"] <= e["max"], "min <= median <= max")
    check(e["min"] == els[0] and e["max"] == els[-1] and e["median"] == els[1], "elapsed stats are the runs'")
    for x in r["runs"]:
        check(x["generated_tokens"] == want_gen, f"--ignore-eos generates every max_new_tokens ({x['generated_tokens']} vs {want_gen})")
        check(close(x["generated_tokens_per_s"], x["generated_tokens"] / x["elapsed_s"]), "run tokens/s = generated/elapsed")
        check(x["ttft_p50_s"] <= x["ttft_p99_s"] and x["tpot_p50_s"] <= x["tpot_p99_s"] and
              x["itl_p50_s"] <= x["itl_p99_s"], "run percentiles ordered")
    check(len({x["tokens_fnv1a"] for x in r["runs"]}) == 1, "greedy token ids identical across repeats")
    check(all(x["generated_tokens"] == len(reqs) for x in r["prefill_runs"]), "prefill runs generate one token each")
    check(close(r["generated_tokens_per_s"], r["generated_tokens"] / e["median"]), "tokens/s = generated/median")
    check(0 < r["ttft_s"]["p50"] <= r["ttft_s"]["p99"], "TTFT p50 <= p99")
    check(0 < r["tpot_s"]["p50"] <= r["tpot_s"]["p99"], "TPOT p50 <= p99")
    check(0 < r["itl_s"]["p50"] <= r["itl_s"]["p99"], "ITL p50 <= p99")
    check(r["peak_rss_bytes"] > 0, "peak RSS recorded")
    c = r["ceilings"]
    check(c["flops_per_s"] > 0 and c["bytes_per_s"] > 0 and "measured" in c["flops_source"], "CPU ceilings measured")
    ph = r["phases"]
    check(ph["decode"]["tokens"] == want_gen - len(reqs), "decode feeds generated - 1 tokens per request")
    check(ph["prefill"]["tokens"] == r["prompt_tokens"] > 0, "prefill feeds every prompt token")
    for name, p in ph.items():
        check(p["flops"] > 0 and p["bytes"] > 0, f"{name}: FLOPs and bytes counted")
        check(close(p["flops"], p["linear_flops"] + p["attention_flops"]), f"{name}: flops = linear + attention")
        check(close(p["bytes"], p["weight_bytes"] + p["kv_bytes"]), f"{name}: bytes = weights + KV")
        t = max(p["flops"] / c["flops_per_s"], p["bytes"] / c["bytes_per_s"])
        check(close(p["roofline_time_s"], t), f"{name}: roofline time = max(FLOPs/peak, bytes/peak)")
        if p["elapsed_s"] > 0:
            check(close(p["roofline_fraction"], t / p["elapsed_s"]), f"{name}: fraction = roofline/elapsed")
    pre_med = sorted(x["elapsed_s"] for x in r["prefill_runs"])[1]
    check(close(ph["prefill"]["elapsed_s"], pre_med), "prefill time = median of the prefill-only runs")
    check(close(ph["decode"]["elapsed_s"], max(0.0, e["median"] - pre_med), 1e-6), "decode time = median - prefill")
    check(ph["prefill"]["steps_modelled"] == r["prefill_runs"][0]["steps"], "prefill steps = measured prefill-only steps")
    check(ph["prefill"]["steps_modelled"] + ph["decode"]["steps_modelled"] >= r["runs"][0]["steps"], "steps cover the run")
    # Pure decode steps by batch size, over the 3 timed runs: ranges in order and disjoint, each
    # a share of the runs' steps and of their decode tokens; a step's time is part of a run's.
    db = r["decode_by_batch"]
    check(len(db) > 0, "decode steps by batch reported")
    check(all(a["rows_max"] < b["rows_min"] for a, b in zip(db, db[1:])), "batch ranges ordered and disjoint")
    check(sum(b["steps"] for b in db) <= sum(x["steps"] for x in r["runs"]), "decode steps within the runs' steps")
    check(sum(b["tokens"] for b in db) <= 3 * (want_gen - len(reqs)), "decode rows within the decode tokens")
    for b in db:
        check(b["rows_min"] <= b["mean_rows"] <= b["rows_max"] and b["steps"] > 0, "batch range holds its mean")
        check(close(b["tokens"], b["mean_rows"] * b["steps"]), "rows = mean rows x steps")
        check(close(b["ms_per_step"], 1e3 * b["elapsed_s"] / b["steps"]), "ms per step = elapsed / steps")
        check(0 < b["elapsed_s"] < sum(x["elapsed_s"] for x in r["runs"]), "batch time within the runs' time")
        t = max(b["flops"] / c["flops_per_s"], b["bytes"] / c["bytes_per_s"])
        check(close(b["roofline_fraction"], t / b["elapsed_s"]), "batch fraction = roofline/elapsed")
    # The exact row counts partition the same steps: each range's steps and time are the sum of its rows'.
    dr = r["decode_steps_by_rows"]
    check([x["rows"] for x in dr] == sorted({x["rows"] for x in dr}), "row counts ascending and distinct")
    for b in db:
        inside = [x for x in dr if b["rows_min"] <= x["rows"] <= b["rows_max"]]
        check(sum(x["steps"] for x in inside) == b["steps"], "a range's steps are its rows' steps")
        check(close(sum(x["steps"] * x["rows"] for x in inside), b["tokens"]), "a range's rows are its rows' rows")
        check(close(sum(x["ms_per_step"] * x["steps"] for x in inside), 1e3 * b["elapsed_s"], 1e-9),
              "a range's time is its rows' time")
    check(sum(x["steps"] for x in dr) == sum(b["steps"] for b in db), "every decode step counted once")
    print(json.dumps({k: r[k] for k in ["elapsed_s", "generated_tokens_per_s", "ttft_s", "tpot_s", "itl_s"]}))
elif case == "plot":
    rep_path, png = os.path.join(work, "r.json"), os.path.join(work, "r.png")
    for f in (rep_path, png):
        if os.path.exists(f):
            os.remove(f)
    bench("--repeat", "1", "--warmup", "0", "--report", rep_path, "--plot", png, "--label", "tiny cpu")
    check(len(json.load(open(rep_path))["runs"]) == 1, "--repeat 1 records 1 run")

    def check_png(path):
        d = open(path, "rb").read()
        check(d[:8] == b"\x89PNG\r\n\x1a\n", "PNG signature")
        o, idat, types, w, h = 8, b"", [], 0, 0
        while o + 12 <= len(d):
            n, = struct.unpack(">I", d[o:o + 4])
            t, body = d[o + 4:o + 8], d[o + 8:o + 8 + n]
            crc, = struct.unpack(">I", d[o + 8 + n:o + 12 + n])
            check(zlib.crc32(t + body) == crc, f"CRC of chunk {t}")
            types.append(t)
            if t == b"IHDR":
                w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
                check(depth == 8 and ctype == 2, "8-bit RGB")
            if t == b"IDAT":
                idat += body
            o += 12 + n
        check(o == len(d) and types[0] == b"IHDR" and types[-1] == b"IEND", "chunk layout")
        check(w >= 400 and h >= 300, f"readable size ({w}x{h})")
        raw = zlib.decompress(idat)
        check(len(raw) == h * (1 + 3 * w), "IDAT inflates to h*(1+3w) bytes")
        rows = [raw[y * (1 + 3 * w):(y + 1) * (1 + 3 * w)] for y in range(h)]
        check(all(r[0] == 0 for r in rows), "filter bytes 0")
        colours = {bytes(r[1 + 3 * x:4 + 3 * x]) for r in rows[::7] for x in range(0, w, 3)}
        check(len(colours) > 2, "something is drawn")

    check_png(png)
    png2 = os.path.join(work, "again.png")
    p = subprocess.run([g4c, "bench", "--plot-only", "--compare", rep_path, "--compare", rep_path, "--plot", png2],
                       capture_output=True, text=True, env=env)
    check(p.returncode == 0, "--plot-only redraws from reports: " + p.stderr)
    if p.returncode == 0:
        check_png(png2)
elif case == "bad_args":
    p = bench("--repeat", "0", expect_ok=False)
    check(p.returncode != 0 and "--repeat" in p.stderr, "--repeat 0 rejected: " + p.stderr.strip())
    p = subprocess.run([g4c, "bench", "--model", model, "--input", os.path.join(work, "missing.jsonl")],
                       capture_output=True, text=True, env=env)
    check(p.returncode != 0 and "missing.jsonl" in p.stderr, "missing input named: " + p.stderr.strip())
else:
    sys.exit("unknown case " + case)
sys.exit(1 if fails else 0)

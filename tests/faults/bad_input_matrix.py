#!/usr/bin/env python3
"""The CLI's bad-input matrix and file faults, over the built g4c binary and the tiny model.

Each case gives g4c one hostile input and asserts ONE clear error (the message names the file,
line or field), the exit status, no hang (every case is bounded in time), no "internal error"
(an escaped C++ exception) and, for requests files, that every good request in the same file
still produced its output. Usage: bad_input_matrix.py G4C SOURCE_DIR WORK_DIR
"""
import hashlib
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import time

G4C, SRC, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
TINY = os.path.join(SRC, "models", "gemma4-tiny")
TIMEOUT = 120  # s per case: the tiny model runs a case in ~1 s; a hang is what this bounds
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
failures, cases = [], 0


def path(name):
    return os.path.join(WORK, name)


def g4c(*args, timeout=TIMEOUT):
    try:
        p = subprocess.run([G4C, *args], capture_output=True, text=True, errors="replace", timeout=timeout)
        return p.returncode, p.stderr + p.stdout
    except subprocess.TimeoutExpired:
        return None, "TIMEOUT after %d s" % timeout


def case(name, rc, out, want_rc, want_msgs):
    """One case: exit status `want_rc` (None: any non-zero) and each of `want_msgs` in the output."""
    global cases
    cases += 1
    problems = []
    if rc is None:
        problems.append("hang: " + out)
    elif want_rc is None and rc == 0:
        problems.append("silent success (exit 0)")
    elif want_rc is not None and rc != want_rc:
        problems.append("exit status %s, expected %s" % (rc, want_rc))
    if "internal error" in out:
        problems.append("internal error escaped")
    for m in want_msgs:
        if m not in out:
            problems.append("message lacks %r" % m)
    if problems:
        failures.append("%s: %s\n    output: %s" % (name, "; ".join(problems), out.strip()[-600:]))
    print("%-58s %s" % (name, "ok" if not problems else "FAIL"), flush=True)


# A plan of the tiny model, saved once: the runs below load it (no compilation per case).
PLAN = path("tiny.g4p")
rc, out = g4c("compile", "--model", TINY, "-o", PLAN)
if rc != 0 or not os.path.exists(PLAN):
    sys.exit("cannot save the tiny plan: " + out)

GOOD = '{"input_ids": [2, 818, 2050], "max_new_tokens": 3}'
BASE = ["--model", TINY, "--plan", PLAN, "--batch-size", "2", "--max-sequence-length", "64", "--ignore-eos"]


def base(batch="2", max_len="64"):
    """BASE with other values (CLI11 refuses an option given twice)."""
    return ["--model", TINY, "--plan", PLAN, "--batch-size", batch, "--max-sequence-length", max_len, "--ignore-eos"]


def run_lines(name, bad_line, want_msgs, bad_ok=False):
    """A good request, the hostile line, a good request: the hostile line fails alone (or, with
    bad_ok, is served), with its file:line in the message; both good requests are served."""
    src = path(name + ".jsonl")
    with open(src, "wb") as f:
        f.write(GOOD.encode() + b"\n" + (bad_line if isinstance(bad_line, bytes) else bad_line.encode()) + b"\n" +
                GOOD.encode() + b"\n")
    out_path = path(name + ".out.jsonl")
    rc, out = g4c("run", *BASE, "--input", src, "--output", out_path)
    msgs = [] if bad_ok else ["1 of 3 requests failed (see " + out_path + ")"]
    problems = []
    try:
        lines = [json.loads(l) for l in open(out_path, encoding="utf-8")]
    except Exception as e:  # noqa: BLE001 - any unreadable output is a failure of the case
        lines = []
        problems.append("outputs unreadable: %s" % e)
    if len(lines) != 3:
        problems.append("%d output lines, expected 3" % len(lines))
    else:
        for i in (0, 2):
            if lines[i]["finish_reason"] != "length" or lines[i]["generated_tokens"] != 3:
                problems.append("good request %d not served: %s" % (i, lines[i]))
        if not bad_ok:
            err = lines[1].get("error", "")
            if lines[1]["finish_reason"] != "error" or not all(m in err for m in [src + ":2:", *want_msgs]):
                problems.append("bad line's output: %s" % lines[1])
        elif lines[1]["finish_reason"] == "error":
            problems.append("acceptable line refused: %s" % lines[1])
    case("run: " + name, rc, out + "".join("\n" + p for p in problems) + ("\nPROBLEM" if problems else ""),
         0 if bad_ok else 1, msgs + (["NO-PROBLEMS"] if problems else []))


# ---- requests jsonl: one hostile line among good ones ----
run_lines("not_json", "not json at all", ["parse error"])
run_lines("json_array", "[1, 2, 3]", ["a request must be a JSON object"])
run_lines("json_string", '"hello"', ["a request must be a JSON object"])
run_lines("invalid_utf8", b'{"prompt": "caf\xc3\x28 \xff\xfe"}', ["invalid string"])
run_lines("id_over_vocab", '{"input_ids": [2, 999999]}', ["token id 999999", "outside the vocabulary"])
run_lines("id_negative", '{"input_ids": [2, -5]}', ["token id -5", "outside the vocabulary"])
run_lines("id_out_of_int32", '{"input_ids": [2, 99999999999]}', ["input_ids holds an id out of range"])
run_lines("id_float", '{"input_ids": [2, 1.5]}', ["input_ids must hold only integers"])
run_lines("ids_empty", '{"input_ids": []}', ["empty prompt"])
run_lines("no_prompt", "{}", ['neither "prompt" nor "input_ids"'])
run_lines("prompt_empty", '{"prompt": ""}', ["empty prompt"])
run_lines("prompt_number", '{"prompt": 5}', ["prompt must be a string"])
run_lines("temperature_negative", '{"input_ids": [2, 5], "sampling_params": {"temperature": -1}}',
          ["sampling_params.temperature must be a finite number >= 0"])
run_lines("temperature_1e400", '{"input_ids": [2, 5], "sampling_params": {"temperature": 1e400}}',
          ["number overflow parsing '1e400'"])
run_lines("temperature_1e300", '{"input_ids": [2, 5], "sampling_params": {"temperature": 1e300}}',
          ["sampling_params.temperature must be a finite number >= 0"])
run_lines("temperature_nan_string", '{"input_ids": [2, 5], "sampling_params": {"temperature": "NaN"}}',
          ["sampling_params.temperature must be a number"])
run_lines("temperature_nan_literal", '{"input_ids": [2, 5], "sampling_params": {"temperature": NaN}}', ["parse error"])
run_lines("top_k_1e10", '{"input_ids": [2, 5], "sampling_params": {"temperature": 1, "top_k": 1e10}}',
          ["sampling_params.top_k must be an integer"])
run_lines("top_k_half", '{"input_ids": [2, 5], "sampling_params": {"temperature": 1, "top_k": 0.5}}',
          ["sampling_params.top_k must be an integer"])
run_lines("top_k_zero", '{"input_ids": [2, 5], "sampling_params": {"temperature": 1, "top_k": 0}}',
          ["sampling_params.top_k must be -1 (no top-k) or >= 1, not 0"])
run_lines("top_k_minus_7", '{"input_ids": [2, 5], "sampling_params": {"temperature": 1, "top_k": -7}}',
          ["sampling_params.top_k must be -1 (no top-k) or >= 1, not -7"])
run_lines("top_p_2", '{"input_ids": [2, 5], "sampling_params": {"temperature": 1, "top_p": 2}}',
          ["sampling_params.top_p must be in (0, 1]"])
run_lines("top_p_0", '{"input_ids": [2, 5], "sampling_params": {"temperature": 1, "top_p": 0}}',
          ["sampling_params.top_p must be in (0, 1]"])
run_lines("seed_negative", '{"input_ids": [2, 5], "sampling_params": {"temperature": 1, "seed": -1}}',
          ["sampling_params.seed must be a non-negative integer"])
run_lines("sampling_not_object", '{"input_ids": [2, 5], "sampling_params": "greedy"}',
          ["sampling_params must be an object"])
run_lines("max_new_tokens_negative", '{"input_ids": [2, 5], "max_new_tokens": -3}', ["negative max_new_tokens -3"])
run_lines("max_new_tokens_float", '{"input_ids": [2, 5], "max_new_tokens": 1.5}', ["max_new_tokens must be an integer"])
run_lines("stop_ids_not_list", '{"input_ids": [2, 5], "stop_token_ids": "x"}', ["stop_token_ids must be a list"])
# 2^64-1 and 1e9 new tokens are valid requests: served up to --max-sequence-length.
run_lines("max_new_tokens_2^64-1", '{"input_ids": [2, 5], "max_new_tokens": 18446744073709551615}', [], bad_ok=True)
run_lines("max_new_tokens_1e9", '{"input_ids": [2, 5], "max_new_tokens": 1000000000}', [], bad_ok=True)
run_lines("prompt_longer_than_max_sequence_length", '{"input_ids": [2' + ", 7" * 80 + "]}",
          ["does not fit the maximum sequence length 64"])
run_lines("line_over_16_MiB", '{"prompt": "' + "a" * (17 << 20) + '"}', ["line longer than 16777216 bytes"])

# ---- files that are not what they claim ----
os.makedirs(path("a_dir"), exist_ok=True)
rc, out = g4c("run", *BASE, "--input", path("a_dir"), "--output", path("o.jsonl"))
case("run --input a directory", rc, out, 1, [path("a_dir") + ": requests file is a directory"])
rc, out = g4c("run", "--model", TINY, "--plan", path("a_dir"), "--input", "/dev/null", "--output", path("o.jsonl"))
case("run --plan a directory", rc, out, 1, [path("a_dir") + ": plan file is a directory"])
rc, out = g4c("inspect", path("a_dir"))
case("inspect a directory", rc, out, 1, [path("a_dir") + ": plan file is a directory"])
rc, out = g4c("run", *BASE, "--input", "/dev/zero", "--output", path("o.jsonl"), timeout=60)
case("run --input /dev/zero", rc, out, 1, ["/dev/zero:1: binary data (a NUL byte)"])
rc, out = g4c("run", "--model", TINY, "--plan", "/dev/zero", "--input", "/dev/null", "--output", path("o.jsonl"),
              timeout=60)
case("run --plan /dev/zero", rc, out, 1, ["/dev/zero: plan file is not a regular file"])
rc, out = g4c("inspect", "/dev/zero", timeout=60)
case("inspect /dev/zero", rc, out, 1, ["/dev/zero: plan file is not a regular file"])
rc, out = g4c("run", *BASE, "--input", path("missing.jsonl"), "--output", path("o.jsonl"))
case("run --input missing", rc, out, 1, [path("missing.jsonl") + ": requests file does not exist"])

# ---- outputs ----
req = path("two.jsonl")
with open(req, "w") as f:
    f.write(GOOD + "\n" + GOOD + "\n")
digest = hashlib.sha256(open(req, "rb").read()).hexdigest()
rc, out = g4c("run", *BASE, "--input", req, "--output", req)
case("run --output naming --input", rc, out, 1, ["--output names the same file as --input"])
if hashlib.sha256(open(req, "rb").read()).hexdigest() != digest:
    failures.append("run --output naming --input: the input was modified")
os.symlink(req, path("two_link.jsonl"))
rc, out = g4c("run", *BASE, "--input", req, "--output", path("o.jsonl"), "--summary", path("two_link.jsonl"))
case("run --summary naming --input (through a link)", rc, out, 1, ["--summary names the same file as --input"])
if hashlib.sha256(open(req, "rb").read()).hexdigest() != digest:
    failures.append("run --summary naming --input: the input was modified")
if os.path.exists("/dev/full"):
    rc, out = g4c("run", *BASE, "--input", req, "--output", "/dev/full")
    case("run --output /dev/full", rc, out, 1, ["/dev/full: write failed"])
    rc, out = g4c("run", *BASE, "--input", req, "--output", path("o_full.jsonl"), "--summary", "/dev/full")
    case("run --summary /dev/full", rc, out, 1, ["/dev/full: write failed"])
    if "requests, " in out and "generated tokens" in out:
        failures.append("run --summary /dev/full: reported the run as done: " + out)

# ---- plans ----
plan_bytes = open(PLAN, "rb").read()
open(path("cut.g4p"), "wb").write(plan_bytes[: len(plan_bytes) // 3])
rc, out = g4c("run", *BASE[:2], "--plan", path("cut.g4p"), "--input", req, "--output", path("o.jsonl"))
case("run --plan truncated", rc, out, 1, ["truncated or corrupt"])
open(path("zero.g4p"), "wb").write(b"")
rc, out = g4c("inspect", path("zero.g4p"))
case("inspect an empty plan", rc, out, 1, ["not a g4c plan"])
# Byte flips across the plan: each loads and runs, or is refused with a plan error; never a crash.
flips, refused = 0, 0
for k in range(24):
    off = (k * 7919 + 13) % len(plan_bytes)
    b = bytearray(plan_bytes)
    b[off] ^= 0xFF if k % 2 else 0x10
    open(path("flip.g4p"), "wb").write(b)
    rc, out = g4c("inspect", path("flip.g4p"), "--model", TINY)
    flips += 1
    if rc not in (0, 1) or "internal error" in out or rc is None:
        failures.append("byte flip at %d: exit %s: %s" % (off, rc, out[-400:]))
    refused += rc == 1
cases += 1
print("%-58s %s" % ("inspect: %d byte-flipped plans (%d refused)" % (flips, refused), "ok"), flush=True)


# ---- checkpoints ----
def model_copy(name, edit=None):
    d = path(name)
    os.makedirs(d)
    for f in os.listdir(TINY):
        os.symlink(os.path.join(TINY, f), os.path.join(d, f))
    if edit:
        edit(d)
    return d


def replace_file(d, f, data):
    os.unlink(os.path.join(d, f))
    open(os.path.join(d, f), "wb").write(data)


SHARD = "model-00002-of-00003.safetensors"
shard = open(os.path.join(TINY, SHARD), "rb").read()
d = model_copy("m_trunc", lambda d: replace_file(d, SHARD, shard[: len(shard) // 2]))
rc, out = g4c("run", "--model", d, "--input", req, "--output", path("o.jsonl"))
case("run: truncated shard", rc, out, 1, [SHARD])
d = model_copy("m_missing", lambda d: os.unlink(os.path.join(d, SHARD)))
rc, out = g4c("run", "--model", d, "--input", req, "--output", path("o.jsonl"))
case("run: missing shard", rc, out, 1, ["shard '" + SHARD + "' named in the index is missing"])
hdr = bytearray(shard)
hdr[12] ^= 0x55  # inside the JSON header
d = model_copy("m_flip", lambda d: replace_file(d, SHARD, bytes(hdr)))
rc, out = g4c("run", "--model", d, "--input", req, "--output", path("o.jsonl"))
case("run: bit-flipped shard header", rc, out, 1, [SHARD])
d = model_copy("m_badconfig", lambda d: replace_file(d, "config.json", b'{"model_type": "gemma4_text", '))
rc, out = g4c("run", "--model", d, "--input", req, "--output", path("o.jsonl"))
case("run: config.json not JSON", rc, out, 1, ["config.json: not valid JSON"])


def nan_embedding(d):
    """Sets the first row of embed_tokens.weight (BF16) to NaN in a copy of its shard."""
    idx = json.load(open(os.path.join(TINY, "model.safetensors.index.json")))["weight_map"]
    key = next(k for k in idx if k.endswith("embed_tokens.weight"))
    f = idx[key]
    data = bytearray(open(os.path.join(TINY, f), "rb").read())
    n = struct.unpack("<Q", data[:8])[0]
    meta = json.loads(data[8 : 8 + n])[key]
    start = 8 + n + meta["data_offsets"][0]
    data[start : start + 2 * meta["shape"][1]] = b"\xc0\x7f" * meta["shape"][1]
    replace_file(d, f, bytes(data))


d = model_copy("m_nan", nan_embedding)
rc, out = g4c("run", "--model", d, "--plan", PLAN, "--input", req, "--output", path("o.jsonl"), "--max-new-tokens", "2")
case("run: NaN in the embedding (warning)", rc, out, 0, ["embed_tokens.weight' holds 256 non-finite values"])


def other_window(d):
    cfg = json.load(open(os.path.join(TINY, "config.json")))
    cfg["sliding_window"] = cfg["sliding_window"] // 2
    replace_file(d, "config.json", json.dumps(cfg).encode())


d = model_copy("m_other", other_window)
rc, out = g4c("run", "--model", d, "--plan", PLAN, "--input", req, "--output", path("o.jsonl"))
case("run --plan compiled for another model", rc, out, 1, ["plan was built for another checkpoint"])

# INT4: a synthesized tiny INT4 checkpoint whose manifest's qweight_shape disagrees.
rc, out = g4c("synth", "--preset", "gemma4-tiny", "--dtype", "int4", "--output", path("int4"))
if rc == 0:
    man = json.load(open(path("int4/manifest.json")))
    first = sorted(man["modules"])[0]
    man["modules"][first]["qweight_shape"][1] += 1
    json.dump(man, open(path("int4/manifest.json"), "w"))
    # (Compiled in process: the frontend reads the manifest.)
    rc, out = g4c("run", "--model", path("int4"), "--input", req, "--output", path("o.jsonl"))
    case("run: manifest qweight_shape disagrees", rc, out, 1, ["modules." + first + ".qweight_shape"])
else:
    failures.append("g4c synth --int4 failed: " + out)

# ---- flags ----
rc, out = g4c("run", *base(max_len="2000000000"), "--input", req, "--output", path("o.jsonl"))
case("run --max-sequence-length 2000000000", rc, out, 1, ["exceeds the model's context of 8192 tokens"])
rc, out = g4c("run", *base(batch="-1"), "--input", req, "--output", path("o.jsonl"))
case("run --batch-size -1", rc, out, 1, ["batch size"])
rc, out = g4c("run", *BASE, "--input", req, "--output", path("o.jsonl"), "--no-such-flag")
case("run --no-such-flag", rc, out, None, ["--no-such-flag"])
rc, out = g4c("run", "--model", path("nowhere"), "--input", req, "--output", path("o.jsonl"))
case("run --model missing directory", rc, out, 1, [path("nowhere")])
open(path("empty.jsonl"), "w").close()
rc, out = g4c("bench", "--model", TINY, "--input", path("empty.jsonl"), "--repeat", "1", "--warmup", "0")
case("bench on an empty requests file", rc, out, 1, [path("empty.jsonl") + ": no requests"])

# ---- SIGINT during g4c run: whole lines written, summary says interrupted, exit 130 ----
many = path("many.jsonl")
with open(many, "w") as f:
    for i in range(200):
        f.write('{"input_ids": [2, %d, 7], "max_new_tokens": 40}\n' % (100 + i))
outp, summ = path("int_out.jsonl"), path("int_summary.json")
p = subprocess.Popen([G4C, "run", *base(batch="1", max_len="256"), "--input", many, "--output", outp,
                      "--summary", summ], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
deadline = time.time() + TIMEOUT
while time.time() < deadline and (not os.path.exists(outp) or os.path.getsize(outp) == 0) and p.poll() is None:
    time.sleep(0.05)
p.send_signal(signal.SIGINT)
try:
    _, err = p.communicate(timeout=TIMEOUT)
    rc = p.returncode
except subprocess.TimeoutExpired:
    p.kill()
    rc, err = None, "TIMEOUT"
problems = []
try:
    lines = [json.loads(l) for l in open(outp)]
    summary = json.load(open(summ))
    if not 0 < len(lines) < 200:
        problems.append("%d lines written" % len(lines))
    if summary.get("interrupted") is not True or summary.get("requests") != len(lines):
        problems.append("summary: %s" % summary)
except Exception as e:  # noqa: BLE001
    problems.append("outputs after SIGINT unreadable: %s" % e)
case("run: SIGINT mid-run", rc, err + "".join("\n" + x for x in problems), 130,
     ["interrupted"] + (["NO-PROBLEMS"] if problems else []))

print("\n%d cases, %d failures" % (cases, len(failures)))
for f in failures:
    print("FAIL " + f)
sys.exit(1 if failures else 0)

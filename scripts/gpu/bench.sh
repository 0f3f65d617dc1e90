#!/bin/bash
# On the GPU host: end-to-end benchmark of a pack made by scripts/gpu/pack.sh. Synthesizes the
# Gemma-4-12B INT4 checkpoint (g4c synth --preset gemma4-12b --dtype int4 --group-size 128,
# symmetric, seeded) once, then runs `g4c bench` with the defaults (the plan compiled in process,
# --budget 9984MiB) on each dataset, on the whole GPU and in the emulated 1g.10gb slice. With a
# baseline pack, the baseline's g4c and the new one run interleaved on the same machine (baseline,
# new, baseline, new, … per configuration) and the table compares their elapsed medians and their
# tokens (fnv1a of every request's output tokens, per timed run).
#
#   Usage: bash scripts/gpu/bench.sh PACKDIR [BASELINE_PACKDIR]
#   Env:
#     DATASETS   datasets/<name>.jsonl to run (default "performance_public performance_decode
#                performance_large"; empty: none; a name without a file is reported as missing)
#     MODES      "full emulated" (default): whole GPU, --emulate 1g.10gb
#     ROUNDS     interleaved rounds per configuration (default 1; each round runs every pack once)
#     REPEAT     g4c bench --repeat (default 3), WARMUP (default 1)
#     SEED       synth seed (default 0); WORK: where the checkpoint goes (default /tmp/g4c-bench)
#     EXTRA      more g4c bench flags for every run (e.g. "--deterministic")
#     OUT        reports (g4c bench JSON per run) and table.txt are written there when set
#     G4C_BENCH_TIMEOUT  seconds per g4c bench run (default 600)
#     SERVE      concurrencies for the server benchmark (e.g. "1 4 10"; default none): in each mode,
#                `g4c serve` of the new pack on the same checkpoint (--budget 9984MiB, defaults) and
#                `g4c loadgen` of SERVE_DATASET (default performance_public), streamed, at each
#                concurrency; a table of TTFT, TPOT, ITL, end-to-end latency and throughput
#     QUANTIZE   "1": first synthesize the 12B in BF16 (same seed) and, in each mode, time
#                `g4c quantize --method gptq` with its defaults (128 x 512 calibration tokens of
#                datasets/calibration-256.jsonl) on the GPU under --budget 9984MiB; the seconds by
#                stage, peak and total land in quantize_table.txt (new pack only)
#     KERNELS    "1": first run the pack's g4c_bench_decode (packed with G4C_PACK_EXTRA or
#                G4C_PACK_ONLY) on the whole GPU and in a 16-SM green context, the forced-variant
#                columns left out (G4C_BENCH_VARIANTS=""); its table of 8…64 rows (default dispatch,
#                decode kernels, wgmma kernel) lands in kernels.txt
# Exit status: 1 when a run failed or the tokens of baseline and new differ, else 0.
set -uo pipefail
[ $# -ge 1 ] || { echo "usage: $0 PACKDIR [BASELINE_PACKDIR]" >&2; exit 2; }
NEW=$(cd "$1" && pwd)
BASE=${2:+$(cd "$2" && pwd)}
WORK=${WORK:-/tmp/g4c-bench}
R=${OUT:-$WORK/reports}
mkdir -p "$WORK" "$R"
DATASETS=${DATASETS-performance_public performance_decode performance_large}
MODES=${MODES-full emulated}
ROUNDS=${ROUNDS:-1}
TO=${G4C_BENCH_TIMEOUT:-600}
export G4C_NO_PROGRESS=1

unpack() {  # unpack PACKDIR NAME -> prints the path of its g4c
  mkdir -p "$WORK/$2"
  xz -dc "$1/bin/g4c.xz" > "$WORK/$2/g4c" && chmod +x "$WORK/$2/g4c" && echo "$WORK/$2/g4c"
}
mkdir -p "$WORK/lib"  # g4c's cpp-httplib and its libraries
for f in "$NEW"/lib/*.xz; do [ -e "$f" ] && xz -dc "$f" > "$WORK/lib/$(basename "$f" .xz)"; done
export LD_LIBRARY_PATH=$WORK/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
G_NEW=$(unpack "$NEW" new) || exit 1
PACKS=(new)
declare -A G4C=([new]=$G_NEW) DIR=([new]=$NEW)
if [ -n "$BASE" ]; then
  G4C[base]=$(unpack "$BASE" base) || exit 1
  DIR[base]=$BASE
  PACKS=(base new)
fi
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true; } | tee "$R/device.txt"
for p in "${PACKS[@]}"; do echo "$p: $(head -1 "${DIR[$p]}/MANIFEST" 2>/dev/null)"; done

CKPT=$WORK/gemma4-12b-int4-g128-seed${SEED:-0}
if [ ! -f "$CKPT/config.json" ]; then
  echo "== synth $CKPT"
  "$G_NEW" synth --preset gemma4-12b --dtype int4 --group-size 128 --seed "${SEED:-0}" -o "$CKPT.tmp" --no-progress &&
    mv "$CKPT.tmp" "$CKPT" || { echo "synth failed" >&2; exit 1; }
fi

FAILED=0
if [ "${KERNELS:-0}" = 1 ]; then
  if [ -f "$NEW/bin/g4c_bench_decode.xz" ]; then
    xz -dc "$NEW/bin/g4c_bench_decode.xz" > "$WORK/new/g4c_bench_decode" && chmod +x "$WORK/new/g4c_bench_decode"
    for green in "" "--green 16"; do
      G4C_BENCH_VARIANTS="" timeout "$TO" "$WORK/new/g4c_bench_decode" $green > "$R/bench_decode.log" 2>&1 ||
        { echo "g4c_bench_decode $green failed" >&2; FAILED=1; }
      grep -E "^==|dflt .*wgmma" "$R/bench_decode.log"
    done | tee "$R/kernels.txt"
  else
    echo "KERNELS=1: no g4c_bench_decode in $NEW" >&2
    FAILED=1
  fi
fi
if [ "${QUANTIZE:-0}" = 1 ]; then
  BF16=$WORK/gemma4-12b-bf16-seed${SEED:-0}
  if [ ! -f "$BF16/config.json" ]; then
    echo "== synth $BF16"
    /usr/bin/time -f "synth bf16: %e s" "$G_NEW" synth --preset gemma4-12b --dtype bf16 --seed "${SEED:-0}" \
      -o "$BF16.tmp" --no-progress && mv "$BF16.tmp" "$BF16" || { echo "synth bf16 failed" >&2; exit 1; }
  fi
  calib=$(dirname "$NEW")/datasets/calibration-256.jsonl
  for mode in $MODES; do
    dev=(--device cuda --budget 9984MiB)
    [ "$mode" = emulated ] && dev+=(--emulate 1g.10gb)
    echo "== quantize $mode"
    rm -rf "$WORK/q-$mode"
    timeout "$TO" /usr/bin/time -f "quantize $mode: %e s wall, %M KiB host peak" "$G_NEW" quantize --model "$BF16" \
      --method gptq --calibration "$calib" "${dev[@]}" -o "$WORK/q-$mode" > "$R/quantize_$mode.log" 2>&1 ||
      { echo "quantize $mode failed (see $R/quantize_$mode.log)"; FAILED=1; }
    grep -E "seconds by stage|peak|quantize $mode:" "$R/quantize_$mode.log" | tee -a "$R/quantize_table.txt"
    cp "$WORK/q-$mode/quantization_config.json" "$R/quantize_$mode.json" 2>/dev/null || true
    rm -rf "$WORK/q-$mode"
  done
fi
for ds in $DATASETS; do
  in=$(dirname "$NEW")/datasets/$ds.jsonl  # the tree the pack lies in
  if [ ! -f "$in" ]; then echo "$ds: no $in" | tee "$R/$ds.missing"; FAILED=1; continue; fi
  for mode in $MODES; do
    dev=(--device cuda --budget 9984MiB)
    [ "$mode" = emulated ] && dev+=(--emulate 1g.10gb)
    for ((round = 1; round <= ROUNDS; round++)); do
      for p in "${PACKS[@]}"; do
        tag=${ds}_${mode}_${p}_r${round}
        echo "== $tag"
        # shellcheck disable=SC2086
        timeout "$TO" "${G4C[$p]}" bench --model "$CKPT" --input "$in" "${dev[@]}" --repeat "${REPEAT:-3}" \
          --warmup "${WARMUP:-1}" --label "$p $mode" --report "$R/$tag.json" ${EXTRA:-} > "$R/$tag.log" 2>&1
        rc=$?
        tail -1 "$R/$tag.log"
        [ $rc = 0 ] || { echo "$tag: exit $rc (see $R/$tag.log)"; FAILED=1; }
      done
    done
  done
done

# One table: per dataset and mode, each pack's elapsed median (median over rounds of the bench
# medians, min-max over all timed runs) and whether its tokens agree with the other pack's.
python3 - "$R" "$ROUNDS" "${PACKS[@]}" > "$R/table.txt" <<'EOF'
import glob, json, os, statistics, sys
r, rounds, packs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
rows = {}
for f in sorted(glob.glob(os.path.join(r, "*_r*.json"))):
    stem = os.path.basename(f)[:-5]
    key, pack, _ = stem.rsplit("_", 2)
    rep = json.load(open(f))
    rows.setdefault(key, {}).setdefault(pack, []).append(rep)
print(f"{'dataset / mode':34} {'pack':5} {'median s':>9} {'min-max s':>15} {'tok/s':>8} {'batch':>5} "
      f"{'TPOT p50/p99 ms':>16} {'ITL p50/p99 ms':>16} tokens")
ms = lambda rep, k: f"{1e3 * rep[k]['p50']:.1f}/{1e3 * rep[k]['p99']:.1f}" if k in rep else "-"  # older packs: no itl_s
bad = 0
for key, by in rows.items():
    hashes = {p: sorted({x["tokens_fnv1a"] for rep in reps for x in rep["runs"]}) for p, reps in by.items()}
    for p in packs:
        reps = by.get(p, [])
        if not reps:
            print(f"{key:34} {p:5} {'failed':>9}")
            bad = 1
            continue
        med = statistics.median(rep["elapsed_s"]["median"] for rep in reps)
        lo = min(rep["elapsed_s"]["min"] for rep in reps)
        hi = max(rep["elapsed_s"]["max"] for rep in reps)
        tps = statistics.median(rep["generated_tokens_per_s"] for rep in reps)
        h = hashes[p]
        note = "fnv1a " + ",".join(h)
        if len(h) > 1:
            note += " (runs differ)"
        if len(packs) > 1 and p == packs[-1] and packs[0] in hashes:
            same = hashes[packs[0]] == h
            note += " = base" if same else " != base"
            bad |= not same
        print(f"{key:34} {p:5} {med:9.3f} {lo:7.3f}-{hi:<7.3f} {tps:8.1f} {reps[0]['options']['batch_size']:>5} "
              f"{ms(reps[0], 'tpot_s'):>16} {ms(reps[0], 'itl_s'):>16} {note}")
    if len(packs) > 1 and all(p in by for p in packs):
        b = statistics.median(rep["elapsed_s"]["median"] for rep in by[packs[0]])
        n = statistics.median(rep["elapsed_s"]["median"] for rep in by[packs[-1]])
        print(f"{key:34} {'new/base':>9} {n / b:.3f}")
sys.exit(bad)
EOF
trc=$?
echo
cat "$R/table.txt"
[ $trc = 0 ] || FAILED=1
# The server: per mode, one `g4c serve`, `g4c loadgen` at each concurrency, then SIGTERM (exit 0
# expected).
if [ -n "${SERVE:-}" ]; then
  in=$(dirname "$NEW")/datasets/${SERVE_DATASET:-performance_public}.jsonl
  port=${SERVE_PORT:-18080}
  for mode in $MODES; do
    dev=(--device cuda --budget 9984MiB)
    [ "$mode" = emulated ] && dev+=(--emulate 1g.10gb)
    echo "== serve $mode: $CKPT on 127.0.0.1:$port"
    "$G_NEW" serve --model "$CKPT" "${dev[@]}" --host 127.0.0.1 --port "$port" > "$R/serve_$mode.log" 2>&1 &
    spid=$!
    up=0
    for _ in $(seq 1 300); do
      python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/health', timeout=2)" 2>/dev/null &&
        { up=1; break; }
      kill -0 $spid 2>/dev/null || break
      sleep 1
    done
    if [ $up = 1 ]; then
      for c in $SERVE; do
        timeout "$TO" "$G_NEW" loadgen --url "http://127.0.0.1:$port" --input "$in" --concurrency "$c" \
          --label "serve $mode c$c" --report "$R/serve_${mode}_c$c.json" > "$R/serve_${mode}_c$c.log" 2>&1 ||
          { echo "loadgen $mode c$c failed"; FAILED=1; }
        tail -1 "$R/serve_${mode}_c$c.log"
      done
      python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:$port/metrics').read().decode())" \
        > "$R/serve_${mode}_metrics.txt" 2>&1
    else
      echo "serve did not come up (see $R/serve_$mode.log)"; FAILED=1
    fi
    kill -TERM $spid 2>/dev/null; wait $spid; src=$?
    echo "serve $mode exit $src"; [ $src = 0 ] || FAILED=1
  done
  python3 - "$R" "$MODES" $SERVE <<'PY' | tee "$R/serve_table.txt"
import json, os, sys
r, modes = sys.argv[1], sys.argv[2].split()
print(f"{'mode':9} {'concurrency':>11} {'req':>4} {'fail':>4} {'elapsed s':>9} {'tok/s':>8} {'TTFT p50/p99 ms':>16} "
      f"{'TPOT p50/p99 ms':>16} {'ITL p50/p99 ms':>15} {'e2e p50/p99 s':>14}")
for mode, c in [(m, c) for m in modes for c in sys.argv[3:]]:
    f = os.path.join(r, f"serve_{mode}_c{c}.json")
    if not os.path.exists(f):
        print(f"{mode:9} {c:>11} failed")
        continue
    x = json.load(open(f))
    ms = lambda k: f"{1e3 * x[k]['p50']:.1f}/{1e3 * x[k]['p99']:.1f}"
    print(f"{mode:9} {c:>11} {x['requests']:>4} {x['failed_requests']:>4} {x['elapsed_s']['median']:9.3f} "
          f"{x['generated_tokens_per_s']:8.1f} {ms('ttft_s'):>16} {ms('tpot_s'):>16} {ms('itl_s'):>15} "
          f"{x['e2e_s']['p50']:.2f}/{x['e2e_s']['p99']:.2f}")
PY
fi
exit $FAILED

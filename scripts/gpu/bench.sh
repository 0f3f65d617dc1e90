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
#                performance_large"; a name without a file is reported as missing)
#     MODES      "full emulated" (default): whole GPU, --emulate 1g.10gb
#     ROUNDS     interleaved rounds per configuration (default 1; each round runs every pack once)
#     REPEAT     g4c bench --repeat (default 3), WARMUP (default 1)
#     SEED       synth seed (default 0); WORK: where the checkpoint goes (default /tmp/g4c-bench)
#     EXTRA      more g4c bench flags for every run (e.g. "--deterministic")
#     OUT        reports (g4c bench JSON per run) and table.txt are written there when set
#     G4C_BENCH_TIMEOUT  seconds per g4c bench run (default 600)
# Exit status: 1 when a run failed or the tokens of baseline and new differ, else 0.
set -uo pipefail
[ $# -ge 1 ] || { echo "usage: $0 PACKDIR [BASELINE_PACKDIR]" >&2; exit 2; }
NEW=$(cd "$1" && pwd)
BASE=${2:+$(cd "$2" && pwd)}
WORK=${WORK:-/tmp/g4c-bench}
R=${OUT:-$WORK/reports}
mkdir -p "$WORK" "$R"
DATASETS=${DATASETS:-performance_public performance_decode performance_large}
MODES=${MODES:-full emulated}
ROUNDS=${ROUNDS:-1}
TO=${G4C_BENCH_TIMEOUT:-600}
export G4C_NO_PROGRESS=1

unpack() {  # unpack PACKDIR NAME -> prints the path of its g4c
  mkdir -p "$WORK/$2"
  xz -dc "$1/bin/g4c.xz" > "$WORK/$2/g4c" && chmod +x "$WORK/$2/g4c" && echo "$WORK/$2/g4c"
}
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
print(f"{'dataset / mode':34} {'pack':5} {'median s':>9} {'min-max s':>15} {'tok/s':>8} {'batch':>5} tokens")
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
        print(f"{key:34} {p:5} {med:9.3f} {lo:7.3f}-{hi:<7.3f} {tps:8.1f} {reps[0]['options']['batch_size']:>5} {note}")
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
exit $FAILED

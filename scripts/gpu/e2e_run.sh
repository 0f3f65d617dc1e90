#!/bin/bash
# One device call: the CUDA runtime end to end with the current kernels (issue 6 changes must not
# change what the runtime computes): CUDA backend GPU tests on the tiny model (HF goldens), then
# performance_public on the synthetic 12B INT4 (full H200 ×3, emulated 1g.10gb ×1; tokens hash
# printed; DET / FLAGS / ROUNDS: flag sets compared, below) and `g4c run`. Pack into $C (default
# .devpack-e/): g4c.xz, rt.xz (g4c_gpu_runtime_test), perf_public_ids.jsonl,
# shared/golden/gemma4-tiny/ (see pack_cudart.sh); a pack without g4c.xz or rt.xz skips that part
# (g4c and rt do not fit one carry together). Logs in $OUT/e2e.tar.xz.
export G4C_NO_PROGRESS=1 W=/tmp/g4c-bench; C=${C:-.devpack-e}; O=/tmp/g4c-e2e
mkdir -p $O $W/bin
t() { tar cJf $OUT/e2e.tar.xz -C $O . 2>/dev/null; echo "[e2e +${SECONDS}s] $*"; }  # logs so far kept at each step
[ -f $C/g4c.xz ] && xz -dc $C/g4c.xz > $W/bin/g4c && chmod +x $W/bin/g4c; G=$W/bin/g4c
if [ -f $C/rt.xz ] && [ -z "${SKIP_RT:-}" ]; then
  xz -dc $C/rt.xz > /tmp/rt && chmod +x /tmp/rt
  S=/tmp/g4c-e2e-shared; mkdir -p $S/golden/gemma4-tiny
  xz -dc $C/shared/golden/gemma4-tiny/golden_logits.safetensors.xz > $S/golden/gemma4-tiny/golden_logits.safetensors
  cp -f $C/shared/golden/gemma4-tiny/golden_generate.json $S/golden/gemma4-tiny/
  t "CUDA runtime tests"
  G4C_SOURCE_DIR=$PWD G4C_SHARED_DIR=$S timeout ${RT_T:-240} /tmp/rt --gtest_filter="${RT_FILTER:-*}" > $O/rt.log 2>&1
  echo "rc=$?"; grep -E "^\[ +(FAILED|PASSED) +\]|Failure|Expected|Which is|tests ran" $O/rt.log | head -20
  grep -E "measured" $O/rt.log | head -12
fi
# RT_ONLY=1: the runtime tests only (when g4c.xz and rt.xz do not fit one carry together).
if [ -n "${RT_ONLY:-}" ]; then t done; tar cJf $OUT/e2e.tar.xz -C $O .; exit 0; fi
t "synth 12B int4"
timeout 90 $G synth --preset gemma4-12b --dtype int4 --group-size 128 --seed 0 -o $W/12b-int4 --no-progress > /dev/null 2>&1; echo "rc=$?"
# Flag sets compared (interleaved, ROUNDS times): DET=1 adds --deterministic (decode GEMMs summing
# in a fixed order) to the default set; FLAGS=';--no-whole-tiles' (';'-separated) replaces them.
FL=("")
[ -n "${DET:-}" ] && FL+=("--deterministic")
[ -n "${FLAGS:-}" ] && IFS=';' read -ra FL <<< "$FLAGS"
# One g4c bench of the 12B: tag, input jsonl, then the flags (words; "--emulate 1g.10gb" among
# them: the slice, EMU_REP repeats instead of 3).
bench12b() {
  local tag=$1 input=$2 rep=3; shift 2
  [[ " $* " == *" --emulate "* ]] && rep=${EMU_REP:-1}
  t "bench $tag"
  timeout 120 $G bench --model $W/12b-int4 --input "$input" --device cuda --budget 9984MiB --ignore-eos \
    --batch-size 16 --repeat $rep "$@" --report $O/$tag.json > $O/$tag.log 2>&1; echo "rc=$?"
  python3 -c "import json; r=json.load(open('$O/$tag.json')); print('$tag', r['elapsed_s'], 'tpot p50', r['tpot_s']['p50'], 'prefill', r['phases']['prefill']['elapsed_s'], 'decode', r['phases']['decode']['elapsed_s'], 'peak MiB', r['peak_device_bytes'] / 2**20, [x.get('tokens_fnv1a') for x in r['runs']], [x.get('elapsed_s') for x in r['runs']], r['options'].get('cuda'), r['date'])"
}
# SKIP_BENCH=1: no g4c bench runs (only the `g4c run` parts below).
[ -n "${SKIP_BENCH:-}" ] && ROUNDS=0
for r in $(seq ${ROUNDS:-1}); do
for fl in "${FL[@]}"; do
for emu in "" "--emulate 1g.10gb"; do
  bench12b public${emu:+-emu}${fl// /}-r$r $C/perf_public_ids.jsonl $emu $fl
done
done
done
# SAMPLED=1: the same requests sampled (temperature SAMPLED_T, default 0.8, top_p 0.95, a seed
# each), host sampling (--no-device-sample) against the device's (cuda::sample_rows, the default
# since 2026-12-05), whole GPU and the emulated slice. Then `g4c run` of them at temperature
# SAMPLED_RUN_T (default 4, top_p 1: the synthetic 12B's logits are so peaked that at 0.8 every token was
# the greedy one) on the host and on the device: tokens compared with each other and with greedy.
# SAMPLED_RUN_FLAGS (default --deterministic): without it the decode GEMMs' arrival-order sums
# can change a logit's last bit from run to run, which at T 4 over 262k nearly flat weights moves
# the draw (2026-12-05: 43 of 320 tokens equal, the first differing token 1–23 indices away).
if [ -n "${SAMPLED:-}" ]; then
  mk_sampled() {  # temperature, top_p, output
    python3 -c "
import json
with open('$C/perf_public_ids.jsonl') as f, open('$3', 'w') as o:
    for i, l in enumerate(f):
        r = json.loads(l); r['sampling_params'] = {'temperature': $1, 'top_p': $2, 'seed': 1000 + i}
        o.write(json.dumps(r) + '\\n')"
  }
  mk_sampled ${SAMPLED_T:-0.8} 0.95 $O/sampled.jsonl
  for fl in "--no-device-sample" ""; do
  for emu in "" "--emulate 1g.10gb"; do
    [ -z "${SKIP_BENCH:-}" ] && bench12b sampled${emu:+-emu}${fl// /} $O/sampled.jsonl $emu $fl
  done
  done
  mk_sampled ${SAMPLED_RUN_T:-4} 1.0 $O/sampled_hot.jsonl
  for fl in "" "--no-device-sample"; do
    t "g4c run sampled at T ${SAMPLED_RUN_T:-4} $fl"
    timeout 90 $G run --model $W/12b-int4 --input $O/sampled_hot.jsonl --device cuda --budget 9984MiB --ignore-eos \
      ${SAMPLED_RUN_FLAGS---deterministic} $fl --output $O/run_hot${fl// /}.jsonl > $O/run_hot${fl// /}.log 2>&1; echo "rc=$?"; tail -1 $O/run_hot${fl// /}.log
  done
fi
t "g4c run (compiled plan)"
timeout 90 $G run --model $W/12b-int4 --input $C/perf_public_ids.jsonl --device cuda --budget 9984MiB --ignore-eos \
  --output $O/run_out.jsonl --summary $O/run_summary.json > $O/run.log 2>&1; echo "rc=$?"
python3 -c "import json; r=json.load(open('$O/run_summary.json')); print({k: r.get(k) for k in ('elapsed_s', 'peak_device_bytes')})"
if [ -n "${SAMPLED:-}" ]; then
  python3 - $O/run_out.jsonl $O/run_hot.jsonl $O/run_hot--no-device-sample.jsonl <<'PY'
import json, sys
g, d, h = ([json.loads(l)["token_ids"] for l in open(p)] for p in sys.argv[1:])
n = sum(len(x) for x in g)
print("sampled hot: device == host tokens", sum(a == b for x, y in zip(d, h) for a, b in zip(x, y)), "of", n,
      "| device != greedy", sum(a != b for x, y in zip(d, g) for a, b in zip(x, y)), "of", n)
PY
fi
t done
tar cJf $OUT/e2e.tar.xz -C $O .

#!/bin/bash
# One device call that checks and times what changed since the last GPU run, time-boxed to the
# 10-minute call: (1) tiny-model CUDA runtime tests (shared arena, sibling fusion, goldens),
# (2) decode GEMM tests over every variant + g4c_gpu_decode_bench on 132 SMs and a 16-SM green
# context, (3) synthetic 12B INT4 g128, (4) g4c bench performance_public full + emulated,
# (5) a traced full-GPU run and a compiled-plan (lifetime-shared arena) emulated run.
# Packs: scripts/gpu/pack_cudart.sh build && scripts/gpu/bench_pack.sh build; run tool carry
# [".devpack-cudart", ".devpack-bench"]: timeout 590 bash scripts/gpu/session_run.sh
# Env: STAGES (default "tiny decode synth bench run"; also "gptq"), REPEAT (2). Logs: $OUT/session.tar.xz.
export PYTHONUNBUFFERED=1 G4C_NO_PROGRESS=1 WORK=${WORK:-/tmp/g4c-bench}
O=/tmp/g4c-session  # tarred into $OUT at the end ($OUT returns at most 8 files)
C=.devpack-cudart
STAGES=${STAGES:-tiny decode synth bench run}
mkdir -p "$O" "$WORK/bin" "$WORK/results"
t() { echo "[session +${SECONDS}s] $*"; }
has() { [[ " $STAGES " == *" $1 "* ]]; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
BIN=/tmp/g4c-cudart-bin
if has tiny; then
  t "tiny GPU runtime tests"
  OUT=$O TESTS_T=150 bash $C/run_cudart.sh tiny 2>&1 | grep -vE "^\[ +(OK|RUN) " | tail -40
else
  OUT=$O SKIP_TINY=1 bash $C/run_cudart.sh none > /dev/null 2>&1  # unpacks the binaries only
fi
if has decode; then
  t "decode GEMM tests (all variants)"
  timeout 90 $BIN/g4c_gpu_kernels_test --gtest_filter='GpuW4Decode.*:GpuW4A16.Decode*' > "$O/decode_tests.log" 2>&1
  echo "decode tests rc=$?"; grep -E "^\[ +(FAILED|PASSED) +\]|Failure|Expected|Which is" "$O/decode_tests.log" | head -20
  t "decode bench, 132 SMs"
  timeout 75 $BIN/g4c_gpu_decode_bench > "$O/decode_bench.log" 2>&1; echo "rc=$?"; cat "$O/decode_bench.log"
  t "decode bench, 16-SM green context"
  timeout 90 $BIN/g4c_gpu_decode_bench --green 16 > "$O/decode_bench_green.log" 2>&1; echo "rc=$?"; cat "$O/decode_bench_green.log"
fi
if has synth; then
  t "synth 12B int4 g128"
  [ -x "$WORK/bin/g4c" ] || { xz -dc .devpack-bench/g4c.xz > "$WORK/bin/g4c"; chmod +x "$WORK/bin/g4c"; }
  [ -f "$WORK/12b-int4/manifest.json" ] || timeout 200 "$WORK/bin/g4c" synth --preset gemma4-12b --dtype int4 \
    --group-size 128 --seed 0 -o "$WORK/12b-int4" --no-progress > "$O/synth.log" 2>&1
  echo "synth rc=$?"; tail -2 "$O/synth.log"
  cp -f $C/perf_public_ids.jsonl "$WORK/public_ids.jsonl"
fi
if has bench; then
  t "g4c bench public full + emulated"
  OUT=$O DATASETS=public BATCH=${BATCH:-8} REPEAT=${REPEAT:-2} G4C_T=150 bash .devpack-bench/bench_vs_hf.sh g4c 2>&1 \
    | grep -E "rc=|median|elapsed|error|Error" | head -12
  for f in "$WORK"/results/g4c_public_*.json; do echo "$f"; python3 -c "
import json,sys; r=json.load(open(sys.argv[1])); print({k:r[k] for k in r if not isinstance(r[k],(list,dict))})" "$f" 2>/dev/null | head -c 900; echo; done
fi
if has run; then
  t "traced full-GPU run"
  timeout 100 "$WORK/bin/g4c" run --model "$WORK/12b-int4" --input "$WORK/public_ids.jsonl" --output /tmp/trace_out.jsonl \
    --summary "$O/run_trace_full.json" --device cuda --budget 9984MiB --ignore-eos --batch-size 8 \
    --trace /tmp/trace_public_full.json 2>&1 | tail -3
  [ -f /tmp/trace_public_full.json ] && xz -T8 -c /tmp/trace_public_full.json > "$O/trace_public_full.json.xz"
  t "compiled plan (lifetime-shared arena), emulated"
  timeout 90 "$WORK/bin/g4c" run --model "$WORK/12b-int4" --input "$WORK/public_ids.jsonl" --output /tmp/run_out.jsonl \
    --summary "$O/run_compiled_emulated.json" --device cuda --emulate 1g.10gb --batch-size 8 --ignore-eos 2>&1 | tail -3
fi
if has gptq; then
  # GPTQ with the calibration forwards on the GPU (Linears streamed from pinned host memory;
  # Hessians + solves on the host): tiny (cuda vs cpu executor, then both evaluated on the CPU),
  # then the synthetic 12B BF16 under the 9984 MiB budget with GPTQ_SAMPLES sequences.
  [ -x "$WORK/bin/g4c" ] || { xz -dc .devpack-bench/g4c.xz > "$WORK/bin/g4c"; chmod +x "$WORK/bin/g4c"; }
  G=$WORK/bin/g4c
  for d in cpu cuda; do
    t "gptq tiny --device $d"
    timeout 120 "$G" quantize --model models/gemma4-tiny --method gptq --calibration datasets/calibration-256.jsonl \
      --device $d -o /tmp/tiny-gptq-$d > "$O/gptq_tiny_$d.log" 2>&1; echo "rc=$?"; tail -2 "$O/gptq_tiny_$d.log"
    timeout 90 "$G" eval --model /tmp/tiny-gptq-$d --dataset datasets/quality_public.jsonl -o "$O/eval_tiny_$d.json" \
      > "$O/eval_tiny_$d.log" 2>&1; echo "eval rc=$?"; tail -1 "$O/eval_tiny_$d.log"
  done
  t "synth 12B bf16"
  [ -f "$WORK/12b-bf16/config.json" ] || timeout 200 "$G" synth --preset gemma4-12b --dtype bf16 --seed 0 \
    -o "$WORK/12b-bf16" --no-progress > "$O/synth_bf16.log" 2>&1
  t "gptq 12B bf16 --device cuda --budget 9984MiB (${GPTQ_SAMPLES:-8} samples)"
  timeout "${GPTQ_T:-400}" "$G" quantize --model "$WORK/12b-bf16" --method gptq --calibration datasets/calibration-256.jsonl \
    --calibration-samples "${GPTQ_SAMPLES:-8}" --device cuda --budget 9984MiB -o "$WORK/12b-gptq" > "$O/gptq_12b.log" 2>&1
  echo "rc=$?"; tail -3 "$O/gptq_12b.log"
  python3 -c "import json,sys; q=json.load(open(sys.argv[1])); print(q['seconds'], q['calibration'].get('device'), q['timing_seconds'])" \
    "$WORK/12b-gptq/quantization_config.json" 2>&1 | tail -2
fi
t "done"
[ -n "${OUT:-}" ] && tar cJf "$OUT/session.tar.xz" -C "$O" . && ls -la "$OUT"

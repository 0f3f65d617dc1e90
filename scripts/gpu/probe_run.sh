#!/bin/bash
# One device call: ncu profiles of the decode GEMM kernels (legacy split-K and the FAST
# streaming variant) at the gate+up shape, then g4c bench performance_public on the synthetic
# 12B INT4 over batch sizes and token budgets, and a g4c run (compiled plan) to check that the
# plan no longer streams weights. Packs as session_run.sh; logs in $OUT/probe.tar.xz.
export PYTHONUNBUFFERED=1 G4C_NO_PROGRESS=1 WORK=${WORK:-/tmp/g4c-bench}
O=/tmp/g4c-probe; C=.devpack-cudart; BIN=/tmp/g4c-cudart-bin
mkdir -p "$O" "$WORK/bin" "$BIN"
t() { echo "[probe +${SECONDS}s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.draw --format=csv,noheader
xz -dc $C/g4c_gpu_decode_bench.xz > $BIN/db && chmod +x $BIN/db
xz -dc .devpack-bench/g4c.xz > "$WORK/bin/g4c" && chmod +x "$WORK/bin/g4c"
G=$WORK/bin/g4c
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
STAGES=${STAGES:-decode ncu bench}
if [[ " $STAGES " == *" decode "* ]]; then
  xz -dc $C/g4c_gpu_kernels_test.xz > $BIN/kt && chmod +x $BIN/kt
  t "decode GEMM tests (all variants)"
  timeout 120 $BIN/kt --gtest_filter='GpuW4Decode.*:GpuW4A16.Decode*' > "$O/decode_tests.log" 2>&1
  echo "decode tests rc=$?"; grep -E "^\[ +(FAILED|PASSED) +\]|Failure|Expected|Which is|error" "$O/decode_tests.log" | head -20
  t "decode bench, 132 SMs"
  timeout 100 $BIN/db > "$O/decode_bench.log" 2>&1; echo "rc=$?"; cut -c1-24,200- "$O/decode_bench.log" | head -3; awk '{print}' "$O/decode_bench.log" | tail -36 | cut -c1-30,130-
  t "decode bench, 16-SM green context"
  timeout 120 $BIN/db --green 16 > "$O/decode_bench_green.log" 2>&1; echo "rc=$?"; tail -36 "$O/decode_bench_green.log" | cut -c1-30,130-
fi
if [ -n "$NCU" ] && [[ " $STAGES " == *" ncu "* ]]; then
  for k in "w4_ldg_kernel<\\(int\\)1, \\(int\\)16, \\(int\\)1, \\(int\\)8, \\(int\\)2"; do  # ncu prints template args as (int)N
    for skip in 3; do
      t "ncu $k skip $skip"
      G4C_BENCH_SHAPE=gate timeout 120 $NCU --clock-control none --kernel-name-base demangled -k "regex:$k" \
        --launch-skip $skip -c 1 --set full $BIN/db > "$O/ncu_${k:0:16}_$skip.txt" 2>&1
      echo "rc=$?"; grep -E "Duration|DRAM Throughput|Memory Throughput|Compute \(SM\)|Registers Per|Achieved Occupancy|Issue Slots Busy|Warp Cycles Per Issued|Stall|Block Size|Grid Size|SM Frequency|L2 Hit" "$O/ncu_${k:0:16}_$skip.txt" | head -30
    done
  done
fi
if [[ " $STAGES " == *" bench "* ]]; then
  t "synth"
  [ -f "$WORK/12b-int4/manifest.json" ] || timeout 200 $G synth --preset gemma4-12b --dtype int4 --group-size 128 --seed 0 \
    -o "$WORK/12b-int4" --no-progress > "$O/synth.log" 2>&1; tail -1 "$O/synth.log"
  cp -f $C/perf_public_ids.jsonl "$WORK/public_ids.jsonl"
  # BENCH_CFGS: ';'-separated "batch tokens [extra g4c bench flags]"
  IFS=';' read -r -a CFGS <<< "${BENCH_CFGS:-8 512;10 1024;16 1024;16 2048}"
  for cfg in "${CFGS[@]}"; do
    set -- $cfg
    extra="${*:3}"; tag="$1_$2$(echo "$extra" | tr -d ' -')"
    t "bench batch $1 tokens $2"
    timeout 90 $G bench --model "$WORK/12b-int4" --input "$WORK/public_ids.jsonl" --device cuda --budget 9984MiB \
      --ignore-eos --batch-size $1 --max-num-batched-tokens $2 --repeat 2 $extra --report "$O/bench_$tag.json" > "$O/bench_$tag.log" 2>&1
    echo "rc=$? ($cfg)"; tail -2 "$O/bench_$tag.log"
    python3 -c "
import json,sys; r=json.load(open(sys.argv[1])); p=r['phases']
print('median', r['elapsed_s']['median'], 'prefill', p['prefill']['elapsed_s'], 'decode', p['decode']['elapsed_s'], 'tpot', r['tpot_s'], r['device'], r['options'].get('batch_size'), r['options'].get('chunk_tokens'), 'steps', [x['steps'] for x in r['runs']])" "$O/bench_$tag.json" 2>&1 | tail -1
  done
  t "run (compiled plan), full GPU"
  timeout 90 $G run --model "$WORK/12b-int4" --input "$WORK/public_ids.jsonl" --output /tmp/run_out.jsonl \
    --summary "$O/run_full.json" --device cuda --budget 9984MiB --batch-size 10 --ignore-eos 2>&1 | tail -2
  python3 -c "import json; r=json.load(open('$O/run_full.json')); print(r['elapsed_s'], r.get('weight_streaming'), r['device'])"
fi
t done
tar cJf $OUT/probe.tar.xz -C "$O" .

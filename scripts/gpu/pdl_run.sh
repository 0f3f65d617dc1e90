#!/bin/bash
# Short device call: decode GEMM tests (incl. the PDL producer/consumer test), the tiny CUDA
# runtime tests (decode graphs now hold programmatic edges), and g4c bench performance_public on
# the synthetic 12B INT4, full H200, batch 16. Packs as session_run.sh.
export G4C_NO_PROGRESS=1 W=/tmp/g4c-bench; C=.devpack-cudart; B=/tmp/g4c-cudart-bin; O=/tmp/g4c-pdl
mkdir -p $B $O $W/bin
xz -dc $C/g4c_gpu_kernels_test.xz > $B/kt && chmod +x $B/kt
timeout 60 $B/kt --gtest_filter='GpuW4Decode.*' > $O/decode_tests.log 2>&1; echo "decode tests rc=$?"
grep -E "^\[ +(FAILED|PASSED) +\]|Failure" $O/decode_tests.log | head
OUT=$O TESTS_T=60 bash $C/run_cudart.sh tiny 2>&1 | grep -E "rc=|PASSED|FAILED|greedy exact|top-1 306|Failure" | head -12
xz -dc .devpack-bench/g4c.xz > $W/bin/g4c && chmod +x $W/bin/g4c
timeout 60 $W/bin/g4c synth --preset gemma4-12b --dtype int4 --group-size 128 --seed 0 -o $W/12b-int4 --no-progress > /dev/null 2>&1
for pdl in "" --pdl "" --pdl; do
  for emu in "" "--emulate 1g.10gb"; do
    tag=b${pdl:+-pdl}${emu:+-emu}; [ -n "$emu" ] && [ -f $O/$tag.json ] && continue  # emulated: once each
    timeout 90 $W/bin/g4c bench --model $W/12b-int4 --input $C/perf_public_ids.jsonl --device cuda --budget 9984MiB \
      --ignore-eos --batch-size 16 --repeat 2 $pdl $emu --report $O/$tag.json > $O/$tag.log 2>&1; echo "$tag rc=$?"
    python3 -c "import json; r=json.load(open('$O/$tag.json')); print('$tag', r['elapsed_s'], r['tpot_s'], r['phases']['decode']['elapsed_s'], r.get('peak_device_bytes'), r['date'])" 2>&1 | tail -1
  done
done
tar cJf $OUT/pdl.tar.xz -C $O .

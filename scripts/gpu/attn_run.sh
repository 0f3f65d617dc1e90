#!/bin/bash
# One device call: attention GPU tests, the attention microbenchmark with its split sweep, and
# g4c bench performance_public (12B INT4, full H200 and emulated 1g.10gb, batch 16, 1024-token
# steps). Packs as session_run.sh (runtime test / decode bench binaries not needed).
export G4C_NO_PROGRESS=1 WORK=${WORK:-/tmp/g4c-bench}
C=.devpack-cudart; BIN=/tmp/g4c-cudart-bin; O=/tmp/g4c-attn; mkdir -p $BIN $O $WORK/bin
t() { echo "[attn +${SECONDS}s] $*"; }
for b in g4c_gpu_kernels_test g4c_gpu_kernels_bench; do [ -f $C/$b.xz ] && xz -dc $C/$b.xz > $BIN/$b && chmod +x $BIN/$b; done
xz -dc .devpack-bench/g4c.xz > $WORK/bin/g4c; chmod +x $WORK/bin/g4c; G=$WORK/bin/g4c
t "attention tests"
timeout 120 $BIN/g4c_gpu_kernels_test --gtest_filter='GpuAttention.*' > $O/attn_tests.log 2>&1; echo "rc=$?"
grep -E "^\[ +(FAILED|PASSED) +\]|Failure" $O/attn_tests.log | head
[ -x $BIN/g4c_gpu_kernels_bench ] && t "attention bench" && timeout 150 $BIN/g4c_gpu_kernels_bench attention > $O/attn_bench.log 2>&1; echo "rc=$?"; grep -E "decode|prefill|==" $O/attn_bench.log
t "synth"
timeout 100 $G synth --preset gemma4-12b --dtype int4 --group-size 128 --seed 0 -o $WORK/12b-int4 --no-progress > $O/synth.log 2>&1; tail -1 $O/synth.log
for e in "" "--emulate 1g.10gb"; do
  t "bench $e"
  timeout 100 $G bench --model $WORK/12b-int4 --input $C/perf_public_ids.jsonl --device cuda --budget 9984MiB --ignore-eos \
    --batch-size 16 --repeat 2 $e --report $O/bench$(echo $e | tr -d ' -.').json > $O/bench.log 2>&1; echo "rc=$?"; tail -1 $O/bench.log
done
t done
tar cJf $OUT/attn.tar.xz -C $O .

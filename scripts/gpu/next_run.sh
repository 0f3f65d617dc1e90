#!/bin/bash
# What the 2026-12-02 (second) session wrote or changed after its last device call, in one call
# (pack as session_run.sh: scripts/gpu/pack_cudart.sh build && scripts/gpu/bench_pack.sh build;
# carry [".devpack-cudart", ".devpack-bench"]):
#  1. GPU tests: streamed layers with sibling fusion, sibling fusion, GpuGptq (all passed on the
#     H200 in the third session, scripts/gpu/profile_run.sh);
#  2. performance_public with the CLI defaults (PDL + q/k/v fused), full ×3 and emulated ×1;
#  3. `g4c run` (compiled plan) on the same input with the defaults;
#  4. performance_large, full H200, batch 16 (bench_vs_hf.sh tokenizes it with the HF tokenizer);
#  5. with EMU_GPTQ=1 (better in a call of its own): GPTQ of the 12B BF16 inside the emulated slice.
export G4C_NO_PROGRESS=1 W=/tmp/g4c-bench; C=.devpack-cudart; B=/tmp/g4c-cudart-bin; O=/tmp/g4c-next
mkdir -p $B $O $W/bin
t() { echo "[next +${SECONDS}s] $*"; }
xz -dc $C/g4c_gpu_runtime_test.xz > $B/rt && chmod +x $B/rt
xz -dc .devpack-bench/g4c.xz > $W/bin/g4c && chmod +x $W/bin/g4c
G=$W/bin/g4c
t "GPU tests"
S=/tmp/g4c-cudart-shared; mkdir -p $S/golden/gemma4-tiny
xz -dc $C/shared/golden/gemma4-tiny/golden_logits.safetensors.xz > $S/golden/gemma4-tiny/golden_logits.safetensors
cp -f $C/shared/golden/gemma4-tiny/golden_generate.json $S/golden/gemma4-tiny/
G4C_SOURCE_DIR=$PWD G4C_SHARED_DIR=$S timeout 200 $B/rt \
  --gtest_filter='CudaBackend.StreamedLayersWithSiblingFusion*:CudaBackend.SiblingFusion*:GpuGptq.*' > $O/tests.log 2>&1
echo "rc=$?"; grep -E "measured|FAILED|PASSED|Failure|Expected|Which is" $O/tests.log | head -20
t "synth 12B int4"
[ -f $W/12b-int4/manifest.json ] || timeout 60 $G synth --preset gemma4-12b --dtype int4 --group-size 128 --seed 0 \
  -o $W/12b-int4 --no-progress > /dev/null 2>&1
for emu in "" "--emulate 1g.10gb"; do
  tag=public${emu:+-emu}; rep=3; [ -n "$emu" ] && rep=1
  t "bench $tag"
  timeout 120 $G bench --model $W/12b-int4 --input $C/perf_public_ids.jsonl --device cuda --budget 9984MiB --ignore-eos \
    --batch-size 16 --repeat $rep $emu --report $O/$tag.json > $O/$tag.log 2>&1; echo "rc=$?"
  python3 -c "import json; r=json.load(open('$O/$tag.json')); print('$tag', r['elapsed_s'], r['tpot_s']['p50'], r['phases']['prefill']['elapsed_s'], r['phases']['decode']['elapsed_s'], r['peak_device_bytes'] / 2**20, r['date'])"
done
t "g4c run (compiled plan), defaults"
timeout 90 $G run --model $W/12b-int4 --input $C/perf_public_ids.jsonl --device cuda --budget 9984MiB --ignore-eos \
  --output $O/run_out.jsonl --summary $O/run_summary.json > $O/run.log 2>&1; echo "rc=$?"
python3 -c "import json; r=json.load(open('$O/run_summary.json')); print({k: r.get(k) for k in ('elapsed_s', 'peak_device_bytes', 'weight_streaming')})"
if [ -z "${SKIP_LARGE:-}" ]; then
t "performance_large, full H200"
OUT=$O DATASETS=large bash .devpack-bench/bench_vs_hf.sh synth 2>&1 | grep -E "rc=|written" | tail -3
OUT=$O DATASETS=large BATCH=16 REPEAT=1 G4C_T=$((560 - SECONDS)) bash .devpack-bench/bench_vs_hf.sh g4c 2>&1 | \
  grep -E "rc=|median|error" | head -6
fi
if [ -n "${EMU_GPTQ:-}" ]; then  # GPTQ inside the emulated slice, 16 samples, in what time is left
  t "gptq 12B bf16 --emulate 1g.10gb (16 samples)"
  [ -f $W/12b-bf16/config.json ] || timeout 60 $G synth --preset gemma4-12b --dtype bf16 --seed 0 -o $W/12b-bf16 --no-progress > /dev/null 2>&1
  timeout $((575 - SECONDS)) $G quantize --model $W/12b-bf16 --method gptq --calibration datasets/calibration-256.jsonl \
    --calibration-samples 16 --device cuda --emulate 1g.10gb --budget 9984MiB -o $W/12b-gptq-emu > $O/gptq_emu.log 2>&1
  echo "rc=$?"; grep -E "layer (1|12|24|48)/|quantize:" $O/gptq_emu.log | tail -6
fi
t "done"
tar cJf $OUT/next.tar.xz -C $O .

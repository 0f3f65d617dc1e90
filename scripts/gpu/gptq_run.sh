#!/bin/bash
# Device call: GPTQ on the GPU (runtime/cuda/gptq.cu, runtime/cuda_backend/gptq_device.cpp).
#  1. GpuGptq tests (device Gram / factor / solve vs the host), then compute-sanitizer memcheck of them
#     when the host has it;
#  2. tiny model: quantize three ways (cpu; cuda forwards + host solves; cuda forwards + GPU solves),
#     each evaluated on the CPU (quality_public);
#  3. synthetic 12B BF16 (seed 0), GPTQ with --device cuda --budget 9984MiB, GPTQ_SAMPLES (128) ×
#     512-token calibration sequences, within what is left of GPTQ_DEADLINE (570 s) for the call.
# Packs as session_run.sh (carry .devpack-cudart and .devpack-bench). Logs: $OUT/gptq.tar.xz.
export W=/tmp/g4c-bench; C=.devpack-cudart; B=/tmp/g4c-cudart-bin; O=/tmp/g4c-gptq
mkdir -p $B $O $W/bin
t() { echo "[gptq +${SECONDS}s] $*"; }
xz -dc $C/g4c_gpu_runtime_test.xz > $B/rt && chmod +x $B/rt
xz -dc .devpack-bench/g4c.xz > $W/bin/g4c && chmod +x $W/bin/g4c
G=$W/bin/g4c
if [ -z "${SKIP_TESTS:-}" ]; then
  t "GpuGptq tests"
  timeout 150 $B/rt --gtest_filter='GpuGptq.*' > $O/gptq_tests.log 2>&1; echo "rc=$?"
  grep -E "measured|FAILED|PASSED|Failure|Expected|Which is|seed|error" $O/gptq_tests.log | head -30
  if command -v compute-sanitizer > /dev/null; then
    t "memcheck"
    timeout 150 compute-sanitizer --tool memcheck --leak-check no --error-exitcode 3 $B/rt \
      --gtest_filter='GpuGptq.Gram*:GpuGptq.Solve*:GpuGptq.Errors*' > $O/memcheck.log 2>&1; echo "memcheck rc=$?"
    tail -3 $O/memcheck.log
  else
    echo "no compute-sanitizer on this host"
  fi
fi
if [ -z "${SKIP_TINY:-}" ]; then
  for mode in ${TINY_MODES:-cpu "cuda --host-solve" cuda}; do
    tag=$(echo $mode | tr -d ' -'); t "tiny gptq --device $mode"
    /usr/bin/time -f "%e s wall" timeout 100 $G quantize --model models/gemma4-tiny --method gptq \
      --calibration datasets/calibration-256.jsonl --device $mode -o /tmp/tiny-$tag > $O/tiny_$tag.log 2>&1
    echo "rc=$?"; grep -E "quantize:|wall" $O/tiny_$tag.log | tail -3
    G4C_NO_PROGRESS=1 timeout 90 $G eval --model /tmp/tiny-$tag --dataset datasets/quality_public.jsonl \
      -o $O/eval_tiny_$tag.json > $O/eval_tiny_$tag.log 2>&1; echo "eval rc=$?"; tail -1 $O/eval_tiny_$tag.log
  done
  python3 -c "
import json
a, b = (json.load(open(f'/tmp/{d}/quantization_config.json'))['layers'] for d in ('tiny-cuda', 'tiny-cudahostsolve'))
same = sum(x['predicted_loss'] == y['predicted_loss'] for x, y in zip(a, b))
print(f'tiny: GPU vs host solves: {same}/{len(a)} Linears with the identical GPTQ objective')"
  for f in /tmp/tiny-cuda /tmp/tiny-cudahostsolve; do sha256sum $f/*.safetensors | cut -c1-16; done
fi
t "synth 12B bf16"
[ -f "$W/12b-bf16/config.json" ] || timeout 240 $G synth --preset gemma4-12b --dtype bf16 --seed 0 \
  -o $W/12b-bf16 --no-progress > $O/synth_bf16.log 2>&1
echo "synth rc=$?"; du -sh $W/12b-bf16
left=$(( ${GPTQ_DEADLINE:-570} - SECONDS ))
t "gptq 12B bf16 --device cuda --budget 9984MiB (${GPTQ_SAMPLES:-128} samples), ${left} s left"
timeout $left $G quantize --model $W/12b-bf16 --method gptq --calibration datasets/calibration-256.jsonl \
  --calibration-samples ${GPTQ_SAMPLES:-128} --device cuda --budget 9984MiB -o $W/12b-gptq > $O/gptq_12b.log 2>&1
echo "rc=$?"; grep -E "layer (1|2|3|12|24|36|48)/|quantize:|error|Error" $O/gptq_12b.log | tail -12
python3 - <<PY 2>&1 | tail -4
import json
q = json.load(open("$W/12b-gptq/quantization_config.json"))
c = q["calibration"]
print("seconds", q["seconds"], "timing", q["timing_seconds"], "samples", c["samples"], "tokens", c["tokens"])
print("device", c.get("device", {}).get("device"), "peak MiB", c.get("device", {}).get("peak_device_bytes", 0) / 2**20,
      "budget MiB", c.get("device", {}).get("budget_bytes", 0) / 2**20, "solves", c.get("hessians_and_solves"))
PY
if [ -n "${AFTER_TINY_RUNTIME:-}" ] && [ $SECONDS -lt 500 ]; then
  t "tiny CUDA runtime tests (PDL on by default)"
  OUT=$O TESTS_T=60 bash $C/run_cudart.sh tiny 2>&1 | grep -E "rc=|PASSED|FAILED|greedy exact|top-1 306|Failure" | head -12
fi
t "done"
tar cJf $OUT/gptq.tar.xz -C $O .

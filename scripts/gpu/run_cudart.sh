#!/bin/bash
# The CUDA runtime's checks on the GPU host (builds nothing there; scripts/gpu/pack_cudart.sh
# packs the binaries and inputs into .devpack-cudart/). Run from the repository root:
#   bash .devpack-cudart/run_cudart.sh [tiny|all]
#  tiny: g4c_gpu_runtime_test (tiny model vs HF bf16 goldens, greedy goldens, INT4 vs CPU,
#        green-context emulation, budget, graphs, trace)
#  logits12b: synthetic gemma4-12b BF16 + INT4 (seed 0); g4c last-position logits of 3 prompts
#        (250, 1000, 2000 tokens) vs HF transformers bf16 / fake-quant bf16 (check_12b_logits.py)
#  all:  + g4c_cudart_bench: synthetic gemma4-12b INT4 g128 checkpoint (seed 0), then
#        performance_public (pre-tokenized) with --ignore-eos, emulated 1g.10gb and full H200,
#        both under the 9984 MiB budget.
# Logs and JSON summaries go to $OUT (or /tmp/g4c-cudart). Env: BATCH (default 4: 12B INT4
# weights + context leave room for 4 rings of 1279 slots × 40 sliding layers in 9984 MiB).
set -uo pipefail
P=.devpack-cudart
O=${OUT:-/tmp/g4c-cudart}
mkdir -p "$O"
BIN=/tmp/g4c-cudart-bin
mkdir -p "$BIN"
for b in g4c_gpu_runtime_test g4c_cudart_bench g4c_gpu_kernels_test g4c_gpu_decode_bench g4c_gpu_kernels_bench; do
  [ -x "$BIN/$b" ] && [ "$BIN/$b" -nt "$P/$b.xz" ] || { xz -dc "$P/$b.xz" > "$BIN/$b" && chmod +x "$BIN/$b"; }
done
# The goldens travel xz-compressed (carry limit); unpacked once per machine.
S=/tmp/g4c-cudart-shared
G=$S/golden/gemma4-tiny
mkdir -p "$G"
[ -f "$G/golden_logits.safetensors" ] || xz -dc "$P/shared/golden/gemma4-tiny/golden_logits.safetensors.xz" > "$G/golden_logits.safetensors"
cp -f "$P/shared/golden/gemma4-tiny/golden_generate.json" "$G/"
export G4C_SOURCE_DIR=$PWD G4C_SHARED_DIR=$S
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv,noheader
date -u
if [ "${SKIP_TINY:-0}" != 1 ]; then
echo "== tiny model tests"
# The green-context test runs in its own process: one context kind per process, as in g4c run.
timeout "${TESTS_T:-150}" "$BIN/g4c_gpu_runtime_test" --gtest_filter='-*Emulated*' > "$O/tiny_tests.log" 2>&1
echo "tests rc=$?"
timeout 60 "$BIN/g4c_gpu_runtime_test" --gtest_filter='*Emulated*' >> "$O/tiny_tests.log" 2>&1
echo "emulated test rc=$?"
grep -E "measured|^\[ +(OK|FAILED|SKIPPED|PASSED) +\]|Failure|error|Expected|Which is|actual" "$O/tiny_tests.log" | head -80
fi
if [ "${1:-tiny}" = logits12b ]; then
  # Checkpoints: $M12_BF16 / $M12_INT4 when given (e.g. bench_vs_hf.sh's), else synthesized here.
  B16=${M12_BF16:-/tmp/g4c-12b-bf16}; I4=${M12_INT4:-/tmp/g4c-12b-int4}
  for d in bf16 int4; do
    dir=$I4; flag=(); [ $d = bf16 ] && dir=$B16 && flag=(--bf16)
    [ -f "$dir/config.json" ] && continue
    timeout "${SYNTH_T:-120}" "$BIN/g4c_cudart_bench" synth "$dir" "${flag[@]}" > "$O/synth_$d.log" 2>&1
    echo "synth $d rc=$?"
  done
  sed -n '1p;5p;9p' "$P/perf_public_ids.jsonl" > /tmp/ids3.jsonl
  # 24 GB of BF16 weights: no 9984 MiB budget for this correctness run (the full H200 holds them).
  timeout 200 "$BIN/g4c_cudart_bench" logits "$B16" /tmp/ids3.jsonl /tmp/g4c_bf16 --budget 0 2>&1 | tail -4
  timeout 120 "$BIN/g4c_cudart_bench" logits "$I4" /tmp/ids3.jsonl /tmp/g4c_int4 --budget 9984MiB 2>&1 | tail -4
  (cd /tmp && timeout 300 python3 "$OLDPWD/$P/check_12b_logits.py" --bf16 "$B16" --int4 "$I4" \
    --ids /tmp/ids3.jsonl --g4c-bf16 /tmp/g4c_bf16 --g4c-int4 /tmp/g4c_int4 --out "$O/logits12b.json") 2>&1 | grep -v Warning | tail -12
fi
if [ "${1:-tiny}" = all ]; then
  M=/tmp/g4c-12b-int4
  echo "== synth gemma4-12b int4"
  date -u
  timeout "${SYNTH_T:-120}" "$BIN/g4c_cudart_bench" synth "$M" > "$O/synth.log" 2>&1
  echo "synth rc=$?"; tr '\r' '\n' < "$O/synth.log" | tail -2
  for mode in emulated full; do
    date -u
    extra=(--emulate 1g.10gb --label emulated_1g.10gb)
    [ $mode = full ] && extra=(--budget 9984MiB --label full_h200 --trace "$O/trace_full.json")
    timeout "${RUN_T:-150}" "$BIN/g4c_cudart_bench" run "$M" "$P/perf_public_ids.jsonl" --ignore-eos \
      --batch "${BATCH:-4}" "${extra[@]}" > "$O/$mode.json" 2> "$O/$mode.err"
    echo "$mode rc=$?"; tail -3 "$O/$mode.err"; cat "$O/$mode.json"
  done
  [ -f "$O/trace_full.json" ] && gzip -f "$O/trace_full.json"
fi
date -u

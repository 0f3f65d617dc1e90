#!/bin/bash
# Everything the CUDA runtime and the side-by-side need, in one device call (the session's device
# time allows few calls): tiny GPU tests, 12B synth, g4c bench on performance_public (full +
# emulated), the 12B logits check vs HF, then performance_large (HF batched, g4c full, g4c
# emulated) while time remains. Packs: scripts/gpu/pack_cudart.sh + scripts/gpu/bench_pack.sh,
# carry [".devpack-cudart", ".devpack-bench"]; run as: timeout 570 bash .devpack-bench/final_run.sh
# Results: /tmp/o (cudart/, bench/) and $WORK/results; the caller tars them into $OUT.
export PYTHONUNBUFFERED=1 G4C_NO_PROGRESS=1 WORK=${WORK:-/tmp/g4c-bench}
C=.devpack-cudart; B=.devpack-bench
mkdir -p /tmp/o/cudart /tmp/o/bench
t() { echo "[final +${SECONDS}s] $*"; }
t "tiny GPU tests"
OUT=/tmp/o/cudart TESTS_T=150 bash $C/run_cudart.sh tiny 2>&1 | grep -vE "^\[ +(OK|RUN) " | tail -32
t "synth 12B bf16 + int4, tokenize public + large"
OUT=/tmp/o/bench DATASETS="public large" bash $B/bench_vs_hf.sh synth 2>&1 | grep -E "rc=|written" | tail -6
t "g4c public full + emulated"
OUT=/tmp/o/bench DATASETS=public BATCH=8 REPEAT=2 G4C_T=150 bash $B/bench_vs_hf.sh g4c 2>&1 | grep -E "rc=|median|error" | head -8
t "g4c run --device cuda, compiled plan (lifetime-shared activation arena), emulated"
timeout 90 "$WORK/bin/g4c" run --model "$WORK/12b-int4" --input "$WORK/public_ids.jsonl" --output /tmp/o/bench/run_out.jsonl \
  --summary /tmp/o/bench/run_compiled_emulated.json --device cuda --emulate 1g.10gb --batch-size 8 --ignore-eos 2>&1 | tail -3
t "traced public run"
OUT=/tmp/o/bench BATCH=8 G4C_T=60 bash $B/bench_vs_hf.sh trace 2>&1 | grep -E "rc=|tokens in" | head -3
t "12B logits vs HF"
OUT=/tmp/o/cudart SKIP_TINY=1 M12_BF16=$WORK/12b-bf16 M12_INT4=$WORK/12b-int4 bash $C/run_cudart.sh logits12b 2>&1 | grep -vE "Loading weights|Warning" | tail -12
if [ $SECONDS -lt 340 ]; then
  t "HF large batched"
  OUT=/tmp/o/bench DATASETS=large HF_T=$((530 - SECONDS)) bash $B/bench_vs_hf.sh hf 2>&1 | grep -E "rc=|elapsed|Error" | head -6
fi
if [ $SECONDS -lt 470 ]; then
  t "g4c large full (+ emulated while time remains)"
  OUT=/tmp/o/bench DATASETS=large BATCH=8 REPEAT=1 G4C_T=$((555 - SECONDS)) bash $B/bench_vs_hf.sh g4c 2>&1 | grep -E "rc=|median|error" | head -6
fi
t "done"

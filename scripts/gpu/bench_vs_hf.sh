#!/bin/bash
# g4c vs Hugging Face transformers, side by side, on the GPU host (issue 8). Builds nothing there:
# scripts/gpu/bench_pack.sh packs g4c (CUDA), hf_peer.py and this script into .devpack-bench/.
# From the repository root, in one `run` call (carry [".devpack-bench"]):
#   bash .devpack-bench/bench_vs_hf.sh all          (or: synth | g4c | hf | table)
# Steps:
#  synth  g4c synth --preset gemma4-12b --seed 0: --dtype bf16 (HF layout) and --dtype int4
#         (G128 symmetric) under $WORK; requests pre-tokenized once (HF tokenizers on the synth's
#         tokenizer.json, BOS first) into input_ids jsonl, so g4c and HF see identical ids.
#  g4c    g4c bench on the INT4 checkpoint, every dataset of $DATASETS, full GPU (--budget 9984MiB)
#         and --emulate 1g.10gb, --ignore-eos (HF generates exactly max_new_tokens too).
#  hf     hf_peer.py run --batched and serial on the BF16 checkpoint, same ids. Serial on
#         performance_large (29,375 new tokens one request at a time) only with HF_SERIAL_LARGE=1.
#  trace  one traced g4c run of performance_public on the full GPU (Chrome trace)
#  table  one markdown table (bench_table.py) from every result so far + a PNG of the g4c runs.
# $WORK (default /tmp/g4c-bench) keeps checkpoints and results while the machine stays warm, so
# steps can be split over calls; logs, reports and the table are copied to $OUT. The table is
# printed last. Env: DATASETS ("public large"), BATCH (4), REPEAT (3 for public, 1 for large),
# G4C_T / HF_T (timeouts per step, s), SYNTH_T.
set -euo pipefail
P=.devpack-bench
O=${OUT:-/tmp/g4c-bench-out}
W=${WORK:-/tmp/g4c-bench}
R=$W/results
STAGE=${1:-all}
DATASETS=${DATASETS:-public large}
mkdir -p "$O" "$W/bin" "$R"
export G4C_SOURCE_DIR=$PWD G4C_NO_PROGRESS=1
G4C=$W/bin/g4c
[ -x "$G4C" ] && [ "$G4C" -nt "$P/g4c.xz" ] || { xz -dc "$P/g4c.xz" > "$G4C"; chmod +x "$G4C"; }
BF16=$W/12b-bf16
INT4=$W/12b-int4
log() { echo "[$(date -u +%H:%M:%S)] $*"; }
# step NAME TIMEOUT CMD...: runs CMD with a timeout, output in $O/NAME.log; a failure is logged
# (and shows as "failed" in the table) but does not stop the other steps.
step() {
  local name=$1 t=$2; shift 2
  log "$name: $*"
  local rc=0
  timeout "$t" "$@" > "$O/$name.log" 2>&1 || rc=$?
  echo "$rc" > "$R/$name.rc"
  log "$name: rc=$rc"; tail -n 3 "$O/$name.log" | tr '\r' '\n' | tail -n 3
  return 0
}

# Results kept from an earlier call on the same weights and requests ($P/prior/, e.g. the HF
# runs, which do not change with g4c): copied in unless this call produces them again.
if [ -d "$P/prior" ]; then
  for f in "$P"/prior/*; do [ -e "$R/$(basename "$f")" ] || cp "$f" "$R/"; done
fi
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true; } | tee "$R/device.txt"
date -u +%Y-%m-%d > "$R/date.txt"

if [ "$STAGE" = synth ] || [ "$STAGE" = all ]; then
  [ -f "$BF16/config.json" ] || step synth_bf16 "${SYNTH_T:-300}" "$G4C" synth --preset gemma4-12b --dtype bf16 --seed 0 -o "$BF16" --no-progress
  [ -f "$INT4/manifest.json" ] || step synth_int4 "${SYNTH_T:-300}" "$G4C" synth --preset gemma4-12b --dtype int4 --group-size 128 --seed 0 -o "$INT4" --no-progress
  for ds in $DATASETS; do
    # From /tmp: the repository's tokenizers/ folder must not shadow the `tokenizers` package.
    (cd /tmp && python3 - "$OLDPWD/datasets/performance_$ds.jsonl" "$BF16/tokenizer.json" "$W/${ds}_ids.jsonl") <<'PY'
import json, shutil, sys
src, tok_path, dst = sys.argv[1:]
try:
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(tok_path)
except Exception as e:  # no tokenizers package: both sides tokenize the prompt text themselves
    print("pre-tokenization unavailable (%s): using the prompts as they are" % e)
    shutil.copyfile(src, dst)
    sys.exit(0)
with open(dst, "w") as out:
    for line in open(src, encoding="utf-8"):
        if not line.strip():
            continue
        r = json.loads(line)
        ids = r.get("input_ids") or tok.encode(r["prompt"], add_special_tokens=False).ids
        if not ids or ids[0] != 2:
            ids = [2] + ids  # BOS (DESIGN.md §3: tokenize with BOS)
        out.write(json.dumps({"input_ids": ids, "max_new_tokens": int(r.get("max_new_tokens", 32))}) + "\n")
print(dst, "written")
PY
  done
fi

if [ "$STAGE" = g4c ] || [ "$STAGE" = all ]; then
  for ds in $DATASETS; do
    rep=${REPEAT:-3}; wr=0
    [ "$ds" = large ] && rep=${REPEAT:-1} && wr=8
    for mode in full emulated; do
      dev=(--device cuda --budget 9984MiB)
      [ $mode = emulated ] && dev=(--device cuda --emulate 1g.10gb --budget 9984MiB)
      step "g4c_${ds}_${mode}" "${G4C_T:-420}" "$G4C" bench --model "$INT4" --input "$W/${ds}_ids.jsonl" \
        "${dev[@]}" --ignore-eos --batch-size "${BATCH:-4}" --repeat "$rep" --warmup 1 --warmup-requests "$wr" \
        --label "g4c int4 $mode" --report "$R/g4c_${ds}_${mode}.json" --plot "$O/g4c_${ds}_${mode}.png"
    done
  done
fi

if [ "$STAGE" = trace ] || [ "$STAGE" = all ]; then
  # A Chrome trace of one full-GPU public run, apart from the timed bench runs (per-kernel CUDA
  # events cost a little): where the time goes (chrome://tracing, Perfetto).
  step g4c_public_trace "${G4C_T:-420}" "$G4C" run --model "$INT4" --input "$W/public_ids.jsonl" --output "$W/trace_out.jsonl" \
    --summary "$R/g4c_public_trace_summary.json" --device cuda --budget 9984MiB --ignore-eos --batch-size "${BATCH:-4}" \
    --trace "$O/trace_public_full.json"
fi

if [ "$STAGE" = hf ] || [ "$STAGE" = all ]; then
  python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" \
    | tee "$R/hf_versions.txt" || true
  for ds in $DATASETS; do
    for mode in batched serial; do
      if [ "$ds" = large ] && [ $mode = serial ] && [ "${HF_SERIAL_LARGE:-0}" != 1 ]; then
        echo "skipped: 29,375 new tokens one request at a time exceed the 10-minute call (HF_SERIAL_LARGE=1 runs it)" \
          > "$R/hf_${ds}_${mode}.skip"; continue
      fi
      flag=(); [ $mode = batched ] && flag=(--batched)
      step "hf_${ds}_${mode}" "${HF_T:-540}" python3 "$P/hf_peer.py" run --model "$BF16" --input "$W/${ds}_ids.jsonl" \
        --output "$W/hf_${ds}_${mode}_out.jsonl" --summary "$R/hf_${ds}_${mode}.json" "${flag[@]}"
    done
  done
fi

cp -f "$R"/* "$O/" 2>/dev/null || true
[ -f "$O/trace_public_full.json" ] && gzip -f "$O/trace_public_full.json"
ls "$R"/g4c_*.json > /dev/null 2>&1 && { args=(); for f in "$R"/g4c_*.json; do args+=(--compare "$f"); done
  "$G4C" bench --plot-only "${args[@]}" --plot "$O/side_by_side.png" || true; }
python3 "$P/bench_table.py" "$R" > "$O/side_by_side.md"
echo
cat "$O/side_by_side.md"

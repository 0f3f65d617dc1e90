#!/usr/bin/env bash
# The quantization quality table of docs/QUANTIZATION.md: every method/option combination on
# models/gemma4-tiny, ΔNLL to BF16 with `g4c eval` on quality_public and the lab's WikiText set
# (datasets/lab). Usage: scripts/quant_table.sh [BUILD_DIR] [WORK_DIR] [ROWS...]
# ROWS (default: all) are names like gptq-g128-asym-mse, gptq-act-gptaq-g64-sym-none (method rtn |
# gptq | gptq-act, then -awq for the AWQ scales and
# -gptaq for GPTAQ, group, codes, clip); results go to WORK/table.tsv (row, set, mean NLL,
# ΔNLL, its 95 % half-width over the paired sequences, arguments).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
g4c=${1:-$root/build}/bin/g4c
work=${2:-/tmp/g4c-quant-table}
shift 2 || true
model=$root/models/gemma4-tiny
calib=$root/datasets/calibration-256.jsonl
sets=("$root/datasets/quality_public.jsonl")
lab=$root/datasets/lab/quality_public.jsonl
[[ -f $lab && ${LAB:-1} == 1 ]] && sets+=("$lab")  # LAB=0: quality_public only
mkdir -p "$work"
rows=("$@")
if [[ ${#rows[@]} -eq 0 ]]; then
  for m in rtn gptq gptq-act; do for g in 128 64; do for s in asym sym; do for c in none mse; do
    rows+=("$m-g$g-$s-$c"); done; done; done; done
fi
ref() {  # BF16 reference per dataset
  local ds=$1 out=$work/bf16-$(basename "$(dirname "$ds")")-$(basename "$ds" .jsonl).json
  [[ -f $out ]] || "$g4c" eval --model "$model" --dataset "$ds" -o "$out" >&2
  echo "$out"
}
for row in "${rows[@]}"; do
  IFS=- read -r m rest <<<"$row"
  args=(--method gptq)
  case $row in
    rtn-*) args=(--method rtn) ;;
    gptq-act-*) args+=(--act-order) ;;
  esac
  [[ $row == *-awq-* ]] && args+=(--awq)
  [[ $row == *-gptaq-* ]] && args+=(--gptaq)
  g=$(grep -o 'g[0-9]\+' <<<"$row" | head -1 | tr -d g)
  [[ $row == *-asym-* ]] && args+=(--asymmetric) || args+=(--symmetric)
  clip=${row##*-}
  args+=(--group-size "$g" --clip "$clip")
  [[ ${args[1]} == gptq || $row == *-awq* ]] && args+=(--calibration "$calib")
  q=$work/$row
  [[ -f $q/manifest.json ]] || "$g4c" quantize --model "$model" "${args[@]}" -o "$q" >&2
  for ds in "${sets[@]}"; do
    tag=$(basename "$(dirname "$ds")")-$(basename "$ds" .jsonl)
    r=$(ref "$ds")
    out=$work/$row-$tag.json
    [[ -f $out ]] || "$g4c" eval --model "$q" --dataset "$ds" --reference "$r" -o "$out" >&2
    printf '%s\t%s\t%s\t%s\n' "$row" "$tag" "$(python3 -c "import json;d=json.load(open('$out'));se=d.get('delta_nll_se');print(f\"{d['mean_nll']:.6f}\t{d['delta_nll']:.4f}\t\"+(f\"±{1.96*se:.4f}\" if se is not None else '-'))")" "${args[*]}" \
      | tee -a "$work/table.tsv"
  done
done

#!/bin/bash
# Packs the small carry folders the third session of 2026-12-02 used (each ≤ ~25 MB, so that with
# the ~38 MB tracked tree a `run` call stays under its 64 MiB carry limit), from an existing CUDA
# build (default ./build; `cmake --build build` first):
#   .devpack-k  g4c_gpu_kernels_test, g4c_gpu_decode_bench, g4c_gpu_stream_bench  → scripts/gpu/lean_run.sh (C=.devpack-k)
#   .devpack-e  g4c (g4c.xz), g4c_gpu_runtime_test (rt.xz), perf_public_ids.jsonl, tiny goldens → scripts/gpu/e2e_run.sh
#   .devpack-a  g4c_gpu_kernels_bench (kb.xz), g4c_gpu_decode_bench (db.xz), g4c_gpu_kernels_test (kt.xz) → scripts/gpu/attn_profile_run.sh
# Usage: scripts/gpu/pack_small.sh [BUILD_DIR] [k|e|a ...]   (default: all three)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B=${1:-$ROOT/build}; shift || true
WHICH=${*:-k e a}
cmake --build "$B" -j2 --target g4c g4c_gpu_runtime_test g4c_gpu_kernels_test g4c_gpu_kernels_bench \
  g4c_gpu_decode_bench g4c_gpu_stream_bench g4c_cudart_bench
pk() { strip -o "$1/$2" "$3" && xz -9ef -T2 "$1/$2"; }
for w in $WHICH; do
  P=$ROOT/.devpack-$w; rm -rf "$P"; mkdir -p "$P"
  grep -qx "/.devpack-$w/" "$ROOT/.git/info/exclude" || echo "/.devpack-$w/" >> "$ROOT/.git/info/exclude"
  case $w in
    k) for b in g4c_gpu_kernels_test g4c_gpu_decode_bench g4c_gpu_stream_bench; do pk "$P" $b "$B/tests/bin/$b"; done ;;
    a) pk "$P" kb "$B/tests/bin/g4c_gpu_kernels_bench"; pk "$P" db "$B/tests/bin/g4c_gpu_decode_bench"
       pk "$P" kt "$B/tests/bin/g4c_gpu_kernels_test" ;;
    e) pk "$P" g4c "$B/bin/g4c"; pk "$P" rt "$B/tests/bin/g4c_gpu_runtime_test"
       # The bf16 goldens and the pre-tokenized input, as pack_cudart.sh makes them.
       if [ ! -f "$ROOT/.devpack-cudart/perf_public_ids.jsonl" ]; then bash "$ROOT/scripts/gpu/pack_cudart.sh" "$B" > /dev/null; fi
       cp "$ROOT/.devpack-cudart/perf_public_ids.jsonl" "$P/"
       mkdir -p "$P/shared/golden/gemma4-tiny" && cp "$ROOT/.devpack-cudart/shared/golden/gemma4-tiny/"* "$P/shared/golden/gemma4-tiny/" ;;
  esac
  du -sh "$P"
done

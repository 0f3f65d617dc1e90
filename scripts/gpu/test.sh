#!/bin/bash
# On the GPU host: runs every GPU test of a pack made by scripts/gpu/pack.sh, then
# compute-sanitizer memcheck over the kernel tests and the CUDA backend tests, and prints a
# pass/fail table (one row per test binary / sanitizer run / Python suite, with its failures).
#   1. g4c_cuda_kernels_test   (tests/cuda_kernels: GEMM, decode GEMM, attention, fused ops)
#   2. g4c_cuda_backend_test   (tests/cuda_backend: tiny model vs HF goldens, INT4 vs CPU, two
#                               engines with different kernel options, device tokens);
#      g4c_quant_cuda_test     (tests/quant: GPTQ's Hessians and solves on the GPU vs the host)
#   3. g4c_device_flags_test, g4c_cuda_meta_test (host-side, run here too), faults_gpu_test
#      (device allocation failures injected at open and mid-run)
#   4. the Python module's device="cuda" tests (tests/python/test_engine.py -k cuda)
#   5. compute-sanitizer --tool memcheck over 1 and 2 (G4C_SANITIZER_FILTER: a gtest filter for
#      both, default all tests; the 12B test skips there)
#
#   Usage: bash PACKDIR/scripts/test.sh PACKDIR      (or scripts/gpu/test.sh PACKDIR)
#   Env: OUT (logs and tests.json written there when set), G4C_12B_INT4 (a synthetic 12B INT4
#        checkpoint; synthesized with the pack's g4c when unset), G4C_SKIP_SANITIZER=1,
#        G4C_SANITIZER_FILTER, G4C_TEST_TIMEOUT (seconds per step, default 900)
# A binary or the Python module the pack lacks (pack.sh G4C_PACK_ONLY / G4C_PACK_NO_PYTHON) is
# left out of the run and the table, with a line saying so.
# Exit status: 0 when every row passed, 1 otherwise.
set -uo pipefail
[ $# -ge 1 ] || { echo "usage: $0 PACKDIR" >&2; exit 2; }
P=$(cd "$1" && pwd)
LOG=${OUT:-$(mktemp -d)}
mkdir -p "$LOG"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
TO=${G4C_TEST_TIMEOUT:-900}
for f in "$P"/bin/*.xz; do xz -dc "$f" > "$W/$(basename "$f" .xz)" && chmod +x "$W/$(basename "$f" .xz)"; done
mkdir -p "$W/lib"
for f in "$P"/lib/*.xz; do [ -e "$f" ] && xz -dc "$f" > "$W/lib/$(basename "$f" .xz)"; done
# The tests find the tiny model and the goldens under G4C_SOURCE_DIR (the tree the pack lies in).
export G4C_SOURCE_DIR=$(dirname "$P") G4C_NO_PROGRESS=1
export LD_LIBRARY_PATH=$W/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}  # g4c's cpp-httplib and its libraries
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || echo "nvidia-smi failed"; } |
  tee "$LOG/device.txt"
head -1 "$P/MANIFEST" 2>/dev/null

declare -a ROWS
FAILED=0
# row NAME RC LOGFILE: one table row; failures listed from gtest's output.
row() {
  local name=$1 rc=$2 log=$3 st=PASS detail
  [ "$rc" = 0 ] || { st=FAIL; FAILED=1; }
  [ "$rc" = 124 ] && detail="timed out after ${TO}s" || detail=$(grep -oE "^\[ +FAILED +\] [A-Za-z0-9_./]+" "$log" |
    awk '{print $NF}' | sort -u | head -8 | paste -sd' ')
  local counts
  counts=$(grep -oE "^\[ +PASSED +\] [0-9]+ tests?" "$log" | tail -1 | grep -oE "[0-9]+")
  local skipped
  skipped=$(grep -oE "^\[ +SKIPPED +\] [0-9]+ tests?" "$log" | tail -1 | grep -oE "[0-9]+")
  ROWS+=("$(printf '%-44s %-5s %6s %6s  %s' "$name" "$st" "${counts:--}" "${skipped:-0}" "$detail")")
}
gtest() {  # gtest NAME BINARY [args]  (a binary the pack lacks is left out)
  local name=$1 bin=$2; shift 2
  [ -x "$W/$bin" ] || { echo "== $name: $bin not in the pack"; return; }
  echo "== $name"
  timeout "$TO" "$W/$bin" "$@" > "$LOG/$name.log" 2>&1
  local rc=$?
  grep -E "^\[ +(FAILED|SKIPPED) +\] [A-Za-z]|^\[  PASSED|measured" "$LOG/$name.log" | head -40
  row "$name" $rc "$LOG/$name.log"
}

gtest kernels g4c_cuda_kernels_test
# The backend's 12B test (FP8 KV logits against BF16 KV) needs a synthetic Gemma-4-12B INT4:
# G4C_12B_INT4, else synthesized here with the pack's g4c (seeded, about 10 s and 7.6 GB).
if [ -z "${G4C_12B_INT4:-}" ] && [ -x "$W/g4c" ]; then
  echo "== synth 12B INT4 for the backend's 12B test"
  "$W/g4c" synth --preset gemma4-12b --dtype int4 --group-size 128 --seed 0 -o "$W/12b-int4" --no-progress \
    > "$LOG/synth_12b.log" 2>&1 && export G4C_12B_INT4=$W/12b-int4 || echo "synth failed (see $LOG/synth_12b.log)"
fi
gtest backend g4c_cuda_backend_test
gtest quant_cuda g4c_quant_cuda_test
gtest device_flags g4c_device_flags_test
gtest cuda_meta g4c_cuda_meta_test
gtest faults faults_gpu_test

echo "== python device=cuda"
if [ ! -d "$P/python/g4c" ]; then
  echo "== python: no Python module in the pack (G4C_PACK_NO_PYTHON)"
else
  want=$(cat "$P/python/VERSION" 2>/dev/null) have=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  if [ "$want" != "$have" ]; then
    echo "module built for Python $want, this host runs $have (pack with G4C_PACK_PYTHON)" | tee "$LOG/python.log"
    ROWS+=("$(printf '%-44s %-5s %6s %6s  %s' python FAIL - - "module for Python $want, host $have")"); FAILED=1
  else
    cp -r "$P/python" "$W/python" && find "$W/python" -name "*.so.xz" -exec xz -d {} \;
    (cd "$W" && PYTHONPATH=$W/python timeout "$TO" \
      python3 -m pytest -q -p no:cacheprovider -rs -k cuda "$P/tests/test_engine.py") > "$LOG/python.log" 2>&1
    rc=$?
    tail -5 "$LOG/python.log"
    st=PASS; [ $rc = 0 ] || { st=FAIL; FAILED=1; }
    # A skipped device test means the module saw no GPU: a failure on the GPU host.
    if grep -qE "[0-9]+ skipped" "$LOG/python.log"; then st=FAIL; FAILED=1; fi
    ROWS+=("$(printf '%-44s %-5s %6s %6s  %s' python "$st" "$(grep -oE '[0-9]+ passed' "$LOG/python.log" | grep -oE '[0-9]+')" \
      "$(grep -oE '[0-9]+ skipped' "$LOG/python.log" | grep -oE '[0-9]+' || echo 0)" "")")
  fi
fi

if [ "${G4C_SKIP_SANITIZER:-0}" != 1 ]; then
  CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
  for t in kernels:g4c_cuda_kernels_test backend:g4c_cuda_backend_test quant_cuda:g4c_quant_cuda_test; do
    name=memcheck_${t%%:*} bin=${t#*:}
    [ -x "$W/$bin" ] || { echo "== $name: $bin not in the pack"; continue; }
    echo "== $name"
    if [ -z "$CS" ]; then
      echo "compute-sanitizer not found on this host" > "$LOG/$name.log"
      ROWS+=("$(printf '%-44s %-5s %6s %6s  %s' "$name" FAIL - - "compute-sanitizer not found")"); FAILED=1
      continue
    fi
    env -u G4C_12B_INT4 timeout "$TO" "$CS" --tool memcheck --leak-check no --error-exitcode 3 \
      "$W/$bin" --gtest_filter="${G4C_SANITIZER_FILTER:-*}" > "$LOG/$name.log" 2>&1
    rc=$?
    grep -E "ERROR SUMMARY|========= (Invalid|Program hit)" "$LOG/$name.log" | head -10
    row "$name" $rc "$LOG/$name.log"
  done
fi

echo
printf '%-44s %-5s %6s %6s  %s\n' "suite" "state" "passed" "skip" "failures"
for r in "${ROWS[@]}"; do echo "$r"; done
[ -n "${OUT:-}" ] && printf '%s\n' "${ROWS[@]}" > "$OUT/tests_table.txt"
exit $FAILED

#!/bin/bash
# Runs every GPU kernel test and benchmark on the GPU host (builds nothing there) and prints a
# table last. Usage: tests/gpu/run.sh [BIN_DIR] [OUT_DIR]
#   BIN_DIR: holds g4c_gpu_kernels_test and g4c_gpu_kernels_bench (default build/tests/bin)
#   OUT_DIR: logs (default $OUT, else /tmp/g4c-gpu)
# Env: G4C_SKIP_SANITIZER=1 skips compute-sanitizer; G4C_BENCH=<all|decode|prefill|lmhead|attention>;
#      G4C_NCU=1 adds Nsight Compute profiles of the hot kernels (ncu_*.txt).
set -uo pipefail
BIN=${1:-build/tests/bin}
OUTD=${2:-${OUT:-/tmp/g4c-gpu}}
mkdir -p "$OUTD"
T=$BIN/g4c_gpu_kernels_test
B=$BIN/g4c_gpu_kernels_bench
declare -a ROWS

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv \
  > "$OUTD/nvidia-smi.csv" 2>&1 || true

echo "== kernel tests"
"$T" --gtest_output="xml:$OUTD/tests.xml" > "$OUTD/tests.log" 2>&1
rc_tests=$?
grep -E "^\[ +(OK|FAILED|SKIPPED) +\]|rel_err|Failure|seed" "$OUTD/tests.log" | head -150
while read -r st name; do ROWS+=("test $name|$st"); done < <(
  grep -E "^\[ +(OK|FAILED|SKIPPED) +\] [A-Za-z0-9_]+\.[A-Za-z0-9_]+ " "$OUTD/tests.log" |
  sed -E 's/^\[ +([A-Z]+) +\] ([^ ]+).*/\1 \2/')

if [ "${G4C_SKIP_SANITIZER:-0}" != 1 ] && command -v compute-sanitizer >/dev/null; then
  echo "== compute-sanitizer memcheck (all tests)"
  compute-sanitizer --tool memcheck --leak-check no --error-exitcode 3 "$T" > "$OUTD/memcheck.log" 2>&1
  rc=$?; tail -3 "$OUTD/memcheck.log"
  ROWS+=("memcheck all tests|$(grep -o 'ERROR SUMMARY: [0-9]* errors' "$OUTD/memcheck.log" | tail -1) rc=$rc")
  echo "== compute-sanitizer racecheck (shared memory; small cases)"
  compute-sanitizer --tool racecheck --error-exitcode 3 \
    "$T" --gtest_filter='GpuW4A16.DecodeShapesSymAsym:GpuW4A16.PrefillTiles:GpuBf16Gemm.*:GpuAttention.PrefillPagedFullTinyGeometry:GpuAttention.PrefillFull512' \
    > "$OUTD/racecheck.log" 2>&1
  rc=$?; tail -3 "$OUTD/racecheck.log"
  ROWS+=("racecheck gemm+attn subset|$(grep -E '(ERROR|RACECHECK) SUMMARY' "$OUTD/racecheck.log" | tail -1) rc=$rc")
fi

echo "== benchmarks"
"$B" "${G4C_BENCH:-all}" > "$OUTD/bench.log" 2>&1
rc_bench=$?
cat "$OUTD/bench.log"

if [ "${G4C_NCU:-0}" = 1 ] && command -v ncu >/dev/null; then
  echo "== ncu (one launch of each hot kernel; --clock-control none)"
  prof() {  # name mode mangled-kernel-regex
    ncu --clock-control none --kernel-name-base mangled -k "regex:$3" -c 1 \
      --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats \
      --section MemoryWorkloadAnalysis "$B" "$2" > "$OUTD/ncu_$1.txt" 2>&1
    echo "-- $1"; grep -E "^    (Duration|Memory Throughput|DRAM Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Registers Per Thread|Grid Size|Block Size|Warp Cycles Per Issued Instruction|Theoretical Occupancy)" "$OUTD/ncu_$1.txt" | head -12
  }
  prof decode_gemm decode 'w4_decode_kernelILi1ELi8E'
  prof wgmma_int4 prefill 'wgmma_gemm_kernelILb1E'
  prof tile_int4 prefill 'tile_gemm_kernelILb1E'
  prof tile_bf16 prefill 'tile_gemm_kernelILb0ELi2E'
  prof attn_prefill256 attention 'attn_kernelILi256ELi256ELi4E'
  prof attn_decode256 attention 'attn_kernelILi256ELi256ELi1E'
fi

echo
echo "================ summary ================"
printf '%-60s %s\n' "item" "result"
for r in "${ROWS[@]}"; do printf '%-60s %s\n' "${r%%|*}" "${r#*|}"; done
printf '%-60s %s\n' "tests exit code" "$rc_tests" "bench exit code" "$rc_bench"
[ "$rc_tests" = 0 ]

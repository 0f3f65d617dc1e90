#!/bin/bash
# Decode-GEMM run on the GPU host (builds nothing there): the decode GEMM tests (streaming
# variants of gemm_decode.cu and the w4a16_gemm dispatch), compute-sanitizer memcheck of them,
# then g4c_gpu_decode_bench on the whole GPU and in a 16-SM green context.
# Usage: tests/gpu/run_decode.sh [BIN_DIR] [OUT_DIR]
#   BIN_DIR holds g4c_gpu_kernels_test and g4c_gpu_decode_bench (or their .gz).
# Packing here (sm_90a, static cudart, stripped + gzip; .devpack-gemv/ is git-ignored):
#   cmake --build build-gemv --target g4c_gpu_kernels_test g4c_gpu_decode_bench
#   mkdir -p .devpack-gemv && for b in g4c_gpu_kernels_test g4c_gpu_decode_bench; do
#     strip -o .devpack-gemv/$b build-gemv/tests/bin/$b && gzip -9f .devpack-gemv/$b; done
#   cp tests/gpu/run_decode.sh .devpack-gemv/
# Device: run tool, carry [".devpack-gemv"]: bash .devpack-gemv/run_decode.sh .devpack-gemv
set -uo pipefail
BIN=${1:-build/tests/bin}
OUTD=${2:-${OUT:-/tmp/g4c-decode}}
mkdir -p "$OUTD"
W=$(mktemp -d)
for b in g4c_gpu_kernels_test g4c_gpu_decode_bench; do
  if [ -f "$BIN/$b.gz" ]; then gunzip -c "$BIN/$b.gz" > "$W/$b"; else cp "$BIN/$b" "$W/$b"; fi
  chmod +x "$W/$b"
done
T=$W/g4c_gpu_kernels_test
B=$W/g4c_gpu_decode_bench
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv 2>&1 | tee "$OUTD/nvidia-smi.csv"

echo "== decode GEMM tests"
FILTER='GpuW4Decode.*:GpuW4A16.Decode*'
timeout 80 "$T" --gtest_filter="$FILTER" > "$OUTD/tests.log" 2>&1
rc_tests=$?
grep -E "^\[ +(OK|FAILED) +\]|Failure|Expected|Which is|seed" "$OUTD/tests.log" | head -40
echo "max rel_err [w4dec]:" $(grep -oE "\[w4dec\].*rel_err [0-9.e+-]+" "$OUTD/tests.log" | awk '{print $NF}' | sort -g | tail -1)
echo "tests rc=$rc_tests"

echo "== bench, whole GPU"
timeout 60 "$B" > "$OUTD/bench.log" 2>&1
echo "rc=$?"; cat "$OUTD/bench.log"
echo "== bench, 16-SM green context"
timeout 80 "$B" --green 16 > "$OUTD/bench_green.log" 2>&1
echo "rc=$?"; cat "$OUTD/bench_green.log"

if command -v compute-sanitizer > /dev/null; then
  echo "== memcheck (decode tests)"
  timeout 55 compute-sanitizer --tool memcheck --leak-check no --error-exitcode 3 "$T" \
    --gtest_filter='GpuW4Decode.ShapesSymAsym:GpuW4Decode.GateUp:GpuW4A16.DecodeSplitK' > "$OUTD/memcheck.log" 2>&1
  echo "rc=$?"; grep -E "ERROR SUMMARY|FAILED|Invalid|out of bounds" "$OUTD/memcheck.log" | sort | uniq -c | head -8
fi
rm -rf "$W"
[ "$rc_tests" = 0 ]

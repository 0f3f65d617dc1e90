#!/bin/bash
# One device call (issue 6): the lean decode GEMM family (gemm_decode_lean.cu, variants 14–17).
#  1. decode GEMM tests over every variant, then compute-sanitizer memcheck + racecheck on them;
#  2. g4c_gpu_decode_bench on 132 SMs, plain and with G4C_BENCH_PDL=1;
#  3. ncu (--set full) of variant 14 at gate+up and q, M = 1; the read-bandwidth probe.
# Pack: scripts/gpu/pack_cudart.sh build; carry [".devpack-cudart"]. Logs in $OUT/lean.tar.xz.
# STAGES (default "test bench ncu probe") selects parts; GREEN=1 adds the 16-SM bench.
O=/tmp/g4c-lean; C=${C:-.devpack-cudart}; BIN=/tmp/g4c-cudart-bin
mkdir -p "$O" "$BIN"
t() { echo "[lean +${SECONDS}s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.draw --format=csv,noheader
for b in g4c_gpu_decode_bench g4c_gpu_stream_bench g4c_gpu_kernels_test; do [ -f $C/$b.xz ] && xz -dc $C/$b.xz > $BIN/$b && chmod +x $BIN/$b; done
ST=" ${STAGES:-test bench ncu probe} "
if [[ $ST == *" test "* ]]; then
  t "decode tests"
  timeout 150 $BIN/g4c_gpu_kernels_test --gtest_filter='GpuW4Decode.*' > "$O/tests.log" 2>&1; echo "rc=$?"
  grep -E "^\[ +(FAILED|PASSED|OK) +\]|Failure|Expected|Which is" "$O/tests.log" | head -30
  grep -E "\[w4dec\] v1[4-7]" "$O/tests.log" | head -24
  if command -v compute-sanitizer > /dev/null; then
    t "memcheck"
    timeout 200 compute-sanitizer --tool memcheck --leak-check no --error-exitcode 3 $BIN/g4c_gpu_kernels_test \
      --gtest_filter='GpuW4Decode.ShapesSymAsym:GpuW4Decode.GateUp' > "$O/memcheck.log" 2>&1; echo "rc=$?"; tail -3 "$O/memcheck.log"
    t "racecheck"
    timeout 200 compute-sanitizer --tool racecheck --error-exitcode 3 $BIN/g4c_gpu_kernels_test \
      --gtest_filter='GpuW4Decode.GateUp' > "$O/racecheck.log" 2>&1; echo "rc=$?"; tail -3 "$O/racecheck.log"
  fi
fi
if [[ $ST == *" bench "* ]]; then
  t "decode bench, 132 SMs"
  timeout 150 $BIN/g4c_gpu_decode_bench > "$O/bench.log" 2>&1; echo "rc=$?"; cat "$O/bench.log"
  t "decode bench, 132 SMs, PDL"
  G4C_BENCH_PDL=1 timeout 150 $BIN/g4c_gpu_decode_bench > "$O/bench_pdl.log" 2>&1; echo "rc=$?"; cat "$O/bench_pdl.log"
  if [ "${GREEN:-0}" = 1 ]; then
    t "decode bench, 16-SM green context"
    timeout 200 $BIN/g4c_gpu_decode_bench --green 16 > "$O/bench_green.log" 2>&1; echo "rc=$?"; cat "$O/bench_green.log"
  fi
fi
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [[ $ST == *" ncu "* ]] && [ -n "$NCU" ]; then
  for case in ${NCU_CASES:-gate:14,1 3840->4096:14,1}; do
    shape=${case%%:*}; vm=${case#*:}; tag=$(echo "${shape}_${vm}" | tr -c 'a-z0-9_\n' '_')
    t "ncu $shape v,m=$vm"
    G4C_BENCH_SHAPE="$shape" G4C_BENCH_NCU="$vm" timeout 150 $NCU --clock-control none --kernel-name-base function \
      -k regex:w4_ --launch-skip 2 -c 1 --set full --import-source yes -o "$O/ncu_$tag" $BIN/g4c_gpu_decode_bench \
      > "$O/ncu_$tag.log" 2>&1; echo "rc=$?"
    $NCU --import "$O/ncu_$tag.ncu-rep" --page details > "$O/ncu_$tag.txt" 2>&1
    grep -E "Duration|DRAM Throughput|Registers Per|Achieved Occupancy|Issue Slots Busy|Warp Cycles Per Issued|Executed Instructions  |SM Frequency|Eligible Warps|No Eligible" "$O/ncu_$tag.txt" | head -14
    $NCU --import "$O/ncu_$tag.ncu-rep" --page source --csv --print-source sass > "$O/ncu_${tag}_sass.csv" 2>/dev/null
    ls -la "$O/ncu_${tag}_sass.csv"
  done
fi
if [[ $ST == *" probe "* ]]; then
  t "read probe"
  timeout 120 $BIN/g4c_gpu_stream_bench > "$O/stream.log" 2>&1; echo "rc=$?"; cat "$O/stream.log"
fi
t done
tar cJf $OUT/lean.tar.xz -C "$O" .

#!/bin/bash
# One device call (issue 6, 2026-12-03, second session): split-K of the tensor-map register-A
# prefill GEMM (clusters of 2 / 4 blocks per tile, partials summed through distributed shared
# memory) and whatever kernels the session changed since.
#  1. tests: $TESTS (gtest filter; default every GpuW4A16 / GpuBf16Gemm test — the default
#     dispatch now splits small-tile shapes);
#  2. g4c_gpu_kernels_bench prefill at M = $MS (default "2048 512"; 132 SMs; the split-K line per
#     shape), then $BENCH (extra commands, ';'-separated);
#  3. compute-sanitizer memcheck on $SAN, racecheck on $SAN_RACE (default $SAN; default WsSanitizerSmall, split-K cases
#     included).
# Pack: scripts/gpu/pack_small.sh build a; carry [".devpack-a"]. Logs in $OUT/sk.tar.xz.
O=/tmp/g4c-sk; C=${C:-.devpack-a}; mkdir -p $O /tmp/ab
t() { tar cf - -C $O . | xz -1 -T0 > $OUT/sk.tar.xz; echo "[sk +${SECONDS}s] $*"; }
for b in kb kt db; do [ -f $C/$b.xz ] && xz -dc $C/$b.xz > /tmp/ab/$b && chmod +x /tmp/ab/$b; done
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader | tee $O/smi.txt
ST=" ${STAGES:-test bench san} "
if [[ $ST == *" test "* ]]; then
  t "tests"
  timeout 240 /tmp/ab/kt --gtest_filter="${TESTS:-GpuW4A16.*:GpuBf16Gemm.*}" > $O/tests.log 2>&1; echo "tests rc=$?"
  grep -E "^\[ +(OK|FAILED|PASSED) +\]|Failure|Expected|Which is" $O/tests.log | head -60
  echo "max rel_err (w4a16):" $(grep -oE "\[w4a16\].*rel_err [0-9.e+-]+" $O/tests.log | awk '{print $NF}' | sort -g | tail -1)
fi
if [[ $ST == *" bench "* ]]; then
  for m in ${MS:-2048 512}; do
    t "prefill GEMM bench M=$m, 132 SMs"
    G4C_BENCH_M=$m timeout 150 /tmp/ab/kb prefill > $O/gemm$m.log 2>&1; echo "rc=$?"; grep -vE "^\(|^ [a-z]" $O/gemm$m.log
  done
  IFS=';' read -ra EXTRA <<< "${BENCH:-}"
  for i in "${!EXTRA[@]}"; do
    t "bench: ${EXTRA[$i]}"
    eval "timeout 200 env ${EXTRA[$i]}" > $O/extra$i.log 2>&1; echo "rc=$?"; tail -40 $O/extra$i.log
  done
fi
if [[ $ST == *" san "* ]]; then
  t "memcheck"
  timeout 150 compute-sanitizer --tool memcheck --leak-check no --error-exitcode 3 /tmp/ab/kt \
    --gtest_filter="${SAN:-GpuW4A16.WsSanitizerSmall}" > $O/memcheck.log 2>&1; echo "memcheck rc=$?"
  grep -E "ERROR SUMMARY|FAILED" $O/memcheck.log | tail -3
  t "racecheck"
  timeout 150 compute-sanitizer --tool racecheck --error-exitcode 3 /tmp/ab/kt --gtest_filter="${SAN_RACE:-${SAN:-GpuW4A16.WsSanitizerSmall}}" \
    > $O/racecheck.log 2>&1; echo "racecheck rc=$?"; grep -E "RACECHECK SUMMARY|FAILED" $O/racecheck.log | tail -2
fi
t done

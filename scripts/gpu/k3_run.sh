#!/bin/bash
# One device call (issue 6, 2026-12-03, third session): tests, benches, ncu profiles and
# compute-sanitizer of the kernel binaries packed by `scripts/gpu/pack_small.sh build a`
# (carry [".devpack-a"]). Every stage optional (env):
#   TESTS   gtest filter for g4c_gpu_kernels_test (empty: skip)
#   BENCH   ';'-separated commands (VAR=value prefixes allowed; kb/db/kt = the binaries in /tmp/ab)
#   NCU     ';'-separated "ENV...#kernel regex#skip#count#sections" profiles of kb (or db when the
#           ENV part starts with DB); sections "full" = --set full + source counters
#   SAN / SAN_RACE  gtest filters for memcheck / racecheck (empty: skip)
# Logs (and .ncu-rep files) in $OUT/k3.tar.xz, re-packed after every stage.
O=/tmp/g4c-k3; C=${C:-.devpack-a}; mkdir -p $O /tmp/ab
t() { tar cf - -C $O . | xz -1 -T0 > $OUT/k3.tar.xz; echo "[k3 +${SECONDS}s] $*"; }
for b in kb kt db; do [ -f $C/$b.xz ] && xz -dc $C/$b.xz > /tmp/ab/$b && chmod +x /tmp/ab/$b; done
export PATH=/tmp/ab:$PATH
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader | tee $O/smi.txt
if [ -n "${TESTS:-}" ]; then
  t "tests $TESTS"
  timeout ${TEST_LIMIT:-240} kt --gtest_filter="$TESTS" > $O/tests.log 2>&1; echo "tests rc=$?"
  grep -E "^\[ +(OK|FAILED|PASSED) +\]|Failure|Expected|Which is" $O/tests.log | head -60
fi
IFS=';' read -ra EXTRA <<< "${BENCH:-}"
for i in "${!EXTRA[@]}"; do
  t "bench: ${EXTRA[$i]}"
  eval "timeout ${BENCH_LIMIT:-200} env ${EXTRA[$i]}" > $O/bench$i.log 2>&1; echo "rc=$?"; grep -vE "^ +v[0-9]+:" $O/bench$i.log | tail -${BENCH_TAIL:-40}
done
NCUB=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
IFS=';' read -ra PROF <<< "${NCU:-}"
for i in "${!PROF[@]}"; do
  IFS='#' read -r penv kre skip cnt sec <<< "${PROF[$i]}"
  bin=kb; args=attention
  case "$penv" in DB*) bin=db; args=""; penv=${penv#DB};; esac
  case "$penv" in *PREFILL*) args=prefill; penv=${penv/PREFILL/};; esac
  if [ "$sec" = full ]; then sa="--set full --import-source yes"; else sa="--section ${sec:-SpeedOfLight}"; fi
  t "ncu $i: $penv $bin $args | $kre"
  eval "timeout 200 env $penv $NCUB --clock-control none --kernel-name-base function -k regex:'$kre' --launch-skip ${skip:-2} -c ${cnt:-1} $sa -o $O/ncu$i /tmp/ab/$bin $args" > $O/ncu$i.log 2>&1; echo "rc=$?"
  $NCUB --import $O/ncu$i.ncu-rep --page details > $O/ncu$i.txt 2>&1
  grep -E "^  [a-z_0-9]+.*\(|Duration|DRAM Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Issue Slots Busy|Warp Cycles Per Issued|Executed Instructions  |Grid Size|Block Size|Eligible Warps|Dynamic Shared" $O/ncu$i.txt | head -${NCU_LINES:-30}
  if [ "$sec" = full ]; then
    $NCUB --import $O/ncu$i.ncu-rep --page source --csv --print-source sass > $O/ncu${i}_sass.csv 2>/dev/null
    $NCUB --import $O/ncu$i.ncu-rep --page raw --csv 2>/dev/null | python3 scripts/gpu/ncu_stalls.py 8 smsp__inst_executed.sum dram__bytes_read.sum gpu__time_duration.sum
  fi
done
if [ -n "${SAN:-}" ]; then
  t "memcheck $SAN"
  timeout 200 compute-sanitizer --tool memcheck --leak-check no --error-exitcode 3 /tmp/ab/kt --gtest_filter="$SAN" > $O/memcheck.log 2>&1; echo "memcheck rc=$?"
  grep -E "ERROR SUMMARY|FAILED" $O/memcheck.log | tail -3
  grep -m1 -A12 -E "^========= (Invalid|Misaligned|Program hit|Out-of-range)" $O/memcheck.log
fi
if [ -n "${SAN_RACE:-}" ]; then
  t "racecheck $SAN_RACE"
  timeout 200 compute-sanitizer --tool racecheck --error-exitcode 3 /tmp/ab/kt --gtest_filter="$SAN_RACE" > $O/racecheck.log 2>&1; echo "racecheck rc=$?"
  grep -E "RACECHECK SUMMARY|FAILED" $O/racecheck.log | tail -2
fi
t done

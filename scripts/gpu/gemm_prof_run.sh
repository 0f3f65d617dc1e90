#!/bin/bash
# One device call (issue 6, 2026-12-04 second session): the prefill GEMM's profile on the whole
# H200 and in the 16-SM green context, SASS of the register-A kernel, plus the kernel tests.
# Binaries from `.devpack-a` (kb = g4c_gpu_kernels_bench, kt = g4c_gpu_kernels_test, db / db_old =
# g4c_gpu_decode_bench of this build / of a build to compare with).
# Env: TESTS (gtest filter, empty: skip), SHAPE (bench shape substring), M (tokens),
# BENCH (';'-separated commands), NCU_WHOLE / NCU_GREEN (1: ncu full of the first rs_gemm launch),
# SAN / SAN_RACE (gtest filters for memcheck / racecheck; SAN_LIMIT seconds each; SAN_ENV: extra
# VAR=value words for those runs only, e.g. SAN_ENV=G4C_TEST_PREFILL_VARIANTS=9,10,11), SASS (1:
# cuobjdump of SASS_FN).
# BENCH and PROF entries are eval'd: escape shell characters in values (G4C_BENCH_SHAPE=full\ k,
# not ->512, whose '>' redirects). PROF's regex matches ncu's demangled names, which spell template
# arguments as (int)256, so use '.' for the parentheses: rs_gemm_kernel<.int.256, .int.6, ...>.
O=/tmp/g4c-gp; C=${C:-.devpack-a}; mkdir -p $O /tmp/ab
t() { tar cf - -C $O . | xz -1 -T0 > $OUT/gp.tar.xz; echo "[gp +${SECONDS}s] $*"; }
for b in kb kt db db_old; do [ -f $C/$b.xz ] && xz -dc $C/$b.xz > /tmp/ab/$b && chmod +x /tmp/ab/$b; done
NCUB=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
CUOBJ=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1)
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader | tee $O/smi.txt
if [ -n "${TESTS:-}" ]; then
  t "tests $TESTS"
  timeout ${TEST_LIMIT:-300} /tmp/ab/kt --gtest_filter="$TESTS" > $O/tests.log 2>&1; echo "tests rc=$?"
  grep -E "^\[ +(OK|FAILED|PASSED) +\]|Failure|Expected|Which is" $O/tests.log | grep -v " OK " | head -40
  grep -cE "^\[ +OK +\]" $O/tests.log
fi
if [ -n "${BENCH:-}" ]; then
  IFS=';' read -ra EXTRA <<< "$BENCH"
  for i in "${!EXTRA[@]}"; do
    t "bench: ${EXTRA[$i]}"
    eval "timeout ${BENCH_LIMIT:-200} env ${EXTRA[$i]}" > $O/bench$i.log 2>&1; echo "rc=$?"; tail -${BENCH_TAIL:-40} $O/bench$i.log
  done
fi
# The report $O/$1.ncu-rep → details ($1.txt; the first $2 lines matching $3 printed), source-level
# SASS samples ($1_sass.csv), raw metrics ($1_raw.csv) and ncu_stalls.py's summary (args from $4 on).
report() {
  local n=$1 lines=$2 pat=$3; shift 3
  $NCUB --import $O/$n.ncu-rep --page details > $O/$n.txt 2>&1
  grep -E "$pat" $O/$n.txt | head -$lines
  $NCUB --import $O/$n.ncu-rep --page source --csv --print-source sass > $O/${n}_sass.csv 2>/dev/null
  $NCUB --import $O/$n.ncu-rep --page raw --csv 2>/dev/null > $O/${n}_raw.csv
  python3 scripts/gpu/ncu_stalls.py "$@" < $O/${n}_raw.csv
}
prof() {  # name, extra args
  local n=$1; shift
  t "ncu $n: $*"
  timeout 240 env G4C_BENCH_M=${M:-2048} G4C_BENCH_SHAPE="${SHAPE:-3840->4096}" G4C_BENCH_NO_RS= $NCUB --clock-control none \
    --kernel-name-base function -k regex:rs_gemm --launch-skip 0 -c 1 --set full --import-source yes \
    -o $O/$n /tmp/ab/kb prefill "$@" > $O/$n.log 2>&1; echo "rc=$?"; tail -3 $O/$n.log
  report $n 40 "Duration|Memory Throughput|L1/TEX Cache Throughput|L2 Cache Throughput|DRAM Throughput|Registers Per|Issue Slots Busy|Warp Cycles Per Issued|Executed Instructions  |Grid Size|Eligible Warps|Compute \(SM\)|SM Busy|Mem Busy|Max Bandwidth|L2 Hit|Shared" \
    12 gpu__time_duration.sum sm__pipe_tensor_op_gmma_cycles_active.avg.pct lts__t_sectors_srcunit_tex_op_read.sum lts__throughput.avg.pct l1tex__data_pipe_lsu_wavefronts_mem_shared smsp__inst_executed.sum sm__throughput.avg.pct
}
[ "${NCU_WHOLE:-0}" = 1 ] && prof whole
# PROF: ';'-separated "name#env#regex over demangled names#launch-skip#binary and args" (ncu full).
IFS=';' read -ra PR <<< "${PROF:-}"
for p in "${PR[@]}"; do
  IFS='#' read -r n penv kre skip cmd <<< "$p"
  t "ncu $n: $penv $cmd | $kre"
  eval "timeout 240 env $penv $NCUB --clock-control none --kernel-name-base demangled -k regex:'$kre' --launch-skip ${skip:-0} -c 1 --set full --import-source yes -o $O/$n $cmd" > $O/$n.log 2>&1; echo "rc=$?"; tail -2 $O/$n.log
  report $n 12 "Duration|Compute \(SM\) Throughput|Issue Slots Busy|Executed Instructions  |Grid Size|Registers Per|Eligible Warps|DRAM Throughput" \
    6 gpu__time_duration.sum
done
[ "${NCU_GREEN:-0}" = 1 ] && prof green --green 16
if [ -n "${SAN:-}" ]; then
  t "memcheck $SAN"
  timeout ${SAN_LIMIT:-240} env ${SAN_ENV:-} compute-sanitizer --tool memcheck --leak-check no --error-exitcode 3 /tmp/ab/kt --gtest_filter="$SAN" > $O/memcheck.log 2>&1; echo "memcheck rc=$?"
  grep -E "ERROR SUMMARY|FAILED" $O/memcheck.log | tail -3
fi
if [ -n "${SAN_RACE:-}" ]; then
  t "racecheck $SAN_RACE"
  timeout ${SAN_LIMIT:-240} env ${SAN_ENV:-} compute-sanitizer --tool racecheck --error-exitcode 3 /tmp/ab/kt --gtest_filter="$SAN_RACE" > $O/racecheck.log 2>&1; echo "racecheck rc=$?"
  grep -E "RACECHECK SUMMARY|FAILED" $O/racecheck.log | tail -2
fi
if [ -n "$CUOBJ" ] && [ "${SASS:-0}" = 1 ]; then
  t sass
  $CUOBJ -sass /tmp/ab/kb 2>/dev/null | awk '/Function : /{p=($0 ~ /'"${SASS_FN:-rs_gemm_kernel}"'/)} p' > $O/rs.sass
  wc -l $O/rs.sass
fi
t done

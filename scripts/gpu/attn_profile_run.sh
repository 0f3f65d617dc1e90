#!/bin/bash
# One device call (issue 6): final decode GEMM tables (132 SMs plain / PDL, 16-SM green context),
# the attention benchmark, and ncu (--set full + SASS source counters) of the decode attention
# kernel at B = 16 (hd256 window 1024 at 2k context; hd512 full at 8k). Pack into .devpack-a/:
# kb.xz (g4c_gpu_kernels_bench), db.xz (g4c_gpu_decode_bench), optional kt.xz (g4c_gpu_kernels_test:
# attention tests, memcheck, racecheck first). DECODE=0 skips the decode GEMM tables. Logs in
# $OUT/attn.tar.xz. NCU_CASES: "B,ctx,d" words for G4C_BENCH_ATTN (B = -1: the prefill case);
# NCU_K: the kernel regex (default attn_kernel; NCU_BASE=demangled matches template arguments); RACE / MEMF: the racecheck / memcheck gtest filters.
O=/tmp/g4c-attn; C=.devpack-a; mkdir -p $O /tmp/ab
# Each stage first re-packs the logs so far into $OUT (a call cut off by its limit keeps them).
t() { tar cf - -C $O . | xz -1 -T0 > $OUT/attn.tar.xz; echo "[attn +${SECONDS}s] $*"; }
for b in kb db kt; do [ -f $C/$b.xz ] && xz -dc $C/$b.xz > /tmp/ab/$b && chmod +x /tmp/ab/$b; done
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
if [ -x /tmp/ab/kt ]; then  # kt.xz = g4c_gpu_kernels_test: attention tests, memcheck, racecheck
  t "attention + decode GEMM tests"; timeout 180 /tmp/ab/kt --gtest_filter='GpuAttention.*:GpuW4Decode.*' > $O/attn_tests.log 2>&1; echo "rc=$?"
  grep -E "^\[ +(FAILED|PASSED) +\]|Failure|Expected|Which" $O/attn_tests.log | head
  t "memcheck"; timeout 300 compute-sanitizer --tool memcheck --leak-check no --error-exitcode 3 /tmp/ab/kt \
    --gtest_filter="${MEMF:-GpuAttention.*}" > $O/attn_memcheck.log 2>&1; echo "rc=$?"; tail -2 $O/attn_memcheck.log
  t "racecheck"; timeout 150 compute-sanitizer --tool racecheck --error-exitcode 3 /tmp/ab/kt \
    --gtest_filter="${RACE:-GpuAttention.DecodeSplitKv:GpuAttention.PrefillRingSliding}" > $O/attn_racecheck.log 2>&1; echo "rc=$?"; tail -2 $O/attn_racecheck.log
fi
if [ "${DECODE:-1}" = 1 ] && [ -x /tmp/ab/db ]; then
  t "decode GEMM bench"; timeout 100 /tmp/ab/db > $O/decode.log 2>&1; echo "rc=$?"
  G4C_BENCH_PDL=1 timeout 100 /tmp/ab/db > $O/decode_pdl.log 2>&1; echo "rc=$?"
  timeout 150 /tmp/ab/db --green 16 > $O/decode_green.log 2>&1; echo "rc=$?"
fi
t "attention bench"; timeout 200 /tmp/ab/kb attention > $O/attention.log 2>&1; echo "rc=$?"; grep -E "decode|prefill|==" $O/attention.log | head -30
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for case in ${NCU_CASES:-16,2048,256 16,8192,512}; do
  tag=$(echo $case | tr , _)
  t "ncu attention $case ${NCU_K:-attn_kernel}"
  G4C_BENCH_ATTN=$case timeout 150 $NCU --clock-control none ${NCU_BASE:+--kernel-name-base $NCU_BASE} -k "regex:${NCU_K:-attn_kernel}" --launch-skip 2 -c 1 --set full \
    --import-source yes -o $O/ncu_attn_$tag /tmp/ab/kb attention > $O/ncu_attn_$tag.log 2>&1; echo "rc=$?"
  $NCU --import $O/ncu_attn_$tag.ncu-rep --page details > $O/ncu_attn_$tag.txt 2>&1
  grep -E "Duration|DRAM Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Issue Slots Busy|Warp Cycles Per Issued|Executed Instructions  |Grid Size|Block Size|Eligible Warps|Dynamic Shared" $O/ncu_attn_$tag.txt | head -16
  $NCU --import $O/ncu_attn_$tag.ncu-rep --page source --csv --print-source sass > $O/ncu_attn_${tag}_sass.csv 2>/dev/null
  $NCU --import $O/ncu_attn_$tag.ncu-rep --page raw --csv 2>/dev/null | python3 scripts/gpu/ncu_stalls.py 8
done
t done

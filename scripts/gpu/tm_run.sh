#!/bin/bash
# One device call (issue 6, 2026-12-03): the register-A prefill GEMM with one TMA box per operand
# and stage (paths 13/14) against the 25-request producer (11/12), and the Hopper prefill
# attention launched heaviest block first (variants 1–6) against launch order (variant 7).
#  1. tests: GpuW4A16.PrefillTilesRs* + WsSanitizerSmall, GpuAttention.PrefillHopperKernel;
#  2. g4c_gpu_kernels_bench prefill (M = 2048, 512; whole GPU and 16-SM green context) and the
#     attention prefill cases (G4C_BENCH_ATTN=-1,0,0);
#  3. ncu (--set full + stall reasons) of the tm256 and rs256 kernels on q 3840->4096, M = 2048;
#  4. compute-sanitizer memcheck + racecheck on the small GEMM cases and the prefill attention.
# Pack: scripts/gpu/pack_small.sh build a; carry [".devpack-a"]. Logs in $OUT/tm.tar.xz.
# STAGES (default "test bench ncu san") selects parts.
O=/tmp/g4c-tm; C=${C:-.devpack-a}; mkdir -p $O /tmp/ab
t() { tar cf - -C $O . | xz -1 -T0 > $OUT/tm.tar.xz; echo "[tm +${SECONDS}s] $*"; }
for b in kb kt; do [ -f $C/$b.xz ] && xz -dc $C/$b.xz > /tmp/ab/$b && chmod +x /tmp/ab/$b; done
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader | tee $O/smi.txt
ST=" ${STAGES:-test bench ncu san} "
if [[ $ST == *" test "* ]]; then
  t "tests"
  timeout 150 /tmp/ab/kt --gtest_filter='GpuW4A16.PrefillTilesRs*:GpuW4A16.WsSanitizerSmall:GpuAttention.PrefillHopperKernel' \
    > $O/tests.log 2>&1; echo "tests rc=$?"
  grep -E "^\[ +(OK|FAILED|PASSED) +\]|Failure|Expected|Which is" $O/tests.log | head -24
  echo "max rel_err (w4a16):" $(grep -oE "\[w4a16\].*rel_err [0-9.e+-]+" $O/tests.log | awk '{print $NF}' | sort -g | tail -1)
fi
if [[ $ST == *" bench "* ]]; then
  t "prefill GEMM bench, 132 SMs"
  timeout 150 /tmp/ab/kb prefill > $O/gemm.log 2>&1; echo "rc=$?"; grep -vE "^\(|^ " $O/gemm.log
  t "attention prefill bench"
  G4C_BENCH_ATTN=-1,0,0 timeout 120 /tmp/ab/kb attention > $O/attn.log 2>&1; echo "rc=$?"; grep -E "prefill|ceil" $O/attn.log
  t "prefill GEMM bench, 16-SM green context"
  timeout 150 /tmp/ab/kb prefill --green 16 > $O/gemm_green.log 2>&1; echo "rc=$?"; grep -vE "^\(|^ " $O/gemm_green.log
fi
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [[ $ST == *" ncu "* ]] && [ -n "$NCU" ]; then
  for k in "ILi256ELi6ELb1E" "ILi256ELi6ELb0E"; do
    t "ncu rs_gemm_kernel$k q M=2048"
    G4C_BENCH_SHAPE="q 3840->4096" G4C_BENCH_M=2048 timeout 100 $NCU --clock-control none --kernel-name-base mangled \
      -k "regex:rs_gemm_kernel$k" -c 1 --set full --import-source yes -o $O/ncu_$k /tmp/ab/kb prefill > $O/ncu_$k.log 2>&1
    echo "rc=$?"
    $NCU --import $O/ncu_$k.ncu-rep --page details > $O/ncu_$k.txt 2>&1
    grep -E "^    (Duration|DRAM Throughput|L2 Cache Throughput|L1/TEX Cache Throughput|Compute \(SM\) Throughput|Issue Slots Busy|Warp Cycles Per Issued Instruction|Executed Instructions  |Eligible Warps)" $O/ncu_$k.txt | head -12
    $NCU --import $O/ncu_$k.ncu-rep --page raw --csv 2>/dev/null |
      python3 scripts/gpu/ncu_stalls.py 10 sm__pipe_tensor_cycles_active.avg lts__t_sectors_srcunit_tex.avg
    $NCU --import $O/ncu_$k.ncu-rep --page source --csv --print-source sass > $O/ncu_${k}_sass.csv 2>/dev/null
  done
fi
if [[ $ST == *" san "* ]]; then
  t "memcheck"
  timeout 150 compute-sanitizer --tool memcheck --leak-check no --error-exitcode 3 /tmp/ab/kt \
    --gtest_filter='GpuW4A16.WsSanitizerSmall:GpuW4A16.PrefillTilesRsTensorMaps*:GpuAttention.PrefillHopperKernel' \
    > $O/memcheck.log 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|FAILED" $O/memcheck.log | tail -3
  t "racecheck"
  timeout 120 compute-sanitizer --tool racecheck --error-exitcode 3 /tmp/ab/kt --gtest_filter='GpuW4A16.WsSanitizerSmall' \
    > $O/racecheck.log 2>&1; echo "racecheck rc=$?"; grep -E "RACECHECK SUMMARY|FAILED" $O/racecheck.log | tail -2
fi
t done

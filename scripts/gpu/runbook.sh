#!/bin/bash
# The queued device calls of BENCHMARKS.md "First device calls", one `run` call each, so that the
# next session with a device runs exactly what was planned:
#   bash scripts/gpu/runbook.sh 1   carry .devpack-a: kernel tests (each new prefill variant in a
#                                   process of its own) + memcheck                      (≈ 400 s)
#   bash scripts/gpu/runbook.sh 2   carry .devpack-a: timings (prefill attention 5 vs 9–13 whole
#                                   GPU and 16 SMs, decode 14/17 vs 18/19, LM head tile vs
#                                   register-direct, small ops)
#   bash scripts/gpu/runbook.sh 3   carry .devpack-e: end to end, defaults vs the new variants,
#                                   host vs device sampling (FLAGS / ROUNDS override)
#   bash scripts/gpu/runbook.sh 4   carry .devpack-a: every kernel test, memcheck + racecheck of
#                                   the thirteenth session's argmax over clusters, small-op timings
#                                   whole GPU and 16 SMs                                  (≈ 250 s)
#   bash scripts/gpu/runbook.sh 5   carry .devpack-a: decode GEMM tests, memcheck of all kernel
#                                   tests but the prefill one                             (≤ 400 s)
#   bash scripts/gpu/runbook.sh 6   carry .devpack-a: GpuFused tests, sampler memcheck, small-op
#                                   and sampler timings                                   (≈ 100 s)
# Writes under $OUT (gp.tar.xz / e2e.tar.xz), as the scripts it calls.
set -u
cd "$(dirname "$0")/../.."
case "${1:-}" in
  1)
    P='/tmp/ab/kt --gtest_filter=GpuAttention.PrefillHopperKernel'
    B="G4C_TEST_PREFILL_VARIANTS=0,1,2,3,4,5,6,7,8 $P"
    for v in 9 10 11 12 13; do B="$B;G4C_TEST_PREFILL_VARIANTS=$v $P"; done
    TESTS='GpuAttention.*:GpuW4Decode.*:GpuFused.*:GpuBf16Gemm.*:-GpuAttention.PrefillHopperKernel' BENCH="$B" BENCH_TAIL=6 \
      SAN='GpuAttention.PrefillHopperKernel:GpuW4Decode.ImsVariantsAreBitwiseTheirBase:GpuFused.SampleRowsFollowTheHostSampler:GpuBf16Gemm.RegisterDirectLmHead' \
      SAN_ENV=G4C_TEST_PREFILL_VARIANTS=9,10,11,12,13 SAN_LIMIT=300 exec bash scripts/gpu/gemm_prof_run.sh
    ;;
  2)
    B='G4C_BENCH_ATTN=-1,0,256 G4C_BENCH_PVARS=5,9,10,11,12,13 G4C_BENCH_SK_F=0,1,2,3 /tmp/ab/kb attention'
    B="$B;G4C_BENCH_ATTN=-1,2048,256 G4C_BENCH_PVARS=5,9,10,11,12,13 /tmp/ab/kb attention --green 16"
    B="$B;G4C_BENCH_VARIANTS=14,17,18,19 /tmp/ab/db --green 16;G4C_BENCH_PDL=1 G4C_BENCH_VARIANTS=14,17,18,19 /tmp/ab/db"
    B="$B;/tmp/ab/kb lmhead,fused;/tmp/ab/kb lmhead,fused --green 16"
    BENCH="$B" exec bash scripts/gpu/gemm_prof_run.sh
    ;;
  3)
    C=.devpack-e SAMPLED=${SAMPLED-1} ROUNDS=${ROUNDS:-2} \
      FLAGS="${FLAGS-;--prefill-attention 9;--prefill-attention 11;--prefill-attention 12;--prefill-attention 13;--decode-ims;--lm-head-rd}" \
      exec bash scripts/gpu/e2e_run.sh
    ;;
  4)
    # Every kernel test (the prefill variants each in a process of their own, as step 1), memcheck
    # and racecheck of the argmax tests, and the small ops timed on the whole GPU and in 16 SMs.
    P='/tmp/ab/kt --gtest_filter=GpuAttention.PrefillHopperKernel'
    B="G4C_TEST_PREFILL_VARIANTS=0,1,2,3,4,5,6,7,8 $P"
    for v in 9 10 11 12 13; do B="$B;G4C_TEST_PREFILL_VARIANTS=$v $P"; done
    B="$B;/tmp/ab/kb fused;/tmp/ab/kb fused --green 16"
    TESTS='*:-GpuAttention.PrefillHopperKernel' TEST_LIMIT=330 BENCH="$B" BENCH_TAIL=30 \
      SAN='GpuFused.Argmax*' SAN_RACE='GpuFused.Argmax*' SAN_LIMIT=120 exec bash scripts/gpu/gemm_prof_run.sh
    ;;
  5)
    # The decode GEMM tests (with the --decode-ims fix), then memcheck over every kernel test but
    # the prefill Hopper test (its variants ran under memcheck in the twelfth session).
    TESTS='GpuW4Decode.*' SAN='*:-GpuAttention.PrefillHopperKernel' SAN_LIMIT=${SAN_LIMIT:-380} \
      exec bash scripts/gpu/gemm_prof_run.sh
    ;;
  6)
    # The small fused ops' tests (the sampler with and without its candidate list), memcheck of
    # the sampler test, and the small ops (sample_rows included) timed whole GPU and 16 SMs.
    TESTS='GpuFused.*' SAN='GpuFused.SampleRows*' SAN_LIMIT=150 BENCH_TAIL=40 \
      BENCH='/tmp/ab/kb fused;/tmp/ab/kb fused --green 16' exec bash scripts/gpu/gemm_prof_run.sh
    ;;
  *)
    echo "usage: $0 1|2|3|4|5|6 (BENCHMARKS.md, First device calls)" >&2
    exit 2
    ;;
esac

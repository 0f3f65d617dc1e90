#!/bin/bash
# Runs every libFuzzer target for SECONDS each (default 300), one or two at a time, niced:
#   scripts/fuzz.sh [SECONDS] [JOBS]
# Builds build-fuzz/ (clang, -DG4C_FUZZ=ON) first. Each target starts from its committed seeds
# (tests/fuzz/corpus/<name>, tests/tokenizer/fuzz_corpus) plus what earlier runs found
# (build-fuzz/fuzz/<name>_corpus); crashes are written to build-fuzz/fuzz/crashes/<name>/.
# Prints one line per target: executions, exec/s, coverage (edges), corpus size, crashes, slow
# units; the
# logs stay in build-fuzz/fuzz/logs/. Exit status 1 when any target found a crash.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${1:-300}
JOBS=${2:-2}
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/g4c-ccache}
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DG4C_FUZZ=ON -DG4C_ENABLE_MLIR=OFF \
  -DG4C_ENABLE_CUDA=OFF -DG4C_ENABLE_PYTHON=OFF -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ >/dev/null
nice -n 19 cmake --build build-fuzz -j"$JOBS" --target g4c_fuzzers
F=build-fuzz/fuzz
mkdir -p "$F/logs"
targets=()
for exe in "$F"/fuzz_*; do [ -x "$exe" ] && [ -f "$exe" ] && targets+=("$(basename "$exe")"); done
seeds_of() {
  local short=${1#fuzz_}
  if [ "$short" = tokenizer ]; then echo tests/tokenizer/fuzz_corpus; return; fi
  echo "tests/fuzz/corpus/$short"
  [ -d "tests/fuzz/regressions/$short" ] && echo "tests/fuzz/regressions/$short"
  return 0
}
maxlen_of() { case "$1" in fuzz_plan) echo 262144;; fuzz_config) echo 8192;; *) echo 4096;; esac; }
run_one() {
  local t=$1 short=${1#fuzz_}
  mkdir -p "$F/${short}_corpus" "$F/crashes/$short"
  # -fork keeps going after a crash (each is saved); -ignore_crashes counts them instead of stopping.
  nice -n 19 "$F/$t" -max_total_time="$SECONDS_EACH" -rss_limit_mb=2048 -max_len="$(maxlen_of "$t")" \
    -print_final_stats=1 -artifact_prefix="$F/crashes/$short/" "$F/${short}_corpus" $(seeds_of "$t") \
    > "$F/logs/$short.log" 2>&1 || true
}
running=0
for t in "${targets[@]}"; do
  run_one "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$JOBS" ]; then wait -n; running=$((running - 1)); fi
done
wait
status=0
printf '%-24s %12s %8s %8s %8s %8s %6s\n' target executions exec/s edges corpus crashes slow
for t in "${targets[@]}"; do
  short=${t#fuzz_}
  log="$F/logs/$short.log"
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo "?")
  corp=$(ls "$F/${short}_corpus" | wc -l)
  # crash-, leak-, oom-, timeout- inputs are findings; slow-unit- inputs (the slowest input of a
  # run, over 10 s, often only a loaded machine) are listed apart.
  crashes=$(ls "$F/crashes/$short" | grep -cv '^slow-unit-' || true)
  slow=$(ls "$F/crashes/$short" | grep -c '^slow-unit-' || true)
  printf '%-24s %12s %8s %8s %8s %8s %6s\n' "$short" "$execs" "$rate" "$cov" "$corp" "$crashes" "$slow"
  [ "$crashes" = 0 ] || status=1
done
exit $status

#!/bin/bash
# The test command: builds (scripts/setup.sh), then runs
#   1. the tests labelled "sanitize" under ASan+UBSan (build-asan/: bad input, runtime,
#      scheduler, serving, plan, sampler, quantization, faults), the tests labelled "tsan" (the
#      threaded ones: thread pool, GPTQ rows, sampler pool, engine loop) under ThreadSanitizer
#      (build-tsan/, clang), and every libFuzzer target briefly (build-fuzz/, clang;
#      G4C_FUZZ_SECONDS each; scripts/fuzz.sh runs them longer);
#   2. the whole CTest suite of the main build (unit, lit/FileCheck, golden parity,
#      Python); GPU tests skip without a device.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/g4c-ccache}
J=$(nproc)

echo "== sanitizers (ASan+UBSan) =="
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DG4C_SANITIZE=ON -DG4C_ENABLE_MLIR=OFF \
  -DG4C_ENABLE_CUDA=OFF -DG4C_ENABLE_PYTHON=OFF >/dev/null
cmake --build build-asan -j"$J" --target g4c_sanitize_tests
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan -L sanitize --output-on-failure -j"$J"

echo "== ThreadSanitizer (clang) =="
cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DG4C_TSAN=ON -DG4C_ENABLE_MLIR=OFF \
  -DG4C_ENABLE_CUDA=OFF -DG4C_ENABLE_PYTHON=OFF -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ >/dev/null
cmake --build build-tsan -j"$J" --target g4c_tsan_tests
TSAN_OPTIONS=halt_on_error=1 ctest --test-dir build-tsan -L tsan --output-on-failure -j"$J"

echo "== fuzzers (libFuzzer, briefly each) =="
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DG4C_FUZZ=ON -DG4C_ENABLE_MLIR=OFF \
  -DG4C_ENABLE_CUDA=OFF -DG4C_ENABLE_PYTHON=OFF -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ >/dev/null
cmake --build build-fuzz -j"$J" --target g4c_fuzzers
ctest --test-dir build-fuzz -L fuzz --output-on-failure

echo "== main suite =="
ctest --test-dir build --output-on-failure -j"$J"

#!/bin/bash
# Builds the CUDA binaries here (sm_90a; MLIR/LLVM linked statically, libstdc++/libgcc inside the
# test and benchmark binaries) and packs into OUTDIR everything a GPU host needs to run
# scripts/gpu/test.sh and scripts/gpu/bench.sh — the host has a CUDA driver, Python 3.12 with torch
# and transformers, and nothing from Debian:
#   bin/      g4c, g4c_cuda_kernels_test, g4c_cuda_backend_test, g4c_quant_cuda_test,
#             g4c_cuda_meta_test, faults_gpu_test, and the binaries named in $G4C_PACK_EXTRA (e.g. "g4c_bench_kernels
#             g4c_bench_decode g4c_bench_stream g4c_bench_cudart g4c_device_flags_test")
#             (stripped, xz-compressed: test.sh / bench.sh unpack them)
#   lib/      the shared libraries g4c links from Debian: cpp-httplib, OpenSSL, zlib, brotli (xz)
#   python/   the Python module (g4c/, its extension xz-compressed), built for the Python the GPU host runs: $G4C_PACK_PYTHON
#             (e.g. a python3.12 with its headers; its own build folder BUILD_DIR-py, mostly
#             ccache hits), else BUILD_DIR's python3 (test.sh fails the module's tests, naming
#             both versions, when they differ)
#   tests/    tests/python/test_engine.py + conftest.py (the module's device="cuda" tests)
# The tiny model (models/gemma4-tiny), the HF goldens (tests/data/golden) and the datasets are
# tracked: the GPU host gets
# them with the tree, beside OUTDIR, and test.sh / bench.sh read them there (OUTDIR/..), which
# keeps the pack itself small.
#   scripts/  test.sh, bench.sh, check_12b_logits.py
#   MANIFEST  the commit, build flags and sizes
#
#   Usage: scripts/gpu/pack.sh OUTDIR [BUILD_DIR]
#     OUTDIR:    a git-ignored folder inside the repo (e.g. .gpu), replaced
#     BUILD_DIR: a CUDA build (default build; configured Release with CUDA when absent)
#   Env: G4C_PACK_NO_PYTHON=1 leaves out the Python module; G4C_PACK_ONLY="g4c g4c_cuda_backend_test …"
#        packs only the binaries named (the tree and the pack travel within 64 MiB together, so a
#        call that needs few of them can leave the rest here); test.sh skips a binary the pack lacks.
# The pack must stay well under 60 MiB (printed at the end; exit 1 above 60 MiB).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
[ $# -ge 1 ] || { echo "usage: $0 OUTDIR [BUILD_DIR]" >&2; exit 2; }
OUT=$1
B=${2:-$ROOT/build}
case "$(cd "$(dirname "$OUT")" 2>/dev/null && pwd)" in
  "$ROOT") ;;
  *) echo "$OUT: pack into a folder at the repository's top (e.g. .gpu): the GPU host gets it with the tree" >&2; exit 2 ;;
esac
if [ ! -f "$B/CMakeCache.txt" ]; then
  cmake -S "$ROOT" -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release
fi
grep -q 'compute_90a\|sm_90a' "$B/build.ninja" ||
  { echo "$B: not a CUDA build (configure without -DG4C_ENABLE_CUDA=OFF)" >&2; exit 1; }

# (The tree and the pack travel together within 64 MiB: the tree takes 40.)
# shellcheck disable=SC2206
BINS=(g4c g4c_cuda_kernels_test g4c_cuda_backend_test g4c_quant_cuda_test g4c_cuda_meta_test faults_gpu_test ${G4C_PACK_EXTRA:-})
if [ -n "${G4C_PACK_ONLY:-}" ]; then
  # shellcheck disable=SC2206
  BINS=(${G4C_PACK_ONLY})
fi
TARGETS=("${BINS[@]}")
PB=$B
if [ "${G4C_PACK_NO_PYTHON:-0}" != 1 ]; then
  if [ -n "${G4C_PACK_PYTHON:-}" ]; then
    PB=$B-py
    [ -f "$PB/CMakeCache.txt" ] || cmake -S "$ROOT" -B "$PB" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DPython_EXECUTABLE="$G4C_PACK_PYTHON"
    cmake --build "$PB" -j2 --target g4c_python
  else
    TARGETS+=(g4c_python)
  fi
fi
echo "== building ${TARGETS[*]} in $B"
cmake --build "$B" -j2 --target "${TARGETS[@]}"

rm -rf "$OUT"
mkdir -p "$OUT/bin" "$OUT/scripts" "$OUT/tests"
for b in "${BINS[@]}"; do
  src=$(find "$B/bin" "$B/tests/bin" "$B/bench/bin" -maxdepth 1 -name "$b" -type f 2>/dev/null | head -1)
  [ -n "$src" ] || { echo "$b: not built" >&2; exit 1; }
  # Only glibc and libstdc++/libgcc may be shared (MLIR/LLVM and cudart are static): the GPU host
  # has nothing from Debian.
  extra=$(ldd "$src" 2>/dev/null | awk '{print $1}' |
    grep -vE '^(linux-vdso|/lib64/ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libstdc\+\+\.so|libgcc_s\.so)' || true)
  # g4c alone links cpp-httplib (g4c serve), a shared library in Debian, with OpenSSL, zlib and
  # brotli: those travel in lib/ (the scripts put it on LD_LIBRARY_PATH).
  if [ "$b" = g4c ]; then
    mkdir -p "$OUT/lib"
    for l in $extra; do
      case "$l" in
        libcpp-httplib.so.*|libssl.so.*|libcrypto.so.*|libz.so.*|libbrotli*.so.*)
          xz -9 -c "$(ldd "$src" | awk -v l="$l" '$1 == l {print $3}')" > "$OUT/lib/$l.xz" ;;
        *) echo "g4c needs a shared library the GPU host lacks: $l" >&2; exit 1 ;;
      esac
    done
    extra=""
  fi
  [ -z "$extra" ] || { echo "$b needs shared libraries the GPU host lacks: $extra" >&2; exit 1; }
  strip -o "$OUT/bin/$b" "$src"
  xz -9 -T2 "$OUT/bin/$b"
done
if [ "${G4C_PACK_NO_PYTHON:-0}" != 1 ]; then
  mkdir -p "$OUT/python"
  cp -r "$PB/python/g4c" "$OUT/python/"
  py=$(grep '^Python_EXECUTABLE:' "$PB/CMakeCache.txt" | cut -d= -f2)
  "$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])' > "$OUT/python/VERSION"
  find "$OUT/python" -name "*.so" -exec strip {} \; -exec xz -9 -T2 {} \;
  find "$OUT/python" -name "__pycache__" -prune -exec rm -rf {} \;
fi
cp "$ROOT/tests/python/test_engine.py" "$ROOT/tests/python/conftest.py" "$OUT/tests/"
cp "$ROOT/scripts/gpu/test.sh" "$ROOT/scripts/gpu/bench.sh" "$ROOT/scripts/gpu/check_12b_logits.py" "$OUT/scripts/"
{
  echo "commit $(git -C "$ROOT" rev-parse HEAD)$(git -C "$ROOT" diff --quiet HEAD || echo ' (+ uncommitted changes)')"
  echo "built $(grep '^CMAKE_BUILD_TYPE:' "$B/CMakeCache.txt") sm_90a"
  (cd "$OUT" && find . -type f -printf '%s %p\n' | sort -k2)
} > "$OUT/MANIFEST"
total=$(du -sm "$OUT" | cut -f1)
echo "== $OUT: ${total} MiB"
du -sh "$OUT"/* | sort -h
[ "$total" -le 60 ] || { echo "pack is ${total} MiB, over 60 MiB" >&2; exit 1; }

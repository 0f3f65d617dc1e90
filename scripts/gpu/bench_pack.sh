#!/bin/bash
# Builds the CUDA-enabled g4c here and packs what scripts/gpu/bench_vs_hf.sh needs on the GPU
# host into .devpack-bench/ (git-ignored via .git/info/exclude; give it to the `run` tool as a
# carry path): g4c (stripped, gzip), the HF peer (a copy of ../shared/peers/hf_peer.py: ../shared
# does not travel), and the run script. datasets/ and tokenizers/ are tracked and travel with the
# working tree.
#   Usage: scripts/gpu/bench_pack.sh [BUILD_DIR]     (default: build-bench-cuda, configured if absent)
# Then, in one `run` call (carry [".devpack-bench"]):  bash .devpack-bench/bench_vs_hf.sh all
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B=${1:-$ROOT/build-bench-cuda}
P=$ROOT/.devpack-bench
SHARED=${G4C_SHARED_DIR:-$ROOT/../shared}
if [ ! -f "$B/CMakeCache.txt" ]; then
  cmake -S "$ROOT" -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DG4C_ENABLE_PYTHON=OFF -DG4C_ENABLE_CUDA=ON
fi
grep -q '^G4C_ENABLE_CUDA:BOOL=ON' "$B/CMakeCache.txt" || { echo "$B: not a CUDA build (G4C_ENABLE_CUDA)" >&2; exit 1; }
cmake --build "$B" -j2 --target g4c
# The g4c binary must have the CUDA backend linked in (tools/CMakeLists.txt links g4c_cuda_backend).
if ! strings "$B/bin/g4c" | grep "green context emulating a MIG slice" > /dev/null; then
  echo "$B/bin/g4c: no CUDA backend linked in (--device cuda would fail)" >&2; exit 1
fi
mkdir -p "$P"
grep -qx '/.devpack-bench/' "$ROOT/.git/info/exclude" || echo '/.devpack-bench/' >> "$ROOT/.git/info/exclude"
rm -f "$P/g4c.gz" && strip -o "$P/g4c" "$B/bin/g4c" && xz -9f -T2 "$P/g4c"
cp -f "$SHARED/peers/hf_peer.py" "$P/hf_peer.py"
cp -f "$ROOT/scripts/gpu/bench_vs_hf.sh" "$ROOT/scripts/gpu/bench_table.py" "$P/"
du -sh "$P"
ls -la "$P"

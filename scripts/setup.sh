#!/bin/bash
# Installs the Debian packages g4c builds with (when run as root and missing) and
# builds it into ./build. Safe to re-run: it only rebuilds what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
PKGS="cmake ninja-build g++ clang ccache git xz-utils python3 python3-dev python3-pytest python3-numpy \
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools libflatbuffers-dev flatbuffers-compiler \
  libgtest-dev nlohmann-json3-dev libcli11-dev pybind11-dev libclang-rt-14-dev \
  pkg-config zlib1g-dev liblzma-dev libcpp-httplib-dev nginx-light"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
# node + npm run the transformers.js tokenizer differential test and the g4c serve tests (openai client).
command -v npm >/dev/null || missing="$missing nodejs npm"
if [ -n "$missing" ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "setup: installing$missing"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
  else
    echo "setup: please install:$missing" >&2; exit 1
  fi
fi
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/g4c-ccache}
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"

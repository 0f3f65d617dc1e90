#!/bin/bash
# Fails if the g4c binary depends on any shared library outside the allowed set: the C/C++
# runtime, the CUDA driver/runtime, and cpp-httplib (g4c serve; Debian ships it as a shared
# library only) with the libraries it links (OpenSSL, zlib, brotli). MLIR/LLVM must be static.
set -euo pipefail
bin="$1"
deps=$(ldd "$bin" | awk '{print $1}')
echo "$deps"
bad=0
for d in $deps; do
  case "$d" in
    linux-vdso.so.*|/lib64/ld-linux-x86-64.so.*|libc.so.*|libstdc++.so.*|libgcc_s.so.*|libm.so.*) ;;
    libcuda.so.*|libcudart.so.*|libpthread.so.*|libdl.so.*|librt.so.*) ;;
    libcpp-httplib.so.*|libssl.so.*|libcrypto.so.*|libz.so.*|libbrotli*.so.*) ;;
    *) echo "unexpected shared dependency: $d"; bad=1 ;;
  esac
done
if ldd "$bin" | grep -Eiq 'libLLVM|libMLIR'; then echo "links LLVM/MLIR dynamically"; bad=1; fi
exit $bad

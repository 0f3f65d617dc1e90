#!/usr/bin/env bash
# SASS of a CUDA 13 cubin on this (GPU-less) machine: CUDA 13.0 here ships nvcc/ptxas but no
# cuobjdump/nvdisasm, so this takes nvdisasm from Debian 12's nvidia-cuda-toolkit (CUDA 11.8,
# non-free; extracted under ~/.cache/g4c-nvdisasm, nothing installed) and rewrites the cubin's ELF
# header to the ABI 11.8 reads (OSABI 0x33, ABI version 7, e_flags sm_90 = 0x5a055a; CUDA 13
# writes 0x41 / 8 / 0x06005a04). The instruction encodings are the same ISA; checked 2026-12-04 on
# the lean decode GEMM (SHF vs IMAD.HI, HMMA) and the warp-specialized attention (HGMMA,
# USETMAXREG, SYNCS, LDGSTS) — opcodes newer than 11.8 would print as unknown.
#
#   scripts/sass/sass_here.sh file.cu|file.cubin [nvcc flags…] > out.sass
#   (a .cu is compiled first: -O3 -arch=sm_90a, the include root of this repo)
# Then scripts/sass/sass_mix.py out.sass <kernel name part> for the opcode mix per loop.
set -euo pipefail
in=${1:?usage: sass_here.sh file.cu|file.cubin [nvcc flags]}; shift || true
root=$(cd "$(dirname "$0")/../.." && pwd)
cache=${G4C_NVDISASM_CACHE:-$HOME/.cache/g4c-nvdisasm}
nvd=$cache/usr/bin/nvdisasm
if [[ ! -x $nvd ]]; then
  mkdir -p "$cache"
  list=/etc/apt/sources.list.d/g4c-nonfree.list
  if ! apt-cache show nvidia-cuda-toolkit >/dev/null 2>&1; then
    echo "sass_here: adding Debian non-free ($list) for nvidia-cuda-toolkit's nvdisasm" >&2
    echo 'deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm non-free' > "$list"
    apt-get update -qq
  fi
  (cd "$cache" && apt-get download nvidia-cuda-toolkit >&2 && dpkg -x nvidia-cuda-toolkit_*.deb . && rm -f nvidia-cuda-toolkit_*.deb)
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cubin=$in
if [[ $in == *.cu ]]; then
  cubin=$tmp/k.cubin
  /usr/local/cuda/bin/nvcc -I"$root" -O3 -DNDEBUG -arch=sm_90a --expt-relaxed-constexpr -std=c++17 -cubin "$@" "$in" -o "$cubin"
fi
python3 - "$cubin" "$tmp/p.cubin" <<'PY'
import struct, sys
b = bytearray(open(sys.argv[1], 'rb').read())
if b[:4] != b'\x7fELF': sys.exit('sass_here: not an ELF cubin: ' + sys.argv[1])
b[7], b[8] = 0x33, 7
struct.pack_into('<I', b, 0x30, 0x5a055a)
open(sys.argv[2], 'wb').write(b)
PY
"$nvd" -c "$tmp/p.cubin"

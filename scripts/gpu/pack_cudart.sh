#!/bin/bash
# Builds the CUDA runtime's GPU binaries here and packs what scripts/gpu/run_cudart.sh needs on
# the GPU host into .devpack-cudart/ (git-ignored via .git/info/exclude; carried by the `run`
# tool): test + bench binaries (stripped, gzip), the bf16 goldens of p0..p2 + greedy goldens,
# and datasets/performance_public.jsonl pre-tokenized with the gemma3 tokenizer (the GPU host
# then needs no tokenizer).  Usage: scripts/gpu/pack_cudart.sh [BUILD_DIR]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B=${1:-$ROOT/build-cudart}
P=$ROOT/.devpack-cudart
SHARED=${G4C_SHARED_DIR:-$ROOT/../shared}
BINS="g4c_gpu_runtime_test g4c_cudart_bench g4c_gpu_kernels_test g4c_gpu_decode_bench g4c_gpu_kernels_bench g4c_gpu_stream_bench"
cmake --build "$B" -j2 --target $BINS
mkdir -p "$P/shared/golden/gemma4-tiny"
grep -qx '/.devpack-cudart/' "$ROOT/.git/info/exclude" || echo '/.devpack-cudart/' >> "$ROOT/.git/info/exclude"
for b in $BINS; do
  rm -f "$P/$b.gz" "$P/$b.xz" && strip -o "$P/$b" "$B/tests/bin/$b" && xz -9f -T2 "$P/$b"
done
# bf16 goldens only (p*.input_ids + p*.logits_bf16): a third of golden_logits.safetensors.
python3 - "$SHARED/golden/gemma4-tiny/golden_logits.safetensors" "$P/shared/golden/gemma4-tiny/golden_logits.safetensors" <<'PY'
import json, struct, sys
f = open(sys.argv[1], 'rb'); n = struct.unpack('<Q', f.read(8))[0]; h = json.loads(f.read(n)); base = 8 + n
keys = sorted(k for k in h if k.startswith('p') and (k.endswith('input_ids') or k.endswith('logits_bf16')))
hdr, blobs, off = {}, [], 0
for k in keys:
    a, b = h[k]['data_offsets']; f.seek(base + a); d = f.read(b - a)
    hdr[k] = {'dtype': h[k]['dtype'], 'shape': h[k]['shape'], 'data_offsets': [off, off + len(d)]}
    off += len(d); blobs.append(d)
hj = json.dumps(hdr).encode(); hj += b' ' * ((8 - len(hj) % 8) % 8)
with open(sys.argv[2], 'wb') as o:
    o.write(struct.pack('<Q', len(hj))); o.write(hj); [o.write(d) for d in blobs]
PY
# xz: the carry limit is 64 MiB with the tracked tree (~38 MB); run_cudart.sh unpacks it.
xz -9f -T2 "$P/shared/golden/gemma4-tiny/golden_logits.safetensors"
cp -f "$SHARED/golden/gemma4-tiny/golden_generate.json" "$P/shared/golden/gemma4-tiny/"
TOK=$(mktemp)
xz -dc "$ROOT/tokenizers/gemma3/tokenizer.json.xz" > "$TOK"
"$B/tests/bin/g4c_cudart_bench" tokenize "$ROOT/datasets/performance_public.jsonl" "$TOK" "$P/perf_public_ids.jsonl"
rm -f "$TOK"
cp -f "$ROOT/scripts/gpu/run_cudart.sh" "$ROOT/scripts/gpu/check_12b_logits.py" "$P/"
du -sh "$P"

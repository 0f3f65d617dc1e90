#!/usr/bin/env python3
"""Writes tests/data/golden/gemma4-tiny/ from the full Hugging Face goldens of models/gemma4-tiny.

    python3 tests/data/golden/reduce_goldens.py FULL_GOLDEN_DIR

FULL_GOLDEN_DIR holds golden_logits.safetensors (23 MB: every position's logits of p0..p2 in
fp32 and bf16, and every 7th row of the 700-token `long` sequence), golden_generate.json,
golden_tokenizer.json and reference_results.json (see gemma4-tiny/README.md for how they were
produced). The JSON files are copied unchanged. golden_logits.safetensors is reduced to the
rows the tests compare plus exact per-position summaries of the dropped rows:

  p{i}.input_ids     unchanged
  p{i}.rows          I32: the kept positions: every 8th (0, 8, 16, ...) and the last
  p{i}.logits_fp32   F32 [len(rows), V]: HF's fp32 logits at those positions
  p{i}.logits_bf16   F32 [len(rows), V]: HF's bf16 logits at those positions
  p{i}.top1_bf16     I32 [T]: argmax (first maximum) of HF's bf16 logits at every position
  p{i}.nll_fp32      F32 [T-1]: -log softmax(fp32 logits at t)[input_ids[t+1]], in float64
  long.input_ids     unchanged (700 tokens)
  long.rows          I32: positions 0, 35, 70, ... (every 5th stored row of the full file)
  long.logits_fp32   F32 [len(rows), V]
"""
import json
import os
import shutil
import struct
import sys

import numpy as np

_DT = {"F32": np.float32, "I32": np.int32}
_NAME = {np.dtype(np.float32): "F32", np.dtype(np.int32): "I32"}


def read(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        a, b = v["data_offsets"]
        out[k] = np.frombuffer(data[a:b], dtype=_DT[v["dtype"]]).reshape(v["shape"])
    return out


def write(path, tensors):
    header, blobs, off = {}, [], 0
    for k in sorted(tensors):
        a = np.ascontiguousarray(tensors[k])
        b = a.tobytes()
        header[k] = {"dtype": _NAME[a.dtype], "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    header["__metadata__"] = {"source": "reduce_goldens.py over the full golden_logits.safetensors"}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def main():
    src = sys.argv[1]
    dst = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gemma4-tiny")
    os.makedirs(dst, exist_ok=True)
    for name in ("golden_generate.json", "golden_tokenizer.json", "reference_results.json"):
        shutil.copyfile(os.path.join(src, name), os.path.join(dst, name))
    full = read(os.path.join(src, "golden_logits.safetensors"))
    out = {}
    for p in ("p0", "p1", "p2"):
        ids = full[f"{p}.input_ids"]
        T = len(ids)
        rows = np.array(sorted(set(range(0, T, 8)) | {T - 1}), dtype=np.int32)
        out[f"{p}.input_ids"] = ids
        out[f"{p}.rows"] = rows
        out[f"{p}.logits_fp32"] = full[f"{p}.logits_fp32"][rows]
        out[f"{p}.logits_bf16"] = full[f"{p}.logits_bf16"][rows]
        out[f"{p}.top1_bf16"] = full[f"{p}.logits_bf16"].argmax(1).astype(np.int32)
        lg = full[f"{p}.logits_fp32"].astype(np.float64)[:-1]
        m = lg.max(1)
        lse = m + np.log(np.exp(lg - m[:, None]).sum(1))
        out[f"{p}.nll_fp32"] = (lse - lg[np.arange(T - 1), ids[1:]]).astype(np.float32)
    out["long.input_ids"] = full["long.input_ids"]
    out["long.rows"] = np.arange(0, 700, 35, dtype=np.int32)
    out["long.logits_fp32"] = full["long.logits_fp32"][::5]
    write(os.path.join(dst, "golden_logits.safetensors"), out)


if __name__ == "__main__":
    main()

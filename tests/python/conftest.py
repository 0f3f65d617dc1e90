"""Shared fixtures of the g4c Python tests: paths from the ctest environment
(G4C_SOURCE_DIR, G4C_BINARY_DIR), the vendored HF goldens and a safetensors reader."""
import json
import os
import struct

import numpy as np
import pytest

SOURCE_DIR = os.environ.get("G4C_SOURCE_DIR", os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
MODEL = os.path.join(SOURCE_DIR, "models", "gemma4-tiny")
GOLDEN = os.path.join(SOURCE_DIR, "tests", "data", "golden", "gemma4-tiny")

_DTYPES = {"F32": np.float32, "I32": np.int32, "I64": np.int64, "F16": np.float16, "U8": np.uint8}


def read_safetensors(path):
    """name -> numpy array, read with json + numpy only (8-byte LE header size, JSON header)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        out[name] = np.frombuffer(data[a:b], dtype=_DTYPES[info["dtype"]]).reshape(info["shape"])
    return out


def golden_path(name):
    """A file of tests/data/golden/gemma4-tiny (see its README for what the reduced files hold)."""
    return os.path.join(GOLDEN, name)


@pytest.fixture(scope="session")
def g4c():
    import g4c as module
    return module


@pytest.fixture(scope="session")
def engine(g4c):
    # threads=2: CI has 2 cores; the byte-parity reference uses the same count.
    return g4c.Engine(MODEL, threads=2)

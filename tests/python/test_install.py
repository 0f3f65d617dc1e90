"""`pip install --no-build-isolation <build>/python` (README, "## Python") installs a working
module. Skips where pip or setuptools is not installed (they are not in scripts/setup.sh)."""
import importlib.util
import os
import subprocess
import sys

import pytest

from conftest import MODEL


def test_pip_install_from_the_build_tree(tmp_path):
    for mod in ("pip", "setuptools"):
        if importlib.util.find_spec(mod) is None:
            pytest.skip(f"{mod} is not installed for {sys.executable}")
    import g4c
    pkg_root = os.path.dirname(os.path.dirname(g4c.__file__))  # <build>/python
    assert os.path.exists(os.path.join(pkg_root, "pyproject.toml"))
    target = tmp_path / "site"
    # Build in a copy: setuptools writes build/ and *.egg-info next to pyproject.toml.
    import shutil
    src = tmp_path / "src"
    shutil.copytree(pkg_root, src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-deps", "--no-index",
                    "--target", str(target), str(src)], check=True, capture_output=True)
    env = dict(os.environ, PYTHONPATH=str(target))
    out = subprocess.run([sys.executable, "-c", "import g4c, sys; print(g4c.__file__); "
                          f"print(g4c.Tokenizer({MODEL!r}).encode('Hello world'))"],
                         env=env, check=True, capture_output=True, text=True, cwd=tmp_path).stdout.split("\n")
    assert out[0].startswith(str(target))
    assert out[1] == "[2, 304, 726, 732, 3723]"  # golden_tokenizer.json "tiny"[0]

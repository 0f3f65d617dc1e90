"""g4c: compiler and runtime for Gemma 4 text models, from Python.

In-process (C++ bindings, ``g4c._g4c``): Tokenizer, Plan, load_plan, build_reference_plan,
Engine (generate / logits), SamplingParams, Result, load_config.

Through the ``g4c`` CLI binary (a subprocess; the same code and the same messages as the
command line): compile, quantize, evaluate. The binary is found via the G4C_BINARY
environment variable, else the build this module belongs to (``_build.G4C_BINARY``), else
``g4c`` on PATH.

Errors are ``g4c.Error`` (a RuntimeError) carrying the CLI's message. Long calls release
the GIL; progress bars appear only with ``progress=True``.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import warnings

from ._g4c import (  # noqa: F401
    Engine,
    Error,
    Plan,
    Result,
    SamplingParams,
    Tokenizer,
    build_reference_plan,
    cuda_available,
    load_config,
    load_plan,
)

# Tracebacks say "g4c.Error: <message>" (the type lives in the extension g4c._g4c).
Error.__module__ = "g4c"

__all__ = [
    "Engine", "Error", "Plan", "Result", "SamplingParams", "Tokenizer", "build_reference_plan",
    "cuda_available", "load_config", "load_plan", "compile", "quantize", "evaluate", "cli_binary",
]


def cli_binary():
    """Path of the g4c CLI used by compile / quantize / evaluate.

    G4C_BINARY overrides; else the binary of the build this module comes from; else
    ``g4c`` on PATH. Raises g4c.Error when none exists.

    >>> os.access(g4c.cli_binary(), os.X_OK)
    True
    """
    env = os.environ.get("G4C_BINARY")
    if env:
        if not os.access(env, os.X_OK):
            raise Error(f"G4C_BINARY={env} is not an executable")
        return env
    try:
        from . import _build
        if os.access(_build.G4C_BINARY, os.X_OK):
            return _build.G4C_BINARY
    except ImportError:
        pass
    found = shutil.which("g4c")
    if found:
        return found
    raise Error("the g4c CLI binary was not found (build the `g4c` target, set G4C_BINARY, or put g4c on PATH)")


def _run_cli(args, progress):
    """Runs `g4c <args>`; returns its stdout. Raises g4c.Error with the CLI's message."""
    cmd = [cli_binary()] + [str(a) for a in args]
    env = dict(os.environ)
    if not progress:
        env["G4C_NO_PROGRESS"] = "1"
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    err_chunks = []
    if progress:  # forward the progress bar live, keep the text for the error message
        while True:
            chunk = proc.stderr.read1(4096) if hasattr(proc.stderr, "read1") else proc.stderr.read(4096)
            if not chunk:
                break
            err_chunks.append(chunk)
            sys.stderr.write(chunk.decode("utf-8", "replace"))
            sys.stderr.flush()
        out = proc.stdout.read()
        proc.wait()
    else:
        out, err = proc.communicate()
        err_chunks.append(err)
    err = b"".join(err_chunks).decode("utf-8", "replace")
    if proc.returncode != 0:
        # main.cpp prints g4c::Error as "error: <message>" (the message may span lines):
        # hand over the message itself.
        lines = err.replace("\r", "\n").splitlines()
        starts = [i for i, l in enumerate(lines) if l.startswith("error: ")]
        if starts:
            msg = "\n".join(lines[starts[-1]:])[len("error: "):].rstrip()
        else:
            rest = [l for l in lines if l.strip()]
            msg = rest[-1] if rest else f"g4c {args[0]}: exit status {proc.returncode}"
        raise Error(msg)
    return out.decode("utf-8", "replace")


_MEMORY_KEYS = {"weights resident": "weights_resident", "weights streamed": "weights_streamed",
                "streaming staging": "staging", "KV cache": "kv", "activations": "activations",
                "workspaces": "workspaces", "graph pools": "graph_pools", "CUDA context": "context",
                "total": "total", "budget": "budget", "free": "free"}


def _parse_memory_table(log):
    """The "device memory plan" table `g4c compile` prints -> {key: bytes}."""
    table, inside = {}, False
    for line in log.splitlines():
        if line.startswith("device memory plan"):
            inside = True
            continue
        if inside:
            m = re.match(r"^\s+(.+?)\s+-?[0-9.]+ MiB\s+(-?[0-9]+) B", line)
            if not m:
                break
            label = m.group(1).strip()
            table[_MEMORY_KEYS.get(label, label.lower().replace(" ", "_"))] = int(m.group(2))
    return table


_EMULATIONS = {"1g.10gb": "9984MiB"}  # MIG profile -> its device memory cap


def compile(model_dir, budget="9984MiB", emulate=None, dump_dir=None, output=None, progress=False, **options):
    """Compiles a checkpoint into a g4c.Plan (`g4c compile --model DIR --budget B -o PLAN`).

    Runs the g4c CLI (MLIR: frontend, fusion, quantization and memory-planning passes,
    codegen). ``budget``: device memory budget; ``emulate="1g.10gb"`` plans for that MIG
    slice (its 9984 MiB cap becomes the budget); ``dump_dir`` receives the IR after every
    pass (--dump-after-all); ``output`` keeps the .g4p file; other keyword options become
    CLI options (max_batch=8 -> --max-batch 8, bf16_activations=True -> --bf16-activations).
    plan.memory_table() then returns the table the CLI printed (bytes; also in
    ``plan.compile_log``). A budget the model does not fit raises g4c.Error with the
    compiler's message. When this g4c has no codegen (the CLI says so), the passes still run
    (budget check and memory table) and the plan is the runtime's reference plan
    (g4c.build_reference_plan), with a RuntimeWarning.

    >>> import warnings; warnings.simplefilter("ignore")  # (a g4c without codegen warns)
    >>> plan = g4c.compile(MODEL, budget="9984MiB")
    >>> plan.memory_table()["budget"], plan.memory_table()["weights_streamed"]
    (10468982784, 0)
    >>> g4c.compile("/no/such/model")
    Traceback (most recent call last):
    ...
    g4c.Error: .../no/such/model...
    """
    model_dir = os.fspath(model_dir)
    if not os.path.isdir(model_dir):
        raise Error(f"compile: model directory {model_dir} does not exist")
    if emulate is not None:
        if emulate not in _EMULATIONS:
            raise Error(f"compile: unknown emulation '{emulate}' (known: {', '.join(_EMULATIONS)})")
        budget = _EMULATIONS[emulate]
    tmp = None
    if output is None:
        tmp = tempfile.TemporaryDirectory(prefix="g4c-compile-")
        output = os.path.join(tmp.name, "plan.g4p")
    args = ["compile", "--model", model_dir, "--budget", str(budget)]
    if dump_dir is not None:
        args += ["--dump-after-all", os.fspath(dump_dir)]
    for k, v in options.items():
        flag = "--" + k.replace("_", "-")
        if v is True:
            args.append(flag)
        elif v is not False and v is not None:
            args += [flag, v]
    try:
        try:
            log = _run_cli(args + ["-o", os.fspath(output)], progress)
            plan = load_plan(output, model_dir=model_dir)
        except Error as e:
            if "codegen is not built" not in str(e):
                raise
            log = _run_cli(args, progress)  # passes + memory table only
            warnings.warn("this g4c has no codegen: g4c.compile returns the runtime's reference plan "
                          "(the memory table is the compiler's)", RuntimeWarning, stacklevel=2)
            plan = build_reference_plan(model_dir)
            if tmp is None:
                plan.save(output)
        plan.compile_log = log
        plan._compile_memory_table = _parse_memory_table(log)
        return plan
    finally:
        if tmp is not None:
            tmp.cleanup()


def quantize(model_dir, output, method="gptq", calibration=None, group_size=128, symmetric=True,
             damp=0.01, block_size=128, act_order=False, true_sequential=False, calibration_samples=128,
             calibration_length=512, threads=0, fake_quant=False, progress=False):
    """INT4-quantizes a BF16 checkpoint into ``output`` (`g4c quantize`); returns the
    written quantization_config.json as a dict.

    Runs the g4c CLI (its quantization code lives in the CLI, tools/cmd_quantize.cpp);
    arguments mirror its options: method "rtn" | "gptq", calibration (jsonl, for gptq),
    group_size 64 | 128, symmetric (else --asymmetric), damp, block_size, act_order,
    true_sequential, calibration_samples, calibration_length, threads (0: all cores), fake_quant.

    >>> import tempfile
    >>> qc = g4c.quantize(MODEL, tempfile.mkdtemp() + "/q", method="rtn", threads=2)
    >>> qc["method"]
    'rtn'
    >>> g4c.quantize("/no/such/model", tempfile.mkdtemp() + "/q", method="rtn")
    Traceback (most recent call last):
    ...
    g4c.Error: .../no/such/model...
    """
    output = os.fspath(output)
    args = ["quantize", "--model", os.fspath(model_dir), "-o", output, "--method", method,
            "--group-size", int(group_size), "--damp", repr(float(damp)), "--block-size", int(block_size),
            "--calibration-samples", int(calibration_samples),
            "--calibration-length", int(calibration_length)]
    args.append("--symmetric" if symmetric else "--asymmetric")
    if calibration is not None:
        args += ["--calibration", os.fspath(calibration)]
    if act_order:
        args.append("--act-order")
    if true_sequential:
        args.append("--true-sequential")
    if threads:
        args += ["--threads", int(threads)]
    if fake_quant:
        args.append("--fake-quant")
    _run_cli(args, progress)
    with open(os.path.join(output, "quantization_config.json"), encoding="utf-8") as f:
        return json.load(f)


def evaluate(model_dir, dataset, output=None, reference=None, chunk_size=128, max_sequence_length=2048,
             threads=0, limit=0, progress=False):
    """Next-token NLL / perplexity of a model on a jsonl text set (`g4c eval`); returns the
    quality JSON (schema_version 2) as a dict, also written to ``output`` when given.

    Runs the g4c CLI (tools/cmd_eval.cpp). reference: a quality JSON to take ΔNLL against;
    limit: first N sequences only (0: all).

    >>> q = g4c.evaluate(MODEL, SOURCE + "/datasets/quality_public.jsonl", limit=1, threads=2)
    >>> q["schema_version"], q["sequence_count"], q["perplexity"] > 1
    (2, 1, True)
    >>> g4c.evaluate(MODEL, "/no/such/set.jsonl")
    Traceback (most recent call last):
    ...
    g4c.Error: eval: cannot open dataset /no/such/set.jsonl
    """
    tmp = None
    if output is None:
        tmp = tempfile.TemporaryDirectory(prefix="g4c-eval-")
        output = os.path.join(tmp.name, "quality.json")
    output = os.fspath(output)
    args = ["eval", "--model", os.fspath(model_dir), "--dataset", os.fspath(dataset), "-o", output,
            "--chunk-size", int(chunk_size), "--max-sequence-length", int(max_sequence_length)]
    if reference is not None:
        args += ["--reference", os.fspath(reference)]
    if threads:
        args += ["--threads", int(threads)]
    if limit:
        args += ["--limit", int(limit)]
    try:
        _run_cli(args, progress)
        with open(output, encoding="utf-8") as f:
            return json.load(f)
    finally:
        if tmp is not None:
            tmp.cleanup()

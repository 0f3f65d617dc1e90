"""The CLI-backed calls (g4c.compile / quantize / evaluate): they must return what the
g4c CLI writes, raise g4c.Error with the CLI's message, and agree with independent
computations through g4c.Engine."""
import json
import os
import subprocess

import numpy as np
import pytest

from conftest import MODEL, SOURCE_DIR, golden_path, read_safetensors

DATASET = os.path.join(SOURCE_DIR, "datasets", "quality_public.jsonl")


def test_cli_binary_is_the_build_one(g4c):
    b = g4c.cli_binary()
    assert os.access(b, os.X_OK)
    assert subprocess.run([b, "--version"], capture_output=True, text=True).stdout.startswith("g4c")


def test_evaluate_matches_nll_through_engine_logits(g4c, engine):
    q = g4c.evaluate(MODEL, DATASET, limit=2, chunk_size=128, max_sequence_length=256, threads=2)
    assert q["schema_version"] == 2 and q["sequence_count"] == 2
    # Independent NLL: the same two texts through g4c.Engine.logits, float64 log-softmax.
    tok = g4c.Tokenizer(MODEL)
    texts = [json.loads(l)["text"] for l in open(DATASET, encoding="utf-8") if l.strip()][:2]
    nll, count = 0.0, 0
    for t in texts:
        ids = tok.encode(t)[:256]
        x = engine.logits(ids, chunk=128).astype(np.float64)
        lse = np.log(np.exp(x - x.max(1, keepdims=True)).sum(1)) + x.max(1)
        nll += float(np.sum(lse[:-1] - x[np.arange(len(ids) - 1), ids[1:]]))
        count += len(ids) - 1
    assert q["token_count"] == count
    # Both are fp32 forward passes of the same BF16 weights by different executors (the
    # eval tool's reference model vs the runtime engine): per-token NLL differs only by
    # fp32 reassociation, ~1e-5; 1e-4 on the mean leaves margin and catches real bugs
    # (a wrong token shift or a missing softcap moves it by > 1e-2).
    assert abs(q["mean_nll"] - nll / count) < 1e-4


def test_evaluate_output_file_is_the_returned_dict(g4c, tmp_path):
    out = tmp_path / "q.json"
    q = g4c.evaluate(MODEL, DATASET, output=out, limit=1, max_sequence_length=128, threads=2)
    assert json.loads(out.read_text()) == q


def test_evaluate_error_is_the_cli_message(g4c, tmp_path):
    missing = tmp_path / "none.jsonl"
    cli = subprocess.run([g4c.cli_binary(), "eval", "--model", MODEL, "--dataset", str(missing), "-o",
                          str(tmp_path / "o.json")], capture_output=True, text=True)
    assert cli.returncode == 1
    with pytest.raises(g4c.Error) as e:
        g4c.evaluate(MODEL, missing)
    assert "error: " + str(e.value) == cli.stderr.strip()


def test_quantize_rtn_mirrors_the_cli(g4c, tmp_path):
    a, b = tmp_path / "py", tmp_path / "cli"
    qc = g4c.quantize(MODEL, a, method="rtn", group_size=64, threads=2)
    subprocess.run([g4c.cli_binary(), "quantize", "--model", MODEL, "-o", str(b), "--method", "rtn",
                    "--group-size", "64", "--threads", "2"], check=True, capture_output=True)
    assert qc == json.loads((a / "quantization_config.json").read_text())
    assert qc["method"] == "rtn"
    # RTN is deterministic: the same options give the same checkpoint bytes.
    shards = sorted(p.name for p in b.iterdir() if p.suffix == ".safetensors")
    assert shards and shards == sorted(p.name for p in a.iterdir() if p.suffix == ".safetensors")
    for s in shards:
        assert (a / s).read_bytes() == (b / s).read_bytes(), s
    # ...and the runtime serves it.
    r = g4c.Engine(a, threads=2).generate([[2, 304, 726]], max_new_tokens=4)[0]
    assert len(r.token_ids) == 4


def test_quantize_bad_model_raises(g4c, tmp_path):
    with pytest.raises(g4c.Error) as e:
        g4c.quantize(tmp_path / "nothing", tmp_path / "out", method="rtn")
    assert "nothing" in str(e.value)


def test_quantize_host_solve_needs_the_gpu_and_says_so(g4c, tmp_path):
    # --host-solve only chooses where a GPU run's Hessians and solves go: on the CPU it is an
    # error (before any calibration forward), and nothing is written.
    out = tmp_path / "q"
    cli = subprocess.run([g4c.cli_binary(), "quantize", "--model", MODEL, "--method", "gptq", "--calibration",
                          os.path.join(SOURCE_DIR, "datasets", "calibration-256.jsonl"), "--calibration-samples", "2",
                          "--host-solve", "-o", str(out)], capture_output=True, text=True)
    assert cli.returncode == 1
    assert "--host-solve goes with --device cuda" in cli.stderr
    assert not out.exists()
    assert not (tmp_path / "q.partial").exists()  # the writer's folder goes with a failed run


def test_compile_gives_a_plan_that_matches_the_goldens(g4c, tmp_path):
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a g4c without codegen warns and uses the reference plan
        plan = g4c.compile(MODEL, output=tmp_path / "tiny.g4p")
    assert plan.model_dir == MODEL
    assert g4c.load_plan(tmp_path / "tiny.g4p").to_bytes() == plan.to_bytes()
    t = plan.memory_table()
    # The compiler's table: 9984 MiB = 9984 * 2**20 bytes; everything resident for the tiny model.
    assert t["budget"] == 9984 * 2**20
    assert t["weights_streamed"] == 0 and t["weights_resident"] > 0
    assert t["total"] == sum(t[k] for k in ["weights_resident", "staging", "kv", "activations", "workspaces",
                                           "graph_pools", "context"])
    gold = read_safetensors(golden_path("golden_logits.safetensors"))
    x = g4c.Engine(plan, threads=2).logits(gold["p1.input_ids"])[gold["p1.rows"]]
    # Same fp32 tolerance as the C++ golden tests (fp32 reassociation vs HF).
    assert float(np.max(np.abs(x - gold["p1.logits_fp32"]))) <= 2e-3


def test_compile_budget_errors_are_the_cli_message(g4c, tmp_path):
    cli = subprocess.run([g4c.cli_binary(), "compile", "--model", MODEL, "--budget", "100MiB"],
                         capture_output=True, text=True)
    assert cli.returncode == 1
    with pytest.raises(g4c.Error) as e:
        g4c.compile(MODEL, budget="100MiB")
    assert "error: " + str(e.value) == cli.stderr.strip()
    assert "does not fit the device budget of 100 MiB" in str(e.value)


def test_compile_streams_weights_under_a_tight_budget(g4c):
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = g4c.compile(MODEL, budget="640MiB").memory_table()
    # 640 MiB cannot hold the 652 MiB all-resident plan of the tiny model: some layers stream.
    assert t["weights_streamed"] > 0 and t["total"] <= t["budget"] == 640 * 2**20

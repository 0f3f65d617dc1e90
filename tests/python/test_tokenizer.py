"""g4c.Tokenizer against the Hugging Face goldens of models/gemma4-tiny's tokenizer."""
import json
import os

import pytest

from conftest import MODEL, golden_path


def test_encode_decode_match_hf_goldens(g4c):
    cases = json.load(open(golden_path("golden_tokenizer.json"), encoding="utf-8"))["tiny"]
    assert len(cases) == 32
    tok = g4c.Tokenizer(os.path.join(MODEL, "tokenizer.json"))
    for c in cases:
        assert tok.encode(c["text"]) == c["ids"], c["text"]
        assert tok.decode(c["ids"]) == c["decoded"], c["text"]
        # add_bos=False is the same ids without the leading BOS (HF add_special_tokens=False).
        assert tok.encode(c["text"], add_bos=False) == c["ids"][1:]


def test_model_dir_and_pathlike_accepted(g4c):
    import pathlib
    a = g4c.Tokenizer(MODEL).encode("Hello world")
    b = g4c.Tokenizer(pathlib.Path(MODEL) / "tokenizer.json").encode("Hello world")
    assert a == b == [2, 304, 726, 732, 3723]  # golden_tokenizer.json "tiny"[0]


def test_missing_file_raises_g4c_error(g4c, tmp_path):
    with pytest.raises(g4c.Error) as e:
        g4c.Tokenizer(tmp_path / "nope.json")
    assert "nope.json" in str(e.value)
    assert isinstance(e.value, RuntimeError)


def test_malformed_json_raises_naming_file(g4c, tmp_path):
    bad = tmp_path / "tokenizer.json"
    bad.write_text('{"model": {"type": "BPE", "vocab": ')
    with pytest.raises(g4c.Error, match="tokenizer.json"):
        g4c.Tokenizer(bad)


def test_decode_out_of_range_id_raises(g4c):
    tok = g4c.Tokenizer(MODEL)
    with pytest.raises(g4c.Error):
        tok.decode([2, tok.vocab_size + 5])

"""Every public function, method and class of the g4c module carries a docstring example,
and every example runs as a doctest (MODEL = models/gemma4-tiny, SOURCE = the source tree)."""
import doctest
import inspect
import os

import pytest

from conftest import MODEL, SOURCE_DIR


def _documented(g4c):
    """(qualified name, object, needs_example) for the public API."""
    out = []
    for name in g4c.__all__:
        obj = getattr(g4c, name)
        if name == "Error":
            continue  # an exception type: no behaviour of its own
        out.append((f"g4c.{name}", obj, True))
        if inspect.isclass(obj):
            for attr, raw in vars(obj).items():
                if attr.startswith("_"):
                    continue
                val = getattr(obj, attr)
                is_method = inspect.isroutine(val)
                # Methods need an example; properties are documented by their class's example.
                out.append((f"g4c.{name}.{attr}", val if is_method else raw, is_method))
    return out


def test_every_function_has_an_example(g4c):
    parser = doctest.DocTestParser()
    missing = [n for n, o, need in _documented(g4c)
               if need and not parser.get_examples(inspect.getdoc(o) or "")]
    assert not missing, f"no docstring example: {missing}"


def _cases():
    import g4c
    return [(n, o) for n, o, _ in _documented(g4c) if doctest.DocTestParser().get_examples(inspect.getdoc(o) or "")]


@pytest.mark.parametrize("name,obj", _cases(), ids=lambda v: v if isinstance(v, str) else "")
def test_docstring_examples_run(g4c, name, obj):
    globs = {"g4c": g4c, "MODEL": MODEL, "SOURCE": SOURCE_DIR, "os": os}
    test = doctest.DocTestParser().get_doctest(inspect.getdoc(obj), globs, name, None, 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0 and result.attempted > 0, f"{name}: {result.failed} of {result.attempted} failed"

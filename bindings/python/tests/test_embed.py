"""Embeddings: n_embd floats, unit length when normalized, equal to
`infer embed -o json`'s within its printing precision (%.7g)."""

import json
import math
import os

import pytest

from conftest import THREADS, infer, run_cli

TEXT = "The quick brown fox jumps over the lazy dog."


def _cli_embedding(cli, model, *flags):
    rc, out, err = run_cli(cli, "embed", "-m", model, "-p", TEXT, "-o", "json", "-t", THREADS, *flags)
    assert rc == 0, err
    return json.loads(out)["data"][0]["embedding"]


def _close(ours, theirs):
    assert len(ours) == len(theirs)
    for i, (a, b) in enumerate(zip(ours, theirs)):
        assert math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-12), (i, a, b)


@pytest.mark.parametrize("which", ["smollm2", "stories260K"])
def test_embedding_matches_cli(which, request, cli):
    if which == "smollm2":
        path = request.getfixturevalue("smollm2")
    else:
        path = os.path.join(request.getfixturevalue("shared"), "models", "stories260K.gguf")
    with infer.Model(path) as m, m.context(n_threads=THREADS) as c:
        e = c.embed(TEXT)
        assert len(e) == m.n_embd
        assert math.isclose(math.sqrt(sum(x * x for x in e)), 1.0, rel_tol=1e-5)
        _close(e, _cli_embedding(cli, path))

        raw = c.embed(TEXT, normalize=False)
        norm = math.sqrt(sum(x * x for x in raw))
        assert not math.isclose(norm, 1.0, rel_tol=1e-3)
        _close(raw, _cli_embedding(cli, path, "--no-normalize"))
        _close([x / norm for x in raw], e)

        _close(c.embed(TEXT, pooling="last"), _cli_embedding(cli, path, "--pooling", "last"))
        with pytest.raises(ValueError):
            c.embed(TEXT, pooling="max")

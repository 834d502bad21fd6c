"""Errors as InferError with the library's one-line message; exceptions in
callbacks; closing, lifetime and busy contexts."""

import gc
import os

import pytest

from conftest import N_PREDICT, PROMPT, THREADS, infer, run_cli


def _cli_error(cli, path):
    rc, _, err = run_cli(cli, "run", "-m", path, "-p", "hi", "-n", 1)
    assert rc != 0 and err
    return err


def test_missing_file(cli, tmp_path):
    path = str(tmp_path / "no-such-model.gguf")
    with pytest.raises(infer.InferError) as e:
        infer.Model(path)
    assert e.value.code == infer.Status.IO
    assert str(e.value) == _cli_error(cli, path)
    assert "no-such-model.gguf" in str(e.value)


@pytest.mark.parametrize("name", ["rows-not-multiple-of-block.gguf", "gguf-v1.gguf"])
def test_malformed_gguf(name, shared, cli):
    path = os.path.join(shared, "bad", name)
    with pytest.raises(infer.InferError) as e:
        infer.Model(path)
    msg = str(e.value)
    assert msg == _cli_error(cli, path) and "\n" not in msg
    assert e.value.code in (infer.Status.FORMAT, infer.Status.UNSUPPORTED)


def test_context_full_keeps_text(smol):
    m, _ = smol
    with m.context(n_ctx=16, n_threads=THREADS) as c:
        with pytest.raises(infer.InferError) as e:
            c.generate(PROMPT, 64, temperature=0)
        assert e.value.code == infer.Status.CONTEXT_FULL and e.value.text
        partial = e.value.text
        with pytest.raises(infer.InferError) as e:
            with c.stream(PROMPT, 64, temperature=0) as s:
                pieces = list(s)
        assert e.value.code == infer.Status.CONTEXT_FULL and e.value.text == partial


class Boom(Exception):
    pass


def test_exception_in_piece_callback_stops_generation(smol):
    _, c = smol
    full = c.generate(PROMPT, N_PREDICT, temperature=0)
    seen = []

    def on_piece(piece):
        seen.append(piece)
        if len(seen) == 3:
            raise Boom("stop here")

    with pytest.raises(Boom, match="stop here"):
        c.generate(PROMPT, N_PREDICT, temperature=0, on_piece=on_piece)
    assert len(seen) == 3  # not called again after the exception
    assert len(c.generated_tokens()) < N_PREDICT  # generation stopped, not just the calls
    assert c.generate(PROMPT, N_PREDICT, temperature=0) == full  # and the context is fine

    def interrupt(piece):
        raise KeyboardInterrupt  # BaseException too: never lost inside ctypes
    with pytest.raises(KeyboardInterrupt):
        c.generate(PROMPT, N_PREDICT, temperature=0, on_piece=interrupt)


def test_callback_returning_true_stops(smol):
    _, c = smol
    seen = []
    text = c.generate(PROMPT, N_PREDICT, temperature=0, on_piece=lambda p: seen.append(p) or len(seen) == 2)
    assert len(seen) == 2 and text == "".join(seen)
    assert len(c.generated_tokens()) < N_PREDICT


def test_progress_callback(smollm2):
    fractions = []
    with infer.Model(smollm2, progress=fractions.append) as m:
        assert m.n_vocab
    assert fractions and fractions[-1] == 1.0 and fractions == sorted(fractions)
    with pytest.raises(infer.InferError) as e:
        infer.Model(smollm2, progress=lambda f: f > 0.3)
    assert e.value.code == infer.Status.CANCELLED

    def boom(f):
        raise Boom("no")
    with pytest.raises(Boom):
        infer.Model(smollm2, progress=boom)


def test_stream_closed_early_frees_context(smol):
    _, c = smol
    full = c.generate(PROMPT, N_PREDICT, temperature=0)
    s = c.stream(PROMPT, N_PREDICT, temperature=0)
    first = next(s)
    with pytest.raises(RuntimeError):  # one call at a time
        c.generate(PROMPT, 4)
    s.close()
    assert full.startswith(first) and s.done
    assert list(s) == []
    for piece in c.stream(PROMPT, N_PREDICT, temperature=0):
        break  # abandoned: freed when the generator object goes
    del piece
    gc.collect()
    assert c.generate(PROMPT, N_PREDICT, temperature=0) == full


def test_reentrant_call_from_callback_is_refused(smol):
    _, c = smol
    with pytest.raises(RuntimeError):
        c.generate(PROMPT, 8, temperature=0, on_piece=lambda p: c.generate("x", 1))


def test_context_keeps_model_alive(smollm2):
    c = infer.Model(smollm2).context(n_threads=THREADS)  # the Model object is dropped at once
    gc.collect()
    assert c.generate(PROMPT, 4, temperature=0)
    m = c.model
    m.close()  # closed while a context uses it: freed only after the context
    assert m.closed and m._handle
    with pytest.raises(ValueError):
        m.n_vocab
    with pytest.raises(ValueError):
        m.context()
    assert c.generate(PROMPT, 4, temperature=0)
    assert c.embed("x")
    c.close()
    assert m._handle is None and c.closed
    with pytest.raises(ValueError):
        c.generate(PROMPT, 4)
    c.close()
    m.close()  # closing twice is harmless


def test_bad_arguments(smol):
    m, c = smol
    with pytest.raises(ValueError):
        infer.Model("x.gguf", device="tpu")
    with pytest.raises(ValueError):
        m.context(kv_type="q3")
    with pytest.raises(infer.InferError):
        m.token_bytes(10 ** 6)
    with pytest.raises(TypeError):
        m.tokenize(42)
    with pytest.raises(infer.InferError) as e:
        m.context(n_seq=-5, n_ctx=-1)
    assert str(e.value)


def test_stream_and_context_collected_together(smollm2):
    """A Stream and its Context in one garbage cycle: whichever finalizer
    runs first, the request is freed before the context, once."""
    for first in ("stream", "context"):
        m = infer.Model(smollm2)
        c = m.context(n_threads=THREADS)
        s = c.stream(PROMPT, 8, temperature=0)
        next(s)
        holder = {"c": c, "s": s}
        holder["self"] = holder  # a cycle
        if first == "context":
            c.close()  # as a finalizer running first would
            assert list(s) == [] and s.done
        del c, s, holder
        gc.collect()
        m.close()
        assert m._handle is None

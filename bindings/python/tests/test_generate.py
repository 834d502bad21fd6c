"""Greedy text as `infer run --temp 0` prints it, on every model of
../shared/models and ../shared/arch, SmolLM2 and (where present)
models/gemma-3-270m; generate(), its on_piece callback and stream() alike."""

import glob
import json
import os

import pytest

from conftest import N_PREDICT, PROMPT, ROOT, THREADS, cli_greedy, infer


def _shared_models():
    shared = os.environ.get("INFER_SHARED_DIR") or os.path.join(ROOT, "..", "shared")
    found = []
    for sub in ("models", "arch"):
        found += [sub + "/" + os.path.basename(f) for f in sorted(glob.glob(os.path.join(shared, sub, "*.gguf")))]
    return found or ["models/(../shared absent)"]


MODELS = _shared_models() + ["smollm2"]
if os.path.exists(os.path.join(ROOT, "models", "gemma-3-270m-q4_k_m.gguf")):
    MODELS.append("gemma-3-270m")  # optional: only where the checkout has it


def _resolve(name, request):
    if name == "smollm2":
        return request.getfixturevalue("smollm2")
    if name == "gemma-3-270m":
        return os.path.join(ROOT, "models", "gemma-3-270m-q4_k_m.gguf")
    path = os.path.join(request.getfixturevalue("shared"), name)
    if not os.path.exists(path):
        pytest.skip("%s is absent" % path)
    return path


@pytest.mark.parametrize("name", MODELS)
def test_greedy_matches_cli(name, cli, request):
    path = _resolve(name, request)
    rc, text, tokens, err = cli_greedy(cli, path)
    if rc != 0:
        # refused by infer itself: the binding must refuse it the same way
        with pytest.raises(infer.InferError) as e:
            infer.Model(path)
        assert str(e.value) == err
        pytest.skip("infer refuses %s: %s" % (name, err))
    with infer.Model(path) as m, m.context(n_threads=THREADS) as c:
        assert c.generate(PROMPT, N_PREDICT, temperature=0) == text
        assert c.generated_tokens() == tokens
        assert c.prompt_tokens() == m.tokenize(PROMPT, special=True)

        pieces = []
        assert c.generate(PROMPT, N_PREDICT, temperature=0, on_piece=pieces.append) == text
        assert "".join(pieces) == text

        with c.stream(PROMPT, N_PREDICT, temperature=0) as s:
            streamed = list(s)
        assert "".join(streamed) == text
        assert s.text == text
        assert s.tokens == tokens
        if len(tokens) >= 4 and text:
            assert len(pieces) > 1 and len(streamed) > 1  # it streamed, not all at the end


def test_reference_tokenization(shared):
    """tokenize() gives llama.cpp's prompt tokens (BOS as the model adds it)."""
    n = 0
    for name in ("stories260K", "tinystories-656k-f16", "synth-phi3-f16", "synth-qwen2-f16"):
        for ref_file in sorted(glob.glob(os.path.join(shared, "reference", name + ".p*.json"))):
            ref = json.load(open(ref_file, encoding="utf-8"))
            sub = "arch" if name.startswith("synth-") else "models"
            with infer.Model(os.path.join(shared, sub, name + ".gguf"), vocab_only=True) as m:
                assert m.tokenize(ref["prompt"]) == ref["prompt_tokens"], ref_file
                assert m.n_vocab == ref["n_vocab"]
            n += 1
    assert n >= 4


def test_tokenize_roundtrip(smol):
    m, _ = smol
    text = "Hello, world! Ünïcödé ☃ and <|im_end|> as text"
    ids = m.tokenize(text, add_bos=False)
    assert m.detokenize(ids) == text
    special = m.tokenize("<|im_end|>", add_bos=False, special=True)
    assert len(special) == 1 and m.is_eog(special[0])
    assert len(m.tokenize("<|im_end|>", add_bos=False)) > 1  # as plain text
    long_text = "word " * 3000  # more tokens than the first guess of room
    assert len(m.tokenize(long_text, add_bos=False)) >= 3000


def test_model_facts(smol):
    m, c = smol
    assert m.n_vocab == 49152 and m.n_embd == 576
    assert m.n_ctx_train > 0
    assert m.description.startswith("llama:")
    assert m.device in ("cpu", "cuda")
    assert c.n_ctx > 0 and c.n_seq == 1 and c.n_threads == THREADS
    assert c.isa in ("scalar", "avx2", "avx512", "neon", "wasm")
    metrics = c.metrics()
    assert metrics["model_bytes"] > 0


def test_sampling_is_seeded(smol):
    _, c = smol
    a = c.generate(PROMPT, 16, temperature=1.0, seed=7)
    b = c.generate(PROMPT, 16, temperature=1.0, seed=7)
    assert a == b and a


def test_stop_string(smol):
    _, c = smol
    full = c.generate(PROMPT, N_PREDICT, temperature=0)
    stop = full[10:16]
    with c.stream(PROMPT, N_PREDICT, temperature=0, stop=[stop]) as s:
        text = "".join(s)
    assert text == full[:full.index(stop)]


def test_cache_prompt(smol):
    _, c = smol
    with c.stream(PROMPT, 4, temperature=0) as s:
        list(s)
    assert s.cached_tokens == 0
    with c.stream(PROMPT, 4, temperature=0, cache_prompt=True) as s:
        assert "".join(s)
    assert s.cached_tokens > 0  # the prompt's start was kept from the stream before
    assert s.metrics()["n_gen_tokens"] == 4

"""Fixtures: where the library, the CLI, ../shared and SmolLM2 are.

Each is taken from the environment (what run_tests.py sets: INFER_LIBRARY,
INFER_CLI, INFER_SHARED_DIR, INFER_SMOLLM2) or else from this checkout's
usual places (build/libinfer.so, build/infer, ../shared, models/). A test
that needs one that is absent skips, saying which. Skips that mean "infer
itself refuses this model" start with "infer refuses" (run_tests.py lets
only those pass when everything is present).
"""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
PROMPT = "Once upon a time"
N_PREDICT = 24
THREADS = 2  # as the CLI's default, so both run the same kernels' split

try:
    import infer
except ImportError as e:  # the package is not installed: every test skips
    infer = None
    _import_error = str(e)


def _path(var, *default):
    p = os.environ.get(var) or os.path.join(*default)
    return p if os.path.exists(p) else None


def _lib_file():
    env = os.environ.get("INFER_LIBRARY")
    if env:
        return env
    for name in ("libinfer.so", "libinfer.dylib", "infer.dll"):
        p = os.path.join(ROOT, "build", name)
        if os.path.exists(p):
            return p
    return None


@pytest.fixture(scope="session", autouse=True)
def library():
    """The loaded library; sets INFER_LIBRARY to this checkout's build where
    nothing else was said, so a plain `pytest` in a built tree works."""
    if infer is None:
        pytest.skip("the infer package cannot be imported (%s): pip install bindings/python" % _import_error)
    lib = _lib_file()
    if lib and not os.environ.get("INFER_LIBRARY"):
        os.environ["INFER_LIBRARY"] = lib
    try:
        return infer.library_path()
    except infer.LibraryError as e:
        pytest.skip("libinfer is not available: %s" % e)


@pytest.fixture(scope="session")
def cli():
    p = _path("INFER_CLI", ROOT, "build", "infer.exe" if sys.platform == "win32" else "infer")
    if not p:
        pytest.skip("the infer CLI is absent (build it: cmake --build build --target infer_cli; or set INFER_CLI)")
    return p


@pytest.fixture(scope="session")
def shared():
    p = _path("INFER_SHARED_DIR", ROOT, "..", "shared")
    if not p:
        pytest.skip("../shared (the reference models) is absent; set INFER_SHARED_DIR")
    return p


@pytest.fixture(scope="session")
def smollm2():
    p = _path("INFER_SMOLLM2", ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
    if not p:
        pytest.skip("models/SmolLM2-135M-Instruct.Q4_1.gguf is absent (scripts/fetch_model.py); set INFER_SMOLLM2")
    return p


@pytest.fixture(scope="module")
def smol(smollm2):
    """SmolLM2 and a context on it, shared by a module's tests."""
    with infer.Model(smollm2) as m, m.context(n_threads=THREADS) as c:
        yield m, c


def run_cli(cli, *args):
    """The CLI's (returncode, stdout bytes, its one-line error or None)."""
    p = subprocess.run([cli] + [str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    err = None
    for line in p.stderr.decode("utf-8", "replace").splitlines():
        if line.startswith("infer: "):
            err = line[len("infer: "):]
            break
    return p.returncode, p.stdout, err


def cli_greedy(cli, model, prompt=PROMPT, n=N_PREDICT):
    """`infer run --temp 0` on model: (rc, text, tokens, error)."""
    rc, out, err = run_cli(cli, "run", "-m", model, "-p", prompt, "-n", n, "--temp", "0", "-t", THREADS)
    if rc != 0:
        return rc, None, None, err
    rc2, js, err2 = run_cli(cli, "run", "-m", model, "-p", prompt, "-n", n, "--temp", "0", "-t", THREADS, "--json")
    assert rc2 == 0, err2
    # (its "text" holds the raw bytes, not always UTF-8: only the ids are read)
    return 0, out.decode("utf-8", "replace"), json.loads(js.decode("utf-8", "replace"))["tokens"], None

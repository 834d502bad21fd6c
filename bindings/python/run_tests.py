#!/usr/bin/env python3
"""Installs the binding from the tree into a temporary directory (pip, no
network, no build isolation) and runs its pytest suite against that
installed copy and the given library. CTest's python_binding runs it.

    run_tests.py --library build/libinfer.so [--cli build/infer]
                 [--shared ../shared] [--smollm2 models/SmolLM2-...gguf] [-- PYTEST ARGS]

Exit 77 (CTest's skip) where pytest or a wheel-building setuptools is
missing. Where the library, the CLI, ../shared and SmolLM2 are all present,
a skipped test fails the run unless its reason starts with "infer refuses"
(a model infer itself does not load): nothing is skipped silently.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
SKIP = 77


def skip(msg):
    print("python_binding: SKIP: " + msg)
    sys.exit(SKIP)


def have(module):
    return subprocess.run([sys.executable, "-c", "import " + module], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode == 0


def check_tools():
    if not have("pytest"):
        skip("pytest is not installed (scripts/deps.sh installs it: pip install pytest)")
    if not have("setuptools"):
        skip("setuptools is not installed (pip install setuptools): the package is built with it")
    # setuptools before 70.1 builds wheels through the wheel package
    out = subprocess.run([sys.executable, "-c", "import setuptools; print(setuptools.__version__)"],
                         stdout=subprocess.PIPE).stdout.decode().strip()
    try:
        major_minor = tuple(int(x) for x in out.split(".")[:2])
    except ValueError:
        major_minor = (0, 0)
    if major_minor < (70, 1) and not have("wheel"):
        skip("setuptools %s needs the wheel package to build the binding (pip install wheel)" % out)


def install(tmp):
    """pip-installs a copy of the tree's package (so nothing is written into
    the source tree) into tmp/site; returns that directory."""
    src = os.path.join(tmp, "src")
    shutil.copytree(HERE, src, ignore=shutil.ignore_patterns("tests", "build", "*.egg-info", "__pycache__",
                                                             ".pytest_cache"))
    site = os.path.join(tmp, "site")
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--no-build-isolation", "--no-deps", "--no-index",
           "--disable-pip-version-check", "--no-warn-script-location", "--target", site, src]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if p.returncode != 0:
        print(p.stdout.decode("utf-8", "replace"))
        print("python_binding: FAIL: pip could not install bindings/python: " + " ".join(cmd))
        sys.exit(1)
    return site


def junit_results(path):
    """(tests, failures+errors, [(test id, skip reason)])."""
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root)
    total = bad = 0
    skipped = []
    for suite in suites:
        for case in suite.iter("testcase"):
            total += 1
            if case.find("failure") is not None or case.find("error") is not None:
                bad += 1
            s = case.find("skipped")
            if s is not None:
                reason = s.get("message", "")
                if reason.startswith("Skipped: "):  # how pytest words pytest.skip()'s reason
                    reason = reason[len("Skipped: "):]
                skipped.append(("%s::%s" % (case.get("classname"), case.get("name")), reason))
    return total, bad, skipped


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--library", required=True, help="libinfer.so / infer.dll to test against")
    ap.add_argument("--cli", help="the infer CLI (the reference outputs)")
    ap.add_argument("--shared", help="../shared (reference models)")
    ap.add_argument("--smollm2", help="models/SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--keep", action="store_true", help="keep the temporary install")
    ap.add_argument("pytest_args", nargs="*")
    args = ap.parse_args()

    if not os.path.isfile(args.library):
        print("python_binding: FAIL: the library %s does not exist" % args.library)
        return 1
    check_tools()
    present = {
        "the CLI": args.cli and os.path.isfile(args.cli),
        "../shared": args.shared and os.path.isdir(os.path.join(args.shared, "models")),
        "SmolLM2": args.smollm2 and os.path.isfile(args.smollm2),
    }
    missing = [k for k, v in present.items() if not v]

    start = time.time()
    tmp = tempfile.mkdtemp(prefix="infer-python-")
    try:
        site = install(tmp)
        env = dict(os.environ)
        env.update({
            "PYTHONPATH": site,  # the installed copy, never the tree's src/
            "PYTHONDONTWRITEBYTECODE": "1",
            "INFER_LIBRARY": os.path.abspath(args.library),
            "INFER_EXPECT_PACKAGE_DIR": os.path.join(site, "infer"),
        })
        for var, value in (("INFER_CLI", args.cli), ("INFER_SHARED_DIR", args.shared),
                           ("INFER_SMOLLM2", args.smollm2)):
            if value:
                env[var] = os.path.abspath(value)
            else:
                env.pop(var, None)
        junit = os.path.join(tmp, "junit.xml")
        cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rs", "-q", "--junitxml", junit,
               os.path.join(HERE, "tests")] + args.pytest_args
        # run from the temporary directory: the source tree is not on sys.path
        rc = subprocess.run(cmd, env=env, cwd=tmp).returncode
        if not os.path.exists(junit):
            print("python_binding: FAIL: pytest exited %d without results" % rc)
            return 1
        total, bad, skipped = junit_results(junit)
    finally:
        if args.keep:
            print("python_binding: installed copy kept in " + tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    took = time.time() - start
    refused = [s for s in skipped if s[1].startswith("infer refuses")]
    other = [s for s in skipped if not s[1].startswith("infer refuses")]
    print("python_binding: %d tests, %d failed, %d skipped (%d models infer refuses) in %.1f s"
          % (total, bad, len(skipped), len(refused), took))
    if rc != 0 or bad:
        return 1
    if other:
        if not missing:
            print("python_binding: FAIL: everything is present, yet these were skipped:")
            for name, reason in other:
                print("  %s: %s" % (name, reason))
            return 1
        print("python_binding: %d skipped for want of %s" % (len(other), ", ".join(missing)))
        if len(other) + len(refused) == total:
            return SKIP  # nothing ran at all
    return 0


if __name__ == "__main__":
    sys.exit(main())

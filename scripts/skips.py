#!/usr/bin/env python3
"""The skipped tests of CTest runs, named and counted, from their logs.

Usage: skips.py SHARED_DIR STAGE=BUILD_DIR...

A skip is a Criterion "[SKIP] suite::test: why" line (the tests run with
--verbose) or a script's "SKIPPED: why" line (those exit 77), in
BUILD_DIR/Testing/Temporary/LastTest.log; not Criterion's "Test is disabled"
lines, which are the tests of test_internals that another entry's --filter
runs (no test here is disabled by hand). Prints one line per skip and a
count. Exits 1 when SHARED_DIR exists but a test skipped for want of it:
the data tests must run wherever their data is.
"""
import os
import re
import sys

SKIP_LINE = re.compile(r"^\[SKIP\] (.*)$|SKIPPED:? (.*)$")


def skips_in(log_path):
    """(test, why) for every skip line in one LastTest.log."""
    found, test, in_output = [], None, False
    with open(log_path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = re.match(r"^\d+/\d+ Testing: (\S+)", line)
            if m:
                test, in_output = m.group(1), False
                continue
            if line.startswith("Output:"):
                in_output = True
                continue
            if line.startswith("<end of output>"):
                in_output = False
                continue
            m = SKIP_LINE.search(line.rstrip("\n")) if in_output else None
            if m and test and not (m.group(1) or "").endswith(": Test is disabled"):
                found.append((test, (m.group(1) or m.group(2)).strip()))
    return found


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    shared = sys.argv[1]
    all_skips, missing_data = [], []
    for arg in sys.argv[2:]:
        stage, _, build = arg.partition("=")
        log = os.path.join(build, "Testing", "Temporary", "LastTest.log")
        if not os.path.exists(log):
            continue
        for test, why in skips_in(log):
            all_skips.append("%s: %s: %s" % (stage, test, why))
            if "../shared" in why or "shared is absent" in why or "/shared/" in why:
                missing_data.append(all_skips[-1])
    print("test.sh: %d skipped%s" % (len(all_skips), ":" if all_skips else " (every test ran)"))
    for s in sorted(set(all_skips), key=all_skips.index):  # one line per reason, in order
        n = all_skips.count(s)
        print("  skipped: " + s + (" (x%d)" % n if n > 1 else ""))
    if missing_data and os.path.isdir(shared):
        print("test.sh: FAILED: %s is present, but %d test(s) skipped for want of it" % (shared, len(missing_data)))
        sys.exit(1)


if __name__ == "__main__":
    main()

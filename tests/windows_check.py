#!/usr/bin/env python3
"""The Windows build (cmake/mingw-w64.cmake) run under Wine, beside the
native build, checked as a Windows user would see it:

  1. infer.exe imports only Windows' own DLLs, and runs from a folder with
     no DLL beside it;
  2. platform_check.exe: the pool's two threads, the model mapped (a view
     Windows calls a file mapping), UTF-8 paths, regular files only, peak
     RSS (tests/platform_check.c);
  3. concurrency.exe: one model on two threads, a worker's requests polled
     and cancelled from other threads (tests/concurrency.c);
  4. infer bench -t 1 and -t 2: the threads that did the work counted from
     Wine's own (Linux) threads' CPU time, and the speeds printed;
  5. npc --workers 1 and npc --budget 4: the game loop with a worker and
     with the frame budget;
  6. a model at a UTF-8 path and one in a sparse file past 4 GiB (its
     tensors past the 4 GiB mark) give infer run's text of the native build;
  7. every reference model of ../shared (and SmolLM2 where models/ has it):
     the prompt's tokens, every position's logits (their bits, hashed) and
     the greedy tokens with their logits, bit for bit equal to the native
     build's, on each instruction set this machine has.

    windows_check.py --win BUILD_WIN --native BUILD --shared SHARED --models MODELS

WINDOWS_CHECK_ISAS="scalar avx2" chooses the instruction sets (default:
every one this CPU has); WINDOWS_CHECK_SMOLLM2_STEPS the greedy steps of
SmolLM2's check (128); WINDOWS_CHECK_LONG_SCALAR=1 adds the 1,891-token
references to the plain C kernels' check (about 8 more minutes);
WINDOWS_CHECK_GEMMA=1 adds Gemma 3 270M's references (models/). Exits 0 when all hold, 1 on a failure (each said),
77 when Wine or the builds are absent.
"""
import argparse
import glob
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time

failures = []
WINE_ENV = dict(os.environ, WINEDEBUG="-all")
# Windows' own DLLs (and the C runtime's): what a program may import
# without shipping anything beside it
SYSTEM_DLLS = {"kernel32.dll", "msvcrt.dll", "shell32.dll", "user32.dll", "advapi32.dll", "ucrtbase.dll",
               "ntdll.dll", "ws2_32.dll", "bcrypt.dll"}


def check(ok, what, detail=""):
    print("%s: %s%s" % ("ok  " if ok else "FAIL", what, (" (%s)" % detail) if detail else ""), flush=True)
    if not ok:
        failures.append(what)


def run(cmd, env=None, timeout=900, cwd=None):
    """(returncode, stdout bytes, stderr text) of cmd."""
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env or WINE_ENV, timeout=timeout,
                       cwd=cwd)
    return p.returncode, p.stdout, p.stderr.decode("utf-8", "replace")


def wine(exe, *args, **kw):
    return run(["wine", exe] + list(args), **kw)


def imports(exe):
    out = subprocess.run(["x86_64-w64-mingw32-objdump", "-p", exe], stdout=subprocess.PIPE, check=True).stdout
    return sorted(l.split(b":", 1)[1].strip().decode().lower() for l in out.splitlines() if b"DLL Name:" in l)


def busy_threads(cmd, min_cpu_s=0.3):
    """Runs cmd (a Wine command); returns (returncode, stdout, the number of
    its threads that used at least min_cpu_s of CPU). Wine runs each
    Windows thread as a thread of its Linux process, so /proc counts them."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=WINE_ENV)
    tick = os.sysconf("SC_CLK_TCK")
    cpu = {}
    exe = os.path.basename(cmd[1]).lower()
    while p.poll() is None:
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    cl = f.read().lower()
                if exe.encode() not in cl:
                    continue
                for tid in os.listdir("/proc/%s/task" % pid):
                    with open("/proc/%s/task/%s/stat" % (pid, tid)) as f:
                        fields = f.read().rsplit(")", 1)[1].split()
                    cpu[(pid, tid)] = (int(fields[11]) + int(fields[12])) / tick
            except (OSError, IndexError, ValueError):
                continue
        time.sleep(0.05)
    out = p.stdout.read()
    return p.returncode, out, sum(1 for s in cpu.values() if s >= min_cpu_s)


def make_big_gguf(src, dst, gap):
    """dst: src's GGUF with every tensor moved gap bytes further into the
    data section (a hole, so the file is sparse): the tensors lie past
    gap. Parses just enough of GGUF v2/v3 to find the tensors' offsets."""
    data = bytearray(open(src, "rb").read())
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from("<" + fmt, data, pos)
        pos += struct.calcsize("<" + fmt)
        return v[0]

    def skip_string():
        nonlocal pos
        n = take("Q")
        pos += n

    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def skip_value(t):
        nonlocal pos
        if t == 8:
            skip_string()
        elif t == 9:
            at, n = take("I"), take("Q")
            for _ in range(n):
                skip_value(at)
        else:
            pos += sizes[t]

    assert data[:4] == b"GGUF"
    pos = 4
    version, n_tensors, n_kv = take("I"), take("Q"), take("Q")
    assert version >= 2
    alignment = 32
    for _ in range(n_kv):
        klen = take("Q")
        key = bytes(data[pos:pos + klen])
        pos += klen
        t = take("I")
        if key == b"general.alignment" and t == 4:
            alignment = struct.unpack_from("<I", data, pos)[0]
        skip_value(t)
    for _ in range(n_tensors):
        skip_string()
        n_dims = take("I")
        pos += 8 * n_dims + 4
        off = struct.unpack_from("<Q", data, pos)[0]
        struct.pack_into("<Q", data, pos, off + gap)
        pos += 8
    data_offset = (pos + alignment - 1) // alignment * alignment
    assert gap % alignment == 0
    with open(dst, "wb") as f:
        f.write(data[:data_offset])
        f.seek(data_offset + gap)
        f.write(data[data_offset:])


def reference_jobs(shared, models, smollm2_steps, gemma):
    """(name, model path, greedy steps, parse_special, prompt) for every
    reference whose model is in ../shared (and Gemma 3 270M's, from
    models/, with gemma)."""
    jobs = []
    dirs = [os.path.join(shared, "models"), os.path.join(shared, "arch")] + ([models] if gemma else [])
    for ref in sorted(glob.glob(os.path.join(shared, "reference", "*.json"))):
        name = os.path.basename(ref)[:-len(".json")]
        model_name = name.rsplit(".", 1)[0]
        for d in dirs:
            path = os.path.join(d, model_name + ".gguf")
            if os.path.exists(path):
                break
        else:
            continue
        r = json.load(open(ref, encoding="utf-8"))
        jobs.append((name, path, len(r["greedy_tokens"]), 1 if r.get("parse_special") else 0, r["prompt"]))
    # architectures without references (newer ones this build may refuse): refused alike
    for path in sorted(glob.glob(os.path.join(shared, "arch", "*.gguf"))):
        if not any(j[1] == path for j in jobs):
            jobs.append((os.path.basename(path), path, 8, 0, "Once upon a time"))
    smollm2 = os.path.join(models, "SmolLM2-135M-Instruct.Q4_1.gguf")
    if os.path.exists(smollm2):
        jobs.append(("SmolLM2", smollm2, smollm2_steps, 1,
                     "<|im_start|>user\nTell me a story about a dragon who learns to cook.<|im_end|>\n"
                     "<|im_start|>assistant\n"))
    return jobs


def compare_logits(win_dir, native_dir, shared, models, tmp):
    isas = os.environ.get("WINDOWS_CHECK_ISAS")
    if isas is None:
        flags = open("/proc/cpuinfo").read()
        isas = "scalar" + (" avx2" if " avx2" in flags else "") + (" avx512" if " avx512f" in flags else "")
    jobs = reference_jobs(shared, models, int(os.environ.get("WINDOWS_CHECK_SMOLLM2_STEPS", "128")),
                          os.environ.get("WINDOWS_CHECK_GEMMA") == "1")
    native = os.path.join(native_dir, "tests", "logits_check")
    windows = os.path.join(win_dir, "tests", "logits_check.exe")
    for isa in isas.split():
        env = dict(WINE_ENV, INFER_ISA=isa)
        # the plain C kernels take 4 minutes for the 1,891-token long
        # references (prompts of F16 weights): there only with
        # WINDOWS_CHECK_LONG_SCALAR=1; the vector kernels take them all
        mine = [j for j in jobs if isa != "scalar" or not j[0].endswith(".long") or
                os.environ.get("WINDOWS_CHECK_LONG_SCALAR") == "1"]
        jobs_file = os.path.join(tmp, "jobs-%s.tsv" % isa)
        with open(jobs_file, "w", encoding="utf-8", newline="\n") as f:
            for _, path, steps, special, prompt in mine:
                f.write("%s\t%d\t%d\t%s\n" % (path, steps, special, prompt.encode("utf-8").hex()))
        t0 = time.time()
        rc_n, out_n, err_n = run([native, jobs_file, "2"], env=env, timeout=1500)
        t1 = time.time()
        rc_w, out_w, err_w = run(["wine", windows, jobs_file, "2"], env=env, timeout=1500)
        t2 = time.time()
        ln, lw = out_n.decode().splitlines(), out_w.decode().splitlines()
        detail = "%d jobs, %d lines; native %.0f s, Wine %.0f s" % (len(mine), len(ln), t1 - t0, t2 - t1)
        if rc_n or rc_w:
            check(False, "logits_check ran on %s" % isa, (err_n or err_w).strip().splitlines()[-1:])
            continue
        first = next((i for i in range(max(len(ln), len(lw))) if i >= len(ln) or i >= len(lw) or ln[i] != lw[i]),
                     None)
        if first is not None:
            model = next((l for l in reversed(ln[:first + 1]) if l.startswith("model ")), "?")
            detail += "; first difference at line %d (%s): native '%s', Windows '%s'" % (
                first + 1, model.split(":")[0], ln[first] if first < len(ln) else "<end>",
                lw[first] if first < len(lw) else "<end>")
        refused = sum(1 for l in ln if ": refused: " in l)
        check(first is None and len(ln) > len(mine),
              "every reference model's tokens and logits, Windows = Linux bit for bit, %s kernels" % isa,
              detail + ("; %d models refused by both builds alike" % refused if refused else ""))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--win", required=True)
    ap.add_argument("--native", required=True)
    ap.add_argument("--shared", required=True)
    ap.add_argument("--models", required=True)
    a = ap.parse_args()
    exe = os.path.join(a.win, "infer.exe")
    native_cli = os.path.join(a.native, "infer")
    for tool in ("wine", "x86_64-w64-mingw32-objdump"):
        if not shutil.which(tool):
            print("windows_check: SKIPPED: %s is not installed (sh scripts/deps.sh installs it)" % tool)
            return 77
    for path in (exe, native_cli, os.path.join(a.native, "tests", "logits_check")):
        if not os.path.exists(path):
            print("windows_check: SKIPPED: %s is not built" % path)
            return 77
    stories = os.path.join(a.shared, "models", "stories260K.gguf")
    if not os.path.exists(stories):
        print("windows_check: SKIPPED: no %s (../shared absent?)" % stories)
        return 77
    smollm2 = os.path.join(a.models, "SmolLM2-135M-Instruct.Q4_1.gguf")
    bench_model = smollm2 if os.path.exists(smollm2) else stories
    tmp = tempfile.mkdtemp(prefix="windows_check.")
    # one Wine server for every program here, rather than one started (and
    # Wine's services with it) for each; the services start with the first
    # program, and keep its standard streams: that one's go nowhere, so
    # that the later ones' pipes close when they end
    subprocess.run(["wineserver", "-p"], env=WINE_ENV)
    subprocess.run(["wine", exe, "--version"], env=WINE_ENV, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=600)
    try:
        t_start = time.time()
        # 1. no DLL of MinGW's (or ours) to ship
        dlls = imports(exe)
        check(all(d in SYSTEM_DLLS or d.startswith("api-ms-win-") for d in dlls),
              "infer.exe imports only Windows' own DLLs", ", ".join(dlls))
        alone = os.path.join(tmp, "alone")
        os.mkdir(alone)
        shutil.copy(exe, alone)
        rc, out, err = wine(os.path.join(alone, "infer.exe"), "--version", cwd=alone)
        check(rc == 0 and b"infer" in out, "infer.exe runs from a folder with no DLL beside it",
              out.decode().strip() or err.strip()[-200:])

        # 2, 3. the platform layer, and the library under threads
        scratch = os.path.join(tmp, "scratch")
        os.mkdir(scratch)
        rc, out, err = wine(os.path.join(a.win, "tests", "platform_check.exe"), stories, scratch)
        sys.stdout.write(out.decode("utf-8", "replace"))
        check(rc == 0, "platform_check.exe under Wine", err.strip()[-300:])
        rc, out, err = wine(os.path.join(a.win, "tests", "concurrency.exe"), a.shared)
        check(rc == 0, "concurrency.exe under Wine: two threads on one model, a worker polled and cancelled",
              (out.decode() + err).strip()[-300:])

        # 4. infer bench's threads
        speeds = {}
        for t in (1, 2):
            rc, out, busy = busy_threads(["wine", exe, "bench", "-m", bench_model, "-t", str(t), "-p", "64", "-n",
                                          "32", "-r", "2", "-o", "json"])
            try:
                rows = json.loads(out.decode())
                speeds[t] = ", ".join("%s %.1f t/s" % ("pp%d" % r["n_prompt"] if r["n_prompt"] else "tg%d" % r["n_gen"],
                                                       r["avg_ts"]) for r in rows)
            except (ValueError, KeyError, TypeError):
                speeds[t] = out.decode()[-200:]
            check(rc == 0 and busy == t, "infer bench -t %d runs %d thread%s under Wine" % (t, t, "s" * (t > 1)),
                  "%d threads busy; %s" % (busy, speeds[t]))

        # 5. the game loop
        for mode in (["--workers", "1"], ["--budget", "4"]):
            rc, out, err = wine(os.path.join(a.win, "npc.exe"), "-m", bench_model, "--frames", "600", "--quiet",
                                *mode)
            # a line a character: "Mira    2 replies (0 failed),   83 tokens: ..."
            chars = [re.search(r"(\d+) replies \((\d+) failed\)", l) for l in out.decode().splitlines()]
            chars = [(int(m.group(1)), int(m.group(2))) for m in chars if m]
            check(rc == 0 and len(chars) == 4 and all(r >= 1 and f == 0 for r, f in chars),
                  "npc %s under Wine: every character replies, none fails" % " ".join(mode),
                  "replies %s" % [r for r, _ in chars] if chars else (out.decode() + err).strip()[-200:])

        # 6. a UTF-8 path, and a file past 4 GiB
        args = ["run", "-p", "Once upon a time", "-n", "16", "--temp", "0", "-t", "2"]
        rc, expected, err = run([native_cli, args[0], "-m", stories] + args[1:])
        utf8_dir = os.path.join(tmp, "\u043c\u043e\u0434\u0435\u043b\u0438-\u6a21\u578b")
        os.mkdir(utf8_dir)
        utf8 = os.path.join(utf8_dir, "m\u00f6del-\u0436.gguf")
        shutil.copy(stories, utf8)
        rc, out, err = wine(exe, args[0], "-m", utf8, *args[1:])
        check(rc == 0 and out == expected and expected, "a model at a UTF-8 path loads in infer.exe",
              err.strip().splitlines()[-1] if rc else out.decode()[:60])
        big = os.path.join(tmp, "big.gguf")
        make_big_gguf(stories, big, (4 << 30) + (256 << 20))
        size = os.path.getsize(big)
        rc, out, err = wine(exe, args[0], "-m", big, *args[1:])
        check(rc == 0 and out == expected and size > (4 << 30),
              "a model whose tensors lie past 4 GiB (a sparse file of %.2f GiB) loads in infer.exe" % (size / 2**30),
              err.strip().splitlines()[-1] if rc else "")
        rc, out, err = run([native_cli, args[0], "-m", big] + args[1:])
        check(rc == 0 and out == expected, "... and in the native build", err.strip()[-200:] if rc else "")
        os.unlink(big)

        # 7. the same bits on both systems
        compare_logits(a.win, a.native, a.shared, a.models, tmp)
        print("windows_check: %.0f s" % (time.time() - t_start))
    finally:
        subprocess.run(["wineserver", "-k"], env=WINE_ENV)
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print("windows_check: FAILED: %d checks: %s" % (len(failures), "; ".join(failures)))
        return 1
    print("windows_check: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""The applications on the GPU: `infer serve --device cuda --parallel 4`
and `npc --device cuda`, in a build whose GPU is tests/cuda_emu.h's
emulation (-DINFER_GPU_EMULATOR=ON) or a real one.

Usage: gpu_apps_check.py INFER_BIN NPC_BIN MODEL

The server on the GPU takes four completions at once (its four sequences
decoded together, a decode step one graph launch) and must answer each
with 200, the text the same server gives on the CPU for the same request
(greedy; MODEL is one whose GPU logits match the CPU's to rounding, as
stories260K's do), and /health must say the device. npc, its four
characters in one context of four sequences, must run its frames on the
GPU and report their replies. Exit 77 (skipped) when the model is absent
or the build has no `infer serve`.
"""
import json
import os
import re
import subprocess
import sys
import threading
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_check import Server  # noqa: E402 (the server on a free port, its log, a clean stop)

SKIP = 77
PROMPTS = ["Once upon a time", "The little dog", "Lily and Tom went", "One day, a big bird"]


def skip(why):
    print("SKIPPED: " + why)
    sys.exit(SKIP)


def fail(why):
    print("FAIL " + why)
    sys.exit(1)


def start(infer, model, device):
    """infer serve on the device, four sequences (server_check.py's Server)."""
    try:
        srv = Server(infer, model, "--device", device, "--parallel", "4", "-c", "256")
    except SystemExit as e:
        if device == "cuda" and "no CUDA GPU" in str(e):
            skip("no CUDA GPU here: " + str(e).strip().splitlines()[-1])
        raise
    return srv


def get(srv, path):
    with urllib.request.urlopen(srv.url + path, timeout=600) as r:
        return r.status, json.loads(r.read())


def complete(srv, prompt):
    body = json.dumps({"prompt": prompt, "max_tokens": 12, "temperature": 0}).encode()
    req = urllib.request.Request(srv.url + "/v1/completions", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return r.status, json.loads(r.read())


def four_at_once(srv):
    """The four completions sent together: (status, text) of each."""
    out = [None] * len(PROMPTS)

    def one(i):
        try:
            code, body = complete(srv, PROMPTS[i])
            out[i] = (code, body["choices"][0]["text"])
        except Exception as e:  # noqa: BLE001 (any failure is the test's)
            out[i] = (0, repr(e))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(PROMPTS))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        sys.exit(2)
    infer, npc, model = sys.argv[1:]
    if not os.path.exists(model):
        skip("%s is absent" % model)
    helptext = subprocess.run([infer, "serve", "--help"], capture_output=True, text=True)
    if "libmicrohttpd" in helptext.stdout + helptext.stderr and "usage" not in helptext.stdout:
        skip("this build has no infer serve (libmicrohttpd, cJSON)")

    cpu = start(infer, model, "cpu")
    want = four_at_once(cpu)
    cpu.stop()
    gpu = start(infer, model, "cuda")
    code, health = get(gpu, "/health")
    if code != 200:
        fail("/health on the GPU: %d" % code)
    got = four_at_once(gpu)
    gpu.stop()
    if health.get("device") != "cuda":
        fail("/health on the GPU server says device %r: %s" % (health.get("device"), json.dumps(health)))
    print("ok   /health: device %s (%s)" % (health["device"], health.get("device_name")))
    for p, (cw, tw), (cg, tg) in zip(PROMPTS, want, got):
        if cw != 200 or cg != 200:
            fail("%r: status %d on the CPU, %d on the GPU (%s)" % (p, cw, cg, tg))
        if tw != tg:
            fail("%r: the GPU answered %r, the CPU %r" % (p, tg, tw))
        print("ok   serve --device cuda --parallel 4: %r -> %r (as on the CPU)" % (p, tg))

    run = subprocess.run([npc, "-m", model, "--device", "cuda", "--frames", "300", "--budget", "100", "--work", "0",
                          "-c", "256", "-q"], capture_output=True, text=True, timeout=1200)
    if run.returncode != 0:
        fail("npc --device cuda exited with %d:\n%s%s" % (run.returncode, run.stdout[-2000:], run.stderr[-2000:]))
    replies = re.findall(r"^\s+\S+\s+(\d+) replies \((\d+) failed\),\s+(\d+) tokens", run.stdout, re.M)
    if len(replies) != 4 or sum(int(t) for _, _, t in replies) == 0:
        fail("npc --device cuda: no tokens from its four characters:\n%s" % run.stdout[-2000:])
    print("ok   npc --device cuda: %s" % ", ".join("%s replies, %s tokens" % (r, t) for r, _, t in replies))
    print("all GPU application checks passed")


if __name__ == "__main__":
    main()

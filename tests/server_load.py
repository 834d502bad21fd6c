#!/usr/bin/env python3
"""A bounded load test of `infer serve`: N clients (default 16) stream chat
replies through the openai package for S seconds (default 30), each
starting its next request as soon as one ends.

Usage: server_load.py INFER_BIN MODEL [--clients N] [--seconds S] [--parallel P]

Fails (exit 1) on any failed request: an error, a stream without a
finish_reason or usage, or one whose usage disagrees with what streamed.
Prints the requests, the failures, latency percentiles (time to first
token and to the whole reply) and the aggregate tokens/s. Exit 77 when the
model, the server or the openai package is absent.
"""
import argparse
import os
import random
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_check import Server, skip  # noqa: E402

PROMPTS = [
    "Write a short poem about the sea.",
    "Explain how a bicycle works.",
    "Tell me a story about a dragon who loves tea.",
    "What should I cook for dinner tonight?",
    "Describe the colour blue to someone who cannot see.",
    "Give me three tips for learning a new language.",
    "Why is the sky blue?",
    "Write a letter to a friend about a trip to the mountains.",
]


def percentile(xs, p):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = (len(xs) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("infer")
    ap.add_argument("model")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--parallel", type=int, default=16)
    a = ap.parse_args()
    if not os.path.exists(a.model):
        skip("%s is absent (python3 scripts/fetch_model.py fetches it)" % a.model)
    if subprocess.run([a.infer, "serve", "--help"], capture_output=True).returncode != 0:
        skip("this build has no server")
    try:
        import openai
    except ImportError:
        skip("the openai package is not installed (pip install openai)")

    srv = Server(a.infer, a.model, "--parallel", str(a.parallel), "--queue", str(a.clients), "-c", "1024")
    done, failures, lock = [], [], threading.Lock()
    t_start = time.time()
    t_end = t_start + a.seconds

    def client_loop(k):
        rng = random.Random(k)
        client = openai.OpenAI(base_url=srv.url + "/v1", api_key="none", max_retries=0, timeout=300)
        while time.time() < t_end:
            t0 = time.time()
            ttft = None
            try:
                stream = client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": rng.choice(PROMPTS)}],
                    max_tokens=rng.randint(32, 128), temperature=0.8, seed=rng.randint(0, 1 << 30), stream=True,
                    stream_options={"include_usage": True})
                text, finish, usage = "", None, None
                for c in stream:
                    if c.choices:
                        d = c.choices[0].delta.content
                        if d and ttft is None:
                            ttft = time.time() - t0
                        text += d or ""
                        finish = c.choices[0].finish_reason or finish
                    if c.usage:
                        usage = c.usage
                if finish is None or usage is None or usage.completion_tokens < 1 or (text == "") != (
                        usage.completion_tokens == 0):
                    raise RuntimeError("incomplete stream: finish %r, usage %r" % (finish, usage))
                with lock:
                    done.append((time.time() - t0, ttft if ttft is not None else time.time() - t0,
                                 usage.completion_tokens, time.time()))
            except Exception as ex:  # noqa: BLE001 - every failure counts
                with lock:
                    failures.append("client %d: %s" % (k, str(ex)[:200]))

    threads = [threading.Thread(target=client_loop, args=(k,)) for k in range(a.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.time() - t_start
    log = srv.stop()

    lat = [d[0] for d in done]
    ttft = [d[1] for d in done]
    tokens = sum(d[2] for d in done)
    print("load: %d clients for %.0f s (%d sequences decoding together), model %s" %
          (a.clients, a.seconds, a.parallel, os.path.basename(a.model)))
    print("load: %d requests, %d failed, %.1f s wall" % (len(done) + len(failures), len(failures), wall))
    print("load: latency p50 %.2f s, p99 %.2f s; time to first token p50 %.3f s, p99 %.3f s" %
          (percentile(lat, 50), percentile(lat, 99), percentile(ttft, 50), percentile(ttft, 99)))
    print("load: %d tokens generated, %.1f tokens/s aggregate (%.1f per client)" %
          (tokens, tokens / wall, tokens / wall / max(1, a.clients)))
    for f in failures[:10]:
        print("FAIL " + f)
    if failures or not done:
        print(log[-3000:])
        sys.exit(1)


if __name__ == "__main__":
    main()

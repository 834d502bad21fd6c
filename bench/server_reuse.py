#!/usr/bin/env python3
"""Time to first token of a conversation's last turn, with prompt reuse
(the server's default) and without it (cache_prompt false).

Usage: server_reuse.py INFER_BIN MODEL [--turns 5] [--words 300] [--runs 3]
           [-c 4096] [-t THREADS]

Starts `infer serve --parallel 1` and, per run, holds a conversation of
--turns user messages of about --words words each (greedy replies of 32
tokens), every turn sent with the whole conversation so far. The last
turn is streamed and timed from the request to the first content chunk;
the conversation is held once with reuse and once without (the turns
before the last are sent the same way as the last). Prints each run,
then mean ± standard deviation, and the prompt and cached token counts.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time

try:
    import openai
except ImportError:
    print("SKIPPED: the openai package is not installed")
    sys.exit(77)

WORDS = ("the river ran past the old mill where a miller kept his grain and his cat watched the birds "
         "that came each morning to the yard behind the house near the hill").split()


def user_text(turn, n_words):
    return "Turn %d. " % turn + " ".join(WORDS[(turn * 7 + i) % len(WORDS)] for i in range(n_words)) + \
        " Summarise this in one line."


def conversation(client, turns, n_words, reuse):
    messages = []
    extra = {} if reuse else {"cache_prompt": False}
    for t in range(turns):
        messages.append({"role": "user", "content": user_text(t, n_words)})
        t0 = time.perf_counter()
        ttft = None
        text = []
        usage = None
        for ch in client.chat.completions.create(model="m", messages=messages, max_tokens=32, temperature=0,
                                                 stream=True, stream_options={"include_usage": True},
                                                 extra_body=extra):
            if ch.choices and ch.choices[0].delta.content:
                if ttft is None:
                    ttft = time.perf_counter() - t0
                text.append(ch.choices[0].delta.content)
            if ch.usage:
                usage = ch.usage
        messages.append({"role": "assistant", "content": "".join(text)})
    d = usage.prompt_tokens_details
    return ttft * 1000, usage.prompt_tokens, d.cached_tokens if d else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("infer")
    ap.add_argument("model")
    ap.add_argument("--turns", type=int, default=5)
    ap.add_argument("--words", type=int, default=300)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("-c", type=int, default=4096)
    ap.add_argument("-t", type=int, default=2)
    a = ap.parse_args()
    log = open("server_reuse.log", "w+")
    proc = subprocess.Popen([a.infer, "serve", "-m", a.model, "--port", "0", "--parallel", "1", "-c", str(a.c),
                             "-t", str(a.t)], stdout=log, stderr=log)
    port = None
    for _ in range(1200):
        log.flush()
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", open("server_reuse.log").read())
        if m:
            port = int(m.group(1))
            break
        time.sleep(0.05)
    if port is None:
        proc.kill()
        raise SystemExit("the server did not start:\n" + open("server_reuse.log").read())
    try:
        client = openai.OpenAI(base_url="http://127.0.0.1:%d/v1" % port, api_key="x", max_retries=0, timeout=600)
        res = {True: [], False: []}
        for run in range(a.runs):
            for reuse in (False, True):
                ms, n_prompt, cached = conversation(client, a.turns, a.words, reuse)
                res[reuse].append(ms)
                print("run %d %-8s turn %d: ttft %.0f ms, prompt %d tokens, cached %s" %
                      (run + 1, "reuse" if reuse else "no reuse", a.turns, ms, n_prompt, cached), flush=True)
        for reuse in (False, True):
            v = res[reuse]
            print("%-8s ttft of turn %d: %.0f ± %.0f ms over %d runs" %
                  ("reuse" if reuse else "no reuse", a.turns, statistics.mean(v),
                   statistics.stdev(v) if len(v) > 1 else 0, len(v)))
    finally:
        proc.terminate()
        proc.wait()
        log.close()
        os.unlink("server_reuse.log")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""`infer serve` as a replica behind a load balancer: what it shows and how
it stops.

Usage: server_observe.py INFER_BIN MODEL

Checks, on SmolLM2 (replies long enough to be caught in flight):
- listening before loading: /health 200 and /ready 503 "loading" while the
  model loads (INFER_SERVE_LOAD_DELAY_MS, the server's test hook, makes the
  load last), other paths 503; /ready 200 "ready" after;
- GET /metrics parsed by prometheus_client: every family with its type, and
  the counters after a few requests (requests by endpoint and status, a 404
  and a 400 among them; prompt and generated tokens equal to the usage the
  replies reported; the histograms' counts; prompt-cache hits and tokens);
- GET /slots: a busy sequence during a stream, n_cached equal to the
  prompt and reply after it, the prefix hash equal for the same prompt
  twice and different for another; a user's request back on its sequence;
- the drain: SIGTERM during a stream (it finishes whole, a new connection
  is refused, requests on open connections get 503 with Connection: close,
  exit 0); --drain-timeout 1 cutting a long reply (the server says it
  cancelled 1, exit 0); a second SIGTERM exiting at once; SIGTERM while
  loading ending the load.
Exit 77 (skipped) when the model, the server or prometheus_client is
absent, saying which.
"""
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

SKIP = 77
KEY = "observe-key"
# SmolLM2's end-of-generation ids: banned where a reply must run to its limit
NO_EOG = {"0": -100, "2": -100}
FAMILIES = {  # prometheus_client names counters without _total
    "infer_requests": "counter",
    "infer_prompt_tokens": "counter",
    "infer_generated_tokens": "counter",
    "infer_time_to_first_token_seconds": "histogram",
    "infer_time_per_output_token_seconds": "histogram",
    "infer_queue_length": "gauge",
    "infer_sequences": "gauge",
    "infer_kv_cache_usage_ratio": "gauge",
    "infer_kv_cache_tokens": "gauge",
    "infer_prompt_cache_hits": "counter",
    "infer_prompt_cache_reused_tokens": "counter",
    "infer_model_load_seconds": "gauge",
    "infer_ready": "gauge",
    "infer_draining": "gauge",
}

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def skip(why):
    print("SKIPPED: " + why)
    sys.exit(SKIP)


class Server:
    """`infer serve` on a free port, found from the line it prints before
    loading the model."""

    def __init__(self, infer, model, *args, env=None):
        self.log_path = "server_observe_%d_%d.log" % (os.getpid(), int(time.time() * 1000) % 100000)
        self.log = open(self.log_path, "w+")
        self.proc = subprocess.Popen([infer, "serve", "-m", model, "--port", "0", "-t", "2"] + list(args),
                                     stdout=self.log, stderr=self.log, env=dict(os.environ, **(env or {})))
        deadline = time.time() + 60
        self.port = None
        while self.port is None:
            m = re.search(r"infer serve: http://127\.0\.0\.1:(\d+): loading", self.text())
            if m:
                self.port = int(m.group(1))
            elif self.proc.poll() is not None or time.time() > deadline:
                self.proc.kill()
                raise SystemExit("FAIL: the server did not say where it listens:\n" + self.text())
            else:
                time.sleep(0.02)

    def text(self):
        self.log.flush()
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def wait_log(self, pattern, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if re.search(pattern, self.text()):
                return True
            time.sleep(0.02)
        return False

    def wait_ready(self, timeout=60):
        deadline = time.time() + timeout
        while time.time() < deadline:
            status, _, body = self.call("GET", "/ready", key=None)
            if status == 200:
                return json.loads(body)
            time.sleep(0.05)
        raise SystemExit("FAIL: /ready never answered 200:\n" + self.text())

    def wait_exit(self, timeout):
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        log = self.text()
        self.log.close()
        os.unlink(self.log_path)
        return log

    def connection(self, timeout=60):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def call(self, method, path, body=None, key=KEY, conn=None):
        """(status, headers, body text) of one request (a new connection
        unless one is given)."""
        own = conn is None
        conn = conn or self.connection()
        headers = {"Content-Type": "application/json"}
        if key:
            headers["Authorization"] = "Bearer " + key
        try:
            conn.request(method, path, body=json.dumps(body) if isinstance(body, dict) else body, headers=headers)
            r = conn.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read().decode("utf-8", "replace")
        finally:
            if own:
                conn.close()

    def post(self, path, body, key=KEY):
        status, _, text = self.call("POST", path, body, key=key)
        if status != 200:
            raise SystemExit("FAIL: POST %s answered %d: %s" % (path, status, text))
        return json.loads(text)


class Stream:
    """A streamed chat read on a thread: its events, whether [DONE] came,
    and an event set at the first content."""

    def __init__(self, srv, body, key=KEY):
        self.events, self.done, self.error = [], False, None
        self.first = threading.Event()
        self.over = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(srv, dict(body, stream=True), key), daemon=True)
        self.thread.start()

    def _run(self, srv, body, key):
        conn = srv.connection(timeout=120)
        try:
            headers = {"Content-Type": "application/json"}
            if key:
                headers["Authorization"] = "Bearer " + key
            conn.request("POST", "/v1/chat/completions", body=json.dumps(body), headers=headers)
            r = conn.getresponse()
            if r.status != 200:
                self.error = "status %d: %s" % (r.status, r.read()[:300])
                return
            while True:
                line = r.readline()
                if not line:
                    break
                line = line.decode().strip()
                if not line.startswith("data: "):
                    continue
                if line == "data: [DONE]":
                    self.done = True
                    break
                ev = json.loads(line[6:])
                self.events.append(ev)
                if any(c.get("delta", {}).get("content") for c in ev.get("choices", [])):
                    self.first.set()
        except (OSError, http.client.HTTPException, ValueError) as e:
            self.error = repr(e)
        finally:
            conn.close()
            self.first.set()
            self.over.set()

    def text(self):
        return "".join(c.get("delta", {}).get("content") or "" for ev in self.events for c in ev.get("choices", []))

    def usage(self):
        return next((ev["usage"] for ev in self.events if ev.get("usage")), None)

    def finish(self):
        return next((c["finish_reason"] for ev in self.events for c in ev.get("choices", []) if c.get("finish_reason")),
                    None)

    def errors(self):
        return [ev["error"] for ev in self.events if "error" in ev]


def chat(text, max_tokens, user=None, **more):
    body = {"model": "m", "messages": [{"role": "user", "content": text}], "max_tokens": max_tokens,
            "temperature": 0, "logit_bias": NO_EOG}
    if user:
        body["user"] = user
    body.update(more)
    return body


def scrape(srv, parser):
    """{(sample name, sorted labels): value} and {family: type} of /metrics."""
    status, headers, text = srv.call("GET", "/metrics", key=None)
    if status != 200:
        raise SystemExit("FAIL: GET /metrics answered %d" % status)
    samples, types = {}, {}
    for fam in parser(text):
        types[fam.name] = fam.type
        for s in fam.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples, types, headers, text


def value(samples, name, **labels):
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def requests_count(samples, endpoint, status):
    return value(samples, "infer_requests_total", endpoint=endpoint, status=str(status))


def slots(srv):
    status, _, text = srv.call("GET", "/slots")
    if status != 200:
        raise SystemExit("FAIL: GET /slots answered %d: %s" % (status, text))
    return json.loads(text)


def slot_of(srv, user):
    return next((s for s in slots(srv) if s["user"] == user), None)


def check_loading_and_metrics(infer, model, parser):
    srv = Server(infer, model, "--parallel", "3", "-c", "512", "--api-key", KEY,
                 env={"INFER_SERVE_LOAD_DELAY_MS": "1500"})
    try:
        # ---- while loading ----
        status, _, text = srv.call("GET", "/health", key=None)
        check(status == 200 and json.loads(text) == {"status": "ok"}, "loading: /health 200 {\"status\": \"ok\"} (%d %s)"
              % (status, text))
        status, _, text = srv.call("GET", "/ready", key=None)
        check(status == 503 and json.loads(text) == {"status": "loading"}, "loading: /ready 503 \"loading\" (%d %s)"
              % (status, text))
        status, _, text = srv.call("POST", "/v1/chat/completions", chat("hi", 2))
        check(status == 503 and "loading" in json.loads(text)["error"]["message"],
              "loading: a chat is a 503 saying the model is loading (%d %s)" % (status, text))
        status, _, text = srv.call("GET", "/v1/models")
        check(status == 503, "loading: /v1/models is a 503 too")
        samples, _, _, _ = scrape(srv, parser)
        check(value(samples, "infer_ready") == 0 and value(samples, "infer_model_load_seconds") == 0,
              "loading: /metrics answers, infer_ready 0")
        check("listening on" not in srv.text(), "loading: the ready line is not printed yet")

        # ---- loaded ----
        check(srv.wait_ready() == {"status": "ready"}, "/ready 200 {\"status\": \"ready\"} once loaded")
        check(srv.wait_log(r"listening on http://127\.0\.0\.1:%d" % srv.port, 10), "the ready line names the port")
        status, _, text = srv.call("GET", "/health", key=None)
        check(status == 200 and json.loads(text)["status"] == "ok" and json.loads(text)["slots_idle"] == 3,
              "/health 200 after loading, without the key")
        status, _, _ = srv.call("GET", "/slots", key=None)
        check(status == 401, "/slots needs the key (%d)" % status)

        before, types, headers, text = scrape(srv, parser)
        check(headers.get("content-type") == "text/plain; version=0.0.4; charset=utf-8",
              "/metrics' content type is the text format 0.0.4's (%s)" % headers.get("content-type"))
        missing = [f for f, t in FAMILIES.items() if types.get(f) != t]
        check(not missing, "/metrics has every family with its type (missing or wrong: %s)" % missing)
        check(all(re.search(r"^# HELP %s\S* \S" % f, text, re.M) for f in FAMILIES), "every family has a HELP line")
        check(value(before, "infer_ready") == 1 and value(before, "infer_draining") == 0, "infer_ready 1, infer_draining 0")
        check(value(before, "infer_model_load_seconds") >= 1.5,
              "infer_model_load_seconds counts the load (%.2f s, 1.5 s of it the test's delay)"
              % value(before, "infer_model_load_seconds"))
        check(value(before, "infer_sequences", state="idle") == 3 and value(before, "infer_sequences", state="busy") == 0,
              "infer_sequences: 3 idle, 0 busy")
        check(requests_count(before, "/slots", 401) == 1 and requests_count(before, "/ready", 503) >= 1,
              "requests_total counted /slots 401 and /ready 503")

        # ---- a few requests, then the counters ----
        r1 = srv.post("/v1/chat/completions", chat("Say hello to the world.", 8, user="alice"))
        status, _, text = srv.call("POST", "/v1/completions",
                                   {"prompt": "Once upon a time", "max_tokens": 8, "temperature": 0, "stream": True,
                                    "stream_options": {"include_usage": True}, "logit_bias": NO_EOG})
        usage2 = None
        for line in text.splitlines():
            if line.startswith("data: {"):
                ev = json.loads(line[6:])
                usage2 = ev.get("usage") or usage2
        check(status == 200 and usage2 and usage2["completion_tokens"] == 8, "a streamed text completion, usage at its end")
        emb = srv.post("/v1/embeddings", {"input": "hello world"})
        status_models, _, _ = srv.call("GET", "/v1/models")
        status_404, _, _ = srv.call("GET", "/no/such/path")
        status_400, _, _ = srv.call("POST", "/v1/chat/completions", "{not json")
        check((status_models, status_404, status_400) == (200, 404, 400), "/v1/models 200, an unknown path 404, bad JSON 400")
        after, _, _, _ = scrape(srv, parser)

        def delta(name, **labels):
            return value(after, name, **labels) - value(before, name, **labels)

        expect = {("/v1/chat/completions", 200): 1, ("/v1/chat/completions", 400): 1, ("/v1/completions", 200): 1,
                  ("/v1/embeddings", 200): 1, ("/v1/models", 200): 1, ("other", 404): 1, ("/metrics", 200): 1}
        got = {k: requests_count(after, *k) - requests_count(before, *k) for k in expect}
        check(got == expect, "infer_requests_total moved by endpoint and status (%s)" % got)
        prompt = r1["usage"]["prompt_tokens"] + usage2["prompt_tokens"] + emb["usage"]["prompt_tokens"]
        check(delta("infer_prompt_tokens_total") == prompt,
              "infer_prompt_tokens_total moved by the usage's prompt tokens (%d, usage %d)"
              % (delta("infer_prompt_tokens_total"), prompt))
        generated = r1["usage"]["completion_tokens"] + usage2["completion_tokens"]
        check(delta("infer_generated_tokens_total") == generated == 16,
              "infer_generated_tokens_total moved by the usage's completion tokens (%d, usage %d)"
              % (delta("infer_generated_tokens_total"), generated))
        for h in ("infer_time_to_first_token_seconds", "infer_time_per_output_token_seconds"):
            check(delta(h + "_count") == 2 and delta(h + "_sum") > 0 and value(after, h + "_bucket", le="+Inf") ==
                  value(after, h + "_count"), "%s: 2 more observations, +Inf bucket = count" % h)
            buckets = sorted((float(dict(k[1])["le"]), v) for k, v in after.items() if k[0] == h + "_bucket")
            check(all(a[1] <= b[1] for a, b in zip(buckets, buckets[1:])), "%s: buckets cumulative" % h)

        # the same chat again: its prompt found in alice's sequence
        hits = value(after, "infer_prompt_cache_hits_total")
        r3 = srv.post("/v1/chat/completions", chat("Say hello to the world.", 8, user="alice"))
        cached = r3["usage"]["prompt_tokens_details"]["cached_tokens"]
        again, _, _, _ = scrape(srv, parser)
        check(cached > 0 and value(again, "infer_prompt_cache_hits_total") == hits + 1 and
              value(again, "infer_prompt_cache_reused_tokens_total") - value(after, "infer_prompt_cache_reused_tokens_total")
              == cached, "a prompt reused: cache hits +1, reused tokens + cached_tokens (%d)" % cached)
        check(r3["choices"][0]["message"]["content"] == r1["choices"][0]["message"]["content"],
              "the same greedy reply from the cache")
        sl = slots(srv)
        check(value(again, "infer_kv_cache_tokens") == sum(s["n_cached"] for s in sl) and
              abs(value(again, "infer_kv_cache_usage_ratio") - sum(s["n_cached"] for s in sl) / (3 * 512)) < 1e-4,
              "infer_kv_cache_tokens and _usage_ratio agree with /slots (%d of %d)"
              % (value(again, "infer_kv_cache_tokens"), 3 * 512))

        check_slots(srv)
        check_session(srv)
        log = srv.text()
        lines = re.findall(r"infer serve: (\S+) (\S+) (\d+) user=(\S+) prompt=(\d+) generated=(\d+) (\d+) ms", log)
        alice = [l for l in lines if l[3] == "alice"]
        check(len(alice) == 2 and all(l[:3] == ("POST", "/v1/chat/completions", "200") and int(l[5]) == 8 for l in alice)
              and int(alice[0][4]) == r1["usage"]["prompt_tokens"],
              "the access log: a line for each of alice's chats, with the usage's counts (%s)" % alice)
        check(any(l[1] == "/v1/embeddings" and l[3] == "-" and int(l[4]) == emb["usage"]["prompt_tokens"] for l in lines),
              "the access log: the embeddings request, user -")
        srv.proc.send_signal(signal.SIGTERM)
        rc = srv.wait_exit(60)
        check(rc == 0 and "draining 0 replies" in srv.text(), "idle, SIGTERM drains nothing and exits 0 (%s)" % rc)
    finally:
        srv.close()


def check_slots(srv):
    # a stream in flight: its sequence busy, with its user
    st = Stream(srv, chat("Tell me a long story about a dragon.", 40, user="bob", stream_options={"include_usage": True}))
    st.first.wait(60)
    during = slots(srv)
    busy = [s for s in during if s["state"] == "busy"]
    check(len(busy) == 1 and busy[0]["user"] == "bob" and busy[0]["n_cached"] > 0,
          "/slots during a stream: one busy sequence, bob's (%s)" % during)
    st.over.wait(60)
    usage = st.usage()
    check(st.done and usage and usage["completion_tokens"] == 40, "bob's stream ended whole (%s)" % st.error)
    # the stream's last bytes can reach us before the server marks the
    # sequence idle (CI saw it busy once): ask again for a few seconds
    deadline = time.time() + 5
    bob = slot_of(srv, "bob")
    while (not bob or bob["state"] != "idle") and time.time() < deadline:
        time.sleep(0.05)
        bob = slot_of(srv, "bob")
    check(bob and bob["state"] == "idle" and bob["id"] == busy[0]["id"] and
          bob["n_cached"] == usage["prompt_tokens"] + usage["completion_tokens"],
          "/slots after it: idle, n_cached = prompt + reply (%s, usage %s)" % (bob, usage))
    check(all(re.fullmatch(r"[0-9a-f]{16}", s["prefix_hash"]) for s in slots(srv)), "prefix_hash: 16 hex digits")

    # the same prompt twice: the same cache, the same hash; another prompt: another
    body = {"prompt": "Once upon a time, there was a little robot", "max_tokens": 8, "temperature": 0,
            "logit_bias": NO_EOG, "user": "carol"}
    srv.post("/v1/completions", body)
    first = slot_of(srv, "carol")
    srv.post("/v1/completions", body)
    second = slot_of(srv, "carol")
    check(first["id"] == second["id"] and first["prefix_hash"] == second["prefix_hash"] and
          first["n_cached"] == second["n_cached"], "the same prompt twice: the same sequence, n_cached and hash")
    others = [s["prefix_hash"] for s in slots(srv) if s["user"] != "carol"]
    check(first["prefix_hash"] not in others, "other caches, other hashes")


def check_session(srv):
    """Carol's cache is a text completion's; a chat shares the chat
    template's opening with alice's and bob's caches instead, so without
    her session her chat would go to one of theirs."""
    before = {s["id"]: s for s in slots(srv)}
    carol = next(s for s in before.values() if s["user"] == "carol")
    srv.post("/v1/chat/completions", chat("What is the capital of France?", 4, user="carol"))
    after = {s["id"]: s for s in slots(srv)}
    check(after[carol["id"]]["user"] == "carol" and after[carol["id"]]["prefix_hash"] != carol["prefix_hash"],
          "carol's chat went back to her sequence %d" % carol["id"])
    check(all(after[i]["prefix_hash"] == before[i]["prefix_hash"] for i in after if i != carol["id"]),
          "the other sequences kept their caches")
    # a user whose sequence is new to it takes a sequence as before (best prefix)
    srv.post("/v1/chat/completions", chat("What is the capital of France?", 4, user="dave"))
    dave = slot_of(srv, "dave")
    check(dave and dave["id"] == carol["id"], "a new user with carol's chat reuses her cache (best prefix)")


def check_drain(infer, model):
    # (a sanitizer's build is slow: the reply may take more than the
    # default 30 s, the kept-alive connections wait more than 10 s)
    srv = Server(infer, model, "--parallel", "2", "-c", "512", "--read-timeout", "120", "--drain-timeout", "300")
    try:
        srv.wait_ready()
        st = Stream(srv, chat("Write a poem about the sea.", 200, user="drain-1",
                              stream_options={"include_usage": True}), key=None)
        st.first.wait(60)
        keep = [srv.connection(), srv.connection()]
        for k in keep:  # opened before the drain
            check(srv.call("GET", "/health", conn=k)[0] == 200, "a kept-alive connection")
        fresh = srv.connection()  # accepted before the drain, its first request sent during it (a balancer's race)
        fresh.connect()
        time.sleep(0.5)
        t0 = time.time()
        srv.proc.send_signal(signal.SIGTERM)
        check(srv.wait_log(r"infer serve: SIGTERM: draining 1 reply \(up to 300 s\)", 10),
              "the drain's line: SIGTERM, 1 reply, its time-out")
        try:
            socket.create_connection(("127.0.0.1", srv.port), timeout=2).close()
            refused = False
        except ConnectionRefusedError:
            refused = True
        except OSError:
            refused = False
        check(refused, "a new connection is refused during the drain")
        status, headers, text = srv.call("GET", "/ready", conn=keep[0], key=None)
        check(status == 503 and json.loads(text) == {"status": "draining"} and headers.get("connection") == "close",
              "draining: /ready 503 \"draining\", Connection: close (%d %s %s)" % (status, text, headers.get("connection")))
        status, headers, text = srv.call("POST", "/v1/chat/completions", chat("hi", 2), conn=keep[1], key=None)
        check(status == 503 and "shutting down" in json.loads(text)["error"]["message"] and
              headers.get("connection") == "close", "draining: a new request on an open connection: 503, Connection: close")
        status, headers, text = srv.call("POST", "/v1/chat/completions", chat("hi", 2), conn=fresh, key=None)
        check(status == 200 and json.loads(text)["usage"]["completion_tokens"] == 2,
              "draining: the first request on a connection accepted before the drain is served, not refused "
              "(a balancer sent it here and does not resend a POST): %d" % status)
        st.over.wait(300)
        usage = st.usage()
        check(st.done and not st.errors() and st.finish() == "length" and usage and usage["completion_tokens"] == 200,
              "the stream in flight finished whole (%s, %s)" % (usage, st.error))
        rc = srv.wait_exit(60)
        check(rc == 0, "exit 0 after the drain (%s, %.1f s after SIGTERM)" % (rc, time.time() - t0))
        log = srv.text()
        check(re.search(r"infer serve: POST /v1/chat/completions 200 user=drain-1 prompt=\d+ generated=200 \d+ ms", log),
              "the access log has the drained reply")
        check(re.search(r"drained in [\d.]+ s: stopping", log), "the drain's end is said")
        for k in keep:
            k.close()
    finally:
        srv.close()


def check_drain_timeout(infer, model):
    # (a reply far longer than a second takes on any CPU)
    srv = Server(infer, model, "--parallel", "2", "-c", "2048", "--drain-timeout", "1")
    try:
        srv.wait_ready()
        st = Stream(srv, chat("Write a very long story about a cat.", 1900, user="cut-1"), key=None)
        st.first.wait(60)
        t0 = time.time()
        srv.proc.send_signal(signal.SIGTERM)
        st.over.wait(30)
        t_cut = time.time() - t0
        n = len(st.events)
        check(st.done and st.errors() and "shutting down" in st.errors()[0]["message"] and n < 1800,
              "--drain-timeout 1: the long reply is cut after %.1f s, its stream ended by an error event (%d events, %s)"
              % (t_cut, n, st.errors()))
        check(0.8 < t_cut < 5, "cut about 1 s after SIGTERM (%.1f s)" % t_cut)
        rc = srv.wait_exit(15)
        check(rc == 0, "exit 0 after cancelling (%s)" % rc)
        check(re.search(r"drain time-out \(1 s\) passed: cancelled 1 reply\b", srv.text()),
              "the server says it cancelled 1 reply")
    finally:
        srv.close()


def check_second_signal(infer, model):
    srv = Server(infer, model, "--parallel", "2", "-c", "2048")
    try:
        srv.wait_ready()
        st = Stream(srv, chat("Write a very long story about a dog.", 1900), key=None)
        st.first.wait(60)
        srv.proc.send_signal(signal.SIGTERM)
        srv.wait_log("draining", 10)
        t0 = time.time()
        srv.proc.send_signal(signal.SIGTERM)
        rc = srv.wait_exit(5)
        check(rc not in (None, 0) and time.time() - t0 < 2,
              "a second SIGTERM exits at once (%s after %.2f s)" % (rc, time.time() - t0))
        check(re.search(r"SIGTERM again: exiting at once", srv.text()), "and says so in one line")
        st.over.wait(10)
    finally:
        srv.close()


def check_signal_while_loading(infer, model):
    srv = Server(infer, model, env={"INFER_SERVE_LOAD_DELAY_MS": "20000"})
    try:
        check(srv.call("GET", "/ready", key=None)[0] == 503, "a long load: /ready 503")
        t0 = time.time()
        srv.proc.send_signal(signal.SIGTERM)
        rc = srv.wait_exit(10)
        check(rc == 0 and time.time() - t0 < 3 and "SIGTERM while loading: stopping" in srv.text(),
              "SIGTERM while loading stops the load and exits 0 at once (%s after %.2f s)" % (rc, time.time() - t0))
    finally:
        srv.close()


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    infer, model = sys.argv[1], sys.argv[2]
    if not os.path.exists(model):
        skip("%s is absent (python3 scripts/fetch_model.py fetches it)" % model)
    probe = subprocess.run([infer, "serve", "--help"], capture_output=True, text=True)
    if probe.returncode != 0:
        skip("this build has no server: " + probe.stderr.strip())
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError:
        skip("the prometheus_client package is not installed (pip install prometheus_client)")
    t0 = time.time()
    check_loading_and_metrics(infer, model, text_string_to_metric_families)
    check_drain(infer, model)
    check_drain_timeout(infer, model)
    check_second_signal(infer, model)
    check_signal_while_loading(infer, model)
    if failures:
        print("%d checks failed: %s" % (len(failures), "; ".join(failures)))
        sys.exit(1)
    print("all observability checks passed in %.1f s" % (time.time() - t0))


if __name__ == "__main__":
    main()

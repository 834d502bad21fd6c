#!/usr/bin/env python3
"""Three `infer serve` replicas behind nginx, one drained and one killed
under load.

Usage: server_replicas.py INFER_BIN MODEL [--requests N] [--clients C] [--max-tokens T]

Starts three replicas on free loopback ports, waits for each /ready, and
runs nginx (unprivileged, everything in a temporary directory) with the
http block of deploy/nginx.conf, its upstream pointed at the replicas.
C streaming clients of the openai package (default 8) send N chat requests
(default 80) through nginx, each with a unique "user" (req-K) and T tokens
to generate (default 40, end-of-generation banned so that every reply is
exactly T tokens). During the load replica A gets SIGTERM while it has
replies in flight, and once it has exited, replica B gets SIGKILL while it
has replies in flight. Asserted:
  - A's in-flight replies complete in full (finish_reason "length", T
    tokens), A exits 0, and no request that started after A stopped
    accepting reaches it;
  - the failed requests are exactly those nginx had open on B when it
    died (nginx's log names B, B never logged them, they started before
    B was gone, no other replica logged them);
  - every successful request appears exactly once in the replicas' access
    logs (user=req-K), with T tokens; nothing is lost or served twice.
Prints requests, failures by cause, latency and time-to-first-token
percentiles, the requests each replica served and those nginx moved off a
refusing replica. Exit 77 when nginx, the server, the model or the openai
package is absent.
"""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from server_check import skip  # noqa: E402
from server_load import percentile  # noqa: E402

# SmolLM2's end-of-generation ids, banned so that every reply runs to
# max_tokens and a cut one is told from a whole one by its length
EOG_IDS = [0, 2]
PROMPTS = [
    "Write a short poem about the sea.",
    "Explain how a bicycle works.",
    "Tell me a story about a dragon who loves tea.",
    "Describe the colour blue to someone who cannot see.",
]
ACCESS = re.compile(r"infer serve: POST (/v1/\S+) (\d{3}) user=(\S+) prompt=(\d+) generated=(\d+) ([\d.]+) ms")
DRAIN_TIMEOUT = 20


def fail(msg):
    raise SystemExit("FAIL: " + msg)


def http_get(url, timeout=2):
    """(status, body) of a GET; status None when the connection fails."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")
    except (OSError, urllib.error.URLError):
        return None, ""


class Replica:
    def __init__(self, name, infer, model, tmp, parallel):
        self.name = name
        self.log_path = os.path.join(tmp, "replica_%s.log" % name)
        self.log = open(self.log_path, "w")
        # one thread each: three replicas share the machine's cores
        self.proc = subprocess.Popen([infer, "serve", "-m", model, "--port", "0", "-t", "1", "--parallel",
                                      str(parallel), "-c", "512", "--drain-timeout", str(DRAIN_TIMEOUT)],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        self.port = None
        self.rc = None
        self.t_exit = None

    def text(self):
        self.log.flush()
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def wait_listening(self, deadline):
        while self.port is None:
            if self.proc.poll() is not None:
                fail("replica %s exited at start:\n%s" % (self.name, self.text()[-3000:]))
            # the port is printed as it starts listening, before the model
            # loads ("http://127.0.0.1:PORT: loading"), and again once ready
            m = re.search(r"http://127\.0\.0\.1:(\d+)", self.text())
            if m:
                self.port = int(m.group(1))
                self.url = "http://127.0.0.1:%d" % self.port
            elif time.time() > deadline:
                fail("replica %s did not listen within 120 s:\n%s" % (self.name, self.text()[-3000:]))
            else:
                time.sleep(0.05)

    def wait_ready(self, deadline):
        while True:
            status, body = http_get(self.url + "/ready")
            if status == 200:
                if json.loads(body).get("status") != "ready":
                    fail("replica %s: /ready 200 says %s" % (self.name, body))
                return
            if status == 503 and json.loads(body).get("status") != "loading":
                fail("replica %s: /ready 503 while it loads says %s" % (self.name, body))
            if status not in (503, None):
                fail("replica %s: /ready answered %s %s" % (self.name, status, body))
            if self.proc.poll() is not None or time.time() > deadline:
                fail("replica %s never became ready (last /ready %s):\n%s" % (self.name, status, self.text()[-3000:]))
            time.sleep(0.1)

    def busy_users(self):
        """The users of the sequences busy now (GET /slots)."""
        status, body = http_get(self.url + "/slots")
        if status != 200:
            return None
        slots = json.loads(body)
        if isinstance(slots, dict):
            slots = slots.get("slots", slots.get("data", []))
        return [s.get("user") for s in slots if s.get("state") == "busy"]

    def served(self):
        """{user: (status, prompt, generated)} from the access log; users
        logged twice are returned apart."""
        seen, twice = {}, []
        for m in ACCESS.finditer(self.text()):
            if m.group(1) != "/v1/chat/completions":
                continue
            user = m.group(3)
            if user in seen:
                twice.append(user)
            seen[user] = (int(m.group(2)), int(m.group(4)), int(m.group(5)))
        return seen, twice


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def http_block(conf_text):
    """The contents of the http { } block of an nginx configuration."""
    text = re.sub(r"#[^\n]*", "", conf_text)
    m = re.search(r"\bhttp\s*\{", text)
    if not m:
        fail("deploy/nginx.conf has no http block")
    depth, i = 1, m.end()
    while depth:
        if i >= len(text):
            fail("deploy/nginx.conf: the http block is not closed")
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        i += 1
    return text[m.end():i - 1]


def nginx_conf(deploy_conf, replicas, port):
    """deploy/nginx.conf's http block with the test's replicas, listen
    address and log; the rest of nginx's paths in its prefix directory."""
    body = http_block(open(deploy_conf).read())
    for must in ("least_conn;", "max_fails=", "fail_timeout=", "proxy_next_upstream error timeout;",
                 "proxy_buffering off;", "proxy_http_version 1.1;"):
        if must not in body:
            fail("deploy/nginx.conf's http block lacks %r, which this test relies on" % must)
    if re.search(r"^\s*keepalive\s", body, re.M) or "non_idempotent" in body:
        fail("deploy/nginx.conf keeps upstream connections alive or resends POSTs: the test assumes neither")
    servers = re.findall(r"^\s*server\s+[^\s{;]+([^;{]*);", body, re.M)
    if not servers:
        fail("deploy/nginx.conf's upstream names no server")
    params = servers[0]
    first = True

    def upstream_server(m):
        nonlocal first
        if not first:
            return ""
        first = False
        return "\n".join("        server 127.0.0.1:%d%s;" % (r.port, params) for r in replicas)
    body = re.sub(r"^\s*server\s+[^\s{;]+[^;{]*;", upstream_server, body, flags=re.M)
    body = re.sub(r"^\s*listen\s[^;]*;", "        listen 127.0.0.1:%d;" % port, body, flags=re.M)
    body = re.sub(r"^\s*access_log\s[^;]*;", "", body, flags=re.M)
    return """worker_processes 1;
pid nginx.pid;
error_log error.log notice;
events { worker_connections 1024; }
http {
    client_body_temp_path body_temp;
    proxy_temp_path proxy_temp;
    fastcgi_temp_path fastcgi_temp;
    uwsgi_temp_path uwsgi_temp;
    scgi_temp_path scgi_temp;
    # the test's own log: each request's user (a header the clients send)
    # and the replicas nginx tried for it
    log_format replicas_test '$http_x_request_user|$upstream_addr|$upstream_status|$status|$request_time';
    access_log access.log replicas_test;
%s
}
""" % body


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("infer")
    ap.add_argument("model")
    ap.add_argument("--requests", type=int, default=80)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=40)
    ap.add_argument("--parallel", type=int, default=4)
    a = ap.parse_args()
    nginx = shutil.which("nginx") or ("/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK) else None)
    if not nginx:
        skip("nginx is not installed (Debian: apt-get install nginx; scripts/deps.sh installs it)")
    if not os.path.exists(a.model):
        skip("%s is absent (python3 scripts/fetch_model.py fetches it)" % a.model)
    if not os.path.exists(a.infer) or subprocess.run([a.infer, "serve", "--help"], capture_output=True).returncode:
        skip("this build has no server (%s serve)" % a.infer)
    try:
        import openai
    except ImportError:
        skip("the openai package is not installed (pip install openai)")
    deploy_conf = os.path.join(HERE, "..", "deploy", "nginx.conf")
    t_start = time.time()
    tmp = tempfile.mkdtemp(prefix="server_replicas_")
    replicas, ngx = [], None
    try:
        replicas = [Replica(n, a.infer, a.model, tmp, a.parallel) for n in "ABC"]
        for r in replicas:
            r.wait_listening(time.time() + 120)
        for r in replicas:
            r.wait_ready(time.time() + 120)
        A, B, C = replicas
        port = free_port()
        conf = os.path.join(tmp, "nginx.conf")
        with open(conf, "w") as f:
            f.write(nginx_conf(deploy_conf, replicas, port))
        run_as = {}
        if os.geteuid() == 0:
            # never a root nginx: as root here, the test runs it as nobody,
            # in a directory of its own
            os.chown(tmp, 65534, 65534)
            os.chown(conf, 65534, 65534)
            run_as = {"user": 65534, "group": 65534, "extra_groups": []}
        ngx = subprocess.Popen([nginx, "-e", os.path.join(tmp, "error.log"), "-c", conf, "-p", tmp + "/",
                                "-g", "daemon off;"], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, **run_as)
        lb = "http://127.0.0.1:%d" % port
        deadline = time.time() + 20
        while http_get(lb + "/ready")[0] != 200:
            if ngx.poll() is not None or time.time() > deadline:
                err = open(os.path.join(tmp, "error.log"), errors="replace").read() if os.path.exists(
                    os.path.join(tmp, "error.log")) else ""
                fail("nginx did not come up on port %d (exit %s):\n%s" % (port, ngx.poll(), err[-3000:]))
            time.sleep(0.1)
        t_ready = time.time()

        lock = threading.Lock()
        results = {}  # user -> dict(t0, t1, ttft, ok, cause, tokens)
        next_k = [0]
        done_count = [0]

        def worker(w):
            client = openai.OpenAI(base_url=lb + "/v1", api_key="none", max_retries=0, timeout=120)
            while True:
                with lock:
                    k = next_k[0]
                    if k >= a.requests:
                        return
                    next_k[0] += 1
                user = "req-%d" % k
                r = {"t0": time.time(), "ttft": None, "ok": False, "cause": None, "tokens": None}
                with lock:
                    results[user] = r
                try:
                    stream = client.chat.completions.create(
                        model="m", messages=[{"role": "user", "content": PROMPTS[k % len(PROMPTS)]}],
                        max_tokens=a.max_tokens, temperature=0.7, seed=k, stream=True,
                        stream_options={"include_usage": True}, logit_bias={str(t): -100 for t in EOG_IDS},
                        extra_body={"user": user}, extra_headers={"X-Request-User": user})
                    finish, usage, pieces = None, None, 0
                    for c in stream:
                        if c.choices:
                            if c.choices[0].delta.content:
                                pieces += 1
                                if r["ttft"] is None:
                                    r["ttft"] = time.time() - r["t0"]
                            finish = c.choices[0].finish_reason or finish
                        if c.usage:
                            usage = c.usage
                    if finish != "length" or usage is None or usage.completion_tokens != a.max_tokens:
                        r["cause"] = "incomplete stream (finish_reason %r, usage %r)" % (finish, usage)
                    else:
                        r["ok"], r["tokens"] = True, usage.completion_tokens
                except Exception as ex:  # noqa: BLE001 - every failure is classified below
                    status = getattr(ex, "status_code", None)
                    r["cause"] = "%s%s" % (type(ex).__name__, " %d" % status if status else "")
                    why = ex.__cause__ or ex.__context__
                    r["error"] = ("%s (%s: %s)" % (ex, type(why).__name__, why) if why else str(ex))[:300]
                r["t1"] = time.time()
                with lock:
                    done_count[0] += 1

        events = {}

        def wait_busy(rep, at_least, after_done, what, deadline):
            """Polls rep's /slots until at_least sequences are busy, one of
            them by a request that was not there at the previous poll (a
            reply with nearly all its tokens to come), and after_done
            requests have finished; the busy users."""
            before = None
            while time.time() < deadline:
                if done_count[0] >= after_done:
                    users = rep.busy_users()
                    if users is None:
                        fail("replica %s: GET /slots failed (%s)" % (rep.name, what))
                    if before is not None and len(users) >= at_least and set(users) - before:
                        return users
                    before = set(users)
                time.sleep(0.02)
            fail("replica %s never had %d busy sequences after %d requests (%s)" % (rep.name, at_least, after_done,
                                                                                     what))

        def controller():
            try:
                events["A_busy"] = wait_busy(A, 1, a.requests // 6, "before SIGTERM", time.time() + 60)
                events["t_term"] = time.time()
                A.proc.send_signal(signal.SIGTERM)
                # from when A no longer says ready (or refuses), no new
                # request may reach it
                while True:
                    status, _ = http_get(A.url + "/ready", timeout=1)
                    if status != 200:
                        events["t_closed"] = time.time()
                        events["A_ready_after_term"] = status
                        break
                    if time.time() > events["t_term"] + 5:
                        fail("replica A still answers /ready 200 5 s after SIGTERM")
                    time.sleep(0.01)
                try:
                    A.rc = A.proc.wait(timeout=DRAIN_TIMEOUT + 15)
                except subprocess.TimeoutExpired:
                    fail("replica A did not exit within %d s of SIGTERM" % (DRAIN_TIMEOUT + 15))
                A.t_exit = time.time()
                events["B_busy"] = wait_busy(B, 2, a.requests // 2, "before SIGKILL", time.time() + 60)
                events["t_kill"] = time.time()
                B.proc.send_signal(signal.SIGKILL)
                B.rc = B.proc.wait()
                # its sockets are closed once it is reaped: a request that
                # reached it between the signal and then was in flight too
                events["t_dead"] = time.time()
            except SystemExit as ex:
                events["error"] = str(ex)

        threads = [threading.Thread(target=worker, args=(w,)) for w in range(a.clients)]
        ctl = threading.Thread(target=controller)
        for t in threads:
            t.start()
        ctl.start()
        for t in threads:
            t.join()
        ctl.join()
        t_load = time.time() - t_ready
        if "error" in events:
            fail(events["error"])

        # ---- what nginx and the replicas logged ----
        ngx.send_signal(signal.SIGQUIT)  # graceful: the log is complete
        ngx.wait(timeout=20)
        routed = {}  # user -> [upstream addresses nginx tried]
        for line in open(os.path.join(tmp, "access.log"), errors="replace"):
            parts = line.rstrip("\n").split("|")
            if len(parts) == 5 and parts[0].startswith("req-"):
                routed[parts[0]] = [u.strip() for u in parts[1].split(",")]
        C.proc.send_signal(signal.SIGTERM)
        try:
            C.rc = C.proc.wait(timeout=DRAIN_TIMEOUT + 15)
        except subprocess.TimeoutExpired:
            fail("replica C did not exit after SIGTERM")
        logs = {}
        for rep in replicas:
            served, twice = rep.served()
            if twice:
                fail("replica %s logged %s more than once" % (rep.name, twice[:5]))
            logs[rep.name] = served
        addr = {"127.0.0.1:%d" % rep.port: rep.name for rep in replicas}
        t_term, t_closed, t_kill, t_dead = events["t_term"], events["t_closed"], events["t_kill"], events["t_dead"]

        problems = []
        ok = [u for u, r in results.items() if r["ok"]]
        failed = [u for u, r in results.items() if not r["ok"]]
        if len(results) != a.requests:
            problems.append("%d requests sent of %d" % (len(results), a.requests))
        for u in set().union(*[set(v) for v in logs.values()]) - set(results):
            problems.append("a replica logged %s, which no client sent" % u)
        for u in ok:
            where = [n for n in "ABC" if u in logs[n]]
            last = addr.get(routed.get(u, ["?"])[-1])
            if len(where) == 1:
                status, _, generated = logs[where[0]][u]
                if status != 200 or generated != a.max_tokens:
                    problems.append("%s: replica %s logged %d with %d tokens" % (u, where[0], status, generated))
                if last != where[0]:
                    problems.append("%s: served by %s, nginx says %s" % (u, where[0], last))
            elif not where and last == "B" and results[u]["t1"] <= t_dead + 0.05:
                # whole at the client, its line not yet written when B died
                print("note %s completed on B just before the kill; its log line died with B" % u)
            else:
                problems.append("%s succeeded but is logged by %s" % (u, where or "no replica"))
        for u in failed:
            r = results[u]
            where = [n for n in "AC" if u in logs[n]]
            last = addr.get(routed.get(u, ["?"])[-1])
            if where:
                problems.append("%s failed (%s) but replica %s logged it" % (u, r["cause"], where))
            if last != "B":
                problems.append("%s failed (%s: %s) on %s, not on the killed replica" %
                                (u, r["cause"], r.get("error", ""), last))
            if r["t0"] >= t_dead:
                problems.append("%s failed (%s) but started after B was gone" % (u, r["cause"]))
        for u in events["A_busy"]:
            if u not in results or not results[u]["ok"] or u not in logs["A"]:
                problems.append("%s was in flight on A at SIGTERM and did not complete there" % u)
        if not events["A_busy"]:
            problems.append("A had no reply in flight at SIGTERM")
        for u, r in results.items():
            if u in logs["A"] and r["t0"] > t_closed:
                problems.append("%s started %.2f s after A stopped accepting, yet A served it" % (u, r["t0"] - t_closed))
        for u in events["B_busy"]:
            if u in results and u not in logs["B"] and results[u]["ok"] and results[u]["t1"] > t_dead + 0.05:
                problems.append("%s was in flight on B when it died, yet it succeeded" % u)
        # what nginx had open on B when it died: sent there, never logged
        # there (completed replies are logged as they end)
        on_b = {u for u in results if addr.get(routed.get(u, ["?"])[-1]) == "B" and u not in logs["B"]}
        cut = on_b - {u for u in ok if results[u]["t1"] <= t_dead + 0.05}
        if set(failed) != cut:
            problems.append("nginx had %s open on B when it died, but the failed requests are %s" %
                            (sorted(cut), sorted(failed)))
        if not failed:
            problems.append("no request failed, though B died with %s in flight" % events["B_busy"])
        if len(failed) > a.parallel + 16:
            problems.append("%d failed: more than B could hold" % len(failed))
        if A.rc != 0:
            problems.append("replica A exited %s after SIGTERM, not 0" % A.rc)
        if C.rc != 0:
            problems.append("replica C exited %s after SIGTERM, not 0" % C.rc)

        # ---- figures ----
        lat = [results[u]["t1"] - results[u]["t0"] for u in ok]
        ttft = [results[u]["ttft"] for u in ok if results[u]["ttft"] is not None]
        causes = {}
        for u in failed:
            causes[results[u]["cause"]] = causes.get(results[u]["cause"], 0) + 1
        moved = [u for u in results if len(routed.get(u, [])) > 1]
        print("replicas: 3 x infer serve (--parallel %d, -t 1, --drain-timeout %d) behind nginx (%s), model %s" %
              (a.parallel, DRAIN_TIMEOUT, subprocess.run([nginx, "-v"], capture_output=True, text=True).stderr.strip(),
               os.path.basename(a.model)))
        print("replicas: %d requests from %d clients, %d tokens each: %d succeeded, %d failed in %.1f s" %
              (len(results), a.clients, a.max_tokens, len(ok), len(failed), t_load))
        print("replicas: failures by cause: %s" % (", ".join("%s: %d" % kv for kv in sorted(causes.items())) or "none"))
        for u in sorted(failed)[:2]:
            print("replicas:   e.g. %s: %s" % (u, results[u].get("error", results[u]["cause"])))
        print("replicas: served by A %d, B %d (before its kill), C %d; %d moved by nginx off a refusing replica" %
              (len(logs["A"]), len(logs["B"]), len(logs["C"]), len(moved)))
        print("replicas: A: SIGTERM with %d in flight %s, /ready %s after %.0f ms, exit %s after %.2f s" %
              (len(events["A_busy"]), events["A_busy"], events["A_ready_after_term"] or "refused",
               (t_closed - t_term) * 1e3, A.rc, A.t_exit - t_term))
        for line in A.text().splitlines():
            if "SIGTERM" in line or "drain" in line:
                print("replicas: A said: " + line.strip())
        print("replicas: B: SIGKILL with %d sequences busy %s (reaped %.0f ms later), %d requests open there per "
              "nginx %s; failed: %s" % (len(events["B_busy"]), events["B_busy"], (t_dead - t_kill) * 1e3, len(on_b),
                                        sorted(on_b), sorted(failed)))
        print("replicas: latency p50 %.2f s, p99 %.2f s; time to first token p50 %.3f s, p99 %.3f s" %
              (percentile(lat, 50), percentile(lat, 99), percentile(ttft, 50), percentile(ttft, 99)))
        print("replicas: whole test %.1f s" % (time.time() - t_start))
        if problems:
            for p in problems[:30]:
                print("FAIL " + p)
            print("--- replica A's log (tail)\n" + A.text()[-2000:])
            print("--- nginx error log (tail)\n" + open(os.path.join(tmp, "error.log"), errors="replace").read()[-2000:])
            sys.exit(1)
        print("ok   drained replica finished its replies and exited 0; only the killed replica's requests failed; "
              "none lost or served twice")
    finally:
        for p in [ngx] + [r.proc for r in replicas]:
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

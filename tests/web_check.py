#!/usr/bin/env python3
"""The page of examples/web/ in a real browser: headless Chromium (Debian's,
driven by Selenium through Debian's chromedriver), the page served here on
127.0.0.1 with the COOP/COEP headers that SharedArrayBuffer (threads)
needs. It checks:
  - the page is cross-origin isolated and runs the threaded module;
  - greedy tokens in the browser equal the native CLI's (infer run --temp 0,
    run here for the same prompt with the plain C kernels, INFER_ISA=scalar,
    whose sums SIMD128 keeps bit for bit; the native default kernels' own
    exp and rounding can flip a near-tie, so that comparison is printed,
    not asserted), for stories260K and SmolLM2, with 2
    threads, and for stories260K in the one-thread module, on a copy of
    the page served without the headers (where it must fall back to it);
  - a reply under the page's JSON-schema option parses and fits the schema;
  - Stop ends a streaming reply early (the reply says cancelled, its text
    stops growing), and the page answers scripts while the model works;
  - a screenshot of the page mid-reply: web_mid_reply.png in OUT_DIR.
With --bench it measures instead (by hand, not in CI): SmolLM2's pp512 and
tg32 tokens/s in the browser, one thread and two, over --reps runs.

  usage: web_check.py WEB_DIR INFER_CLI SHARED_DIR SMOLLM2 OUT_DIR [--bench] [--reps N]
Exits 77 (CTest's skip), saying why, where chromium, chromedriver,
selenium, the module or the models are missing; scripts/deps.sh installs
all of them.
"""
import functools
import http.server
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time

N_PREDICT = 24
PROMPTS = {"stories260K": "Once upon a time, there was a", "SmolLM2": "The capital of France is"}
CHROMEDRIVER = "/usr/bin/chromedriver"


def skip(why):
    print("SKIPPED: " + why)
    sys.exit(77)


class Handler(http.server.SimpleHTTPRequestHandler):
    """The page's folder at /, models at /models/NAME, the same page without
    the isolation headers under /plain/."""

    models = {}
    extensions_map = dict(http.server.SimpleHTTPRequestHandler.extensions_map,
                          **{".wasm": "application/wasm", ".js": "text/javascript", ".gguf": "application/octet-stream"})

    def translate_path(self, path):
        path = path.split("?", 1)[0]
        if path.startswith("/plain/"):
            path = path[len("/plain"):]
        if path.startswith("/models/") and path[len("/models/"):] in self.models:
            return self.models[path[len("/models/"):]]
        return super().translate_path(path)

    def end_headers(self):
        if not self.path.startswith("/plain/"):
            self.send_header("Cross-Origin-Opener-Policy", "same-origin")
            self.send_header("Cross-Origin-Embedder-Policy", "require-corp")
        self.send_header("Cross-Origin-Resource-Policy", "same-origin")
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def log_message(self, *args):
        pass


def native_tokens(cli, model, prompt, isa="scalar"):
    env = dict(os.environ)
    env.pop("INFER_ISA", None)
    if isa:
        env["INFER_ISA"] = isa
    out = subprocess.run([cli, "run", "-m", model, "-p", prompt, "-n", str(N_PREDICT), "--temp", "0", "--json",
                          "-t", "2"], capture_output=True, text=True, check=True, timeout=300, env=env).stdout
    return json.loads(out)["tokens"]


class Page:
    def __init__(self, driver, base):
        self.d, self.base = driver, base

    def open(self, path="index.html"):
        self.d.get(self.base + path)
        self.wait(lambda: self.js("return document.readyState") == "complete", 30, "the page to load")

    def js(self, script, *args):
        return self.d.execute_script(script, *args)

    def js_async(self, script, *args):
        return self.d.execute_async_script(script, *args)

    def wait(self, cond, timeout, what):
        end = time.time() + timeout
        while time.time() < end:
            v = cond()
            if v:
                return v
            time.sleep(0.1)
        raise AssertionError("timed out after %d s waiting for %s (status: %r)" % (timeout, what, self.status()))

    def status(self):
        try:
            return self.js("return document.getElementById('status').textContent")
        except Exception:  # noqa: BLE001 - only for the message
            return "?"

    def load(self, url, threads, n_ctx=1024):
        self.js("""document.getElementById('threads').value = arguments[0];
                   document.getElementById('nctx').value = arguments[2];
                   document.getElementById('url').value = arguments[1];
                   document.getElementById('load').click();""", threads, url, n_ctx)
        self.wait(lambda: not self.status().startswith("loading"), 180, "the model to load")
        if not self.status().startswith("loaded"):
            raise AssertionError("loading %s failed: %s" % (url, self.status()))
        return self.js("return [app.llm.threads, app.llm.moduleName, document.getElementById('model').textContent]")

    def complete(self, prompt, n):
        r = self.js_async("""const done = arguments[arguments.length - 1];
            app.llm.complete(arguments[0], { nPredict: arguments[1], temperature: 0 })
              .then((r) => done(r), (e) => done({ error: e.message }));""", prompt, n)
        if "error" in r:
            raise AssertionError("complete: " + r["error"])
        return r


failures = 0


def check(ok, what):
    global failures
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures += 1


def check_tokens(page, cli, name, path, url, threads, module):
    prompt = PROMPTS["stories260K" if "stories260K" in name else "SmolLM2"]
    got_threads, got_module, described = page.load(url, threads)
    check(got_module == module and got_threads == threads and "kernels wasm" in described,
          "%s: %s with %d thread(s), SIMD128 kernels (%s)" % (name, got_module, got_threads, described.split(";")[-2:]))
    want = native_tokens(cli, path, prompt)
    fast = native_tokens(cli, path, prompt, None)
    differ = [i for i, (a, b) in enumerate(zip(fast, want)) if a != b]
    print("info %s: native default kernels' greedy tokens %s" % (
        name, "leave the plain C ones' at token %d" % differ[0] if differ else "equal the plain C ones'"))
    r = page.complete(prompt, N_PREDICT)
    same = r["tokens"][:len(want)] == want and len(r["tokens"]) >= len(want)
    check(same, "%s, %d thread(s): %d greedy tokens in the browser as native plain C infer run --temp 0's %d (%.1f t/s)%s" % (
        name, threads, len(r["tokens"]), len(want), r["metrics"]["genTps"],
        "" if same else "\n     browser %s\n     native  %s" % (r["tokens"], want)))


def send(page, text):
    page.js("document.getElementById('input').value = arguments[0]; document.getElementById('send').click();", text)


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    bench = "--bench" in sys.argv
    reps = int(sys.argv[sys.argv.index("--reps") + 1]) if "--reps" in sys.argv else 5
    if "--reps" in sys.argv:
        args.remove(str(reps))
    if len(args) != 5:
        print(__doc__)
        return 2
    web_dir, cli, shared, smollm2, out_dir = args
    for f in ("index.html", "infer.js", "infer_worker.js", "infer_web.js", "infer_web_st.js"):
        if not os.path.exists(os.path.join(web_dir, f)):
            skip("%s/%s is missing (sh scripts/wasm.sh builds the module and the page)" % (web_dir, f))
    if not os.path.exists(cli):
        skip("%s, the native CLI to compare with, is absent (cmake --build build --target infer_cli)" % cli)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium or not os.path.exists(CHROMEDRIVER):
        skip("chromium or %s is not installed (sh scripts/deps.sh installs them)" % CHROMEDRIVER)
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        skip("the selenium package is not installed (sh scripts/deps.sh installs it)")
    stories = os.path.join(shared, "models", "stories260K.gguf")
    models = {n: p for n, p in (("stories260K.gguf", stories), ("SmolLM2.gguf", smollm2)) if os.path.exists(p)}
    if "SmolLM2.gguf" not in models:
        skip("%s is absent (python3 scripts/fetch_model.py fetches it)" % smollm2)
    os.makedirs(out_dir, exist_ok=True)

    Handler.models = models
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=web_dir))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = "http://127.0.0.1:%d/" % server.server_address[1]

    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1000,900"):
        opts.add_argument(a)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    driver.set_script_timeout(600)
    page = Page(driver, base)
    try:
        if bench:
            return run_bench(page, reps)
        page.open()
        check(page.js("return window.crossOriginIsolated") is True, "served with COOP/COEP: crossOriginIsolated")
        if "stories260K.gguf" in models:
            check_tokens(page, cli, "stories260K", stories, "models/stories260K.gguf", 2, "infer_web.js")
        else:
            print("stories260K: %s is absent, left out" % stories)
        check_tokens(page, cli, "SmolLM2", smollm2, "models/SmolLM2.gguf", 2, "infer_web.js")

        # the JSON-schema option of the page, through its own controls
        page.js("document.querySelector('input[name=mode][value=schema]').click();"
                "document.getElementById('npredict').value = 96;")
        schema = json.loads(page.js("return document.getElementById('constraint').value"))
        send(page, "Give me a person's name and age as JSON.")
        page.wait(lambda: page.status() in ("done", "stopped") or "rror" in page.status(), 300, "the JSON reply")
        reply = page.js("return app.lastReply && app.lastReply.text")
        try:
            value = json.loads(reply)
            fits = (isinstance(value, dict) and set(value) == set(schema["properties"]) and
                    isinstance(value["name"], str) and isinstance(value["age"], int))
        except (TypeError, ValueError):
            fits = False
        check(fits, "a reply under the JSON schema parses and fits it: %r" % reply)

        # a long free reply: a screenshot mid-reply, the page responsive, Stop
        page.js("document.querySelector('input[name=mode][value=free]').click();"
                "document.getElementById('npredict').value = 400; document.getElementById('clear').click();")
        send(page, "Tell me a long story about a dragon who learns to bake bread.")
        streaming = "return (document.querySelector('.assistant.streaming') || {}).textContent || ''"
        page.wait(lambda: len(page.js(streaming)) >= 60, 300, "the reply to stream")
        t0 = time.time()
        page.js("return 1")
        answer_ms = (time.time() - t0) * 1000
        shot = os.path.join(out_dir, "web_mid_reply.png")
        driver.save_screenshot(shot)
        check(os.path.getsize(shot) > 10000, "a screenshot mid-reply: %s (%d bytes)" % (shot, os.path.getsize(shot)))
        check(answer_ms < 1000, "the page answered a script in %.0f ms while the model generated" % answer_ms)
        page.js("document.getElementById('cancel').click()")
        page.wait(lambda: page.status() in ("stopped", "done") or "rror" in page.status(), 60, "Stop to take effect")
        r = page.js("return app.lastReply")
        text_after = page.js("return document.querySelector('#log .assistant:last-child').textContent")
        time.sleep(1)
        still = page.js("return document.querySelector('#log .assistant:last-child').textContent")
        check(page.status() == "stopped" and r["cancelled"] and len(r["tokens"]) < 400 and text_after == still,
              "Stop ended the reply after %d of 400 tokens (status %r)" % (len(r["tokens"]), page.status()))

        # the one-thread module: the page without the isolation headers
        if "stories260K.gguf" in models:
            page.open("plain/index.html")
            check(page.js("return window.crossOriginIsolated") is False, "served without COOP/COEP: not isolated")
            check_tokens(page, cli, "stories260K", stories, "models/stories260K.gguf", 1, "infer_web_st.js")
        # bad input: one line in the status, the page goes on
        page.js("document.getElementById('url').value = 'models/none.gguf'; document.getElementById('load').click();")
        page.wait(lambda: "HTTP 404" in page.status(), 60, "the missing model's error")
        check("\n" not in page.status(), "a missing model: %r" % page.status())
    finally:
        driver.quit()
        server.shutdown()
    print("%d check(s) failed" % failures if failures else "web_check: all passed")
    return 1 if failures else 0


def bench_once(page, p, n):
    """One app.llm.bench(p, n), polled (a pass may outlast WebDriver's 120 s
    read time-out on a loaded machine)."""
    page.js("window.benchResult = null; app.llm.bench(arguments[0], arguments[1])"
            ".then((v) => { window.benchResult = v; }, (e) => { window.benchResult = e.message; });", p, n)
    v = page.wait(lambda: page.js("return window.benchResult"), 1800, "bench %d %d" % (p, n))
    return float(v)


def run_bench(page, reps):
    """SmolLM2 pp512 and tg32 tokens/s: one thread (page without the
    isolation headers), then two (the threaded module), each after a
    warm-up run."""
    for path, threads in (("plain/index.html", 1), ("index.html", 2)):
        page.open(path)
        got, module, _ = page.load("models/SmolLM2.gguf", threads, 1024)
        for name, p, n in (("pp512", 512, 0), ("tg32", 0, 32)):
            bench_once(page, p, n)
            samples = [bench_once(page, p, n) for _ in range(reps)]
            print("chromium, %d thread(s) (%s): %s %.2f +- %.2f tokens/s over %d runs (%s)" % (
                got, module, name, statistics.mean(samples), statistics.stdev(samples) if len(samples) > 1 else 0,
                reps, " ".join("%.1f" % s for s in samples)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

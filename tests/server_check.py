#!/usr/bin/env python3
"""`infer serve` against real clients: the openai package and curl.

Usage: server_check.py INFER_BIN MODEL [SHARED_DIR]

Starts the server on a free port of 127.0.0.1 and checks what a client of
OpenAI's API relies on: models, chat (plain and streamed, usage in the last
chunk), text completions, embeddings, several clients at once, the API key,
bad requests (400 with an OpenAI error object, 404, 405, 413), max_tokens
capped by the context, the full queue (503) and a client that disconnects
(its request cancelled, its sequence free again). The greedy replies are
compared with what `infer chat` and `infer run` give for the same input.
With SHARED_DIR (../shared), prompt reuse on its synthetic hybrid models
too, whose recurrent state is found cached only at a checkpoint.
Exit 77 (skipped) when the model, the server or the openai package is
absent, saying which.
"""
import base64
import json
import math
import os
import re
import socket
import struct
import subprocess
import sys
import threading
import time

SKIP = 77
KEY = "test-key-123"
# SmolLM2's end-of-generation ids (<|endoftext|>, <|im_end|>): banned where a
# reply must run to its limit
EOG_IDS = [0, 2]


def skip(why):
    print("SKIPPED: " + why)
    sys.exit(SKIP)


class Server:
    """`infer serve` on a free port; stop() sends SIGTERM and waits for a
    clean exit (the ASan build's LeakSanitizer checks it then)."""

    def __init__(self, infer, model, *args):
        self.log_path = "server_check_%d_%d.log" % (os.getpid(), int(time.time() * 1000) % 100000)
        self.log = open(self.log_path, "w+")
        self.proc = subprocess.Popen([infer, "serve", "-m", model, "--port", "0", "-t", "2"] + list(args),
                                     stdout=self.log, stderr=self.log)
        deadline = time.time() + 120
        self.port = None
        while time.time() < deadline and self.port is None:
            if self.proc.poll() is not None:
                raise SystemExit("FAIL: the server exited at start:\n" + self.text())
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", self.text())
            if m:
                self.port = int(m.group(1))
            else:
                time.sleep(0.05)
        if self.port is None:
            self.proc.kill()
            raise SystemExit("FAIL: the server did not start listening:\n" + self.text())
        self.url = "http://127.0.0.1:%d" % self.port

    def text(self):
        self.log.flush()
        with open(self.log_path) as f:
            return f.read()

    def stop(self):
        self.proc.terminate()
        try:
            rc = self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise SystemExit("FAIL: the server did not stop within 60 s of SIGTERM")
        log = self.text()
        self.log.close()
        os.unlink(self.log_path)
        if rc != 0:
            raise SystemExit("FAIL: the server exited with %d after SIGTERM:\n%s" % (rc, log[-4000:]))
        return log


def curl(url, *args, body=None, key=KEY):
    """(status, body text) of one curl call."""
    cmd = ["curl", "-s", "-S", "-o", "-", "-w", "\n%{http_code}", url] + list(args)
    if key:
        cmd += ["-H", "Authorization: Bearer " + key]
    if body is not None:
        cmd += ["-H", "Content-Type: application/json", "--data-binary", "@-"]
    out = subprocess.run(cmd, input=body.encode() if isinstance(body, str) else body, capture_output=True, timeout=300)
    text = out.stdout.decode("utf-8", "strict")
    text, _, code = text.rpartition("\n")
    return int(code), text


failures = []


def check(cond, what):
    if cond:
        print("ok   " + what)
    else:
        print("FAIL " + what)
        failures.append(what)


def openai_error(text, code=None, param=None):
    """A body in OpenAI's error shape, with that code and param."""
    try:
        e = json.loads(text)["error"]
    except (ValueError, KeyError, TypeError):
        return False
    return (isinstance(e.get("message"), str) and e["message"] and "type" in e and
            (code is None or e.get("code") == code) and (param is None or e.get("param") == param))


def cli(infer, *args, stdin=None):
    out = subprocess.run([infer] + list(args), input=stdin, capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise SystemExit("FAIL: infer %s: %s" % (" ".join(args), out.stderr))
    return out.stdout


def main():
    if len(sys.argv) not in (3, 4):
        raise SystemExit(__doc__)
    infer, model = sys.argv[1], sys.argv[2]
    shared = sys.argv[3] if len(sys.argv) == 4 else None
    if not os.path.exists(model):
        skip("%s is absent (python3 scripts/fetch_model.py fetches it)" % model)
    probe = subprocess.run([infer, "serve", "--help"], capture_output=True, text=True)
    if probe.returncode != 0:
        skip("this build has no server: " + probe.stderr.strip())
    try:
        import openai
    except ImportError:
        skip("the openai package is not installed (pip install openai)")
    if subprocess.run(["curl", "--version"], capture_output=True).returncode != 0:
        skip("curl is not installed")

    srv = Server(infer, model, "--parallel", "4", "--queue", "8", "-c", "512", "--api-key", KEY,
                 "--max-body", "65536", "--alias", "smollm")
    try:
        client = openai.OpenAI(base_url=srv.url + "/v1", api_key=KEY, max_retries=0, timeout=300)
        check_basics(infer, model, srv, client, openai)
        check_concurrent(srv, client)
        check_bad_requests(srv, client, openai)
        check_real_clients(infer, model, srv, client, openai)
        check_prompt_reuse(srv, client)
        check_speculative(srv)
    finally:
        log = srv.stop()
    check("stopping" in log, "SIGTERM stops the server cleanly")

    check_chat_template_file(infer, model, openai)
    check_harmony_template(infer, model, openai)
    if shared:
        check_gemma4_template(infer, model, shared, openai)
    check_draft_model(infer, model)

    # A server of one sequence and a queue of one: the full queue answers
    # 503, and a client that leaves frees the sequence.
    srv = Server(infer, model, "--parallel", "1", "--queue", "1", "-c", "2048")
    try:
        check_queue_and_disconnect(srv, openai)
    finally:
        log = srv.stop()
    check("client went away" in log, "the server logged the cancelled request")

    check_hybrid_reuse(infer, shared, openai)

    if failures:
        print("%d checks failed: %s" % (len(failures), "; ".join(failures)))
        sys.exit(1)
    print("all server checks passed")


def check_hybrid_reuse(infer, shared, openai):
    """Prompt reuse on the hybrid families (../shared's synthetic models):
    a request leaves its state before the prompt's last token as the
    sequence's checkpoint, so the same prompt again has all but that token
    cached, and a prompt going on from the reply has at least as many; each
    reply is the one without reuse (cache_prompt false). The text is the
    synthetic vocabulary's, so only replies are compared."""
    names = ("synth-lfm2-f16", "synth-qwen35-f16", "synth-granitehybrid-f16")
    paths = [os.path.join(shared, "arch", n + ".gguf") for n in names] if shared else []
    if not paths or not all(os.path.exists(p) for p in paths):
        print("SKIPPED (in part): ../shared's hybrid models are absent: their prompt reuse not run")
        return
    p = "The quick brown fox jumps over the lazy dog while the cat sleeps in the warm sun. " * 2
    for name, path in zip(names, paths):
        srv = Server(infer, path, "--parallel", "1", "-c", "512")
        try:
            client = openai.OpenAI(base_url=srv.url + "/v1", api_key="none", max_retries=0, timeout=120)

            def ask(prompt, cache=True):
                r = client.completions.create(model="m", prompt=prompt, max_tokens=8, temperature=0,
                                              extra_body={"cache_prompt": cache})
                d = r.usage.prompt_tokens_details
                return r.choices[0].text, r.usage.prompt_tokens, (d.cached_tokens if d is not None else None)

            t1, n1, c1 = ask(p)
            t2, n2, c2 = ask(p)
            check(c1 == 0 and n2 == n1 and c2 == n1 - 1,
                  "%s: the same prompt again has all but one token cached (%s of %d)" % (name, c2, n1))
            check(t2 == t1, "%s: the repeated prompt's reply is the same" % name)
            q = p + t1 + " And then the dog wakes up."
            t3, n3, c3 = ask(q)
            check(c3 is not None and c3 >= n1 - 1,
                  "%s: the next prompt finds the last one cached (%s of %d; the last had %d)" % (name, c3, n3, n1))
            t4, _, c4 = ask(q, cache=False)
            check(c4 == 0 and t4 == t3, "%s: its reply is the one without reuse (%r, %r)" % (name, t3, t4))
        finally:
            srv.stop()


def check_basics(infer, model, srv, client, openai):
    code, text = curl(srv.url + "/health", key=None)
    check(code == 200 and json.loads(text)["status"] == "ok", "GET /health needs no key and says ok")
    models = client.models.list()
    check([m.id for m in models.data] == ["smollm"], "GET /v1/models lists the model under its alias")

    # Greedy chat: the same reply as `infer chat` gives the same message.
    question = "What is the capital of France?"
    r = client.chat.completions.create(model="smollm", messages=[{"role": "user", "content": question}],
                                       max_tokens=24, temperature=0)
    reply = r.choices[0].message.content
    want = cli(infer, "chat", "-m", model, "--temp", "0", "-n", "24", "-c", "512", stdin=question + "\n").strip()
    check(reply.strip() == want, "greedy chat equals infer chat's reply (%r)" % reply[:40])
    check(r.choices[0].message.role == "assistant" and r.object == "chat.completion", "chat reply shape")
    check(r.usage.completion_tokens <= 24 and r.usage.prompt_tokens > 5 and
          r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens, "chat usage adds up")
    check(r.choices[0].finish_reason == ("length" if r.usage.completion_tokens == 24 else "stop"),
          "finish_reason is length at max_tokens, else stop")

    # Streamed: the role first, then deltas that add up to the same text,
    # a finish_reason, and usage in a last chunk with no choices.
    stream = client.chat.completions.create(model="smollm", messages=[{"role": "user", "content": question}],
                                            max_tokens=24, temperature=0, stream=True,
                                            stream_options={"include_usage": True})
    chunks = list(stream)
    check(chunks[0].choices[0].delta.role == "assistant", "the first streamed chunk carries the role")
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    check(text == reply, "streamed deltas add up to the plain reply")
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    check(finishes == [r.choices[0].finish_reason], "one chunk has the finish_reason")
    check(chunks[-1].choices == [] and chunks[-1].usage is not None and
          chunks[-1].usage.completion_tokens == r.usage.completion_tokens, "usage comes in the last chunk")
    check(len(set(c.id for c in chunks)) == 1, "every chunk has the stream's id")
    code, raw = curl(srv.url + "/v1/chat/completions", "-N", body=json.dumps(
        {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4, "stream": True}))
    events = [e for e in raw.split("\n\n") if e]
    check(code == 200 and all(e.startswith("data: ") for e in events) and events[-1] == "data: [DONE]",
          "curl sees server-sent events ending in data: [DONE]")

    # Text completions: the same text as `infer run`.
    prompt = "Once upon a time"
    c = client.completions.create(model="smollm", prompt=prompt, max_tokens=12, temperature=0)
    want = cli(infer, "run", "-m", model, "-p", prompt, "-n", "12", "--temp", "0", "-c", "512")
    check(c.choices[0].text == want, "greedy completion equals infer run's (%r)" % c.choices[0].text[:40])
    c16 = client.completions.create(model="smollm", prompt=prompt, temperature=0)
    check(c16.usage.completion_tokens == 16, "a completion without max_tokens makes 16 tokens, the API's default")

    # Seeds: the same seed, the same sample; stop strings cut the text.
    a = [client.chat.completions.create(model="smollm", messages=[{"role": "user", "content": "Tell me a story"}],
                                        max_tokens=20, temperature=1.0, seed=42).choices[0].message.content
         for _ in range(2)]
    check(a[0] == a[1], "the same seed gives the same sampled reply")
    s = client.completions.create(model="smollm", prompt="1, 2, 3, 4,", max_tokens=20, temperature=0, stop=[","])
    check("," not in s.choices[0].text and s.choices[0].finish_reason == "stop", "a stop string ends the reply")

    # response_format: a JSON schema the reply follows.
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
              "required": ["name", "age"]}
    j = client.chat.completions.create(model="smollm", max_tokens=60, temperature=0.7, seed=3,
                                       messages=[{"role": "user", "content": "Describe a person as JSON."}],
                                       response_format={"type": "json_schema",
                                                        "json_schema": {"name": "person", "schema": schema}})
    try:
        obj = json.loads(j.choices[0].message.content)
        check(isinstance(obj.get("name"), str) and isinstance(obj.get("age"), int), "response_format follows the schema")
    except ValueError:
        check(False, "response_format gives JSON (got %r)" % j.choices[0].message.content)

    # Embeddings: base64 (the client's default) and float, unit length,
    # equal to `infer embed`'s.
    e = client.embeddings.create(model="smollm", input=["hello world", "the cat sat"])
    v = e.data[0].embedding
    check(len(e.data) == 2 and abs(math.sqrt(sum(x * x for x in v)) - 1) < 1e-3, "embeddings are unit vectors")
    cli_v = json.loads(cli(infer, "embed", "-m", model, "-p", "hello world"))["data"][0]["embedding"]
    check(len(v) == len(cli_v) and max(abs(x - y) for x, y in zip(v, cli_v)) < 1e-4, "embedding equals infer embed's")
    code, text = curl(srv.url + "/v1/embeddings", body=json.dumps({"input": "hello world", "encoding_format": "float"}))
    f = json.loads(text)["data"][0]["embedding"]
    check(code == 200 and max(abs(x - y) for x, y in zip(f, v)) < 1e-6, "float and base64 encodings agree")

    # max_tokens beyond the context is capped by it.
    big = client.completions.create(model="smollm", prompt="Count: 1 2 3", max_tokens=100000, temperature=0,
                                    logit_bias={str(t): -100 for t in EOG_IDS})
    check(big.usage.prompt_tokens + big.usage.completion_tokens == 512 and big.choices[0].finish_reason == "length",
          "max_tokens is capped by the context: the reply fills it and ends with length")


def check_concurrent(srv, client):
    """Six clients at once (more than the four sequences: two wait in the
    queue), every one answered; they overlapped in time."""
    results, spans = {}, {}

    def one(i):
        t0 = time.time()
        try:
            stream = client.chat.completions.create(
                model="smollm", messages=[{"role": "user", "content": "Write a poem about number %d" % i}],
                max_tokens=32, temperature=0.8, seed=i, stream=True, stream_options={"include_usage": True})
            chunks = list(stream)
            results[i] = ("".join(c.choices[0].delta.content or "" for c in chunks if c.choices), chunks[-1].usage)
        except Exception as ex:  # noqa: BLE001 - any failure is the finding
            results[i] = ex
        spans[i] = (t0, time.time())

    threads = [threading.Thread(target=one, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ok = [i for i, r in results.items() if isinstance(r, tuple) and r[0] and r[1].completion_tokens > 0]
    check(len(ok) == 6, "six concurrent streaming clients all answered (%s)" %
          [str(r)[:80] for r in results.values() if not isinstance(r, tuple)])
    overlap = sum(1 for i in spans for k in spans if i < k and spans[i][0] < spans[k][1] and spans[k][0] < spans[i][1])
    check(overlap >= 6, "the requests ran at the same time (%d overlapping pairs)" % overlap)


def check_bad_requests(srv, client, openai):
    chat = srv.url + "/v1/chat/completions"
    cases = [
        ("{not json", 400, "invalid_json", None, "malformed JSON"),
        ("[1, 2]", 400, "invalid_json", None, "a body that is not an object"),
        ('{"model": "x"}', 400, None, "messages", "no messages"),
        ('{"messages": []}', 400, None, "messages", "empty messages"),
        ('{"messages": [{"content": "hi"}]}', 400, None, "messages", "a message without a role"),
        ('{"messages": [{"role": "user", "content": "hi"}], "temperature": "hot"}', 400, None, "temperature",
         "a temperature that is not a number"),
        ('{"messages": [{"role": "user", "content": "hi"}], "max_tokens": -3}', 400, None, "max_tokens",
         "negative max_tokens"),
        ('{"messages": [{"role": "user", "content": "hi"}], "n": 5}', 400, None, "n", "n = 5 beyond --parallel 4"),
        ('{"messages": [{"role": "user", "content": "hi"}], "stream": "yes"}', 400, None, "stream",
         "stream that is not a boolean"),
        ('{"messages": [{"role": "user", "content": "hi"}], "stop": [1]}', 400, None, "stop", "a stop that is not text"),
        ('{"messages": [{"role": "user", "content": "hi"}], "logit_bias": {"999999": 1}}', 400, None, "logit_bias",
         "a logit_bias token outside the vocabulary"),
        ('{"messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "xml"}}', 400, None,
         "response_format", "an unknown response_format"),
        ('{"messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "json_schema", '
         '"json_schema": {"schema": {"type": "frobnicate"}}}}', 400, None, "response_format", "a schema it cannot read"),
        ('{"messages": [{"role": "user", "content": "hi"}], "speculative": 8}', 400, None, "speculative",
         "speculative that is not an object"),
        ('{"messages": [{"role": "user", "content": "hi"}], "speculative": {"draft": 1}}', 400, None, "speculative",
         "speculative with a field it does not take"),
        ('{"messages": [{"role": "user", "content": "hi"}], "speculative": {"lookup": 65}}', 400, None, "lookup",
         "a lookup beyond 64"),
        ('{"messages": [{"role": "user", "content": "hi"}], "speculative": {"draft_n": 2}}', 400, None, "draft_n",
         "a draft_n on a server without --draft"),
        ('{"messages": [{"role": "user", "content": "' + "word " * 600 + '"}]}', 400, "context_length_exceeded",
         "messages", "a prompt longer than the context"),
    ]
    for body, status, code, param, what in cases:
        got, text = curl(chat, body=body)
        check(got == status and openai_error(text, code=code, param=param), "400 with an error object: " + what)
    got, text = curl(srv.url + "/v1/completions", body='{"prompt": 5}')
    check(got == 400 and openai_error(text, param="prompt"), "400: a completion prompt that is not text")
    got, text = curl(srv.url + "/v1/embeddings", body='{"input": [[1, 2], 5]}')
    check(got == 400 and openai_error(text, param="input"), "400: embeddings of token lists mixed with a bare id")
    got, text = curl(srv.url + "/v1/nothing", body="{}")
    check(got == 404 and openai_error(text), "404 for an unknown path")
    got, text = curl(chat)
    check(got == 405 and openai_error(text), "405 for GET on a POST endpoint")
    got, text = curl(chat, body='{"messages": [{"role": "user", "content": "' + "x" * 70000 + '"}]}')
    check(got == 413 and openai_error(text), "413 for a body over --max-body")
    got, text = curl(chat, body='{"messages": [{"role": "user", "content": "hi"}]}', key=None)
    check(got == 401 and openai_error(text, code="invalid_api_key"), "401 without the API key")
    got, text = curl(chat, body='{"messages": [{"role": "user", "content": "hi"}]}', key="wrong")
    check(got == 401 and openai_error(text, code="invalid_api_key"), "401 with a wrong API key")
    got, text = curl(srv.url + "/v1/models", key="test-key-12")
    check(got == 401, "401 with a prefix of the key")
    bad = openai.OpenAI(base_url=srv.url + "/v1", api_key="wrong", max_retries=0)
    try:
        bad.models.list()
        check(False, "the openai client with a wrong key gets AuthenticationError")
    except openai.AuthenticationError:
        check(True, "the openai client with a wrong key gets AuthenticationError")
    try:
        client.chat.completions.create(model="smollm", messages=[{"role": "user", "content": "hi"}], n=9)
        check(False, "the openai client gets BadRequestError for n = 9 (beyond --parallel)")
    except openai.BadRequestError as ex:
        check(ex.status_code == 400 and "--parallel" in str(ex),
              "the openai client gets BadRequestError for n = 9 (beyond --parallel)")
    # The server still answers after all that.
    r = client.chat.completions.create(model="smollm", messages=[{"role": "user", "content": "hi"}], max_tokens=4)
    check(r.usage.completion_tokens >= 1, "the server answers normally after the bad requests")


def check_real_clients(infer, model, srv, client, openai):
    """What litellm, langchain-openai, instructor and the llm CLI send:
    token-id embeddings, dimensions, models.retrieve, roles; and a second
    server on a busy port."""
    version = cli(infer, "--version").strip()
    code, text = curl(srv.url + "/health", key=None)
    check(code == 200 and "infer " + json.loads(text).get("version", "?") + " (infer.h)" == version,
          "GET /health gives the version infer --version prints (%s)" % version)

    # GET /v1/models/{id}: the list's item, or OpenAI's 404
    m = client.models.retrieve("smollm")
    listed = client.models.list().data[0]
    check(m.id == "smollm" and m.object == "model" and m.model_dump() == listed.model_dump(),
          "models.retrieve gives the item GET /v1/models lists")
    try:
        client.models.retrieve("gpt-4o")
        check(False, "models.retrieve of another model: NotFoundError")
    except openai.NotFoundError as ex:
        check(ex.status_code == 404 and "gpt-4o" in str(ex), "models.retrieve of another model: NotFoundError")
    got, text = curl(srv.url + "/v1/models/gpt-4o")
    check(got == 404 and openai_error(text, code="model_not_found"), "404 model_not_found for an unknown model id")

    # embeddings of token ids (langchain's OpenAIEmbeddings sends them): the
    # text's own tokens embed as the text does
    ids = [int(t) for t in cli(infer, "tokenize", "-m", model, "-p", "hello world").split()]
    by_text = client.embeddings.create(model="smollm", input="hello world").data[0].embedding
    by_ids = client.embeddings.create(model="smollm", input=ids).data
    check(len(by_ids) == 1 and max(abs(x - y) for x, y in zip(by_ids[0].embedding, by_text)) < 1e-5,
          "a token list embeds as its text")
    two = client.embeddings.create(model="smollm", input=[ids, ids[:1]])
    check([d.index for d in two.data] == [0, 1] and two.usage.prompt_tokens == len(ids) + 1,
          "a list of token lists: one embedding each")
    for bad_input, what in (([[1, 49152]], "a token id past the vocabulary"), ([-1], "a negative token id"),
                            ([1.5], "a token id that is not an integer"), ([[]], "an empty token list")):
        try:
            client.embeddings.create(model="smollm", input=bad_input)
            check(False, "embeddings: 400 for " + what)
        except openai.BadRequestError as ex:
            check(ex.status_code == 400 and ex.body.get("param") == "input", "embeddings: 400 for " + what)
    d = client.embeddings.create(model="smollm", input="hi", dimensions=len(by_text))
    check(len(d.data[0].embedding) == len(by_text), "dimensions equal to the model's size is accepted")
    try:
        client.embeddings.create(model="smollm", input="hi", dimensions=64)
        check(False, "dimensions 64: BadRequestError naming it")
    except openai.BadRequestError as ex:
        check(ex.body.get("param") == "dimensions" and "dimensions" in str(ex), "dimensions 64: BadRequestError naming it")

    # roles: developer is system; an unknown one is refused, named
    r = client.chat.completions.create(model="smollm", max_tokens=2, messages=[
        {"role": "developer", "content": "Be brief."}, {"role": "user", "content": "hi"}])
    check(r.usage.completion_tokens >= 1, "the developer role is taken")
    try:
        client.chat.completions.create(model="smollm", max_tokens=2, messages=[{"role": "wizard", "content": "hi"}])
        check(False, "an unknown role: BadRequestError naming it")
    except openai.BadRequestError as ex:
        check(ex.body.get("param") == "messages" and "wizard" in str(ex), "an unknown role: BadRequestError naming it")

    # a second server on the same port: infer's one line, exit 1
    out = subprocess.run([infer, "serve", "-m", model, "--port", str(srv.port), "-t", "1"], capture_output=True,
                         text=True, timeout=120)
    check(out.returncode == 1 and out.stderr.count("\n") == 1 and str(srv.port) in out.stderr,
          "a busy port: exit 1 and one line (got %d: %r)" % (out.returncode, out.stderr))


def check_prompt_reuse(srv, client):
    """A conversation's second turn finds its first turn in a sequence's
    cache (usage.prompt_tokens_details.cached_tokens) and replies as
    without it (cache_prompt false, llama.cpp's field)."""
    def cached(usage):
        d = usage.prompt_tokens_details
        return d.cached_tokens if d is not None else None

    first = [{"role": "user", "content": "Name three colours of the rainbow."}]
    r1 = client.chat.completions.create(model="smollm", messages=first, max_tokens=32, temperature=0)
    second = first + [{"role": "assistant", "content": r1.choices[0].message.content},
                      {"role": "user", "content": "And two more?"}]
    r2 = client.chat.completions.create(model="smollm", messages=second, max_tokens=32, temperature=0)
    check(cached(r2.usage) is not None and cached(r2.usage) > r1.usage.prompt_tokens // 2,
          "the second turn reuses the first's cache (%s of %d prompt tokens)" % (cached(r2.usage), r2.usage.prompt_tokens))
    fresh = client.chat.completions.create(model="smollm", messages=second, max_tokens=32, temperature=0,
                                           extra_body={"cache_prompt": False})
    check(cached(fresh.usage) == 0, "cache_prompt false reuses nothing (%s)" % cached(fresh.usage))
    check(fresh.choices[0].message.content == r2.choices[0].message.content,
          "the reply with reuse equals the reply without (%r)" % r2.choices[0].message.content[:40])
    # streamed: cached_tokens in the usage chunk; the same prompt again has
    # all but its last token cached
    chunks = list(client.chat.completions.create(model="smollm", messages=second, max_tokens=32, temperature=0,
                                                 stream=True, stream_options={"include_usage": True}))
    u = chunks[-1].usage
    check(u is not None and cached(u) == u.prompt_tokens - 1,
          "a repeated prompt streams usage with all but one token cached (%s)" % (u and cached(u)))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    check(text == r2.choices[0].message.content, "the streamed reply with reuse is the same")
    # text completions: the field too
    p = "The quick brown fox jumps over the lazy dog. " * 4
    c1 = client.completions.create(model="smollm", prompt=p, max_tokens=8, temperature=0)
    c2 = client.completions.create(model="smollm", prompt=p + c1.choices[0].text, max_tokens=8, temperature=0)
    check(cached(c2.usage) is not None and cached(c2.usage) >= c1.usage.prompt_tokens - 1,
          "a completion extending the last reuses its prompt (%s of %d)" % (cached(c2.usage), c2.usage.prompt_tokens))


def check_speculative(srv):
    """A request's "speculative": {"lookup": N}: the same greedy reply as
    without, its drafts counted in the timings (a paragraph to rewrite, so
    some are accepted)."""
    para = ("The old lighthouse stood at the edge of the cliff for more then two hundred years. Every night the "
            "keeper climbed the narrow stairs, lit the great lamp and watched the ships pass safely.")
    msgs = [{"role": "user", "content": "Rewrite this paragraph with small changes:\n\n" + para}]
    replies = []
    for extra in ({}, {"speculative": {"lookup": 8}}):
        body = dict(messages=msgs, max_tokens=40, temperature=0, **extra)
        got, text = curl(srv.url + "/v1/chat/completions", body=json.dumps(body))
        check(got == 200, "a chat with %s answers" % (extra or "no speculation"))
        replies.append(json.loads(text) if got == 200 else {})
    plain, spec = replies
    content = [r.get("choices", [{}])[0].get("message", {}).get("content") for r in replies]
    check(content[0] is not None and content[0] == content[1],
          "speculative lookup keeps the greedy reply (%r)" % (content[0] or "")[:40])
    t = spec.get("timings", {})
    check(t.get("draft_n", 0) > 0 and 0 < t.get("draft_n_accepted", 0) <= t["draft_n"],
          "the timings count drafted and accepted tokens (%s of %s)" % (t.get("draft_n_accepted"), t.get("draft_n")))
    check("draft_n" not in plain.get("timings", {}), "no draft counts without speculation")


def check_draft_model(infer, model):
    """--draft: bench/make_model.py's test-draft and test-target (one
    synthetic vocabulary, random weights): greedy replies the same with the
    draft and without (draft_n 0), two at once on two sequences too, the
    drafts counted in the timings; a bad draft_n is a 400; a draft model of
    another vocabulary (SmolLM2's) stops the server at start, in one line."""
    import tempfile
    make = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench", "make_model.py")
    with tempfile.TemporaryDirectory() as tmp:
        draft, target = os.path.join(tmp, "draft.gguf"), os.path.join(tmp, "target.gguf")
        made = [subprocess.run([sys.executable, make, shape, "f32", "--seed", seed, "-o", path], capture_output=True,
                               timeout=120).returncode == 0
                for shape, seed, path in (("test-draft", "1", draft), ("test-target", "2", target))]
        if not all(made):
            print("skip --draft checks: bench/make_model.py needs numpy and gguf")
            return
        out = subprocess.run([infer, "serve", "-m", target, "--port", "0", "--draft", model], capture_output=True,
                             text=True, timeout=120)
        check(out.returncode == 1 and out.stderr.count("\n") == 1 and "vocabulary" in out.stderr,
              "a draft model of another vocabulary stops the server at start, in one line (%r)" % out.stderr)
        srv = Server(infer, target, "--draft", draft, "--draft-n", "4", "--parallel", "2", "-c", "256")
        try:
            check("draft model" in srv.text(), "the server names its draft model")
            url = srv.url + "/v1/completions"

            def complete(prompt, spec, out, i):
                body = {"prompt": prompt, "max_tokens": 32, "temperature": 0}
                if spec is not None:
                    body["speculative"] = spec
                got, text = curl(url, body=json.dumps(body), key=None)
                out[i] = json.loads(text) if got == 200 else {}

            prompts = ["hello world the quick", "once upon a time there"]
            plain, drafted = [None, None], [None, None]
            for i, p in enumerate(prompts):
                complete(p, {"draft_n": 0}, plain, i)
            # the two drafted replies at once: each on its sequence of both contexts
            ts = [threading.Thread(target=complete, args=(p, None, drafted, i)) for i, p in enumerate(prompts)]
            for t in ts:
                t.start()
            for t in ts:
                t.join(timeout=120)
            text = [[(r or {}).get("choices", [{}])[0].get("text") for r in rs] for rs in (plain, drafted)]
            check(text[0][0] is not None and text[0] == text[1],
                  "the draft model keeps greedy replies, two at once (%r)" % (text[0][0] or "")[:24])
            t = [(r or {}).get("timings", {}) for r in drafted]
            check(all(x.get("draft_n", 0) > 0 and 0 <= x.get("draft_n_accepted", -1) <= x["draft_n"] for x in t),
                  "the timings count the draft model's tokens (%s)" % [(x.get("draft_n_accepted"), x.get("draft_n"))
                                                                        for x in t])
            check("draft_n" not in (plain[0] or {}).get("timings", {"draft_n": 1}),
                  "draft_n 0: no draft for that request")
            got, text = curl(url, body='{"prompt": "hi", "speculative": {"draft_n": 65}}', key=None)
            check(got == 400 and openai_error(text, param="draft_n"), "400 for a draft_n beyond 64")
        finally:
            srv.stop()


def check_queue_and_disconnect(srv, openai):
    client = openai.OpenAI(base_url=srv.url + "/v1", api_key="none", max_retries=0, timeout=300)
    long_req = {"model": "m", "messages": [{"role": "user", "content": "Write a very long essay about the sea."}],
                "max_tokens": 1500, "temperature": 1.0, "stream": True,
                "logit_bias": {str(t): -100 for t in EOG_IDS}}

    # The client that disconnects: reads a few events, then closes.
    sock = socket.create_connection(("127.0.0.1", srv.port))
    body = json.dumps(long_req).encode()
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    got = b""
    while got.count(b"data: ") < 4:
        part = sock.recv(4096)
        if not part:
            break
        got += part
    check(got.startswith(b"HTTP/1.1 200") and got.count(b"data: ") >= 4, "a long stream starts")
    health = json.loads(curl(srv.url + "/health", key=None)[1])
    check(health["slots_processing"] == 1, "its sequence is busy while it streams")

    # Meanwhile one more waits in the queue and a third gets 503.
    waiting = {}

    def wait_one():
        try:
            waiting["r"] = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}],
                                                          max_tokens=4)
        except Exception as ex:  # noqa: BLE001
            waiting["r"] = ex

    t = threading.Thread(target=wait_one)
    t.start()
    deadline = time.time() + 10
    while time.time() < deadline and json.loads(curl(srv.url + "/health", key=None)[1])["requests_waiting"] < 1:
        time.sleep(0.05)
    try:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=4)
        check(False, "the full queue answers 503")
    except openai.APIStatusError as ex:
        check(ex.status_code == 503, "the full queue answers 503 (got %d)" % ex.status_code)

    t_close = time.time()
    sock.close()
    t.join(timeout=60)
    r = waiting.get("r")
    check(not isinstance(r, Exception) and r is not None and r.usage.completion_tokens >= 1 and
          time.time() - t_close < 5, "closing the stream cancels it: the queued request runs at once")
    health = json.loads(curl(srv.url + "/health", key=None)[1])
    check(health["slots_processing"] == 0 and health["requests_waiting"] == 0, "the sequence is free again")

    # A client waiting for a whole (not streamed) reply that leaves.
    plain = dict(long_req, stream=False)
    body = json.dumps(plain).encode()
    sock = socket.create_connection(("127.0.0.1", srv.port))
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    deadline = time.time() + 10
    while time.time() < deadline and json.loads(curl(srv.url + "/health", key=None)[1])["slots_processing"] < 1:
        time.sleep(0.05)
    time.sleep(0.3)
    sock.close()
    deadline = time.time() + 5
    while time.time() < deadline and json.loads(curl(srv.url + "/health", key=None)[1])["slots_processing"] > 0:
        time.sleep(0.05)
    check(json.loads(curl(srv.url + "/health", key=None)[1])["slots_processing"] == 0,
          "a client that leaves before a plain reply frees its sequence within 5 s")



def check_chat_template_file(infer, model, openai):
    """--chat-template-file: chats go through that Jinja text, with
    chat_template_kwargs as its variables and its raise_exception as a 400;
    one that cannot render a plain chat stops the server at start."""
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "t.jinja")
        with open(path, "w") as f:
            f.write("{% if messages|length > 2 %}{{ raise_exception('Only one question, please.') }}{% endif %}"
                    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
                    "{% if note is defined %}<|im_start|>system\n{{ note }}<|im_end|>\n{% endif %}"
                    "<|im_start|>assistant\n")
        srv = Server(infer, model, "--chat-template-file", path, "-c", "512")
        try:
            check("chat template " + path in srv.text(), "the server names its --chat-template-file")
            client = openai.OpenAI(base_url=srv.url + "/v1", api_key="none", max_retries=0, timeout=300)
            msgs = [{"role": "user", "content": "Name a colour."}]
            plain = client.chat.completions.create(model="m", max_tokens=1, temperature=0, messages=msgs)
            noted = client.chat.completions.create(model="m", max_tokens=1, temperature=0, messages=msgs,
                                                   extra_body={"chat_template_kwargs": {"note": "Answer in French."}})
            # the template's text: user turn, then the assistant prompt (the
            # template's one final newline dropped, as jinja2 does)
            check(plain.usage.prompt_tokens == len(cli_tokens(infer, model, "<|im_start|>user\nName a colour."
                                                              "<|im_end|>\n<|im_start|>assistant")),
                  "a chat's prompt is what --chat-template-file renders (%d tokens)" % plain.usage.prompt_tokens)
            check(noted.usage.prompt_tokens > plain.usage.prompt_tokens,
                  "chat_template_kwargs reach the template (%d tokens against %d)" %
                  (noted.usage.prompt_tokens, plain.usage.prompt_tokens))
            try:
                client.chat.completions.create(model="m", max_tokens=1, messages=msgs * 3)
                check(False, "the template's raise_exception is a 400 with its message")
            except openai.BadRequestError as ex:
                check("Only one question, please." in str(ex), "the template's raise_exception is a 400 with its message")
        finally:
            srv.stop()
        with open(path, "w") as f:
            f.write("{{ raise_exception('never') }}")
        out = subprocess.run([infer, "serve", "-m", model, "--port", "0", "--chat-template-file", path],
                             capture_output=True, text=True, timeout=120)
        check(out.returncode == 1 and out.stderr.count("\n") == 1 and "never" in out.stderr,
              "a template that cannot render a chat stops the server at start, in one line (%r)" % out.stderr)


def check_harmony_template(infer, model, openai):
    """A harmony template (gpt-oss's channels): the server reads replies as
    harmony, and a chat's reasoning_effort reaches the template as the
    variable reasoning_effort (here raised back as the template's 400);
    one not low, medium or high is a 400 naming it."""
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "harmony.jinja")
        with open(path, "w") as f:
            f.write("{% if reasoning_effort is defined %}{{ raise_exception('Reasoning: ' + reasoning_effort) }}"
                    "{% endif %}{% for m in messages %}{% if m.thinking is defined %}"
                    "{{ raise_exception('Thinking: ' + m.thinking) }}{% endif %}<|start|>{{ m.role }}"
                    "{% if m.role == 'assistant' %}<|channel|>final{% endif %}<|message|>{{ m.content }}<|end|>"
                    "{% endfor %}{% if add_generation_prompt %}<|start|>assistant{% endif %}")
        srv = Server(infer, model, "--chat-template-file", path, "-c", "512")
        try:
            check("tools harmony" in srv.text(), "a harmony template's replies are read as harmony (the server says so)")
            client = openai.OpenAI(base_url=srv.url + "/v1", api_key="none", max_retries=0, timeout=300)
            msgs = [{"role": "user", "content": "Name a colour."}]
            r = client.chat.completions.create(model="m", max_tokens=8, temperature=0, messages=msgs)
            check(r.choices[0].message.content, "a reply without harmony's headers is content (%r)" %
                  r.choices[0].message.content)
            # a forced call in harmony's form, read back as a call (the
            # grammar spells its tokens where the vocabulary has none); a
            # model that reasons first may run out of tokens, not go wrong
            add = {"type": "function", "function": {"name": "add", "parameters": {
                "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"], "additionalProperties": False}}}
            r = client.chat.completions.create(model="m", max_tokens=300, temperature=0, messages=msgs, tools=[add],
                                               tool_choice="required")
            calls = r.choices[0].message.tool_calls or []
            ok = r.choices[0].finish_reason == "length" and not calls
            if calls:
                args = json.loads(calls[0].function.arguments)
                ok = r.choices[0].finish_reason == "tool_calls" and calls[0].function.name == "add" and \
                    sorted(args) == ["a", "b"] and all(isinstance(v, int) for v in args.values())
            check(ok, "a forced call in a harmony template's form is read back as that call (%s, %s)" %
                  (r.choices[0].finish_reason, [(c.function.name, c.function.arguments) for c in calls]))
            # an earlier call's reasoning_content is the template's thinking
            called = [{"role": "user", "content": "Add 1 and 2."},
                      {"role": "assistant", "content": None, "reasoning_content": "Use add.",
                       "tool_calls": [{"id": "call_1", "type": "function",
                                       "function": {"name": "add", "arguments": "{\"a\": 1, \"b\": 2}"}}]},
                      {"role": "tool", "tool_call_id": "call_1", "content": "3"}]
            try:
                client.chat.completions.create(model="m", max_tokens=1, messages=called, tools=[add])
                check(False, "an earlier call's reasoning_content reaches a harmony template as thinking")
            except openai.BadRequestError as ex:
                check("Thinking: Use add." in str(ex), "an earlier call's reasoning_content reaches a harmony template "
                      "as thinking (%s)" % ex)
            for effort in ("low", "high"):
                try:
                    client.chat.completions.create(model="m", max_tokens=1, messages=msgs, reasoning_effort=effort)
                    check(False, "reasoning_effort %s reaches the template" % effort)
                except openai.BadRequestError as ex:
                    check("Reasoning: " + effort in str(ex), "reasoning_effort %s reaches the template (%s)" % (effort, ex))
            try:
                client.chat.completions.create(model="m", max_tokens=1, messages=msgs,
                                               extra_body={"reasoning_effort": "extreme"})
                check(False, "a reasoning_effort not low, medium or high is a 400")
            except openai.BadRequestError as ex:
                body = ex.body if isinstance(ex.body, dict) else {}
                check(body.get("param") == "reasoning_effort", "a reasoning_effort not low, medium or high is a 400 "
                      "naming it (%s)" % body.get("param"))
        finally:
            srv.stop()


def check_gemma4_template(infer, model, shared, openai):
    """Gemma 4's own template (../shared's): the server reads replies as
    gemma4; a forced call with nested arguments is written in Gemma's
    syntax (its grammar) and read back as JSON that fits the schema,
    streamed deltas adding up to the whole reply's; thinking asked for
    (enable_thinking) reaches the template."""
    path = os.path.join(shared, "templates", "google-gemma-4-31B-it.jinja")
    if not os.path.exists(path):
        print("skipped: %s is absent" % path)
        return
    srv = Server(infer, model, "--chat-template-file", path, "-c", "2048")
    try:
        check("tools gemma4" in srv.text(), "a Gemma 4 template's replies are read as gemma4 (the server says so)")
        client = openai.OpenAI(base_url=srv.url + "/v1", api_key="none", max_retries=0, timeout=300)
        msgs = [{"role": "user", "content": "Book a table for Ann."}]
        book = {"type": "function", "function": {"name": "book", "parameters": {"type": "object", "properties": {
            "guests": {"type": "array", "items": {"type": "object", "properties": {
                "name": {"type": "string", "enum": ["Ann", "Bo"]}, "age": {"type": "integer"}},
                "required": ["name", "age"]}},
            "late": {"type": "boolean"}}, "required": ["guests", "late"]}}}
        for choice in ("required", {"type": "function", "function": {"name": "book"}}):
            r = client.chat.completions.create(model="m", max_tokens=200, temperature=0, messages=msgs, tools=[book],
                                               tool_choice=choice)
            calls = r.choices[0].message.tool_calls or []
            ok = r.choices[0].finish_reason == "length" and not calls  # a model still thinking
            whole = None
            if calls:
                whole = calls[0].function.arguments
                args = json.loads(whole)
                ok = r.choices[0].finish_reason == "tool_calls" and calls[0].function.name == "book" and \
                    sorted(args) == ["guests", "late"] and isinstance(args["late"], bool) and \
                    all(sorted(g) == ["age", "name"] and g["name"] in ("Ann", "Bo") and isinstance(g["age"], int)
                        for g in args["guests"])
            check(ok, "a forced call in Gemma 4's syntax is read back as JSON fitting the schema (%s, %s)" %
                  (r.choices[0].finish_reason, whole))
            streamed = ""
            for chunk in client.chat.completions.create(model="m", max_tokens=200, temperature=0, messages=msgs,
                                                        tools=[book], tool_choice=choice, stream=True):
                for c in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
                    streamed += (c.function.arguments or "") if c.function else ""
            if whole is not None:
                check(streamed == whole, "a streamed Gemma 4 call's deltas add up to the whole (%r, %r)" %
                      (streamed, whole))
        r = client.chat.completions.create(model="m", max_tokens=1, messages=msgs,
                                           extra_body={"chat_template_kwargs": {"enable_thinking": True}})
        plain = client.chat.completions.create(model="m", max_tokens=1, messages=msgs)
        check(r.usage.prompt_tokens != plain.usage.prompt_tokens,
              "enable_thinking reaches Gemma 4's template (%d vs %d prompt tokens)" %
              (r.usage.prompt_tokens, plain.usage.prompt_tokens))
    finally:
        srv.stop()


def cli_tokens(infer, model, text):
    """text's tokens, special tokens parsed, as infer tokenize gives them."""
    out = subprocess.run([infer, "tokenize", "-m", model, "-p", text, "--special"], capture_output=True, text=True,
                         timeout=120)
    return out.stdout.split()


if __name__ == "__main__":
    main()

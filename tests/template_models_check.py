#!/usr/bin/env python3
"""Every model's own chat template, run by infer.h's Jinja interpreter
(`infer template -m MODEL --conversation FILE`), against jinja2's rendering
of the same template under ../shared/templates/README.md's rules, for every
conversation of ../shared/templates/conversations.json: byte for byte, or
both fail.

Models: ../shared/models/*.gguf, ../shared/arch/*.gguf and the project's
models/*.gguf (SmolLM2, Gemma 3 270M where fetched). A model without a
tokenizer.chat_template has nothing of its own to render and is listed as
such. Exits 77 (CTest's skip) without ../shared, or jinja2.

    usage: template_models_check.py INFER_CLI SOURCE_DIR SHARED_DIR
"""
import datetime
import glob
import json
import os
import subprocess
import sys
import tempfile


def skip(why):
    print("SKIPPED: " + why)
    sys.exit(77)


def gguf_chat_fields(path):
    """(chat template or None, BOS text, EOS text) from a GGUF file's
    metadata, read directly: the gguf package's reader parses every tensor
    and takes minutes on a 262k-token vocabulary."""
    import struct
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
    with open(path, "rb") as f:
        data = f.read(64 << 20)  # the metadata comes first; a vocabulary fits
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from("<" + fmt, data, pos)
        pos += struct.calcsize("<" + fmt)
        return v[0]

    def string():
        nonlocal pos
        n = take("Q")
        s = data[pos:pos + n]
        pos += n
        return s

    def value(t, keep):
        nonlocal pos
        if t == 8:
            return string()
        if t == 9:
            et, n = take("I"), take("Q")
            if et == 8:
                out = []
                for _ in range(n):
                    s = string()
                    if keep:
                        out.append(s)
                return out
            pos += sizes[et] * n
            return None
        v = struct.unpack_from("<" + {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "B", 10: "Q",
                                      11: "q", 12: "d"}[t], data, pos)[0]
        pos += sizes[t]
        return v

    if data[:4] != b"GGUF":
        raise ValueError("%s: not a GGUF file" % path)
    pos = 4
    take("I")
    take("Q")
    n_kv = take("Q")
    kv = {}
    for _ in range(n_kv):
        key = string().decode("utf-8")
        t = take("I")
        kv[key] = value(t, key == "tokenizer.ggml.tokens")
    tokens = kv.get("tokenizer.ggml.tokens") or []

    def token_text(key):
        i = kv.get(key)
        return tokens[i].decode("utf-8", "replace") if i is not None and i < len(tokens) else ""

    template = kv.get("tokenizer.chat_template")
    return (template.decode("utf-8") if template is not None else None,
            token_text("tokenizer.ggml.bos_token_id"), token_text("tokenizer.ggml.eos_token_id"))


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    cli, src, shared = sys.argv[1:]
    conv_path = os.path.join(shared, "templates", "conversations.json")
    if not os.path.exists(conv_path):
        skip("no %s (../shared)" % conv_path)
    try:
        import jinja2
        import jinja2.ext
        import jinja2.sandbox
    except ImportError as e:
        skip("a Python package is missing (%s): sh scripts/deps.sh installs it" % e)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def raise_exception(msg):
        raise jinja2.exceptions.TemplateError(msg)

    def strftime_now(fmt):
        return datetime.datetime(2026, 11, 25).strftime(fmt)

    class Generation(jinja2.ext.Extension):
        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

        def _render(self, caller):
            return caller()

    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols, Generation])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now

    with open(conv_path, encoding="utf-8") as f:
        conversations = json.load(f)
    models = sorted(glob.glob(os.path.join(shared, "models", "*.gguf")) +
                    glob.glob(os.path.join(shared, "arch", "*.gguf")) +
                    glob.glob(os.path.join(src, "models", "*.gguf")))
    checked, failures, without = 0, [], []
    with tempfile.TemporaryDirectory() as tmp:
        for model in models:
            name = os.path.basename(model)
            text, bos, eos = gguf_chat_fields(model)
            if text is None:
                without.append(name)
                continue
            template = env.from_string(text)
            for conv in conversations:
                variables = {"messages": conv["messages"], "add_generation_prompt": conv["add_generation_prompt"],
                             "bos_token": bos, "eos_token": eos}
                if "tools" in conv:
                    variables["tools"] = conv["tools"]
                variables.update(conv.get("kwargs", {}))
                try:
                    want, want_error = template.render(**variables), None
                except Exception as e:  # jinja2's own errors and Python's alike
                    want, want_error = None, "%s: %s" % (type(e).__name__, e)
                path = os.path.join(tmp, "conversation.json")
                inputs = {"messages": conv["messages"], "add_generation_prompt": conv["add_generation_prompt"],
                          "bos_token": bos, "eos_token": eos, "kwargs": conv.get("kwargs", {})}
                if "tools" in conv:
                    inputs["tools"] = conv["tools"]
                with open(path, "w", encoding="utf-8") as f:
                    json.dump(inputs, f, ensure_ascii=False)
                run = subprocess.run([cli, "template", "-m", model, "--conversation", path],
                                     capture_output=True, timeout=60)
                checked += 1
                what = "%s / %s" % (name, conv["id"])
                if want_error is not None:
                    if run.returncode != 1 or run.stdout or len(run.stderr.decode().strip().splitlines()) != 1:
                        failures.append("%s: jinja2 raises (%s); infer exited %d with %r" %
                                        (what, want_error, run.returncode, run.stderr[:200]))
                elif run.returncode != 0 or run.stdout != want.encode("utf-8"):
                    failures.append("%s: exit %d, %d bytes against jinja2's %d; stderr %r" %
                                    (what, run.returncode, len(run.stdout), len(want.encode("utf-8")),
                                     run.stderr[:200]))
    print("models without a chat template of their own (nothing to compare): %s" % (", ".join(without) or "none"))
    for line in failures:
        print("FAIL " + line)
    print("%d renderings of %d model templates checked against jinja2, %d differ" %
          (checked, len(models) - len(without), len(failures)))
    if checked == 0:
        skip("no model here has a chat template (python3 scripts/fetch_model.py fetches SmolLM2)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()

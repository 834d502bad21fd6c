#!/usr/bin/env python3
"""Builds a harness's seed corpus in a fresh directory:

    make_seeds.py HARNESS OUTDIR SOURCE_DIR SHARED_DIR

from the repository's tests/fuzz/seeds/ (grammars, schemas, request
bodies, chat template snippets), tiny models written by tiny_gguf.py, and
../shared (models, vocabularies and their test texts, the bad files, the
chat templates GGUF files carry), read where it is and never copied into
the repository. Each harness's input layout (a leading selector byte, NUL
separated fields) is written here as the harness reads it."""
import glob
import os
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# A mutated file longer than this is slow to fuzz: big files give their
# header and key-value section (the part a parser reads first).
GGUF_PREFIX = 64 * 1024
TOKENIZER_VOCABS = ['llama-spm', 'phi-3', 'gpt-2', 'llama-bpe', 'qwen2', 'deepseek-coder', 'mpt']  # tokenizer.c's order
CHAT_NAMES = ['chatml', 'llama2', 'mistral', 'mistral-v1', 'mistral-v3', 'mistral-v3-tekken', 'mistral-v7', 'llama3',
              'gemma', 'phi3', 'zephyr', 'deepseek', 'deepseek2', 'deepseek3', 'llama3.1', 'qwen3', 'phi4',
              'phi4-mini', 'smollm3', 'mistral-v7-tekken', 'gemma4']


def write(out, name, data):
    with open(os.path.join(out, name), 'wb') as f:
        f.write(data)


def head(path, n):
    with open(path, 'rb') as f:
        return f.read(n)


def chat_template_of(path):
    """tokenizer.chat_template of a GGUF file, or None (a small reader of
    the key-value section)."""
    data = head(path, 16 << 20)
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
    try:
        if data[:4] != b'GGUF' or struct.unpack_from('<I', data, 4)[0] < 2:
            return None
        n_kv = struct.unpack_from('<Q', data, 16)[0]
        pos = 24

        def string(pos):
            n = struct.unpack_from('<Q', data, pos)[0]
            return data[pos + 8:pos + 8 + n], pos + 8 + n

        def skip(t, pos):
            if t == 8:
                return string(pos)[1]
            if t == 9:
                at, n = struct.unpack_from('<IQ', data, pos)
                pos += 12
                if at == 8:
                    for _ in range(n):
                        pos = string(pos)[1]
                    return pos
                return pos + sizes[at] * n
            return pos + sizes[t]

        for _ in range(n_kv):
            key, pos = string(pos)
            t = struct.unpack_from('<I', data, pos)[0]
            pos += 4
            if key == b'tokenizer.chat_template' and t == 8:
                return string(pos)[0]
            pos = skip(t, pos)
    except (struct.error, KeyError):
        pass
    return None


def chat_input(template, flags=0):
    conv = [b'system', b'Be brief.', b'user', b'Hello!', b'assistant', b'Hi. <think>x</think>How can I help?',
            b'user', b'Tell me a story.']
    return bytes([flags]) + b'\0'.join([template, b'<s>', b'</s>'] + conv)


def main():
    harness, out, source, shared = sys.argv[1:5]
    os.makedirs(out, exist_ok=True)
    seeds = os.path.join(HERE, 'seeds')
    have_shared = os.path.isdir(shared)
    models = glob.glob(os.path.join(source, 'models', '*.gguf'))
    if have_shared:
        models += sorted(glob.glob(os.path.join(shared, '*', '*.gguf')))
    if harness in ('gguf', 'model_load'):
        subprocess.check_call([sys.executable, os.path.join(HERE, 'tiny_gguf.py'), out])
    if harness == 'gguf':
        for path in models:
            if os.path.getsize(path) < (64 << 20):
                write(out, os.path.basename(path), head(path, GGUF_PREFIX))
    elif harness == 'model_load':
        pass  # the tiny models above: whole files that load and decode
    elif harness == 'tokenizer':
        for i, name in enumerate(TOKENIZER_VOCABS):
            inp = os.path.join(shared, 'tokenizer', 'ggml-vocab-%s.gguf.inp' % name)
            if not os.path.exists(inp):
                continue
            texts = open(inp, 'rb').read().split(b'\n__ggml_vocab_test__\n')
            for k, text in enumerate(texts):
                # alternate the flags: add BOS (bit 6), parse special tokens (bit 7)
                write(out, '%s-%02d' % (name, k), bytes([i | (k % 4) << 6]) + text)
    elif harness == 'chat_template':
        for i, name in enumerate(CHAT_NAMES):
            write(out, 'name-' + name, chat_input(name.encode(), i % 8))
        for path in sorted(glob.glob(os.path.join(seeds, 'chat', '*.txt'))):
            write(out, 'snippet-' + os.path.basename(path), chat_input(open(path, 'rb').read(), 1))
        for path in models:
            t = chat_template_of(path)
            if t:
                write(out, 'template-' + os.path.basename(path), chat_input(t, 1))
    elif harness == 'grammar':
        for path in sorted(glob.glob(os.path.join(seeds, 'grammar', '*'))):
            write(out, os.path.basename(path), bytes([1 if path.endswith('.json') else 0]) + open(path, 'rb').read())
    elif harness == 'toolcall':
        # seeds/toolcall/fFrR-name.txt: a reply of tool format F (infer_tool_format) with reasoning mode R
        for path in sorted(glob.glob(os.path.join(seeds, 'toolcall', '*.txt'))):
            name = os.path.basename(path)
            f, r = int(name[1:name.index('r')]), int(name[name.index('r') + 1])
            write(out, name, bytes([f | r << 4, 5]) + open(path, 'rb').read())
    elif harness == 'serve_request':
        for path in sorted(glob.glob(os.path.join(seeds, 'serve', '*.json'))):
            body = open(path, 'rb').read()
            chat = 1 if os.path.basename(path).startswith('chat') else 0
            for kind in (0, 7, 15):  # chatml, llama3, qwen3
                write(out, '%s-%d' % (os.path.basename(path), kind), bytes([chat | kind << 1]) + body)
    elif harness == 'jinja':
        # a template, a NUL, the context's JSON: the repository's snippets, and
        # ../shared's chat templates with each conversation of its corpus
        for path in sorted(glob.glob(os.path.join(seeds, 'jinja', '*.jinja'))):
            ctx = path[:-len('.jinja')] + '.json'
            ctx = open(ctx, 'rb').read() if os.path.exists(ctx) else b'{}'
            write(out, os.path.basename(path), open(path, 'rb').read() + b'\0' + ctx)
        templates = sorted(glob.glob(os.path.join(shared, 'templates', '*.jinja')))
        convs_path = os.path.join(shared, 'templates', 'conversations.json')
        if templates and os.path.exists(convs_path):
            import json
            convs = json.load(open(convs_path, encoding='utf-8'))
            for i, path in enumerate(templates):
                c = convs[i % len(convs)]
                ctx = {'messages': c['messages'], 'add_generation_prompt': c['add_generation_prompt'],
                       'bos_token': '<s>', 'eos_token': '</s>'}
                if 'tools' in c:
                    ctx['tools'] = c['tools']
                ctx.update(c.get('kwargs', {}))
                write(out, 'template-' + os.path.basename(path),
                      open(path, 'rb').read() + b'\0' + json.dumps(ctx).encode())
    elif harness == 'state':
        pass  # saved states: the harness writes them (INFER_FUZZ_STATE_SEEDS, run_fuzz.sh)
    else:
        sys.exit('make_seeds.py: no harness %s' % harness)


if __name__ == '__main__':
    main()

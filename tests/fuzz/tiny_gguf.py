#!/usr/bin/env python3
"""Writes tiny GGUF files into a directory, as fuzzing seeds: whole models
of a few kilobytes (so that a mutated copy still loads and decodes, and a
fuzzer's mutations land on the header rather than on megabytes of
weights) and vocabulary-only files of each tokenizer kind.

    tiny_gguf.py OUTDIR

Only the standard library: the format is written here by hand (GGUF v3)."""
import os
import random
import struct
import sys

U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
T_F32, T_F16, T_Q8_0 = 0, 1, 8
ALIGN = 32


def gstr(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack('<Q', len(b)) + b


def kv(key, vtype, value, arr_type=None):
    out = gstr(key) + struct.pack('<I', vtype)
    if vtype == ARR:
        out += struct.pack('<IQ', arr_type, len(value))
        for v in value:
            out += scalar(arr_type, v)
    else:
        out += scalar(vtype, value)
    return out


def scalar(t, v):
    if t == STR:
        return gstr(v)
    fmt = {U8: 'B', I8: 'b', U16: 'H', I16: 'h', U32: 'I', I32: 'i', F32: 'f', BOOL: '?', U64: 'Q', I64: 'q',
           F64: 'd'}[t]
    return struct.pack('<' + fmt, v)


def tensor_bytes(ttype, values):
    if ttype == T_F32:
        return struct.pack('<%df' % len(values), *values)
    if ttype == T_F16:
        return struct.pack('<%de' % len(values), *values)
    # Q8_0: blocks of 32 values, an f16 scale then 32 int8
    out = b''
    for i in range(0, len(values), 32):
        block = values[i:i + 32]
        amax = max(abs(v) for v in block) or 1.0
        d = amax / 127
        out += struct.pack('<e', d) + struct.pack('<32b', *[max(-127, min(127, round(v / d))) for v in block])
    return out


def write_gguf(path, kvs, tensors, vocab_only=False):
    """tensors: (name, ne list, type, values)."""
    head = b'GGUF' + struct.pack('<IQQ', 3, len(tensors), len(kvs)) + b''.join(kvs)
    infos, datas, offset = b'', [], 0
    for name, ne, ttype, values in tensors:
        data = tensor_bytes(ttype, values)
        infos += gstr(name) + struct.pack('<I', len(ne)) + b''.join(struct.pack('<Q', n) for n in ne)
        infos += struct.pack('<IQ', ttype, offset)
        pad = (-len(data)) % ALIGN
        datas.append(data + b'\0' * pad)
        offset += len(data) + pad
    body = head + infos
    if not vocab_only:
        body += b'\0' * ((-len(body)) % ALIGN) + b''.join(datas)
    with open(path, 'wb') as f:
        f.write(body)


def spm_vocab():
    pieces = ['<unk>', '<s>', '</s>', '<0x0A>', '<0x41>', '\u2581', 'a', 'b', 'c', 'e', 'h', 'l', 'o', '\u2581a',
              '\u2581the', 'he', 'll', 'hello', '\u2581hello', '.', ',', '!']
    types = [2, 3, 3, 6, 6] + [1] * (len(pieces) - 5)
    scores = [0.0] * 5 + [-float(i) for i in range(len(pieces) - 5)]
    return [kv('tokenizer.ggml.model', STR, 'llama'), kv('tokenizer.ggml.tokens', ARR, pieces, STR),
            kv('tokenizer.ggml.scores', ARR, scores, F32), kv('tokenizer.ggml.token_type', ARR, types, I32),
            kv('tokenizer.ggml.bos_token_id', U32, 1), kv('tokenizer.ggml.eos_token_id', U32, 2),
            kv('tokenizer.ggml.unknown_token_id', U32, 0)], len(pieces)


def byte_level(b):
    """GPT-2's byte-to-character map."""
    keep = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    if b in keep:
        return chr(b)
    return chr(256 + sorted(set(range(256)) - set(keep)).index(b))


def bpe_vocab(pre):
    pieces = [byte_level(b) for b in range(256)]
    merges = ['h e', 'l l', 'he ll', 'hell o', '\u0120 t', '\u0120t h', '\u0120th e']
    for m in merges:
        pieces.append(m.replace(' ', ''))
    pieces += ['<|endoftext|>', '<|im_start|>', '<|im_end|>']
    types = [1] * (len(pieces) - 3) + [3, 3, 3]
    return [kv('tokenizer.ggml.model', STR, 'gpt2'), kv('tokenizer.ggml.pre', STR, pre),
            kv('tokenizer.ggml.tokens', ARR, pieces, STR), kv('tokenizer.ggml.token_type', ARR, types, I32),
            kv('tokenizer.ggml.merges', ARR, merges, STR),
            kv('tokenizer.ggml.bos_token_id', U32, len(pieces) - 3),
            kv('tokenizer.ggml.eos_token_id', U32, len(pieces) - 1),
            kv('tokenizer.chat_template', STR,
               "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
               "'<|im_end|>' + '\\n'}}{% endfor %}")], len(pieces)


def model(arch, vocab, n_vocab, dim, n_head, n_head_kv, ffn, n_layer, wtype, rng, extra=()):
    head_dim = dim // n_head
    kvs = [kv('general.architecture', STR, arch), kv('general.alignment', U32, ALIGN),
           kv(arch + '.context_length', U32, 64), kv(arch + '.embedding_length', U32, dim),
           kv(arch + '.block_count', U32, n_layer), kv(arch + '.feed_forward_length', U32, ffn),
           kv(arch + '.attention.head_count', U32, n_head), kv(arch + '.attention.head_count_kv', U32, n_head_kv),
           kv(arch + '.attention.layer_norm_rms_epsilon', F32, 1e-5), kv(arch + '.rope.freq_base', F32, 10000.0),
           kv(arch + '.rope.dimension_count', U32, head_dim)] + vocab

    def rand(n):
        return [rng.uniform(-0.5, 0.5) for _ in range(n)]

    def norm(n):
        return [1.0 + rng.uniform(-0.1, 0.1) for _ in range(n)]

    kv_dim = head_dim * n_head_kv
    tensors = [('token_embd.weight', [dim, n_vocab], wtype, rand(dim * n_vocab)),
               ('output_norm.weight', [dim], T_F32, norm(dim)),
               ('output.weight', [dim, n_vocab], wtype, rand(dim * n_vocab))]
    for l in range(n_layer):
        p = 'blk.%d.' % l
        tensors += [(p + 'attn_norm.weight', [dim], T_F32, norm(dim)),
                    (p + 'attn_q.weight', [dim, dim], wtype, rand(dim * dim)),
                    (p + 'attn_k.weight', [dim, kv_dim], wtype, rand(dim * kv_dim)),
                    (p + 'attn_v.weight', [dim, kv_dim], wtype, rand(dim * kv_dim)),
                    (p + 'attn_output.weight', [dim, dim], wtype, rand(dim * dim)),
                    (p + 'ffn_norm.weight', [dim], T_F32, norm(dim)),
                    (p + 'ffn_gate.weight', [dim, ffn], wtype, rand(dim * ffn)),
                    (p + 'ffn_up.weight', [dim, ffn], wtype, rand(dim * ffn)),
                    (p + 'ffn_down.weight', [ffn, dim], wtype, rand(ffn * dim))]
        for bias, n in extra:
            tensors.append((p + bias, [n], T_F32, rand(n)))
    return kvs, tensors


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = random.Random(14)
    spm, n_spm = spm_vocab()
    bpe, n_bpe = bpe_vocab('qwen2')
    kvs, ts = model('llama', spm, n_spm, 8, 2, 1, 16, 1, T_F32, rng)
    write_gguf(os.path.join(out, 'tiny-llama-f32.gguf'), kvs, ts)
    write_gguf(os.path.join(out, 'tiny-llama-vocab.gguf'), kvs, ts, vocab_only=True)
    kvs, ts = model('llama', spm, n_spm, 32, 2, 2, 32, 2, T_Q8_0, rng)
    write_gguf(os.path.join(out, 'tiny-llama-q8_0.gguf'), kvs, ts)
    kvs, ts = model('qwen2', bpe, n_bpe, 8, 2, 1, 16, 1, T_F16, rng,
                    extra=[('attn_q.bias', 8), ('attn_k.bias', 4), ('attn_v.bias', 4)])
    write_gguf(os.path.join(out, 'tiny-qwen2-f16.gguf'), kvs, ts)
    write_gguf(os.path.join(out, 'tiny-qwen2-vocab.gguf'), kvs, ts, vocab_only=True)


if __name__ == '__main__':
    main()

#!/usr/bin/env python3
"""make_hostile.py OUTDIR [REAL_MODEL]

Writes malformed GGUF files into OUTDIR, each a small valid model with one
thing wrong, and OUTDIR/manifest.tsv, one line per file:

    FILE <tab> STAGE <tab> KEYWORDS

STAGE says where loading must stop: "gguf" (infer_gguf_open refuses it),
"vocab" (the GGUF opens, a vocab-only load refuses it), "model" (both of
those succeed, a full load refuses it), "any" (a full load refuses it,
wherever: truncations) or "ok" (it must load: the valid bases and legal
edge cases, proof that the refusals are for the reason intended).
KEYWORDS are alternatives separated by '|', one of which the error
message must contain (case-insensitive); "*" accepts any message.

REAL_MODEL (stories260K.gguf), when it exists, is parsed, written back
byte-identical as a check of this script's writer, and cut and patched
too. Only the standard library is used: the bytes are laid out here.
"""
import math
import os
import struct
import sys

# GGUF value types
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
SCALAR_FMT = {U8: '<B', I8: '<b', U16: '<H', I16: '<h', U32: '<I', I32: '<i', F32: '<f', BOOL: '<B',
              U64: '<Q', I64: '<q', F64: '<d'}
# tensor types: (block values, block bytes)
T_F32, T_F16, T_Q8_0, T_Q8_1 = 0, 1, 8, 9
TYPE_BLOCK = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34), 9: (32, 36),
              10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210), 15: (256, 292),
              20: (32, 18), 23: (256, 136), 30: (1, 2)}

NAN = float('nan')
INF = float('inf')


class KV:
    """A key-value pair: a scalar, a string, or an array (arr_type set). raw,
    when given, is written after the type instead of the value."""

    def __init__(self, key, type_, value=None, arr_type=None, raw=None):
        self.key, self.type, self.value, self.arr_type, self.raw = key, type_, value, arr_type, raw

    def copy(self):
        return KV(self.key, self.type, list(self.value) if isinstance(self.value, list) else self.value,
                  self.arr_type, self.raw)


class Tensor:
    def __init__(self, name, ne, type_, data, offset=None):
        self.name, self.ne, self.type, self.data, self.offset = name, list(ne), type_, data, offset

    def copy(self):
        return Tensor(self.name, self.ne, self.type, self.data, self.offset)


class Gguf:
    def __init__(self, kvs, tensors, version=3, layout_alignment=None):
        self.kvs, self.tensors, self.version = kvs, tensors, version
        self.layout_alignment = layout_alignment  # None: from general.alignment, else 32

    def copy(self):
        return Gguf([k.copy() for k in self.kvs], [t.copy() for t in self.tensors], self.version,
                    self.layout_alignment)

    def kv(self, key):
        for k in self.kvs:
            if k.key == key:
                return k
        raise KeyError(key)

    def tensor(self, name):
        for t in self.tensors:
            if t.name == name:
                return t
        raise KeyError(name)

    def alignment(self):
        if self.layout_alignment:
            return self.layout_alignment
        for k in self.kvs:
            if k.key == 'general.alignment' and k.type == U32 and k.value and k.value % 8 == 0:
                return k.value
        return 32


def to_bytes(s):
    return s if isinstance(s, bytes) else s.encode('utf-8')


def pack_str(out, s):
    b = to_bytes(s)
    out += struct.pack('<Q', len(b))
    out += b


def serialize(g):
    """The file's bytes and where each field starts: fields[label] = offset."""
    out = bytearray()
    f = {}
    out += b'GGUF'
    f['version'] = len(out)
    out += struct.pack('<I', g.version)
    f['n_tensors'] = len(out)
    out += struct.pack('<Q', len(g.tensors))
    f['n_kv'] = len(out)
    out += struct.pack('<Q', len(g.kvs))
    for i, k in enumerate(g.kvs):
        f[('kv', i)] = len(out)
        pack_str(out, k.key)
        f[('kv.type', i)] = len(out)
        out += struct.pack('<I', k.type)
        f[('kv.value', i)] = len(out)
        if k.raw is not None:
            out += k.raw
        elif k.type == STR:
            pack_str(out, k.value)
        elif k.type == ARR:
            out += struct.pack('<IQ', k.arr_type, len(k.value))
            for j, v in enumerate(k.value):
                f[('kv.elem', i, j)] = len(out)
                if k.arr_type == STR:
                    pack_str(out, v)
                else:
                    out += struct.pack(SCALAR_FMT[k.arr_type], v)
        else:
            out += struct.pack(SCALAR_FMT[k.type], k.value)
    align = g.alignment()
    offsets, at = [], 0
    for t in g.tensors:
        if t.offset is None:
            offsets.append(at)
            at = (at + len(t.data) + align - 1) // align * align
        else:
            offsets.append(t.offset)
    for i, t in enumerate(g.tensors):
        f[('t', i)] = len(out)
        pack_str(out, t.name)
        f[('t.ndims', i)] = len(out)
        out += struct.pack('<I', len(t.ne))
        for d, n in enumerate(t.ne):
            f[('t.ne', i, d)] = len(out)
            out += struct.pack('<Q', n & 0xffffffffffffffff)
        f[('t.type', i)] = len(out)
        out += struct.pack('<I', t.type)
        f[('t.offset', i)] = len(out)
        out += struct.pack('<Q', offsets[i] & 0xffffffffffffffff)
    f['infos_end'] = len(out)
    if g.tensors:
        out += b'\0' * ((-len(out)) % align)
        f['data'] = data_start = len(out)
        end = max([o + len(t.data) for o, t in zip(offsets, g.tensors) if o < 1 << 40] + [0])
        out += b'\0' * end
        for i, (o, t) in enumerate(zip(offsets, g.tensors)):
            if o < 1 << 40:
                f[('t.data', i)] = data_start + o
                out[data_start + o:data_start + o + len(t.data)] = t.data
    return bytes(out), f


def parse(data):
    """A GGUF file (versions 2 and 3) as a Gguf, tensor offsets kept."""
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from(fmt, data, pos)[0]
        pos += struct.calcsize(fmt)
        return v

    def take_str():
        nonlocal pos
        n = take('<Q')
        s = data[pos:pos + n]
        pos += n
        return s

    assert data[:4] == b'GGUF'
    pos = 4
    version = take('<I')
    n_tensors, n_kv = take('<Q'), take('<Q')
    kvs = []
    for _ in range(n_kv):
        key = take_str().decode('utf-8')
        t = take('<I')
        if t == STR:
            kvs.append(KV(key, STR, take_str()))
        elif t == ARR:
            at, n = take('<I'), take('<Q')
            vals = [take_str() if at == STR else take(SCALAR_FMT[at]) for _ in range(n)]
            kvs.append(KV(key, ARR, vals, at))
        else:
            kvs.append(KV(key, t, take(SCALAR_FMT[t])))
    infos = []
    for _ in range(n_tensors):
        name = take_str().decode('utf-8')
        nd = take('<I')
        ne = [take('<Q') for _ in range(nd)]
        infos.append((name, ne, take('<I'), take('<Q')))
    g = Gguf(kvs, [], version)
    align = g.alignment()
    data_start = (pos + align - 1) // align * align
    for name, ne, ty, off in infos:
        bs, ts = TYPE_BLOCK[ty]
        nbytes = math.prod(ne) // bs * ts
        g.tensors.append(Tensor(name, ne, ty, data[data_start + off:data_start + off + nbytes], off))
    return g


def f32s(values):
    return struct.pack('<%df' % len(values), *values)


def weights(n, seed):
    return f32s([((i * 7919 + seed * 104729) % 97 - 48) / 480.0 for i in range(n)])


# ---- the synthetic bases ---------------------------------------------------

DIM, N_HEAD, N_HEAD_KV, FFN, N_LAYER, N_CTX = 32, 2, 1, 32, 2, 64
HEAD = DIM // N_HEAD
TOKENS = ['<unk>', '<s>', '</s>', 'a', 'b', 'c', 'd', 'e', 'ab', 'cd', 'abcd', '\u0120', '\u0120a', 'de', 'x', 'y']
MERGES = ['a b', 'c d', 'ab cd', '\u0120 a', 'd e']
N_VOCAB = len(TOKENS)


def base_model(arch='llama'):
    """A tiny model of arch (llama or gemma2) with a GPT-2 style vocabulary."""
    A = arch + '.'
    kvs = [KV('general.architecture', STR, arch),
           KV('general.name', STR, 'hostile base'),
           KV(A + 'context_length', U32, N_CTX),
           KV(A + 'embedding_length', U32, DIM),
           KV(A + 'block_count', U32, N_LAYER),
           KV(A + 'feed_forward_length', U32, FFN),
           KV(A + 'attention.head_count', U32, N_HEAD),
           KV(A + 'attention.head_count_kv', U32, N_HEAD_KV),
           KV(A + 'rope.dimension_count', U32, HEAD),
           KV(A + 'rope.freq_base', F32, 10000.0),
           KV(A + 'attention.layer_norm_rms_epsilon', F32, 1e-5)]
    if arch == 'gemma2':
        kvs += [KV(A + 'attention.sliding_window', U32, 32),
                KV(A + 'attn_logit_softcapping', F32, 50.0),
                KV(A + 'final_logit_softcapping', F32, 30.0)]
    kvs += [KV('tokenizer.ggml.model', STR, 'gpt2'),
            KV('tokenizer.ggml.pre', STR, 'gpt-2'),
            KV('tokenizer.ggml.tokens', ARR, list(TOKENS), STR),
            KV('tokenizer.ggml.scores', ARR, [-float(i) for i in range(N_VOCAB)], F32),
            KV('tokenizer.ggml.token_type', ARR, [2, 3, 3] + [1] * (N_VOCAB - 3), I32),
            KV('tokenizer.ggml.merges', ARR, list(MERGES), STR),
            KV('tokenizer.ggml.bos_token_id', U32, 1),
            KV('tokenizer.ggml.eos_token_id', U32, 2),
            KV('tokenizer.ggml.unknown_token_id', U32, 0),
            # the "none" that llama.cpp's converters write: must be accepted
            KV('tokenizer.ggml.padding_token_id', U32, 0xffffffff)]
    seed = [0]

    def w(name, *ne):
        seed[0] += 1
        n = math.prod(ne)
        data = f32s([1.0] * n) if len(ne) == 1 else weights(n, seed[0])
        return Tensor(name, ne, T_F32, data)

    ts = [w('token_embd.weight', DIM, N_VOCAB), w('output_norm.weight', DIM)]
    if arch == 'llama':
        ts.append(w('output.weight', DIM, N_VOCAB))
    for l in range(N_LAYER):
        b = 'blk.%d.' % l
        ts += [w(b + 'attn_norm.weight', DIM),
               w(b + 'attn_q.weight', DIM, N_HEAD * HEAD),
               w(b + 'attn_k.weight', DIM, N_HEAD_KV * HEAD),
               w(b + 'attn_v.weight', DIM, N_HEAD_KV * HEAD),
               w(b + 'attn_output.weight', N_HEAD * HEAD, DIM),
               w(b + 'ffn_norm.weight', DIM),
               w(b + 'ffn_gate.weight', DIM, FFN),
               w(b + 'ffn_up.weight', DIM, FFN),
               w(b + 'ffn_down.weight', FFN, DIM)]
        if arch == 'gemma2':
            ts += [w(b + 'post_attention_norm.weight', DIM), w(b + 'post_ffw_norm.weight', DIM)]
    return Gguf(kvs, ts)


# ---- the writer of the set -------------------------------------------------

class Out:
    def __init__(self, outdir):
        self.dir = outdir
        self.lines = []
        self.names = set()

    def emit(self, name, data, stage, kw):
        assert name not in self.names, name
        assert '\t' not in kw and stage in ('ok', 'gguf', 'vocab', 'model', 'any')
        self.names.add(name)
        with open(os.path.join(self.dir, name + '.gguf'), 'wb') as fh:
            fh.write(data)
        self.lines.append('%s.gguf\t%s\t%s' % (name, stage, kw))

    def model(self, name, g, stage, kw):
        self.emit(name, serialize(g)[0], stage, kw)


def patched(data, pos, fmt, value):
    b = bytearray(data)
    struct.pack_into(fmt, b, pos, value)
    return bytes(b)


def kv_index(g, key):
    return [k.key for k in g.kvs].index(key)


def t_index(g, name):
    return [t.name for t in g.tensors].index(name)


TRUNC_KW = 'truncated|past the end|cannot fit|bad magic'


def truncations(out, prefix, data, fields, every, data_cuts):
    """data cut at every field boundary, every `every` bytes of the header,
    and at data_cuts (offsets into the file) beyond it."""
    header_end = fields.get('data', fields['infos_end'])
    cuts = set(range(0, header_end + 8, every))
    for label, pos in fields.items():
        # around every field, but only every 50th element of an array, and
        # in the data only at data_cuts (each such copy is nearly the file)
        if isinstance(label, tuple) and label[0] == 't.data':
            continue
        if not (isinstance(label, tuple) and label[0] == 'kv.elem' and label[2] % 50):
            cuts.update((pos - 1, pos, pos + 1))
    cuts.update(data_cuts)
    for n in sorted(c for c in cuts if 0 <= c < len(data)):
        out.emit('%s-cut-%07d' % (prefix, n), data[:n], 'any', TRUNC_KW)


def header_lies(out, prefix, g, few=False):
    """Lies in the counts of the header (and a wrong magic and version);
    few: one of each kind (for a large file, each copy as large)."""
    data, f = serialize(g)
    n_t, n_kv = len(g.tensors), len(g.kvs)
    pick = (lambda values: values[-1:]) if few else (lambda values: values)
    for v in pick((1 << 40, 1 << 63, 0xffffffffffffffff, len(data) // 28 + 1)):
        out.emit('%s-n_tensors-%x' % (prefix, v), patched(data, f['n_tensors'], '<Q', v), 'gguf', 'n_tensors')
    for v in pick((1 << 40, 1 << 63, 0xffffffffffffffff, len(data) // 13 + 1)):
        out.emit('%s-n_kv-%x' % (prefix, v), patched(data, f['n_kv'], '<Q', v), 'gguf', 'n_kv')
    # off by one: the reader then takes other bytes for a key or a tensor,
    # and what it trips over first depends on those bytes
    out.emit(prefix + '-n_tensors-plus1', patched(data, f['n_tensors'], '<Q', n_t + 1), 'any', '*')
    out.emit(prefix + '-n_kv-plus1', patched(data, f['n_kv'], '<Q', n_kv + 1), 'any', '*')
    out.emit(prefix + '-n_kv-minus1', patched(data, f['n_kv'], '<Q', n_kv - 1), 'any', '*')
    out.emit(prefix + '-n_tensors-minus1', patched(data, f['n_tensors'], '<Q', n_t - 1), 'any', '*')
    if few:
        return
    for magic in (b'GGUX', b'gguf', b'GGML', b'\0\0\0\0'):
        out.emit('%s-magic-%s' % (prefix, magic.hex()), magic + data[4:], 'gguf', 'magic')
    for v in (0, 1, 4, 0x03000000, 0xffffffff):
        out.emit('%s-version-%x' % (prefix, v), patched(data, f['version'], '<I', v), 'gguf', 'version|endian')


def string_lies(out, prefix, g, keys, tensors, few=False):
    """Lengths of strings and arrays that run past the end of the file."""
    data, f = serialize(g)
    pick = (lambda values: values[:1]) if few else (lambda values: values)
    rest = lambda pos: len(data) - pos - 8
    for key in keys:
        i = kv_index(g, key)
        k = g.kvs[i]
        for v in pick((rest(f[('kv', i)]) + 1, 1 << 63, 0xffffffffffffffff)):
            out.emit('%s-keylen-%s-%x' % (prefix, key, v), patched(data, f[('kv', i)], '<Q', v), 'gguf', 'key #%d' % i)
        if k.type == STR:
            pos = f[('kv.value', i)]
            for v in pick((rest(pos) + 1, 1 << 63)):
                out.emit('%s-strlen-%s-%x' % (prefix, key, v), patched(data, pos, '<Q', v), 'gguf', key)
        if k.type == ARR:
            pos = f[('kv.value', i)] + 4
            for v in pick((rest(pos) + 1, 1 << 62, 0xffffffffffffffff)):
                out.emit('%s-arrlen-%s-%x' % (prefix, key, v), patched(data, pos, '<Q', v), 'gguf', key)
            if k.arr_type == STR:
                j = len(k.value) // 2
                pos = f[('kv.elem', i, j)]
                out.emit('%s-elemlen-%s' % (prefix, key), patched(data, pos, '<Q', rest(pos) + 1), 'gguf',
                         '%s[%d]' % (key, j))
        out.emit('%s-type-%s' % (prefix, key), patched(data, f[('kv.type', i)], '<I', 13), 'gguf', key)
    for name in tensors:
        i = t_index(g, name)
        pos = f[('t', i)]
        for v in pick((rest(pos) + 1, 1 << 63)):
            out.emit('%s-namelen-%s-%x' % (prefix, name, v), patched(data, pos, '<Q', v), 'gguf', 'tensor #%d' % i)


def offset_lies(out, prefix, g, tensors):
    """Tensor offsets: misaligned, past the end, wrapping, onto another tensor."""
    data, f = serialize(g)
    align = g.alignment()
    for name in tensors:
        i = t_index(g, name)
        pos = f[('t.offset', i)]
        off = struct.unpack_from('<Q', data, pos)[0]
        cases = [('misaligned', off + 4, 'align'),
                 ('huge', 1 << 63, 'past the end'),
                 ('wraps', 0xffffffffffffffff & ~(align - 1), 'past the end'),
                 ('past-end', len(data) - f['data'] + align, 'past the end')]
        others = [j for j in range(len(g.tensors)) if j != i]
        if others:
            j = others[0]
            other = struct.unpack_from('<Q', data, f[('t.offset', j)])[0]
            cases.append(('onto-%s' % g.tensors[j].name, other, 'overlap'))
        for what, v, kw in cases:
            out.emit('%s-offset-%s-%s' % (prefix, name, what), patched(data, pos, '<Q', v), 'gguf',
                     kw if kw == 'overlap' else name)


# ---- the synthetic families ------------------------------------------------

def tensor_table_cases(out, base):
    """Shapes, dimension counts, types and names in the tensor table."""
    name = 'blk.0.attn_q.weight'

    def with_tensor(tag, stage, kw, **change):
        g = base.copy()
        t = g.tensor(name)
        for k, v in change.items():
            setattr(t, k, v)
        out.model('syn-tensor-' + tag, g, stage, kw)

    # dimensions that are zero, negative, too many, or multiply past 2^64
    for tag, ne in [('zero-dim', [DIM, 0]), ('zero-first-dim', [0, DIM]), ('neg-dim', [DIM, -1]),
                    ('neg32-dim', [-32, DIM]), ('huge-dim', [1 << 41, 1]),
                    ('overflow-2x32', [1 << 32, 1 << 32]), ('overflow-4x21', [1 << 21] * 4),
                    ('overflow-wraps-to-0', [1 << 62, 4]), ('overflow-3x2^17', [1 << 17] * 3 + [1 << 10]),
                    ('elements-2^51', [1 << 40, 1 << 10, 2])]:
        with_tensor(tag, 'gguf', name, ne=ne)
    # a byte size of 2^52 does not overflow, but no file holds it
    with_tensor('bytes-2^52', 'gguf', name, ne=[1 << 40, 1 << 10])
    for nd in (0, 5, 8):
        g = base.copy()
        g.tensor(name).ne = [DIM] * nd
        out.model('syn-tensor-ndims-%d' % nd, g, 'gguf', name)
    data, f = serialize(base)
    i = t_index(base, name)
    out.emit('syn-tensor-ndims-ffffffff', patched(data, f[('t.ndims', i)], '<I', 0xffffffff), 'gguf', name)
    for ty in (4, 5, 31, 38, 40, 1000, 0xffffffff):
        out.emit('syn-tensor-type-%x' % ty, patched(data, f[('t.type', i)], '<I', ty), 'gguf', name)
    # a Q8_0 row of 33 values is no whole number of 32-value blocks
    with_tensor('q8_0-rows-33', 'gguf', 'block', type=T_Q8_0, ne=[33, 2], data=b'\0' * 136)
    # the name twice, and a name too long for GGUF
    g = base.copy()
    g.tensor('blk.1.attn_q.weight').name = name
    out.model('syn-tensor-name-twice', g, 'gguf', 'appears twice')
    with_tensor('name-65-bytes', 'gguf', 'tensor #%d' % i, name='x' * 65)
    # data ranges that overlap although each offset is aligned and inside
    g = base.copy()
    g.tensor(name).offset = 0
    out.model('syn-tensor-overlaps-first', g, 'gguf', 'overlap')
    g = base.copy()
    off = 0
    for t in g.tensors:
        t.offset = off
        off += (len(t.data) + 31) // 32 * 32
    g.tensors[-1].offset = g.tensors[-2].offset + 32
    out.model('syn-tensor-overlaps-by-32', g, 'gguf', 'overlap')


def alignment_cases(out, base):
    for a in (0, 1, 2, 4, 12, 24, 48, 100, 1 << 25, 0xffffffff):
        g = base.copy()
        g.kvs.append(KV('general.alignment', U32, a))
        g.layout_alignment = 32 if a == 0 or a > 4096 else a
        out.model('syn-alignment-%x' % a, g, 'gguf', 'general.alignment')
    for tag, kv in [('u64', KV('general.alignment', U64, 32)), ('i32', KV('general.alignment', I32, 32)),
                    ('i32-neg', KV('general.alignment', I32, -32)), ('u8', KV('general.alignment', U8, 32)),
                    ('f32', KV('general.alignment', F32, 32.0)), ('f32-nan', KV('general.alignment', F32, NAN)),
                    ('str', KV('general.alignment', STR, '32')),
                    ('array', KV('general.alignment', ARR, [32], U32))]:
        g = base.copy()
        g.kvs.append(kv)
        g.layout_alignment = 32
        out.model('syn-alignment-type-' + tag, g, 'gguf', 'general.alignment')
    for a in (8, 64, 256):
        g = base.copy()
        g.kvs.append(KV('general.alignment', U32, a))
        out.model('syn-alignment-ok-%d' % a, g, 'ok', '')


def duplicate_key_cases(out, base):
    for key, kv in [('block_count', KV('llama.block_count', U32, 1)),
                    ('architecture', KV('general.architecture', STR, 'llama')),
                    ('tokens', KV('tokenizer.ggml.tokens', ARR, list(TOKENS), STR))]:
        g = base.copy()
        g.kvs.append(kv)
        out.model('syn-key-twice-' + key, g, 'gguf', kv.key)


def value_type_cases(out, base):
    """Types the reader cannot read: unknown, nested arrays."""
    for ty in (13, 100, 0xffffffff):
        g = base.copy()
        g.kvs.append(KV('hostile.unknown', ty, raw=b'\0' * 16))
        out.model('syn-value-type-%x' % ty, g, 'gguf', 'hostile.unknown')
        g = base.copy()
        g.kvs.append(KV('hostile.unknown_elements', ARR, raw=struct.pack('<IQ', ty, 2) + b'\0' * 16))
        out.model('syn-array-type-%x' % ty, g, 'gguf', 'hostile.unknown_elements')
    g = base.copy()
    g.kvs.append(KV('hostile.nested', ARR, raw=struct.pack('<IQ', ARR, 1) + struct.pack('<IQ', U8, 1) + b'\1'))
    out.model('syn-array-nested', g, 'gguf', 'hostile.nested')


def hparam_cases(out, base, arch):
    A = arch + '.'

    def set_kv(tag, key, kv, stage='model', kw=None):
        g = base.copy()
        if key in [k.key for k in g.kvs]:
            if kv is None:
                g.kvs.pop(kv_index(g, key))
            else:
                g.kvs[kv_index(g, key)] = kv
        else:
            g.kvs.append(kv)
        out.model('syn-%s-hparam-%s' % (arch, tag), g, stage, kw or key)

    floats = ['rope.freq_base', 'attention.layer_norm_rms_epsilon', 'rope.scaling.factor', 'rope.scale_linear',
              'rope.scaling.attn_factor', 'rope.scaling.yarn_ext_factor', 'rope.scaling.yarn_beta_fast',
              'rope.scaling.yarn_beta_slow', 'attention.scale']
    if arch == 'gemma2':
        floats = ['rope.freq_base', 'attention.layer_norm_rms_epsilon', 'attn_logit_softcapping',
                  'final_logit_softcapping']
    for name in floats:
        for vname, v in (('nan', NAN), ('inf', INF), ('-inf', -INF), ('neg', -1.0), ('1e300', 1e300),
                         ('subnormal', 1e-310)):
            ty = F64 if vname in ('1e300', 'subnormal') else F32
            set_kv('%s-%s' % (name, vname), A + name, KV(A + name, ty, v))
        set_kv(name + '-string', A + name, KV(A + name, STR, '1.0'))
    ints = ['context_length', 'embedding_length', 'block_count', 'feed_forward_length', 'attention.head_count',
            'attention.head_count_kv', 'rope.dimension_count']
    for name in ints:
        key = A + name
        set_kv(name + '-zero', key, KV(key, U32, 0))
        set_kv(name + '-neg', key, KV(key, I32, -1))
        set_kv(name + '-huge', key, KV(key, U64, 1 << 40))
        set_kv(name + '-nan-as-f32', key, KV(key, F32, NAN))
        set_kv(name + '-inf-as-f64', key, KV(key, F64, INF))
        set_kv(name + '-1e30-as-f32', key, KV(key, F32, 1e30))
        set_kv(name + '-array', key, KV(key, ARR, [1, 2], U32))
    for name in ('embedding_length', 'block_count', 'attention.head_count'):
        set_kv(name + '-missing', A + name, None)
    # counts that do not divide, and more than the file holds
    set_kv('heads-not-dividing-dim', A + 'attention.head_count', KV(A + 'attention.head_count', U32, 3),
           kw='embedding_length')
    set_kv('kv-heads-not-dividing-heads', A + 'attention.head_count_kv', KV(A + 'attention.head_count_kv', U32, 3),
           kw='head_count')
    set_kv('block_count-2^24', A + 'block_count', KV(A + 'block_count', U32, 1 << 24))
    set_kv('block_count-3', A + 'block_count', KV(A + 'block_count', U32, 3), kw='blk.2.')
    set_kv('rope-dims-odd', A + 'rope.dimension_count', KV(A + 'rope.dimension_count', U32, 15))
    set_kv('rope-dims-over-head', A + 'rope.dimension_count', KV(A + 'rope.dimension_count', U32, 2 * HEAD))
    set_kv('key_length-zero', A + 'attention.key_length', KV(A + 'attention.key_length', U32, 0))
    set_kv('key_length-2^22', A + 'attention.key_length', KV(A + 'attention.key_length', U32, 1 << 22),
           kw='head_count')
    set_kv('value_length-other', A + 'attention.value_length', KV(A + 'attention.value_length', U32, 8))
    set_kv('ffn-other', A + 'feed_forward_length', KV(A + 'feed_forward_length', U32, 64), kw='ffn_gate')
    set_kv('rope-scaling-type', A + 'rope.scaling.type', KV(A + 'rope.scaling.type', STR, 'nope'))
    set_kv('rope-orig-ctx-zero', A + 'rope.scaling.original_context_length',
           KV(A + 'rope.scaling.original_context_length', U32, 0))
    set_kv('architecture-unknown', 'general.architecture', KV('general.architecture', STR, 'hostilearch'),
           kw='hostilearch')
    set_kv('architecture-u32', 'general.architecture', KV('general.architecture', U32, 1))
    set_kv('architecture-missing', 'general.architecture', None)
    if arch == 'llama':
        set_kv('expert_count-zero', A + 'expert_count', KV(A + 'expert_count', U32, 0))
        set_kv('expert_count-nan', A + 'expert_count', KV(A + 'expert_count', F32, NAN))
        g = base.copy()
        g.kvs += [KV(A + 'expert_count', U32, 4), KV(A + 'expert_used_count', U32, 8),
                  KV(A + 'expert_feed_forward_length', U32, FFN)]
        out.model('syn-llama-hparam-expert_used-over-count', g, 'model', 'expert_used_count')
    if arch == 'gemma2':
        set_kv('sliding_window-over-ctx', A + 'attention.sliding_window',
               KV(A + 'attention.sliding_window', U32, 2 * N_CTX))
        set_kv('sliding_window-zero', A + 'attention.sliding_window', KV(A + 'attention.sliding_window', U32, 0))


def shape_cases(out, base):
    def change(tag, stage, kw, fn):
        g = base.copy()
        fn(g)
        out.model('syn-shape-' + tag, g, stage, kw)

    def resize(name, ne, ty=T_F32):
        def fn(g):
            t = g.tensor(name)
            t.ne, t.type = ne, ty
            bs, ts = TYPE_BLOCK[ty]
            t.data = b'\0' * (math.prod(ne) // bs * ts)
        return fn

    change('embd-rows', 'model', 'token_embd.weight', resize('token_embd.weight', [DIM, N_VOCAB + 1]))
    # rows that would wrap to the vocabulary's 16 as an int; no file holds them
    change('embd-rows-2^32', 'gguf', 'token_embd.weight',
           lambda g: setattr(g.tensor('token_embd.weight'), 'ne', [DIM, (1 << 32) + N_VOCAB]))
    change('embd-1d', 'model', 'token_embd.weight', resize('token_embd.weight', [DIM * N_VOCAB]))
    change('embd-width', 'model', 'token_embd.weight', resize('token_embd.weight', [DIM + 1, N_VOCAB]))
    change('q-transposed', 'model', 'blk.0.attn_q.weight', resize('blk.0.attn_q.weight', [DIM, DIM // 2]))
    change('k-rows', 'model', 'blk.1.attn_k.weight', resize('blk.1.attn_k.weight', [DIM, DIM]))
    change('down-swapped', 'model', 'blk.0.ffn_down.weight', resize('blk.0.ffn_down.weight', [DIM, 2 * FFN]))
    change('q-3d', 'model', 'blk.0.attn_q.weight', resize('blk.0.attn_q.weight', [DIM, DIM, 1]))
    change('norm-2d', 'model', 'output_norm.weight', resize('output_norm.weight', [DIM, 2]))
    change('norm-f16', 'model', 'blk.0.attn_norm.weight', resize('blk.0.attn_norm.weight', [DIM], T_F16))
    change('q-q8_1', 'model', 'blk.0.attn_q.weight', resize('blk.0.attn_q.weight', [DIM, DIM], T_Q8_1))
    change('missing-down', 'model', 'blk.1.ffn_down.weight',
           lambda g: g.tensors.pop(t_index(g, 'blk.1.ffn_down.weight')))
    change('missing-embd', 'model', 'token_embd.weight', lambda g: g.tensors.pop(t_index(g, 'token_embd.weight')))
    change('extra-tensor', 'model', 'blk.0.hostile.weight',
           lambda g: g.tensors.append(Tensor('blk.0.hostile.weight', [DIM], T_F32, f32s([0.0] * DIM))))
    change('rope-freqs-short', 'model', 'rope_freqs.weight',
           lambda g: g.tensors.append(Tensor('rope_freqs.weight', [HEAD // 2 - 1], T_F32, f32s([1.0] * 7))))


def vocab_cases(out, base):
    def change(tag, stage, kw, fn):
        g = base.copy()
        fn(g)
        out.model('syn-vocab-' + tag, g, stage, kw)

    def set_value(key, value):
        return lambda g: setattr(g.kv(key), 'value', value)

    def replace(key, kv):
        def fn(g):
            g.kvs[kv_index(g, key)] = kv
        return fn

    def drop(key):
        return lambda g: g.kvs.pop(kv_index(g, key))

    change('scores-short', 'vocab', 'tokenizer.ggml.scores',
           set_value('tokenizer.ggml.scores', [0.0] * (N_VOCAB - 1)))
    change('scores-long', 'vocab', 'tokenizer.ggml.scores', set_value('tokenizer.ggml.scores', [0.0] * (N_VOCAB + 1)))
    change('scores-i32', 'vocab', 'tokenizer.ggml.scores',
           replace('tokenizer.ggml.scores', KV('tokenizer.ggml.scores', ARR, [0] * N_VOCAB, I32)))
    change('scores-nan', 'vocab', 'tokenizer.ggml.scores[5]',
           set_value('tokenizer.ggml.scores', [0.0] * 5 + [NAN] + [0.0] * (N_VOCAB - 6)))
    change('types-short', 'vocab', 'tokenizer.ggml.token_type',
           set_value('tokenizer.ggml.token_type', [1] * (N_VOCAB - 1)))
    change('types-long', 'vocab', 'tokenizer.ggml.token_type',
           set_value('tokenizer.ggml.token_type', [1] * (N_VOCAB + 3)))
    change('types-f32', 'vocab', 'tokenizer.ggml.token_type',
           replace('tokenizer.ggml.token_type', KV('tokenizer.ggml.token_type', ARR, [1.0] * N_VOCAB, F32)))
    change('tokens-empty', 'vocab', 'tokenizer.ggml.tokens', set_value('tokenizer.ggml.tokens', []))
    change('tokens-u32', 'vocab', 'tokenizer.ggml.tokens',
           replace('tokenizer.ggml.tokens', KV('tokenizer.ggml.tokens', ARR, list(range(N_VOCAB)), U32)))
    change('tokens-string', 'vocab', 'tokenizer.ggml.tokens',
           replace('tokenizer.ggml.tokens', KV('tokenizer.ggml.tokens', STR, 'abc')))
    change('tokens-missing', 'vocab', 'tokenizer.ggml.tokens', drop('tokenizer.ggml.tokens'))
    change('model-missing', 'vocab', 'tokenizer.ggml.model', drop('tokenizer.ggml.model'))
    change('model-unknown', 'vocab', 'hostile-tok', set_value('tokenizer.ggml.model', 'hostile-tok'))
    change('pre-unknown', 'vocab', 'hostile-pre', set_value('tokenizer.ggml.pre', 'hostile-pre'))
    change('merges-missing', 'vocab', 'merges', drop('tokenizer.ggml.merges'))
    change('merges-u32', 'vocab', 'tokenizer.ggml.merges',
           replace('tokenizer.ggml.merges', KV('tokenizer.ggml.merges', ARR, [1, 2], U32)))
    for tag, merge in (('first-unknown', 'q b'), ('second-unknown', 'a q'), ('both-unknown', 'zz zz'),
                       ('no-space', 'ab'), ('trailing-space', 'a '), ('empty', '')):
        change('merges-' + tag, 'vocab', 'tokenizer.ggml.merges[2]',
               set_value('tokenizer.ggml.merges', MERGES[:2] + [merge] + MERGES[2:]))
    ids = ['bos', 'eos', 'unknown', 'padding', 'seperator', 'cls', 'mask', 'eot', 'eom', 'fim_pre', 'fim_suf',
           'fim_mid', 'fim_pad', 'fim_rep', 'fim_sep', 'prefix', 'suffix', 'middle']
    for name in ids:
        key = 'tokenizer.ggml.%s_token_id' % name
        for tag, kv in (('n', KV(key, U32, N_VOCAB)), ('2^31', KV(key, U32, 1 << 31)),
                        ('neg5', KV(key, I32, -5)), ('u64-huge', KV(key, U64, 1 << 40)),
                        ('f32', KV(key, F32, 1.0)), ('string', KV(key, STR, '1'))):
            def fn(g, key=key, kv=kv):
                if key in [k.key for k in g.kvs]:
                    g.kvs[kv_index(g, key)] = kv
                else:
                    g.kvs.append(kv)
            change('id-%s-%s' % (name, tag), 'vocab', key, fn)
    # the "none" of each integer type is not an id
    for tag, kv in (('u32', KV('tokenizer.ggml.eot_token_id', U32, 0xffffffff)),
                    ('i32', KV('tokenizer.ggml.eot_token_id', I32, -1)),
                    ('u64', KV('tokenizer.ggml.eot_token_id', U64, 0xffffffffffffffff)),
                    ('i64', KV('tokenizer.ggml.eot_token_id', I64, -1))):
        change('id-none-' + tag, 'ok', '', lambda g, kv=kv: g.kvs.append(kv))
    change('token-2MiB', 'vocab', 'tokenizer.ggml.tokens[14]',
           set_value('tokenizer.ggml.tokens', TOKENS[:14] + ['x' * (2 << 20)] + TOKENS[15:]))


def synthetic(out):
    base = base_model('llama')
    out.model('syn-base-llama', base, 'ok', '')
    gemma = base_model('gemma2')
    out.model('syn-base-gemma2', gemma, 'ok', '')
    header_lies(out, 'syn', base)
    string_lies(out, 'syn', base, ['general.architecture', 'llama.block_count', 'tokenizer.ggml.tokens',
                                   'tokenizer.ggml.scores', 'tokenizer.ggml.merges',
                                   'tokenizer.ggml.padding_token_id'],
                ['token_embd.weight', 'blk.1.ffn_down.weight'])
    offset_lies(out, 'syn', base, ['token_embd.weight', 'blk.0.attn_q.weight', base.tensors[-1].name])
    tensor_table_cases(out, base)
    alignment_cases(out, base)
    duplicate_key_cases(out, base)
    value_type_cases(out, base)
    hparam_cases(out, base, 'llama')
    hparam_cases(out, gemma, 'gemma2')
    shape_cases(out, base)
    vocab_cases(out, base)
    data, f = serialize(base)
    data_cuts = [f[k] + d for k in f if isinstance(k, tuple) and k[0] == 't.data' for d in (0, 4)]
    data_cuts += [len(data) - 1, len(data) - 4]
    truncations(out, 'syn', data, f, 3, data_cuts)


def real(out, path):
    with open(path, 'rb') as fh:
        data = fh.read()
    g = parse(data)
    again, f = serialize(g)
    assert again == data, '%s: this script does not write it back byte for byte' % path
    name = os.path.splitext(os.path.basename(path))[0]
    out.emit(name + '-copy', data, 'ok', '')
    header_lies(out, name, g, few=True)
    string_lies(out, name, g, ['general.architecture', 'tokenizer.ggml.tokens', 'tokenizer.ggml.scores'],
                [g.tensors[0].name], few=True)
    offset_lies(out, name, g, [g.tensors[0].name, g.tensors[-1].name])
    # a few cuts in the data: each copy is nearly the whole file
    starts = sorted(f[k] for k in f if isinstance(k, tuple) and k[0] == 't.data')
    data_cuts = [starts[0], starts[0] + 1, starts[len(starts) // 2], starts[-1], len(data) - 1]
    truncations(out, name, data, f, 97, data_cuts)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    for old in os.listdir(outdir):
        if old.endswith('.gguf') or old == 'manifest.tsv':
            os.remove(os.path.join(outdir, old))
    out = Out(outdir)
    synthetic(out)
    real_path = sys.argv[2] if len(sys.argv) > 2 else None
    if real_path and os.path.exists(real_path):
        real(out, real_path)
    else:
        out.lines.insert(0, '# no %s: its cuts and lies are not in this set' % (real_path or 'real model'))
    with open(os.path.join(outdir, 'manifest.tsv'), 'w') as fh:
        fh.write('\n'.join(out.lines) + '\n')
    print('make_hostile.py: %d files in %s' % (sum(1 for l in out.lines if not l.startswith('#')), outdir))


if __name__ == '__main__':
    main()

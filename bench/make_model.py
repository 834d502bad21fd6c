#!/usr/bin/env python3
"""Writes a random-weight GGUF model of a real model's shape, for benchmarks.

    python3 bench/make_model.py SHAPE TYPE [-o models/NAME.gguf]

SHAPE: smollm-135m, tinyllama-1.1b, llama-3.2-1b, qwen2.5-0.5b; the hybrids
       lfm2-350m, qwen3.5-0.8b and granite-4.0-h-350m (recurrent layers beside
       attention, as their public configs give them), qwen3.5-0.8b-attn (the
       same with every layer attending); gpt-oss-20b (TYPE mxfp4_moe only:
       experts MXFP4, the other matrices Q8_0, router and vectors F32, about
       12 GB, written a tensor at a time); test-draft and
       test-target, two small shapes of one vocabulary (speculation's tests)
TYPE:  f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1 (written directly), or
       any type `infer quantize` takes (q4_k, q5_k, q6_k, q4_k_m, q5_k_m):
       the F16 model is written first and then quantized with build/infer.

The weights are random (normal, std 0.02; norms 1), so the text is noise,
but every tensor has the real shape and format, which is what speed depends
on. The vocabulary is a synthetic SentencePiece one of the real size (byte
tokens, then placeholder pieces), so llama.cpp's tools load the file too.
Needs numpy and the gguf package (pip install numpy gguf).
"""
import argparse
import os
import subprocess
import sys

import numpy as np

try:
    import gguf
except ImportError:
    sys.exit("make_model.py needs the gguf package: python3 -m pip install gguf numpy")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SHAPES = {
    # dim, layers, heads, kv heads, ffn, vocab, tied, rope base, arch
    "smollm-135m": dict(dim=576, layers=30, heads=9, kv=3, ffn=1536, vocab=50257, tied=False, rope=10000.0, arch="llama"),
    "tinyllama-1.1b": dict(dim=2048, layers=22, heads=32, kv=4, ffn=5632, vocab=32000, tied=False, rope=10000.0, arch="llama"),
    "llama-3.2-1b": dict(dim=2048, layers=16, heads=32, kv=8, ffn=8192, vocab=128256, tied=True, rope=500000.0, arch="llama"),
    "qwen2.5-0.5b": dict(dim=896, layers=24, heads=14, kv=2, ffn=4864, vocab=151936, tied=True, rope=1000000.0, arch="qwen2"),
    # hybrids: `attn` lists the layers that attend (the rest are recurrent);
    # ssm: conv taps, inner width, state width, heads, groups
    "lfm2-350m": dict(dim=1024, layers=16, heads=16, kv=8, ffn=4608, vocab=65536, tied=True, rope=1000000.0,
                      arch="lfm2", attn=[2, 5, 8, 10, 12, 14], conv=3),
    "qwen3.5-0.8b": dict(dim=1024, layers=24, heads=8, kv=2, head_dim=256, ffn=3584, vocab=248320, tied=True,
                         rope=10000000.0, arch="qwen35", interval=4, n_rot=64, sections=[11, 11, 10, 0],
                         ssm=dict(conv=4, inner=2048, state=128, heads=16, groups=16)),
    # the same with every layer attending: what the recurrent layers save
    "qwen3.5-0.8b-attn": dict(dim=1024, layers=24, heads=8, kv=2, head_dim=256, ffn=3584, vocab=248320, tied=True,
                              rope=10000000.0, arch="qwen35", interval=1, n_rot=64, sections=[11, 11, 10, 0],
                              ssm=dict(conv=4, inner=2048, state=128, heads=16, groups=16)),
    "granite-4.0-h-350m": dict(dim=768, layers=32, heads=12, kv=4, ffn=2048, vocab=100352, tied=True, rope=10000.0,
                               arch="granitehybrid", attn=[10, 13, 17, 27],
                               ssm=dict(conv=4, inner=1536, state=128, heads=48, groups=1)),
    # gpt-oss-20b as OpenAI's config gives it: 24 layers of 32 experts (4 used),
    # 64 query heads of 64 over 8 KV heads, every other layer sliding over 128
    "gpt-oss-20b": dict(dim=2880, layers=24, heads=64, kv=8, head_dim=64, ffn=2880, vocab=201088, tied=False,
                        rope=150000.0, arch="gpt-oss", experts=32, used=4, window=128),
    # a pair of one (synthetic) vocabulary for tests: a draft and its target
    "test-draft": dict(dim=128, layers=2, heads=4, kv=2, ffn=256, vocab=512, tied=True, rope=10000.0, arch="llama"),
    "test-target": dict(dim=256, layers=4, heads=4, kv=4, ffn=512, vocab=512, tied=False, rope=10000.0, arch="llama"),
}
DIRECT = {
    "f32": gguf.GGMLQuantizationType.F32,
    "f16": gguf.GGMLQuantizationType.F16,
    "bf16": gguf.GGMLQuantizationType.BF16,
    "q8_0": gguf.GGMLQuantizationType.Q8_0,
    "q4_0": gguf.GGMLQuantizationType.Q4_0,
    "q4_1": gguf.GGMLQuantizationType.Q4_1,
    "q5_0": gguf.GGMLQuantizationType.Q5_0,
    "q5_1": gguf.GGMLQuantizationType.Q5_1,
}


def add_vocab(w, n_vocab):
    tokens = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)]
    types = [2, 3, 3] + [6] * 256
    for i in range(len(tokens), n_vocab):
        tokens.append("\u2581t%d" % i)
        types.append(1)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([-float(i) for i in range(n_vocab)])
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)


def write_hybrid_layer(s, l, p, mat, vec, f32):
    """Layer l of a hybrid: attention or its family's recurrent mixer, then the FFN."""
    dim, arch = s["dim"], s["arch"]
    hd = s.get("head_dim", dim // s["heads"])
    q_dim, kv_dim = s["heads"] * hd, s["kv"] * hd
    attends = (l + 1) % s["interval"] == 0 if "interval" in s else l in s["attn"]
    vec(p + "attn_norm.weight", dim)
    if attends:
        mat(p + "attn_q.weight", 2 * q_dim if arch == "qwen35" else q_dim, dim)
        mat(p + "attn_k.weight", kv_dim, dim)
        mat(p + "attn_v.weight", kv_dim, dim)
        mat(p + "attn_output.weight", dim, q_dim)
        if arch != "granitehybrid":
            vec(p + "attn_q_norm.weight", hd)
            vec(p + "attn_k_norm.weight", hd)
    elif arch == "lfm2":
        mat(p + "shortconv.in_proj.weight", 3 * dim, dim)
        f32(p + "shortconv.conv.weight", (dim, s["conv"]), 0.3)
        mat(p + "shortconv.out_proj.weight", dim, dim)
    else:
        m = s["ssm"]
        conv_ch = m["inner"] + 2 * m["groups"] * m["state"]
        heads = m["heads"]
        if arch == "qwen35":
            mat(p + "attn_qkv.weight", conv_ch, dim)
            mat(p + "attn_gate.weight", m["inner"], dim)
            mat(p + "ssm_beta.weight", heads, dim)
            mat(p + "ssm_alpha.weight", heads, dim)
            f32(p + "ssm_a", (heads,), -1.0)
            vec(p + "ssm_norm.weight", m["state"])
        else:
            mat(p + "ssm_in.weight", m["inner"] + conv_ch + heads, dim)
            f32(p + "ssm_conv1d.bias", (conv_ch,), 0.0)
            f32(p + "ssm_a", (heads, 1), -1.0)
            f32(p + "ssm_d", (heads, 1), 1.0)
            w_norm = np.ones((m["groups"], m["inner"] // m["groups"]), dtype=np.float32)
            f32(p + "ssm_norm.weight", w_norm.shape, 1.0)
        f32(p + "ssm_conv1d.weight", (conv_ch, m["conv"]), 0.3)
        f32(p + "ssm_dt.bias", (heads,), 0.0)
        mat(p + "ssm_out.weight", dim, m["inner"])
    vec(p + ("post_attention_norm.weight" if arch == "qwen35" else "ffn_norm.weight"), dim)
    mat(p + "ffn_gate.weight", s["ffn"], dim)
    mat(p + "ffn_up.weight", s["ffn"], dim)
    mat(p + "ffn_down.weight", dim, s["ffn"])


def write_hybrid_keys(w, s):
    """A hybrid's own metadata: which layers attend, the recurrent sizes, Granite's scales."""
    arch, hd = s["arch"], s.get("head_dim", s["dim"] // s["heads"])
    if "attn" in s:  # per-layer KV heads, 0 = recurrent
        w.add_array(arch + ".attention.head_count_kv", [s["kv"] if l in s["attn"] else 0 for l in range(s["layers"])])
    else:
        w.add_head_count_kv(s["kv"])
        w.add_uint32(arch + ".full_attention_interval", s["interval"])
    w.add_key_length(hd)
    w.add_value_length(hd)
    if arch == "lfm2":
        w.add_uint32("lfm2.shortconv.l_cache", s["conv"])
    else:
        m = s["ssm"]
        w.add_uint32(arch + ".ssm.conv_kernel", m["conv"])
        w.add_uint32(arch + ".ssm.inner_size", m["inner"])
        w.add_uint32(arch + ".ssm.state_size", m["state"])
        w.add_uint32(arch + ".ssm.time_step_rank", m["heads"])
        w.add_uint32(arch + ".ssm.group_count", m["groups"])
    if "sections" in s:
        w.add_array(arch + ".rope.dimension_sections", s["sections"])
    if arch == "granitehybrid":
        w.add_bool(arch + ".rope.scaling.finetuned", False)
        w.add_float32(arch + ".embedding_scale", 12.0)
        w.add_float32(arch + ".residual_scale", 0.246)
        w.add_float32(arch + ".attention.scale", 0.015625)
        w.add_float32(arch + ".logit_scale", 3.0)


def random_blocks(rng, qtype, rows, cols):
    """rows x cols values of random blocks, as bytes: Q8_0 (an F16 scale of
    about 0.02 / 64, int8 values) or MXFP4 (an exponent near 2^-7, random
    nibbles), without quantizing anything (the 20B shape's 12 GB would take
    hours)"""
    if qtype == gguf.GGMLQuantizationType.Q8_0:
        blocks = np.empty((rows, cols // 32, 34), dtype=np.uint8)
        blocks[:, :, :2] = np.frombuffer(np.float16(0.02 / 64).tobytes(), dtype=np.uint8)
        blocks[:, :, 2:] = rng.integers(0, 256, (rows, cols // 32, 32), dtype=np.uint8)
    else:
        blocks = rng.integers(0, 256, (rows, cols // 32, 17), dtype=np.uint8)
        blocks[:, :, 0] = rng.integers(119, 122, (rows, cols // 32), dtype=np.uint8)
    return blocks.reshape(rows, -1)


def write_gptoss(shape_name, path, seed):
    """gpt-oss in the MXFP4_MOE mix, streamed: the tensors' table first, then
    each tensor made and written in turn (one expert tensor is 141 MB)"""
    s = SHAPES[shape_name]
    rng = np.random.default_rng(seed)
    arch, dim, hd, ne = s["arch"], s["dim"], s["head_dim"], s["experts"]
    q_dim, kv_dim, effn = s["heads"] * hd, s["kv"] * hd, s["ffn"]
    Q8, MX = gguf.GGMLQuantizationType.Q8_0, gguf.GGMLQuantizationType.MXFP4
    w = gguf.GGUFWriter(path, arch)
    w.add_name("random-" + shape_name)
    w.add_context_length(131072)
    w.add_embedding_length(dim)
    w.add_block_count(s["layers"])
    w.add_feed_forward_length(effn)
    w.add_head_count(s["heads"])
    w.add_head_count_kv(s["kv"])
    w.add_key_length(hd)
    w.add_value_length(hd)
    w.add_rope_freq_base(s["rope"])
    w.add_string(arch + ".rope.scaling.type", "yarn")
    w.add_float32(arch + ".rope.scaling.factor", 32.0)
    w.add_uint32(arch + ".rope.scaling.original_context_length", 4096)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_uint32(arch + ".expert_count", ne)
    w.add_uint32(arch + ".expert_used_count", s["used"])
    w.add_uint32(arch + ".expert_feed_forward_length", effn)
    w.add_uint32(arch + ".attention.sliding_window", s["window"])
    w.add_vocab_size(s["vocab"])
    w.add_file_type(38)  # MOSTLY_MXFP4_MOE
    add_vocab(w, s["vocab"])
    todo = []  # (name, make): make() gives the tensor's array

    def mat(name, rows, cols, qtype, experts=0):
        def make():
            if experts:
                return np.stack([random_blocks(rng, qtype, rows, cols) for _ in range(experts)])
            return random_blocks(rng, qtype, rows, cols)
        shape = (experts, rows, cols // 32 * (34 if qtype == Q8 else 17)) if experts else (rows, cols // 32 * (34 if qtype == Q8 else 17))
        w.add_tensor_info(name, shape, np.dtype(np.uint8), int(np.prod(shape)), raw_dtype=qtype)
        todo.append(make)

    def f32(name, shape, value=None):
        def make():
            if value is not None:
                return np.full(shape, value, dtype=np.float32)
            return (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(np.float32)
        w.add_tensor_info(name, shape, np.dtype(np.float32), 4 * int(np.prod(shape)))
        todo.append(make)

    mat("token_embd.weight", s["vocab"], dim, Q8)
    f32("output_norm.weight", (dim,), 1.0)
    mat("output.weight", s["vocab"], dim, Q8)
    for l in range(s["layers"]):
        p = "blk.%d." % l
        f32(p + "attn_norm.weight", (dim,), 1.0)
        mat(p + "attn_q.weight", q_dim, dim, Q8)
        f32(p + "attn_q.bias", (q_dim,))
        mat(p + "attn_k.weight", kv_dim, dim, Q8)
        f32(p + "attn_k.bias", (kv_dim,))
        mat(p + "attn_v.weight", kv_dim, dim, Q8)
        f32(p + "attn_v.bias", (kv_dim,))
        mat(p + "attn_output.weight", dim, q_dim, Q8)
        f32(p + "attn_output.bias", (dim,))
        f32(p + "attn_sinks.weight", (s["heads"],))
        f32(p + "post_attention_norm.weight", (dim,), 1.0)
        f32(p + "ffn_gate_inp.weight", (ne, dim))
        f32(p + "ffn_gate_inp.bias", (ne,))
        mat(p + "ffn_gate_exps.weight", effn, dim, MX, ne)
        f32(p + "ffn_gate_exps.bias", (ne, effn))
        mat(p + "ffn_up_exps.weight", effn, dim, MX, ne)
        f32(p + "ffn_up_exps.bias", (ne, effn))
        mat(p + "ffn_down_exps.weight", dim, effn, MX, ne)
        f32(p + "ffn_down_exps.bias", (ne, dim))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for make in todo:
        w.write_tensor_data(make())
    w.close()


def write(shape_name, ftype, path, seed):
    s = SHAPES[shape_name]
    rng = np.random.default_rng(seed)
    qtype = DIRECT[ftype]
    w = gguf.GGUFWriter(path, s["arch"])
    head_dim = s["dim"] // s["heads"]
    w.add_name("random-" + shape_name)
    w.add_context_length(4096)
    w.add_embedding_length(s["dim"])
    w.add_block_count(s["layers"])
    w.add_feed_forward_length(s["ffn"])
    w.add_head_count(s["heads"])
    hybrid = s["arch"] in ("lfm2", "qwen35", "granitehybrid")
    if hybrid:
        write_hybrid_keys(w, s)
    else:
        w.add_head_count_kv(s["kv"])
    w.add_rope_dimension_count(s.get("n_rot", s.get("head_dim", head_dim)))
    w.add_rope_freq_base(s["rope"])
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(s["vocab"])
    w.add_file_type({"f32": 0, "f16": 1, "bf16": 32, "q8_0": 7, "q4_0": 2, "q4_1": 3, "q5_0": 8, "q5_1": 9}[ftype])
    add_vocab(w, s["vocab"])

    def mat(name, rows, cols):
        a = (rng.standard_normal((rows, cols), dtype=np.float32) * 0.02).astype(np.float32)
        if qtype in (gguf.GGMLQuantizationType.F32,):
            w.add_tensor(name, a)
        elif qtype == gguf.GGMLQuantizationType.F16:
            w.add_tensor(name, a.astype(np.float16))
        else:
            q = gguf.quants.quantize(a, qtype)
            w.add_tensor(name, q, raw_shape=q.shape, raw_dtype=qtype)

    def vec(name, n, value=1.0):
        w.add_tensor(name, np.full(n, value, dtype=np.float32))

    def f32(name, shape, scale):
        """an F32 parameter: scale times N(0, 1) where the value is a spread, else the constant scale"""
        if name.endswith("conv.weight") or name.endswith("conv1d.weight"):
            a = (rng.standard_normal(shape, dtype=np.float32) * scale).astype(np.float32)
        else:
            a = np.full(shape, scale, dtype=np.float32)
        w.add_tensor(name, a)

    kv_dim = s["kv"] * head_dim
    mat("token_embd.weight", s["vocab"], s["dim"])
    vec("token_embd_norm.weight" if s["arch"] == "lfm2" else "output_norm.weight", s["dim"])
    if not s["tied"]:
        mat("output.weight", s["vocab"], s["dim"])
    for l in range(s["layers"] if hybrid else 0):
        write_hybrid_layer(s, l, "blk.%d." % l, mat, vec, f32)
    for l in range(0 if hybrid else s["layers"]):
        p = "blk.%d." % l
        vec(p + "attn_norm.weight", s["dim"])
        mat(p + "attn_q.weight", s["dim"], s["dim"])
        mat(p + "attn_k.weight", kv_dim, s["dim"])
        mat(p + "attn_v.weight", kv_dim, s["dim"])
        if s["arch"] == "qwen2":
            vec(p + "attn_q.bias", s["dim"], 0.0)
            vec(p + "attn_k.bias", kv_dim, 0.0)
            vec(p + "attn_v.bias", kv_dim, 0.0)
        mat(p + "attn_output.weight", s["dim"], s["dim"])
        vec(p + "ffn_norm.weight", s["dim"])
        mat(p + "ffn_gate.weight", s["ffn"], s["dim"])
        mat(p + "ffn_up.weight", s["ffn"], s["dim"])
        mat(p + "ffn_down.weight", s["dim"], s["ffn"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("shape", choices=sorted(SHAPES))
    ap.add_argument("type")
    ap.add_argument("-o", "--output")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--infer", default=os.path.join(ROOT, "build", "infer"), help="infer binary for quantizing")
    a = ap.parse_args()
    ftype = a.type.lower()
    out = a.output or os.path.join(ROOT, "models", "%s-%s.gguf" % (a.shape, ftype))
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    if SHAPES[a.shape]["arch"] == "gpt-oss":
        if ftype != "mxfp4_moe":
            sys.exit("make_model.py: %s is written as mxfp4_moe only" % a.shape)
        write_gptoss(a.shape, out, a.seed)
    elif ftype in DIRECT:
        write(a.shape, ftype, out, a.seed)
    else:
        src = os.path.join(os.path.dirname(os.path.abspath(out)), "%s-f16.gguf" % a.shape)
        if not os.path.exists(src):
            write(a.shape, "f16", src, a.seed)
        subprocess.check_call([a.infer, "quantize", src, out, ftype.upper()])
    print(out)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Writes a random-weight GGUF model of a real model's shape, for benchmarks.

    python3 bench/make_model.py SHAPE TYPE [-o models/NAME.gguf]

SHAPE: smollm-135m, tinyllama-1.1b, llama-3.2-1b, qwen2.5-0.5b; the hybrids
       lfm2-350m, qwen3.5-0.8b and granite-4.0-h-350m (recurrent layers beside
       attention, as their public configs give them), qwen3.5-0.8b-attn (the
       same with every layer attending); gpt-oss-20b (TYPE mxfp4_moe only:
       experts MXFP4, the other matrices Q8_0, router and vectors F32, about
       12 GB, written a tensor at a time); gemma3n-e2b and gemma4-e2b
       (TYPE q4_k_m or q8_0 only: the text decoders of Gemma 3n E2B and
       Gemma 4 E2B with their per-layer embeddings, altup and laurel (3n),
       KV-sharing layers and sliding/full head sizes (4), in the type mix
       llama.cpp's quantize gives them, written a tensor at a time, 3 to
       5 GB); test-draft and
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
    # Gemma 3n E2B, the text decoder of google/gemma-3n-E2B-it (its config.json's
    # text_config is not in reach here; the numbers agree in three public
    # transcriptions of it: ai-edge-torch's gemma3n get_model_config_e2b, an
    # mlx test's "_text()" fixture for google/gemma-3n-E2B-it @ 5e092ebca197,
    # and a transformers-config patch list): hidden 2048, 30 layers, 8 heads
    # of 256 over 2 KV heads, FFN 8192 on every layer, vocab 262400 (262144
    # text + 256 vision/audio slots; llama.cpp's converter pads both
    # embeddings to it), per-layer input 256, altup 4 (active 0), laurel rank
    # 64, the last 10 layers share KV, sliding window 512, every 5th layer
    # global (layer_types), rope 1e6 global / 1e4 local, RMS eps 1e-6, final
    # logit softcap 30, context 32768, activation sparsity 0.95 on the first
    # 10 layers, embeddings tied
    "gemma3n-e2b": dict(dim=2048, layers=30, heads=8, kv=2, head_dim=256, ffn=8192, vocab=262400, tied=True,
                        rope=1000000.0, rope_swa=10000.0, arch="gemma3n", ctx=32768, window=512, period=5,
                        shared_kv=10, per_layer=256, altup=4, laurel=64, sparse_layers=10, softcap=30.0),
    # Gemma 4 E2B, the text decoder of google/gemma-4-E2B-it (config.json's
    # text_config as quoted whole in public test fixtures, e.g. one marked
    # "Minimal text_config mirroring the Gemma 4 E2B real checkpoint", and in
    # a KerasHub-style preset "gemma4_2b"): hidden 1536, 35 layers, 8 heads
    # over 1 KV head (num_global_key_value_heads null), head 256 on sliding
    # layers and global_head_dim 512 on full ones, every 5th layer full,
    # intermediate 6144 with use_double_wide_mlp (12288 on the 20 KV-sharing
    # layers 15..34; a checkpoint shape [1536, 12288] is quoted for layer 34),
    # vocab 262144, per-layer input 256, sliding window 512, rope 1e6
    # (proportional, partial_rotary_factor 0.25) global / 1e4 local, RMS eps
    # 1e-6, final logit softcap 30, context 131072, attention_k_eq_v false,
    # no MoE, embeddings tied
    "gemma4-e2b": dict(dim=1536, layers=35, heads=8, kv=1, head_dim=256, head_dim_full=512, ffn=6144, vocab=262144,
                       tied=True, rope=1000000.0, rope_swa=10000.0, arch="gemma4", ctx=131072, window=512, period=5,
                       shared_kv=20, per_layer=256, double_wide=True, rotary_full=0.25, softcap=30.0),
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
    elif qtype == gguf.GGMLQuantizationType.MXFP4:
        blocks = rng.integers(0, 256, (rows, cols // 32, 17), dtype=np.uint8)
        blocks[:, :, 0] = rng.integers(119, 122, (rows, cols // 32), dtype=np.uint8)
    else:
        # Q4_K (d, dmin, 12 bytes of 6-bit scales, 128 of nibbles) or Q6_K
        # (ql, qh, 16 int8 scales, d last): random bytes with small F16
        # super-block scales, so the values stay of the order of 0.02
        block, size = gguf.GGML_QUANT_SIZES[qtype]
        blocks = rng.integers(0, 256, (rows, cols // block, size), dtype=np.uint8)
        if qtype == gguf.GGMLQuantizationType.Q4_K:
            blocks[:, :, 0:2] = np.frombuffer(np.float16(0.02 / 512).tobytes(), dtype=np.uint8)
            blocks[:, :, 2:4] = np.frombuffer(np.float16(0.02 / 64).tobytes(), dtype=np.uint8)
        else:
            blocks[:, :, 208:210] = np.frombuffer(np.float16(0.02 / 1024).tobytes(), dtype=np.uint8)
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


def gemma_mix(ftype, name, layer, n_layer):
    """The type llama.cpp's quantize gives a Gemma 3n/4 matrix: the
    embeddings (tied, so quantized as the output) Q6_K in Q4_K_M; attn_v and
    ffn_down Q6_K on use_more_bits' layers; the rest Q4_K (Q8_0 throughout
    in q8_0)"""
    Q8, Q4K, Q6K = gguf.GGMLQuantizationType.Q8_0, gguf.GGMLQuantizationType.Q4_K, gguf.GGMLQuantizationType.Q6_K
    if ftype == "q8_0":
        return Q8
    if name.endswith("token_embd.weight"):
        return Q6K
    more_bits = layer < n_layer // 8 or layer >= 7 * n_layer // 8 or (layer - n_layer // 8) % 3 == 2
    if (name.endswith("attn_v.weight") or name.endswith("ffn_down.weight")) and more_bits:
        return Q6K
    return Q4K


def write_gemma(shape_name, ftype, path, seed):
    """Gemma 3n or Gemma 4 (the text decoder), streamed as gpt-oss is: the
    keys llama.cpp's converter writes, then the tensors load_arch_tensors
    asks for, each made and written in turn. Matrices in the Q4_K_M or Q8_0
    mix of llama.cpp's quantize; what it leaves alone (altup, laurel,
    per_layer_model_proj) as an F16 conversion writes it (F16, the altup
    coefficients F32); vectors F32."""
    s = SHAPES[shape_name]
    rng = np.random.default_rng(seed)
    arch, dim, n_layer, n_vocab, n_pl = s["arch"], s["dim"], s["layers"], s["vocab"], s["per_layer"]
    F16, F32 = gguf.GGMLQuantizationType.F16, gguf.GGMLQuantizationType.F32
    # layer_types: every period-th layer full attention, the rest sliding
    swa = [(l + 1) % s["period"] != 0 for l in range(n_layer)]
    first_shared = n_layer - s["shared_kv"]
    hd_swa = s["head_dim"]
    hd_full = s.get("head_dim_full", hd_swa)
    ffn = [s["ffn"] * (2 if s.get("double_wide") and l >= first_shared else 1) for l in range(n_layer)]
    w = gguf.GGUFWriter(path, arch)
    w.add_name("random-" + shape_name)
    w.add_context_length(s["ctx"])
    w.add_embedding_length(dim)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(ffn)
    w.add_head_count(s["heads"])
    w.add_head_count_kv(s["kv"])
    w.add_rope_freq_base(s["rope"])
    w.add_rope_freq_base_swa(s["rope_swa"])
    w.add_layer_norm_rms_eps(1e-6)
    w.add_key_length(hd_full)
    w.add_value_length(hd_full)
    w.add_final_logit_softcapping(s["softcap"])
    w.add_sliding_window(s["window"])
    w.add_shared_kv_layers(s["shared_kv"])
    w.add_embedding_length_per_layer_input(n_pl)
    w.add_sliding_window_pattern(swa)
    if arch == "gemma3n":
        w.add_altup_active_idx(0)
        w.add_altup_num_inputs(s["altup"])
        # the converter writes Normal(0, 1).icdf(p) of activation_sparsity_pattern:
        # 0.95 on the first layers, 0.0 (so -inf) on the rest
        w.add_activation_sparsity_scale([1.6448536 if l < s["sparse_layers"] else float("-inf") for l in range(n_layer)])
    else:
        w.add_key_length_swa(hd_swa)
        w.add_value_length_swa(hd_swa)
        w.add_rope_dimension_count(hd_full)  # full layers rotate through rope_freqs
        w.add_rope_dimension_count_swa(hd_swa)
    w.add_vocab_size(n_vocab)
    w.add_file_type({"q8_0": 7, "q4_k_m": 15}[ftype])
    add_vocab(w, n_vocab)
    todo = []  # make() for each tensor, in the order of the table

    def info(name, shape, dtype, nbytes, qtype):
        w.add_tensor_info(name, shape, np.dtype(dtype), nbytes, raw_dtype=qtype)

    def mat(name, rows, cols, layer=0):
        """a rows x cols matrix (ggml's ne = {cols, rows}) of the mix's type"""
        qtype = gemma_mix(ftype, name, layer, n_layer)
        block, size = gguf.GGML_QUANT_SIZES[qtype]
        assert cols % block == 0, name
        shape = (rows, cols // block * size)
        info(name, shape, np.uint8, rows * (cols // block) * size, qtype)
        todo.append(lambda: random_blocks(rng, qtype, rows, cols))

    def f16(name, shape):
        """a matrix quantize leaves alone, F16 as converted"""
        info(name, shape, np.float16, 2 * int(np.prod(shape)), F16)
        todo.append(lambda: (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(np.float16))

    def f32(name, values):
        a = np.asarray(values, dtype=np.float32)
        info(name, a.shape, np.float32, a.nbytes, F32)
        todo.append(lambda: a)

    def ones(name, n):
        f32(name, np.ones(n, dtype=np.float32))

    mat("token_embd.weight", n_vocab, dim)
    mat("per_layer_token_embd.weight", n_vocab, n_pl * n_layer)
    f16("per_layer_model_proj.weight", (n_pl * n_layer, dim))
    ones("per_layer_proj_norm.weight", n_pl)
    ones("output_norm.weight", dim)
    if arch == "gemma3n":
        f16("altup_proj.weight", (s["altup"] - 1, dim, dim))
        f16("altup_unembd_proj.weight", (s["altup"] - 1, dim, dim))
    else:
        # proportional rope: the full layers rotate the first quarter of
        # their pairs and leave the rest (a factor of 1e30) still
        n_rot = int(hd_full * s["rotary_full"] / 2)
        f32("rope_freqs.weight", [1.0] * n_rot + [1e30] * (hd_full // 2 - n_rot))
    for l in range(n_layer):
        p = "blk.%d." % l
        hd = hd_swa if swa[l] else hd_full
        q_dim, kv_dim = s["heads"] * hd, s["kv"] * hd
        ones(p + "attn_norm.weight", dim)
        mat(p + "attn_q.weight", q_dim, dim, l)
        # the KV-sharing layers keep their own K and V in the checkpoint
        # (llama.cpp loads them if present, optional in Gemma 4, and reads
        # the cache of an earlier layer)
        mat(p + "attn_k.weight", kv_dim, dim, l)
        mat(p + "attn_v.weight", kv_dim, dim, l)
        mat(p + "attn_output.weight", dim, q_dim, l)
        ones(p + "attn_q_norm.weight", hd)
        ones(p + "attn_k_norm.weight", hd)
        ones(p + "post_attention_norm.weight", dim)
        ones(p + "ffn_norm.weight", dim)
        mat(p + "ffn_gate.weight", ffn[l], dim, l)
        mat(p + "ffn_up.weight", ffn[l], dim, l)
        mat(p + "ffn_down.weight", dim, ffn[l], l)
        ones(p + "post_ffw_norm.weight", dim)
        mat(p + "inp_gate.weight", n_pl, dim, l)
        mat(p + "proj.weight", dim, n_pl, l)
        ones(p + "post_norm.weight", dim)
        if arch == "gemma3n":
            n_alt = s["altup"]
            # the converter keeps the two 4-wide coefficient tables F32
            f32(p + "altup_correct_coef.weight", rng.standard_normal((n_alt, n_alt), dtype=np.float32) * 0.02)
            ones(p + "altup_correct_scale.weight", dim)
            f32(p + "altup_predict_coef.weight", rng.standard_normal((n_alt * n_alt, n_alt), dtype=np.float32) * 0.02)
            f16(p + "altup_router.weight", (n_alt, dim))
            ones(p + "altup_router_norm.weight", dim)
            f16(p + "laurel_l.weight", (s["laurel"], dim))
            f16(p + "laurel_r.weight", (dim, s["laurel"]))
            ones(p + "laurel_post_norm.weight", dim)
        else:
            ones(p + "layer_output_scale.weight", 1)  # layer_scalar
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
    elif SHAPES[a.shape]["arch"] in ("gemma3n", "gemma4"):
        if ftype not in ("q4_k_m", "q8_0"):
            sys.exit("make_model.py: %s is written as q4_k_m or q8_0 only" % a.shape)
        write_gemma(a.shape, ftype, out, a.seed)
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

/* test_arch.c - the architectures' models checked at load. Every model of
   ../shared/arch loads and says its architecture; then each is copied
   with one key or tensor changed (or a few, where one change alone would
   be caught by an earlier check) so that its metadata contradicts its
   tensors or holds an impossible value, and the copy must be refused with
   the status the loader gives that kind of problem and a one-line message
   that names the key or tensor, never a crash. The copies are written
   here, in memory (a GGUF rewriter over the reader's own tables), each in a
   heap block of exactly its size, so a read past the end or a leak shows
   under the sanitizers. Last, every numeric key of each model (and the
   optional ones it lacks) is set to values at and past its edges: each
   copy is refused in one line or loads and decodes. */
#define _XOPEN_SOURCE 700 /* open_memstream */
#include "infer_private.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static const char *const ARCH_MODELS[] = {"qwen2",  "qwen3", "qwen3moe", "gemma",      "gemma2", "gemma3",
                                          "phi3",   "smollm3", "llama3", "llama-tied", "gemma3n",
                                          "gemma4"};
#define N_ARCH_MODELS (int)(sizeof ARCH_MODELS / sizeof ARCH_MODELS[0])

static void need_shared(void) {
    if (!tu_have_shared()) cr_skip_test("../shared is absent: no arch models");
}

static void model_path(char *buf, size_t size, const char *model) {
    char rel[128];
    snprintf(rel, sizeof rel, "arch/synth-%s-f16.gguf", model);
    tu_shared_path(buf, size, rel);
}

/* ---- a real model with a change ------------------------------------------ */

typedef enum change_kind {
    SET_U32,     /* key = (uint32) num; added where the file lacks it */
    SET_F32,     /* key = (float) num */
    SET_F64,     /* key = num as float64 */
    SET_STR,     /* key = str */
    SET_ARR,     /* key = [num, num] as int32 (a per-layer array) */
    DROP_KEY,    /* key removed */
    DROP_TENSOR, /* tensor removed */
    ADD_TENSOR,  /* tensor added: F32, shape ne, zeros */
    RESHAPE      /* tensor given shape ne: its bytes cut, or padded with zeros */
} change_kind;

typedef struct change {
    change_kind kind;
    const char *name; /* the key or tensor */
    double num;
    const char *str;
    int64_t ne[3]; /* ADD_TENSOR, RESHAPE: the shape, 0 past its last dimension */
} change;

/* The changes, as REFUSED and CHANGES take them */
#define U32(key, v) {.kind = SET_U32, .name = key, .num = v}
#define F32(key, v) {.kind = SET_F32, .name = key, .num = v}
#define F64(key, v) {.kind = SET_F64, .name = key, .num = v}
#define STR(key, s) {.kind = SET_STR, .name = key, .str = s}
#define ARR(key, v) {.kind = SET_ARR, .name = key, .num = v}
#define NO_KEY(key) {.kind = DROP_KEY, .name = key}
#define NO_TENSOR(t) {.kind = DROP_TENSOR, .name = t}
#define ADD(t, ...) {.kind = ADD_TENSOR, .name = t, .ne = {__VA_ARGS__}}
#define RESHAPED(t, ...) {.kind = RESHAPE, .name = t, .ne = {__VA_ARGS__}}

static int is_tensor_change(change_kind k) { return k == DROP_TENSOR || k == ADD_TENSOR || k == RESHAPE; }

static const change *find_change(const change *ch, int n, const char *name, int tensor) {
    int i;
    for (i = 0; i < n; i++)
        if (is_tensor_change(ch[i].kind) == tensor && !strcmp(ch[i].name, name)) return &ch[i];
    return NULL;
}

static void put(FILE *f, const void *p, size_t n) { cr_assert_eq(fwrite(p, 1, n, f), n); }
static void put_u32(FILE *f, uint32_t v) { put(f, &v, 4); }
static void put_u64(FILE *f, uint64_t v) { put(f, &v, 8); }
static void put_str(FILE *f, const char *s, uint64_t n) {
    put_u64(f, n);
    put(f, s, (size_t)n);
}
static void put_zeros(FILE *f, size_t n) {
    static const uint8_t zeros[4096];
    for (; n > sizeof zeros; n -= sizeof zeros) put(f, zeros, sizeof zeros);
    put(f, zeros, n);
}

/* A key as the file has it (its value's bytes are where the reader left them). */
static void put_kv(FILE *f, const infer__kv *kv) {
    uint64_t i, n;
    put_str(f, kv->key, strlen(kv->key));
    put_u32(f, (uint32_t)kv->type);
    if (kv->type == INFER_GGUF_TYPE_STRING) {
        memcpy(&n, kv->data, 8);
        put(f, kv->data, 8 + (size_t)n);
    } else if (kv->type != INFER_GGUF_TYPE_ARRAY) {
        put(f, kv->data, infer__gguf_scalar_size(kv->type));
    } else {
        put_u32(f, (uint32_t)kv->arr_type);
        put_u64(f, kv->arr_n);
        if (kv->arr_type != INFER_GGUF_TYPE_STRING) put(f, kv->data, (size_t)kv->arr_n * infer__gguf_scalar_size(kv->arr_type));
        else
            for (i = 0; i < kv->arr_n; i++) put_str(f, kv->strs[i].p, kv->strs[i].n);
    }
}

/* A key as a change sets it. */
static void put_set_kv(FILE *f, const change *c) {
    float f32 = (float)c->num;
    int32_t i32 = (int32_t)c->num;
    put_str(f, c->name, strlen(c->name));
    switch (c->kind) {
    case SET_U32: put_u32(f, INFER_GGUF_TYPE_UINT32), put_u32(f, (uint32_t)c->num); break;
    case SET_F32: put_u32(f, INFER_GGUF_TYPE_FLOAT32), put(f, &f32, 4); break;
    case SET_F64: put_u32(f, INFER_GGUF_TYPE_FLOAT64), put(f, &c->num, 8); break;
    case SET_STR: put_u32(f, INFER_GGUF_TYPE_STRING), put_str(f, c->str, strlen(c->str)); break;
    case SET_ARR:
        put_u32(f, INFER_GGUF_TYPE_ARRAY), put_u32(f, INFER_GGUF_TYPE_INT32), put_u64(f, 2);
        put(f, &i32, 4), put(f, &i32, 4);
        break;
    default: cr_assert_fail("not a key change");
    }
}

typedef struct out_tensor {
    const char *name;
    infer_type type;
    int n_dims;
    int64_t ne[4];
    const void *src; /* NULL: zeros */
    size_t src_bytes, nbytes;
    uint64_t offset;
} out_tensor;

/* A tensor of shape ne (0 past the last dimension). */
static void shape_tensor(out_tensor *t, const int64_t *ne) {
    int d;
    t->n_dims = 0;
    for (d = 0; d < 4; d++) t->ne[d] = 1;
    for (d = 0; d < 3 && ne[d]; d++) t->ne[t->n_dims++] = ne[d];
}

/* ../shared/arch/synth-MODEL-f16.gguf with the changes made, as a GGUF
   file in a heap block of exactly its size. */
static uint8_t *rewrite(const char *model, const change *ch, int n_ch, size_t *size) {
    char path[512];
    infer_error err;
    infer_gguf *g;
    FILE *f;
    char *buf = NULL;
    size_t len = 0;
    uint8_t *file;
    out_tensor *ts;
    uint64_t n_kv = 0, at = 0;
    int64_t i;
    int n_t = 0, c, j;

    model_path(path, sizeof path, model);
    g = infer_gguf_open(path, &err);
    cr_assert_not_null(g, "%s: %s", path, err.msg);
    ts = (out_tensor *)calloc((size_t)(g->n_tensors + n_ch), sizeof *ts);
    cr_assert_not_null(ts);
    for (i = 0; i < g->n_tensors; i++) {
        const infer__tensor *s = &g->tensors[i];
        const change *c1 = find_change(ch, n_ch, s->name, 1);
        out_tensor *t = &ts[n_t];
        if (c1 && c1->kind == DROP_TENSOR) continue;
        t->name = s->name, t->type = s->type, t->n_dims = s->n_dims;
        memcpy(t->ne, s->ne, sizeof t->ne);
        t->src = s->data, t->src_bytes = s->nbytes;
        if (c1 && c1->kind == RESHAPE) shape_tensor(t, c1->ne);
        n_t++;
    }
    for (c = 0; c < n_ch; c++)
        if (ch[c].kind == ADD_TENSOR) {
            cr_assert_lt(infer_gguf_find_tensor(g, ch[c].name), 0, "%s already has %s", model, ch[c].name);
            ts[n_t].name = ch[c].name, ts[n_t].type = INFER_TYPE_F32;
            shape_tensor(&ts[n_t++], ch[c].ne);
        }
    for (j = 0; j < n_t; j++) {
        ts[j].nbytes = infer__row_size(ts[j].type, ts[j].ne[0]) * (size_t)(ts[j].ne[1] * ts[j].ne[2] * ts[j].ne[3]);
        ts[j].offset = at;
        at = (at + ts[j].nbytes + g->alignment - 1) / g->alignment * g->alignment;
    }
    for (i = 0; i < g->n_kv; i++) n_kv += !find_change(ch, n_ch, g->kv[i].key, 0);
    for (c = 0; c < n_ch; c++)
        if (!is_tensor_change(ch[c].kind)) n_kv += ch[c].kind != DROP_KEY;

    f = open_memstream(&buf, &len);
    cr_assert_not_null(f);
    put(f, "GGUF", 4);
    put_u32(f, 3);
    put_u64(f, (uint64_t)n_t);
    put_u64(f, n_kv);
    for (i = 0; i < g->n_kv; i++)
        if (!find_change(ch, n_ch, g->kv[i].key, 0)) put_kv(f, &g->kv[i]);
    for (c = 0; c < n_ch; c++)
        if (!is_tensor_change(ch[c].kind) && ch[c].kind != DROP_KEY) put_set_kv(f, &ch[c]);
    for (j = 0; j < n_t; j++) {
        put_str(f, ts[j].name, strlen(ts[j].name));
        put_u32(f, (uint32_t)ts[j].n_dims);
        for (c = 0; c < ts[j].n_dims; c++) put_u64(f, (uint64_t)ts[j].ne[c]);
        put_u32(f, (uint32_t)ts[j].type);
        put_u64(f, ts[j].offset);
    }
    fflush(f);
    put_zeros(f, (size_t)((len + g->alignment - 1) / g->alignment * g->alignment - len));
    fflush(f);
    at = len;
    for (j = 0; j < n_t; j++) {
        size_t keep = ts[j].src_bytes < ts[j].nbytes ? ts[j].src_bytes : ts[j].nbytes;
        fflush(f);
        put_zeros(f, (size_t)(at + ts[j].offset - len));
        if (keep) put(f, ts[j].src, keep);
        put_zeros(f, ts[j].nbytes - keep);
    }
    cr_assert_eq(fclose(f), 0);
    file = (uint8_t *)malloc(len);
    cr_assert_not_null(file);
    memcpy(file, buf, len);
    free(buf);
    free(ts);
    infer_gguf_close(g);
    *size = len;
    return file;
}

/* ---- loading ---------------------------------------------------------------- */

static infer_model *load_memory(const uint8_t *file, size_t size, infer_error *err) {
    infer_model_params mp = infer_model_default_params();
    mp.device = INFER_DEVICE_CPU;
    memset(err, 0, sizeof *err);
    return infer_model_load_memory(file, size, &mp, err);
}

/* MODEL with the changes is refused with `code` in one line naming `want`
   (and `also`, where not NULL). */
static void refused_ex(const char *model, const change *ch, int n_ch, infer_status code, const char *want,
                       const char *also) {
    size_t size;
    uint8_t *file = rewrite(model, ch, n_ch, &size);
    infer_error err;
    infer_model *m = load_memory(file, size, &err);
    cr_assert_null(m, "%s with %s changed: loaded", model, ch[0].name);
    cr_expect_eq(err.code, code, "%s with %s changed: status %d, expected %d (%s)", model, ch[0].name, (int)err.code,
                 (int)code, err.msg);
    cr_expect(strstr(err.msg, want) != NULL, "%s with %s changed: '%s' does not name %s", model, ch[0].name, err.msg,
              want);
    if (also) cr_expect(strstr(err.msg, also) != NULL, "%s: '%s' does not name %s", model, err.msg, also);
    cr_expect(err.msg[0] && !strchr(err.msg, '\n'), "%s: not one line: '%s'", model, err.msg);
    cr_log_info("%s, %s changed: %s", model, ch[0].name, err.msg);
    free(file);
}

#define CHANGES(...) (const change[]){__VA_ARGS__}, (int)(sizeof((const change[]){__VA_ARGS__}) / sizeof(change))
/* REFUSED(model, status, name, change...) */
#define REFUSED(model, code, want, ...) refused_ex(model, CHANGES(__VA_ARGS__), code, want, NULL)

/* ---- tests ------------------------------------------------------------------ */

/* Every arch model loads, says its architecture, and loads again after a
   rewrite that changes nothing (the rewriter itself is sound). */
Test(arch, every_model_loads) {
    int i;
    need_shared();
    for (i = 0; i < N_ARCH_MODELS; i++) {
        const char *name = ARCH_MODELS[i];
        const char *arch = !strncmp(name, "llama", 5) ? "llama" : name;
        char path[512], desc[512], want[64], desc2[512];
        infer_error err;
        infer_model *m;
        size_t size;
        uint8_t *file;
        model_path(path, sizeof path, name);
        m = infer_model_load(path, NULL, &err);
        cr_assert_not_null(m, "%s: %s", name, err.msg);
        infer_model_describe(m, desc, sizeof desc, NULL, NULL);
        snprintf(want, sizeof want, "%s: ", arch);
        cr_expect_eq(strncmp(desc, want, strlen(want)), 0, "%s is described as '%s'", name, desc);
        infer_model_free(m);

        file = rewrite(name, NULL, 0, &size);
        m = load_memory(file, size, &err);
        cr_assert_not_null(m, "%s rewritten: %s", name, err.msg);
        infer_model_describe(m, desc2, sizeof desc2, NULL, NULL);
        cr_expect_str_eq(desc2, desc, "%s rewritten", name);
        infer_model_free(m);
        free(file);
    }
}

Test(arch, head_counts_against_shapes) {
    need_shared();
    /* heads of 64 from key_length: fewer heads make q narrower than attn_q */
    REFUSED("qwen3", INFER_ERR_FORMAT, "blk.0.attn_q.weight", U32("qwen3.attention.head_count", 4));
    REFUSED("llama-tied", INFER_ERR_FORMAT, "blk.0.attn_q.weight", U32("llama.attention.head_count", 2));
    REFUSED("qwen3", INFER_ERR_FORMAT, "blk.0.attn_k.weight", U32("qwen3.attention.head_count_kv", 4));
    REFUSED("qwen2", INFER_ERR_FORMAT, "blk.0.attn_k.weight", U32("qwen2.attention.head_count_kv", 1));
    REFUSED("qwen3moe", INFER_ERR_FORMAT, "blk.0.attn_k.weight", U32("qwen3moe.attention.head_count_kv", 1));
    REFUSED("phi3", INFER_ERR_FORMAT, "blk.0.attn_qkv.weight", U32("phi3.attention.head_count", 8));
    /* heads that do not share KV heads evenly */
    REFUSED("qwen3", INFER_ERR_FORMAT, "qwen3.attention.head_count", U32("qwen3.attention.head_count_kv", 3));
    REFUSED("gemma", INFER_ERR_FORMAT, "gemma.attention.head_count", U32("gemma.attention.head_count_kv", 8));
    REFUSED("smollm3", INFER_ERR_FORMAT, "smollm3.attention.head_count", U32("smollm3.attention.head_count", 0));
    /* heads of 128 that q, k and v still fit (4 x 128 = 8 x 64, 1 x 128 =
       2 x 64), but the per-head norms are 64 */
    refused_ex("qwen3",
               CHANGES(U32("qwen3.attention.key_length", 128), U32("qwen3.attention.value_length", 128),
                       U32("qwen3.attention.head_count", 4), U32("qwen3.attention.head_count_kv", 1)),
               INFER_ERR_FORMAT, "blk.0.attn_q_norm.weight", "128");
    refused_ex("gemma3",
               CHANGES(U32("gemma3.attention.key_length", 128), U32("gemma3.attention.value_length", 128),
                       U32("gemma3.attention.head_count", 2), U32("gemma3.attention.head_count_kv", 1)),
               INFER_ERR_FORMAT, "blk.0.attn_q_norm.weight", "128");
    /* or the norm itself of another size */
    REFUSED("qwen3", INFER_ERR_FORMAT, "blk.1.attn_k_norm.weight", RESHAPED("blk.1.attn_k_norm.weight", 32));
    REFUSED("qwen3moe", INFER_ERR_FORMAT, "blk.0.attn_q_norm.weight", RESHAPED("blk.0.attn_q_norm.weight", 128));
    /* value heads of another size than key heads */
    REFUSED("qwen3", INFER_ERR_UNSUPPORTED, "qwen3.attention.value_length",
            U32("qwen3.attention.value_length", 32));
    /* RoPE over more dimensions than a head has */
    REFUSED("gemma2", INFER_ERR_FORMAT, "gemma2.rope.dimension_count", U32("gemma2.rope.dimension_count", 128));
}

/* One of each kind of requirement: a tensor of the architecture's
   features, of unfused attention, of experts, of every layer, and the
   model's own. */
Test(arch, missing_required_tensor) {
    need_shared();
    REFUSED("qwen3", INFER_ERR_FORMAT, "blk.1.attn_q_norm.weight", NO_TENSOR("blk.1.attn_q_norm.weight"));
    REFUSED("gemma3", INFER_ERR_FORMAT, "blk.0.attn_q_norm.weight", NO_TENSOR("blk.0.attn_q_norm.weight"));
    REFUSED("gemma3", INFER_ERR_FORMAT, "blk.5.attn_k_norm.weight", NO_TENSOR("blk.5.attn_k_norm.weight"));
    REFUSED("gemma2", INFER_ERR_FORMAT, "blk.3.post_ffw_norm.weight", NO_TENSOR("blk.3.post_ffw_norm.weight"));
    REFUSED("gemma3", INFER_ERR_FORMAT, "blk.0.post_ffw_norm.weight", NO_TENSOR("blk.0.post_ffw_norm.weight"));
    REFUSED("gemma2", INFER_ERR_FORMAT, "blk.1.post_attention_norm.weight",
            NO_TENSOR("blk.1.post_attention_norm.weight"));
    REFUSED("qwen2", INFER_ERR_FORMAT, "blk.0.attn_q.bias", NO_TENSOR("blk.0.attn_q.bias"));
    REFUSED("qwen2", INFER_ERR_FORMAT, "blk.1.attn_v.bias", NO_TENSOR("blk.1.attn_v.bias"));
    REFUSED("qwen3moe", INFER_ERR_FORMAT, "blk.0.ffn_gate_exps.weight", NO_TENSOR("blk.0.ffn_gate_exps.weight"));
    REFUSED("qwen3moe", INFER_ERR_FORMAT, "blk.1.ffn_gate_inp.weight", NO_TENSOR("blk.1.ffn_gate_inp.weight"));
    /* phi3 with neither the fused attn_qkv nor attn_q */
    refused_ex("phi3", CHANGES(NO_TENSOR("blk.1.attn_qkv.weight")), INFER_ERR_FORMAT, "blk.1.attn_q.weight",
               "blk.1.attn_qkv.weight");
    REFUSED("llama3", INFER_ERR_FORMAT, "blk.1.ffn_down.weight", NO_TENSOR("blk.1.ffn_down.weight"));
    REFUSED("smollm3", INFER_ERR_FORMAT, "blk.2.attn_norm.weight", NO_TENSOR("blk.2.attn_norm.weight"));
    REFUSED("gemma", INFER_ERR_FORMAT, "output_norm.weight", NO_TENSOR("output_norm.weight"));
    REFUSED("llama-tied", INFER_ERR_FORMAT, "token_embd.weight", NO_TENSOR("token_embd.weight"));
    /* a layer more than the file has */
    REFUSED("qwen2", INFER_ERR_FORMAT, "blk.2.", U32("qwen2.block_count", 3));
    /* Gemma 3n's: AltUp's, LAuReL's, the per-layer inputs' */
    REFUSED("gemma3n", INFER_ERR_FORMAT, "altup_unembd_proj.weight", NO_TENSOR("altup_unembd_proj.weight"));
    REFUSED("gemma3n", INFER_ERR_FORMAT, "blk.7.altup_predict_coef.weight", NO_TENSOR("blk.7.altup_predict_coef.weight"));
    REFUSED("gemma3n", INFER_ERR_FORMAT, "blk.3.laurel_r.weight", NO_TENSOR("blk.3.laurel_r.weight"));
    REFUSED("gemma3n", INFER_ERR_FORMAT, "per_layer_token_embd.weight", NO_TENSOR("per_layer_token_embd.weight"));
    REFUSED("gemma3n", INFER_ERR_FORMAT, "blk.24.inp_gate.weight", NO_TENSOR("blk.24.inp_gate.weight"));
    /* and of another width than the per-layer input's */
    REFUSED("gemma3n", INFER_ERR_FORMAT, "per_layer_token_embd.weight",
            U32("gemma3n.embedding_length_per_layer_input", 128));
    REFUSED("gemma3n", INFER_ERR_FORMAT, "gemma3n.embedding_length_per_layer_input",
            NO_KEY("gemma3n.embedding_length_per_layer_input"));
    /* Gemma 4's: k on a layer with a cache of its own, the per-layer
       shapes' keys and arrays of the wrong length, the experts' norms and scales */
    REFUSED("gemma4", INFER_ERR_FORMAT, "blk.2.attn_k.weight", NO_TENSOR("blk.2.attn_k.weight"));
    REFUSED("gemma4", INFER_ERR_FORMAT, "blk.4.inp_gate.weight", NO_TENSOR("blk.4.inp_gate.weight"));
    REFUSED("gemma4", INFER_ERR_FORMAT, "gemma4.attention.key_length_swa", NO_KEY("gemma4.attention.key_length_swa"));
    REFUSED("gemma4", INFER_ERR_FORMAT, "gemma4.attention.sliding_window_pattern",
            NO_KEY("gemma4.attention.sliding_window_pattern"));
    REFUSED("gemma4", INFER_ERR_FORMAT, "gemma4.attention.head_count_kv", ARR("gemma4.attention.head_count_kv", 2));
    REFUSED("gemma4", INFER_ERR_FORMAT, "gemma4.feed_forward_length", ARR("gemma4.feed_forward_length", 256));
    REFUSED("gemma4", INFER_ERR_FORMAT, "gemma4.attention.shared_kv_layers", U32("gemma4.attention.shared_kv_layers", 6));
    /* sharing from layer 2 on: layer 2 (global) has no global layer before it */
    REFUSED("gemma4", INFER_ERR_FORMAT, "no layer before 2", U32("gemma4.attention.shared_kv_layers", 4));
    REFUSED("gemma4moe", INFER_ERR_FORMAT, "blk.0.ffn_gate_inp.scale", NO_TENSOR("blk.0.ffn_gate_inp.scale"));
    REFUSED("gemma4moe", INFER_ERR_FORMAT, "blk.1.ffn_down_exps.scale", NO_TENSOR("blk.1.ffn_down_exps.scale"));
    REFUSED("gemma4moe", INFER_ERR_FORMAT, "blk.1.post_ffw_norm_2.weight", NO_TENSOR("blk.1.post_ffw_norm_2.weight"));
    REFUSED("gemma4moe", INFER_ERR_FORMAT, "blk.2.ffn_gate.weight", NO_TENSOR("blk.2.ffn_gate.weight"));
}

/* Gemma 3n's layers from 20 on keep no KV cache: each attends over the
   last cache of its kind, layer 18's (sliding) or 19's (global), and has
   no k or v of its own. */
Test(arch, shared_kv_caches) {
    char path[512];
    infer_error err;
    infer_model *m;
    infer_context_params cp = infer_context_default_params();
    infer_context *c;
    int l;
    need_shared();
    model_path(path, sizeof path, "gemma3n");
    m = infer_model_load(path, NULL, &err);
    cr_assert_not_null(m, "%s", err.msg);
    cr_assert_eq(m->n_layer_kv, 20);
    cp.n_ctx = 64;
    c = infer_context_new(m, &cp, &err);
    cr_assert_not_null(c, "%s", err.msg);
    for (l = 0; l < m->n_layers; l++) {
        const infer__layer *L = &m->layers[l];
        int want = l < 20 ? l : L->window ? 18 : 19;
        cr_expect_eq(L->window != 0, l % 5 != 4, "layer %d slides: %d", l, L->window != 0);
        cr_expect_eq(L->kv_layer, want, "layer %d reads layer %d's cache, not %d's", l, L->kv_layer, want);
        cr_expect_eq(L->wk == NULL, l >= 20, "layer %d: k of its own: %d", l, L->wk != NULL);
        cr_expect_eq(c->kv.slots[l] == 0, l >= 20, "layer %d: %d cache slots", l, c->kv.slots[l]);
    }
    infer_context_free(c);
    infer_model_free(m);
}

/* Gemma 4: each layer's shape from the file's arrays (heads of 64 on the
   sliding layers, 128 on the global ones; 2 or 1 KV heads; FFNs of 256
   and 512), its RoPE (all 64 dimensions of a sliding head, base 1e4;
   128 of a global one, base 1e6, proportional through rope_freqs), and
   its last three layers reading layers 1's and 2's caches; a layer
   without attn_v keeps v as k's. */
Test(arch, gemma4_layer_shapes) {
    static const int head[6] = {64, 64, 128, 64, 64, 128}, kvh[6] = {2, 2, 1, 2, 2, 1}, ffn[6] = {256, 256, 256, 512, 512, 512};
    static const int src[6] = {0, 1, 2, 1, 1, 2};
    char path[512];
    infer_error err;
    infer_model *m;
    int l;
    need_shared();
    model_path(path, sizeof path, "gemma4");
    m = infer_model_load(path, NULL, &err);
    cr_assert_not_null(m, "%s", err.msg);
    cr_expect_eq(m->n_layer_kv, 3);
    cr_expect_eq(m->head_dim, 128);
    cr_expect_eq(m->kv_dim, 128);
    cr_expect_eq(m->ffn_dim, 512);
    cr_expect_eq(m->ropes[1].n_rot, 64);
    cr_expect_float_eq(m->ropes[1].base, 1e4f, 1e-3f);
    cr_expect_eq(m->ropes[1].freqs, NULL);
    cr_expect_eq(m->ropes[0].n_rot, 128);
    cr_expect_float_eq(m->ropes[0].base, 1e6f, 1e-1f);
    cr_expect_not_null(m->ropes[0].freqs);
    for (l = 0; l < m->n_layers; l++) {
        const infer__layer *L = &m->layers[l];
        cr_expect_eq(L->head_dim, head[l], "layer %d: heads of %d", l, L->head_dim);
        cr_expect_eq(L->n_kv_heads, kvh[l], "layer %d: %d KV heads", l, L->n_kv_heads);
        cr_expect_eq(L->ffn_dim, ffn[l], "layer %d: FFN of %d", l, L->ffn_dim);
        cr_expect_eq(L->q_dim, 4 * head[l]);
        cr_expect_eq(L->rope, head[l] == 64 ? 1 : 0);
        cr_expect_eq(L->window, head[l] == 64 ? 32 : 0);
        cr_expect_eq(L->kv_layer, src[l], "layer %d reads layer %d's cache", l, L->kv_layer);
        cr_expect_not_null(L->out_scale);
    }
    infer_model_free(m);
    tu_shared_path(path, sizeof path, "arch/synth-gemma4moe-f16.gguf");
    m = infer_model_load(path, NULL, &err);
    cr_assert_not_null(m, "%s", err.msg);
    cr_expect_eq(m->n_layer_kv, 4);
    for (l = 0; l < m->n_layers; l++) {
        const infer__layer *L = &m->layers[l];
        cr_expect_eq(L->wv == NULL, l % 2 == 1, "layer %d: v of its own: %d", l, L->wv != NULL);
        cr_expect_not_null(L->ffn_router);
        cr_expect_not_null(L->w_gate, "layer %d: a dense FFN beside the experts", l);
        cr_expect_null(L->up_exps, "layer %d: gate and up fused", l);
        cr_expect_eq(L->gate_exps->ne[1], 8 * 2 * 128);
    }
    cr_expect_eq(m->ple_dim, 0);
    infer_model_free(m);
}

Test(arch, experts) {
    need_shared();
    REFUSED("qwen3moe", INFER_ERR_FORMAT, "qwen3moe.expert_count", U32("qwen3moe.expert_count", 0));
    REFUSED("qwen3moe", INFER_ERR_FORMAT, "qwen3moe.expert_count", NO_KEY("qwen3moe.expert_count"));
    REFUSED("qwen3moe", INFER_ERR_FORMAT, "qwen3moe.expert_used_count", U32("qwen3moe.expert_used_count", 9));
    REFUSED("qwen3moe", INFER_ERR_FORMAT, "qwen3moe.expert_used_count", U32("qwen3moe.expert_used_count", 0));
    REFUSED("qwen3moe", INFER_ERR_FORMAT, "qwen3moe.expert_count", U32("qwen3moe.expert_count", 1000));
    /* fewer experts than the tensors hold */
    REFUSED("qwen3moe", INFER_ERR_FORMAT, "blk.0.ffn_gate_inp.weight", U32("qwen3moe.expert_count", 4));
    REFUSED("qwen3moe", INFER_ERR_FORMAT, "blk.0.ffn_gate_exps.weight",
            U32("qwen3moe.expert_feed_forward_length", 64));
    /* without the key the experts are feed_forward_length wide (768), not the tensors' 128 */
    REFUSED("qwen3moe", INFER_ERR_FORMAT, "blk.0.ffn_gate_exps.weight", NO_KEY("qwen3moe.expert_feed_forward_length"));
    /* and without either, nothing says how wide they are */
    REFUSED("qwen3moe", INFER_ERR_FORMAT, "qwen3moe.expert_feed_forward_length",
            NO_KEY("qwen3moe.expert_feed_forward_length"), NO_KEY("qwen3moe.feed_forward_length"));
    REFUSED("qwen3moe", INFER_ERR_UNSUPPORTED, "qwen3moe.expert_gating_func",
            U32("qwen3moe.expert_gating_func", 2));
    REFUSED("qwen3moe", INFER_ERR_UNSUPPORTED, "qwen3moe.expert_gating_func",
            U32("qwen3moe.expert_gating_func", 7));
    /* a router in a llama file without the key that would make it Mixtral */
    REFUSED("llama-tied", INFER_ERR_FORMAT, "blk.0.ffn_gate_inp.weight",
            ADD("blk.0.ffn_gate_inp.weight", 256, 8));
}

Test(arch, sliding_window) {
    need_shared();
    REFUSED("gemma2", INFER_ERR_FORMAT, "gemma2.attention.sliding_window",
            U32("gemma2.attention.sliding_window", 5000));
    REFUSED("gemma3", INFER_ERR_FORMAT, "gemma3.attention.sliding_window",
            U32("gemma3.attention.sliding_window", 4097));
    refused_ex("gemma3", CHANGES(U32("gemma3.context_length", 16)), INFER_ERR_FORMAT,
               "gemma3.attention.sliding_window", "gemma3.context_length");
    REFUSED("gemma2", INFER_ERR_FORMAT, "gemma2.attention.sliding_window",
            U32("gemma2.attention.sliding_window", 0));
    /* gemma3 has no default window */
    REFUSED("gemma3", INFER_ERR_FORMAT, "gemma3.attention.sliding_window", NO_KEY("gemma3.attention.sliding_window"));
}

Test(arch, impossible_floats) {
    need_shared();
    REFUSED("qwen2", INFER_ERR_FORMAT, "qwen2.rope.freq_base", F32("qwen2.rope.freq_base", NAN));
    REFUSED("qwen3", INFER_ERR_FORMAT, "qwen3.rope.freq_base", F64("qwen3.rope.freq_base", INFINITY));
    REFUSED("gemma3", INFER_ERR_FORMAT, "gemma3.rope.freq_base", F32("gemma3.rope.freq_base", -INFINITY));
    REFUSED("phi3", INFER_ERR_FORMAT, "phi3.rope.freq_base", F32("phi3.rope.freq_base", 0));
    REFUSED("phi3", INFER_ERR_FORMAT, "phi3.rope.freq_base", STR("phi3.rope.freq_base", "10000"));
    REFUSED("llama3", INFER_ERR_FORMAT, "llama.attention.layer_norm_rms_epsilon",
            F32("llama.attention.layer_norm_rms_epsilon", NAN));
    REFUSED("gemma", INFER_ERR_FORMAT, "gemma.attention.layer_norm_rms_epsilon",
            F32("gemma.attention.layer_norm_rms_epsilon", INFINITY));
    REFUSED("smollm3", INFER_ERR_FORMAT, "smollm3.attention.layer_norm_rms_epsilon",
            F32("smollm3.attention.layer_norm_rms_epsilon", -1e-6));
    REFUSED("gemma2", INFER_ERR_FORMAT, "gemma2.attn_logit_softcapping",
            F32("gemma2.attn_logit_softcapping", NAN));
    REFUSED("gemma2", INFER_ERR_FORMAT, "gemma2.attn_logit_softcapping",
            F64("gemma2.attn_logit_softcapping", 1e300));
    REFUSED("gemma2", INFER_ERR_FORMAT, "gemma2.final_logit_softcapping",
            F32("gemma2.final_logit_softcapping", INFINITY));
    REFUSED("smollm3", INFER_ERR_FORMAT, "smollm3.attention.scale", F32("smollm3.attention.scale", NAN));
    REFUSED("qwen2", INFER_ERR_FORMAT, "qwen2.rope.scaling.factor", F32("qwen2.rope.scaling.factor", NAN));
}

/* Integers stored as something else are errors, not defaults. */
Test(arch, integers_of_another_type) {
    need_shared();
    REFUSED("qwen2", INFER_ERR_FORMAT, "qwen2.attention.head_count", ARR("qwen2.attention.head_count", 4));
    REFUSED("qwen3", INFER_ERR_FORMAT, "qwen3.attention.head_count_kv", ARR("qwen3.attention.head_count_kv", 2));
    REFUSED("gemma", INFER_ERR_FORMAT, "gemma.attention.head_count", STR("gemma.attention.head_count", "4"));
    REFUSED("gemma2", INFER_ERR_FORMAT, "gemma2.attention.sliding_window",
            STR("gemma2.attention.sliding_window", "32"));
    REFUSED("llama3", INFER_ERR_FORMAT, "llama.block_count", F32("llama.block_count", 2));
    REFUSED("qwen3moe", INFER_ERR_FORMAT, "qwen3moe.expert_count", ARR("qwen3moe.expert_count", 8));
    REFUSED("phi3", INFER_ERR_FORMAT, "phi3.embedding_length", U32("phi3.embedding_length", 1u << 30));
}

/* A tensor the architecture does not use means a variant the forward pass
   would mis-compute. */
Test(arch, tensor_the_architecture_does_not_use) {
    need_shared();
    refused_ex("qwen2", CHANGES(ADD("blk.0.attn_q_norm.weight", 64)), INFER_ERR_UNSUPPORTED,
               "blk.0.attn_q_norm.weight", "qwen2");
    refused_ex("gemma", CHANGES(ADD("blk.1.post_attention_norm.weight", 256)), INFER_ERR_UNSUPPORTED,
               "blk.1.post_attention_norm.weight", "gemma");
    REFUSED("qwen3", INFER_ERR_UNSUPPORTED, "blk.0.attn_q.bias", ADD("blk.0.attn_q.bias", 512));
    REFUSED("llama3", INFER_ERR_UNSUPPORTED, "blk.0.attn_qkv.weight",
            ADD("blk.0.attn_qkv.weight", 256, 512));
    REFUSED("qwen3moe", INFER_ERR_UNSUPPORTED, "blk.1.ffn_gate.weight",
            ADD("blk.1.ffn_gate.weight", 256, 768));
    REFUSED("smollm3", INFER_ERR_UNSUPPORTED, "blk.3.post_ffw_norm.weight",
            ADD("blk.3.post_ffw_norm.weight", 256));
    REFUSED("gemma2", INFER_ERR_UNSUPPORTED, "blk.2.attn_k_norm.weight",
            ADD("blk.2.attn_k_norm.weight", 64));
    REFUSED("phi3", INFER_ERR_UNSUPPORTED, "blk.0.attn_q.weight", ADD("blk.0.attn_q.weight", 256, 256));
}

Test(arch, architecture_name) {
    static const char *const all[] = {"llama", "qwen2", "qwen3", "qwen3moe", "gemma", "gemma2", "gemma3", "phi3",
                                      "smollm3"};
    size_t i, size;
    uint8_t *file;
    infer_error err;
    const char *list;
    need_shared();
    file = rewrite("qwen2", CHANGES(STR("general.architecture", "mamba")), &size);
    cr_assert_null(load_memory(file, size, &err));
    free(file);
    cr_expect_eq(err.code, INFER_ERR_UNSUPPORTED, "%s", err.msg);
    cr_expect(strstr(err.msg, "'mamba'") != NULL, "%s", err.msg);
    list = strstr(err.msg, "supported: ");
    cr_assert_not_null(list, "'%s' does not list the supported architectures", err.msg);
    for (i = 0; i < sizeof all / sizeof all[0]; i++) { /* each as an item: ": name," or ", name)" */
        char a[32], b[32];
        snprintf(a, sizeof a, " %s,", all[i]);
        snprintf(b, sizeof b, " %s)", all[i]);
        cr_expect(strstr(list, a) || strstr(list, b), "'%s' does not list %s", err.msg, all[i]);
    }
    cr_log_info("%s", err.msg);
    /* a known name over another architecture's keys */
    REFUSED("qwen2", INFER_ERR_FORMAT, "qwen3.embedding_length", STR("general.architecture", "qwen3"));
    REFUSED("gemma2", INFER_ERR_FORMAT, "gemma.embedding_length", STR("general.architecture", "gemma"));
    REFUSED("qwen3", INFER_ERR_FORMAT, "general.architecture", NO_KEY("general.architecture"));
    REFUSED("llama3", INFER_ERR_FORMAT, "general.architecture", U32("general.architecture", 1));
}

/* MODEL with KEY = each value of its kind in turn: refused in one line, or
   loaded and decoding a few tokens. Returns how many loaded. */
static int try_values(const char *model, const char *key, int is_float) {
    static const double ints[] = {0, 1, 3, 33, 1 << 20, 4294967295.0};
    static const double floats[] = {0, -1, 1e-30, 1e30, NAN};
    infer_token toks[3] = {1, 300, 301};
    int v, nv = is_float ? (int)(sizeof floats / sizeof floats[0]) : (int)(sizeof ints / sizeof ints[0]), n_loaded = 0;
    for (v = 0; v < nv; v++) {
        change c = {.kind = is_float ? SET_F32 : SET_U32, .name = key, .num = is_float ? floats[v] : ints[v]};
        size_t size;
        uint8_t *file = rewrite(model, &c, 1, &size);
        infer_error err;
        infer_model *m = load_memory(file, size, &err);
        if (!m) {
            cr_expect(err.msg[0] && !strchr(err.msg, '\n'), "%s, %s = %g: '%s'", model, key, c.num, err.msg);
            cr_expect(err.code == INFER_ERR_FORMAT || err.code == INFER_ERR_UNSUPPORTED, "%s, %s = %g: status %d: %s",
                      model, key, c.num, (int)err.code, err.msg);
        } else {
            infer_context_params cp = infer_context_default_params();
            infer_context *ctx;
            cp.n_ctx = 8;
            cp.n_threads = 1;
            ctx = infer_context_new(m, &cp, &err);
            cr_expect_not_null(ctx, "%s, %s = %g loads but has no context: %s", model, key, c.num, err.msg);
            if (ctx)
                cr_expect_eq(infer_decode(ctx, toks, 3, 0, &err), INFER_OK, "%s, %s = %g: %s", model, key, c.num,
                             err.msg);
            infer_context_free(ctx);
            infer_model_free(m);
            n_loaded++;
        }
        free(file);
    }
    return n_loaded;
}

/* Every numeric key of every arch model's own (ARCH.*), and the optional
   ones it lacks, set to values at and past the edges: nothing crashes
   (under the sanitizers nothing reads out of bounds or leaks either). */
Test(arch, every_key_at_its_edges, .timeout = 900) {
    static const struct { const char *suffix; int is_float; } optional[] = {
        {"rope.scaling.factor", 1}, {"rope.scaling.attn_factor", 1}, {"rope.scaling.yarn_ext_factor", 1},
        {"rope.scaling.yarn_beta_fast", 1}, {"rope.scaling.original_context_length", 0}, {"attention.scale", 1},
        {"attention.sliding_window", 0}, {"expert_count", 0}, {"expert_gating_func", 0},
        {"attn_logit_softcapping", 1}};
    int i, j, n_tried = 0, n_loaded = 0;
    need_shared();
    for (i = 0; i < N_ARCH_MODELS; i++) {
        char path[512], arch[16], key[96];
        infer_error err;
        infer_gguf *g;
        int64_t k;
        model_path(path, sizeof path, ARCH_MODELS[i]);
        g = infer_gguf_open(path, &err);
        cr_assert_not_null(g, "%s", err.msg);
        snprintf(arch, sizeof arch, "%.*s", (int)strcspn(ARCH_MODELS[i], "-"), ARCH_MODELS[i]);
        for (k = 0; k < g->n_kv; k++) {
            const infer__kv *kv = &g->kv[k];
            if (strncmp(kv->key, arch, strlen(arch)) || kv->key[strlen(arch)] != '.' ||
                !infer__gguf_scalar_size(kv->type) || kv->type == INFER_GGUF_TYPE_BOOL)
                continue;
            n_loaded += try_values(ARCH_MODELS[i], kv->key,
                                   kv->type == INFER_GGUF_TYPE_FLOAT32 || kv->type == INFER_GGUF_TYPE_FLOAT64);
            n_tried++;
        }
        for (j = 0; j < (int)(sizeof optional / sizeof optional[0]); j++) {
            snprintf(key, sizeof key, "%s.%s", arch, optional[j].suffix);
            if (infer_gguf_find_key(g, key) >= 0) continue;
            n_loaded += try_values(ARCH_MODELS[i], key, optional[j].is_float);
            n_tried++;
        }
        infer_gguf_close(g);
    }
    cr_log_info("%d keys changed, %d of the models loaded and decoded", n_tried, n_loaded);
}

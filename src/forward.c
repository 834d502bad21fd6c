/* forward.c - the context (KV cache, scratch) and the llama forward pass
   over a batch of tokens. Reads top to bottom like the paper: embed, then
   per layer RMSNorm -> attention with RoPE -> residual -> RMSNorm -> SwiGLU
   FFN -> residual, then the final norm and the output projection.
   The whole pass is one task of the thread pool: every worker runs the
   steps below, splitting each step's work, and the workers meet at a
   barrier between steps (per-token steps by tokens, products by rows,
   attention by heads and token runs).
   The numerics follow llama.cpp's CPU path where it matters for matching
   its outputs: activations converted to the weights' dot type, K and V
   cached as F16, sums of squares in double, RoPE angles stepped by
   multiplication. */
#include "internal.h"

#define INFER__MAX_FUSED 3 /* products sharing one input, run as one step */

/* A step of products that read the same input (q, k, v; gate, up): the
   input is converted once per activation type it needs, and the workers
   split the rows of all of them. */
typedef struct infer__product {
    int n_ops, n_x;
    const infer__tensor *w[INFER__MAX_FUSED];
    int slot[INFER__MAX_FUSED];          /* the converted input each op reads; -1: the f32 input */
    infer_type x_type[INFER__MAX_FUSED]; /* the types of the n_x converted inputs */
    float *y[INFER__MAX_FUSED];
    int ldy[INFER__MAX_FUSED];
    const uint8_t *packed[INFER__MAX_FUSED]; /* the weights repacked for this ISA (pack.c), or NULL */
    int64_t chunks;                      /* INFER__PACK_ROWS-row pieces of all ops, the unit of the split */
} infer__product;

enum { INFER__P_QKV, INFER__P_O, INFER__P_GATE_UP, INFER__P_DOWN, INFER__P_PER_LAYER };

struct infer_context {
    infer_model *model;
    int n_ctx, n_batch, n_past;
    void *gpu;          /* the GPU half of a CUDA model's context (gpu.c), or NULL */
    infer__pool *pool;
    int n_threads;
    infer__kernels kern; /* the kernels of the chosen instruction set */
    infer__kv_cache kv;
    /* activations of one batch, a row per token */
    float *x, *xb, *q, *k, *v, *att, *hb, *hb2;
    float *rope;        /* per token: cos, sin of each rotated pair */
    float *attn_scratch; /* per worker */
    size_t attn_scratch_n;
    void *xq;           /* converted inputs: INFER__MAX_FUSED slots of n_batch rows */
    size_t xq_row_max;  /* bytes of one converted row, largest case */
    infer__product *plan; /* INFER__P_PER_LAYER per layer, then the output */
    uint8_t *packed_raw;  /* the allocation holding every packed weight */
    float *logits;      /* rows of n_vocab */
    int n_logit_rows, logit_cap_rows, logits_all, n_last;
    size_t bytes;       /* memory this context holds */
    /* generate.c's bookkeeping */
    infer_metrics metrics;
    infer_token *prompt_tokens, *gen_tokens; /* stb_ds arrays */
};

INFERDEF infer_context_params infer_context_default_params(void) {
    infer_context_params p;
    memset(&p, 0, sizeof p);
    return p;
}

static void *infer__ctx_alloc(infer_context *c, size_t n, size_t size, int *ok) {
    void *p = infer__calloc(n ? n : 1, size);
    if (!p) *ok = 0;
    c->bytes += n * size;
    return p;
}

/* Sets up a product step: which converted input each op reads. */
static void infer__product_init(infer__product *p, int n_ops, const infer__tensor *const *w, float *const *y,
                                const int *ldy) {
    int i, j;
    memset(p, 0, sizeof *p);
    p->n_ops = n_ops;
    for (i = 0; i < n_ops; i++) {
        infer_type vt = infer__traits(w[i]->type)->vec_dot_type;
        p->w[i] = w[i];
        p->y[i] = y[i];
        p->ldy[i] = ldy[i];
        p->chunks += (w[i]->ne[1] + INFER__PACK_ROWS - 1) / INFER__PACK_ROWS;
        p->slot[i] = -1;
        if (vt == INFER_TYPE_F32) continue;
        for (j = 0; j < p->n_x && p->x_type[j] != vt; j++) {}
        if (j == p->n_x) p->x_type[p->n_x++] = vt;
        p->slot[i] = j;
    }
}

#define INFER__PACK_ARENA_ALIGN ((size_t)2 << 20) /* a huge page */

/* The bytes product p's packed weights take (each 64-byte aligned). */
static size_t infer__product_packed_bytes(const infer_context *c, const infer__product *p) {
    size_t total = 0;
    int i;
    for (i = 0; i < p->n_ops; i++) {
        infer_type t = p->w[i]->type;
        if (c->kern.pack_size[t] && c->kern.pack[t] && c->kern.gemm_packed[t])
            total += (c->kern.pack_size[t](p->w[i]->ne[0], p->w[i]->ne[1]) + 63) / 64 * 64;
    }
    return total;
}

/* Repacks the product's weights where this ISA has a packed form (the
   kernels then read 16 rows in one vector), into the context's arena from
   *at on; the mapped originals are let go. */
static void infer__product_pack(infer_context *c, infer__product *p, uint8_t **at) {
    int i;
    for (i = 0; i < p->n_ops; i++) {
        const infer__tensor *w = p->w[i];
        infer_type t = w->type;
        if (!c->kern.pack_size[t] || !c->kern.pack[t] || !c->kern.gemm_packed[t]) continue;
        p->packed[i] = *at;
        c->kern.pack[t](w->data, infer__row_size(t, w->ne[0]), w->ne[0], w->ne[1], *at);
        *at += (c->kern.pack_size[t](w->ne[0], w->ne[1]) + 63) / 64 * 64;
        /* the token embedding's rows are still read (a tied output) */
        if (w != c->model->tok_embd) infer__blob_forget(&c->model->gguf->blob, w->data, w->nbytes);
    }
}

static int infer__plan(infer_context *c) {
    const infer_model *m = c->model;
    int dim = m->dim, kv_dim = m->n_kv_heads * m->head_dim, ffn = m->ffn_dim, l;
    size_t total = 0;
    uint8_t *at;
    c->plan = (infer__product *)infer__calloc((size_t)m->n_layers * INFER__P_PER_LAYER + 1, sizeof(infer__product));
    if (!c->plan) return 0;
    for (l = 0; l < m->n_layers; l++) {
        const infer__layer *L = &m->layers[l];
        infer__product *p = c->plan + (size_t)l * INFER__P_PER_LAYER;
        const infer__tensor *qkv[3], *gu[2];
        float *y_qkv[3], *y_gu[2];
        int ld_qkv[3], ld_gu[2];
        qkv[0] = L->wq, qkv[1] = L->wk, qkv[2] = L->wv;
        y_qkv[0] = c->q, y_qkv[1] = c->k, y_qkv[2] = c->v;
        ld_qkv[0] = dim, ld_qkv[1] = ld_qkv[2] = kv_dim;
        gu[0] = L->w_gate, gu[1] = L->w_up;
        y_gu[0] = c->hb, y_gu[1] = c->hb2;
        ld_gu[0] = ld_gu[1] = ffn;
        infer__product_init(&p[INFER__P_QKV], 3, qkv, y_qkv, ld_qkv);
        infer__product_init(&p[INFER__P_O], 1, &L->wo, &c->xb, &dim);
        infer__product_init(&p[INFER__P_GATE_UP], 2, gu, y_gu, ld_gu);
        infer__product_init(&p[INFER__P_DOWN], 1, &L->w_down, &c->xb, &dim);
    }
    /* the output's rows go straight to the caller's logits (set per pass) */
    infer__product_init(&c->plan[(size_t)m->n_layers * INFER__P_PER_LAYER], 1, &m->output, &c->logits, &m->n_vocab);
    /* one arena for every packed weight, aligned so the OS can back it
       with huge pages: generation streams it all once per token */
    for (l = 0; l <= m->n_layers * INFER__P_PER_LAYER; l++) total += infer__product_packed_bytes(c, &c->plan[l]);
    if (total) {
        c->packed_raw = (uint8_t *)INFER_MALLOC(total + INFER__PACK_ARENA_ALIGN);
        if (!c->packed_raw) return 0;
        at = c->packed_raw + (INFER__PACK_ARENA_ALIGN - (uintptr_t)c->packed_raw % INFER__PACK_ARENA_ALIGN);
        infer__advise_huge(at, total);
        c->bytes += total + INFER__PACK_ARENA_ALIGN;
        for (l = 0; l <= m->n_layers * INFER__P_PER_LAYER; l++) infer__product_pack(c, &c->plan[l], &at);
    }
    return 1;
}

INFERDEF infer_context *infer_context_new(infer_model *m, const infer_context_params *params, infer_error *err) {
    infer_context_params defaults = infer_context_default_params();
    infer_context *c;
    infer_type kv_type;
    int ok = 1, kv_dim, widest;
    if (!m || !m->n_layers) {
        infer__set_error(err, INFER_ERR_ARG, "a context needs a model with weights (not vocab-only)");
        return NULL;
    }
    if (!params) params = &defaults;
    if (params->n_ctx < 0 || params->n_batch < 0 || params->n_threads < 0 || params->n_threads > 512) {
        infer__set_error(err, INFER_ERR_ARG, "context parameters out of range");
        return NULL;
    }
    kv_type = params->kv_type == INFER_TYPE_F32 ? INFER_TYPE_F16 : params->kv_type;
    c = (infer_context *)infer__calloc(1, sizeof *c);
    if (!c) {
        infer__set_error(err, INFER_ERR_NOMEM, "out of memory");
        return NULL;
    }
    c->model = m;
    if (!infer__kernels_select(&c->kern, err)) {
        INFER_FREE(c);
        return NULL;
    }
    c->n_ctx = params->n_ctx ? params->n_ctx : INFER__MIN(m->n_ctx_train, 4096);
    c->n_batch = params->n_batch ? params->n_batch : 512;
    c->n_batch = INFER__MIN(c->n_batch, c->n_ctx);
    if (!infer__context_attach(c, err)) { /* a GPU model: its cache and scratch there */
        infer_context_free(c);
        return NULL;
    }
    if (!c->gpu) { /* on the GPU, the cache is there */
        if (!infer__kv_init(&c->kv, kv_type, m->n_layers, c->n_ctx, m->n_kv_heads, m->head_dim, err)) {
            infer_context_free(c);
            return NULL;
        }
        c->bytes += infer__kv_bytes(&c->kv);
    }
    c->pool = infer__pool_new(params->n_threads ? params->n_threads : 1);
    if (!c->pool) ok = 0;
    c->n_threads = c->pool ? infer__pool_size(c->pool) : 1;
    kv_dim = m->n_kv_heads * m->head_dim;
    widest = INFER__MAX(m->dim, m->ffn_dim);
    c->x = (float *)infer__ctx_alloc(c, (size_t)c->n_batch * m->dim, sizeof(float), &ok);
    c->xb = (float *)infer__ctx_alloc(c, (size_t)c->n_batch * m->dim, sizeof(float), &ok);
    c->q = (float *)infer__ctx_alloc(c, (size_t)c->n_batch * m->dim, sizeof(float), &ok);
    c->k = (float *)infer__ctx_alloc(c, (size_t)c->n_batch * kv_dim, sizeof(float), &ok);
    c->v = (float *)infer__ctx_alloc(c, (size_t)c->n_batch * kv_dim, sizeof(float), &ok);
    c->att = (float *)infer__ctx_alloc(c, (size_t)c->n_batch * m->dim, sizeof(float), &ok);
    c->hb = (float *)infer__ctx_alloc(c, (size_t)c->n_batch * m->ffn_dim, sizeof(float), &ok);
    c->hb2 = (float *)infer__ctx_alloc(c, (size_t)c->n_batch * m->ffn_dim, sizeof(float), &ok);
    c->rope = (float *)infer__ctx_alloc(c, (size_t)c->n_batch * m->rope_dim, sizeof(float), &ok);
    c->attn_scratch_n = infer__attn_scratch_floats(m->head_dim);
    c->attn_scratch = (float *)infer__ctx_alloc(c, (size_t)c->n_threads * c->attn_scratch_n, sizeof(float), &ok);
    /* F16 (2 bytes a value) is the widest converted form */
    c->xq_row_max = (size_t)widest * sizeof(uint16_t);
    c->xq = infer__ctx_alloc(c, (size_t)c->n_batch * INFER__MAX_FUSED, c->xq_row_max, &ok);
    if (ok && !c->gpu && !infer__plan(c)) ok = 0; /* a GPU context never runs the CPU's products */
    if (!ok) {
        infer_context_free(c);
        infer__set_error(err, INFER_ERR_NOMEM, "out of memory for a context of %d tokens", params->n_ctx);
        return NULL;
    }
    return c;
}

INFERDEF void infer_context_free(infer_context *c) {
    if (!c) return;
    infer__context_detach(c);
    infer__pool_free(c->pool);
    infer__kv_free(&c->kv);
    INFER_FREE(c->x);
    INFER_FREE(c->xb);
    INFER_FREE(c->q);
    INFER_FREE(c->k);
    INFER_FREE(c->v);
    INFER_FREE(c->att);
    INFER_FREE(c->hb);
    INFER_FREE(c->hb2);
    INFER_FREE(c->rope);
    INFER_FREE(c->attn_scratch);
    INFER_FREE(c->xq);
    INFER_FREE(c->plan);
    INFER_FREE(c->packed_raw);
    INFER_FREE(c->logits);
    stbds_arrfree(c->prompt_tokens);
    stbds_arrfree(c->gen_tokens);
    INFER_FREE(c);
}

INFERDEF int infer_context_n_ctx(const infer_context *c) { return c->n_ctx; }
INFERDEF const char *infer_context_isa(const infer_context *c) { return infer__isa_name(c->kern.isa); }
INFERDEF int infer_context_n_past(const infer_context *c) { return c->n_past; }
INFERDEF void infer_context_truncate(infer_context *c, int n_past) {
    if (n_past >= 0 && n_past < c->n_past) c->n_past = n_past;
}

/* ---- the building blocks -------------------------------------------- */

static void infer__rmsnorm(const infer__kernels *k, float *out, const float *x, const float *w, int n, float eps) {
    float scale = 1.0f / sqrtf((float)(k->sum_squares(x, n) / n) + eps);
    int i;
    for (i = 0; i < n; i++) out[i] = (x[i] * scale) * w[i];
}

/* cos and sin of the angles of position pos: pair i turns by
   pos * base^(-2i/n_rot) / freqs[i], the angle stepped by multiplication as
   llama.cpp does. freqs may be NULL. */
static void infer__rope_angles(float *cs, int n_rot, int pos, float base, const float *freqs) {
    float theta = (float)pos, step = powf(base, -2.0f / (float)n_rot);
    int i;
    for (i = 0; i < n_rot; i += 2) {
        float a = freqs ? theta / freqs[i / 2] : theta;
        cs[i] = cosf(a);
        cs[i + 1] = sinf(a);
        theta *= step;
    }
}

/* Rotates pairs (x[2i], x[2i+1]) of the first n_rot values. */
static void infer__rope(float *x, const float *cs, int n_rot) {
    int i;
    for (i = 0; i < n_rot; i += 2) {
        float x0 = x[i], x1 = x[i + 1];
        x[i] = x0 * cs[i] - x1 * cs[i + 1];
        x[i + 1] = x0 * cs[i + 1] + x1 * cs[i];
    }
}

/* ---- products: Y[t] = W . X[t] for every token t ----------------------- */

static uint8_t *infer__xq_slot(const infer_context *c, int slot) {
    return (uint8_t *)c->xq + (size_t)slot * c->n_batch * c->xq_row_max;
}

/* Converts input rows t0..t1 (of n values, stride ldx) into each type the
   product reads; row t lands at row t - base of the slot. */
static void infer__product_convert(const infer_context *c, const infer__product *p, const float *x, int ldx, int t0,
                                   int t1, int base) {
    int n = (int)p->w[0]->ne[0], s, t;
    for (s = 0; s < p->n_x; s++) {
        size_t row = infer__row_size(p->x_type[s], n);
        for (t = t0; t < t1; t++)
            c->kern.from_float[p->x_type[s]](x + (size_t)t * ldx, infer__xq_slot(c, s) + (size_t)(t - base) * row, n);
    }
}

/* Rows r0..r1 of op o of the product, for n_tok converted input rows. */
static void infer__product_rows(const infer_context *c, const infer__product *p, int o, int64_t r0, int64_t r1,
                                const uint8_t *xq, size_t xq_row, int n_tok, float *y) {
    const infer__tensor *w = p->w[o];
    int n = (int)w->ne[0], j;
    size_t row_size = infer__row_size(w->type, n), ldy = (size_t)p->ldy[o];
    const uint8_t *wr = (const uint8_t *)w->data + (size_t)r0 * row_size;
    infer__vec_dot_fn vec_dot = c->kern.vec_dot[w->type];
    if (p->packed[o]) {
        c->kern.gemm_packed[w->type](n, p->packed[o] + infer__pack_offset(&c->kern, w->type, n, r0), (int)(r1 - r0), xq,
                                     xq_row, n_tok, y + r0, ldy);
        return;
    }
    if (c->kern.gemm[w->type] && n_tok > 1) {
        c->kern.gemm[w->type](n, wr, row_size, (int)(r1 - r0), xq, xq_row, n_tok, y + r0, ldy);
        return;
    }
    for (; r0 < r1; r0++, wr += row_size)
        for (j = 0; j < n_tok; j++) y[(size_t)j * ldy + r0] = vec_dot(n, wr, xq + (size_t)j * xq_row);
}

/* This worker's share of the rows of every op of the product, in pieces of
   INFER__PACK_ROWS rows, for n_tok converted input rows (x: the f32 input,
   for ops that read it as is; out0 replaces the first op's output). */
static void infer__product_run(const infer_context *c, const infer__product *p, const float *x, int ldx, int n_tok,
                               float *out0, int ith, int nth) {
    int64_t c0 = p->chunks * ith / nth, c1 = p->chunks * (ith + 1) / nth, base = 0;
    int o;
    for (o = 0; o < p->n_ops && base < c1; o++) {
        const infer__tensor *w = p->w[o];
        int64_t rows = w->ne[1], n_chunks = (rows + INFER__PACK_ROWS - 1) / INFER__PACK_ROWS;
        int64_t lo = INFER__MAX(c0, base) - base, hi = INFER__MIN(c1, base + n_chunks) - base;
        int n = (int)w->ne[0];
        if (lo < hi) {
            const uint8_t *xq = p->slot[o] < 0 ? (const uint8_t *)x : infer__xq_slot(c, p->slot[o]);
            size_t xq_row = p->slot[o] < 0 ? (size_t)ldx * sizeof(float) : infer__row_size(p->x_type[p->slot[o]], n);
            infer__product_rows(c, p, o, lo * INFER__PACK_ROWS, INFER__MIN(hi * INFER__PACK_ROWS, rows), xq, xq_row,
                                n_tok, o == 0 && out0 ? out0 : p->y[o]);
        }
        base += n_chunks;
    }
}

/* ---- the forward pass -------------------------------------------------- */

typedef struct infer__pass {
    infer_context *c;
    const infer_token *tokens;
    int n, first_logit;
    float *logits;
    int next_item; /* attention work handed out so far */
} infer__pass;

/* Every worker runs this; t0..t1 are its tokens in the per-token steps. */
static void infer__forward_worker(void *arg, int ith, int nth) {
    infer__pass *ps = (infer__pass *)arg;
    infer_context *c = ps->c;
    const infer_model *m = c->model;
    int dim = m->dim, hd = m->head_dim, kv_dim = m->n_kv_heads * hd, ffn = m->ffn_dim, n_rot = m->rope_dim;
    int n = ps->n, pos0 = c->n_past, t0 = n * ith / nth, t1 = n * (ith + 1) / nth, l, t, i;
    size_t emb_row = infer__row_size(m->tok_embd->type, dim);
    const infer__product *out = &c->plan[(size_t)m->n_layers * INFER__P_PER_LAYER];
    infer__attn_scratch scratch;
    infer__attn_batch ab;

    infer__attn_scratch_carve(&scratch, c->attn_scratch + (size_t)ith * c->attn_scratch_n, hd);
    ab.kv = &c->kv;
    ab.kern = &c->kern;
    ab.pos0 = pos0;
    ab.n_tok = n;
    ab.n_heads = m->n_heads;
    ab.q = c->q;
    ab.out = c->att;
    ab.ldq = ab.ldo = dim;

    for (t = t0; t < t1; t++) {
        infer__traits(m->tok_embd->type)
            ->to_float((const uint8_t *)m->tok_embd->data + (size_t)ps->tokens[t] * emb_row, c->x + (size_t)t * dim, dim);
        infer__rope_angles(c->rope + (size_t)t * n_rot, n_rot, pos0 + t, m->rope_base, m->rope_freqs);
    }

    for (l = 0; l < m->n_layers; l++) {
        const infer__layer *L = &m->layers[l];
        const infer__product *P = c->plan + (size_t)l * INFER__P_PER_LAYER;

        /* attention: q, k, v of the normed input */
        for (t = t0; t < t1; t++) {
            if (l > 0) /* the previous layer's feed-forward residual */
                for (i = 0; i < dim; i++) c->x[(size_t)t * dim + i] += c->xb[(size_t)t * dim + i];
            infer__rmsnorm(&c->kern, c->xb + (size_t)t * dim, c->x + (size_t)t * dim, (const float *)L->attn_norm->data, dim,
                           m->norm_eps);
        }
        infer__product_convert(c, &P[INFER__P_QKV], c->xb, dim, t0, t1, 0);
        infer__pool_barrier(c->pool);
        infer__product_run(c, &P[INFER__P_QKV], c->xb, dim, n, NULL, ith, nth);
        infer__pool_barrier(c->pool);
        for (t = t0; t < t1; t++) {
            const float *cs = c->rope + (size_t)t * n_rot;
            for (i = 0; i < m->n_heads; i++) infer__rope(c->q + (size_t)t * dim + (size_t)i * hd, cs, n_rot);
            for (i = 0; i < m->n_kv_heads; i++) infer__rope(c->k + (size_t)t * kv_dim + (size_t)i * hd, cs, n_rot);
            infer__kv_store(&c->kv, &c->kern, l, pos0 + t, c->k + (size_t)t * kv_dim, c->v + (size_t)t * kv_dim);
        }
        if (ith == 0) ps->next_item = 0;
        infer__pool_barrier(c->pool);
        ab.layer = l;
        for (;;) {
            int item = infer__atomic_next(&ps->next_item);
            if (item >= infer__attn_n_items(&ab)) break;
            infer__attn_item(&ab, item, &scratch);
        }
        infer__pool_barrier(c->pool);
        infer__product_convert(c, &P[INFER__P_O], c->att, dim, t0, t1, 0);
        infer__pool_barrier(c->pool);
        infer__product_run(c, &P[INFER__P_O], c->att, dim, n, NULL, ith, nth);
        infer__pool_barrier(c->pool);

        /* feed-forward: down(silu(gate(x)) * up(x)) of the normed input */
        for (t = t0; t < t1; t++) {
            for (i = 0; i < dim; i++) c->x[(size_t)t * dim + i] += c->xb[(size_t)t * dim + i];
            infer__rmsnorm(&c->kern, c->xb + (size_t)t * dim, c->x + (size_t)t * dim, (const float *)L->ffn_norm->data, dim,
                           m->norm_eps);
        }
        infer__product_convert(c, &P[INFER__P_GATE_UP], c->xb, dim, t0, t1, 0);
        infer__pool_barrier(c->pool);
        infer__product_run(c, &P[INFER__P_GATE_UP], c->xb, dim, n, NULL, ith, nth);
        infer__pool_barrier(c->pool);
        for (t = t0; t < t1; t++) {
            c->kern.silu_mul(c->hb + (size_t)t * ffn, c->hb2 + (size_t)t * ffn, ffn);
        }
        infer__product_convert(c, &P[INFER__P_DOWN], c->hb, ffn, t0, t1, 0);
        infer__pool_barrier(c->pool);
        infer__product_run(c, &P[INFER__P_DOWN], c->hb, ffn, n, NULL, ith, nth);
        infer__pool_barrier(c->pool);
    }

    /* the last residual, then the output rows from first_logit on */
    for (t = t0; t < t1; t++) {
        for (i = 0; i < dim; i++) c->x[(size_t)t * dim + i] += c->xb[(size_t)t * dim + i];
        if (t >= ps->first_logit)
            infer__rmsnorm(&c->kern, c->xb + (size_t)t * dim, c->x + (size_t)t * dim, (const float *)m->output_norm->data, dim,
                           m->norm_eps);
    }
    if (ps->first_logit < n) {
        int from = INFER__MAX(t0, ps->first_logit);
        infer__product_convert(c, out, c->xb, dim, from, INFER__MAX(from, t1), ps->first_logit);
        infer__pool_barrier(c->pool);
        infer__product_run(c, out, c->xb + (size_t)ps->first_logit * dim, dim, n - ps->first_logit, ps->logits, ith,
                           nth);
    }
}

/* Runs n (<= n_batch) tokens at positions n_past..; writes logits for the
   rows from first_logit on into logits (n_vocab floats each). */
static void infer__forward(infer_context *c, const infer_token *tokens, int n, int first_logit, float *logits) {
    infer__pass ps;
    ps.c = c;
    ps.tokens = tokens;
    ps.n = n;
    ps.first_logit = first_logit;
    ps.logits = logits;
    ps.next_item = 0;
    infer__pool_run(c->pool, infer__forward_worker, &ps);
    c->n_past += n;
}

static int infer__reserve_logits(infer_context *c, int rows) {
    if (rows > c->logit_cap_rows) {
        float *p = (float *)INFER_REALLOC(c->logits, (size_t)rows * c->model->n_vocab * sizeof(float));
        if (!p) return 0;
        c->bytes += (size_t)(rows - c->logit_cap_rows) * c->model->n_vocab * sizeof(float);
        c->logits = p;
        c->logit_cap_rows = rows;
    }
    return 1;
}

INFERDEF infer_status infer_decode(infer_context *c, const infer_token *tokens, int n, int all_logits,
                                   infer_error *err) {
    int i, done;
    if (!c || (!tokens && n) || n <= 0) {
        infer__set_error(err, INFER_ERR_ARG, "infer_decode needs at least one token");
        return INFER_ERR_ARG;
    }
    for (i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= c->model->n_vocab) {
            infer__set_error(err, INFER_ERR_ARG, "token id %d is outside the vocabulary (0..%d)", tokens[i],
                             c->model->n_vocab - 1);
            return INFER_ERR_ARG;
        }
    if (n > c->n_ctx - c->n_past) {
        infer__set_error(err, INFER_ERR_CONTEXT_FULL,
                         "%d tokens do not fit in the context: %d of %d positions are already used", n, c->n_past,
                         c->n_ctx);
        return INFER_ERR_CONTEXT_FULL;
    }
    if (!infer__reserve_logits(c, all_logits ? n : 1)) {
        infer__set_error(err, INFER_ERR_NOMEM, "out of memory for logits");
        return INFER_ERR_NOMEM;
    }
    for (done = 0; done < n; done += c->n_batch) {
        int nb = INFER__MIN(c->n_batch, n - done);
        int first = all_logits ? 0 : (done + nb == n ? nb - 1 : nb);
        float *out = all_logits ? c->logits + (size_t)done * c->model->n_vocab : c->logits;
        infer_status st = infer__backend_forward(c, tokens + done, nb, first, out, err);
        if (st != INFER_OK) return st;
    }
    c->logits_all = all_logits;
    c->n_last = n;
    c->n_logit_rows = all_logits ? n : 1;
    return INFER_OK;
}

INFERDEF const float *infer_get_logits(const infer_context *c, int i) {
    if (!c->n_logit_rows) return NULL;
    if (i < 0) i = c->n_last + i;
    if (i < 0 || i >= c->n_last) return NULL;
    if (!c->logits_all) return i == c->n_last - 1 ? c->logits : NULL;
    return c->logits + (size_t)i * c->model->n_vocab;
}

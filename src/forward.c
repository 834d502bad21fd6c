/* forward.c - the context (KV cache, scratch) and the llama forward pass
   over a batch of tokens. Reads top to bottom like the paper: embed, then
   per layer RMSNorm -> attention with RoPE -> residual -> RMSNorm -> SwiGLU
   FFN -> residual, then the final norm and the output projection.
   The numerics follow llama.cpp's CPU path where it matters for matching
   its outputs: K and V cached as F16, q and the softmax probabilities
   rounded to F16 before they meet the cache, sums of squares in double. */
#include "internal.h"

#define INFER__MAX_FUSED 3 /* products sharing one input, run as one op */

struct infer_context {
    infer_model *model;
    int n_ctx, n_batch, n_past;
    infer__pool *pool;
    infer__kernels kern; /* the kernels of the chosen instruction set */
    uint16_t *k_cache, *v_cache; /* [layer][position][kv_dim], F16 */
    /* activations of one batch, a row per token */
    float *x, *xb, *q, *k, *v, *att, *hb, *hb2;
    float *scores;      /* per worker: n_ctx attention scores */
    float *qh;          /* per worker: one head of q, rounded through F16 */
    void *xq;           /* a batch of activations in the weights' vec_dot_type */
    size_t xq_row_max;  /* bytes of one converted row, largest case */
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

INFERDEF infer_context *infer_context_new(infer_model *m, const infer_context_params *params, infer_error *err) {
    infer_context_params defaults = infer_context_default_params();
    infer_context *c;
    int ok = 1, nt, kv_dim, widest;
    size_t cache_n;
    if (!m || !m->n_layers) {
        infer__set_error(err, INFER_ERR_ARG, "a context needs a model with weights (not vocab-only)");
        return NULL;
    }
    if (!params) params = &defaults;
    if (params->n_ctx < 0 || params->n_batch < 0 || params->n_threads < 0 || params->n_threads > 512) {
        infer__set_error(err, INFER_ERR_ARG, "context parameters out of range");
        return NULL;
    }
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
    c->pool = infer__pool_new(params->n_threads ? params->n_threads : 1);
    if (!c->pool) ok = 0;
    nt = c->pool ? infer__pool_size(c->pool) : 1;
    kv_dim = m->n_kv_heads * m->head_dim;
    widest = INFER__MAX(m->dim, m->ffn_dim);
    cache_n = (size_t)m->n_layers * (size_t)c->n_ctx * (size_t)kv_dim;
    c->k_cache = (uint16_t *)infer__ctx_alloc(c, cache_n, sizeof(uint16_t), &ok);
    c->v_cache = (uint16_t *)infer__ctx_alloc(c, cache_n, sizeof(uint16_t), &ok);
    c->x = (float *)infer__ctx_alloc(c, (size_t)c->n_batch * m->dim, sizeof(float), &ok);
    c->xb = (float *)infer__ctx_alloc(c, (size_t)c->n_batch * m->dim, sizeof(float), &ok);
    c->q = (float *)infer__ctx_alloc(c, (size_t)c->n_batch * m->dim, sizeof(float), &ok);
    c->k = (float *)infer__ctx_alloc(c, (size_t)c->n_batch * kv_dim, sizeof(float), &ok);
    c->v = (float *)infer__ctx_alloc(c, (size_t)c->n_batch * kv_dim, sizeof(float), &ok);
    c->att = (float *)infer__ctx_alloc(c, (size_t)c->n_batch * m->dim, sizeof(float), &ok);
    c->hb = (float *)infer__ctx_alloc(c, (size_t)c->n_batch * m->ffn_dim, sizeof(float), &ok);
    c->hb2 = (float *)infer__ctx_alloc(c, (size_t)c->n_batch * m->ffn_dim, sizeof(float), &ok);
    c->scores = (float *)infer__ctx_alloc(c, (size_t)nt * c->n_ctx, sizeof(float), &ok);
    c->qh = (float *)infer__ctx_alloc(c, (size_t)nt * m->head_dim, sizeof(float), &ok);
    /* room for one input in each of the fused products' activation types;
       F16 (2 bytes a value) is the widest converted form */
    c->xq_row_max = (size_t)widest * sizeof(uint16_t);
    c->xq = infer__ctx_alloc(c, (size_t)c->n_batch * INFER__MAX_FUSED, c->xq_row_max, &ok);
    if (!ok) {
        infer_context_free(c);
        infer__set_error(err, INFER_ERR_NOMEM, "out of memory for a context of %d tokens", params->n_ctx);
        return NULL;
    }
    return c;
}

INFERDEF void infer_context_free(infer_context *c) {
    if (!c) return;
    infer__pool_free(c->pool);
    INFER_FREE(c->k_cache);
    INFER_FREE(c->v_cache);
    INFER_FREE(c->x);
    INFER_FREE(c->xb);
    INFER_FREE(c->q);
    INFER_FREE(c->k);
    INFER_FREE(c->v);
    INFER_FREE(c->att);
    INFER_FREE(c->hb);
    INFER_FREE(c->hb2);
    INFER_FREE(c->scores);
    INFER_FREE(c->qh);
    INFER_FREE(c->xq);
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

static void infer__rmsnorm(float *out, const float *x, const float *w, int n, float eps) {
    double ss = 0;
    float scale;
    int i;
    for (i = 0; i < n; i++) ss += (double)(x[i] * x[i]);
    scale = 1.0f / sqrtf((float)(ss / n) + eps);
    for (i = 0; i < n; i++) out[i] = (x[i] * scale) * w[i];
}

/* Rotates pairs (x[2i], x[2i+1]) of the first n_rot values by
   pos * base^(-2i/n_rot) / freqs[i], the angle stepped by multiplication as
   llama.cpp does. freqs may be NULL. */
static void infer__rope(float *x, int n_rot, int pos, float base, const float *freqs) {
    float theta = (float)pos, step = powf(base, -2.0f / (float)n_rot);
    int i;
    for (i = 0; i < n_rot; i += 2) {
        float a = freqs ? theta / freqs[i / 2] : theta;
        float c = cosf(a), s = sinf(a), x0 = x[i], x1 = x[i + 1];
        x[i] = x0 * c - x1 * s;
        x[i + 1] = x0 * s + x1 * c;
        theta *= step;
    }
}

static float infer__silu(float x) { return x / (1.0f + expf(-x)); }

/* ---- matrix multiply: Y[t] = W . X[t] for every token t --------------- */

/* Up to three products that read the same input (q, k, v; gate, up) run
   as one parallel op: the input is converted once per activation type and
   the workers split the rows of all of them, so there is one hand-out and
   one wait instead of three. */

typedef struct infer__matmul_op {
    const infer__tensor *w;
    infer__vec_dot_fn vec_dot;
    infer__gemm_fn gemm; /* NULL: the vec_dot loop */
    const uint8_t *xq; /* converted activations, row stride xq_row */
    size_t xq_row;
    float *y;          /* row stride ldy */
    int ldy;
} infer__matmul_op;

typedef struct infer__matmul_task {
    infer__matmul_op op[INFER__MAX_FUSED];
    int n_ops, n_tok;
    int64_t rows; /* of all ops together */
} infer__matmul_task;

static void infer__matmul_worker(void *arg, int ith, int nth) {
    const infer__matmul_task *t = (const infer__matmul_task *)arg;
    int64_t r = t->rows * ith / nth, r1 = t->rows * (ith + 1) / nth, base = 0;
    int o, j;
    for (o = 0; o < t->n_ops && r < r1; o++) {
        const infer__matmul_op *op = &t->op[o];
        int64_t rows = op->w->ne[1], end = INFER__MIN(r1 - base, rows);
        int n = (int)op->w->ne[0];
        size_t row_size = infer__row_size(op->w->type, n);
        if (op->gemm && t->n_tok > 1 && r - base < end) {
            op->gemm(n, (const uint8_t *)op->w->data + (size_t)(r - base) * row_size, row_size, (int)(end - (r - base)),
                     op->xq, op->xq_row, t->n_tok, op->y + (r - base), (size_t)op->ldy);
            r = base + end;
        }
        for (; r - base < end; r++) {
            const uint8_t *wr = (const uint8_t *)op->w->data + (size_t)(r - base) * row_size;
            for (j = 0; j < t->n_tok; j++)
                op->y[(size_t)j * op->ldy + (r - base)] = op->vec_dot(n, wr, op->xq + (size_t)j * op->xq_row);
        }
        base += rows;
    }
}

/* y[i] = w[i] . x for each of n_ops weights (all with rows of w[0]->ne[0]);
   x: n_tok rows (stride ldx); y[i]: n_tok rows of w[i]->ne[1] (stride ldy[i]). */
static void infer__matmul_n(infer_context *c, int n_ops, const infer__tensor *const *w, const float *x, int ldx,
                            int n_tok, float *const *y, const int *ldy) {
    infer__matmul_task task;
    infer_type done[INFER__MAX_FUSED];
    int n = (int)w[0]->ne[0], i, j, n_done = 0;
    task.n_ops = n_ops;
    task.n_tok = n_tok;
    task.rows = 0;
    for (i = 0; i < n_ops; i++) {
        infer__matmul_op *op = &task.op[i];
        infer_type vt = infer__traits(w[i]->type)->vec_dot_type;
        op->w = w[i];
        op->vec_dot = c->kern.vec_dot[w[i]->type];
        op->gemm = c->kern.gemm[w[i]->type];
        op->y = y[i];
        op->ldy = ldy[i];
        task.rows += w[i]->ne[1];
        if (vt == INFER_TYPE_F32) {
            op->xq = (const uint8_t *)x;
            op->xq_row = (size_t)ldx * sizeof(float);
            continue;
        }
        op->xq_row = infer__row_size(vt, n);
        for (j = 0; j < n_done && done[j] != vt; j++) {}
        op->xq = (const uint8_t *)c->xq + (size_t)j * c->n_batch * c->xq_row_max;
        if (j < n_done) continue; /* this input in this type is there already */
        done[n_done++] = vt;
        for (j = 0; j < n_tok; j++) c->kern.from_float[vt](x + (size_t)j * ldx, (uint8_t *)op->xq + (size_t)j * op->xq_row, n);
    }
    infer__pool_run(c->pool, infer__matmul_worker, &task);
}

static void infer__matmul(infer_context *c, const infer__tensor *w, const float *x, int ldx, int n_tok, float *y,
                          int ldy) {
    infer__matmul_n(c, 1, &w, x, ldx, n_tok, &y, &ldy);
}

/* ---- attention over the KV cache ------------------------------------- */

typedef struct infer__attn_task {
    infer_context *c;
    int layer, n_tok, pos0;
} infer__attn_task;

static void infer__attn_worker(void *arg, int ith, int nth) {
    const infer__attn_task *t = (const infer__attn_task *)arg;
    infer_context *c = t->c;
    const infer_model *m = c->model;
    int hd = m->head_dim, kv_dim = m->n_kv_heads * hd, group = m->n_heads / m->n_kv_heads;
    int n_work = t->n_tok * m->n_heads, w;
    const uint16_t *kc = c->k_cache + (size_t)t->layer * c->n_ctx * kv_dim;
    const uint16_t *vc = c->v_cache + (size_t)t->layer * c->n_ctx * kv_dim;
    float *scores = c->scores + (size_t)ith * c->n_ctx;
    float *qh = c->qh + (size_t)ith * hd;
    float scale = 1.0f / sqrtf((float)hd);
    for (w = n_work * ith / nth; w < n_work * (ith + 1) / nth; w++) {
        int tok = w / m->n_heads, h = w % m->n_heads, kvh = h / group;
        int n_keys = t->pos0 + tok + 1, p, d;
        const float *q = c->q + (size_t)tok * m->dim + (size_t)h * hd;
        float *out = c->att + (size_t)tok * m->dim + (size_t)h * hd;
        float mx = -INFINITY, inv;
        double sum = 0;
        for (d = 0; d < hd; d++) qh[d] = infer__fp16_to_fp32(infer__fp32_to_fp16(q[d]));
        for (p = 0; p < n_keys; p++) {
            const uint16_t *k = kc + (size_t)p * kv_dim + (size_t)kvh * hd;
            float s = 0;
            for (d = 0; d < hd; d++) s += qh[d] * infer__fp16_to_fp32(k[d]);
            scores[p] = s * scale;
            mx = INFER__MAX(mx, scores[p]);
        }
        for (p = 0; p < n_keys; p++) {
            scores[p] = expf(scores[p] - mx);
            sum += scores[p];
        }
        inv = (float)(1.0 / sum);
        for (d = 0; d < hd; d++) out[d] = 0;
        for (p = 0; p < n_keys; p++) {
            const uint16_t *v = vc + (size_t)p * kv_dim + (size_t)kvh * hd;
            float a = infer__fp16_to_fp32(infer__fp32_to_fp16(scores[p] * inv));
            for (d = 0; d < hd; d++) out[d] += a * infer__fp16_to_fp32(v[d]);
        }
    }
}

/* ---- the forward pass -------------------------------------------------- */

/* Runs n (<= n_batch) tokens at positions n_past..; writes logits for the
   rows from first_logit on into logits (n_vocab floats each). */
static void infer__forward(infer_context *c, const infer_token *tokens, int n, int first_logit, float *logits) {
    const infer_model *m = c->model;
    int dim = m->dim, hd = m->head_dim, kv_dim = m->n_kv_heads * hd, ffn = m->ffn_dim;
    int pos0 = c->n_past, l, t, i;
    size_t emb_row = infer__row_size(m->tok_embd->type, dim);

    for (t = 0; t < n; t++)
        infer__traits(m->tok_embd->type)
            ->to_float((const uint8_t *)m->tok_embd->data + (size_t)tokens[t] * emb_row, c->x + (size_t)t * dim, dim);

    for (l = 0; l < m->n_layers; l++) {
        const infer__layer *L = &m->layers[l];
        infer__attn_task at;
        uint16_t *kc = c->k_cache + ((size_t)l * c->n_ctx + pos0) * kv_dim;
        uint16_t *vc = c->v_cache + ((size_t)l * c->n_ctx + pos0) * kv_dim;

        /* attention */
        for (t = 0; t < n; t++)
            infer__rmsnorm(c->xb + (size_t)t * dim, c->x + (size_t)t * dim, (const float *)L->attn_norm->data, dim,
                           m->norm_eps);
        {
            const infer__tensor *w[3];
            float *y[3];
            int ld[3];
            w[0] = L->wq, w[1] = L->wk, w[2] = L->wv;
            y[0] = c->q, y[1] = c->k, y[2] = c->v;
            ld[0] = dim, ld[1] = kv_dim, ld[2] = kv_dim;
            infer__matmul_n(c, 3, w, c->xb, dim, n, y, ld);
        }
        for (t = 0; t < n; t++) {
            for (i = 0; i < m->n_heads; i++) infer__rope(c->q + (size_t)t * dim + i * hd, m->rope_dim, pos0 + t, m->rope_base, m->rope_freqs);
            for (i = 0; i < m->n_kv_heads; i++)
                infer__rope(c->k + (size_t)t * kv_dim + i * hd, m->rope_dim, pos0 + t, m->rope_base, m->rope_freqs);
            for (i = 0; i < kv_dim; i++) {
                kc[(size_t)t * kv_dim + i] = infer__fp32_to_fp16(c->k[(size_t)t * kv_dim + i]);
                vc[(size_t)t * kv_dim + i] = infer__fp32_to_fp16(c->v[(size_t)t * kv_dim + i]);
            }
        }
        at.c = c;
        at.layer = l;
        at.n_tok = n;
        at.pos0 = pos0;
        infer__pool_run(c->pool, infer__attn_worker, &at);
        infer__matmul(c, L->wo, c->att, dim, n, c->xb, dim);
        for (i = 0; i < n * dim; i++) c->x[i] += c->xb[i];

        /* feed-forward: down(silu(gate(x)) * up(x)) */
        for (t = 0; t < n; t++)
            infer__rmsnorm(c->xb + (size_t)t * dim, c->x + (size_t)t * dim, (const float *)L->ffn_norm->data, dim,
                           m->norm_eps);
        {
            const infer__tensor *w[2];
            float *y[2];
            int ld[2];
            w[0] = L->w_gate, w[1] = L->w_up;
            y[0] = c->hb, y[1] = c->hb2;
            ld[0] = ld[1] = ffn;
            infer__matmul_n(c, 2, w, c->xb, dim, n, y, ld);
        }
        for (i = 0; i < n * ffn; i++) c->hb[i] = infer__silu(c->hb[i]) * c->hb2[i];
        infer__matmul(c, L->w_down, c->hb, ffn, n, c->xb, dim);
        for (i = 0; i < n * dim; i++) c->x[i] += c->xb[i];
    }

    if (first_logit < n) {
        for (t = first_logit; t < n; t++)
            infer__rmsnorm(c->xb + (size_t)t * dim, c->x + (size_t)t * dim, (const float *)m->output_norm->data, dim,
                           m->norm_eps);
        infer__matmul(c, m->output, c->xb + (size_t)first_logit * dim, dim, n - first_logit, logits, m->n_vocab);
    }
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
        infer__forward(c, tokens + done, nb, first, out);
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

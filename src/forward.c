/* forward.c - the context (KV cache, scratch) and the forward pass over a
   batch of tokens, for every architecture the model description covers.
   Reads top to bottom like the paper: embed (scaled where the model says),
   then per layer RMSNorm -> q, k, v (+ biases) -> per-head q/k norms ->
   RoPE -> attention (sliding window, soft-capping) -> output (+ post-norm)
   -> residual -> RMSNorm -> gated FFN (SiLU or GELU) or experts -> (post-
   norm) -> residual, then the final norm, the output projection and any
   logit soft-cap. Each optional step runs where the description has its
   weights or value, never by family name.
   The whole pass is one task of the thread pool: every worker runs the
   steps below, splitting each step's work, and the workers meet at a
   barrier between steps (per-token steps by tokens, products by rows,
   attention by heads and token runs, experts by expert and rows).
   The numerics follow llama.cpp's CPU path where it matters for matching
   its outputs: activations converted to the weights' dot type, K and V
   cached as F16, sums of squares in double, RoPE angles stepped by
   multiplication, GELU through an F16 table. */
#include "context.h"

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

/* Points the product's ops at the model's packed weights, where this
   context's kernels multiply that layout (a context matching llama.cpp
   may lack a packed kernel the model's default has). */
static void infer__product_use_packed(const infer_context *c, infer__product *p) {
    int i;
    for (i = 0; i < p->n_ops; i++)
        if (c->kern.gemm_packed[p->w[i]->type]) p->packed[i] = infer__weights_packed(c->model, p->w[i]);
}

static int infer__plan(infer_context *c) {
    const infer_model *m = c->model;
    int l, n_steps = m->n_layers * INFER__P_PER_LAYER + 1;
    c->plan = (infer__product *)infer__calloc((size_t)n_steps, sizeof(infer__product));
    if (!c->plan) return 0;
    for (l = 0; l < m->n_layers; l++) {
        const infer__layer *L = &m->layers[l];
        infer__product *p = c->plan + (size_t)l * INFER__P_PER_LAYER;
        const infer__tensor *w[3];
        float *y[3];
        int ld[3];
        w[0] = L->wq, w[1] = L->wk, w[2] = L->wv;
        y[0] = c->q, y[1] = c->k, y[2] = c->v;
        ld[0] = m->q_dim, ld[1] = ld[2] = m->kv_dim;
        infer__product_init(&p[INFER__P_QKV], 3, w, y, ld);
        infer__product_init(&p[INFER__P_O], 1, &L->wo, &c->xb, &m->dim);
        if (L->ffn_router) { /* experts: the router, then gate/up and down per expert */
            infer__product_init(&p[INFER__P_ROUTER], 1, &L->ffn_router, &c->route.logits, &m->n_expert);
            w[0] = L->gate_exps, w[1] = L->up_exps;
            y[0] = c->hb, y[1] = c->hb2;
            ld[0] = ld[1] = m->expert_ffn;
            infer__product_init(&p[INFER__P_GATE_UP], 2, w, y, ld);
            infer__product_init(&p[INFER__P_DOWN], 1, &L->down_exps, &c->moe_out, &m->dim);
            p[INFER__P_GATE_UP].expert_rows = m->expert_ffn;
            p[INFER__P_DOWN].expert_rows = m->dim;
        } else {
            w[0] = L->w_gate, w[1] = L->w_up;
            y[0] = c->hb, y[1] = c->hb2;
            ld[0] = ld[1] = m->ffn_dim;
            infer__product_init(&p[INFER__P_GATE_UP], 2, w, y, ld);
            infer__product_init(&p[INFER__P_DOWN], 1, &L->w_down, &c->xb, &m->dim);
        }
    }
    /* the output's rows go straight to the caller's logits (set per pass) */
    infer__product_init(&c->plan[n_steps - 1], 1, &m->output, &c->logits, &m->n_vocab);
    for (l = 0; l < n_steps; l++) infer__product_use_packed(c, &c->plan[l]);
    return 1;
}

/* The RoPE factors this context uses: LongRoPE's long ones when the
   context is longer than the model's original one (as llama.cpp picks). */
static void infer__context_rope_freqs(infer_context *c) {
    const infer_model *m = c->model;
    int r;
    for (r = 0; r < m->n_ropes; r++) {
        const infer__rope *rp = &m->ropes[r];
        c->rope_freqs[r] = rp->freqs_long && c->n_ctx > rp->n_ctx_orig ? rp->freqs_long : rp->freqs;
    }
}

INFERDEF infer_context *infer_context_new(infer_model *m, const infer_context_params *params, infer_error *err) {
    infer_context_params defaults = infer_context_default_params();
    infer_context *c;
    infer_type kv_type;
    int ok = 1, widest, pairs, moe = 0, l;
    if (!m || !m->n_layers) {
        infer__set_error(err, INFER_ERR_ARG, "a context needs a model with weights (not vocab-only)");
        return NULL;
    }
    if (!params) params = &defaults;
    if (params->n_ctx < 0 || params->n_batch < 0 || params->n_threads < 0 || params->n_threads > 512 ||
        params->n_seq < 0 || params->n_seq > 4096 || params->n_keep < 0 ||
        (params->full_policy != INFER_FULL_STOP && params->full_policy != INFER_FULL_SHIFT)) {
        infer__set_error(err, INFER_ERR_ARG, "context parameters out of range");
        return NULL;
    }
    /* the GPU's cache is one sequence's, and stays where it is */
    if (m->gpu && (params->n_seq > 1 || params->full_policy == INFER_FULL_SHIFT)) {
        infer__set_error(err, INFER_ERR_UNSUPPORTED, "a CUDA context holds one sequence and cannot shift it (n_seq %d%s)",
                         params->n_seq, params->full_policy == INFER_FULL_SHIFT ? ", shift" : "");
        return NULL;
    }
    kv_type = params->kv_type == INFER_TYPE_F32 ? INFER_TYPE_F16 : params->kv_type;
    c = (infer_context *)infer__calloc(1, sizeof *c);
    if (!c) {
        infer__set_error(err, INFER_ERR_NOMEM, "out of memory");
        return NULL;
    }
    c->model = m;
    c->kern = m->kern; /* the kernels the model's weights were packed for */
    c->n_ctx = params->n_ctx ? params->n_ctx : INFER__MIN(m->n_ctx_train, 4096);
    c->n_seq = params->n_seq ? params->n_seq : 1;
    c->n_batch = params->n_batch ? params->n_batch : 512;
    c->n_batch = INFER__MIN(c->n_batch, c->n_ctx * c->n_seq);
    c->full_policy = params->full_policy;
    c->n_keep = INFER__MIN(params->n_keep, c->n_ctx / 2); /* shifting must free something */
    c->seqs = (infer__seq *)infer__calloc((size_t)c->n_seq, sizeof(infer__seq));
    if (!c->seqs) {
        INFER_FREE(c);
        infer__set_error(err, INFER_ERR_NOMEM, "out of memory");
        return NULL;
    }
    for (l = 0; l < c->n_seq; l++) c->seqs[l].logit_row = -1;
    infer__context_rope_freqs(c);
    if (!infer__context_attach(c, err)) { /* a GPU model: its cache and scratch there */
        infer_context_free(c);
        return NULL;
    }
    if (!c->gpu) { /* on the GPU, the cache is there */
        /* a context that shifts keeps every position of a sliding window's
           layer too: moving positions down needs the ones a ring drops */
        int ring_batch = c->full_policy == INFER_FULL_SHIFT ? c->n_ctx : INFER__MIN(c->n_batch, c->n_ctx);
        if (!infer__kv_init(&c->kv, kv_type, m, c->n_ctx, ring_batch, c->n_seq, err)) {
            infer_context_free(c);
            return NULL;
        }
        c->bytes += infer__kv_bytes(&c->kv);
    }
    c->pool = infer__pool_new(params->n_threads ? params->n_threads : 1);
    if (!c->pool) ok = 0;
    c->n_threads = c->pool ? infer__pool_size(c->pool) : 1;
    for (l = 0; l < m->n_layers; l++) moe |= m->layers[l].ffn_router != NULL;
    /* prompts summed otherwise than llama.cpp sums them move logits by a
       fraction of a percent; routing (experts), soft-capped attention and
       scaled embeddings turn that into several (measured: synth gemma2 4%,
       Gemma 3 270M 7%), so such models take llama.cpp's order by default */
    if (params->match_llama > 0 || (params->match_llama == 0 && (moe || m->attn_softcap > 0 || m->embd_scale > 0))) {
        int t;
        c->match_llama = 1;
        for (t = 0; t < INFER_TYPE_COUNT; t++)
            if (c->kern.gemm_packed_ordered[t]) c->kern.gemm_packed[t] = c->kern.gemm_packed_ordered[t];
        /* F16 everywhere as one 16-lane dot: packed where that kernel exists */
        c->kern.gemm_packed[INFER_TYPE_F16] = c->kern.gemm_packed_ordered[INFER_TYPE_F16];
        c->kern.gemm[INFER_TYPE_F16] = NULL;
        c->kern.vec_dot[INFER_TYPE_F16] = c->kern.f16_dot_ordered;
    }
    pairs = moe ? c->n_batch * m->n_expert_used : 0;
    widest = INFER__MAX(INFER__MAX(m->dim, m->q_dim), INFER__MAX(m->ffn_dim, m->expert_ffn));
    c->xq_rows = INFER__MAX(c->n_batch, pairs);
    c->x = (float *)infer__ctx_alloc(c, (size_t)c->n_batch * m->dim, sizeof(float), &ok);
    c->xb = (float *)infer__ctx_alloc(c, (size_t)c->n_batch * m->dim, sizeof(float), &ok);
    c->q = (float *)infer__ctx_alloc(c, (size_t)c->n_batch * m->q_dim, sizeof(float), &ok);
    c->k = (float *)infer__ctx_alloc(c, (size_t)c->n_batch * m->kv_dim, sizeof(float), &ok);
    c->v = (float *)infer__ctx_alloc(c, (size_t)c->n_batch * m->kv_dim, sizeof(float), &ok);
    c->att = (float *)infer__ctx_alloc(c, (size_t)c->n_batch * m->q_dim, sizeof(float), &ok);
    c->hb = (float *)infer__ctx_alloc(c, INFER__MAX((size_t)c->n_batch * m->ffn_dim, (size_t)pairs * m->expert_ffn),
                                      sizeof(float), &ok);
    c->hb2 = (float *)infer__ctx_alloc(c, INFER__MAX((size_t)c->n_batch * m->ffn_dim, (size_t)pairs * m->expert_ffn),
                                       sizeof(float), &ok);
    if (moe) {
        c->moe_out = (float *)infer__ctx_alloc(c, (size_t)pairs * m->dim, sizeof(float), &ok);
        c->route.expert = (int *)infer__ctx_alloc(c, (size_t)pairs, sizeof(int), &ok);
        c->route.weight = (float *)infer__ctx_alloc(c, (size_t)pairs, sizeof(float), &ok);
        c->route.pair_of = (int *)infer__ctx_alloc(c, (size_t)pairs, sizeof(int), &ok);
        c->route.pair_token = (int *)infer__ctx_alloc(c, (size_t)pairs, sizeof(int), &ok);
        c->route.start = (int *)infer__ctx_alloc(c, (size_t)m->n_expert + 1, sizeof(int), &ok);
        c->route.logits = (float *)infer__ctx_alloc(c, (size_t)c->n_batch * m->n_expert, sizeof(float), &ok);
    }
    c->pos = (int *)infer__ctx_alloc(c, (size_t)c->n_batch, sizeof(int), &ok);
    c->sel = (int *)infer__ctx_alloc(c, (size_t)c->n_batch, sizeof(int), &ok);
    c->groups = (infer__group *)infer__ctx_alloc(c, (size_t)c->n_batch, sizeof(infer__group), &ok);
    c->rope = (float *)infer__ctx_alloc(c, (size_t)m->n_ropes * c->n_batch * m->rope_dim, sizeof(float), &ok);
    c->attn_scratch_n = infer__attn_scratch_floats(m->head_dim, c->match_llama && c->kv.type == INFER_TYPE_F16);
    c->attn_scratch = (float *)infer__ctx_alloc(c, (size_t)c->n_threads * c->attn_scratch_n, sizeof(float), &ok);
    /* F16 (2 bytes a value) is the widest converted form */
    c->xq_row_max = (size_t)widest * sizeof(uint16_t);
    c->xq = infer__ctx_alloc(c, (size_t)c->xq_rows * INFER__MAX_FUSED, c->xq_row_max, &ok);
    if (ok && !c->gpu && !infer__plan(c)) ok = 0; /* a GPU context never runs the CPU's products */
    if (!ok) {
        infer_context_free(c);
        infer__set_error(err, INFER_ERR_NOMEM, "out of memory for a context of %d tokens", params->n_ctx);
        return NULL;
    }
    return c;
}

INFERDEF void infer_context_free(infer_context *c) {
    int l;
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
    INFER_FREE(c->moe_out);
    INFER_FREE(c->route.expert);
    INFER_FREE(c->route.weight);
    INFER_FREE(c->route.pair_of);
    INFER_FREE(c->route.pair_token);
    INFER_FREE(c->route.start);
    INFER_FREE(c->route.logits);
    INFER_FREE(c->rope);
    INFER_FREE(c->attn_scratch);
    INFER_FREE(c->xq);
    INFER_FREE(c->plan);
    INFER_FREE(c->pos);
    INFER_FREE(c->sel);
    INFER_FREE(c->groups);
    INFER_FREE(c->logits);
    stbds_arrfree(c->row_of);
    stbds_arrfree(c->order);
    stbds_arrfree(c->btok);
    stbds_arrfree(c->flags);
    for (l = 0; c->seqs && l < c->n_seq; l++) stbds_arrfree(c->seqs[l].tokens);
    INFER_FREE(c->seqs);
    stbds_arrfree(c->prompt_tokens);
    stbds_arrfree(c->gen_tokens);
    INFER_FREE(c);
}

INFERDEF int infer_context_n_ctx(const infer_context *c) { return c->n_ctx; }
INFERDEF const char *infer_context_isa(const infer_context *c) { return infer__isa_name(c->kern.isa); }
INFERDEF int infer_context_n_seq(const infer_context *c) { return c->n_seq; }
INFERDEF void infer_context_set_abort(infer_context *c, infer_abort_fn fn, void *user) {
    c->abort_fn = fn;
    c->abort_user = user;
}
static int infer__aborted(const infer_context *c) {
    return (c->abort_fn && c->abort_fn(c->abort_user)) || (c->sched && infer__sched_should_stop(c->sched));
}

/* ---- the building blocks -------------------------------------------- */

static void infer__rmsnorm(const infer__kernels *k, float *out, const float *x, const float *w, int n, float eps) {
    float scale = 1.0f / sqrtf((float)(k->sum_squares(x, n) / n) + eps);
    int i;
    for (i = 0; i < n; i++) out[i] = (x[i] * scale) * w[i];
}

/* cos and sin of the angles of position pos, as ggml's rope computes them:
   pair i turns by theta_i = pos * base^(-2i/n_rot) / freqs[i] (stepped by
   multiplication), interpolated by freq_scale, mixed back toward the
   unscaled angle by YaRN's ramp, and cos and sin scaled by the attention
   factor. freqs may be NULL. */
static void infer__rope_angles(float *cs, const infer__rope *r, const float *freqs, int pos) {
    float theta = (float)pos, step = powf(r->base, -2.0f / (float)r->n_rot), lo = 0, hi = 0, mscale = r->attn_factor;
    int i;
    if (r->ext_factor != 0.0f) { /* YaRN's correction range of dimensions */
        float den = 2 * logf(r->base), pi2 = 2 * 3.14159265358979323846f;
        lo = floorf((float)r->n_rot * logf((float)r->n_ctx_orig / (r->beta_fast * pi2)) / den);
        hi = ceilf((float)r->n_rot * logf((float)r->n_ctx_orig / (r->beta_slow * pi2)) / den);
        lo = INFER__MAX(0.0f, lo);
        hi = INFER__MIN((float)(r->n_rot - 1), hi);
        mscale *= 1.0f + 0.1f * logf(1.0f / r->freq_scale);
    }
    for (i = 0; i < r->n_rot; i += 2) {
        float extrap = freqs ? theta / freqs[i / 2] : theta, a = r->freq_scale * extrap;
        if (r->ext_factor != 0.0f) {
            float y = ((float)(i / 2) - lo) / INFER__MAX(0.001f, hi - lo);
            float mix = (1 - INFER__MIN(1.0f, INFER__MAX(0.0f, y))) * r->ext_factor;
            a = a * (1 - mix) + extrap * mix;
        }
        cs[i] = cosf(a) * mscale;
        cs[i + 1] = sinf(a) * mscale;
        theta *= step;
    }
}

/* Rotates the first n_rot values of one head: pairs (2i, 2i+1), or with
   neox pairs (i, i + n_rot/2); pair i turns by the angle at cs[2i]. */
static void infer__rope_rotate(float *x, const float *cs, int n_rot, int neox, int fused) {
    int i, half = n_rot / 2;
    for (i = 0; i < n_rot; i += 2) {
        int a = neox ? i / 2 : i, b = neox ? i / 2 + half : i + 1;
        float x0 = x[a], x1 = x[b];
        if (fused) { /* as llama.cpp's build contracts it */
            x[a] = fmaf(x0, cs[i], -(x1 * cs[i + 1]));
            x[b] = fmaf(x0, cs[i + 1], x1 * cs[i]);
        } else {
            x[a] = x0 * cs[i] - x1 * cs[i + 1];
            x[b] = x0 * cs[i + 1] + x1 * cs[i];
        }
    }
}

/* x = cap * tanh(x / cap), as llama.cpp scales, takes tanh and scales back */
static void infer__softcap(float *x, int n, float cap) {
    float inv = 1.0f / cap;
    int i;
    for (i = 0; i < n; i++) x[i] = tanhf(x[i] * inv) * cap;
}

/* ---- products: Y[t] = W . X[t] for every token t ----------------------- */

static uint8_t *infer__xq_slot(const infer_context *c, int slot) {
    return (uint8_t *)c->xq + (size_t)slot * c->xq_rows * c->xq_row_max;
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

/* Rows r0..r1 of op o of the product, for n_tok converted input rows; row
   r of token j lands at y[j * ldy + r - r0]. */
static void infer__product_rows(const infer_context *c, const infer__product *p, int o, int64_t r0, int64_t r1,
                                const uint8_t *xq, size_t xq_row, int n_tok, float *y) {
    const infer__tensor *w = p->w[o];
    int n = (int)w->ne[0], j;
    size_t row_size = infer__row_size(w->type, n), ldy = (size_t)p->ldy[o];
    const uint8_t *wr = (const uint8_t *)w->data + (size_t)r0 * row_size;
    /* llama.cpp sums one token's F16 products in another order than a batch's */
    infer__vec_dot_fn vec_dot = c->match_llama && n_tok == 1 && w->type == INFER_TYPE_F16 ? c->kern.f16_dot_ordered1
                                                                                           : c->kern.vec_dot[w->type];
    int64_t r;
    if (p->packed[o]) {
        c->kern.gemm_packed[w->type](n, p->packed[o] + infer__pack_offset(&c->kern, w->type, n, r0), (int)(r1 - r0), xq,
                                     xq_row, n_tok, y, ldy);
        return;
    }
    if (c->kern.gemm[w->type] && n_tok > 1) {
        c->kern.gemm[w->type](n, wr, row_size, (int)(r1 - r0), xq, xq_row, n_tok, y, ldy);
        return;
    }
    for (r = 0; r < r1 - r0; r++, wr += row_size)
        for (j = 0; j < n_tok; j++) y[(size_t)j * ldy + r] = vec_dot(n, wr, xq + (size_t)j * xq_row);
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
                                n_tok, (o == 0 && out0 ? out0 : p->y[o]) + lo * INFER__PACK_ROWS);
        }
        base += n_chunks;
    }
}

/* ---- experts ------------------------------------------------------------ */

/* Token t's experts from its router logits: probabilities (softmax over
   all, or over the chosen), the top k by bubble order as ggml's argsort
   (ties to the lower index), their weights renormalised if the model says. */
static void infer__moe_choose(const infer_model *m, infer__moe_route *rt, int t, int pos) {
    const float *lg = rt->logits + (size_t)t * m->n_expert;
    int k = m->n_expert_used, e, j, *ex = rt->expert + (size_t)t * k;
    float probs[512], *w = rt->weight + (size_t)t * k, mx;
    double sum = 0;
    for (e = 0; e < m->n_expert; e++) probs[e] = lg[e];
    if (m->gating == INFER__GATING_SOFTMAX) {
        for (mx = probs[0], e = 1; e < m->n_expert; e++) mx = INFER__MAX(mx, probs[e]);
        for (e = 0; e < m->n_expert; e++) sum += (double)(probs[e] = expf(probs[e] - mx));
        for (e = 0; e < m->n_expert; e++) probs[e] *= (float)(1.0 / sum);
    }
    for (j = 0; j < k; j++) {
        int best = -1;
        for (e = 0; e < m->n_expert; e++) {
            int taken = 0, i;
            for (i = 0; i < j; i++) taken |= ex[i] == e;
            if (!taken && (best < 0 || probs[e] > probs[best])) best = e;
        }
        ex[j] = best;
        w[j] = probs[best];
    }
    if (rt->margin && k < m->n_expert) { /* how close the last choice came to the next expert */
        float next = -INFINITY;
        for (e = 0; e < m->n_expert; e++) {
            int taken = 0;
            for (j = 0; j < k; j++) taken |= ex[j] == e;
            if (!taken) next = INFER__MAX(next, probs[e]);
        }
        rt->margin[pos] = INFER__MIN(rt->margin[pos], (w[k - 1] - next) / w[k - 1]);
    }
    if (m->gating == INFER__GATING_SOFTMAX_TOPK) {
        for (mx = w[0], j = 1; j < k; j++) mx = INFER__MAX(mx, w[j]);
        for (sum = 0, j = 0; j < k; j++) sum += (double)(w[j] = expf(w[j] - mx));
        for (j = 0; j < k; j++) w[j] *= (float)(1.0 / sum);
    }
    if (m->expert_norm) {
        float total;
        for (sum = 0, j = 0; j < k; j++) sum += (double)w[j];
        total = (float)sum;
        for (j = 0; j < k; j++) w[j] /= total;
    }
}

/* The (token, expert) pairs sorted by expert, tokens in order within one. */
static void infer__moe_pairs(const infer_model *m, infer__moe_route *rt, int n_tok) {
    int k = m->n_expert_used, e, s, n = n_tok * k;
    for (e = 0; e <= m->n_expert; e++) rt->start[e] = 0;
    for (s = 0; s < n; s++) rt->start[rt->expert[s] + 1]++;
    for (e = 0; e < m->n_expert; e++) rt->start[e + 1] += rt->start[e];
    for (s = 0; s < n; s++) { /* start[e] moves past each pair placed, then is put back */
        int p = rt->start[rt->expert[s]]++;
        rt->pair_of[s] = p;
        rt->pair_token[p] = s / k;
    }
    for (e = m->n_expert; e > 0; e--) rt->start[e] = rt->start[e - 1];
    rt->start[0] = 0;
}

/* This worker's share of an experts product: units of INFER__PACK_ROWS
   rows of one op of one expert with tokens, each over all its pairs
   (their converted inputs are rows start[e].. of the slot). */
static void infer__moe_product(const infer_context *c, const infer__product *p, int ith, int nth) {
    const infer__moe_route *rt = &c->route;
    const infer_model *m = c->model;
    int64_t rows = p->expert_rows, per = (rows + INFER__PACK_ROWS - 1) / INFER__PACK_ROWS, units = 0, u0, u1, u = 0;
    int e, o;
    for (e = 0; e < m->n_expert; e++)
        if (rt->start[e + 1] > rt->start[e]) units += per * p->n_ops;
    u0 = units * ith / nth, u1 = units * (ith + 1) / nth;
    for (e = 0; e < m->n_expert && u < u1; e++) {
        int n_pairs = rt->start[e + 1] - rt->start[e];
        if (!n_pairs) continue;
        for (o = 0; o < p->n_ops; o++, u += per) {
            int64_t lo = INFER__MAX(u0, u) - u, hi = INFER__MIN(u1, u + per) - u;
            size_t xq_row = infer__row_size(p->x_type[p->slot[o]], (int)p->w[o]->ne[0]);
            if (lo >= hi) continue;
            infer__product_rows(c, p, o, e * rows + lo * INFER__PACK_ROWS, e * rows + INFER__MIN(hi * INFER__PACK_ROWS, rows),
                                infer__xq_slot(c, p->slot[o]) + (size_t)rt->start[e] * xq_row, xq_row, n_pairs,
                                p->y[o] + (size_t)rt->start[e] * p->ldy[o] + lo * INFER__PACK_ROWS);
        }
    }
}

/* ---- the forward pass -------------------------------------------------- */

typedef struct infer__pass {
    infer_context *c;
    const infer_token *tokens;
    int n, n_groups, n_sel;
    float *logits, *hidden;
    int next_item; /* attention work handed out so far */
    int stop;      /* the abort callback said stop (worker 0 asks, all read after a barrier) */
} infer__pass;

/* The gated activation of n values: g = act(g) * u. */
static void infer__act_mul(const infer_context *c, float *g, const float *u, int n) {
    if (c->model->act == INFER__ACT_GELU)
        c->kern.gelu_mul(g, u, n, c->model->gelu_table);
    else
        c->kern.silu_mul(g, u, n);
}

/* The experts' feed-forward of the normed input xb (tokens t0..t1 are
   this worker's), into xb: route, gather, gate/up, activation, down, and
   each token's weighted sum in the order its experts were chosen. */
static void infer__moe_ffn(infer_context *c, const infer__product *P, int n, int t0, int t1, int ith, int nth) {
    const infer_model *m = c->model;
    infer__moe_route *rt = &c->route;
    const infer__product *gu = &P[INFER__P_GATE_UP], *dn = &P[INFER__P_DOWN];
    int k = m->n_expert_used, n_pairs = n * k, p0 = n_pairs * ith / nth, p1 = n_pairs * (ith + 1) / nth;
    int dim = m->dim, effn = m->expert_ffn, t, p, s, j, i;
    infer__product_run(c, &P[INFER__P_ROUTER], c->xb, dim, n, NULL, ith, nth);
    infer__pool_barrier(c->pool);
    for (t = t0; t < t1; t++) infer__moe_choose(m, rt, t, c->pos[t]);
    infer__pool_barrier(c->pool);
    if (ith == 0) infer__moe_pairs(m, rt, n);
    infer__pool_barrier(c->pool);
    for (p = p0; p < p1; p++) /* each pair's input, converted for gate and up */
        for (s = 0; s < gu->n_x; s++) {
            size_t row = infer__row_size(gu->x_type[s], dim);
            c->kern.from_float[gu->x_type[s]](c->xb + (size_t)rt->pair_token[p] * dim, infer__xq_slot(c, s) + (size_t)p * row,
                                              dim);
        }
    infer__pool_barrier(c->pool);
    infer__moe_product(c, gu, ith, nth);
    infer__pool_barrier(c->pool);
    for (p = p0; p < p1; p++) {
        infer__act_mul(c, c->hb + (size_t)p * effn, c->hb2 + (size_t)p * effn, effn);
        for (s = 0; s < dn->n_x; s++)
            c->kern.from_float[dn->x_type[s]](c->hb + (size_t)p * effn,
                                              infer__xq_slot(c, s) + (size_t)p * infer__row_size(dn->x_type[s], effn), effn);
    }
    infer__pool_barrier(c->pool);
    infer__moe_product(c, dn, ith, nth);
    infer__pool_barrier(c->pool);
    for (t = t0; t < t1; t++) {
        float *out = c->xb + (size_t)t * dim;
        for (j = 0; j < k; j++) {
            const float *y = c->moe_out + (size_t)rt->pair_of[t * k + j] * dim;
            float w = rt->weight[t * k + j];
            for (i = 0; i < dim; i++) out[i] = j ? out[i] + y[i] * w : y[i] * w;
        }
    }
}

/* Every worker runs this; t0..t1 are its tokens in the per-token steps. */
static void infer__forward_worker(void *arg, int ith, int nth) {
    infer__pass *ps = (infer__pass *)arg;
    infer_context *c = ps->c;
    const infer_model *m = c->model;
    int dim = m->dim, hd = m->head_dim, q_dim = m->q_dim, kv_dim = m->kv_dim, ffn = m->ffn_dim, n_rot = m->rope_dim;
    int n = ps->n, t0 = n * ith / nth, t1 = n * (ith + 1) / nth, l, t, i, r, g, first;
    size_t emb_row = infer__row_size(m->tok_embd->type, dim);
    const infer__product *out = &c->plan[(size_t)m->n_layers * INFER__P_PER_LAYER];
    const infer__layer *prev = NULL;
    infer__attn_scratch scratch;
    infer__attn_batch ab;

    memset(&ab, 0, sizeof ab);
    ab.ordered = c->match_llama && c->kv.type == INFER_TYPE_F16;
    infer__attn_scratch_carve(&scratch, c->attn_scratch + (size_t)ith * c->attn_scratch_n, hd, ab.ordered);
    ab.kv = &c->kv;
    ab.kern = &c->kern;
    ab.n_heads = m->n_heads;
    ab.scale = m->attn_scale_q ? 1.0f : m->attn_scale;
    ab.softcap = m->attn_softcap;
    ab.ldq = ab.ldo = q_dim;

    for (t = t0; t < t1; t++) {
        float *x = c->x + (size_t)t * dim;
        infer__traits(m->tok_embd->type)->to_float((const uint8_t *)m->tok_embd->data + (size_t)ps->tokens[t] * emb_row, x, dim);
        if (m->embd_scale > 0)
            for (i = 0; i < dim; i++) x[i] *= m->embd_scale;
        for (r = 0; r < m->n_ropes; r++)
            infer__rope_angles(c->rope + ((size_t)r * c->n_batch + t) * n_rot, &m->ropes[r], c->rope_freqs[r], c->pos[t]);
    }

    for (l = 0; l < m->n_layers; l++) {
        const infer__layer *L = &m->layers[l];
        const infer__product *P = c->plan + (size_t)l * INFER__P_PER_LAYER;
        /* stopped between layers: nothing has advanced (the cells written
           are past every sequence's end) */
        if (__atomic_load_n(&ps->stop, __ATOMIC_RELAXED)) return;

        /* attention: q, k, v of the normed input */
        for (t = t0; t < t1; t++) {
            float *x = c->x + (size_t)t * dim, *xb = c->xb + (size_t)t * dim;
            if (prev) { /* the previous layer's feed-forward residual */
                if (prev->post_ffn_norm) infer__rmsnorm(&c->kern, xb, xb, (const float *)prev->post_ffn_norm->data, dim, m->norm_eps);
                for (i = 0; i < dim; i++) x[i] += xb[i];
            }
            infer__rmsnorm(&c->kern, xb, x, (const float *)L->attn_norm->data, dim, m->norm_eps);
        }
        infer__product_convert(c, &P[INFER__P_QKV], c->xb, dim, t0, t1, 0);
        infer__pool_barrier(c->pool);
        infer__product_run(c, &P[INFER__P_QKV], c->xb, dim, n, NULL, ith, nth);
        infer__pool_barrier(c->pool);
        for (t = t0; t < t1; t++) {
            float *q = c->q + (size_t)t * q_dim, *k = c->k + (size_t)t * kv_dim, *v = c->v + (size_t)t * kv_dim;
            const float *cs = L->rope >= 0 ? c->rope + ((size_t)L->rope * c->n_batch + t) * n_rot : NULL;
            int neox = L->rope >= 0 && m->ropes[L->rope].neox;
            if (L->bq) for (i = 0; i < q_dim; i++) q[i] += ((const float *)L->bq->data)[i];
            if (L->bk) for (i = 0; i < kv_dim; i++) k[i] += ((const float *)L->bk->data)[i];
            if (L->bv) for (i = 0; i < kv_dim; i++) v[i] += ((const float *)L->bv->data)[i];
            for (i = 0; i < m->n_heads; i++) {
                float *qh = q + (size_t)i * hd;
                if (L->q_norm) infer__rmsnorm(&c->kern, qh, qh, (const float *)L->q_norm->data, hd, m->norm_eps);
                if (cs) infer__rope_rotate(qh, cs, n_rot, neox, c->match_llama);
            }
            if (m->attn_scale_q)
                for (i = 0; i < q_dim; i++) q[i] *= m->attn_scale;
            for (i = 0; i < m->n_kv_heads; i++) {
                float *kh = k + (size_t)i * hd;
                if (L->k_norm) infer__rmsnorm(&c->kern, kh, kh, (const float *)L->k_norm->data, hd, m->norm_eps);
                if (cs) infer__rope_rotate(kh, cs, n_rot, neox, c->match_llama);
            }
        }
        for (g = 0; g < ps->n_groups; g++) { /* each token's k and v to its sequence's cache */
            const infer__group *G = &c->groups[g];
            for (t = INFER__MAX(t0, G->start); t < INFER__MIN(t1, G->start + G->n); t++)
                infer__kv_store(&c->kv, &c->kern, G->seq, l, c->pos[t], c->k + (size_t)t * kv_dim, c->v + (size_t)t * kv_dim);
        }
        if (ith == 0) ps->next_item = 0;
        infer__pool_barrier(c->pool);
        ab.layer = l;
        ab.window = L->window;
        /* the work items of every sequence's run, handed out in one count */
        for (g = 0, first = 0;;) { /* first: the count's index of run g's first item */
            int item = infer__atomic_next(&ps->next_item);
            for (; g < ps->n_groups; g++) {
                const infer__group *G = &c->groups[g];
                ab.seq = G->seq, ab.pos0 = G->pos0, ab.n_tok = G->n;
                ab.q = c->q + (size_t)G->start * q_dim, ab.out = c->att + (size_t)G->start * q_dim;
                if (item < first + infer__attn_n_items(&ab)) break;
                first += infer__attn_n_items(&ab);
            }
            if (g == ps->n_groups) break;
            if (ab.ordered) infer__attn_item_ordered(&ab, item - first, &scratch);
            else infer__attn_item(&ab, item - first, &scratch);
        }
        infer__pool_barrier(c->pool);
        infer__product_convert(c, &P[INFER__P_O], c->att, q_dim, t0, t1, 0);
        infer__pool_barrier(c->pool);
        infer__product_run(c, &P[INFER__P_O], c->att, q_dim, n, NULL, ith, nth);
        infer__pool_barrier(c->pool);

        /* feed-forward of the normed input: down(act(gate(x)) * up(x)), or experts */
        for (t = t0; t < t1; t++) {
            float *x = c->x + (size_t)t * dim, *xb = c->xb + (size_t)t * dim;
            if (L->bo) for (i = 0; i < dim; i++) xb[i] += ((const float *)L->bo->data)[i];
            if (L->post_attn_norm) infer__rmsnorm(&c->kern, xb, xb, (const float *)L->post_attn_norm->data, dim, m->norm_eps);
            for (i = 0; i < dim; i++) x[i] += xb[i];
            infer__rmsnorm(&c->kern, xb, x, (const float *)L->ffn_norm->data, dim, m->norm_eps);
        }
        if (L->ffn_router) {
            infer__pool_barrier(c->pool);
            infer__moe_ffn(c, P, n, t0, t1, ith, nth);
        } else {
            infer__product_convert(c, &P[INFER__P_GATE_UP], c->xb, dim, t0, t1, 0);
            infer__pool_barrier(c->pool);
            infer__product_run(c, &P[INFER__P_GATE_UP], c->xb, dim, n, NULL, ith, nth);
            infer__pool_barrier(c->pool);
            for (t = t0; t < t1; t++) infer__act_mul(c, c->hb + (size_t)t * ffn, c->hb2 + (size_t)t * ffn, ffn);
            infer__product_convert(c, &P[INFER__P_DOWN], c->hb, ffn, t0, t1, 0);
            infer__pool_barrier(c->pool);
            infer__product_run(c, &P[INFER__P_DOWN], c->hb, ffn, n, NULL, ith, nth);
        }
        if (ith == 0) __atomic_store_n(&ps->stop, infer__aborted(c), __ATOMIC_RELAXED);
        infer__pool_barrier(c->pool); /* orders the flag too: every worker reads the same */
        prev = L;
    }
    if (__atomic_load_n(&ps->stop, __ATOMIC_RELAXED)) return;

    /* the last residual; then the selected tokens' final norm, packed into
       rows 0..n_sel of xb, through the output (or out as hidden states) */
    for (t = t0; t < t1; t++) {
        float *x = c->x + (size_t)t * dim, *xb = c->xb + (size_t)t * dim;
        if (prev->post_ffn_norm) infer__rmsnorm(&c->kern, xb, xb, (const float *)prev->post_ffn_norm->data, dim, m->norm_eps);
        for (i = 0; i < dim; i++) x[i] += xb[i];
    }
    if (!ps->n_sel) return;
    infer__pool_barrier(c->pool);
    {
        int s0 = ps->n_sel * ith / nth, s1 = ps->n_sel * (ith + 1) / nth, j;
        for (j = s0; j < s1; j++) {
            float *xb = c->xb + (size_t)j * dim;
            infer__rmsnorm(&c->kern, xb, c->x + (size_t)c->sel[j] * dim, (const float *)m->output_norm->data, dim, m->norm_eps);
            if (ps->hidden) memcpy(ps->hidden + (size_t)j * dim, xb, (size_t)dim * sizeof(float));
        }
        if (ps->hidden) return;
        infer__product_convert(c, out, c->xb, dim, s0, s1, 0);
    }
    infer__pool_barrier(c->pool);
    infer__product_run(c, out, c->xb, dim, ps->n_sel, ps->logits, ith, nth);
    if (m->final_softcap > 0) { /* each worker caps a share of the vocabulary */
        int v0 = (int)((int64_t)m->n_vocab * ith / nth), v1 = (int)((int64_t)m->n_vocab * (ith + 1) / nth);
        infer__pool_barrier(c->pool);
        for (t = 0; t < ps->n_sel; t++) infer__softcap(ps->logits + (size_t)t * m->n_vocab + v0, v1 - v0, m->final_softcap);
    }
}

static int infer__forward(infer_context *c, const infer_token *tokens, int n, int n_groups, int n_sel, float *logits,
                          float *hidden) {
    infer__pass ps;
    ps.c = c;
    ps.tokens = tokens;
    ps.n = n;
    ps.n_groups = n_groups;
    ps.n_sel = n_sel;
    ps.logits = logits;
    ps.hidden = hidden;
    ps.next_item = 0;
    ps.stop = 0;
    infer__pool_run(c->pool, infer__forward_worker, &ps);
    return ps.stop;
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

/* Makes room for `pending` more tokens in every sequence that has them:
   the context's policy shifts a sequence that would overflow, or refuses. */
static infer_status infer__make_room(infer_context *c, infer_error *err) {
    int s;
    for (s = 0; s < c->n_seq; s++) {
        infer__seq *q = &c->seqs[s];
        int need = q->n_past + q->pending - c->n_ctx, discard;
        if (need <= 0) continue;
        if (c->full_policy != INFER_FULL_SHIFT || q->pending > c->n_ctx - c->n_keep) {
            infer__set_error(err, INFER_ERR_CONTEXT_FULL,
                             "the context is full: %d tokens do not fit in sequence %d (%d of %d positions used)",
                             q->pending, s, q->n_past, c->n_ctx);
            return INFER_ERR_CONTEXT_FULL;
        }
        /* llama.cpp's shift: the older half of what follows n_keep, or more if needed */
        discard = INFER__MAX((q->n_past - c->n_keep) / 2, need);
        if (infer_seq_remove(c, s, c->n_keep, c->n_keep + discard, err) != INFER_OK) return err ? err->code : INFER_ERR_ARG;
    }
    return INFER_OK;
}

/* Puts the sequences back where the call found them (a pass failed). */
static void infer__rollback(infer_context *c) {
    int s;
    for (s = 0; s < c->n_seq; s++) {
        infer__seq *q = &c->seqs[s];
        if (!q->pending) continue;
        q->n_past = q->start_past;
        stbds_arrsetlen(q->tokens, q->start_past);
    }
}

INFERDEF infer_status infer_decode_batch(infer_context *c, const infer_batch *b, infer_error *err) {
    const infer_model *m;
    int i, s, n, n_rows = 0, done;
    infer_status st = INFER_OK;
    if (!c || !b || b->n <= 0 || !b->tokens) {
        infer__set_error(err, INFER_ERR_ARG, "infer_decode needs at least one token");
        return INFER_ERR_ARG;
    }
    m = c->model;
    n = b->n;
    for (i = 0; i < n; i++) {
        if (b->tokens[i] < 0 || b->tokens[i] >= m->n_vocab) {
            infer__set_error(err, INFER_ERR_ARG, "token id %d is outside the vocabulary (0..%d)", b->tokens[i],
                             m->n_vocab - 1);
            return INFER_ERR_ARG;
        }
        if (b->seq && (b->seq[i] < 0 || b->seq[i] >= c->n_seq)) {
            infer__set_error(err, INFER_ERR_ARG, "sequence id %d is outside the context's 0..%d", b->seq[i], c->n_seq - 1);
            return INFER_ERR_ARG;
        }
    }
    for (s = 0; s < c->n_seq; s++) c->seqs[s].pending = 0, c->seqs[s].last = -1;
    for (i = 0; i < n; i++) {
        infer__seq *q = &c->seqs[b->seq ? b->seq[i] : 0];
        q->pending++;
        q->last = i;
    }
    if ((st = infer__make_room(c, err)) != INFER_OK) return st;
    /* the tokens in sequence order (each sequence's in the batch's order),
       each with its logits row or -1 */
    if (!infer__arr_setlen(c->order, n) || !infer__arr_setlen(c->row_of, n) || !infer__arr_setlen(c->btok, n)) {
        infer__set_error(err, INFER_ERR_NOMEM, "out of memory for a batch of %d tokens", n);
        return INFER_ERR_NOMEM;
    }
    /* each sequence's record of its tokens gets room for them now, so that
       a pass never fails after its cache was written */
    for (s = 0; s < c->n_seq; s++)
        if (c->seqs[s].pending && !infer__arr_room(c->seqs[s].tokens, c->seqs[s].pending)) {
            infer__set_error(err, INFER_ERR_NOMEM, "out of memory for a batch of %d tokens", n);
            return INFER_ERR_NOMEM;
        }
    for (done = 0, s = 0; s < c->n_seq; s++) {
        if (!c->seqs[s].pending) continue;
        for (i = 0; i < n; i++)
            if ((b->seq ? b->seq[i] : 0) == s) c->order[done++] = i;
        if (done == n) break;
    }
    for (i = 0; i < n; i++) {
        int t = c->order[i], want = b->logits ? b->logits[t] != 0 : t == c->seqs[b->seq ? b->seq[t] : 0].last;
        c->row_of[t] = want ? n_rows++ : -1;
        c->btok[i] = b->tokens[t];
    }
    if (!infer__reserve_logits(c, INFER__MAX(n_rows, 1) + (c->gpu ? c->n_batch : 0))) {
        infer__set_error(err, INFER_ERR_NOMEM, "out of memory for logits");
        return INFER_ERR_NOMEM;
    }
    for (s = 0; s < c->n_seq; s++) {
        c->seqs[s].start_past = c->seqs[s].n_past;
        c->seqs[s].logit_row = -1;
    }
    /* passes of up to n_batch tokens, each a run per sequence */
    for (done = 0, n_rows = 0; done < n && st == INFER_OK; done += c->n_batch) {
        int nb = INFER__MIN(c->n_batch, n - done), n_groups = 0, n_sel = 0, t;
        if (infer__aborted(c)) {
            st = INFER_ERR_CANCELLED;
            break;
        }
        for (t = 0; t < nb; t++) {
            int orig = c->order[done + t], sq = b->seq ? b->seq[orig] : 0;
            infer__seq *q = &c->seqs[sq];
            if (!n_groups || c->groups[n_groups - 1].seq != sq) {
                infer__group *G = &c->groups[n_groups++];
                G->seq = sq, G->start = t, G->n = 0, G->pos0 = q->n_past;
            }
            c->pos[t] = q->n_past + c->groups[n_groups - 1].n++;
            if (c->row_of[orig] >= 0) c->sel[n_sel++] = t;
        }
        st = infer__backend_forward(c, c->btok + done, nb, n_groups, n_sel, c->logits + (size_t)n_rows * m->n_vocab, NULL,
                                    err);
        if (st != INFER_OK) break;
        n_rows += n_sel;
        for (t = 0; t < n_groups; t++) {
            infer__seq *q = &c->seqs[c->groups[t].seq];
            for (i = 0; i < c->groups[t].n; i++) stbds_arrput(q->tokens, c->btok[done + c->groups[t].start + i]);
            q->n_past += c->groups[t].n;
            q->hi = INFER__MAX(q->hi, q->n_past);
        }
    }
    if (st != INFER_OK) {
        if (st == INFER_ERR_CANCELLED) infer__set_error(err, st, "cancelled by the abort callback");
        infer__rollback(c);
        stbds_arrsetlen(c->row_of, 0);
        return st;
    }
    for (s = 0; s < c->n_seq; s++)
        if (c->seqs[s].pending) c->seqs[s].logit_row = c->row_of[c->seqs[s].last];
    return INFER_OK;
}

INFERDEF infer_status infer_decode(infer_context *c, const infer_token *tokens, int n, int all_logits,
                                   infer_error *err) {
    infer_batch b;
    if (!c || !tokens || n <= 0) {
        infer__set_error(err, INFER_ERR_ARG, "infer_decode needs at least one token");
        return INFER_ERR_ARG;
    }
    memset(&b, 0, sizeof b);
    b.n = n;
    b.tokens = tokens;
    if (all_logits) {
        if (!infer__arr_setlen(c->flags, n)) {
            infer__set_error(err, INFER_ERR_NOMEM, "out of memory for a batch of %d tokens", n);
            return INFER_ERR_NOMEM;
        }
        memset(c->flags, 1, (size_t)n);
        b.logits = c->flags;
    }
    return infer_decode_batch(c, &b, err);
}

INFERDEF const float *infer_get_logits(const infer_context *c, int i) {
    int n = (int)stbds_arrlen(c->row_of);
    if (i < 0) i = n + i;
    if (i < 0 || i >= n || c->row_of[i] < 0) return NULL;
    return c->logits + (size_t)c->row_of[i] * c->model->n_vocab;
}

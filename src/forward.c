/* forward.c - the CPU's forward pass over a batch of tokens, as a list of named steps:
   infer__embed; per layer infer__norm_rows (attn_norm), the q/k/v product,
   infer__qk_prepare, infer__kv_store_rows, infer__attention, the output
   product, infer__residual, infer__norm_rows (ffn_norm), infer__ffn or
   infer__moe_ffn, infer__residual; then infer__output. Gemma 3n adds
   infer__ple_inputs and infer__altup_streams after infer__embed; per
   layer infer__altup_predict first, infer__laurel beside attention and
   infer__laurel_residual after it, infer__altup_correct and
   infer__ple_block last; infer__altup_merge before infer__output.
   infer_cuda.cu takes
   the same steps under the same names (without infer__). An optional part
   of a step runs where the model description has its weights or value,
   never by family name.
   The pass is one task of the thread pool: every worker runs every step on
   its share (tokens, a product's rows, attention's work items, experts'
   rows), and the workers meet at a barrier where a step reads what others
   wrote. The numerics follow llama.cpp's CPU path where it matters for
   matching it: sums of squares in double, RoPE angles (rope.c) stepped by
   multiplication, GELU through an F16 table. */
#include "context.h"

/* ---- the building blocks ------------------------------------------------ */

static void infer__rmsnorm(const infer__kernels *k, float *out, const float *x, const float *w, int n, float eps) {
    float scale = 1.0f / sqrtf((float)(k->sum_squares(x, n) / n) + eps);
    int i;
    for (i = 0; i < n; i++) out[i] = (x[i] * scale) * w[i];
}

/* x RMS-normed without a weight (llama.cpp's ggml_rms_norm alone) */
static void infer__rmsnorm_plain(const infer__kernels *k, float *x, int n, float eps) {
    float scale = 1.0f / sqrtf((float)(k->sum_squares(x, n) / n) + eps);
    int i;
    for (i = 0; i < n; i++) x[i] *= scale;
}

/* sqrt(sum of x^2): AltUp's magnitude of a stream */
static float infer__magnitude(const infer__kernels *k, const float *x, int n) { return sqrtf((float)k->sum_squares(x, n)); }

/* y = w x for a small matrix w (AltUp's router and coefficients, never
   packed): x converted to w's dot type in worker ith's row, a dot per row. */
static void infer__matvec(const infer_context *c, const infer__tensor *w, const float *x, float *y, int ith) {
    int n = (int)w->ne[0], rows = (int)w->ne[1], r;
    infer_type vt = infer__traits(w->type)->vec_dot_type;
    size_t row = infer__row_size(w->type, n);
    const void *xv = x;
    if (vt != INFER_TYPE_F32) {
        uint8_t *xq = c->mv_row + (size_t)ith * c->xq_row_max;
        c->kern.from_float[vt](x, xq, n);
        xv = xq;
    }
    for (r = 0; r < rows; r++) y[r] = c->kern.vec_dot[w->type](n, (const uint8_t *)w->data + (size_t)r * row, xv);
}

/* A product step on the rows of x (stride ldx) of all n tokens, after
   each worker converts its own t0..t1: barriers before and after. */
static void infer__product_step(infer_context *c, const infer__product *p, const float *x, int ldx, int n, int t0, int t1,
                                int ith, int nth) {
    infer__product_convert(c, p, x, ldx, t0, t1, 0);
    infer__product_ready(c, ith);
    infer__pool_barrier(c->pool);
    infer__product_run(c, p, x, ldx, n, NULL, ith, nth);
    infer__pool_barrier(c->pool);
}

/* x = cap * tanh(x / cap), as llama.cpp scales, takes tanh and scales back */
static void infer__softcap(float *x, int n, float cap) {
    float inv = 1.0f / cap;
    int i;
    for (i = 0; i < n; i++) x[i] = infer__tanhf(x[i] * inv) * cap;
}

/* The gated activation of n values: g = act(g) * u. */
static void infer__act_mul(const infer_context *c, float *g, const float *u, int n) {
    if (c->model->act == INFER__ACT_GELU)
        c->kern.gelu_mul(g, u, n, c->model->gelu_table);
    else if (c->model->act == INFER__ACT_SWIGLU_CLAMP)
        c->kern.swiglu_clamp(g, u, n);
    else
        c->kern.silu_mul(g, u, n);
}

/* rows[i] += the bias's column `col` (a [n, columns] F32 tensor) */
static void infer__add_bias(float *row, const infer__tensor *bias, int col, int n) {
    const float *b = (const float *)bias->data + (size_t)col * n;
    int i;
    for (i = 0; i < n; i++) row[i] += b[i];
}

/* ---- the steps ---------------------------------------------------------- */

typedef struct infer__pass {
    infer_context *c;
    const infer_token *tokens;
    int n, n_groups, n_sel;
    float *logits, *hidden;
    int next_item;   /* attention work handed out so far */
    int next_item2;  /* and in its second phase, when split */
    int attn_splits; /* runs each attention item's keys are split into (infer__attn_batch.n_splits) */
    int stop;      /* the abort callback said stop (worker 0 asks, all read after a barrier) */
} infer__pass;

/* Each token's RoPE angles (per RoPE of the model), which infer__qk_prepare
   reads: the pass's setup, as gpu.c computes them for the GPU's pass. */
static void infer__rope_table(infer_context *c, int t0, int t1) {
    const infer_model *m = c->model;
    int n_rot = m->rope_dim, t, r;
    for (t = t0; t < t1; t++)
        for (r = 0; r < m->n_ropes; r++)
            infer__rope_angles(c->rope + ((size_t)r * c->n_batch + t) * n_rot, &m->ropes[r], c->rope_freqs[r], c->pos[t]);
}

/* 1. Tokens t0..t1's embedding rows into x, dequantized, times the
   model's embedding scale where it has one. */
static void infer__embed(infer_context *c, const infer__pass *ps, int t0, int t1) {
    const infer_model *m = c->model;
    int dim = m->dim, t, i;
    size_t emb_row = infer__row_size(m->tok_embd->type, dim);
    for (t = t0; t < t1; t++) {
        float *x = c->x + (size_t)t * dim;
        infer__traits(m->tok_embd->type)->to_float((const uint8_t *)m->tok_embd->data + (size_t)ps->tokens[t] * emb_row, x, dim);
        if (m->embd_scale > 0)
            for (i = 0; i < dim; i++) x[i] *= m->embd_scale;
    }
}

/* 2, 9. Rows t0..t1 of x, RMS-normed with weight w, into xb. */
static void infer__norm_rows(infer_context *c, const infer__tensor *w, int t0, int t1) {
    const infer_model *m = c->model;
    int dim = m->dim, t;
    for (t = t0; t < t1; t++) {
        float *x = c->x + (size_t)t * dim, *xb = c->xb + (size_t)t * dim;
        infer__rmsnorm(&c->kern, xb, x, (const float *)w->data, dim, m->norm_eps);
    }
}

/* 4. Tokens t0..t1's q, k and v made ready for attention: the biases,
   each q and k head RMS-normed (and v where the model norms it), RoPE on
   q and k, q times the attention scale where the model scales q; q
   alone in a layer that reads an earlier layer's cache. */
static void infer__qk_prepare(infer_context *c, const infer__layer *L, int t0, int t1) {
    const infer_model *m = c->model;
    int hd = L->head_dim, q_dim = L->q_dim, kv_dim = L->kv_dim, t, i;
    int n_rot = L->rope >= 0 ? m->ropes[L->rope].n_rot : 0, neox = L->rope >= 0 && m->ropes[L->rope].neox;
    for (t = t0; t < t1; t++) {
        float *q = c->q + (size_t)t * m->q_dim, *k = c->k + (size_t)t * m->kv_dim, *v = c->v + (size_t)t * m->kv_dim;
        const float *cs = L->rope >= 0 ? c->rope + ((size_t)L->rope * c->n_batch + t) * m->rope_dim : NULL;
        if (L->bq) for (i = 0; i < q_dim; i++) q[i] += ((const float *)L->bq->data)[i];
        if (L->bk) for (i = 0; i < kv_dim; i++) k[i] += ((const float *)L->bk->data)[i];
        if (L->bv) for (i = 0; i < kv_dim; i++) v[i] += ((const float *)L->bv->data)[i];
        if (L->wk && !L->wv) memcpy(v, k, (size_t)kv_dim * sizeof(float)); /* V is the raw K */
        for (i = 0; i < m->n_heads; i++) {
            float *qh = q + (size_t)i * hd;
            if (L->q_norm) infer__rmsnorm(&c->kern, qh, qh, (const float *)L->q_norm->data, hd, m->norm_eps);
            if (cs) infer__rope_rotate(qh, cs, n_rot, neox, c->match_llama ? &c->kern : NULL);
        }
        if (m->attn_scale_q)
            for (i = 0; i < q_dim; i++) q[i] *= m->attn_scale;
        if (!L->wk) continue; /* k and v are an earlier layer's */
        if (m->v_norm)
            for (i = 0; i < L->n_kv_heads; i++) infer__rmsnorm_plain(&c->kern, v + (size_t)i * hd, hd, m->norm_eps);
        for (i = 0; i < L->n_kv_heads; i++) {
            float *kh = k + (size_t)i * hd;
            if (L->k_norm) infer__rmsnorm(&c->kern, kh, kh, (const float *)L->k_norm->data, hd, m->norm_eps);
            if (cs) infer__rope_rotate(kh, cs, n_rot, neox, c->match_llama ? &c->kern : NULL);
        }
    }
}

/* 5. Tokens t0..t1's k and v into layer l of their sequences' caches
   (attention.c's infer__kv_store writes one position). */
static void infer__kv_store_rows(infer_context *c, const infer__pass *ps, int l, int t0, int t1) {
    int ld = c->model->kv_dim, g, t;
    for (g = 0; g < ps->n_groups; g++) {
        const infer__group *G = &c->groups[g];
        for (t = INFER__MAX(t0, G->start); t < INFER__MIN(t1, G->start + G->n); t++)
            infer__kv_store(&c->kv, &c->kern, G->seq, l, c->pos[t], c->k + (size_t)t * ld, c->v + (size_t)t * ld,
                            c->model->layers[l].kv_dim);
    }
}

/* 6. Layer l's attention over every sequence's run, into att: the work
   items of all the runs handed out in one count (ps->next_item, set to 0
   before the barrier ahead of this step; next_item2 in phase 2 of a split
   pass); ith picks the worker's scratch. */
static void infer__attention(infer_context *c, infer__pass *ps, int l, int ith, int phase) {
    const infer_model *m = c->model;
    int q_dim = m->q_dim, g, first;
    infer__attn_scratch scratch;
    infer__attn_batch ab;
    memset(&ab, 0, sizeof ab);
    ab.ordered = c->match_llama && c->kv.type == INFER_TYPE_F16;
    infer__attn_scratch_carve(&scratch, c->attn_scratch + (size_t)ith * c->attn_scratch_n, m->head_dim, ab.ordered, c->n_ctx);
    ab.kv = &c->kv;
    ab.kern = &c->kern;
    ab.n_heads = m->n_heads;
    ab.head_dim = m->layers[l].head_dim;
    ab.n_kv_heads = m->layers[l].n_kv_heads;
    ab.scale = m->attn_scale_q ? 1.0f : m->attn_scale;
    ab.softcap = m->attn_softcap;
    ab.ldq = ab.ldo = q_dim;
    ab.layer = m->layers[l].kv_layer;
    ab.window = m->layers[l].window;
    ab.sinks = m->layers[l].attn_sinks ? (const float *)m->layers[l].attn_sinks->data : NULL;
    ab.n_splits = ps->attn_splits;
    ab.split_len = c->attn_split_len;
    ab.phase = phase;
    ab.scores_ld = (size_t)c->n_ctx;
    for (g = 0, first = 0;;) { /* first: the count's index of run g's first item */
        int item = infer__atomic_next(phase == 2 ? &ps->next_item2 : &ps->next_item);
        for (; g < ps->n_groups; g++) {
            const infer__group *G = &c->groups[g];
            ab.seq = G->seq, ab.pos0 = G->pos0, ab.n_tok = G->n;
            ab.q = c->q + (size_t)G->start * q_dim, ab.out = c->att + (size_t)G->start * q_dim;
            if (phase) {
                ab.part = c->attn_part + (size_t)G->start * m->n_heads * ab.n_splits * ((size_t)ab.head_dim + INFER__ATT_PART_HEAD);
                ab.scores = c->attn_scores + (size_t)G->start * m->n_heads * ab.scores_ld;
            }
            if (item < first + infer__attn_n_items(&ab) * ab.n_splits) break;
            first += infer__attn_n_items(&ab) * ab.n_splits;
        }
        if (g == ps->n_groups) break;
        if (ab.ordered) infer__attn_item_ordered(&ab, item - first, &scratch);
        else infer__attn_item(&ab, item - first, &scratch);
    }
}

/* 8, 11. A block's output in xb (all of it written: after a barrier) into
   the residual stream of tokens t0..t1: the bias, the post-norm and the
   residual scale where the model has them, then x += xb. */
static void infer__residual(infer_context *c, const infer__tensor *bias, const infer__tensor *post_norm, int t0,
                            int t1) {
    const infer_model *m = c->model;
    int dim = m->dim, t, i;
    for (t = t0; t < t1; t++) {
        float *x = c->x + (size_t)t * dim, *xb = c->xb + (size_t)t * dim;
        if (bias) for (i = 0; i < dim; i++) xb[i] += ((const float *)bias->data)[i];
        if (post_norm) infer__rmsnorm(&c->kern, xb, xb, (const float *)post_norm->data, dim, m->norm_eps);
        if (m->residual_scale > 0) for (i = 0; i < dim; i++) xb[i] *= m->residual_scale;
        for (i = 0; i < dim; i++) x[i] += xb[i];
    }
}

/* 3', after the q/k/v product of a model whose attn_q carries gates: each
   head's query into q, its gate into gate (tokens t0..t1). */
static void infer__q_gate_split(infer_context *c, int t0, int t1) {
    const infer_model *m = c->model;
    int hd = m->head_dim, t, h;
    for (t = t0; t < t1; t++)
        for (h = 0; h < m->n_heads; h++) {
            const float *qg = c->qg + (size_t)t * 2 * m->q_dim + (size_t)h * 2 * hd;
            memcpy(c->q + (size_t)t * m->q_dim + (size_t)h * hd, qg, (size_t)hd * sizeof(float));
            memcpy(c->gate + (size_t)t * m->q_dim + (size_t)h * hd, qg + hd, (size_t)hd * sizeof(float));
        }
}

/* 6', after attention in such a model: the output times sigmoid(gate). */
static void infer__q_gate_apply(infer_context *c, int t0, int t1) {
    size_t i, n = (size_t)c->model->q_dim;
    int t;
    for (t = t0; t < t1; t++)
        for (i = 0; i < n; i++) c->att[t * n + i] *= infer__sigmoidf(c->gate[t * n + i]);
}

/* 3-7 in a recurrent layer (recurrent.c's kernels), from the normed input
   xb into xb: the input products; each run's causal convolution (work
   items of 64 channels of one run); Qwen3.5's q and k L2-normed; each
   run's scan (items of one head of one run), reading the state slot the
   run starts from and writing the one it ends in; the gated norm; the
   output product. */
#define INFER__CONV_BLOCK 64
static void infer__recurrent(infer_context *c, infer__pass *ps, const infer__layer *L, const infer__product *P, int l,
                             int t0, int t1, int ith, int nth) {
    const infer_model *m = c->model;
    int n = ps->n, dim = m->dim, ld = m->rec_in_dim, K = m->ssm_conv, kind = L->kind, item, t, h;
    int n_ch = m->conv_ch, n_blk = (n_ch + INFER__CONV_BLOCK - 1) / INFER__CONV_BLOCK;
    int width = kind == INFER__LAYER_SHORTCONV ? dim : m->ssm_inner;
    infer__product_convert(c, &P[INFER__P_QKV], c->xb, dim, t0, t1, 0);
    infer__product_ready(c, ith);
    infer__pool_barrier(c->pool);
    infer__product_run(c, &P[INFER__P_QKV], c->xb, dim, n, NULL, ith, nth);
    if (L->rec_beta) { /* beta and alpha: their own step (their input may convert otherwise) */
        infer__pool_barrier(c->pool);
        infer__product_convert(c, &P[INFER__P_ROUTER], c->xb, dim, t0, t1, 0);
        infer__product_ready(c, ith);
        infer__pool_barrier(c->pool);
        infer__product_run(c, &P[INFER__P_ROUTER], c->xb, dim, n, NULL, ith, nth);
    }
    if (ith == 0) ps->next_item = ps->next_item2 = 0;
    infer__pool_barrier(c->pool);
    while ((item = infer__atomic_next(&ps->next_item)) < ps->n_groups * n_blk) {
        const infer__group *G = &c->groups[item / n_blk];
        int c0 = item % n_blk * INFER__CONV_BLOCK, c1 = INFER__MIN(n_ch, c0 + INFER__CONV_BLOCK);
        const float *src = G->rs_src < 0 ? NULL : infer__rs_at(c, G->seq, G->rs_src, l);
        float *dst = infer__rs_at(c, G->seq, G->rs_dst, l), *row = c->rin + (size_t)G->start * ld;
        const float *w = (const float *)L->conv->data, *bias = L->conv_bias ? (const float *)L->conv_bias->data : NULL;
        if (kind == INFER__LAYER_SHORTCONV) /* conv(b * x) into rout */
            infer__rec_conv(row + 2 * dim, row, ld, c->rout + (size_t)G->start * dim, dim, G->n, c0, c1, K, w, NULL, 0,
                            src, dst);
        else if (kind == INFER__LAYER_MAMBA2) /* xBC, in place */
            infer__rec_conv(row + m->ssm_inner, NULL, ld, row + m->ssm_inner, ld, G->n, c0, c1, K, w, bias, 1, src, dst);
        else /* q, k, v, in place */
            infer__rec_conv(row, NULL, ld, row, ld, G->n, c0, c1, K, w, NULL, 1, src, dst);
    }
    infer__pool_barrier(c->pool);
    if (kind == INFER__LAYER_DELTANET) {
        for (t = t0; t < t1; t++)
            for (h = 0; h < 2 * m->ssm_groups; h++)
                infer__l2norm(c->rin + (size_t)t * ld + (size_t)h * m->ssm_state, m->ssm_state, m->norm_eps);
        infer__pool_barrier(c->pool);
    }
    if (kind == INFER__LAYER_MAMBA2) { /* each chunk's products that its group's heads share, in turns */
        int gi, c0, g, turn = 0, ds = m->ssm_state;
        for (gi = 0; gi < ps->n_groups; gi++) {
            const infer__group *G = &c->groups[gi];
            if (G->n < INFER__REC_CHUNK_MIN) continue;
            for (c0 = 0; c0 < G->n; c0 += INFER__REC_CHUNK)
                for (g = 0; g < m->ssm_groups; g++)
                    if (turn++ % nth == ith)
                        infer__rec_mamba2_chunk_shared(
                            &c->kern, m, g, c->rin + (size_t)(G->start + c0) * ld + m->ssm_inner, ld, INFER__MIN(INFER__REC_CHUNK, G->n - c0),
                            c->rec_shared + ((size_t)g * c->n_batch + G->start + c0) * (INFER__REC_CHUNK + ds));
        }
        if (turn) infer__pool_barrier(c->pool); /* none to wait for in generation (every worker counts the same) */
    }
    if (kind != INFER__LAYER_SHORTCONV) {
        while ((item = infer__atomic_next(&ps->next_item2)) < ps->n_groups * m->ssm_heads) {
            const infer__group *G = &c->groups[item / m->ssm_heads];
            const float *src = G->rs_src < 0 ? NULL : infer__rs_at(c, G->seq, G->rs_src, l) + m->rs_conv_floats;
            float *dst = infer__rs_at(c, G->seq, G->rs_dst, l) + m->rs_conv_floats;
            const float *row = c->rin + (size_t)G->start * ld;
            float *y = c->rout + (size_t)G->start * m->ssm_inner;
            float *ws = c->rec_scratch + (size_t)ith * c->rec_scratch_n;
            if (G->n >= INFER__REC_CHUNK_MIN && kind == INFER__LAYER_MAMBA2)
                infer__rec_mamba2_chunked(
                    &c->kern, m, L, item % m->ssm_heads, row + m->ssm_inner, row + m->ssm_inner + n_ch, ld,
                    c->rec_shared + ((size_t)(item % m->ssm_heads / (m->ssm_heads / m->ssm_groups)) * c->n_batch + G->start) *
                                        (INFER__REC_CHUNK + m->ssm_state),
                    y, m->ssm_inner, G->n, src, dst, ws);
            else if (G->n >= INFER__REC_CHUNK_MIN)
                infer__rec_deltanet_chunked(&c->kern, m, L, item % m->ssm_heads, row, ld,
                                            c->rba + (size_t)G->start * 2 * m->ssm_heads, 2 * m->ssm_heads, y, m->ssm_inner,
                                            G->n, src, dst, ws);
            else if (kind == INFER__LAYER_MAMBA2)
                infer__rec_mamba2(&c->kern, m, L, item % m->ssm_heads, row + m->ssm_inner, row + m->ssm_inner + n_ch, ld, y,
                                  m->ssm_inner, G->n, src, dst);
            else
                infer__rec_deltanet(&c->kern, m, L, item % m->ssm_heads, row, ld, c->rba + (size_t)G->start * 2 * m->ssm_heads,
                                    2 * m->ssm_heads, y, m->ssm_inner, G->n, src, dst);
        }
        infer__pool_barrier(c->pool);
    }
    for (t = t0; t < t1; t++) {
        float *y = c->rout + (size_t)t * width;
        const float *row = c->rin + (size_t)t * ld, *w = (const float *)(L->ssm_norm ? L->ssm_norm->data : NULL);
        if (kind == INFER__LAYER_SHORTCONV) {
            for (h = 0; h < dim; h++) y[h] *= row[dim + h]; /* c * y */
        } else if (kind == INFER__LAYER_MAMBA2) { /* y * silu(z), RMS-normed per group */
            int ng = m->ssm_inner / m->ssm_groups;
            for (h = 0; h < m->ssm_groups; h++)
                infer__gated_norm(&c->kern, y + (size_t)h * ng, row + (size_t)h * ng, w + (size_t)h * ng, ng, m->norm_eps, 1);
        } else { /* each head RMS-normed, times silu(z) */
            for (h = 0; h < m->ssm_heads; h++)
                infer__gated_norm(&c->kern, y + (size_t)h * m->ssm_state,
                                  c->rgate + (size_t)t * m->ssm_inner + (size_t)h * m->ssm_state, w, m->ssm_state,
                                  m->norm_eps, 0);
        }
    }
    infer__product_convert(c, &P[INFER__P_O], c->rout, width, t0, t1, 0);
    infer__product_ready(c, ith);
    infer__pool_barrier(c->pool);
    infer__product_run(c, &P[INFER__P_O], c->rout, width, n, NULL, ith, nth);
    infer__pool_barrier(c->pool);
}

/* Gemma 3n's sparse gate: g = relu(g - (mean + k std)), the deviation
   over n - 1, summed as llama.cpp's ggml_mean and ggml_sum_rows do
   (double accumulators, float results). */
static void infer__sparsify(float *g, int n, float k) {
    double sum = 0, var = 0;
    float mean, sd, cut;
    int i;
    for (i = 0; i < n; i++) sum += g[i];
    mean = (float)sum / (float)n;
    for (i = 0; i < n; i++) {
        float d = g[i] - mean;
        var += (double)(d * d);
    }
    sd = sqrtf((float)var * (1.0f / (float)(n - 1)));
    cut = mean + sd * k;
    for (i = 0; i < n; i++) g[i] = INFER__MAX(g[i] - cut, 0.0f);
}

/* 10. The dense feed-forward of the normed input xb, into xb:
   down(act(gate(x)) * up(x)), the gate sparsified first where the layer
   says, the down product's rows split among the workers (so a barrier
   comes before anyone reads them). */
static void infer__ffn(infer_context *c, const infer__layer *L, const infer__product *P, int n, int t0, int t1, int ith,
                       int nth) {
    int dim = c->model->dim, ld = c->model->ffn_dim, ffn = L->ffn_dim, t;
    infer__product_step(c, &P[INFER__P_GATE_UP], c->xb, dim, n, t0, t1, ith, nth);
    for (t = t0; t < t1; t++) {
        if (L->ffn_sparsity > 0) infer__sparsify(c->hb + (size_t)t * ld, ffn, L->ffn_sparsity);
        infer__act_mul(c, c->hb + (size_t)t * ld, c->hb2 + (size_t)t * ld, ffn);
    }
    infer__product_convert(c, &P[INFER__P_DOWN], c->hb, ld, t0, t1, 0);
    infer__product_ready(c, ith);
    infer__pool_barrier(c->pool);
    infer__product_run(c, &P[INFER__P_DOWN], c->hb, ld, n, NULL, ith, nth);
}

/* 10, in a layer of experts. Their feed-forward of the normed input xb
   (tokens t0..t1 are this worker's), into xb: route (the router reading
   router_x's rows), gather, gate/up, activation, down (times each
   expert's scale where the layer has them), and each token's weighted
   sum in the order its experts were chosen. gu, dn: the layer's expert
   products. */
static void infer__moe_ffn(infer_context *c, const infer__layer *L, const infer__product *P, const infer__product *gu,
                           const infer__product *dn, const float *router_x, int n, int t0, int t1, int ith, int nth) {
    const infer_model *m = c->model;
    infer__moe_route *rt = &c->route;
    int k = m->n_expert_used, n_pairs = n * k, p0 = n_pairs * ith / nth, p1 = n_pairs * (ith + 1) / nth;
    int dim = m->dim, effn = m->expert_ffn, ldg = L->up_exps ? effn : 2 * effn, t, p, s, j, i, e;
    infer__product_ready(c, ith);
    infer__pool_barrier(c->pool); /* the router reads every token's row */
    infer__product_run(c, &P[INFER__P_ROUTER], router_x, dim, n, NULL, ith, nth);
    infer__pool_barrier(c->pool);
    for (t = t0; t < t1; t++) {
        if (L->router_b) infer__add_bias(rt->logits + (size_t)t * m->n_expert, L->router_b, 0, m->n_expert);
        infer__moe_choose(m, rt, t, c->pos[t]);
    }
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
    for (p = p0, e = 0; p < p1; p++) {
        /* gate and up in rows of their own, or fused in one row of hb */
        float *g = c->hb + (size_t)p * ldg, *u = L->up_exps ? c->hb2 + (size_t)p * effn : g + effn;
        while (rt->start[e + 1] <= p) e++; /* pair p's expert: pairs are sorted by expert */
        if (L->gate_exps_b) infer__add_bias(g, L->gate_exps_b, e, effn);
        if (L->up_exps_b) infer__add_bias(u, L->up_exps_b, e, effn);
        infer__act_mul(c, g, u, effn);
        for (s = 0; s < dn->n_x; s++)
            c->kern.from_float[dn->x_type[s]](g, infer__xq_slot(c, s) + (size_t)p * infer__row_size(dn->x_type[s], effn), effn);
    }
    infer__pool_barrier(c->pool);
    infer__moe_product(c, dn, ith, nth);
    infer__pool_barrier(c->pool);
    for (t = t0; t < t1; t++) {
        float *out = c->xb + (size_t)t * dim;
        for (j = 0; j < k; j++) {
            float *y = c->moe_out + (size_t)rt->pair_of[t * k + j] * dim;
            float w = rt->weight[t * k + j];
            /* the down bias (or scale) joins each expert's output before its
               weight, as ggml applies it (its pair is this token's alone) */
            if (L->down_exps_b) infer__add_bias(y, L->down_exps_b, rt->expert[t * k + j], dim);
            if (L->exps_scale) {
                float sc = ((const float *)L->exps_scale->data)[rt->expert[t * k + j]];
                for (i = 0; i < dim; i++) y[i] *= sc;
            }
            for (i = 0; i < dim; i++) out[i] = j ? out[i] + y[i] * w : y[i] * w;
        }
    }
}

/* 10, in a layer of experts beside a dense FFN (Gemma 4), from the
   residual stream x (ffn_norm'd into xb): the dense FFN, normed by
   post_ffn_norm_1; the experts on pre_ffn_norm_2(x), routed on
   RMS-norm(x) / sqrt(dim) times router_scale, normed by post_ffn_norm_2;
   their sum into xb. */
static void infer__moe_dense_ffn(infer_context *c, const infer__layer *L, const infer__product *P, int n, int t0, int t1,
                                 int ith, int nth) {
    const infer_model *m = c->model;
    int dim = m->dim, t, i;
    const float *rs = (const float *)L->router_scale->data;
    float inv = 1.0f / sqrtf((float)dim);
    infer__ffn(c, L, P, n, t0, t1, ith, nth);
    infer__pool_barrier(c->pool); /* the down product's rows are every worker's */
    for (t = t0; t < t1; t++) {
        const float *x = c->x + (size_t)t * dim;
        float *xb = c->xb + (size_t)t * dim, *d = c->moe_dense + (size_t)t * dim, *r = c->router_in + (size_t)t * dim;
        infer__rmsnorm(&c->kern, d, xb, (const float *)L->post_ffn_norm_1->data, dim, m->norm_eps);
        memcpy(r, x, (size_t)dim * sizeof(float));
        infer__rmsnorm_plain(&c->kern, r, dim, m->norm_eps);
        for (i = 0; i < dim; i++) r[i] = r[i] * inv * rs[i];
        infer__rmsnorm(&c->kern, xb, x, (const float *)L->pre_ffn_norm_2->data, dim, m->norm_eps);
    }
    infer__moe_ffn(c, L, P, &P[INFER__P_EXPERTS_GATE_UP], &P[INFER__P_EXPERTS_DOWN], c->router_in, n, t0, t1, ith, nth);
    for (t = t0; t < t1; t++) { /* this worker's own rows of xb */
        float *xb = c->xb + (size_t)t * dim;
        const float *d = c->moe_dense + (size_t)t * dim;
        infer__rmsnorm(&c->kern, xb, xb, (const float *)L->post_ffn_norm_2->data, dim, m->norm_eps);
        for (i = 0; i < dim; i++) xb[i] += d[i];
    }
}

/* 12. The selected tokens' final norm, packed into rows 0..n_sel of xb,
   out as hidden states, or through the output product into the logits,
   soft-capped where the model says (each worker a share of the selected
   rows, of the output's rows, then of the vocabulary). */
static void infer__output(infer_context *c, const infer__pass *ps, int ith, int nth) {
    const infer_model *m = c->model;
    const infer__product *out = &c->plan[(size_t)m->n_layers * INFER__P_PER_LAYER];
    int dim = m->dim, s0 = ps->n_sel * ith / nth, s1 = ps->n_sel * (ith + 1) / nth, j, t;
    if (!ps->n_sel) return;
    infer__pool_barrier(c->pool); /* a selected token's row may be another worker's */
    for (j = s0; j < s1; j++) {
        float *xb = c->xb + (size_t)j * dim;
        infer__rmsnorm(&c->kern, xb, c->x + (size_t)c->sel[j] * dim, (const float *)m->output_norm->data, dim, m->norm_eps);
        if (ps->hidden) memcpy(ps->hidden + (size_t)j * dim, xb, (size_t)dim * sizeof(float));
    }
    if (ps->hidden) return;
    infer__product_convert(c, out, c->xb, dim, s0, s1, 0);
    infer__product_ready(c, ith);
    infer__pool_barrier(c->pool);
    infer__product_run(c, out, c->xb, dim, ps->n_sel, ps->logits, ith, nth);
    if (m->final_softcap > 0 || m->logit_scale > 0) { /* each worker caps or scales a share of the vocabulary */
        int v0 = (int)((int64_t)m->n_vocab * ith / nth), v1 = (int)((int64_t)m->n_vocab * (ith + 1) / nth), v;
        infer__pool_barrier(c->pool);
        for (t = 0; t < ps->n_sel; t++) {
            float *lg = ps->logits + (size_t)t * m->n_vocab;
            if (m->final_softcap > 0) infer__softcap(lg + v0, v1 - v0, m->final_softcap);
            if (m->logit_scale > 0)
                for (v = v0; v < v1; v++) lg[v] *= m->logit_scale;
        }
    }
}

/* ---- Gemma 3n's steps: per-layer inputs, AltUp, LAuReL ----------------- */

/* 1'. Each token's per-layer inputs, n_layers rows of ple_dim in c->ple:
   the embedding's product, times 1/sqrt(dim) and RMS-normed row by row,
   plus the token's row of ple_embd times sqrt(ple_dim), all times
   1/sqrt(2) (llama.cpp's order of operations). */
static void infer__ple_inputs(infer_context *c, const infer__pass *ps, int t0, int t1, int ith, int nth) {
    const infer_model *m = c->model;
    const infer__product *P = c->plan + (size_t)m->n_layers * INFER__P_PER_LAYER + INFER__P_PLE_MODEL;
    const infer__type_traits *tt = infer__traits(m->ple_embd->type);
    int ple = m->ple_dim, all = ple * m->n_layers, t, l, i;
    float proj_scale = 1.0f / sqrtf((float)m->dim), embd_scale = sqrtf((float)ple), mix = 1.0f / sqrtf(2.0f);
    size_t row = infer__row_size(m->ple_embd->type, all);
    infer__product_step(c, P, c->x, m->dim, ps->n, t0, t1, ith, nth);
    for (t = t0; t < t1; t++) {
        const uint8_t *embd = (const uint8_t *)m->ple_embd->data + (size_t)ps->tokens[t] * row;
        float *raw = c->ple_h + (size_t)t * ple;
        for (l = 0; l < m->n_layers; l++) {
            float *v = c->ple + (size_t)t * all + (size_t)l * ple;
            /* a layer's slice starts on a block: ple_dim is a multiple of the format's block */
            tt->to_float(embd + infer__row_size(m->ple_embd->type, (int64_t)l * ple), raw, ple);
            for (i = 0; i < ple; i++) v[i] *= proj_scale;
            infer__rmsnorm(&c->kern, v, v, (const float *)m->ple_proj_norm->data, ple, m->norm_eps);
            for (i = 0; i < ple; i++) v[i] = (v[i] + raw[i] * embd_scale) * mix;
        }
    }
}

/* 1''. AltUp's streams from the embedding x: stream 0 is x, stream j the
   product altup_up[j - 1] x rescaled to x's magnitude (times x's, then
   over its own, as llama.cpp divides). */
static void infer__altup_streams(infer_context *c, const infer__pass *ps, int t0, int t1, int ith, int nth) {
    const infer_model *m = c->model;
    const infer__product *P = c->plan + (size_t)m->n_layers * INFER__P_PER_LAYER + INFER__P_ALTUP_UP;
    int dim = m->dim, t, j, i;
    infer__product_step(c, P, c->x, dim, ps->n, t0, t1, ith, nth);
    for (t = t0; t < t1; t++) {
        float *s = c->alt + (size_t)t * m->n_altup * dim, target = infer__magnitude(&c->kern, c->x + (size_t)t * dim, dim);
        memcpy(s, c->x + (size_t)t * dim, (size_t)dim * sizeof(float));
        for (j = 1; j < m->n_altup; j++) {
            float *a = s + (size_t)j * dim, mag = infer__magnitude(&c->kern, a, dim);
            for (i = 0; i < dim; i++) a[i] = a[i] * target / mag;
        }
    }
}

/* AltUp's router on a stream x: tanh(router (RMS-norm(x) / dim)), n_altup
   values (xb's row t holds the normed input). */
static void infer__altup_modalities(infer_context *c, const infer__layer *L, const float *x, int t, float *mod,
                                    int ith) {
    const infer_model *m = c->model;
    float *r = c->xb + (size_t)t * m->dim, inv = 1.0f / (float)m->dim;
    int i;
    infer__rmsnorm(&c->kern, r, x, (const float *)L->altup_router_norm->data, m->dim, m->norm_eps);
    for (i = 0; i < m->dim; i++) r[i] *= inv;
    infer__matvec(c, L->altup_router, r, mod, ith);
    for (i = 0; i < m->n_altup; i++) mod[i] = infer__tanhf(mod[i]);
}

/* 1a. Each stream's prediction from all of them: pred_j = s_j + sum_k
   c[j n + k] s_k, the coefficients c the product of the router's output;
   the active stream's prediction goes through the layer as x. */
static void infer__altup_predict(infer_context *c, const infer__layer *L, int t0, int t1, int ith) {
    const infer_model *m = c->model;
    int dim = m->dim, na = m->n_altup, t, j, k, i;
    float mod[INFER__MAX_ALTUP], coef[INFER__MAX_ALTUP * INFER__MAX_ALTUP];
    for (t = t0; t < t1; t++) {
        const float *s = c->alt + (size_t)t * na * dim;
        float *pred = c->alt_pred + (size_t)t * na * dim;
        infer__altup_modalities(c, L, s + (size_t)m->altup_active * dim, t, mod, ith);
        infer__matvec(c, L->altup_predict, mod, coef, ith);
        for (j = 0; j < na; j++)
            for (i = 0; i < dim; i++) {
                float sum = 0;
                for (k = 0; k < na; k++) sum += s[(size_t)k * dim + i] * coef[j * na + k];
                pred[(size_t)j * dim + i] = sum + s[(size_t)j * dim + i];
            }
        memcpy(c->x + (size_t)t * dim, pred + (size_t)m->altup_active * dim, (size_t)dim * sizeof(float));
    }
}

/* 2'. LAuReL beside attention, from the normed input xb into c->laurel:
   xb + RMS-norm(laurel_r laurel_l xb). */
static void infer__laurel(infer_context *c, const infer__layer *L, const infer__product *P, int n, int t0, int t1, int ith,
                          int nth) {
    const infer_model *m = c->model;
    int dim = m->dim, t, i;
    infer__product_step(c, &P[INFER__P_LAUREL_L], c->xb, dim, n, t0, t1, ith, nth);
    infer__product_step(c, &P[INFER__P_LAUREL_R], c->laurel_mid, m->laurel_rank, n, t0, t1, ith, nth);
    for (t = t0; t < t1; t++) {
        float *y = c->laurel + (size_t)t * dim;
        const float *xb = c->xb + (size_t)t * dim;
        infer__rmsnorm(&c->kern, y, y, (const float *)L->laurel_norm->data, dim, m->norm_eps);
        for (i = 0; i < dim; i++) y[i] += xb[i];
    }
}

/* 8'. After attention's residual: x = (x + LAuReL's output) / sqrt(2). */
static void infer__laurel_residual(infer_context *c, int t0, int t1) {
    int dim = c->model->dim, t, i;
    float mix = 1.0f / sqrtf(2.0f);
    for (t = t0; t < t1; t++) {
        float *x = c->x + (size_t)t * dim;
        const float *y = c->laurel + (size_t)t * dim;
        for (i = 0; i < dim; i++) x[i] = (x[i] + y[i]) * mix;
    }
}

/* 11a. The streams corrected by the layer's output x: s_j = pred_j +
   (x - pred_active) (1 + c_j), c the correction coefficients' product of
   the router's output on x. */
static void infer__altup_correct(infer_context *c, const infer__layer *L, int t0, int t1, int ith) {
    const infer_model *m = c->model;
    int dim = m->dim, na = m->n_altup, t, j, i;
    float mod[INFER__MAX_ALTUP], coef[INFER__MAX_ALTUP];
    for (t = t0; t < t1; t++) {
        const float *x = c->x + (size_t)t * dim, *pred = c->alt_pred + (size_t)t * na * dim;
        const float *act = pred + (size_t)m->altup_active * dim;
        float *s = c->alt + (size_t)t * na * dim;
        infer__altup_modalities(c, L, x, t, mod, ith);
        infer__matvec(c, L->altup_correct, mod, coef, ith);
        for (j = 0; j < na; j++) {
            float cj = coef[j] + 1.0f;
            for (i = 0; i < dim; i++) s[(size_t)j * dim + i] = (x[i] - act[i]) * cj + pred[(size_t)j * dim + i];
        }
    }
}

/* 11b. The layer's per-layer input: RMS-norm(proj (GELU(gate y) * the
   token's input for this layer)), y the layer's output x, added to x; with
   AltUp, y the active stream times correct_scale, added to every stream
   but the first. */
static void infer__ple_block(infer_context *c, const infer__layer *L, const infer__product *P, int l, int n, int t0,
                             int t1, int ith, int nth) {
    const infer_model *m = c->model;
    int dim = m->dim, na = m->n_altup, ple = m->ple_dim, t, j, i;
    if (na) {
        const float *scale = (const float *)L->altup_correct_scale->data;
        for (t = t0; t < t1; t++) {
            const float *act = c->alt + ((size_t)t * na + m->altup_active) * dim;
            float *xb = c->xb + (size_t)t * dim;
            for (i = 0; i < dim; i++) xb[i] = act[i] * scale[i];
        }
    }
    /* (the gate's input: xb, or x as it is) */
    infer__product_step(c, &P[INFER__P_PLE_GATE], na ? c->xb : c->x, dim, n, t0, t1, ith, nth);
    for (t = t0; t < t1; t++)
        c->kern.gelu_mul(c->ple_h + (size_t)t * ple, c->ple + ((size_t)t * m->n_layers + l) * ple, ple, m->gelu_table);
    infer__product_step(c, &P[INFER__P_PLE_PROJ], c->ple_h, ple, n, t0, t1, ith, nth);
    for (t = t0; t < t1; t++) {
        float *xb = c->xb + (size_t)t * dim;
        infer__rmsnorm(&c->kern, xb, xb, (const float *)L->ple_norm->data, dim, m->norm_eps);
        if (!na) {
            float *x = c->x + (size_t)t * dim;
            for (i = 0; i < dim; i++) x[i] += xb[i];
        }
        for (j = 1; j < na; j++) {
            float *s = c->alt + ((size_t)t * na + j) * dim;
            for (i = 0; i < dim; i++) s[i] += xb[i];
        }
    }
}

/* 11c. The layer's output x times its scale (a scalar). */
static void infer__scale_rows(infer_context *c, const infer__tensor *scale, int t0, int t1) {
    int dim = c->model->dim, t, i;
    float s = *(const float *)scale->data;
    for (t = t0; t < t1; t++)
        for (i = 0; i < dim; i++) c->x[(size_t)t * dim + i] *= s;
}

/* 12'. The streams merged into x: stream j > 0 through altup_down[j - 1],
   rescaled to the active stream's magnitude, added to stream 0 in order,
   the sum over n_altup. */
static void infer__altup_merge(infer_context *c, const infer__pass *ps, int t0, int t1, int ith, int nth) {
    const infer_model *m = c->model;
    const infer__product *P = c->plan + (size_t)m->n_layers * INFER__P_PER_LAYER + INFER__P_ALTUP_DOWN;
    int dim = m->dim, na = m->n_altup, t, j, i;
    float inv = 1.0f / (float)na;
    for (j = 1; j < na; j++) infer__product_step(c, &P[j - 1], c->alt + (size_t)j * dim, na * dim, ps->n, t0, t1, ith, nth);
    for (t = t0; t < t1; t++) {
        const float *s = c->alt + (size_t)t * na * dim;
        float *x = c->x + (size_t)t * dim, target = infer__magnitude(&c->kern, s + (size_t)m->altup_active * dim, dim);
        memcpy(x, s, (size_t)dim * sizeof(float));
        for (j = 1; j < na; j++) {
            float *u = c->alt_pred + ((size_t)t * na + j - 1) * dim, mag = infer__magnitude(&c->kern, u, dim);
            for (i = 0; i < dim; i++) x[i] += u[i] * target / mag;
        }
        for (i = 0; i < dim; i++) x[i] *= inv;
    }
}

/* ---- the pass ----------------------------------------------------------- */

/* Every worker runs this; t0..t1 are its tokens in the per-token steps. */
static void infer__forward_worker(void *arg, int ith, int nth) {
    infer__pass *ps = (infer__pass *)arg;
    infer_context *c = ps->c;
    const infer_model *m = c->model;
    int n = ps->n, t0 = n * ith / nth, t1 = n * (ith + 1) / nth, dim = m->dim, q_dim = m->q_dim, l;

    infer__rope_table(c, t0, t1);
    infer__embed(c, ps, t0, t1);
    if (m->ple_dim) infer__ple_inputs(c, ps, t0, t1, ith, nth);
    if (m->n_altup) infer__altup_streams(c, ps, t0, t1, ith, nth);
    for (l = 0; l < m->n_layers; l++) {
        const infer__layer *L = &m->layers[l];
        const infer__product *P = c->plan + (size_t)l * INFER__P_PER_LAYER;
        /* stopped between layers: nothing has advanced (the cells written
           are past every sequence's end) */
        if (infer__atomic_load(&ps->stop, INFER__RELAXED)) return;

        /* attention, or a recurrent layer's state in its place */
        if (m->n_altup) infer__altup_predict(c, L, t0, t1, ith);
        infer__norm_rows(c, L->attn_norm, t0, t1);
        if (L->laurel_l) infer__laurel(c, L, P, n, t0, t1, ith, nth);
        if (L->kind != INFER__LAYER_ATTENTION) {
            infer__recurrent(c, ps, L, P, l, t0, t1, ith, nth);
        } else {
            infer__product_convert(c, &P[INFER__P_QKV], c->xb, dim, t0, t1, 0);
            infer__product_ready(c, ith);
            infer__pool_barrier(c->pool);
            infer__product_run(c, &P[INFER__P_QKV], c->xb, dim, n, NULL, ith, nth);
            infer__pool_barrier(c->pool);
            if (m->q_gate) infer__q_gate_split(c, t0, t1);
            infer__qk_prepare(c, L, t0, t1);
            if (L->kv_layer == l) infer__kv_store_rows(c, ps, l, t0, t1);
            if (ith == 0) ps->next_item = ps->next_item2 = 0; /* attention's counts start over */
            infer__pool_barrier(c->pool);
            infer__attention(c, ps, l, ith, ps->attn_splits > 1);
            infer__pool_barrier(c->pool);
            if (ps->attn_splits > 1) { /* split: each run's p.V, once every run's max and sum are in */
                infer__attention(c, ps, l, ith, 2);
                infer__pool_barrier(c->pool);
            }
            if (ps->attn_splits > 1)
                infer__attn_merge(c->attn_part, m->n_heads, L->head_dim, ps->attn_splits, t0, t1, c->att, q_dim);
            if (m->q_gate) infer__q_gate_apply(c, t0, t1);
            infer__product_convert(c, &P[INFER__P_O], c->att, q_dim, t0, t1, 0);
            infer__product_ready(c, ith);
            infer__pool_barrier(c->pool);
            infer__product_run(c, &P[INFER__P_O], c->att, q_dim, n, NULL, ith, nth);
            infer__pool_barrier(c->pool);
        }
        infer__residual(c, L->bo, L->post_attn_norm, t0, t1);
        if (L->laurel_l) infer__laurel_residual(c, t0, t1);

        /* feed-forward */
        infer__norm_rows(c, L->ffn_norm, t0, t1);
        if (L->ffn_router && L->w_gate) infer__moe_dense_ffn(c, L, P, n, t0, t1, ith, nth);
        else if (L->ffn_router)
            infer__moe_ffn(c, L, P, &P[INFER__P_GATE_UP], &P[INFER__P_DOWN], c->xb, n, t0, t1, ith, nth);
        else infer__ffn(c, L, P, n, t0, t1, ith, nth);
        if (ith == 0) infer__atomic_store(&ps->stop, infer__aborted(c), INFER__RELAXED);
        infer__pool_barrier(c->pool); /* xb's rows, and the flag: every worker reads the same */
        infer__residual(c, NULL, L->post_ffn_norm, t0, t1);
        if (m->n_altup) infer__altup_correct(c, L, t0, t1, ith);
        if (L->ple_gate) infer__ple_block(c, L, P, l, n, t0, t1, ith, nth);
        if (L->out_scale) infer__scale_rows(c, L->out_scale, t0, t1);
    }
    if (infer__atomic_load(&ps->stop, INFER__RELAXED)) return;
    if (m->n_altup) infer__altup_merge(c, ps, t0, t1, ith, nth);
    infer__output(c, ps, ith, nth);
}

/* How many runs to split each attention item's keys into for a pass of n
   tokens (infer__attn_item): with few tokens (generation, a draft's
   verification) past the first run, the runs that hold keys (the items, a
   KV head and a block of tokens each, are too few to share among the
   workers). A token whose keys all lie in the first run has the sums of
   an unsplit pass, so splitting or not never changes a token's logits. */
static int infer__attn_split_runs(const infer_context *c, int n, int n_groups) {
    int g, keys = 0;
    if (n > c->attn_split_tokens) return 1;
    if (c->match_llama && c->kv.type == INFER_TYPE_F16) return 1; /* llama.cpp's order: one run */
    for (g = 0; g < n_groups; g++) {
        const infer__group *G = &c->groups[g];
        keys = INFER__MAX(keys, G->pos0 + G->n);
        if (G->pos0 + G->n > c->n_ctx) return 1; /* past what attn_scores' rows hold */
    }
    return INFER__MIN(INFER__ATT_SPLITS, (keys + c->attn_split_len - 1) / c->attn_split_len);
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
    ps.attn_splits = infer__attn_split_runs(c, n, n_groups);
    infer__pool_run(c->pool, infer__forward_worker, &ps);
    return ps.stop;
}

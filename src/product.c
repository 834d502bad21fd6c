/* product.c - the CPU pass's products, Y[t] = W . X[t] for a batch's tokens, and the experts'.
   A step's f32 input is first converted, row by row, into each activation
   type its weights' dot product reads (as llama.cpp converts it): the
   packing arena (c->xq: INFER__MAX_FUSED slots of xq_rows rows, a slot
   per type) holds those rows. The workers then split the rows of every op
   of the step in pieces of INFER__PACK_ROWS, multiplied by the packed
   kernels where the weights are packed for this ISA, else by the unpacked
   gemm or the vec_dot loop. Experts: the router's choice per token, the
   (token, expert) pairs by expert, and each expert's rows over its pairs. */
#include "context.h"

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

/* Chunks c0..c1 of the product (INFER__PACK_ROWS-row pieces of its ops,
   one after another), for n_tok converted input rows (x: the f32 input,
   for ops that read it as is; out0 replaces the first op's output). */
static void infer__product_chunks(const infer_context *c, const infer__product *p, const float *x, int ldx, int n_tok,
                                  float *out0, int64_t c0, int64_t c1) {
    int64_t base = 0;
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

/* Worker 0 starts the count of handed-out chunks over, before the barrier
   ahead of a product (the last product's count was done with at the
   barrier after it). */
static void infer__product_ready(infer_context *c, int ith) {
    if (ith == 0) c->product_next = 0;
}

/* This worker's part of the product: a fixed share of the first three
   quarters of the chunks, then single chunks of the last quarter as it
   asks for them. A worker slowed by the machine (or by the memory it
   shares) then leaves the tail to the others instead of keeping them at
   the barrier; the fixed part costs no counting. Any worker computes a
   row as any other would, so the result does not depend on who did it. */
static void infer__product_run(infer_context *c, const infer__product *p, const float *x, int ldx, int n_tok,
                               float *out0, int ith, int nth) {
    int64_t fixed = nth > 1 ? p->chunks - p->chunks / 4 : p->chunks, ch;
    infer__product_chunks(c, p, x, ldx, n_tok, out0, fixed * ith / nth, fixed * (ith + 1) / nth);
    while ((ch = fixed + infer__atomic_next(&c->product_next)) < p->chunks)
        infer__product_chunks(c, p, x, ldx, n_tok, out0, ch, ch + 1);
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
        for (e = 0; e < m->n_expert; e++) sum += (double)(probs[e] = infer__expf(probs[e] - mx));
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
        /* on raw logits (softmax of the chosen), the gap the probabilities
           of a softmax over all would show: 1 - p_next / p_last */
        float gap = m->gating == INFER__GATING_SOFTMAX_TOPK ? 1.0f - infer__expf(next - w[k - 1])
                                                             : (w[k - 1] - next) / w[k - 1];
        rt->margin[pos] = INFER__MIN(rt->margin[pos], gap);
    }
    if (m->gating == INFER__GATING_SOFTMAX_TOPK) {
        for (mx = w[0], j = 1; j < k; j++) mx = INFER__MAX(mx, w[j]);
        for (sum = 0, j = 0; j < k; j++) sum += (double)(w[j] = infer__expf(w[j] - mx));
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

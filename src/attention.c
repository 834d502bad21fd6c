/* attention.c - the KV cache and causal attention over it: keys in tiles
   with an online softmax, so a worker's memory is O(tile) at any context
   length, and both products (q.K and p.V) are batched kernel calls.
   Layout: K as rows of kv_dim values per position (F16 or Q8_0). V in F16
   is kept transposed, a row of positions per value, so p.V is a product of
   rows like every other; V in Q8_0 is kept like K and transposed into F16
   one tile at a time.
   Numerics follow llama.cpp: q is converted to K's dot type (F16 or Q8_0),
   softmax runs in f32 on the scaled scores, and the probabilities meet V
   normalised and rounded to F16. So a first pass over the tiles finds each
   row's max and sum (online, rescaling as the max grows) and a second makes
   the probabilities and multiplies by V. */
#include "internal.h"

#define INFER__ATT_TILE 64  /* keys per tile */
#define INFER__ATT_ROWS 64  /* query rows (tokens x heads of one group) per work item, at most */

typedef struct infer__kv_cache {
    infer_type type; /* F16 or Q8_0 */
    int n_layers, n_ctx, kv_dim, head_dim;
    size_t k_row;    /* bytes of one position's K (or Q8_0 V) */
    uint8_t *k, *v;
} infer__kv_cache;

static size_t infer__kv_bytes(const infer__kv_cache *kv) {
    return 2 * (size_t)kv->n_layers * kv->n_ctx * kv->k_row;
}

static int infer__kv_init(infer__kv_cache *kv, infer_type type, int n_layers, int n_ctx, int n_kv_heads,
                          int head_dim, infer_error *err) {
    memset(kv, 0, sizeof *kv);
    if (type != INFER_TYPE_F16 && type != INFER_TYPE_Q8_0) {
        infer__set_error(err, INFER_ERR_ARG, "the KV cache can be F16 or Q8_0, not %s", infer__traits(type)->name);
        return 0;
    }
    if (type == INFER_TYPE_Q8_0 && head_dim % 32) {
        infer__set_error(err, INFER_ERR_UNSUPPORTED, "a Q8_0 KV cache needs heads of a multiple of 32 values, not %d",
                         head_dim);
        return 0;
    }
    kv->type = type;
    kv->n_layers = n_layers;
    kv->n_ctx = n_ctx;
    kv->kv_dim = n_kv_heads * head_dim;
    kv->head_dim = head_dim;
    kv->k_row = infer__row_size(type, kv->kv_dim);
    kv->k = (uint8_t *)infer__calloc((size_t)n_layers * n_ctx, kv->k_row);
    kv->v = (uint8_t *)infer__calloc((size_t)n_layers * n_ctx, kv->k_row);
    if (!kv->k || !kv->v) {
        INFER_FREE(kv->k);
        INFER_FREE(kv->v);
        kv->k = kv->v = NULL;
        infer__set_error(err, INFER_ERR_NOMEM, "out of memory for a KV cache of %d positions", n_ctx);
        return 0;
    }
    return 1;
}

static void infer__kv_free(infer__kv_cache *kv) {
    INFER_FREE(kv->k);
    INFER_FREE(kv->v);
}

/* Writes one position's k and v (kv_dim floats each). */
static void infer__kv_store(const infer__kv_cache *kv, const infer__kernels *kern, int layer, int pos,
                            const float *k, const float *v) {
    size_t layer_bytes = (size_t)kv->n_ctx * kv->k_row;
    kern->from_float[kv->type](k, kv->k + layer * layer_bytes + (size_t)pos * kv->k_row, kv->kv_dim);
    if (kv->type == INFER_TYPE_F16) {
        uint16_t *vt = (uint16_t *)(kv->v + layer * layer_bytes) + pos;
        int i;
        for (i = 0; i < kv->kv_dim; i++) vt[(size_t)i * kv->n_ctx] = infer__fp32_to_fp16(v[i]);
    } else {
        kern->from_float[kv->type](v, kv->v + layer * layer_bytes + (size_t)pos * kv->k_row, kv->kv_dim);
    }
}

/* Per-worker scratch of attention, sized for `group` query heads per KV head. */
typedef struct infer__attn_scratch {
    uint8_t *qx;      /* query rows in K's dot type */
    float *s, *acc, *pv, *m, *l;
    uint16_t *p, *vt; /* probabilities in F16; a transposed V tile (Q8_0 cache) */
    float *vrow;
} infer__attn_scratch;

static size_t infer__attn_scratch_floats(int head_dim) {
    size_t rows = INFER__ATT_ROWS, hd = (size_t)head_dim, tile = INFER__ATT_TILE;
    /* qx (at most 4 bytes a value), s, acc, pv, m, l, p and vt (halves), vrow */
    return rows * hd + rows * tile + 2 * rows * hd + 2 * rows + rows * tile / 2 + hd * tile / 2 + hd;
}

static void infer__attn_scratch_carve(infer__attn_scratch *sc, float *base, int head_dim) {
    size_t rows = INFER__ATT_ROWS, hd = (size_t)head_dim, tile = INFER__ATT_TILE;
    sc->qx = (uint8_t *)base, base += rows * hd;
    sc->s = base, base += rows * tile;
    sc->acc = base, base += rows * hd;
    sc->pv = base, base += rows * hd;
    sc->m = base, base += rows;
    sc->l = base, base += rows;
    sc->p = (uint16_t *)base, base += rows * tile / 2;
    sc->vt = (uint16_t *)base, base += hd * tile / 2;
    sc->vrow = base;
}

/* One batched product of rows: y[t * ldy + r] = w_r . x_t. */
static void infer__rows_dot(const infer__kernels *kern, infer_type wt, int n, const void *w, size_t w_stride,
                            int n_rows, const void *x, size_t x_stride, int n_tok, float *y, size_t ldy) {
    int r, t;
    if (kern->gemm[wt] && n_tok > 1) {
        kern->gemm[wt](n, w, w_stride, n_rows, x, x_stride, n_tok, y, ldy);
        return;
    }
    for (r = 0; r < n_rows; r++)
        for (t = 0; t < n_tok; t++)
            y[(size_t)t * ldy + r] =
                kern->vec_dot[wt](n, (const uint8_t *)w + (size_t)r * w_stride, (const uint8_t *)x + (size_t)t * x_stride);
}

/* The shape of one layer's attention for a batch: n_tok tokens from
   position pos0, q rows of n_heads heads (stride ldq), out likewise. */
typedef struct infer__attn_batch {
    const infer__kv_cache *kv;
    const infer__kernels *kern;
    int layer, pos0, n_tok, n_heads;
    const float *q;
    float *out;
    int ldq, ldo;
} infer__attn_batch;

/* Tokens per work item: rows of one item are tokens x the heads of a group. */
static int infer__attn_tokens_per_item(const infer__attn_batch *b) {
    int group = b->n_heads / (b->kv->kv_dim / b->kv->head_dim);
    return INFER__MAX(1, INFER__ATT_ROWS / group);
}

static int infer__attn_n_items(const infer__attn_batch *b) {
    int per = infer__attn_tokens_per_item(b);
    return (b->n_tok + per - 1) / per * (b->kv->kv_dim / b->kv->head_dim);
}

/* Work item i: one KV head and a run of tokens, the latest tokens (the most
   keys) first so the workers finish together. */
static void infer__attn_item(const infer__attn_batch *b, int item, infer__attn_scratch *sc) {
    const infer__kv_cache *kv = b->kv;
    const infer__kernels *kern = b->kern;
    int hd = kv->head_dim, n_kv_heads = kv->kv_dim / hd, group = b->n_heads / n_kv_heads;
    int per = infer__attn_tokens_per_item(b), n_blocks = (b->n_tok + per - 1) / per;
    int kvh = item % n_kv_heads, blk = n_blocks - 1 - item / n_kv_heads;
    int t0 = blk * per, t1 = INFER__MIN(b->n_tok, t0 + per), nq = (t1 - t0) * group;
    int n_keys = b->pos0 + t1, k0, i, j, d;
    infer_type qt = infer__traits(kv->type)->vec_dot_type;
    size_t q_row = infer__row_size(qt, hd), layer_bytes = (size_t)kv->n_ctx * kv->k_row;
    size_t head_off = infer__row_size(kv->type, (int64_t)kvh * hd);
    const uint8_t *kbase = kv->k + layer_bytes * b->layer + head_off;
    float scale = 1.0f / sqrtf((float)hd);

    /* rows i = (token - t0) * group + head within the group */
    for (i = 0; i < nq; i++) {
        const float *q = b->q + (size_t)(t0 + i / group) * b->ldq + (size_t)(kvh * group + i % group) * hd;
        kern->from_float[qt](q, sc->qx + (size_t)i * q_row, hd);
        sc->m[i] = -INFINITY;
        sc->l[i] = 0;
    }
    memset(sc->acc, 0, (size_t)nq * hd * sizeof(float));

    /* pass 1: each row's softmax max and sum, online over the key tiles */
    for (k0 = 0; k0 < n_keys; k0 += INFER__ATT_TILE) {
        int kt = INFER__MIN(INFER__ATT_TILE, n_keys - k0);
        infer__rows_dot(kern, kv->type, hd, kbase + (size_t)k0 * kv->k_row, kv->k_row, kt, sc->qx, q_row, nq, sc->s,
                        INFER__ATT_TILE);
        for (i = 0; i < nq; i++) {
            const float *s = sc->s + (size_t)i * INFER__ATT_TILE;
            float mx = sc->m[i];
            double sum = 0;
            int vis = INFER__MIN(kt, b->pos0 + t0 + i / group + 1 - k0); /* causal */
            if (vis <= 0) continue;
            for (j = 0; j < vis; j++) mx = INFER__MAX(mx, s[j] * scale);
            for (j = 0; j < vis; j++) sum += expf(s[j] * scale - mx);
            sc->l[i] = (float)((double)sc->l[i] * expf(sc->m[i] - mx) + sum);
            sc->m[i] = mx;
        }
    }
    /* pass 2: the probabilities, normalised and rounded to F16 as llama.cpp
       has them, times V; the scores are made again unless one tile held them */
    for (k0 = 0; k0 < n_keys; k0 += INFER__ATT_TILE) {
        int kt = INFER__MIN(INFER__ATT_TILE, n_keys - k0);
        const uint16_t *vt;
        size_t vt_stride;
        if (n_keys > INFER__ATT_TILE)
            infer__rows_dot(kern, kv->type, hd, kbase + (size_t)k0 * kv->k_row, kv->k_row, kt, sc->qx, q_row, nq,
                            sc->s, INFER__ATT_TILE);
        for (i = 0; i < nq; i++) {
            const float *s = sc->s + (size_t)i * INFER__ATT_TILE;
            uint16_t *p = sc->p + (size_t)i * INFER__ATT_TILE;
            float mx = sc->m[i], inv = (float)(1.0 / (double)sc->l[i]);
            int vis = INFER__MIN(kt, b->pos0 + t0 + i / group + 1 - k0);
            for (j = 0; j < kt; j++) p[j] = j < vis ? infer__fp32_to_fp16(expf(s[j] * scale - mx) * inv) : 0;
        }
        if (kv->type == INFER_TYPE_F16) {
            vt = (const uint16_t *)(kv->v + layer_bytes * b->layer) + (size_t)kvh * hd * kv->n_ctx + k0;
            vt_stride = (size_t)kv->n_ctx * sizeof(uint16_t);
        } else {
            const uint8_t *vbase = kv->v + layer_bytes * b->layer + head_off;
            for (j = 0; j < kt; j++) {
                infer__traits(kv->type)->to_float(vbase + (size_t)(k0 + j) * kv->k_row, sc->vrow, hd);
                for (d = 0; d < hd; d++) sc->vt[(size_t)d * INFER__ATT_TILE + j] = infer__fp32_to_fp16(sc->vrow[d]);
            }
            vt = sc->vt;
            vt_stride = INFER__ATT_TILE * sizeof(uint16_t);
        }
        infer__rows_dot(kern, INFER_TYPE_F16, kt, vt, vt_stride, hd, sc->p, INFER__ATT_TILE * sizeof(uint16_t), nq,
                        sc->pv, (size_t)hd);
        for (i = 0; i < nq * hd; i++) sc->acc[i] += sc->pv[i];
    }

    for (i = 0; i < nq; i++) {
        float *out = b->out + (size_t)(t0 + i / group) * b->ldo + (size_t)(kvh * group + i % group) * hd;
        for (d = 0; d < hd; d++) out[d] = sc->acc[(size_t)i * hd + d];
    }
}

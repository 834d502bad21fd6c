/* attention.c - the KV cache and causal attention over it: keys in tiles
   with an online softmax, so a worker's memory is O(tile) at any context
   length, and both products (q.K and p.V) are batched kernel calls.
   Layout: K as rows of kv_dim values per position (F16, Q8_0 or Q4_0). V
   in F16 is kept transposed, a row of positions per value, so p.V is a
   product of rows like every other; a quantized V is kept like K and read
   as it is, key by key (kernels.pv_quant), so it costs no more than F16.
   Numerics follow llama.cpp: q is converted to K's dot type (F16 or Q8_0,
   so a quantized K is an integer dot product),
   softmax runs in f32 on the scaled scores, and the probabilities meet V
   normalised and rounded to F16. So a first pass over the tiles finds each
   row's max and sum (online, rescaling as the max grows) and a second makes
   the probabilities and multiplies by V. */
#include "context.h"
#include "quants.h"

static size_t infer__kv_bytes(const infer__kv_cache *kv) { return kv->bytes; }

/* Positions layer l holds: every one, or, for a sliding window of w keys,
   the window plus a batch (a batch's first token still sees w - 1 older
   keys while its last is written), so its ring is never overwritten
   before it is read. */
static int infer__kv_layer_slots(int n_ctx, int n_batch, int window) {
    return window ? INFER__MIN(n_ctx, window + n_batch) : n_ctx;
}

static int infer__kv_init(infer__kv_cache *kv, infer_type type, const infer_model *m, void *gpu, int n_ctx, int n_batch,
                          int n_seq, infer_error *err) {
    int l, s;
    size_t total = 0, at = 0;
    memset(kv, 0, sizeof *kv);
    if (type != INFER_TYPE_F16 && type != INFER_TYPE_Q8_0 && type != INFER_TYPE_Q4_0) {
        infer__set_error(err, INFER_ERR_ARG, "the KV cache can be F16, Q8_0 or Q4_0, not %s", infer__traits(type)->name);
        return 0;
    }
    if (type != INFER_TYPE_F16 && m->head_dim % 32) {
        infer__set_error(err, INFER_ERR_UNSUPPORTED, "a %s KV cache needs heads of a multiple of 32 values, not %d",
                         infer__traits(type)->name, m->head_dim);
        return 0;
    }
    kv->type = type;
    kv->n_layers = m->n_layers;
    kv->n_ctx = n_ctx;
    kv->kv_dim = m->kv_dim;
    kv->n_seq = n_seq;
    kv->gpu = gpu;
    kv->k_row = infer__row_size(type, kv->kv_dim);
    kv->slots = (int *)infer__calloc((size_t)m->n_layers, sizeof(int));
    kv->k = (uint8_t **)infer__calloc((size_t)m->n_layers * n_seq, sizeof(uint8_t *));
    kv->v = (uint8_t **)infer__calloc((size_t)m->n_layers * n_seq, sizeof(uint8_t *));
    if (kv->slots && kv->k && kv->v) {
        for (l = 0; l < m->n_layers; l++) {
            /* a recurrent layer keeps no keys (its state is the context's
               rs), nor does one that reads an earlier layer's */
            const infer__layer *L = &m->layers[l];
            kv->slots[l] = L->kind == INFER__LAYER_ATTENTION && L->kv_layer == l ? infer__kv_layer_slots(n_ctx, n_batch, L->window) : 0;
            total += 2 * (size_t)kv->slots[l] * kv->k_row * n_seq;
        }
        kv->mem = (uint8_t *)infer__kv_mem_alloc(gpu, total ? total : 1);
    }
    if (!kv->mem) {
        infer__kv_free(kv);
        infer__set_error(err, INFER_ERR_NOMEM, "out of %s memory for a KV cache of %d positions x %d sequences",
                         gpu ? "device" : "host", n_ctx, n_seq);
        return 0;
    }
    for (s = 0; s < n_seq; s++)
        for (l = 0; l < m->n_layers; l++) {
            kv->k[INFER__KV_AT(kv, s, l)] = kv->mem + at, at += (size_t)kv->slots[l] * kv->k_row;
            kv->v[INFER__KV_AT(kv, s, l)] = kv->mem + at, at += (size_t)kv->slots[l] * kv->k_row;
        }
    kv->bytes = total;
    return 1;
}

static void infer__kv_free(infer__kv_cache *kv) {
    INFER_FREE(kv->slots);
    INFER_FREE(kv->k);
    INFER_FREE(kv->v);
    if (kv->mem) infer__kv_mem_free(kv->gpu, kv->mem);
    memset(kv, 0, sizeof *kv);
}

/* Whether every ring still holds the keys position n_past would see (the
   positions after it are rewritten before anything reads them). */
static int infer__kv_can_rewind(const infer__kv_cache *kv, const infer_model *m, int hi, int n_past) {
    int l;
    for (l = 0; l < kv->n_layers; l++) {
        int w = m->layers[l].window, first;
        if (kv->slots[l] >= kv->n_ctx || !kv->slots[l]) continue;
        first = w ? INFER__MAX(0, n_past - w + 1) : 0;
        if (first + kv->slots[l] < hi) return 0;
    }
    return 1;
}

/* Writes one position's k and v (n floats each: the layer's kv_dim, at
   most the rows' kv_dim). */
static void infer__kv_store(infer__kv_cache *kv, const infer__kernels *kern, int seq, int layer, int pos, const float *k,
                            const float *v, int n) {
    int slots = kv->slots[layer], slot = pos % slots;
    size_t at = INFER__KV_AT(kv, seq, layer);
    kern->from_float[kv->type](k, kv->k[at] + (size_t)slot * kv->k_row, n);
    if (kv->type == INFER_TYPE_F16) {
        uint16_t *vt = (uint16_t *)kv->v[at] + slot;
        int i;
        for (i = 0; i < n; i++) vt[(size_t)i * slots] = infer__fp32_to_fp16(v[i]);
    } else {
        kern->from_float[kv->type](v, kv->v[at] + (size_t)slot * kv->k_row, n);
    }
}

/* Scores a worker keeps for a context of n_ctx positions. */
static size_t infer__attn_kept_floats(int n_ctx) {
    return INFER__MIN((size_t)INFER__ATT_KEPT, (size_t)INFER__ATT_ROWS * (size_t)n_ctx);
}

static size_t infer__attn_scratch_floats(int head_dim, int ordered, int n_ctx) {
    size_t rows = INFER__ATT_ROWS, hd = (size_t)head_dim, tile = INFER__ATT_TILE;
    /* qx (at most 4 bytes a value), s, acc, pv, m, l, inv, p (halves), kept scores, qk_work (qk_f16's and pv_f16's) */
    size_t n = rows * hd + rows * tile + 2 * rows * hd + 3 * rows + rows * tile / 2 + infer__attn_kept_floats(n_ctx) +
               hd * tile + (rows + 8) * INFER__MAX(hd, tile);
    /* lanes, vchunk, pchunk, sum (doubles, 8-byte aligned), with two floats to spare for that */
    if (ordered) n += rows * hd * 16 + hd * 16 * INFER__ATT_PV_CHUNKS + rows * 16 + 2 * rows + 2;
    /* even, so that every worker's share starts 8-byte aligned (the
       ordered pass keeps doubles in acc) */
    return (n + 1) / 2 * 2;
}

static void infer__attn_scratch_carve(infer__attn_scratch *sc, float *base, int head_dim, int ordered, int n_ctx) {
    size_t rows = INFER__ATT_ROWS, hd = (size_t)head_dim, tile = INFER__ATT_TILE;
    sc->qx = (uint8_t *)base, base += rows * hd;
    sc->s = base, base += rows * tile;
    sc->acc = base, base += rows * hd;
    sc->pv = base, base += rows * hd;
    sc->m = base, base += rows;
    sc->l = base, base += rows;
    sc->inv = base, base += rows;
    sc->p = (uint16_t *)base, base += rows * tile / 2;
    sc->kept = base, sc->n_kept = infer__attn_kept_floats(n_ctx), base += sc->n_kept;
    sc->qk_work = base, base += hd * tile + (rows + 8) * INFER__MAX(hd, tile);
    sc->lanes = sc->vchunk = sc->pchunk = NULL;
    sc->sum = NULL;
    if (ordered) {
        if ((uintptr_t)base % sizeof(double)) base++; /* 8-byte aligned */
        sc->sum = (double *)(void *)base, base += 2 * rows;
        sc->lanes = base, base += rows * hd * 16;
        sc->vchunk = base, base += hd * 16 * INFER__ATT_PV_CHUNKS;
        sc->pchunk = base;
    }
}

/* One batched product of rows: y[t * ldy + r] = w_r . x_t. */
static void infer__rows_dot(const infer__kernels *kern, infer_type wt, int n, const void *w, size_t w_stride,
                            int n_rows, const void *x, size_t x_stride, int n_tok, float *y, size_t ldy) {
    int r, t;
    /* one token too (a row alone sums as it does among others) */
    if (kern->gemm[wt]) {
        kern->gemm[wt](n, w, w_stride, n_rows, x, x_stride, n_tok, y, ldy);
        return;
    }
    for (r = 0; r < n_rows; r++)
        for (t = 0; t < n_tok; t++)
            y[(size_t)t * ldy + r] =
                kern->vec_dot[wt](n, (const uint8_t *)w + (size_t)r * w_stride, (const uint8_t *)x + (size_t)t * x_stride);
}

/* Tokens per work item: rows of one item are tokens x the heads of a group. */
static int infer__attn_tokens_per_item(const infer__attn_batch *b) {
    int group = b->n_heads / b->n_kv_heads;
    return INFER__MAX(1, INFER__ATT_ROWS / group);
}

static int infer__attn_n_items(const infer__attn_batch *b) {
    int per = infer__attn_tokens_per_item(b);
    return (b->n_tok + per - 1) / per * b->n_kv_heads;
}

/* The scores of one tile made soft-capped: c * tanh(s / c), as llama.cpp
   scales, takes tanh and scales back. */
static void infer__attn_softcap(float *s, int n, float cap) {
    float inv = 1.0f / cap;
    int j;
    for (j = 0; j < n; j++) s[j] = infer__tanhf(s[j] * inv) * cap;
}

/* Work item i: one KV head and a run of tokens, the latest tokens (the most
   keys) first so the workers finish together; the query heads of a GQA
   group are rows of one item, so they share each K and V tile read. Keys
   are visited by position, in tiles that never cross the end of a layer's
   ring; with a sliding window, tiles wholly before it are skipped. Two
   passes, so that the probabilities are normalised before they are
   rounded to F16, as llama.cpp has them: the scores of each tile and each
   row's running max and sum (kernels.softmax_stats), then the
   probabilities (kernels.softmax_probs) times V. The second pass reads
   the scores the first kept where they fit (sc->n_kept floats), so
   K is read once; else it makes them again. Kept whole, a row takes e^x
   once a score, in llama.cpp's order: the first pass finds only the max
   (kernels.scaled_max), then the kept scores become e^(x - max) with
   their sum (kernels.softmax_exp), and the second pass scales them by
   1 / sum (kernels.probs_f16).
   Split (b->n_splits > 1), item i is run i % n_splits of the keys, in two
   phases with a barrier between: phase 1 keeps its scores, made
   e^(x - the run's max), in b->scores and leaves that max and their sum
   in b->part; phase 2 merges every run's max and sum, scales its run's
   by e^(its max - the row's) / the row's sum (1 / sum where one run holds
   all of a row's keys, as unsplit), and leaves its share of p.V, which
   infer__attn_merge adds up. */
static void infer__attn_item(const infer__attn_batch *b, int item, infer__attn_scratch *sc) {
    const infer__kv_cache *kv = b->kv;
    const infer__kernels *kern = b->kern;
    int hd = b->head_dim, n_kv_heads = b->n_kv_heads, group = b->n_heads / n_kv_heads, split = b->n_splits > 1;
    int per = infer__attn_tokens_per_item(b), n_blocks = (b->n_tok + per - 1) / per;
    int run = item % b->n_splits, kvh = item / b->n_splits % n_kv_heads, blk = n_blocks - 1 - item / b->n_splits / n_kv_heads;
    int t0 = blk * per, t1 = INFER__MIN(b->n_tok, t0 + per), nq = (t1 - t0) * group;
    int slots = kv->slots[b->layer], w = b->window;
    int key_hi = b->pos0 + t1, key_lo = w ? INFER__MAX(0, b->pos0 + t0 - w + 1) : 0, a = key_lo, e = key_hi;
    int n_keys = key_hi - key_lo, k0, i, pass, r;
    /* kept whole (split runs always): e^x once a score, max, then e and sum, then e / sum */
    int keep = split || (size_t)nq * n_keys <= sc->n_kept;
    double run_sum[INFER__ATT_ROWS]; /* phase 1: each row's sum of e^(x - max) over this run */
    /* q.K by the kernel that widens each key once for all of an item's rows
       (a prompt's many), for any row count, so that passes of any size sum
       alike; split passes (one token's, by thread) keep the product of rows,
       which was as fast there, but for the first run: a token whose keys
       all lie there scores them as an unsplit pass does, so a pass that
       crosses the run's end gives it the logits it has alone. hd % 8 for
       AVX2's, on every ISA so that all choose alike. p.V likewise, where
       the ISA has a kernel for many rows (kernels.pv_f16). */
    int wide = (!split || run == 0) && kv->type == INFER_TYPE_F16;
    int qk_wide = wide && kern->qk_f16 && hd % 8 == 0, pv_wide = wide && kern->pv_f16 && hd % 16 == 0;
    infer_type qt = infer__traits(kv->type)->vec_dot_type;
    size_t q_row = infer__row_size(qt, hd), head_off = infer__row_size(kv->type, (int64_t)kvh * hd);
    size_t p_stride = (size_t)hd + INFER__ATT_PART_HEAD, p_row = p_stride * b->n_splits;
    const uint8_t *kbase = kv->k[INFER__KV_AT(kv, b->seq, b->layer)] + head_off;
    float scale = b->scale;
#define INFER__ATT_T(i) (t0 + (i) / group)                  /* row i's token */
#define INFER__ATT_H(i) (kvh * group + (i) % group)         /* and head */
#define INFER__ATT_PART(i) (b->part + ((size_t)INFER__ATT_T(i) * b->n_heads + INFER__ATT_H(i)) * p_row)
#define INFER__ATT_KEPT_ROW(i) /* row i's kept scores, by key from key_lo */ \
    (split ? b->scores + ((size_t)INFER__ATT_T(i) * b->n_heads + INFER__ATT_H(i)) * b->scores_ld : sc->kept + (size_t)(i) * n_keys)

    if (split) { /* this run's positions (none: a max of -inf, a sum and p.V of 0) */
        a = INFER__MAX(key_lo, run * b->split_len);
        e = INFER__MIN(key_hi, (run + 1) * b->split_len);
    }
    /* rows i = (token - t0) * group + head within the group */
    for (i = 0; i < nq; i++) {
        const float *q = b->q + (size_t)INFER__ATT_T(i) * b->ldq + (size_t)INFER__ATT_H(i) * hd;
        kern->from_float[qt](q, sc->qx + (size_t)i * q_row, hd);
        /* a sink joins the max from the start (every run's too: a shift
           only, so a run holding all of a row's keys sums as unsplit), and
           the sum once: here where the sum runs online, else at its end
           (kept) or in phase 2's merge (split) */
        sc->m[i] = b->sinks ? b->sinks[INFER__ATT_H(i)] : -INFINITY;
        sc->l[i] = b->sinks && !keep ? 1.0f : 0.0f;
    }
    if (b->phase == 2) { /* every run's max and sum, merged: this run's e^(x - its max) scaled to the whole row's */
        for (i = 0; i < nq; i++) {
            const float *pt = INFER__ATT_PART(i);
            double l = 0, lr;
            float mx = b->sinks ? b->sinks[INFER__ATT_H(i)] : -INFINITY;
            for (r = 0; r < b->n_splits; r++) mx = INFER__MAX(mx, pt[r * p_stride]);
            for (r = 0; r < b->n_splits; r++) {
                memcpy(&lr, pt + r * p_stride + 1, sizeof lr);
                if (lr > 0) l += lr * infer__expf(pt[r * p_stride] - mx);
            }
            if (b->sinks) l += infer__expf(b->sinks[INFER__ATT_H(i)] - mx); /* once a row, not once a run */
            /* a row whose keys all lie in one run: (float)(1 / sum), as unsplit */
            sc->inv[i] = l > 0 ? (float)((double)infer__expf(pt[run * p_stride] - mx) / l) : 0.0f;
        }
    }
    memset(sc->acc, 0, (size_t)nq * hd * sizeof(float));

    for (pass = b->phase == 2 ? 1 : 0; pass < (b->phase == 1 ? 1 : 2); pass++) {
        for (k0 = a; k0 < e;) {
            int slot = k0 % slots, kt = INFER__MIN(INFER__MIN(INFER__ATT_TILE, e - k0), slots - slot);
            if (pass == 0 || !keep) {
                if (qk_wide)
                    kern->qk_f16(hd, kbase + (size_t)slot * kv->k_row, kv->k_row, kt, (const uint16_t *)(const void *)sc->qx,
                                 q_row, nq, sc->s, INFER__ATT_TILE, sc->qk_work);
                else
                    infer__rows_dot(kern, kv->type, hd, kbase + (size_t)slot * kv->k_row, kv->k_row, kt, sc->qx, q_row, nq,
                                    sc->s, INFER__ATT_TILE);
                if (b->softcap > 0)
                    for (i = 0; i < nq; i++) infer__attn_softcap(sc->s + (size_t)i * INFER__ATT_TILE, kt, b->softcap);
            }
            for (i = 0; i < nq; i++) {
                int p = b->pos0 + INFER__ATT_T(i); /* this row's position: it sees keys (p - w, p] */
                int lo = w ? INFER__MAX(0, p - w + 1 - k0) : 0, hi = INFER__MIN(kt, p + 1 - k0);
                const float *srow = sc->s + (size_t)i * INFER__ATT_TILE;
                if (pass == 0) {
                    if (keep) sc->m[i] = kern->scaled_max(srow, lo, hi, scale, sc->m[i]);
                    else kern->softmax_stats(srow, lo, hi, scale, &sc->m[i], &sc->l[i]);
                    if (keep) memcpy(INFER__ATT_KEPT_ROW(i) + (k0 - key_lo), srow, (size_t)kt * sizeof(float));
                } else if (keep) { /* the row's e^(x - max), kept */
                    kern->probs_f16(INFER__ATT_KEPT_ROW(i) + (k0 - key_lo), kt, sc->inv[i], sc->p + (size_t)i * INFER__ATT_TILE);
                } else {
                    if (keep) srow = INFER__ATT_KEPT_ROW(i) + (k0 - key_lo);
                    kern->softmax_probs(srow, kt, lo, INFER__MAX(lo, hi), scale, sc->m[i],
                                        sc->l[i] > 0 ? (float)(1.0 / (double)sc->l[i]) : 0.0f,
                                        sc->p + (size_t)i * INFER__ATT_TILE);
                }
            }
            if (pass == 1 && kv->type == INFER_TYPE_F16) {
                const uint16_t *vt = (const uint16_t *)kv->v[INFER__KV_AT(kv, b->seq, b->layer)] + (size_t)kvh * hd * slots + slot;
                if (pv_wide) {
                    kern->pv_f16(hd, vt, (size_t)slots, kt, sc->p, INFER__ATT_TILE, nq, sc->acc, sc->qk_work);
                } else {
                    infer__rows_dot(kern, INFER_TYPE_F16, kt, vt, (size_t)slots * sizeof(uint16_t), hd, sc->p,
                                    INFER__ATT_TILE * sizeof(uint16_t), nq, sc->pv, (size_t)hd);
                    for (i = 0; i < nq * hd; i++) sc->acc[i] += sc->pv[i];
                }
            } else if (pass == 1) { /* a quantized V, read as it is kept */
                kern->pv_quant[kv->type](hd, kv->v[INFER__KV_AT(kv, b->seq, b->layer)] + head_off + (size_t)slot * kv->k_row,
                                         kv->k_row, kt, sc->p, INFER__ATT_TILE, nq, sc->acc);
            }
            k0 += kt;
        }
        if (pass == 0 && keep) /* each row's kept scores (this run's) become e^(x - max), and their sum */
            for (i = 0; i < nq; i++) {
                int p = b->pos0 + INFER__ATT_T(i), lo = w ? INFER__MAX(0, p - w + 1 - a) : 0;
                double sum = e > a ? kern->softmax_exp(INFER__ATT_KEPT_ROW(i) + (a - key_lo), e - a, lo,
                                                       INFER__MIN(e - a, p + 1 - a), scale, sc->m[i])
                                   : 0.0;
                run_sum[i] = sum;
                /* unsplit, the sink's e^(z - max) ends the sum, in ggml's order */
                if (b->sinks && !split) sum += infer__expf(b->sinks[INFER__ATT_H(i)] - sc->m[i]);
                sc->inv[i] = sum > 0 ? (float)(1.0 / sum) : 0.0f;
            }
    }

    for (i = 0; i < nq; i++) {
        if (b->phase == 1) { /* this run's max and sum */
            float *pt = INFER__ATT_PART(i) + (size_t)run * p_stride;
            pt[0] = sc->m[i];
            memcpy(pt + 1, &run_sum[i], sizeof run_sum[i]);
        } else if (b->phase == 2) { /* its share of p.V */
            memcpy(INFER__ATT_PART(i) + (size_t)run * p_stride + INFER__ATT_PART_HEAD, sc->acc + (size_t)i * hd,
                   (size_t)hd * sizeof(float));
        } else {
            memcpy(b->out + (size_t)INFER__ATT_T(i) * b->ldo + (size_t)INFER__ATT_H(i) * hd, sc->acc + (size_t)i * hd,
                   (size_t)hd * sizeof(float));
        }
    }
#undef INFER__ATT_T
#undef INFER__ATT_H
#undef INFER__ATT_PART
#undef INFER__ATT_KEPT_ROW
}

/* Tokens t0..t1 of a batch whose keys were split (infer__attn_batch.part):
   each head's runs' shares of p.V added up, into out (row stride ldo). */
static void infer__attn_merge(const float *part, int n_heads, int head_dim, int n_splits, int t0, int t1, float *out,
                              int ldo) {
    size_t stride = (size_t)head_dim + INFER__ATT_PART_HEAD;
    int t, h, r, d;
    for (t = t0; t < t1; t++)
        for (h = 0; h < n_heads; h++) {
            const float *p = part + ((size_t)t * n_heads + h) * n_splits * stride;
            float *o = out + (size_t)t * ldo + (size_t)h * head_dim;
            for (d = 0; d < head_dim; d++) o[d] = p[INFER__ATT_PART_HEAD + d];
            for (r = 1; r < n_splits; r++)
                for (d = 0; d < head_dim; d++) o[d] += p[r * stride + INFER__ATT_PART_HEAD + d];
        }
}

/* Work item i in llama.cpp's order, for an F16 cache (contexts that match
   it). llama.cpp lays a sequence's keys in cells by position and:
   scores each with a 16-lane F16 dot; takes the row's max; sums e^(s - max)
   in chunks of 16 cells (each chunk's lanes by the tree, into a double);
   scales by (float)(1 / sum) and rounds to F16; and sums p.V per value in
   16 lanes by cell, one chain per lane, then the tree. Cells a row does
   not see add exact zeros, so only the keys it sees are visited, each in
   the lane of its position. Three passes over the keys (max, sum, p.V),
   the scores made again unless one tile or the kept scores held them;
   held, the sum's pass leaves their exps there for p.V's. */
static void infer__attn_item_ordered(const infer__attn_batch *b, int item, infer__attn_scratch *sc) {
    const infer__kv_cache *kv = b->kv;
    const infer__kernels *kern = b->kern;
    int hd = b->head_dim, n_kv_heads = b->n_kv_heads, group = b->n_heads / n_kv_heads;
    int per = infer__attn_tokens_per_item(b), n_blocks = (b->n_tok + per - 1) / per;
    int kvh = item % n_kv_heads, blk = n_blocks - 1 - item / n_kv_heads;
    int t0 = blk * per, t1 = INFER__MIN(b->n_tok, t0 + per), nq = (t1 - t0) * group;
    int slots = kv->slots[b->layer], w = b->window, pass, g;
    int key_hi = b->pos0 + t1, key_lo = w ? INFER__MAX(0, b->pos0 + t0 - w + 1) : 0, k0, i, j, d, l;
    size_t q_row = (size_t)hd * sizeof(uint16_t), head_off = infer__row_size(kv->type, (int64_t)kvh * hd);
    const uint8_t *kbase = kv->k[INFER__KV_AT(kv, b->seq, b->layer)] + head_off;
    const uint16_t *vbase = (const uint16_t *)kv->v[INFER__KV_AT(kv, b->seq, b->layer)] + (size_t)kvh * hd * slots;
    int one_tile = key_hi - key_lo <= INFER__ATT_TILE && key_lo % slots + (key_hi - key_lo) <= slots;
    /* more than one tile: the first pass's scores kept for the other two
       where the worker's kept scores hold them (the same values: made once) */
    size_t n_keys = (size_t)(key_hi - key_lo);
    int keep = !one_tile && (size_t)nq * n_keys <= sc->n_kept, held_exps = one_tile || keep;
    /* one token: llama.cpp's products are ggml_vec_dot_f16 (infer__f16_dot_llama_vec):
       p.V over its n_kv cells (positions padded to 32) in 64 lanes, the
       cells past the last whole 64 in double (tail) */
    int vec = b->n_tok == 1 && nq <= 16, nl = vec ? 64 : 16;
    int n_kv = (key_hi + 31) / 32 * 32, np = n_kv - n_kv % 64;
    infer__vec_dot_fn dot = vec ? kern->f16_dot_ordered1 : kern->f16_dot_ordered;
    double *tail = (double *)(void *)sc->acc;
    float scale = b->scale;

    for (i = 0; i < nq; i++) {
        const float *q = b->q + (size_t)(t0 + i / group) * b->ldq + (size_t)(kvh * group + i % group) * hd;
        kern->from_float[INFER_TYPE_F16](q, sc->qx + (size_t)i * q_row, hd);
        /* ggml's soft_max: a sink joins the row's max before the exps and their sum after */
        sc->m[i] = b->sinks ? b->sinks[kvh * group + i % group] : -INFINITY;
        sc->sum[i] = 0;
    }
    memset(sc->lanes, 0, (size_t)nq * hd * nl * sizeof(float));
    if (vec) memset(tail, 0, (size_t)nq * hd * sizeof(double));
    memset(sc->pchunk, 0, (size_t)16 * INFER__ATT_ROWS * sizeof(float));

    for (pass = 0; pass < 3; pass++) {
        if (pass == 2 && b->sinks)
            for (i = 0; i < nq; i++) sc->sum[i] += infer__expf(b->sinks[kvh * group + i % group] - sc->m[i]);
        for (k0 = key_lo; k0 < key_hi;) {
            int slot = k0 % slots, kt = INFER__MIN(INFER__MIN(INFER__ATT_TILE, key_hi - k0), slots - slot), c0;
            if (pass == 0 || (!one_tile && !keep)) {
                if (!kern->f16_scores_ordered || !kern->f16_scores_ordered(hd, vec, kbase + (size_t)slot * kv->k_row, kv->k_row, kt,
                                                                           sc->qx, q_row, nq, sc->s, INFER__ATT_TILE))
                    for (j = 0; j < kt; j++)
                        for (i = 0; i < nq; i++)
                            sc->s[(size_t)i * INFER__ATT_TILE + j] =
                                dot(hd, kbase + (size_t)(slot + j) * kv->k_row, sc->qx + (size_t)i * q_row);
                if (b->softcap > 0)
                    for (i = 0; i < nq; i++) infer__attn_softcap(sc->s + (size_t)i * INFER__ATT_TILE, kt, b->softcap);
                if (keep)
                    for (i = 0; i < nq; i++)
                        memcpy(sc->kept + (size_t)i * n_keys + (k0 - key_lo), sc->s + (size_t)i * INFER__ATT_TILE,
                               (size_t)kt * sizeof(float));
            } else if (keep) {
                for (i = 0; i < nq; i++)
                    memcpy(sc->s + (size_t)i * INFER__ATT_TILE, sc->kept + (size_t)i * n_keys + (k0 - key_lo),
                           (size_t)kt * sizeof(float));
            }
            if (pass < 2) {
                for (i = 0; i < nq; i++) {
                    const float *s = sc->s + (size_t)i * INFER__ATT_TILE;
                    float *ch = sc->pchunk + (size_t)i * 16;
                    int p = b->pos0 + t0 + i / group; /* this row sees keys (p - w, p] */
                    int lo = w ? INFER__MAX(0, p - w + 1 - k0) : 0, hi = INFER__MIN(kt, p + 1 - k0);
                    /* where the scores are held for pass 2, their exps replace them */
                    float *held = one_tile ? sc->s + (size_t)i * INFER__ATT_TILE
                                  : keep   ? sc->kept + (size_t)i * n_keys + (k0 - key_lo)
                                           : NULL;
                    if (pass == 0)
                        sc->m[i] = kern->scaled_max(s, lo, hi, scale, sc->m[i]);
                    else /* chunks of 16 by position, each ending at its lane 15 or the row's last key */
                        sc->sum[i] = kern->exp_chunks16(s, held, k0, lo, hi, p - k0, scale, sc->m[i], ch, sc->sum[i]);
                }
                k0 += kt;
                continue;
            }
            /* pass 2: p.V a chunk of 16 positions at a time (the part of it in
               this tile); with the exps held, up to four chunks a call, so
               that each value's lanes are loaded once for them */
            for (c0 = k0 - k0 % 16; c0 < k0 + kt; c0 += 16 * g) {
                int a = INFER__MAX(c0, k0), e, ci;
                g = held_exps && !vec ? INFER__MIN(INFER__ATT_PV_CHUNKS, (k0 + kt - c0 + 15) / 16) : 1;
                e = INFER__MIN(c0 + 16 * g, k0 + kt);
                for (ci = 0; ci < g; ci++) {
                    int ca = INFER__MAX(c0 + 16 * ci, a), ce = INFER__MIN(c0 + 16 * ci + 16, e);
                    float *vc = sc->vchunk + (size_t)16 * hd * ci;
                    if (ca == c0 + 16 * ci && ce == ca + 16) { /* a whole chunk: 16 halves a value, in a row */
                        kern->f16_rows16(vbase + slot + (ca - k0), (size_t)slots, hd, vc);
                    } else {
                        memset(vc, 0, (size_t)hd * 16 * sizeof(float));
                        for (d = 0; d < hd; d++)
                            for (l = ca - c0 - 16 * ci; l < ce - c0 - 16 * ci; l++)
                                vc[16 * d + l] = infer__fp16_to_fp32(vbase[(size_t)d * slots + slot + (c0 + 16 * ci + l - k0)]);
                    }
                }
                for (i = 0; i < nq; i++) {
                    const float *s = sc->s + (size_t)i * INFER__ATT_TILE;
                    float *pc = sc->pchunk + (size_t)i * 16, inv = (float)(1.0 / sc->sum[i]);
                    int p = b->pos0 + t0 + i / group, any = 0;
                    int lo = w ? INFER__MAX(a, p - w + 1) : a, hi = INFER__MIN(e, p + 1);
                    if (lo >= hi) continue;
                    if (held_exps && (!vec || c0 < np)) { /* the exps at hand: rounded and added in one step */
                        kern->probs_fma16(sc->lanes + (size_t)i * hd * nl + (vec ? 16 * ((c0 / 16) % 4) : 0), nl, sc->vchunk,
                                          s + (c0 - k0), lo - c0, hi - c0, inv, hd, g);
                        continue;
                    }
                    for (l = 0; l < 16; l++) pc[l] = 0;
                    for (j = lo; j < hi; j++, any = 1) {
                        float x = s[j - k0] * scale, ex = held_exps ? s[j - k0] : kern->exp_llama(x - sc->m[i]);
                        pc[j - c0] = infer__fp16_to_fp32(infer__fp32_to_fp16(ex * inv));
                    }
                    if (!any) continue;
                    if (!vec || c0 < np) { /* with one token: 16 of the 64 lanes */
                        kern->lanes16_fma(sc->lanes + (size_t)i * hd * nl + (vec ? 16 * ((c0 / 16) % 4) : 0), nl,
                                          sc->vchunk, pc, hd);
                    } else {
                        for (d = 0; d < hd; d++)
                            for (l = 0; l < 16; l++) tail[(size_t)i * hd + d] += (double)(sc->vchunk[16 * d + l] * pc[l]);
                    }
                }
            }
            k0 += kt;
        }
    }

    for (i = 0; i < nq; i++) {
        float *out = b->out + (size_t)(t0 + i / group) * b->ldo + (size_t)(kvh * group + i % group) * hd;
        for (d = 0; d < hd; d++) {
            float *ln = sc->lanes + ((size_t)i * hd + d) * nl;
            if (vec) {
                for (l = 0; l < 16; l++) ln[l] = (ln[l] + ln[32 + l]) + (ln[16 + l] + ln[48 + l]);
                out[d] = (float)((double)infer__sum16_tree(ln) + tail[(size_t)i * hd + d]);
            } else {
                out[d] = infer__sum16_tree(ln);
            }
        }
    }
}

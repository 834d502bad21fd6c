/* sequence.c - the sequences of a context: reading them, truncating,
   removing positions (keys rotated again for where they move), copying,
   and saving and restoring their state. */
#include "context.h"

static int infer__seq_ok(const infer_context *c, int seq, infer_error *err) {
    if (c && seq >= 0 && seq < c->n_seq) return 1;
    infer__set_error(err, INFER_ERR_ARG, "sequence %d is outside the context's 0..%d", seq, c ? c->n_seq - 1 : -1);
    return 0;
}

INFERDEF int infer_seq_n_past(const infer_context *c, int seq) {
    return infer__seq_ok(c, seq, NULL) ? c->seqs[seq].n_past : 0;
}
/* Deprecated in 0.25, removed in 0.26: use infer_seq_n_past(c, 0). */
INFERDEF int infer_context_n_past(const infer_context *c) { return infer_seq_n_past(c, 0); }

INFERDEF const float *infer_seq_logits(const infer_context *c, int seq) {
    if (!infer__seq_ok(c, seq, NULL) || c->seqs[seq].logit_row < 0) return NULL;
    return c->logits + (size_t)c->seqs[seq].logit_row * c->model->n_vocab;
}

INFERDEF const infer_token *infer_seq_tokens(const infer_context *c, int seq, int *n) {
    if (!infer__seq_ok(c, seq, NULL)) {
        if (n) *n = 0;
        return NULL;
    }
    if (n) *n = c->seqs[seq].n_past;
    return c->seqs[seq].tokens;
}

/* A recurrent model's truncation to n (0 < n < n_past): its state cannot
   lose tokens, so it goes back to the checkpoint (the state where the
   last decode call began) and the tokens from there to n are decoded
   again; n before the checkpoint keeps nothing. */
static infer_status infer__seq_truncate_recurrent(infer_context *c, int seq, int n, int *kept, infer_error *err) {
    infer__seq *q = &c->seqs[seq];
    int ck = q->rs_ckpt, redo = n - ck;
    infer_token *again;
    infer_batch b;
    infer_status st;
    int *seqs, i;
    if (ck < 0 || n < ck) {
        *kept = 0;
        return INFER_OK;
    }
    q->rs_cur = 1 - q->rs_cur; /* the checkpoint's slot is the sequence's again */
    q->rs_ckpt = -1;
    *kept = ck;
    if (!redo) return INFER_OK; /* the caller cuts the cache to ck */
    again = (infer_token *)INFER_MALLOC((size_t)redo * (sizeof *again + sizeof *seqs));
    if (!again) {
        *kept = 0;
        infer__set_error(err, INFER_ERR_NOMEM, "out of memory for a truncation's checkpoint");
        return INFER_ERR_NOMEM;
    }
    seqs = (int *)(again + redo);
    memcpy(again, q->tokens + ck, (size_t)redo * sizeof *again);
    for (i = 0; i < redo; i++) seqs[i] = seq;
    q->n_past = q->hi = ck;
    stbds_arrsetlen(q->tokens, ck);
    memset(&b, 0, sizeof b);
    b.n = redo, b.tokens = again, b.seq = seqs;
    st = infer_decode_batch(c, &b, err);
    INFER_FREE(again);
    if (st == INFER_OK) *kept = n;
    return st;
}

INFERDEF infer_status infer_seq_truncate(infer_context *c, int seq, int n, int *n_past, infer_error *err) {
    infer__seq *q;
    infer_status st = INFER_OK;
    if (n_past) *n_past = 0;
    if (!infer__seq_ok(c, seq, err)) return INFER_ERR_ARG;
    q = &c->seqs[seq];
    if (n < 0 || n >= q->n_past) {
        if (n_past) *n_past = q->n_past;
        return INFER_OK;
    }
    if (c->rs && n > 0) {
        int kept = 0;
        st = infer__seq_truncate_recurrent(c, seq, n, &kept, err);
        /* (kept == n at the checkpoint itself: nothing decoded again, the
           cache is cut below) */
        if (st != INFER_OK || (kept == n && q->n_past == n)) {
            if (n_past) *n_past = q->n_past;
            return st;
        }
        n = kept;
    }
    /* a sliding window's ring may have overwritten keys n_past would see */
    if (!infer__kv_can_rewind(&c->kv, c->model, q->hi, n)) n = 0;
    q->n_past = n;
    q->hi = n;
    q->logit_row = -1;
    if (!n) q->rs_ckpt = -1;
    if (q->inexact && n < q->inexact) q->inexact = 0; /* what is left was made as a prefill makes it */
    stbds_arrsetlen(q->tokens, n);
    if (n_past) *n_past = n;
    return INFER_OK;
}
/* Deprecated in 0.25, removed in 0.26: use infer_seq_truncate(c, 0, n_past, &kept, err). */
INFERDEF int infer_context_truncate(infer_context *c, int n_past) {
    int kept = 0;
    infer_seq_truncate(c, 0, n_past, &kept, NULL);
    return kept;
}

/* Whether the sequence's cache holds each of its positions at slot =
   position (no ring has wrapped): what moving positions needs. */
static int infer__seq_unwrapped(const infer_context *c, const infer__seq *q) {
    int l;
    for (l = 0; l < c->kv.n_layers; l++)
        if (c->kv.slots[l] && c->kv.slots[l] < q->hi) return 0;
    return 1;
}

/* Bytes within the cache's memory, wherever it is (may overlap). */
static int infer__kv_move(const infer_context *c, void *dst, const void *src, size_t n) {
    return infer__kv_mem_copy(c->kv.gpu, dst, src, n, INFER_BACKEND_DEVICE_TO_DEVICE);
}

/* Rotates the keys of rows [0, n) of one layer's K (rows of the layer's
   kv_dim, in the cache's format) by delta positions of that layer's RoPE: the rotation
   RoPE gives a position is linear in it, so p -> p + delta is one more
   rotation (cos and sin taken without the attention factor). */
static void infer__rerope_rows(infer_context *c, int layer, uint8_t *k, int n, int delta, float *row, float *cs) {
    const infer_model *m = c->model;
    const infer__layer *L = &m->layers[layer];
    const infer__rope *r;
    int i, h, j;
    if (L->rope < 0 || !delta) return;
    r = &m->ropes[L->rope];
    infer__rope_angles(cs, r, c->rope_freqs[L->rope], delta);
    for (j = 0; j < r->n_rot; j += 2) {
        float norm = sqrtf(cs[j] * cs[j] + cs[j + 1] * cs[j + 1]);
        if (norm > 0) cs[j] /= norm, cs[j + 1] /= norm;
    }
    for (i = 0; i < n; i++) {
        uint8_t *at = k + (size_t)i * c->kv.k_row;
        infer__traits(c->kv.type)->to_float(at, row, L->kv_dim);
        for (h = 0; h < L->n_kv_heads; h++) infer__rope_rotate(row + (size_t)h * L->head_dim, cs, r->n_rot, r->neox, NULL);
        c->kern.from_float[c->kv.type](row, at, L->kv_dim);
    }
}

INFERDEF infer_status infer_seq_remove(infer_context *c, int seq, int p0, int p1, infer_error *err) {
    infer__seq *q;
    int l, d, moved, i, ok = 1;
    float *row, *cs;
    uint8_t *host = NULL; /* a device cache's moved keys, rotated here */
    if (!infer__seq_ok(c, seq, err)) return INFER_ERR_ARG;
    q = &c->seqs[seq];
    if (p1 < 0 || p1 > q->n_past) p1 = q->n_past;
    if (p0 < 0 || p0 > p1) {
        infer__set_error(err, INFER_ERR_ARG, "cannot remove positions %d..%d of a sequence of %d", p0, p1, q->n_past);
        return INFER_ERR_ARG;
    }
    if (p0 == p1) return INFER_OK;
    if (p1 == q->n_past) /* the end: a truncation */
        return infer_seq_truncate(c, seq, p0, NULL, err);
    if (c->rs) {
        infer__set_error(err, INFER_ERR_UNSUPPORTED,
                         "%s's recurrent layers keep one state of every token: positions %d..%d cannot be removed from "
                         "the middle (truncate the sequence or clear it)",
                         c->model->arch, p0, p1);
        return INFER_ERR_UNSUPPORTED;
    }
    if (!infer__seq_unwrapped(c, q)) {
        infer__set_error(err, INFER_ERR_UNSUPPORTED,
                         "a sliding window's cache keeps only its window: make the context with INFER_FULL_POLICY_SHIFT to "
                         "remove positions from the middle");
        return INFER_ERR_UNSUPPORTED;
    }
    d = p1 - p0;
    moved = q->n_past - p1;
    /* the moved positions' values were made seeing the removed ones */
    if (!q->inexact || p0 + 1 < q->inexact) q->inexact = p0 + 1;
    row = (float *)INFER_MALLOC(((size_t)c->kv.kv_dim + (size_t)c->model->rope_dim + 2) * sizeof(float));
    if (c->kv.gpu && moved) host = (uint8_t *)INFER_MALLOC((size_t)moved * c->kv.k_row);
    if (!row || (c->kv.gpu && moved && !host)) {
        INFER_FREE(row);
        INFER_FREE(host);
        infer__set_error(err, INFER_ERR_NOMEM, "out of memory");
        return INFER_ERR_NOMEM;
    }
    cs = row + c->kv.kv_dim;
    for (l = 0; l < c->kv.n_layers && ok; l++) {
        size_t at = INFER__KV_AT(&c->kv, seq, l), kn = (size_t)moved * c->kv.k_row;
        uint8_t *k = c->kv.k[at] + (size_t)p0 * c->kv.k_row;
        ok = infer__kv_move(c, k, c->kv.k[at] + (size_t)p1 * c->kv.k_row, kn);
        if (ok && host) { /* the device's keys turn on the host */
            ok = infer__kv_mem_copy(c->kv.gpu, host, k, kn, INFER_BACKEND_DEVICE_TO_HOST);
            if (ok) infer__rerope_rows(c, l, host, moved, -d, row, cs);
            ok = ok && infer__kv_mem_copy(c->kv.gpu, k, host, kn, INFER_BACKEND_HOST_TO_DEVICE);
        } else if (ok) {
            infer__rerope_rows(c, l, k, moved, -d, row, cs);
        }
        if (c->kv.type == INFER_TYPE_F16) { /* V transposed: a row of slots per value */
            uint16_t *v = (uint16_t *)c->kv.v[at];
            for (i = 0; i < c->kv.kv_dim && ok; i++)
                ok = infer__kv_move(c, v + (size_t)i * c->kv.slots[l] + p0, v + (size_t)i * c->kv.slots[l] + p1,
                                    (size_t)moved * 2);
        } else if (ok) {
            uint8_t *v = c->kv.v[at];
            ok = infer__kv_move(c, v + (size_t)p0 * c->kv.k_row, v + (size_t)p1 * c->kv.k_row, kn);
        }
    }
    INFER_FREE(row);
    INFER_FREE(host);
    if (!ok) { /* the device failed: the sequence's cache is lost */
        infer_seq_truncate(c, seq, 0, NULL, NULL);
        infer__set_error(err, INFER_ERR_DEVICE, "moving positions of the KV cache on the device failed");
        return INFER_ERR_DEVICE;
    }
    memmove(q->tokens + p0, q->tokens + p1, (size_t)moved * sizeof(infer_token));
    q->n_past -= d;
    q->hi = q->n_past;
    stbds_arrsetlen(q->tokens, q->n_past);
    return INFER_OK;
}

/* Slots [0, n) of sequence src's cache of layer l into dst's; 0 when the
   device failed. */
static int infer__kv_copy_slots(const infer_context *c, int src, int dst, int l, int n) {
    const infer__kv_cache *kv = &c->kv;
    size_t a = INFER__KV_AT(kv, src, l), b = INFER__KV_AT(kv, dst, l);
    int ok = infer__kv_move(c, kv->k[b], kv->k[a], (size_t)n * kv->k_row), i;
    if (kv->type == INFER_TYPE_F16) {
        for (i = 0; i < kv->kv_dim && ok; i++)
            ok = infer__kv_move(c, (uint16_t *)kv->v[b] + (size_t)i * kv->slots[l],
                                (uint16_t *)kv->v[a] + (size_t)i * kv->slots[l], (size_t)n * 2);
    } else if (ok) {
        ok = infer__kv_move(c, kv->v[b], kv->v[a], (size_t)n * kv->k_row);
    }
    return ok;
}

INFERDEF infer_status infer_seq_copy(infer_context *c, int src, int dst, infer_error *err) {
    infer__seq *a, *b;
    int l;
    if (!infer__seq_ok(c, src, err) || !infer__seq_ok(c, dst, err)) return INFER_ERR_ARG;
    if (src == dst) return INFER_OK;
    a = &c->seqs[src], b = &c->seqs[dst];
    if (!infer__arr_setlen(b->tokens, a->n_past)) {
        infer__set_error(err, INFER_ERR_NOMEM, "out of memory");
        return INFER_ERR_NOMEM;
    }
    for (l = 0; l < c->kv.n_layers; l++)
        if (!infer__kv_copy_slots(c, src, dst, l, INFER__MIN(c->kv.slots[l], a->hi))) {
            infer_seq_truncate(c, dst, 0, NULL, NULL);
            infer__set_error(err, INFER_ERR_DEVICE, "copying the KV cache on the device failed");
            return INFER_ERR_DEVICE;
        }
    if (c->rs) { /* both state slots: the copy keeps the checkpoint too */
        if (!infer__kv_mem_copy(c->kv.gpu, infer__rs_slot(c, dst, 0), infer__rs_slot(c, src, 0),
                                2 * c->rs_slot * sizeof(float), INFER_BACKEND_DEVICE_TO_DEVICE)) {
            infer_seq_truncate(c, dst, 0, NULL, NULL);
            infer__set_error(err, INFER_ERR_DEVICE, "copying the recurrent state on the device failed");
            return INFER_ERR_DEVICE;
        }
        b->rs_cur = a->rs_cur;
        b->rs_ckpt = a->rs_ckpt;
    }
    if (a->n_past) memcpy(b->tokens, a->tokens, (size_t)a->n_past * sizeof(infer_token));
    b->n_past = a->n_past;
    b->hi = a->hi;
    b->logit_row = a->logit_row;
    b->inexact = a->inexact;
    return INFER_OK;
}

/* ---- state ---------------------------------------------------------------- */


#define INFER__STATE_MAGIC 0x53464e49u /* "INFS" */
/* 2: a checksum over the whole state in the header */
#define INFER__STATE_VERSION 2u

typedef struct infer__state_header {
    uint32_t magic, version;
    uint64_t model;    /* infer__model_fingerprint */
    uint64_t checksum; /* infer__state_checksum */
    int32_t n_ctx, kv_type, n_layers, kv_dim;
    int32_t n_past, hi, n_logits, n_slot_layers;
} infer__state_header;

/* A 64-bit hash of n bytes, continuing from h: four lanes of 8-byte words
   (each lane xor, multiply, fold its high bits down), so that a state of
   hundreds of MB hashes at several bytes a cycle rather than FNV-1a's
   fraction of one. Not cryptographic: it catches damage, not forgery. */
static uint64_t infer__state_hash(uint64_t h, const uint8_t *p, size_t n) {
    const uint64_t prime = 0x100000001b3ull, mul = 0x9e3779b97f4a7c15ull;
    uint64_t l0 = h, l1 = h ^ mul, l2 = h + mul, l3 = ~h, w0, w1, w2, w3;
    size_t i;
    /* four named lanes, not an array: they stay in registers */
    for (i = 0; i + 32 <= n; i += 32) {
        memcpy(&w0, p + i, 8), memcpy(&w1, p + i + 8, 8), memcpy(&w2, p + i + 16, 8), memcpy(&w3, p + i + 24, 8);
        l0 = (l0 ^ w0) * prime, l1 = (l1 ^ w1) * prime, l2 = (l2 ^ w2) * prime, l3 = (l3 ^ w3) * prime;
        l0 ^= l0 >> 29, l1 ^= l1 >> 29, l2 ^= l2 >> 29, l3 ^= l3 >> 29;
    }
    h = l0;
    h = (h ^ (l1 * mul)) * prime, h ^= h >> 31;
    h = (h ^ (l2 * mul)) * prime, h ^= h >> 31;
    h = (h ^ (l3 * mul)) * prime, h ^= h >> 31;
    h = infer__fnv(h, p + i, n - i);          /* the tail, under 32 bytes */
    h = infer__fnv(h, &n, sizeof n);          /* the length: a truncation changes it */
    h ^= h >> 33, h *= 0xff51afd7ed558ccdull; /* a final mix: every input bit reaches every output bit */
    h ^= h >> 33, h *= 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 33);
}

/* The checksum of the state of size bytes at buf (at least a header): its
   header with the checksum field zeroed, then everything after it. */
static uint64_t infer__state_checksum(const uint8_t *buf, size_t size) {
    infer__state_header h;
    memcpy(&h, buf, sizeof h);
    h.checksum = 0;
    return infer__state_hash(infer__state_hash(INFER__FNV_BASIS, (const uint8_t *)&h, sizeof h), buf + sizeof h,
                             size - sizeof h);
}

/* Whether n cache bytes of format type hold only finite values: F16's
   halves, Q8_0's and Q4_0's block scales (their integer quants are always
   finite). */
static int infer__state_cache_finite(infer_type type, const uint8_t *p, size_t n) {
    size_t i, block = type == INFER_TYPE_Q8_0 ? 34 : 18;
    uint16_t v;
    if (type == INFER_TYPE_Q8_0 || type == INFER_TYPE_Q4_0) {
        for (i = 0; i + block <= n; i += block) {
            memcpy(&v, p + i, 2);
            if ((v & 0x7c00) == 0x7c00) return 0;
        }
        return 1;
    }
    if (type == INFER_TYPE_F16) {
        /* four halves a word: a half is NaN or infinite when its exponent
           bits are all ones, i.e. when its lane of ~w & mask is zero, which
           subtracting 1 from every lane shows in the lane's top bit */
        const uint64_t mask = 0x7c007c007c007c00ull, ones = 0x0001000100010001ull, tops = 0x8000800080008000ull;
        uint64_t w, bad = 0;
        for (i = 0; i + 8 <= n; i += 8) {
            memcpy(&w, p + i, 8);
            bad |= ((~w & mask) - ones) & tops;
        }
        for (; i + 2 <= n; i += 2) {
            memcpy(&v, p + i, 2);
            bad |= (v & 0x7c00) == 0x7c00;
        }
        return !bad;
    }
    return 0; /* a format this reader does not know */
}

/* FNV-1a over the model's shape, its tensors' names, types and shapes,
   and sampled bytes of its embeddings and final norm: another model (or a
   fine-tune of the same shape) gives another value. */
static uint64_t infer__model_fingerprint(const infer_model *m) {
    uint64_t h = INFER__FNV_BASIS;
    int64_t i;
    int dims[8];
    dims[0] = m->n_vocab, dims[1] = m->dim, dims[2] = m->n_layers, dims[3] = m->n_heads;
    dims[4] = m->n_kv_heads, dims[5] = m->head_dim, dims[6] = m->ffn_dim, dims[7] = m->rope_dim;
    h = infer__fnv(h, m->arch, strlen(m->arch));
    h = infer__fnv(h, dims, sizeof dims);
    for (i = 0; i < m->gguf->n_tensors; i++) {
        const infer__tensor *t = &m->gguf->tensors[i];
        h = infer__fnv(h, t->name, strlen(t->name));
        h = infer__fnv(h, &t->type, sizeof t->type);
        h = infer__fnv(h, t->ne, sizeof t->ne);
    }
    h = infer__fnv(h, m->tok_embd->data, INFER__MIN(m->tok_embd->nbytes, (size_t)4096));
    h = infer__fnv(h, m->output_norm->data, m->output_norm->nbytes);
    return h;
}

/* Bytes of layer l's used slots (K and V) for a sequence that reached hi. */
static size_t infer__state_layer_bytes(const infer__kv_cache *kv, int l, int hi) {
    return 2 * (size_t)INFER__MIN(kv->slots[l], hi) * kv->k_row;
}

INFERDEF size_t infer_seq_state_size(const infer_context *c, int seq) {
    const infer__seq *q;
    size_t n;
    int l;
    if (!infer__seq_ok(c, seq, NULL)) return 0;
    q = &c->seqs[seq];
    n = sizeof(infer__state_header) + (size_t)c->kv.n_layers * sizeof(int32_t) + (size_t)q->n_past * sizeof(infer_token);
    if (q->logit_row >= 0) n += (size_t)c->model->n_vocab * sizeof(float);
    for (l = 0; l < c->kv.n_layers; l++) n += infer__state_layer_bytes(&c->kv, l, q->hi);
    return n + c->rs_slot * sizeof(float); /* recurrent layers: the state slot */
}

INFERDEF size_t infer_seq_state_save(const infer_context *c, int seq, void *buf, size_t size) {
    size_t need = infer_seq_state_size(c, seq);
    const infer__seq *q;
    infer__state_header h;
    uint8_t *at = (uint8_t *)buf;
    int l, i;
    if (!need || !buf || size < need) return 0;
    q = &c->seqs[seq];
    memset(&h, 0, sizeof h);
    h.magic = INFER__STATE_MAGIC, h.version = INFER__STATE_VERSION;
    h.model = infer__model_fingerprint(c->model);
    h.n_ctx = c->n_ctx, h.kv_type = (int32_t)c->kv.type, h.n_layers = c->kv.n_layers, h.kv_dim = c->kv.kv_dim;
    h.n_past = q->n_past, h.hi = q->hi, h.n_logits = q->logit_row >= 0 ? c->model->n_vocab : 0;
    h.n_slot_layers = c->kv.n_layers;
    memcpy(at, &h, sizeof h), at += sizeof h;
    for (l = 0; l < c->kv.n_layers; l++) {
        int32_t s = c->kv.slots[l];
        memcpy(at, &s, sizeof s), at += sizeof s;
    }
    if (q->n_past) memcpy(at, q->tokens, (size_t)q->n_past * sizeof(infer_token)), at += (size_t)q->n_past * sizeof(infer_token);
    if (h.n_logits) memcpy(at, infer_seq_logits(c, seq), (size_t)h.n_logits * sizeof(float)), at += (size_t)h.n_logits * sizeof(float);
    for (l = 0; l < c->kv.n_layers; l++) {
        size_t a = INFER__KV_AT(&c->kv, seq, l);
        int n = INFER__MIN(c->kv.slots[l], q->hi), ok;
        ok = infer__kv_mem_copy(c->kv.gpu, at, c->kv.k[a], (size_t)n * c->kv.k_row, INFER_BACKEND_DEVICE_TO_HOST);
        at += (size_t)n * c->kv.k_row;
        if (c->kv.type == INFER_TYPE_F16)
            for (i = 0; i < c->kv.kv_dim && ok; i++, at += (size_t)n * 2)
                ok = infer__kv_mem_copy(c->kv.gpu, at, (uint16_t *)c->kv.v[a] + (size_t)i * c->kv.slots[l], (size_t)n * 2,
                                        INFER_BACKEND_DEVICE_TO_HOST);
        else if (ok)
            ok = infer__kv_mem_copy(c->kv.gpu, at, c->kv.v[a], (size_t)n * c->kv.k_row, INFER_BACKEND_DEVICE_TO_HOST),
            at += (size_t)n * c->kv.k_row;
        if (!ok) return 0; /* the device failed */
    }
    if (c->rs_slot && !infer__kv_mem_copy(c->kv.gpu, at, infer__rs_slot(c, seq, q->rs_cur), c->rs_slot * sizeof(float),
                                          INFER_BACKEND_DEVICE_TO_HOST))
        return 0; /* the device failed */
    h.checksum = infer__state_checksum((const uint8_t *)buf, need);
    memcpy(buf, &h, sizeof h);
    return need;
}

INFERDEF infer_status infer_seq_state_load(infer_context *c, int seq, const void *buf, size_t size, infer_error *err) {
    const uint8_t *at = (const uint8_t *)buf;
    const uint8_t *tokens, *logits, *cache;
    infer__state_header h;
    infer__seq *q;
    size_t need, cache_bytes = 0;
    int l, i;
    if (!infer__seq_ok(c, seq, err)) return INFER_ERR_ARG;
    if (!buf || size < sizeof h) goto bad;
    memcpy(&h, at, sizeof h), at += sizeof h;
    if (h.magic != INFER__STATE_MAGIC) goto bad;
    if (h.version != INFER__STATE_VERSION) {
        infer__set_error(err, INFER_ERR_FORMAT, "the state is in format %u; this version of infer.h reads format %u",
                         (unsigned)h.version, (unsigned)INFER__STATE_VERSION);
        return INFER_ERR_FORMAT;
    }
    /* nothing of the state is used before its checksum holds */
    if (h.checksum != infer__state_checksum(at - sizeof h, size)) {
        infer__set_error(err, INFER_ERR_FORMAT, "the state is damaged or truncated: its checksum does not match its bytes");
        return INFER_ERR_FORMAT;
    }
    if (h.model != infer__model_fingerprint(c->model) || h.n_layers != c->kv.n_layers || h.kv_dim != c->kv.kv_dim) {
        infer__set_error(err, INFER_ERR_ARG, "the state is from another model");
        return INFER_ERR_ARG;
    }
    if (h.n_ctx != c->n_ctx || h.kv_type != (int32_t)c->kv.type) {
        infer__set_error(err, INFER_ERR_ARG,
                         "the state is from a context of %d positions (%s cache); this one has %d (%s)", h.n_ctx,
                         infer_type_name((infer_type)h.kv_type), c->n_ctx, infer_type_name(c->kv.type));
        return INFER_ERR_ARG;
    }
    if (h.n_past < 0 || h.n_past > c->n_ctx || h.hi < h.n_past || h.hi > c->n_ctx ||
        (h.n_logits != 0 && h.n_logits != c->model->n_vocab) || h.n_slot_layers != c->kv.n_layers)
        goto bad;
    need = sizeof h + (size_t)h.n_slot_layers * sizeof(int32_t);
    if (size < need) goto bad;
    for (l = 0; l < c->kv.n_layers; l++) {
        int32_t s;
        memcpy(&s, at, sizeof s), at += sizeof s;
        if (s != c->kv.slots[l]) {
            infer__set_error(err, INFER_ERR_ARG,
                             "the state's sliding-window cache differs from this context's (another batch size or policy)");
            return INFER_ERR_ARG;
        }
    }
    need += (size_t)h.n_past * sizeof(infer_token) + (size_t)h.n_logits * sizeof(float);
    for (l = 0; l < c->kv.n_layers; l++) cache_bytes += infer__state_layer_bytes(&c->kv, l, h.hi);
    if (size != need + cache_bytes + c->rs_slot * sizeof(float)) goto bad;
    tokens = at;
    logits = tokens + (size_t)h.n_past * sizeof(infer_token);
    cache = logits + (size_t)h.n_logits * sizeof(float);

    /* every value is checked before the sequence changes: a refused state leaves it as it was */
    for (i = 0; i < h.n_past; i++) {
        infer_token t;
        memcpy(&t, tokens + (size_t)i * sizeof t, sizeof t);
        if (t < 0 || t >= c->model->n_vocab) {
            infer__set_error(err, INFER_ERR_FORMAT, "the state's token %d (%d) is outside the model's vocabulary of %d",
                             i, (int)t, c->model->n_vocab);
            return INFER_ERR_FORMAT;
        }
    }
    for (i = 0; i < h.n_logits; i++) {
        float v;
        memcpy(&v, logits + (size_t)i * sizeof v, sizeof v);
        if (!isfinite(v)) {
            infer__set_error(err, INFER_ERR_FORMAT, "the state's logits hold a NaN or infinity (token %d)", i);
            return INFER_ERR_FORMAT;
        }
    }
    if (!infer__state_cache_finite(c->kv.type, cache, cache_bytes)) {
        infer__set_error(err, INFER_ERR_FORMAT, "the state's KV cache (%s) holds a NaN or infinity",
                         infer_type_name(c->kv.type));
        return INFER_ERR_FORMAT;
    }
    for (i = 0; (size_t)i < c->rs_slot; i++) {
        float v;
        memcpy(&v, cache + cache_bytes + (size_t)i * sizeof v, sizeof v);
        if (!isfinite(v)) {
            infer__set_error(err, INFER_ERR_FORMAT, "the state's recurrent layers hold a NaN or infinity");
            return INFER_ERR_FORMAT;
        }
    }

    if (h.n_logits && !infer__reserve_logits(c, 1)) {
        infer__set_error(err, INFER_ERR_NOMEM, "out of memory for logits");
        return INFER_ERR_NOMEM;
    }
    q = &c->seqs[seq];
    if (!infer__arr_setlen(q->tokens, h.n_past)) {
        infer__set_error(err, INFER_ERR_NOMEM, "out of memory");
        return INFER_ERR_NOMEM;
    }
    /* an empty sequence's tokens may be NULL: memcpy must not see it even for 0 bytes */
    if (h.n_past) memcpy(q->tokens, tokens, (size_t)h.n_past * sizeof(infer_token));
    /* the logits take row 0; every other sequence's row is gone */
    for (i = 0; i < c->n_seq; i++) c->seqs[i].logit_row = -1;
    stbds_arrsetlen(c->row_of, 0);
    if (h.n_logits) {
        memcpy(c->logits, logits, (size_t)h.n_logits * sizeof(float));
        q->logit_row = 0;
    }
    at = cache;
    for (l = 0; l < c->kv.n_layers; l++) {
        size_t a = INFER__KV_AT(&c->kv, seq, l);
        int n = INFER__MIN(c->kv.slots[l], h.hi), ok;
        ok = infer__kv_mem_copy(c->kv.gpu, c->kv.k[a], at, (size_t)n * c->kv.k_row, INFER_BACKEND_HOST_TO_DEVICE);
        at += (size_t)n * c->kv.k_row;
        if (c->kv.type == INFER_TYPE_F16)
            for (i = 0; i < c->kv.kv_dim && ok; i++, at += (size_t)n * 2)
                ok = infer__kv_mem_copy(c->kv.gpu, (uint16_t *)c->kv.v[a] + (size_t)i * c->kv.slots[l], at, (size_t)n * 2,
                                        INFER_BACKEND_HOST_TO_DEVICE);
        else if (ok)
            ok = infer__kv_mem_copy(c->kv.gpu, c->kv.v[a], at, (size_t)n * c->kv.k_row, INFER_BACKEND_HOST_TO_DEVICE),
            at += (size_t)n * c->kv.k_row;
        if (!ok) {
            stbds_arrsetlen(q->tokens, 0);
            q->n_past = q->hi = 0;
            q->logit_row = -1;
            infer__set_error(err, INFER_ERR_DEVICE, "writing the state into the KV cache on the device failed");
            return INFER_ERR_DEVICE;
        }
    }
    if (c->rs_slot) {
        q->rs_ckpt = -1;
        if (!infer__kv_mem_copy(c->kv.gpu, infer__rs_slot(c, seq, q->rs_cur), cache + cache_bytes,
                                c->rs_slot * sizeof(float), INFER_BACKEND_HOST_TO_DEVICE)) {
            stbds_arrsetlen(q->tokens, 0);
            q->n_past = q->hi = 0;
            q->logit_row = -1;
            infer__set_error(err, INFER_ERR_DEVICE, "writing the state into the recurrent layers on the device failed");
            return INFER_ERR_DEVICE;
        }
    }
    q->n_past = h.n_past;
    q->hi = h.hi;
    q->inexact = 0; /* (a state does not say whether it was shifted: taken as prefilled) */
    return INFER_OK;
bad:
    infer__set_error(err, INFER_ERR_FORMAT, "not a state saved by this version of infer.h (or truncated)");
    return INFER_ERR_FORMAT;
}

INFERDEF infer_status infer_seq_state_save_file(const infer_context *c, int seq, const char *path, infer_error *err) {
    size_t n = infer_seq_state_size(c, seq);
    void *buf;
    int ok;
    if (!n) {
        infer__set_error(err, INFER_ERR_ARG, "sequence %d has no state to save here", seq);
        return INFER_ERR_ARG;
    }
    buf = INFER_MALLOC(n);
    if (!buf) {
        infer__set_error(err, INFER_ERR_NOMEM, "out of memory for a state of %zu bytes", n);
        return INFER_ERR_NOMEM;
    }
    ok = infer_seq_state_save(c, seq, buf, n) == n;
    if (!ok) {
        INFER_FREE(buf);
        infer__set_error(err, INFER_ERR_DEVICE, "reading the KV cache from the device failed");
        return INFER_ERR_DEVICE;
    }
    ok = infer__file_write(path, buf, n, err); /* a regular file only */
    INFER_FREE(buf);
    return ok ? INFER_OK : INFER_ERR_IO;
}

INFERDEF infer_status infer_seq_state_load_file(infer_context *c, int seq, const char *path, infer_error *err) {
    infer__blob b;
    infer_status st;
    if (!infer__blob_open(&b, path, err)) return err ? err->code : INFER_ERR_IO;
    st = infer_seq_state_load(c, seq, b.data, b.size, err);
    infer__blob_close(&b);
    return st;
}

/* Sequences of a context: several in one batch against each alone, copy,
   removal with the keys rotated again, the context-full policies, state
   save and restore, the abort callback, embeddings, and one model shared
   by contexts on several threads. */
#define _XOPEN_SOURCE 700 /* mkstemp, pthreads, the implementation's clocks */
#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "infer_private.h"
#include "testutil.h"
#include "tests/status_calls.h"

static infer_model *load(const char *rel) {
    char path[1024];
    infer_error err;
    infer_model *m;
    if (!tu_have_shared()) cr_skip_test("../shared is absent: the sequence tests need its models");
    tu_shared_path(path, sizeof path, rel);
    m = infer_model_load(path, NULL, &err);
    cr_assert(m, "%s", err.msg);
    return m;
}

static infer_context *ctx(infer_model *m, int n_ctx, int n_seq, infer_full_policy policy, int n_keep) {
    infer_context_params p = infer_context_default_params();
    infer_error err;
    infer_context *c;
    p.n_ctx = n_ctx, p.n_seq = n_seq, p.full_policy = policy, p.n_keep = n_keep, p.n_threads = 2;
    c = infer_context_new(m, &p, &err);
    cr_assert(c, "%s", err.msg);
    return c;
}

static void tokens_of(const infer_model *m, const char *text, infer_token *out, int *n) {
    cr_assert_eq(infer_tokenize(m, text, strlen(text), out, 256, infer_model_add_bos(m), 0, n, NULL), INFER_OK);
    cr_assert(*n > 2 && *n <= 256);
}

#define MODEL "models/tinystories-656k-q8_0.gguf"

static infer_token argmax(const float *x, int n) {
    int best = 0, j;
    for (j = 1; j < n; j++)
        if (x[j] > x[best]) best = j;
    return best;
}

/* Two conversations interleaved in one batch, then stepped together, give
   the logits each gives alone. */
Test(sequence, batch_matches_alone) {
    infer_model *m = load(MODEL);
    infer_context *c = ctx(m, 128, 3, INFER_FULL_POLICY_STOP, 0), *alone = ctx(m, 128, 1, INFER_FULL_POLICY_STOP, 0);
    infer_token a[256], b[256], tok[512];
    int na, nb, seq[512], i, n = 0, step, nv = infer_model_n_vocab(m);
    infer_batch batch;
    infer_error err;
    float *ref = (float *)malloc(sizeof(float) * nv);
    tokens_of(m, "Once upon a time there was a little dog who liked to run.", a, &na);
    tokens_of(m, "Tom and Sue went to the park to play with a ball.", b, &nb);
    for (i = 0; i < na || i < nb; i++) { /* interleaved: runs are regrouped inside */
        if (i < na) tok[n] = a[i], seq[n++] = 0;
        if (i < nb) tok[n] = b[i], seq[n++] = 2;
    }
    memset(&batch, 0, sizeof batch);
    batch.n = n, batch.tokens = tok, batch.seq = seq;
    cr_assert_eq(infer_decode_batch(c, &batch, &err), INFER_OK, "%s", err.msg);
    cr_assert_eq(infer_seq_n_past(c, 0), na);
    cr_assert_eq(infer_seq_n_past(c, 1), 0);
    cr_assert_eq(infer_seq_n_past(c, 2), nb);
    cr_assert_null(infer_seq_logits(c, 1));
    for (step = 0; step < 4; step++) {
        infer_token next[2];
        int s2[2] = {0, 2};
        const infer_token *ts;
        double d;
        int k, nt;
        for (k = 0; k < 2; k++) {
            const infer_token *orig = k ? b : a;
            int no = k ? nb : na;
            infer_seq_truncate(alone, 0, 0, NULL, NULL);
            ts = infer_seq_tokens(c, s2[k], &nt);
            cr_assert_eq(nt, no + step);
            cr_assert_eq(memcmp(ts, orig, sizeof(infer_token) * no), 0);
            cr_assert_eq(infer_decode(alone, ts, nt, 0, &err), INFER_OK, "%s", err.msg);
            memcpy(ref, infer_context_logits(alone, -1), sizeof(float) * nv);
            d = tu_logit_diff(ref, infer_seq_logits(c, s2[k]), nv);
            cr_assert_lt(d, 1e-4, "sequence %d, step %d: %.2e of the range", s2[k], step, d);
            next[k] = argmax(ref, nv);
        }
        batch.n = 2, batch.tokens = next, batch.seq = s2;
        cr_assert_eq(infer_decode_batch(c, &batch, &err), INFER_OK, "%s", err.msg);
        cr_assert_not_null(infer_context_logits(c, 0));
        cr_assert_eq(infer_context_logits(c, 1), infer_seq_logits(c, 2));
    }
    free(ref);
    infer_context_free(alone);
    infer_context_free(c);
    infer_model_free(m);
}

/* At the end of attention's first run of keys: 8 tokens from position 506
   of a 4,096-token context (runs of 512 keys, two tiles) in one pass,
   split in two runs, give each token the logits it gets alone, to the bit
   (alone, the first six are unsplit passes, the last two split ones). A
   token whose keys all lie in the first run is summed as an unsplit pass
   sums it: what a draft verified across that boundary rests on. On the
   CPU (a GPU's passes are not bit for bit, as docs/cuda.md says). */
Test(sequence, split_pass_matches_unsplit_at_the_first_run) {
    infer_model_params mp = infer_model_default_params();
    infer_model *m;
    infer_context *one, *batch;
    char path[1024];
    infer_token tok[514];
    int i, nv;
    infer_error err;
    float *alone;
    if (!tu_have_shared()) cr_skip_test("../shared is absent: the sequence tests need its models");
    tu_shared_path(path, sizeof path, MODEL);
    mp.device = INFER_DEVICE_CPU;
    m = infer_model_load(path, &mp, &err);
    cr_assert(m, "%s", err.msg);
    one = ctx(m, 4096, 1, INFER_FULL_POLICY_STOP, 0), batch = ctx(m, 4096, 1, INFER_FULL_POLICY_STOP, 0);
    nv = infer_model_n_vocab(m);
    alone = (float *)malloc(sizeof(float) * nv * 8);
    for (i = 0; i < 514; i++) tok[i] = (infer_token)(1 + (i * 37 + i / 5) % (nv - 1));
    cr_assert_eq(infer_decode(one, tok, 506, 0, &err), INFER_OK, "%s", err.msg);
    cr_assert_eq(infer_decode(batch, tok, 506, 0, &err), INFER_OK, "%s", err.msg);
    for (i = 0; i < 8; i++) {
        cr_assert_eq(infer_decode(one, tok + 506 + i, 1, 0, &err), INFER_OK, "%s", err.msg);
        memcpy(alone + (size_t)i * nv, infer_context_logits(one, -1), sizeof(float) * nv);
    }
    cr_assert_eq(infer_decode(batch, tok + 506, 8, 1, &err), INFER_OK, "%s", err.msg);
    for (i = 0; i < 8; i++)
        cr_expect_eq(memcmp(alone + (size_t)i * nv, infer_context_logits(batch, i), sizeof(float) * nv), 0,
                     "position %d: alone and in a pass of 8 differ by %.3g of the range", 506 + i,
                     tu_logit_diff(alone + (size_t)i * nv, infer_context_logits(batch, i), nv));
    free(alone);
    infer_context_free(batch);
    infer_context_free(one);
    infer_model_free(m);
}

/* A copied sequence continues exactly as its source. */
Test(sequence, copy) {
    infer_model *m = load(MODEL);
    infer_context *c = ctx(m, 128, 2, INFER_FULL_POLICY_STOP, 0);
    infer_token a[256], t;
    int na, nv = infer_model_n_vocab(m), s1 = 1;
    infer_error err;
    float *ref = (float *)malloc(sizeof(float) * nv);
    infer_batch b;
    tokens_of(m, "One day a cat sat on a mat and looked at the sky.", a, &na);
    cr_assert_eq(infer_decode(c, a, na, 0, &err), INFER_OK, "%s", err.msg);
    cr_assert_eq(infer_seq_copy(c, 0, 1, &err), INFER_OK, "%s", err.msg);
    cr_assert_eq(infer_seq_n_past(c, 1), na);
    t = argmax(infer_context_logits(c, -1), nv);
    cr_assert_eq(infer_decode(c, &t, 1, 0, &err), INFER_OK, "%s", err.msg);
    memcpy(ref, infer_context_logits(c, -1), sizeof(float) * nv);
    memset(&b, 0, sizeof b);
    b.n = 1, b.tokens = &t, b.seq = &s1;
    cr_assert_eq(infer_decode_batch(c, &b, &err), INFER_OK, "%s", err.msg);
    cr_assert_eq(memcmp(ref, infer_seq_logits(c, 1), sizeof(float) * nv), 0);
    cr_assert_neq(infer_seq_copy(c, 0, 5, &err), INFER_OK);
    cr_assert(strstr(err.msg, "sequence 5"), "%s", err.msg);
    free(ref);
    infer_context_free(c);
    infer_model_free(m);
}

/* Layer 0's keys depend only on the token and its position: after removing
   positions from the middle, the keys that moved must be those a context
   that never saw the removed tokens computes (to the F16 cache's rounding
   of the rotation), and without the rotation they would not be. Returns
   the largest difference over the largest key. */
static double layer0_key_diff(const infer_context *x, const infer_context *y, int p0, int p1) {
    int dim = x->kv.kv_dim, p, i;
    float *kx = (float *)malloc(sizeof(float) * dim), *ky = (float *)malloc(sizeof(float) * dim);
    double worst = 0, top = 0;
    for (p = p0; p < p1; p++) {
        infer__traits(x->kv.type)->to_float(x->kv.k[INFER__KV_AT(&x->kv, 0, 0)] + (size_t)p * x->kv.k_row, kx, dim);
        infer__traits(y->kv.type)->to_float(y->kv.k[INFER__KV_AT(&y->kv, 0, 0)] + (size_t)p * y->kv.k_row, ky, dim);
        for (i = 0; i < dim; i++) {
            worst = fmax(worst, fabs((double)kx[i] - ky[i]));
            top = fmax(top, fabs((double)ky[i]));
        }
    }
    free(kx), free(ky);
    return worst / top;
}

Test(sequence, remove_rotates_keys) {
    infer_model *m = load(MODEL);
    infer_context *c = ctx(m, 128, 1, INFER_FULL_POLICY_STOP, 0), *fresh = ctx(m, 128, 1, INFER_FULL_POLICY_STOP, 0);
    infer_token a[256], kept[256];
    int na, nk = 0, i, l;
    infer_error err;
    double d_shift, d_none;
    tokens_of(m, "The little girl found a shiny red ball under the big green tree in the garden.", a, &na);
    for (i = 0; i < na; i++)
        if (i < 4 || i >= 9) kept[nk++] = a[i];
    cr_assert_eq(infer_decode(fresh, kept, nk, 0, &err), INFER_OK, "%s", err.msg);
    cr_assert_eq(infer_decode(c, a, na, 0, &err), INFER_OK, "%s", err.msg);
    cr_assert_eq(infer_seq_remove(c, 0, 4, 9, &err), INFER_OK, "%s", err.msg);
    cr_assert_eq(infer_seq_n_past(c, 0), nk);
    cr_assert_eq(memcmp(infer_seq_tokens(c, 0, NULL), kept, sizeof(infer_token) * nk), 0);
    d_shift = layer0_key_diff(c, fresh, 4, nk);
    cr_assert_lt(d_shift, 4e-3, "%g", d_shift);
    /* the same removal with the keys left unrotated, by hand */
    infer_seq_truncate(c, 0, 0, NULL, NULL);
    cr_assert_eq(infer_decode(c, a, na, 0, &err), INFER_OK, "%s", err.msg);
    for (l = 0; l < c->kv.n_layers; l++) {
        size_t at = INFER__KV_AT(&c->kv, 0, l);
        memmove(c->kv.k[at] + 4 * c->kv.k_row, c->kv.k[at] + 9 * c->kv.k_row, (size_t)(na - 9) * c->kv.k_row);
    }
    d_none = layer0_key_diff(c, fresh, 4, nk);
    cr_assert_gt(d_none, 20 * d_shift, "unrotated %g, rotated %g", d_none, d_shift);
    /* the shifted context goes on decoding */
    cr_assert_eq(infer_decode(c, a, 2, 0, &err), INFER_OK, "%s", err.msg);
    cr_assert_eq(infer_seq_remove(c, 0, 0, -1, &err), INFER_OK, "%s", err.msg);
    cr_assert_eq(infer_seq_n_past(c, 0), 0);
    cr_assert_neq(infer_seq_remove(c, 0, 3, 1, &err), INFER_OK);
    infer_context_free(fresh);
    infer_context_free(c);
    infer_model_free(m);
}

/* Stop refuses and leaves the sequence as it was; shift keeps n_keep and
   goes on for ever. */
Test(sequence, context_full_policies) {
    infer_model *m = load(MODEL);
    infer_context *stop = ctx(m, 16, 1, INFER_FULL_POLICY_STOP, 0), *shift = ctx(m, 16, 1, INFER_FULL_POLICY_SHIFT, 4);
    infer_token a[256], t;
    int na, i, nv = infer_model_n_vocab(m);
    infer_error err;
    tokens_of(m, "Once upon a time there was a girl.", a, &na);
    cr_assert_eq(infer_decode(stop, a, na, 0, &err), INFER_OK, "%s", err.msg);
    cr_assert_eq(infer_decode(shift, a, na, 0, &err), INFER_OK, "%s", err.msg);
    for (i = 0; i < 100; i++) {
        infer_status st;
        t = argmax(infer_context_logits(shift, -1), nv);
        cr_assert_eq(infer_decode(shift, &t, 1, 0, &err), INFER_OK, "step %d: %s", i, err.msg);
        cr_assert_leq(infer_seq_n_past(shift, 0), 16);
        cr_assert_eq(memcmp(infer_seq_tokens(shift, 0, NULL), a, 4 * sizeof(infer_token)), 0, "n_keep kept");
        t = 1;
        st = infer_decode(stop, &t, 1, 0, &err);
        if (na + i + 1 <= 16) {
            cr_assert_eq(st, INFER_OK, "%s", err.msg);
        } else {
            cr_assert_eq(st, INFER_ERR_CONTEXT_FULL);
            cr_assert(strstr(err.msg, "context is full"), "%s", err.msg);
            cr_assert_eq(infer_seq_n_past(stop, 0), 16);
        }
    }
    /* a batch larger than what shifting can free is refused */
    {
        infer_token many[20] = {0};
        cr_assert_eq(infer_decode(shift, many, 14, 0, &err), INFER_ERR_CONTEXT_FULL);
    }
    infer_context_free(stop);
    infer_context_free(shift);
    infer_model_free(m);
}

/* A restored state gives the same logits, bit for bit; a state from
   another model or context size is refused. */
Test(sequence, state_save_restore) {
    infer_model *m = load(MODEL), *other = load("models/stories260K.gguf");
    infer_context *c = ctx(m, 128, 2, INFER_FULL_POLICY_STOP, 0), *d = ctx(m, 128, 1, INFER_FULL_POLICY_STOP, 0);
    infer_context *small = ctx(m, 64, 1, INFER_FULL_POLICY_STOP, 0), *o = ctx(other, 128, 1, INFER_FULL_POLICY_STOP, 0);
    infer_token a[256], t;
    int na, nv = infer_model_n_vocab(m);
    infer_error err;
    size_t n;
    void *buf;
    float *ref = (float *)malloc(sizeof(float) * nv);
    char path[] = "/tmp/infer_state_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    tokens_of(m, "A bird flew over the house and sang a happy song.", a, &na);
    cr_assert_eq(infer_decode(c, a, na, 0, &err), INFER_OK, "%s", err.msg);
    n = infer_seq_state_size(c, 0);
    buf = malloc(n);
    cr_assert_eq(infer_seq_state_save(c, 0, buf, n - 1), 0);
    cr_assert_eq(infer_seq_state_save(c, 0, buf, n), n);
    cr_assert_eq(infer_seq_state_save_file(c, 0, path, &err), INFER_OK, "%s", err.msg);
    cr_assert_eq(infer_seq_state_load(d, 0, buf, n, &err), INFER_OK, "%s", err.msg);
    cr_assert_eq(infer_seq_n_past(d, 0), na);
    cr_assert_eq(memcmp(infer_seq_logits(d, 0), infer_context_logits(c, -1), sizeof(float) * nv), 0);
    t = argmax(infer_context_logits(c, -1), nv);
    cr_assert_eq(infer_decode(c, &t, 1, 0, &err), INFER_OK, "%s", err.msg);
    memcpy(ref, infer_context_logits(c, -1), sizeof(float) * nv);
    cr_assert_eq(infer_decode(d, &t, 1, 0, &err), INFER_OK, "%s", err.msg);
    cr_assert_eq(memcmp(ref, infer_context_logits(d, -1), sizeof(float) * nv), 0);
    /* from the file into another sequence of the first context */
    cr_assert_eq(infer_seq_state_load_file(c, 1, path, &err), INFER_OK, "%s", err.msg);
    cr_assert_eq(infer_seq_n_past(c, 1), na);
    /* refusals */
    cr_assert_eq(infer_seq_state_load(small, 0, buf, n, &err), INFER_ERR_ARG);
    cr_assert(strstr(err.msg, "context of 128 positions"), "%s", err.msg);
    cr_assert_eq(infer_seq_state_load(o, 0, buf, n, &err), INFER_ERR_ARG);
    cr_assert(strstr(err.msg, "another model"), "%s", err.msg);
    cr_assert_eq(infer_seq_state_load(d, 0, buf, n - 7, &err), INFER_ERR_FORMAT);
    cr_assert_eq(infer_seq_state_load_file(d, 0, "/nonexistent/state", &err), INFER_ERR_IO);
    remove(path);
    free(buf);
    free(ref);
    infer_context_free(c);
    infer_context_free(d);
    infer_context_free(small);
    infer_context_free(o);
    infer_model_free(other);
    infer_model_free(m);
}

static int abort_after(void *user) {
    int *left = (int *)user;
    return --*left < 0;
}

/* The abort callback stops a pass between layers: INFER_ERR_CANCELLED,
   nothing advanced, and the context goes on as if the call never was. */
Test(sequence, abort_between_layers) {
    infer_model *m = load(MODEL);
    infer_context *c = ctx(m, 128, 1, INFER_FULL_POLICY_STOP, 0), *fresh = ctx(m, 128, 1, INFER_FULL_POLICY_STOP, 0);
    infer_token a[256];
    int na, left = 2, calls, nv = infer_model_n_vocab(m);
    infer_error err;
    tokens_of(m, "The sun was warm and the children played by the river all day long.", a, &na);
    cr_assert_eq(infer_decode(c, a, 3, 0, &err), INFER_OK, "%s", err.msg);
    infer_context_set_abort(c, abort_after, &left);
    cr_assert_eq(infer_decode(c, a + 3, na - 3, 0, &err), INFER_ERR_CANCELLED);
    cr_assert(strstr(err.msg, "cancel"), "%s", err.msg);
    cr_assert_eq(infer_seq_n_past(c, 0), 3);
    /* asked once before the pass and once per layer: it stopped after two */
    cr_assert_eq(left, -1);
    left = 1000;
    cr_assert_eq(infer_decode(c, a + 3, na - 3, 0, &err), INFER_OK, "%s", err.msg);
    calls = 1000 - left;
    cr_assert_eq(calls, 1 + m->n_layers, "%d calls", calls);
    infer_context_set_abort(c, NULL, NULL);
    cr_assert_eq(infer_decode(fresh, a, na, 0, &err), INFER_OK, "%s", err.msg);
    cr_assert_eq(memcmp(infer_context_logits(fresh, -1), infer_context_logits(c, -1), sizeof(float) * nv), 0);
    infer_context_free(fresh);
    infer_context_free(c);
    infer_model_free(m);
}

/* Embeddings: unit length, deterministic, pooled as asked; the last
   token's unnormalised state times the output matrix is its logits. */
Test(sequence, embeddings) {
    infer_model *m = load(MODEL);
    infer_context *c = ctx(m, 128, 1, INFER_FULL_POLICY_STOP, 0);
    int dim = infer_model_n_embd(m), nv = infer_model_n_vocab(m), i, r, na;
    float *e1 = (float *)malloc(sizeof(float) * dim), *e2 = (float *)malloc(sizeof(float) * dim);
    float *row = (float *)malloc(sizeof(float) * dim), *logits = (float *)malloc(sizeof(float) * nv);
    const char *text = "The dog ran to the park.";
    infer_token a[256];
    infer_error err;
    double norm = 0, dot = 0;
    cr_assert_eq(infer_embed(c, 0, text, INFER_POOLING_MEAN, 1, e1, &err), INFER_OK, "%s", err.msg);
    for (i = 0; i < dim; i++) norm += (double)e1[i] * e1[i];
    cr_assert_float_eq(norm, 1.0, 1e-5);
    cr_assert_eq(infer_seq_n_past(c, 0), 0);
    cr_assert_eq(infer_embed(c, 0, text, INFER_POOLING_MEAN, 1, e2, &err), INFER_OK, "%s", err.msg);
    cr_assert_eq(memcmp(e1, e2, sizeof(float) * dim), 0);
    cr_assert_eq(infer_embed(c, 0, "A fish swam in the blue sea.", INFER_POOLING_MEAN, 1, e2, &err), INFER_OK, "%s", err.msg);
    for (i = 0; i < dim; i++) dot += (double)e1[i] * e2[i];
    cr_assert_lt(dot, 0.9999);
    cr_assert_eq(infer_embed(c, 0, text, INFER_POOLING_LAST, 0, e1, &err), INFER_OK, "%s", err.msg);
    tokens_of(m, text, a, &na);
    cr_assert_eq(infer_decode(c, a, na, 0, &err), INFER_OK, "%s", err.msg);
    for (r = 0; r < nv; r++) {
        const infer__tensor *w = c->model->output;
        double s = 0;
        infer__traits(w->type)->to_float((const uint8_t *)w->data + (size_t)r * infer__row_size(w->type, dim), row, dim);
        for (i = 0; i < dim; i++) s += (double)row[i] * e1[i];
        logits[r] = (float)s;
    }
    cr_assert_lt(tu_logit_diff(infer_context_logits(c, -1), logits, nv), 0.02);
    cr_assert_neq(infer_embed(c, 3, text, INFER_POOLING_MEAN, 1, e1, &err), INFER_OK);
    free(e1), free(e2), free(row), free(logits);
    infer_context_free(c);
    infer_model_free(m);
}

/* One model, two threads, a context each, generating at once: the same
   tokens as one after the other (ThreadSanitizer runs this too). */
typedef struct thread_job {
    infer_model *m;
    const char *prompt;
    infer_token out[32];
    int ok;
} thread_job;

static void *generate_job(void *arg) {
    thread_job *j = (thread_job *)arg;
    infer_context_params p = infer_context_default_params();
    infer_context *c;
    infer_token a[256];
    int n, i, nv = infer_model_n_vocab(j->m);
    p.n_ctx = 128, p.n_threads = 2;
    c = infer_context_new(j->m, &p, NULL);
    if (!c) return NULL;
    if (infer_tokenize(j->m, j->prompt, strlen(j->prompt), a, 256, 1, 0, &n, NULL) != INFER_OK) n = -1;
    j->ok = infer_decode(c, a, n, 0, NULL) == INFER_OK;
    for (i = 0; i < 32 && j->ok; i++) {
        j->out[i] = argmax(infer_context_logits(c, -1), nv);
        j->ok = infer_decode(c, &j->out[i], 1, 0, NULL) == INFER_OK;
    }
    infer_context_free(c);
    return NULL;
}

Test(sequence, shared_model_threads) {
    infer_model *m = load(MODEL);
    thread_job solo[2], both[2];
    pthread_t th[2];
    int i;
    memset(solo, 0, sizeof solo), memset(both, 0, sizeof both);
    for (i = 0; i < 2; i++) {
        solo[i].m = both[i].m = m;
        solo[i].prompt = both[i].prompt = i ? "The cat slept." : "A boy had a kite.";
        generate_job(&solo[i]);
        cr_assert(solo[i].ok);
    }
    for (i = 0; i < 2; i++) cr_assert_eq(pthread_create(&th[i], NULL, generate_job, &both[i]), 0);
    for (i = 0; i < 2; i++) pthread_join(th[i], NULL);
    for (i = 0; i < 2; i++) {
        cr_assert(both[i].ok);
        cr_assert_eq(memcmp(solo[i].out, both[i].out, sizeof solo[i].out), 0);
    }
    infer_model_free(m);
}

/* Contexts share the model's packed weights (the CPU's: a model on the
   GPU packs none): a context's own memory is its cache and scratch, far
   below the weights. */
Test(sequence, contexts_share_weights) {
    infer_model_params mp = infer_model_default_params();
    infer_model *m;
    infer_context *c1, *c2;
    infer_metrics a, b;
    char path[1024];
    infer_error err;
    if (!tu_have_shared()) cr_skip_test("../shared is absent: the sequence tests need its models");
    tu_shared_path(path, sizeof path, "models/synth-256-q4_0.gguf");
    mp.device = INFER_DEVICE_CPU;
    m = infer_model_load(path, &mp, &err);
    cr_assert(m, "%s", err.msg);
    c1 = ctx(m, 64, 1, INFER_FULL_POLICY_STOP, 0), c2 = ctx(m, 64, 1, INFER_FULL_POLICY_STOP, 0);
    a = infer_context_metrics(c1), b = infer_context_metrics(c2);
    if (m->cpu->packed_bytes == 0) { /* the plain C and NEON kernels read Q4_0 as it is */
        infer_context_free(c1);
        infer_context_free(c2);
        infer_model_free(m);
        cr_skip_test("this CPU's kernels pack no Q4_0 (plain C, NEON): no packed weights to share");
    }
    cr_assert_eq(a.context_bytes, b.context_bytes);
    /* synth-256 is small: its 3 MB of weights against a context of 64
       positions (1.6 MB on AVX2), most of it the logits' and the batch's
       scratch; a context that copied the weights would hold more than they */
    cr_assert_lt(a.context_bytes, m->cpu->packed_bytes, "%zu vs %zu", a.context_bytes, m->cpu->packed_bytes);
    cr_assert_eq(c1->plan[0].packed[0], c2->plan[0].packed[0]);
    infer_context_free(c1);
    infer_context_free(c2);
    infer_model_free(m);
}

/* The progress callback sees rising fractions up to 1 and can cancel. */
static int progress_log(float f, void *user) {
    float *last = (float *)user;
    cr_assert_geq(f, last[0]);
    last[0] = f;
    last[1] += 1;
    return last[2] > 0 && f >= last[2];
}

Test(sequence, load_progress) {
    char path[1024];
    float state[3] = {0, 0, 0};
    infer_model_params p = infer_model_default_params();
    infer_error err;
    infer_model *m;
    if (!tu_have_shared()) cr_skip_test("../shared is absent: the sequence tests need its models");
    tu_shared_path(path, sizeof path, "models/synth-256-q4_0.gguf");
    p.progress = progress_log, p.progress_user = state, p.device = INFER_DEVICE_CPU;
    m = infer_model_load(path, &p, &err);
    cr_assert(m, "%s", err.msg);
    cr_assert_eq(state[0], 1.0f);
    /* where the kernels repack weights (AVX-512), the repacking reports as
       it goes; where they read them as they are, load reports twice */
    cr_assert_gt(state[1], m->cpu->packed_bytes ? 2 : 1);
    {
        int repacks = m->cpu->packed_bytes > 0;
        infer_model_free(m);
        state[0] = state[1] = 0, state[2] = repacks ? 0.5f : 0.05f;
    }
    cr_assert_null(infer_model_load(path, &p, &err));
    cr_assert_eq(err.code, INFER_ERR_CANCELLED);
    cr_assert_lt(state[0], 1.0f);
}

/* The log-probability sum of gen after prompt, teacher-forced in seq 0. */
static double forced_sum(infer_context *c, const infer_token *prompt, int np, const infer_token *gen, int ng) {
    int nv = infer_model_n_vocab(c->model), i, j;
    double sum = 0;
    infer_seq_truncate(c, 0, 0, NULL, NULL);
    cr_assert_eq(infer_decode(c, prompt, np, 0, NULL), INFER_OK);
    for (i = 0; i < ng; i++) {
        const float *lg = infer_context_logits(c, -1);
        double mx = lg[0], z = 0;
        for (j = 1; j < nv; j++) mx = fmax(mx, lg[j]);
        for (j = 0; j < nv; j++) z += exp(lg[j] - mx);
        sum += lg[gen[i]] - mx - log(z);
        cr_assert_eq(infer_decode(c, &gen[i], 1, 0, NULL), INFER_OK);
    }
    return sum;
}

/* One beam is greedy decoding; four find a hypothesis whose score is what
   teacher forcing gives it, and no worse than the greedy one's. */
Test(sequence, beam_search) {
    infer_model *m = load(MODEL);
    infer_context *c = ctx(m, 128, 4, INFER_FULL_POLICY_STOP, 0);
    infer_beam_params bp = infer_beam_default_params();
    const char *prompt = "Once upon a time there was a little";
    infer_token pt[256], greedy[16], got[16];
    int np, i, n, nv = infer_model_n_vocab(m);
    float score;
    double g_sum;
    infer_error err;
    if (infer_tokenize(m, prompt, strlen(prompt), pt, 256, infer_model_add_bos(m), 1, &np, NULL) != INFER_OK) np = -1;
    cr_assert_eq(infer_decode(c, pt, np, 0, &err), INFER_OK, "%s", err.msg);
    for (i = 0; i < 16; i++) {
        greedy[i] = argmax(infer_context_logits(c, -1), nv);
        cr_assert_not(infer_model_is_eog(m, greedy[i]), "the greedy run ends early: pick another prompt");
        cr_assert_eq(infer_decode(c, &greedy[i], 1, 0, &err), INFER_OK, "%s", err.msg);
    }
    bp.n_beams = 1, bp.n_predict = 16, bp.length_penalty = 0;
    n = sc_beam_search(c, prompt, &bp, got, 16, &score, &err);
    cr_assert_eq(n, 16, "%s", err.msg);
    cr_assert_eq(memcmp(got, greedy, sizeof greedy), 0);
    g_sum = forced_sum(c, pt, np, greedy, 16);
    cr_assert_float_eq(score, g_sum, 1e-3 * fabs(g_sum));
    bp.n_beams = 4;
    n = sc_beam_search(c, prompt, &bp, got, 16, &score, &err);
    cr_assert(n > 0 && n <= 16, "%d: %s", n, err.msg);
    cr_assert_float_eq(score, forced_sum(c, pt, np, got, n), 1e-3 * fabs(score));
    if (n == 16) cr_assert_geq(score, g_sum - 1e-4);
    bp.n_beams = 5;
    cr_assert_eq(sc_beam_search(c, prompt, &bp, got, 16, &score, &err), -1);
    cr_assert(strstr(err.msg, "5 beams"), "%s", err.msg);
    infer_context_free(c);
    infer_model_free(m);
}

/* infer embed: JSON of unit vectors, one per line of a file; bad flags get
   one line and a failure. */
Test(sequence, cli_embed) {
    char cmd[2048], model[1024];
    char *out;
    int status;
    tu_json *j;
    const tu_json *data;
    double norm = 0;
    int i;
    FILE *f = fopen("/tmp/infer_embed_lines.txt", "w");
    if (!tu_have_shared()) cr_skip_test("../shared is absent: the sequence tests need its models");
    tu_shared_path(model, sizeof model, MODEL);
    cr_assert(f);
    fputs("The dog ran.\n\nA cat sat.\n", f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s embed -m %s -f /tmp/infer_embed_lines.txt", INFER_CLI_PATH, model);
    out = tu_run(cmd, &status);
    cr_assert_eq(status, 0);
    j = tu_json_parse(out);
    cr_assert(j, "%s", out);
    data = tu_json_get(j, "data");
    /* every line, the empty one too (output i is line i + 1) */
    cr_assert(data && data->n == 3, "%d embeddings for 3 lines", data ? data->n : -1);
    data = tu_json_get(&data->items[2], "embedding");
    cr_assert(data && data->n > 0);
    for (i = 0; i < data->n; i++) norm += data->items[i].num * data->items[i].num;
    cr_assert_float_eq(norm, 1.0, 1e-4);
    tu_json_free(j);
    free(out);
    snprintf(cmd, sizeof cmd, "%s embed -m %s -p hi --pooling median 2>&1", INFER_CLI_PATH, model);
    out = tu_run(cmd, &status);
    cr_assert_neq(status, 0);
    cr_assert(strstr(out, "--pooling") && strchr(out, '\n') == strrchr(out, '\n'), "%s", out);
    free(out);
    remove("/tmp/infer_embed_lines.txt");
}

/* run --beams N: one beam is greedy's text; run --prompt-cache FILE: a
   second run reuses the saved prompt and generates what a run without the
   cache does. */
Test(sequence, cli_beams_and_prompt_cache) {
    char cmd[2048], model[1024];
    char *greedy, *beam, *first, *second;
    const char *cache = "/tmp/infer_test_prompt_cache.bin";
    int st;
    if (!tu_have_shared()) cr_skip_test("../shared is absent: the sequence tests need its models");
    tu_shared_path(model, sizeof model, "models/stories260K.gguf");
    remove(cache);
    snprintf(cmd, sizeof cmd, "%s run -m %s -p 'Once upon a time' -n 16 --temp 0 2>/dev/null", INFER_CLI_PATH, model);
    greedy = tu_run(cmd, &st);
    cr_assert_eq(st, 0);
    snprintf(cmd, sizeof cmd, "%s run -m %s -p 'Once upon a time' -n 16 --beams 1 2>/dev/null", INFER_CLI_PATH, model);
    beam = tu_run(cmd, &st);
    cr_assert_eq(st, 0);
    cr_assert_str_eq(beam, greedy);
    free(beam);
    snprintf(cmd, sizeof cmd, "%s run -m %s -p 'Once upon a time' -n 16 --beams 3 --json 2>/dev/null", INFER_CLI_PATH, model);
    beam = tu_run(cmd, &st);
    cr_assert_eq(st, 0);
    cr_assert(strstr(beam, "\"score\":") && strstr(beam, "\"beams\":3"), "%s", beam);
    free(beam);
    snprintf(cmd, sizeof cmd, "%s run -m %s -p 'Once upon a time' --beams 2 --stop x 2>&1", INFER_CLI_PATH, model);
    beam = tu_run(cmd, &st);
    cr_assert_neq(st, 0);
    cr_assert(strstr(beam, "--beams"), "%s", beam);
    free(beam);
    snprintf(cmd, sizeof cmd, "%s run -m %s -p 'Once upon a time' -n 16 --temp 0 --prompt-cache %s 2>&1 >/dev/null",
             INFER_CLI_PATH, model, cache);
    first = tu_run(cmd, &st);
    cr_assert_eq(st, 0);
    cr_assert(strstr(first, "0 of "), "%s", first);
    free(first);
    snprintf(cmd, sizeof cmd, "%s run -m %s -p 'Once upon a time' -n 16 --temp 0 --prompt-cache %s 2>/dev/null",
             INFER_CLI_PATH, model, cache);
    second = tu_run(cmd, &st);
    cr_assert_eq(st, 0);
    cr_assert_str_eq(second, greedy);
    free(second);
    snprintf(cmd, sizeof cmd, "%s run -m %s -p 'Once upon a time' -n 4 --temp 0 --prompt-cache %s 2>&1 >/dev/null",
             INFER_CLI_PATH, model, cache);
    second = tu_run(cmd, &st);
    cr_assert(strstr(second, "reused") && !strstr(second, " 0 of "), "%s", second);
    free(second);
    free(greedy);
    remove(cache);
}

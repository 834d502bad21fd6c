/* decode.c - infer_decode and infer_decode_batch: a batch through forward passes into logits.
   The batch's tokens are ordered in runs of sequences, room is made in
   each sequence's cache (shifted, or refused, as the context's policy
   says), passes of up to n_batch tokens run on the model's device, and a
   failed pass puts the sequences back where the call found them. */
#include "context.h"

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
        if (c->rs && c->full_policy == INFER_FULL_POLICY_SHIFT) {
            infer__set_error(err, INFER_ERR_CONTEXT_FULL,
                             "the context is full (sequence %d, %d of %d positions) and cannot shift: %s's recurrent "
                             "layers would keep what a shift drops",
                             s, q->n_past, c->n_ctx, c->model->arch);
            return INFER_ERR_CONTEXT_FULL;
        }
        if (c->full_policy != INFER_FULL_POLICY_SHIFT || q->pending > c->n_ctx - c->n_keep) {
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

/* Puts the sequences back where the call found them (a pass failed): a
   recurrent state slot the passes wrote is not the sequence's (rs_cur is
   still the one the call began with), but no longer a checkpoint. */
static void infer__rollback(infer_context *c) {
    int s;
    for (s = 0; s < c->n_seq; s++) {
        infer__seq *q = &c->seqs[s];
        if (!q->pending) continue;
        q->n_past = q->start_past;
        stbds_arrsetlen(q->tokens, q->start_past);
        q->rs_ckpt = -1; /* a pass may have written that slot */
        q->rs_fresh = 0;
    }
}

/* The state slots group G's tokens read and write (recurrent layers):
   the call's first pass reads the sequence's slot and writes the other,
   so the one read stays the checkpoint of where the call began; later
   passes of the call go on in the other; a run from position 0 starts
   from zeros. */
static void infer__group_slots(infer_context *c, infer__group *G) {
    const infer__seq *q = &c->seqs[G->seq];
    G->rs_dst = 1 - q->rs_cur;
    G->rs_src = G->pos0 == 0 ? -1 : q->rs_fresh ? q->rs_cur : G->rs_dst;
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
    if (!infer__reserve_logits(c, INFER__MAX(n_rows, 1))) {
        infer__set_error(err, INFER_ERR_NOMEM, "out of memory for logits");
        return INFER_ERR_NOMEM;
    }
    for (s = 0; s < c->n_seq; s++) {
        c->seqs[s].start_past = c->seqs[s].n_past;
        c->seqs[s].logit_row = -1;
        c->seqs[s].rs_fresh = c->seqs[s].pending > 0;
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
                infer__group_slots(c, G);
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
            q->rs_fresh = 0;
            q->hi = INFER__MAX(q->hi, q->n_past);
        }
        if (n > c->n_batch && c->progress_fn && c->progress_fn((float)(done + nb) / (float)n, c->progress_user))
            st = INFER_ERR_CANCELLED;
    }
    if (st != INFER_OK) {
        if (st == INFER_ERR_CANCELLED) infer__set_error(err, st, "cancelled by the abort or progress callback");
        infer__rollback(c);
        stbds_arrsetlen(c->row_of, 0);
        return st;
    }
    for (s = 0; s < c->n_seq; s++) {
        infer__seq *q = &c->seqs[s];
        if (!q->pending) continue;
        q->logit_row = c->row_of[q->last];
        if (c->rs) { /* the slot written is the sequence's now; the one read, where the call began */
            q->rs_cur = 1 - q->rs_cur;
            q->rs_ckpt = q->start_past;
        }
    }
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

INFERDEF const float *infer_context_logits(const infer_context *c, int i) {
    int n = (int)stbds_arrlen(c->row_of);
    if (i < 0) i = n + i;
    if (i < 0 || i >= n || c->row_of[i] < 0) return NULL;
    return c->logits + (size_t)c->row_of[i] * c->model->n_vocab;
}
/* Deprecated in 0.25, removed in 0.26: use infer_context_logits. */
INFERDEF const float *infer_get_logits(const infer_context *c, int i) { return infer_context_logits(c, i); }

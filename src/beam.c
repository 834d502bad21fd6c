/* beam.c - beam search over the sequences of a context: each live beam is
   a sequence; a step scores every beam's best continuations, keeps the
   best n_beams, copies a parent's cache where it has several children,
   and decodes all the kept tokens in one batch. */
#include "context.h"

INFERDEF infer_beam_params infer_beam_default_params(void) {
    infer_beam_params p;
    p.n_beams = 4;
    p.length_penalty = 1.0f;
    p.n_predict = 64;
    return p;
}

typedef struct infer__beam {
    int seq;          /* the sequence holding its cache */
    int n;            /* tokens generated */
    double sum;       /* of their log-probabilities */
    infer_token *toks; /* n_predict of room */
} infer__beam;

typedef struct infer__beam_cand {
    int parent;
    infer_token tok;
    double sum;
} infer__beam_cand;

static int infer__beam_cand_desc(const void *a, const void *b) {
    const infer__beam_cand *x = (const infer__beam_cand *)a, *y = (const infer__beam_cand *)b;
    if (x->sum != y->sum) return x->sum < y->sum ? 1 : -1;
    if (x->parent != y->parent) return x->parent - y->parent;
    return x->tok - y->tok;
}

/* The k most probable tokens of logits as candidates after parent, with
   their log-probabilities added to its sum. */
static void infer__beam_top(const float *logits, int n_vocab, int k, int parent, double base, infer__beam_cand *out) {
    double mx = logits[0], z = 0;
    int i, j, n = 0;
    for (i = 1; i < n_vocab; i++) mx = logits[i] > mx ? logits[i] : mx;
    for (i = 0; i < n_vocab; i++) z += infer__exp((double)logits[i] - mx);
    for (i = 0; i < n_vocab; i++) { /* insertion into a list of k, best first */
        float v = logits[i];
        if (n == k && v <= logits[out[k - 1].tok]) continue;
        for (j = n < k ? n++ : k - 1; j > 0 && logits[out[j - 1].tok] < v; j--) out[j] = out[j - 1];
        out[j].tok = i;
    }
    for (j = 0; j < n; j++) {
        out[j].parent = parent;
        out[j].sum = base + ((double)logits[out[j].tok] - mx - infer__log(z));
    }
}

static int infer__beam_search(infer_context *c, const char *prompt, const infer_beam_params *p, infer_token *out,
                              int max, float *score, infer_error *err) {
    const infer_model *m;
    infer_beam_params d = infer_beam_default_params();
    infer__beam *live = NULL, *next = NULL;
    infer__beam_cand *cand = NULL;
    infer_token *ptoks = NULL, *store = NULL, *best = NULL, *step_tok = NULL;
    int *step_seq = NULL, *claimed = NULL, *free_seq = NULL;
    int B, np, n_live = 1, n_finished = 0, best_n = -1, i, j, s, result = -1;
    double best_score = -INFINITY;
    infer_batch batch;
    if (!p) p = &d;
    B = p->n_beams;
    if (!c || !prompt || p->n_predict < 1 || B < 1 || B > c->n_seq || max < 0 || (max && !out)) {
        infer__set_error(err, INFER_ERR_ARG, "beam search of %d beams needs a context of as many sequences (it has %d)",
                         B, c ? c->n_seq : 0);
        return -1;
    }
    m = c->model;
    if (infer_tokenize(m, prompt, strlen(prompt), NULL, 0, infer_model_add_bos(m), 1, &np, err) != INFER_OK) return -1;
    if (np <= 0) {
        infer__set_error(err, INFER_ERR_ARG, "the prompt is empty and the model adds no BOS token");
        return -1;
    }
    live = (infer__beam *)infer__calloc((size_t)B, sizeof *live);
    next = (infer__beam *)infer__calloc((size_t)B, sizeof *next);
    cand = (infer__beam_cand *)infer__calloc((size_t)B * B, sizeof *cand);
    ptoks = (infer_token *)INFER_MALLOC((size_t)np * sizeof *ptoks);
    store = (infer_token *)INFER_MALLOC((size_t)2 * B * p->n_predict * sizeof *store);
    best = (infer_token *)INFER_MALLOC((size_t)p->n_predict * sizeof *best);
    step_tok = (infer_token *)INFER_MALLOC((size_t)B * sizeof *step_tok);
    step_seq = (int *)INFER_MALLOC((size_t)B * sizeof *step_seq);
    claimed = (int *)infer__calloc((size_t)B, sizeof *claimed);
    free_seq = (int *)INFER_MALLOC((size_t)B * sizeof *free_seq);
    if (!live || !next || !cand || !ptoks || !store || !best || !step_tok || !step_seq || !claimed || !free_seq) {
        infer__set_error(err, INFER_ERR_NOMEM, "out of memory for a beam search of %d beams", B);
        goto done;
    }
    for (i = 0; i < B; i++) {
        live[i].toks = store + (size_t)i * p->n_predict;
        next[i].toks = store + (size_t)(B + i) * p->n_predict;
        infer_seq_truncate(c, i, 0, NULL, NULL);
    }
    if (infer_tokenize(m, prompt, strlen(prompt), ptoks, np, infer_model_add_bos(m), 1, NULL, err) != INFER_OK ||
        infer_decode(c, ptoks, np, 0, err) != INFER_OK) goto done;
    live[0].seq = 0, live[0].n = 0, live[0].sum = 0;
    memset(&batch, 0, sizeof batch);
    batch.tokens = step_tok, batch.seq = step_seq;
    while (n_live > 0 && n_finished < B) {
        int n_cand = 0, n_next = 0, n_free = 0;
        for (i = 0; i < n_live; i++) {
            const float *lg = infer_seq_logits(c, live[i].seq);
            infer__beam_top(lg, m->n_vocab, B, i, live[i].sum, cand + n_cand);
            n_cand += INFER__MIN(B, m->n_vocab);
        }
        qsort(cand, (size_t)n_cand, sizeof *cand, infer__beam_cand_desc);
        for (j = 0; j < n_cand && n_next < B; j++) {
            const infer__beam *par = &live[cand[j].parent];
            int eog = infer_model_is_eog(m, cand[j].tok), len = par->n + 1;
            if (eog || len == p->n_predict) { /* a finished hypothesis */
                double sc = cand[j].sum / infer__pow((double)len, (double)p->length_penalty);
                int keep = eog ? par->n : len;
                if (sc > best_score) {
                    best_score = sc;
                    best_n = keep;
                    memcpy(best, par->toks, (size_t)par->n * sizeof *best);
                    if (!eog) best[par->n] = cand[j].tok;
                }
                n_finished++;
                continue;
            }
            next[n_next].n = len;
            next[n_next].sum = cand[j].sum;
            next[n_next].seq = cand[j].parent; /* the parent for now; its sequence below */
            memcpy(next[n_next].toks, par->toks, (size_t)par->n * sizeof *best);
            next[n_next].toks[par->n] = cand[j].tok;
            n_next++;
        }
        /* sequences: a parent's first child takes its cache; the others get
           copies in sequences no kept beam uses */
        for (i = 0; i < B; i++) claimed[i] = 0;
        for (i = 0; i < n_next; i++) claimed[live[next[i].seq].seq] = 1;
        for (s = 0; s < B; s++)
            if (!claimed[s]) free_seq[n_free++] = s;
        for (i = 0; i < B; i++) claimed[i] = 0;
        for (i = 0; i < n_next; i++) {
            int ps = live[next[i].seq].seq;
            if (!claimed[ps]) {
                claimed[ps] = 1;
                next[i].seq = ps;
            } else {
                next[i].seq = free_seq[--n_free];
                if (infer_seq_copy(c, ps, next[i].seq, err) != INFER_OK) goto done;
            }
            step_tok[i] = next[i].toks[next[i].n - 1];
            step_seq[i] = next[i].seq;
        }
        for (i = 0; i < n_next; i++) { /* swap the beams' buffers */
            infer__beam t = live[i];
            live[i] = next[i];
            next[i] = t;
        }
        n_live = n_next;
        if (!n_live) break;
        batch.n = n_live;
        if (infer_decode_batch(c, &batch, err) != INFER_OK) goto done;
    }
    if (best_n < 0) {
        infer__set_error(err, INFER_ERR_ARG, "beam search finished no hypothesis");
        goto done;
    }
    if (out) memcpy(out, best, (size_t)INFER__MIN(best_n, max) * sizeof *out);
    if (score) *score = (float)best_score;
    result = best_n;
done:
    INFER_FREE(live);
    INFER_FREE(next);
    INFER_FREE(cand);
    INFER_FREE(ptoks);
    INFER_FREE(store);
    INFER_FREE(best);
    INFER_FREE(step_tok);
    INFER_FREE(step_seq);
    INFER_FREE(claimed);
    INFER_FREE(free_seq);
    return result;
}

INFERDEF infer_status infer_beam_search(infer_context *c, const char *prompt, const infer_beam_params *p,
                                        infer_token *out, int max, int *n_tokens, float *score, infer_error *err) {
    infer_error e;
    int n;
    if (n_tokens) *n_tokens = 0;
    e.code = INFER_OK;
    e.msg[0] = 0;
    if ((n = infer__beam_search(c, prompt, p, out, max, score, &e)) < 0) {
        if (e.code == INFER_OK) infer__set_error(&e, INFER_ERR_ARG, "beam search: failed");
        if (err) *err = e;
        return e.code;
    }
    if (n_tokens) *n_tokens = n;
    return INFER_OK;
}

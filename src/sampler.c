/* sampler.c - choosing the next token from logits: logit bias, repetition
   penalty, the grammar's mask, then greedy, or top-k -> top-p -> min-p ->
   temperature -> a draw from a seeded RNG (the order llama.cpp's default
   chain uses). */
#include "internal.h"

/* grammar.c's side (declared here too, so this part compiles by itself) */
struct infer__grammar;
static struct infer__grammar *infer__grammar_new(const infer_model *model, int n_vocab, const char *gbnf,
                                                 const char *root, infer_error *err);
static void infer__grammar_free(struct infer__grammar *G);
static void infer__grammar_reset(struct infer__grammar *G);
static int infer__grammar_done(const struct infer__grammar *G);
static int infer__grammar_allows(struct infer__grammar *G, infer_token t);
static void infer__grammar_accept(struct infer__grammar *G, infer_token t);
static int infer__grammar_accept_text(struct infer__grammar *G, const char *text, size_t n);
static int infer__grammar_mask(struct infer__grammar *G, unsigned char *allowed);
static void infer__grammar_snapshot(struct infer__grammar *G);
static int infer__grammar_mask_snapshot(const struct infer__grammar *G, unsigned char *allowed);
static int infer__grammar_nomem(const struct infer__grammar *G);

typedef struct infer__cand {
    infer_token id;
    float logit;
} infer__cand;

struct infer_sampler {
    infer_sampler_params p;
    int n_vocab;
    infer__cand *cand;   /* n_vocab */
    infer__cand *tmp;    /* n_vocab: the sort's other half */
    int n_cand;          /* cand[0..n_cand): the last sample's distribution (0: none) */
    int mask_later;      /* cand is not masked yet: the grammar's snapshot says what it allows */
    infer_token *recent; /* ring of the last repeat_last_n accepted tokens */
    int n_recent, recent_pos;
    uint64_t rng;
    infer_token *bias_id;
    float *bias;
    int n_bias;
    int none_why;         /* why the last sample chose nothing: INFER__NONE_* */
    struct infer__grammar *grammar;
    struct infer__grammar *waiting; /* a lazy grammar not yet applied (infer__sampler_grammar_wait) */
    unsigned char *allowed; /* n_vocab, with a grammar */
};

INFERDEF infer_sampler_params infer_sampler_default_params(void) {
    infer_sampler_params p;
    p.temperature = 0.8f;
    p.top_k = 40;
    p.top_p = 0.95f;
    p.min_p = 0.05f;
    p.repeat_penalty = 1.0f;
    p.repeat_last_n = 64;
    p.seed = 42;
    return p;
}

INFERDEF infer_sampler *infer_sampler_new(const infer_sampler_params *p, int n_vocab, infer_error *err) {
    infer_sampler *s;
    infer_sampler_params d = infer_sampler_default_params();
    if (n_vocab <= 0) {
        infer__set_error(err, INFER_ERR_ARG, "sampler: a vocabulary of %d tokens", n_vocab);
        return NULL;
    }
    s = (infer_sampler *)infer__calloc(1, sizeof *s);
    if (!s) {
        infer__set_error(err, INFER_ERR_NOMEM, "sampler: out of memory");
        return NULL;
    }
    s->p = p ? *p : d;
    if (s->p.repeat_last_n < 0) s->p.repeat_last_n = 0;
    s->n_vocab = n_vocab;
    s->cand = (infer__cand *)infer__calloc((size_t)n_vocab, sizeof(infer__cand));
    s->tmp = (infer__cand *)infer__calloc((size_t)n_vocab, sizeof(infer__cand));
    s->recent = (infer_token *)infer__calloc((size_t)(s->p.repeat_last_n ? s->p.repeat_last_n : 1), sizeof(infer_token));
    s->rng = s->p.seed;
    if (!s->cand || !s->tmp || !s->recent) {
        infer_sampler_free(s);
        infer__set_error(err, INFER_ERR_NOMEM, "sampler: out of memory for a vocabulary of %d tokens", n_vocab);
        return NULL;
    }
    return s;
}

INFERDEF void infer_sampler_free(infer_sampler *s) {
    if (!s) return;
    INFER_FREE(s->cand);
    INFER_FREE(s->tmp);
    INFER_FREE(s->recent);
    INFER_FREE(s->bias_id);
    INFER_FREE(s->bias);
    infer__grammar_free(s->grammar);
    infer__grammar_free(s->waiting);
    INFER_FREE(s->allowed);
    INFER_FREE(s);
}

INFERDEF void infer_sampler_accept_prompt(infer_sampler *s, infer_token t) {
    if (!s->p.repeat_last_n) return;
    s->recent[s->recent_pos] = t;
    s->recent_pos = (s->recent_pos + 1) % s->p.repeat_last_n;
    if (s->n_recent < s->p.repeat_last_n) s->n_recent++;
}

INFERDEF void infer_sampler_accept(infer_sampler *s, infer_token t) {
    infer_sampler_accept_prompt(s, t);
    if (s->grammar) infer__grammar_accept(s->grammar, t);
}

INFERDEF void infer_sampler_reset(infer_sampler *s) {
    s->n_recent = 0;
    s->recent_pos = 0;
    s->n_cand = 0;
    s->mask_later = 0;
    if (s->grammar) infer__grammar_reset(s->grammar);
    if (s->waiting) infer__grammar_reset(s->waiting);
}

INFERDEF infer_status infer_sampler_set_logit_bias(infer_sampler *s, const infer_token *ids, const float *bias, int n,
                                                   infer_error *err) {
    if (!s) {
        infer__set_error(err, INFER_ERR_ARG, "logit bias: no sampler");
        return INFER_ERR_ARG;
    }
    INFER_FREE(s->bias_id);
    INFER_FREE(s->bias);
    s->bias_id = NULL;
    s->bias = NULL;
    s->n_bias = 0;
    if (n <= 0 || !ids || !bias) return INFER_OK;
    s->bias_id = (infer_token *)INFER_MALLOC((size_t)n * sizeof *ids);
    s->bias = (float *)INFER_MALLOC((size_t)n * sizeof *bias);
    if (!s->bias_id || !s->bias) {
        INFER_FREE(s->bias_id);
        INFER_FREE(s->bias);
        s->bias_id = NULL;
        s->bias = NULL;
        infer__set_error(err, INFER_ERR_NOMEM, "logit bias: out of memory for %d tokens", n);
        return INFER_ERR_NOMEM;
    }
    memcpy(s->bias_id, ids, (size_t)n * sizeof *ids);
    memcpy(s->bias, bias, (size_t)n * sizeof *bias);
    s->n_bias = n;
    return INFER_OK;
}

INFERDEF infer_status infer_sampler_set_grammar(infer_sampler *s, const infer_model *m, const char *gbnf,
                                                const char *root, infer_error *err) {
    infer_error e;
    struct infer__grammar *g;
    if (!s) {
        infer__set_error(err, INFER_ERR_ARG, "grammar: no sampler");
        return INFER_ERR_ARG;
    }
    infer__grammar_free(s->grammar);
    infer__grammar_free(s->waiting);
    s->grammar = s->waiting = NULL;
    s->mask_later = 0;
    s->n_cand = 0; /* the last distribution was another grammar's */
    if (!gbnf) return INFER_OK;
    if (!m) {
        infer__set_error(err, INFER_ERR_ARG, "grammar: no model given (the tokens' text comes from it)");
        return INFER_ERR_ARG;
    }
    if (infer_model_n_vocab(m) != s->n_vocab) {
        infer__set_error(err, INFER_ERR_ARG, "grammar: the model has %d tokens but the sampler was made for %d",
                         infer_model_n_vocab(m), s->n_vocab);
        return INFER_ERR_ARG;
    }
    if (!s->allowed && !(s->allowed = (unsigned char *)INFER_MALLOC((size_t)s->n_vocab))) {
        infer__set_error(err, INFER_ERR_NOMEM, "grammar: out of memory");
        return INFER_ERR_NOMEM;
    }
    memset(&e, 0, sizeof e);
    g = infer__grammar_new(m, s->n_vocab, gbnf, root ? root : "root", &e);
    if (!g) {
        if (err) *err = e;
        return e.code ? e.code : INFER_ERR_ARG;
    }
    s->grammar = g;
    return INFER_OK;
}

/* A lazy grammar (request.c's grammar_triggers): the grammar set waits,
   not applied, until infer__sampler_grammar_wake. */
static void infer__sampler_grammar_wait(infer_sampler *s) {
    if (!s->grammar) return;
    s->waiting = s->grammar;
    s->grammar = NULL;
    s->mask_later = 0;
}

/* The waiting grammar applies from now on, having first read text (the
   trigger and what followed it). 1, or 0 where it refuses text: it is then
   dropped, and sampling stays free. */
static int infer__sampler_grammar_wake(infer_sampler *s, const char *text, size_t n) {
    struct infer__grammar *g = s->waiting;
    if (!g) return 0;
    s->waiting = NULL;
    if (!infer__grammar_accept_text(g, text, n)) {
        infer__grammar_free(g);
        return 0;
    }
    s->grammar = g;
    s->mask_later = 0;
    s->n_cand = 0;
    return 1;
}

/* Whether the grammar ran out of memory (request.c ends a request so). */
static int infer__sampler_nomem(const infer_sampler *s) { return s->grammar && infer__grammar_nomem(s->grammar); }
/* the matcher's limit that stopped the grammar (a one-line message), or NULL
   (then infer__sampler_nomem means memory) */
static const char *infer__sampler_grammar_limit(const infer_sampler *s) {
    return s->grammar ? infer__grammar_limit(s->grammar) : NULL;
}
static int infer__sampler_none_why(const infer_sampler *s) { return s->none_why; }

INFERDEF int infer_sampler_grammar_done(const infer_sampler *s) { return !s->grammar || infer__grammar_done(s->grammar); }

/* splitmix64: small, fast, and the same sequence on every platform. */
static uint64_t infer__rng_next(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double infer__rng_uniform(uint64_t *state) { return (double)(infer__rng_next(state) >> 11) * (1.0 / 9007199254740992.0); }

/* The logit as an unsigned key that orders as infer__cand_desc: larger
   logits first (-0 as +0, which compare equal; a nan by its bits). */
static uint32_t infer__cand_key(float f) {
    uint32_t u;
    if (f == 0) f = 0;
    memcpy(&u, &f, sizeof u);
    u = (u & 0x80000000u) ? ~u : u | 0x80000000u; /* ascending */
    return ~u;
}

/* A total order (by key, then id), nan included: glibc's qsort (a merge
   sort) and Microsoft's (a quicksort) give the same order, and it is the
   radix sort's. */
static int infer__cand_desc(const void *a, const void *b) {
    const infer__cand *x = (const infer__cand *)a, *y = (const infer__cand *)b;
    uint32_t kx = infer__cand_key(x->logit), ky = infer__cand_key(y->logit);
    if (kx != ky) return kx < ky ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id); /* ties by id */
}

/* Sorts c[0..n) into the order qsort with infer__cand_desc gives (ties
   come in ascending id order here, and stay so), in linear time: a stable
   radix sort on the keys, 11 bits a pass. A full vocabulary's qsort took
   several milliseconds a token. */
static void infer__cand_sort(infer__cand *c, infer__cand *tmp, int n) {
    int count[2048], shift, i;
    infer__cand *src = c, *dst = tmp, *t;
    if (n < 64) {
        qsort(c, (size_t)n, sizeof *c, infer__cand_desc);
        return;
    }
    for (shift = 0; shift < 32; shift += 11) {
        int sum = 0;
        memset(count, 0, sizeof count);
        for (i = 0; i < n; i++) count[(infer__cand_key(src[i].logit) >> shift) & 2047]++;
        for (i = 0; i < 2048; i++) {
            int k = count[i];
            if (k == n) break; /* one digit for all: this pass changes nothing */
            count[i] = sum;
            sum += k;
        }
        if (i < 2048) continue;
        for (i = 0; i < n; i++) dst[count[(infer__cand_key(src[i].logit) >> shift) & 2047]++] = src[i];
        t = src, src = dst, dst = t;
    }
    if (src != c) memcpy(c, src, (size_t)n * sizeof *c);
}

/* Greedy, or top-k -> top-p -> min-p -> temperature -> a draw, from the
   n candidates c (reordered). */
/* -1 when every candidate is banned (-INFINITY): there is nothing to draw,
   and drawing one of them anyway would generate a banned token. */
static infer_token infer__sampler_draw(infer_sampler *s, infer__cand *c, int n) {
    int i, best = 0;
    double sum, r, acc;
    float mx;
    if (s->p.temperature <= 0) {
        for (i = 1; i < n; i++)
            if (c[i].logit > c[best].logit) best = i;
        return c[best].logit > -INFINITY ? c[best].id : -1;
    }
    infer__cand_sort(c, s->tmp, n);
    if (!(c[0].logit > -INFINITY)) return -1;
    if (s->p.top_k > 0 && s->p.top_k < n) n = s->p.top_k;
    mx = c[0].logit;
    if (s->p.top_p < 1.0f) {
        sum = 0;
        for (i = 0; i < n; i++) sum += infer__exp((double)c[i].logit - mx);
        acc = 0;
        for (i = 0; i < n; i++) {
            acc += infer__exp((double)c[i].logit - mx) / sum;
            if (acc >= s->p.top_p) {
                n = i + 1;
                break;
            }
        }
    }
    if (s->p.min_p > 0) {
        /* keep p >= min_p * p_max, i.e. logit >= max + log(min_p) */
        float cut = mx + infer__logf(s->p.min_p);
        for (i = 1; i < n; i++)
            if (c[i].logit < cut) {
                n = i;
                break;
            }
    }
    sum = 0;
    for (i = 0; i < n; i++) sum += infer__exp(((double)c[i].logit - mx) / s->p.temperature);
    r = infer__rng_uniform(&s->rng) * sum;
    acc = 0;
    for (i = 0; i < n; i++) {
        acc += infer__exp(((double)c[i].logit - mx) / s->p.temperature);
        if (r < acc) return c[i].id;
    }
    return c[n - 1].id;
}

INFERDEF infer_token infer_sampler_sample(infer_sampler *s, const float *logits) {
    infer__cand *c = s->cand;
    int n = s->n_vocab, i, k;
    infer_token tok;
    for (i = 0; i < n; i++) {
        c[i].id = i;
        c[i].logit = logits[i];
    }
    for (i = 0; i < s->n_bias; i++)
        if (s->bias_id[i] >= 0 && s->bias_id[i] < n) c[s->bias_id[i]].logit += s->bias[i];
    if (s->p.repeat_penalty != 1.0f && s->p.repeat_penalty > 0) {
        /* each distinct recent token is penalised once */
        for (i = 0; i < s->n_recent; i++) {
            infer_token t = s->recent[i];
            int j, seen = 0;
            if (t < 0 || t >= n) continue;
            for (j = 0; j < i; j++) seen |= s->recent[j] == t;
            if (seen) continue;
            c[t].logit = c[t].logit > 0 ? c[t].logit / s->p.repeat_penalty : c[t].logit * s->p.repeat_penalty;
        }
    }
    s->n_cand = n;
    s->mask_later = 0;
    s->none_why = INFER__NONE_BANNED;
    if (!s->grammar) return infer__sampler_draw(s, c, n);
    /* The cheap way first: a token drawn without the grammar that it
       allows is taken (its mask is made only if top_probs asks). */
    infer__grammar_snapshot(s->grammar);
    tok = infer__sampler_draw(s, c, n);
    if (tok >= 0 && infer__grammar_allows(s->grammar, tok) && !infer__grammar_nomem(s->grammar)) {
        s->mask_later = 1;
        return tok;
    }
    /* Else the draw again from what the grammar allows (banned tokens out) */
    infer__grammar_mask(s->grammar, s->allowed);
    if (infer__grammar_nomem(s->grammar)) {
        s->n_cand = 0;
        s->none_why = INFER__NONE_NOMEM;
        return -1;
    }
    s->none_why = INFER__NONE_GRAMMAR;
    for (i = k = 0; i < n; i++)
        if (s->allowed[c[i].id]) {
            s->none_why = INFER__NONE_BANNED_HERE; /* the grammar allows some */
            if (c[i].logit > -INFINITY) c[k++] = c[i];
        }
    s->n_cand = k;
    if (!k) return -1;
    return infer__sampler_draw(s, c, k);
}

INFERDEF float infer_sampler_token_prob(const infer_sampler *s, infer_token t) {
    const infer__cand *c = s->cand;
    unsigned char *mask = NULL;
    int i, m = s->n_cand;
    float mx = -INFINITY, lt = -INFINITY;
    double sum = 0;
    if (m <= 0) return 0;
    if (s->mask_later && infer__grammar_mask_snapshot(s->grammar, mask = s->allowed) < 0) return -1;
    for (i = 0; i < m; i++)
        if ((!mask || mask[c[i].id]) && c[i].logit > mx) mx = c[i].logit;
    if (mx == -INFINITY) return 0;
    for (i = 0; i < m; i++)
        if (!mask || mask[c[i].id]) {
            sum += infer__exp((double)c[i].logit - mx);
            if (c[i].id == t) lt = c[i].logit;
        }
    return lt == -INFINITY ? 0.0f : (float)(infer__exp((double)lt - mx) / sum);
}

static int infer__sampler_top_probs(const infer_sampler *s, infer_token_prob *out, int n) {
    const infer__cand *c = s->cand;
    unsigned char *mask = NULL;
    infer__cand *top, small[64];
    int i, m = s->n_cand, k = 0;
    float mx = -INFINITY;
    double sum = 0;
    if (!out || n <= 0 || m <= 0) return 0;
    /* (the grammar's mask goes in s->allowed, which the next sample makes
       afresh where it needs it) */
    if (s->mask_later && infer__grammar_mask_snapshot(s->grammar, mask = s->allowed) < 0) return -1;
    for (i = 0; i < m; i++)
        if ((!mask || mask[c[i].id]) && c[i].logit > mx) mx = c[i].logit;
    if (mx == -INFINITY) return 0;
    n = INFER__MIN(n, m);
    top = n <= 64 ? small : (infer__cand *)INFER_MALLOC((size_t)n * sizeof *top);
    if (!top) return -1;
    /* the n best: by insertion for a few (what a display asks for), else
       by sorting them all */
    if (n > 64) {
        infer__cand *all = (infer__cand *)INFER_MALLOC((size_t)m * sizeof *all);
        if (!all) {
            INFER_FREE(top); /* (n > 64: on the heap) */
            return -1;
        }
        for (i = 0; i < m; i++)
            if (!mask || mask[c[i].id]) {
                sum += infer__exp((double)c[i].logit - mx);
                all[k++] = c[i];
            }
        qsort(all, (size_t)k, sizeof *all, infer__cand_desc);
        k = INFER__MIN(k, n);
        memcpy(top, all, (size_t)k * sizeof *top);
        INFER_FREE(all);
    } else {
        for (i = 0; i < m; i++) {
            int j;
            if (mask && !mask[c[i].id]) continue;
            sum += infer__exp((double)c[i].logit - mx);
            if (k == n && infer__cand_desc(&c[i], &top[k - 1]) >= 0) continue;
            j = k < n ? k++ : n - 1;
            while (j > 0 && infer__cand_desc(&c[i], &top[j - 1]) < 0) {
                top[j] = top[j - 1];
                j--;
            }
            top[j] = c[i];
        }
    }
    for (i = 0; i < k; i++) {
        out[i].id = top[i].id;
        out[i].p = (float)(infer__exp((double)top[i].logit - mx) / sum);
    }
    if (top != small) INFER_FREE(top);
    return k;
}

INFERDEF infer_status infer_sampler_top_probs(const infer_sampler *s, infer_token_prob *out, int n, int *n_probs,
                                              infer_error *err) {
    int k;
    if (n_probs) *n_probs = 0;
    if (!s || n < 0 || (!out && n > 0)) {
        infer__set_error(err, INFER_ERR_ARG, "top probs: %s", !s ? "no sampler" : "n with no room for them");
        return INFER_ERR_ARG;
    }
    if ((k = infer__sampler_top_probs(s, out, n)) < 0) {
        infer__set_error(err, INFER_ERR_NOMEM, "top probs: out of memory");
        return INFER_ERR_NOMEM;
    }
    if (n_probs) *n_probs = k;
    return INFER_OK;
}

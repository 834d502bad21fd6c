/* sampler.c - choosing the next token from logits: repetition penalty, then
   greedy, or top-k -> top-p -> min-p -> temperature -> a draw from a seeded
   RNG (the order llama.cpp's default chain uses). */
#include "internal.h"

typedef struct infer__cand {
    infer_token id;
    float logit;
} infer__cand;

struct infer_sampler {
    infer_sampler_params p;
    int n_vocab;
    infer__cand *cand;   /* n_vocab */
    infer_token *recent; /* ring of the last repeat_last_n accepted tokens */
    int n_recent, recent_pos;
    uint64_t rng;
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

INFERDEF infer_sampler *infer_sampler_new(const infer_sampler_params *p, int n_vocab) {
    infer_sampler *s;
    infer_sampler_params d = infer_sampler_default_params();
    if (n_vocab <= 0) return NULL;
    s = (infer_sampler *)infer__calloc(1, sizeof *s);
    if (!s) return NULL;
    s->p = p ? *p : d;
    if (s->p.repeat_last_n < 0) s->p.repeat_last_n = 0;
    s->n_vocab = n_vocab;
    s->cand = (infer__cand *)infer__calloc((size_t)n_vocab, sizeof(infer__cand));
    s->recent = (infer_token *)infer__calloc((size_t)(s->p.repeat_last_n ? s->p.repeat_last_n : 1), sizeof(infer_token));
    s->rng = s->p.seed;
    if (!s->cand || !s->recent) {
        infer_sampler_free(s);
        return NULL;
    }
    return s;
}

INFERDEF void infer_sampler_free(infer_sampler *s) {
    if (!s) return;
    INFER_FREE(s->cand);
    INFER_FREE(s->recent);
    INFER_FREE(s);
}

INFERDEF void infer_sampler_accept(infer_sampler *s, infer_token t) {
    if (!s->p.repeat_last_n) return;
    s->recent[s->recent_pos] = t;
    s->recent_pos = (s->recent_pos + 1) % s->p.repeat_last_n;
    if (s->n_recent < s->p.repeat_last_n) s->n_recent++;
}

/* splitmix64: small, fast, and the same sequence on every platform. */
static uint64_t infer__rng_next(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double infer__rng_uniform(uint64_t *state) { return (double)(infer__rng_next(state) >> 11) * (1.0 / 9007199254740992.0); }

static int infer__cand_desc(const void *a, const void *b) {
    float x = ((const infer__cand *)a)->logit, y = ((const infer__cand *)b)->logit;
    if (x != y) return x < y ? 1 : -1;
    return ((const infer__cand *)a)->id - ((const infer__cand *)b)->id; /* stable order on ties */
}

INFERDEF infer_token infer_sampler_sample(infer_sampler *s, const float *logits) {
    infer__cand *c = s->cand;
    int n = s->n_vocab, i, best = 0;
    double sum, r, acc;
    float mx;
    for (i = 0; i < n; i++) {
        c[i].id = i;
        c[i].logit = logits[i];
    }
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
    if (s->p.temperature <= 0) {
        for (i = 1; i < n; i++)
            if (c[i].logit > c[best].logit) best = i;
        return c[best].id;
    }
    qsort(c, (size_t)n, sizeof *c, infer__cand_desc);
    if (s->p.top_k > 0 && s->p.top_k < n) n = s->p.top_k;
    mx = c[0].logit;
    if (s->p.top_p < 1.0f) {
        sum = 0;
        for (i = 0; i < n; i++) sum += exp((double)c[i].logit - mx);
        acc = 0;
        for (i = 0; i < n; i++) {
            acc += exp((double)c[i].logit - mx) / sum;
            if (acc >= s->p.top_p) {
                n = i + 1;
                break;
            }
        }
    }
    if (s->p.min_p > 0) {
        /* keep p >= min_p * p_max, i.e. logit >= max + log(min_p) */
        float cut = mx + logf(s->p.min_p);
        for (i = 1; i < n; i++)
            if (c[i].logit < cut) {
                n = i;
                break;
            }
    }
    sum = 0;
    for (i = 0; i < n; i++) sum += exp(((double)c[i].logit - mx) / s->p.temperature);
    r = infer__rng_uniform(&s->rng) * sum;
    acc = 0;
    for (i = 0; i < n; i++) {
        acc += exp(((double)c[i].logit - mx) / s->p.temperature);
        if (r < acc) return c[i].id;
    }
    return c[n - 1].id;
}

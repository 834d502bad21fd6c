/* request.c - generation in steps: requests a game loop advances within a
   time budget, or a worker thread advances while the caller polls.

   Each context with requests has a scheduler (infer__sched): its requests
   in start order, the speed it has measured, and the forward pass being
   run (the context's sched). Between layers the forward pass asks it
   whether a request of the pass was cancelled, which stops the pass.

   Fields of a request are of two kinds. Its progress (sampler, prompt
   position, held-back text) belongs to the thread stepping its context,
   which marks the requests of a pass (in_pass) while it works on them.
   What callers read (text, tokens, status) changes only under the
   scheduler's mutex, held for copies, never across a forward pass. */
#include "context.h"

/* Workers need threads (platform.h): where there are none, a request is
   stepped by its caller, and workers are refused. */
#define INFER__REQ_THREADS INFER__THREADS
#define INFER__LOAD(p) infer__atomic_load(p, INFER__ACQUIRE)
#define INFER__STORE(p, v) infer__atomic_store(p, v, INFER__RELEASE)

#define INFER__REQ_MIN_CHUNK 8    /* prompt tokens the smallest pass still takes */
#define INFER__REQ_FIRST_CHUNK 16 /* prompt tokens of a pass before any speed is known */
#define INFER__REQ_SAMPLES 16     /* passes the speed is fitted to */
#define INFER__WORKER_SLICE_MS 20.0 /* a worker's step: new requests and other contexts get a turn */


enum { INFER__RQ_WAIT, INFER__RQ_PROMPT, INFER__RQ_GEN, INFER__RQ_END };

struct infer_request {
    infer__sched *sched;
    infer_request *next; /* the scheduler's list, in start order (under mu) */
    int seq, n_past_req, n_predict, n_probs;
    infer_progress_fn progress; /* infer_request_params.progress */
    void *progress_user;
    int cancel;          /* atomic: infer_request_cancel asked */
    int in_pass;         /* under mu: the stepping thread is working on it */
    /* progress: the stepping thread's */
    int state;
    infer_sampler *sampler;
    int own_sampler;
    int bos_always;      /* infer_generate: BOS before every prompt, as it always did */
    int feed_last;       /* feed the last generated token too (requests; not infer_generate) */
    int fed;             /* prompt tokens fed (or found in the cache) */
    int cache_prompt;    /* n_past 0 keeps the cached prefix of the prompt */
    int skip;            /* prompt tokens found in the cache, not fed */
    int start_past;      /* the sequence's positions when the prompt began */
    float *rs_snap;      /* a recurrent model's state at start_past while the
                            prompt is read (a cut-short prompt goes back to
                            it: the checkpoint moves with each chunk) */
    float *rs_last;      /* its state before the prompt's last token (at
                            rs_last_past): the checkpoint it leaves, so that
                            the same prompt again finds all but that token */
    int rs_last_past;
    int has_pending;     /* a sampled token waits to be fed */
    infer_token pending;
    int ending;          /* done once the pending token is fed */
    int text_done;       /* the text is complete (a stop string, or flushed) */
    int n_sampled;
    infer_detok detok;
    char *hold;          /* stb array: text that may start a stop string */
    infer_token_prob *top; /* stb array: the last token's top probabilities */
    char *gbnf;          /* the grammar, compiled when the request begins (a
                            worker's request compiles it as it starts) */
    char **stop;         /* copies of the stop strings */
    int n_stop;
    char **triggers;     /* copies of a lazy grammar's triggers */
    int n_triggers;
    int lazy;            /* the grammar waits for a trigger */
    char *reply;         /* stb array: the reply's text while the grammar waits or the budget runs */
    int *copy_to;        /* sequences the prompt's cache is copied into */
    int n_copy_to;
    int budget;          /* the thinking budget (-1: none) while it runs */
    int thinking;        /* 1: in the reasoning; -1: not (or no longer) */
    char *think_end;     /* what closes the reasoning */
    int spec_max;        /* speculation: most draft tokens a pass (lookup or draft_n; 0: none) */
    infer_context *draft_ctx; /* a draft model's context (its sequence seq), or NULL */
    infer_token *draft;  /* stb array: the draft the running pass verifies */
    infer_token *hist;   /* stb array: the sequence's tokens and the pending one, to draft from */
    double t_start, t_prompt0, t_last;
    /* what callers read: under mu */
    infer_token *prompt; /* stb array; BOS put in front when the prompt begins */
    int done;
    infer_status status;
    char msg[256];
    char *text;          /* stb array */
    infer_token *toks;   /* stb array */
    infer_token_prob *probs; /* stb array, n_probs per token */
    float *chosen_p;     /* stb array: each generated token's own probability (with n_probs) */
    int n_cached;        /* positions (BOS included) the prompt found cached */
    infer_metrics metrics;
};

struct infer__sched {
    infer_context *c;
    infer__mutex mu;
    infer__cond cv;        /* a pass or a step ended */
    infer_request *head, *tail;
    int n_req;             /* under mu */
    int n_open;            /* unfinished; under mu, read atomically by workers */
    int stepping;          /* under mu: a thread steps it */
    infer_worker *worker;  /* under mu (and the worker's mu when it changes) */
    int claimed;           /* under the worker's mu: one of its threads steps it */
    infer__sched *wnext;   /* the worker's list */
    /* the pass being run: the stepping thread's */
    infer_request **pass;  /* stb arrays */
    int *take;             /* per pass request: tokens it gives this pass */
    infer_token *btok;
    int *bseq;
    int8_t *blog;
    int in_decode;
    /* (tokens, ms) of recent passes, the speed model */
    double smp_n[INFER__REQ_SAMPLES], smp_ms[INFER__REQ_SAMPLES];
    int n_smp, smp_pos;
    unsigned rr;           /* the generating request a budget-cut pass starts with */
};

#if INFER__REQ_THREADS
struct infer_worker {
    infer__mutex mu;
    /* a context's scheduler made, joined or freed as requests start and
       are freed on any thread: held for that bookkeeping only (a request's
       heavy setup, its grammar, is done before taking it) */
    infer__mutex life_mu;
    infer__cond wake;  /* work arrived, or stop */
    infer__cond idle;  /* a thread let go of a context */
    infer__thread *threads;
    int n_threads;
    int stop;
    double slice_ms;   /* infer_worker_set_slice */
    infer__sched *head;
};
#else
struct infer_worker {
    int unused;
};
#endif

/* ---- cancelling a pass ---- */

/* Asked with the abort callback between layers (forward.c): whether a
   request in the running pass has been cancelled. */
static int infer__sched_should_stop(const infer__sched *s) {
    int i;
    if (s->in_decode)
        for (i = 0; i < (int)stbds_arrlen(s->pass); i++)
            if (s->take[i] && s->pass[i] && INFER__LOAD(&s->pass[i]->cancel)) return 1;
    return 0;
}

/* The scheduler of c, or NULL. */
static infer__sched *infer__ctx_sched(const infer_context *c) { return c->sched; }

/* ---- the speed model: ms of a pass of n tokens ~ a + b n ---- */

static void infer__sched_sample(infer__sched *s, int n, double ms) {
    s->smp_n[s->smp_pos] = n;
    s->smp_ms[s->smp_pos] = ms;
    s->smp_pos = (s->smp_pos + 1) % INFER__REQ_SAMPLES;
    if (s->n_smp < INFER__REQ_SAMPLES) s->n_smp++;
}

/* Expected ms of a pass of n tokens, or -1 before anything was measured.
   A least-squares line through the recent passes; where their sizes hardly
   differ, no cheaper than the passes seen and no cheaper per token than
   them (pessimistic, so a budget holds while the line is unknown). */
static double infer__sched_estimate(const infer__sched *s, int n) {
    double sn = 0, st = 0, snn = 0, snt = 0, k = s->n_smp, var, a, b, est;
    int i;
    if (!s->n_smp) return -1;
    for (i = 0; i < s->n_smp; i++) {
        sn += s->smp_n[i];
        st += s->smp_ms[i];
        snn += s->smp_n[i] * s->smp_n[i];
        snt += s->smp_n[i] * s->smp_ms[i];
    }
    var = snn / k - (sn / k) * (sn / k);
    if (s->n_smp >= 3 && var >= 4) {
        b = (snt / k - (sn / k) * (st / k)) / var;
        a = st / k - b * sn / k;
        if (b < 0) b = 0, a = st / k;
        if (a < 0) a = 0, b = snt / snn;
        est = a + b * n;
    } else {
        est = INFER__MAX(st / k, n * st / sn);
    }
    return est * 1.1; /* a margin for the machine's noise */
}

/* ---- results: what callers read, changed under mu ---- */

/* Appends released text; 0 when memory ran out. */
static int infer__req_publish_text(infer_request *r, const char *p, size_t n) {
    infer__sched *s = r->sched;
    char *at;
    if (!n) return 1;
    infer__mutex_lock(&s->mu);
    if ((at = infer__arr_addn(r->text, n))) memcpy(at, p, n);
    infer__mutex_unlock(&s->mu);
    return at != NULL;
}

/* Adds held text and releases what cannot start a stop string. final: the
   text is complete (release all). Returns 1 when a stop string was found
   (the text ends before it), -1 when memory ran out. */
static int infer__req_text(infer_request *r, const char *p, size_t n, int final) {
    size_t nh, pos, keep;
    int i, stopped = 0;
    if (n) {
        char *at = infer__arr_addn(r->hold, n);
        if (!at) return -1;
        memcpy(at, p, n);
    }
    nh = stbds_arrlen(r->hold);
    keep = nh;
    /* the earliest whole stop string ends it */
    for (pos = 0; pos < nh && !stopped; pos++)
        for (i = 0; i < r->n_stop; i++) {
            size_t ls = strlen(r->stop[i]);
            if (ls <= nh - pos && !memcmp(r->hold + pos, r->stop[i], ls)) {
                keep = pos, stopped = 1;
                break;
            }
        }
    if (!stopped && !final) /* else hold back from the earliest start of one */
        for (pos = 0; pos < nh && keep == nh; pos++)
            for (i = 0; i < r->n_stop; i++) {
                size_t ls = strlen(r->stop[i]);
                if (ls > nh - pos && !memcmp(r->hold + pos, r->stop[i], nh - pos)) {
                    keep = pos;
                    break;
                }
            }
    if (stopped || final) {
        if (!infer__req_publish_text(r, r->hold, keep)) return -1;
        stbds_arrsetlen(r->hold, 0);
    } else if (keep) {
        if (!infer__req_publish_text(r, r->hold, keep)) return -1;
        if (nh > keep) memmove(r->hold, r->hold + keep, nh - keep);
        stbds_arrsetlen(r->hold, nh - keep);
    }
    return stopped;
}

/* Records time t as the moment a token was chosen. */
static void infer__req_token_time(infer_request *r, double t) {
    infer_metrics *m = &r->metrics;
    if (m->n_gen_tokens == 0) {
        m->ttft_ms = t - r->t_start;
    } else {
        double ms = t - r->t_last;
        if (m->n_gen_intervals == 0 || ms < m->token_ms_min) m->token_ms_min = ms;
        if (ms > m->token_ms_max) m->token_ms_max = ms;
        m->n_gen_intervals++;
        m->gen_ms += ms;
    }
    m->n_gen_tokens++;
    r->t_last = t;
}

/* A host copy of sequence seq's recurrent state as it is now, into *out
   (NULL where the device fails the copy). Returns 0 without memory. */
static int infer__rs_copy_out(infer_context *c, int seq, float **out) {
    if (!(*out = (float *)INFER_MALLOC(c->rs_slot * sizeof(float)))) return 0;
    if (!infer__kv_mem_copy(c->kv.gpu, *out, infer__rs_slot(c, seq, c->seqs[seq].rs_cur), c->rs_slot * sizeof(float),
                            INFER_BACKEND_DEVICE_TO_HOST)) {
        INFER_FREE(*out);
        *out = NULL;
    }
    return 1;
}

/* Host copy snap, the state of sequence seq at position past, becomes its
   checkpoint, in the slot that held the last call's (where it has tokens
   after past and is not there already; a failed copy leaves none). */
static void infer__rs_set_ckpt(infer_context *c, int seq, const float *snap, int past) {
    infer__seq *q = &c->seqs[seq];
    if (q->n_past <= past || q->rs_ckpt == past) return;
    q->rs_ckpt = infer__kv_mem_copy(c->kv.gpu, infer__rs_slot(c, seq, 1 - q->rs_cur), snap, c->rs_slot * sizeof(float),
                                    INFER_BACKEND_HOST_TO_DEVICE)
                     ? past
                     : -1;
}

/* Keeps r's sequence's state as it is now, before the prompt's last token
   is fed, to be left as the sequence's checkpoint when r ends (none is
   kept without memory, or from position 0, where a pass starts from
   zeros). */
static void infer__req_snap_last(infer_request *r) {
    infer_context *c = r->sched->c;
    if (!c->seqs[r->seq].n_past || !infer__rs_copy_out(c, r->seq, &r->rs_last)) return;
    r->rs_last_past = c->seqs[r->seq].n_past;
}

/* Ends r (the stepping thread, or a caller under mu where none steps):
   releases what is held back, puts the sequence back where it was when a
   prompt is cut short, and publishes the status. Called without mu. */
static void infer__req_end(infer_request *r, infer_status st, const char *msg) {
    infer__sched *s = r->sched;
    char piece[16];
    int i;
    if (r->state == INFER__RQ_PROMPT && st != INFER_OK && r->fed > 0) {
        infer_context *c = s->c;
        /* the state where the prompt began becomes the checkpoint again
           (without it, the truncation clears the sequence) */
        if (r->rs_snap) infer__rs_set_ckpt(c, r->seq, r->rs_snap, r->start_past);
        infer_seq_truncate(c, r->seq, r->start_past, NULL, NULL);
    } else if (r->rs_last) { /* the prompt's, for prompt reuse */
        infer__rs_set_ckpt(s->c, r->seq, r->rs_last, r->rs_last_past);
    }
    INFER_FREE(r->rs_snap);
    r->rs_snap = NULL;
    INFER_FREE(r->rs_last);
    r->rs_last = NULL;
    if (!r->text_done) {
        size_t n_piece = 0;
        infer_detok_flush(&r->detok, piece, sizeof piece, &n_piece, NULL);
        if (infer__req_text(r, piece, n_piece, 1) < 0 && st == INFER_OK) {
            st = INFER_ERR_NOMEM; /* its text would be incomplete */
            msg = "out of memory for the request's text";
        }
        r->text_done = 1;
    }
    r->has_pending = 0;
    r->state = INFER__RQ_END;
    /* the pass lets go of it now: its caller may free it at once */
    for (i = 0; i < (int)stbds_arrlen(s->pass); i++)
        if (s->pass[i] == r) s->pass[i] = NULL;
    infer__mutex_lock(&s->mu);
    if (!r->done) {
        r->done = 1;
        r->status = st;
        snprintf(r->msg, sizeof r->msg, "%s", msg ? msg : "");
        s->n_open--;
        INFER__STORE(&s->n_open, s->n_open);
    }
    r->in_pass = 0;
    infer__cond_broadcast(&s->cv);
    infer__mutex_unlock(&s->mu);
}

/* ---- one request's steps ---- */

/* Prompt reuse: truncates r's sequence (*past positions) to the longest
   prefix its tokens share with [BOS] + prompt, always leaving one prompt
   token to feed (its logits give the first token). Returns 1 with *past
   and r->skip set where anything was kept; 0 (sequence untouched) where
   nothing matched. */
static int infer__req_reuse(infer_request *r, int *past) {
    infer__sched *s = r->sched;
    infer_context *c = s->c;
    const infer_model *m = c->model;
    int bos = infer_model_add_bos(m) && infer_model_bos(m) >= 0, n_prompt = (int)stbds_arrlen(r->prompt);
    int n_full = bos + n_prompt, n_tok = 0, common = 0, kept;
    const infer_token *t = infer_seq_tokens(c, r->seq, &n_tok);
    if (!t || n_full == 0) return 0;
    n_tok = INFER__MIN(n_tok, *past);
    while (common < n_tok && common < n_full &&
           t[common] == (common < bos ? infer_model_bos(m) : r->prompt[common - bos]))
        common++;
    if (common >= n_full) common = n_full - 1; /* the last token is fed again for its logits */
    if (c->seqs[r->seq].inexact) common = INFER__MIN(common, c->seqs[r->seq].inexact - 1);
    if (common <= 0) return 0;
    infer_seq_truncate(c, r->seq, common, &kept, NULL); /* a sliding window may keep less */
    *past = kept;
    /* kept 0: BOS and the whole prompt are fed, as for an empty sequence */
    r->skip = INFER__MAX(kept - bos, 0);
    infer__mutex_lock(&s->mu);
    r->n_cached = kept;
    infer__mutex_unlock(&s->mu);
    return 1;
}

/* The prompt begins: the sequence set as asked, BOS where due, the tokens
   to re-feed where the sequence lost some. Returns 0 if r ended. */
static int infer__req_begin(infer_request *r) {
    infer__sched *s = r->sched;
    infer_context *c = s->c;
    const infer_model *m = c->model;
    infer_token *pre = NULL; /* stb array: what goes before the prompt */
    char msg[256];
    int past = infer_seq_n_past(c, r->seq), n_ctx = infer_context_n_ctx(c), i, n_prompt;
    if (r->gbnf) {
        infer_error e;
        memset(&e, 0, sizeof e);
        if (infer_sampler_set_grammar(r->sampler, m, r->gbnf, NULL, &e) != INFER_OK) {
            infer__req_end(r, e.code ? e.code : INFER_ERR_ARG, e.msg);
            return 0;
        }
        if (r->lazy) infer__sampler_grammar_wait(r->sampler);
    }
    if (r->n_past_req == 0 && r->cache_prompt && past > 0 && infer__req_reuse(r, &past)) {
        /* the sequence keeps the prompt's cached prefix */
    } else if (r->n_past_req >= 0 && r->n_past_req < past) {
        /* positions a sliding window lost come back by feeding them again */
        int n_tok, kept;
        const infer_token *t = infer_seq_tokens(c, r->seq, &n_tok);
        infer_token *copy = NULL;
        /* (never a memcpy of 0 bytes into a NULL array: the compiler may
           then take the array for non-NULL) */
        if (t && r->n_past_req > 0 && n_tok >= r->n_past_req) {
            /* room for what may be fed again, before the cache lets go of it */
            if (!(copy = infer__arr_addn(copy, r->n_past_req)) || !infer__arr_fit(pre, r->n_past_req + 1)) {
                stbds_arrfree(copy);
                goto nomem;
            }
            memcpy(copy, t, (size_t)r->n_past_req * sizeof *t);
        }
        infer_seq_truncate(c, r->seq, r->n_past_req, &kept, NULL);
        if (kept < r->n_past_req && copy)
            memcpy(stbds_arraddnptr(pre, r->n_past_req - kept), copy + kept, (size_t)(r->n_past_req - kept) * sizeof *copy);
        stbds_arrfree(copy);
        past = kept;
    }
    if ((past == 0 || r->bos_always) && infer_model_add_bos(m) && infer_model_bos(m) >= 0) {
        if (!infer__arr_room(pre, 1)) goto nomem;
        stbds_arrins(pre, 0, infer_model_bos(m));
    }
    if (!stbds_arrlen(r->prompt) && !stbds_arrlen(pre) && r->n_predict > 0) {
        /* nothing to feed: generate from the sequence's last position, its
           logits where kept, else its last token fed again */
        const float *l = past > 0 ? infer_seq_logits(c, r->seq) : NULL;
        if (past == 0) {
            infer__req_end(r, INFER_ERR_ARG, "the prompt is empty, the sequence too, and the model adds no BOS token");
            return 0;
        }
        if (!l) {
            int n_tok, kept;
            const infer_token *t = infer_seq_tokens(c, r->seq, &n_tok);
            infer_token last = t && n_tok > 0 ? t[n_tok - 1] : -1;
            if (!infer__arr_room(pre, n_tok + 1)) goto nomem;
            infer_seq_truncate(c, r->seq, past - 1, &kept, NULL);
            if (kept == past - 1 && last >= 0) {
                stbds_arrput(pre, last);
            } else { /* a window's cache cannot go back one: feed what it lost */
                for (i = kept; t && i < n_tok && i < past; i++) stbds_arrput(pre, t[i]);
            }
            past = kept;
        }
    }
    if (stbds_arrlen(pre)) {
        int room;
        infer__mutex_lock(&s->mu);
        if ((room = infer__arr_room(r->prompt, stbds_arrlen(pre)))) {
            stbds_arrinsn(r->prompt, 0, stbds_arrlen(pre));
            memcpy(r->prompt, pre, stbds_arrlen(pre) * sizeof *pre);
        }
        infer__mutex_unlock(&s->mu);
        if (!room) goto nomem;
    }
    stbds_arrfree(pre);
    n_prompt = (int)stbds_arrlen(r->prompt);
    r->start_past = past;
    INFER_FREE(r->rs_snap);
    r->rs_snap = NULL;
    INFER_FREE(r->rs_last);
    r->rs_last = NULL;
    if (c->rs && past > 0) { /* the sequence's state now, for a prompt cut short */
        /* (no copy: a prompt cut short then clears the sequence) */
        if (!infer__rs_copy_out(c, r->seq, &r->rs_snap)) goto nomem;
    }
    r->fed = r->skip;
    r->t_prompt0 = infer__now_ms();
    for (i = 0; i < n_prompt; i++) infer_sampler_accept_prompt(r->sampler, r->prompt[i]);
    n_prompt -= r->skip; /* the tokens to feed */
    if (n_prompt > n_ctx - past && (c->full_policy == INFER_FULL_POLICY_STOP || n_prompt > n_ctx)) {
        snprintf(msg, sizeof msg, "the prompt is %d tokens but the context has room for %d", n_prompt,
                 INFER__MAX(n_ctx - past, 0));
        infer__req_end(r, INFER_ERR_CONTEXT_FULL, msg);
        return 0;
    }
    r->state = INFER__RQ_PROMPT;
    if (n_prompt == 0) {
        /* straight from the sequence's logits */
        r->state = INFER__RQ_GEN;
        return 1;
    }
    return 1;
nomem:
    stbds_arrfree(pre);
    infer__req_end(r, INFER_ERR_NOMEM, "out of memory for the prompt");
    return 0;
}

/* A lazy grammar: adds a piece of the reply and looks for a trigger in
   it; at the first, the grammar wakes having read the reply from there
   (what was before stays free text). -1 when memory ran out. */
static int infer__req_trigger(infer_request *r, const char *piece, size_t n) {
    size_t old = stbds_arrlenu(r->reply), len, lead = 0, at = (size_t)-1;
    int i;
    if (!infer__arr_room(r->reply, (int)n)) return -1;
    if (n) memcpy(stbds_arraddnptr(r->reply, n), piece, n);
    len = stbds_arrlenu(r->reply);
    while (lead < len && (r->reply[lead] == ' ' || r->reply[lead] == '\n' || r->reply[lead] == '\t' ||
                          r->reply[lead] == '\r'))
        lead++;
    for (i = 0; i < r->n_triggers; i++) {
        const char *t = r->triggers[i];
        size_t tn = strlen(t), from, k;
        if (*t == '^') { /* at the reply's start only */
            tn--;
            if (len - lead >= tn && !memcmp(r->reply + lead, t + 1, tn) && lead < at) at = lead;
            continue;
        }
        /* where it may end in the new text: from tn - 1 bytes before it */
        from = old >= tn ? old - tn + 1 : 0;
        for (k = from; k + tn <= len && k < at; k++)
            if (!memcmp(r->reply + k, t, tn)) {
                at = k;
                break;
            }
    }
    if (at == (size_t)-1) return 0;
    r->lazy = 0;
    infer__sampler_grammar_wake(r->sampler, r->reply + at, len - at); /* (refused: the reply stays free) */
    stbds_arrfree(r->reply);
    r->reply = NULL;
    return 0;
}

/* The prompt is fed: the sequence copied into copy_to's. 0 if r ended
   (a copy failed). */
static int infer__req_copy_out(infer_request *r) {
    int i;
    infer_error e;
    for (i = 0; i < r->n_copy_to; i++)
        if (infer_seq_copy(r->sched->c, r->seq, r->copy_to[i], &e) != INFER_OK) {
            infer__req_end(r, e.code, e.msg);
            return 0;
        }
    r->n_copy_to = 0;
    return 1;
}

/* Whether r's grammar is lazy and one of its triggers is the reasoning's
   end `end` ("</think>" where NULL): a grammar that follows the reasoning,
   which a thinking budget may wake. */
static int infer__req_waits_for(const infer_request *r, const char *end) {
    int i;
    if (!end || !*end) end = "</think>";
    if (!r->lazy) return 0;
    for (i = 0; i < r->n_triggers; i++)
        if (!strcmp(r->triggers[i], end)) return 1;
    return 0;
}

/* The thinking budget: adds a piece of the reply, and where the reasoning
   is still open after the budget's tokens, a grammar that closes it (then
   anything). -1 when memory ran out. */
static int infer__req_budget(infer_request *r, const char *piece, size_t n) {
    size_t len, lead = 0, end_n = strlen(r->think_end);
    if (!infer__arr_room(r->reply, (int)n)) return -1;
    if (n) memcpy(stbds_arraddnptr(r->reply, n), piece, n);
    len = stbds_arrlenu(r->reply);
    while (lead < len && strchr(" \t\r\n", r->reply[lead])) lead++;
    if (r->thinking == 0) { /* does the reply open a reasoning? */
        if (len - lead >= 7) r->thinking = !memcmp(r->reply + lead, "<think>", 7) ? 1 : -1;
        else if (lead < len && memcmp(r->reply + lead, "<think>", len - lead)) r->thinking = -1;
    }
    if (r->thinking == 1) { /* closed already? (searched in what may hold it) */
        size_t k, from = len >= n + end_n ? len - n - end_n : 0;
        for (k = from; k + end_n <= len; k++)
            if (!memcmp(r->reply + k, r->think_end, end_n)) r->thinking = -1;
    }
    if (r->thinking == -1) {
        r->budget = -1;
    } else if (r->thinking == 1 && r->n_sampled >= r->budget && r->lazy) {
        /* the grammar waits for the reasoning's end (infer__req_waits_for)
           and begins with it: woken now, it writes the end, then its text */
        r->budget = -1;
        r->lazy = 0;
        infer__sampler_grammar_wake(r->sampler, "", 0);
    } else if (r->thinking == 1 && r->n_sampled >= r->budget) {
        /* the GBNF literal of the closing text, escaped */
        infer__sb g = {NULL, 0};
        infer_error e;
        infer__sb_puts(&g, "root ::= \"\\n\" ");
        infer__sb_literal(&g, r->think_end, end_n);
        infer__sb_puts(&g, " \"\\n\\n\" rest\nrest ::= [^\\x00]*\n");
        infer__sb_putc(&g, 0);
        r->budget = -1;
        if (g.nomem) {
            stbds_arrfree(g.p);
            return -1;
        }
        memset(&e, 0, sizeof e);
        if (infer_sampler_set_grammar(r->sampler, r->sched->c->model, g.p, NULL, &e) != INFER_OK) {
            stbds_arrfree(g.p);
            return e.code == INFER_ERR_NOMEM ? -1 : 0;
        }
        stbds_arrfree(g.p);
    }
    if (r->budget < 0 && !r->lazy) {
        stbds_arrfree(r->reply);
        r->reply = NULL;
    }
    return 0;
}

/* Chooses the next token from logits l; returns 0 if r ended. */
static int infer__req_sample(infer_request *r, const float *l) {
    infer__sched *s = r->sched;
    const infer_model *m = s->c->model;
    char piece[256];
    infer_token t = infer_sampler_sample(r->sampler, l);
    size_t len = 0;
    int stopped;
    float chosen = 0;
    double now = infer__now_ms();
    r->state = INFER__RQ_GEN;
    INFER_FREE(r->rs_snap); /* the prompt is in */
    r->rs_snap = NULL;
    if (t < 0) {
        int why = infer__sampler_none_why(r->sampler);
        const char *limit = infer__sampler_grammar_limit(r->sampler);
        if (limit) /* the grammar went past a stated limit of the matcher */
            infer__req_end(r, INFER_ERR_ARG, limit);
        else if (why == INFER__NONE_NOMEM || infer__sampler_nomem(r->sampler))
            infer__req_end(r, INFER_ERR_NOMEM, "out of memory in the sampler");
        else if (why == INFER__NONE_GRAMMAR)
            infer__req_end(r, INFER_ERR_ARG, "the grammar allows no token here");
        else
            infer__req_end(r, INFER_ERR_ARG,
                           why == INFER__NONE_BANNED_HERE ? "logit_bias bans every token the grammar allows here"
                                                          : "logit_bias bans every token");
        return 0;
    }
    if (r->n_probs > 0) { /* before accept moves the grammar on; outside the lock */
        int k;
        if (!infer__arr_setlen(r->top, r->n_probs)) goto nomem;
        if (infer_sampler_top_probs(r->sampler, r->top, r->n_probs, &k, NULL) != INFER_OK) goto nomem;
        for (; k < r->n_probs; k++) r->top[k].id = -1, r->top[k].p = 0;
        if ((chosen = infer_sampler_token_prob(r->sampler, t)) < 0) goto nomem;
    }
    infer_sampler_accept(r->sampler, t);
    if (infer__sampler_nomem(r->sampler)) goto nomem;
    r->n_sampled++;
    infer__mutex_lock(&s->mu);
    if (!infer__arr_room(r->toks, 1) || !infer__arr_room(r->probs, r->n_probs) ||
        (r->n_probs > 0 && !infer__arr_room(r->chosen_p, 1))) {
        infer__mutex_unlock(&s->mu);
        goto nomem;
    }
    stbds_arrput(r->toks, t);
    if (r->n_probs > 0) {
        memcpy(stbds_arraddnptr(r->probs, r->n_probs), r->top, (size_t)r->n_probs * sizeof *r->top);
        stbds_arrput(r->chosen_p, chosen);
    }
    infer__req_token_time(r, now);
    r->metrics.context_bytes = s->c->bytes;
    infer__mutex_unlock(&s->mu);
    if (infer_model_is_eog(m, t)) {
        infer__req_end(r, INFER_OK, NULL);
        return 0;
    }
    if (infer_detok_push(&r->detok, m, t, piece, sizeof piece, &len, NULL) != INFER_OK) goto nomem;
    if (r->lazy && infer__req_trigger(r, piece, len) < 0) goto nomem;
    if (r->budget >= 0 && infer__req_budget(r, piece, len) < 0) goto nomem;
    if ((stopped = infer__req_text(r, piece, len, 0)) < 0) goto nomem;
    if (stopped || r->n_sampled >= r->n_predict) {
        if (!stopped) { /* the text is complete */
            infer_detok_flush(&r->detok, piece, sizeof piece, &len, NULL);
            if (infer__req_text(r, piece, len, 1) < 0) goto nomem;
        }
        r->text_done = 1;
        if (!r->feed_last) {
            infer__req_end(r, INFER_OK, NULL);
            return 0;
        }
        r->ending = 1; /* the sequence takes the token, then r is done */
    }
    r->pending = t;
    r->has_pending = 1;
    return 1;
nomem:
    r->text_done = 1; /* what it has stands; nothing more is added */
    infer__req_end(r, INFER_ERR_NOMEM, "out of memory for the reply");
    return 0;
}

/* ---- speculation: a draft fed with the pending token, then verified ---- */

/* Fills r->draft for a pass that feeds r's pending token: at most room
   tokens, none past the context's end (a shift would move what the
   verification rolls back) or n_predict, and none a sliding window's cache
   could not roll back. Returns how many; 0 without speculation or a match. */
static int infer__req_draft(infer_request *r, int room) {
    infer_context *c = r->sched->c;
    int n_past = infer_seq_n_past(c, r->seq), n_tok = 0, n;
    const infer_token *t;
    stbds_arrsetlen(r->draft, 0);
    n = INFER__MIN(INFER__MIN(r->spec_max, room), infer_context_n_ctx(c) - n_past - 1);
    n = INFER__MIN(n, r->n_predict - r->n_sampled - 1); /* past that, no token would be drawn for it */
    /* on the CPU, a pass that splits its attention as one token's does (a
       verification longer would sum its keys otherwise: logits unlike
       one-token passes') */
    if (!c->gpu) n = INFER__MIN(n, c->attn_split_tokens - 1);
    if (n <= 0 || r->ending || !r->has_pending) return 0;
    while (n > 0 && !infer__kv_can_rewind(&c->kv, c->model, n_past + 1 + n, n_past + 1)) n--;
    t = infer_seq_tokens(c, r->seq, &n_tok);
    /* (memory for the history and the draft; without it, no draft) */
    if (n <= 0 || !infer__arr_setlen(r->hist, n_tok + 1) || !infer__arr_setlen(r->draft, n)) {
        stbds_arrsetlen(r->draft, 0);
        return 0;
    }
    if (n_tok > 0) memcpy(r->hist, t, (size_t)n_tok * sizeof *t);
    r->hist[n_tok] = r->pending;
    if (r->draft_ctx) {
        infer_error e;
        n = infer__spec_draft_model(r->draft_ctx, r->seq, r->hist, n_tok + 1, n, r->draft, &e);
    } else {
        /* matches of 3 tokens, else 2: a lone recurring token ("the", a
           comma) predicts what follows too seldom to pay for its pass (on
           SmolLM2 rewriting a paragraph, acceptance 38% with single-token
           matches and a loss of speed, 52% without) */
        n = infer__spec_lookup(r->hist, n_tok + 1, 2, 3, n, r->draft);
    }
    stbds_arrsetlen(r->draft, n);
    return n;
}

/* The pass fed r's pending token and its draft at logits rows pos..: row
   pos + j follows the pending token and draft[0..j). Samples from each
   row in turn as without a draft, going on while the token drawn is the
   draft's next (already in the cache); then rolls the cache back to the
   tokens kept, the last one drawn pending as usual. */
static void infer__req_verify(infer_request *r, int pos) {
    infer__sched *s = r->sched;
    infer_context *c = s->c;
    int n = (int)stbds_arrlen(r->draft), j, keep, accepted = 0, alive = 1, n_past;
    for (j = 0;; j++) {
        if (!infer__req_sample(r, infer_context_logits(c, pos + j))) {
            alive = 0; /* ended: the token drawn is not kept */
            keep = j + 1;
            break;
        }
        if (j == n || r->pending != r->draft[j]) {
            keep = j + 1; /* the token drawn is fed by the next pass */
            break;
        }
        accepted++;
        r->has_pending = 0; /* it is in the cache already */
        if (r->ending) {
            keep = j + 2;
            break;
        }
    }
    n_past = infer_seq_n_past(c, r->seq);
    if (n + 1 > keep) infer_seq_truncate(c, r->seq, n_past - (n + 1 - keep), NULL, NULL);
    infer__mutex_lock(&s->mu);
    r->metrics.n_draft_tokens += n;
    r->metrics.n_draft_accepted += accepted;
    infer__mutex_unlock(&s->mu);
    stbds_arrsetlen(r->draft, 0);
    if (alive && r->ending && !r->has_pending) infer__req_end(r, INFER_OK, NULL);
}

/* ---- a pass: one forward pass over the open requests ---- */

/* Whether the pass's request i may take part: the first open request of its
   sequence (requests of a sequence run in start order). */
static int infer__seq_first(infer_request *const *reqs, int i) {
    int j;
    for (j = 0; j < i; j++)
        if (reqs[j]->seq == reqs[i]->seq) return 0;
    return 1;
}

/* Takes the open requests for a pass (marks them in_pass); -1 when memory
   for the pass ran out. */
static int infer__pass_collect(infer__sched *s) {
    infer_request *r;
    stbds_arrsetlen(s->pass, 0);
    infer__mutex_lock(&s->mu);
    /* room for every request, so the puts below never allocate */
    if (!infer__arr_fit(s->pass, s->n_req) || !infer__arr_fit(s->take, s->n_req)) {
        infer__mutex_unlock(&s->mu);
        return -1;
    }
    for (r = s->head; r; r = r->next)
        if (!r->done) {
            /* a cancelled one behind another of its sequence ends too */
            stbds_arrput(s->pass, r);
            if (!infer__seq_first(s->pass, (int)stbds_arrlen(s->pass) - 1) && !INFER__LOAD(&r->cancel))
                stbds_arrpop(s->pass);
            else r->in_pass = 1;
        }
    infer__mutex_unlock(&s->mu);
    stbds_arrsetlen(s->take, stbds_arrlen(s->pass));
    return (int)stbds_arrlen(s->pass);
}

static void infer__pass_release(infer__sched *s) {
    int i;
    infer__mutex_lock(&s->mu);
    for (i = 0; i < (int)stbds_arrlen(s->pass); i++)
        if (s->pass[i]) s->pass[i]->in_pass = 0;
    infer__cond_broadcast(&s->cv);
    infer__mutex_unlock(&s->mu);
    stbds_arrsetlen(s->pass, 0);
}

/* Ends every open request of s with st (memory for a pass ran out, or
   its worker is freed). */
static void infer__sched_end_all(infer__sched *s, infer_status st, const char *msg) {
    for (;;) {
        infer_request *r;
        infer__mutex_lock(&s->mu);
        for (r = s->head; r && r->done; r = r->next) {}
        infer__mutex_unlock(&s->mu);
        if (!r) return;
        infer__req_end(r, st, msg);
    }
}

/* One forward pass. limit_ms: the time it may take (< 0: no limit, prompt
   chunks up to n_batch); first: it runs even if expected to take longer,
   with at least a minimal chunk. Returns 1 if a pass ran (or requests
   ended), 0 if nothing fits or nothing is open. */
static int infer__sched_pass(infer__sched *s, double limit_ms, int first) {
    infer_context *c = s->c;
    int n_batch = c->n_batch, n = infer__pass_collect(s), i, n_gen = 0, n_prompt = 0, left = 0, k, pos, progress = 0;
    int n_draft = 0;
    infer_batch b;
    infer_error err;
    infer_status st;
    double t0 = infer__now_ms(), ms;
    if (n < 0) {
        infer__sched_end_all(s, INFER_ERR_NOMEM, "out of memory for a forward pass");
        return 1;
    }
    if (!n) return 0;
    /* cancelled ones end; new ones begin; sampling from kept logits */
    for (i = 0; i < n; i++) {
        infer_request *r = s->pass[i];
        s->take[i] = 0;
        if (INFER__LOAD(&r->cancel)) {
            infer__req_end(r, INFER_ERR_CANCELLED, "the request was cancelled");
            progress = 1;
            continue;
        }
        if (r->state == INFER__RQ_WAIT && !infer__req_begin(r)) {
            progress = 1;
            continue;
        }
        if (r->state == INFER__RQ_GEN && !r->has_pending) {
            /* an empty prompt: from the sequence's own logits */
            const float *l = infer_seq_logits(c, r->seq);
            if (r->n_copy_to && !infer__req_copy_out(r)) {
                progress = 1;
                continue;
            }
            if (r->n_predict <= 0) {
                infer__req_end(r, INFER_OK, NULL);
                progress = 1;
                continue;
            }
            if (!l) {
                infer__req_end(r, INFER_ERR_ARG, "the sequence has no logits to continue from");
                progress = 1;
                continue;
            }
            progress = 1;
            if (!infer__req_sample(r, l)) continue;
        }
        if (r->state == INFER__RQ_GEN) {
            if (infer_seq_n_past(c, r->seq) >= infer_context_n_ctx(c) && c->full_policy == INFER_FULL_POLICY_STOP) {
                char msg[256];
                if (r->ending) { /* the reply is complete; only its last token finds no room */
                    infer__req_end(r, INFER_OK, NULL);
                    progress = 1;
                    continue;
                }
                snprintf(msg, sizeof msg, "the context is full (%d positions): stopped after %d generated tokens",
                         infer_context_n_ctx(c), r->n_sampled);
                infer__req_end(r, INFER_ERR_CONTEXT_FULL, msg);
                progress = 1;
                continue;
            }
            s->take[i] = 1;
            n_gen++;
        } else {
            left += (int)stbds_arrlen(r->prompt) - r->fed;
            n_prompt++;
        }
    }
    /* a request that began may have taken the budget (compiling a grammar
       over a large vocabulary): that was this pass's progress */
    if (limit_ms >= 0) {
        limit_ms = INFER__MAX(0.0, limit_ms - (infer__now_ms() - t0));
        if (progress && limit_ms == 0) {
            infer__pass_release(s);
            return 1;
        }
    }
    /* a budget too small for a token of every generating request: as many
       as fit (at least one), taking turns from pass to pass */
    if (limit_ms >= 0 && n_gen > 1 && infer__sched_estimate(s, n_gen) > limit_ms) {
        int fit = 1, kept = 0, j;
        while (fit < n_gen && infer__sched_estimate(s, fit + 1) <= limit_ms) fit++;
        for (j = 0; j < n; j++) {
            i = (int)((s->rr + (unsigned)j) % (unsigned)n);
            if (!s->take[i]) continue;
            if (kept < fit) kept++;
            else s->take[i] = 0;
        }
        s->rr++;
        n_gen = fit;
    }
    /* drafts for the generating requests that speculate, within the batch
       and, stepped within a budget, within what the budget is expected to
       hold (a draft never makes a pass overrun it) */
    k = n_batch - n_gen;
    if (limit_ms >= 0 && infer__sched_estimate(s, n_gen) >= 0)
        while (k > 0 && infer__sched_estimate(s, n_gen + k) > limit_ms) k--;
    for (i = 0; i < n; i++) {
        infer_request *r = s->pass[i];
        if (!r || !s->take[i] || r->state != INFER__RQ_GEN || !r->spec_max || n_draft >= k) continue;
        s->take[i] += infer__req_draft(r, k - n_draft);
        n_draft += s->take[i] - 1;
    }
    n_gen += n_draft; /* from here on: the generating requests' tokens */
    /* how many prompt tokens this pass takes */
    k = INFER__MAX(0, INFER__MIN(left, n_batch - n_gen));
    if (k > 0 && limit_ms >= 0) {
        double est = infer__sched_estimate(s, n_gen + k);
        if (est < 0) {
            k = INFER__MIN(k, INFER__REQ_FIRST_CHUNK);
        } else if (est > limit_ms) {
            int lo = 0, hi = k; /* the most that fits */
            while (lo < hi) {
                int mid = (lo + hi + 1) / 2;
                if (infer__sched_estimate(s, n_gen + mid) <= limit_ms) lo = mid;
                else hi = mid - 1;
            }
            k = first ? INFER__MAX(lo, INFER__MIN(k, INFER__REQ_MIN_CHUNK)) : lo;
        }
    }
    if (!first && limit_ms >= 0 && (n_gen + k == 0 || infer__sched_estimate(s, n_gen + k) > limit_ms)) {
        infer__pass_release(s);
        return progress;
    }
    if (n_gen + k == 0) {
        infer__pass_release(s);
        return progress;
    }
    /* the batch: the generating requests' tokens, then prompt chunks in start order */
    if (!infer__arr_setlen(s->btok, n_gen + k) || !infer__arr_setlen(s->bseq, n_gen + k) ||
        !infer__arr_setlen(s->blog, n_gen + k)) {
        for (i = 0; i < n; i++)
            if (s->pass[i]) infer__req_end(s->pass[i], INFER_ERR_NOMEM, "out of memory for a forward pass");
        infer__pass_release(s);
        return 1;
    }
    pos = 0;
    for (i = 0; i < n; i++) {
        infer_request *r = s->pass[i];
        int j;
        if (!r || !s->take[i]) continue;
        s->btok[pos] = r->pending;
        s->bseq[pos] = r->seq;
        s->blog[pos] = !r->ending;
        pos++;
        for (j = 1; j < s->take[i]; j++, pos++) { /* its draft, every row's logits kept */
            s->btok[pos] = r->draft[j - 1];
            s->bseq[pos] = r->seq;
            s->blog[pos] = 1;
        }
    }
    for (i = 0; i < n && pos < n_gen + k; i++) {
        infer_request *r = s->pass[i];
        int give, j;
        if (!r || r->state != INFER__RQ_PROMPT) continue;
        give = INFER__MIN((int)stbds_arrlen(r->prompt) - r->fed, n_gen + k - pos);
        if (c->rs && r->cache_prompt) { /* a recurrent state: a checkpoint before the last token */
            int left = (int)stbds_arrlen(r->prompt) - r->fed;
            if (left > 1) give = INFER__MIN(give, left - 1);
            else if (!r->rs_last) infer__req_snap_last(r);
        }
        for (j = 0; j < give; j++) {
            s->btok[pos + j] = r->prompt[r->fed + j];
            s->bseq[pos + j] = r->seq;
            s->blog[pos + j] = 0;
        }
        /* the last prompt token's logits give the first token */
        if (r->fed + give == (int)stbds_arrlen(r->prompt) && r->n_predict > 0) s->blog[pos + give - 1] = 1;
        s->take[i] = give;
        pos += give;
    }
    b.n = pos;
    b.tokens = s->btok;
    b.seq = s->bseq;
    b.logits = s->blog;
    t0 = infer__now_ms();
    s->in_decode = 1;
    st = infer_decode_batch(c, &b, &err);
    s->in_decode = 0;
    if (st == INFER_ERR_CANCELLED) {
        /* the context is as before the pass: the cancelled ones end, the
           others try again (all end if the context's own callback fired) */
        int any = 0;
        for (i = 0; i < n; i++)
            if (s->take[i] && INFER__LOAD(&s->pass[i]->cancel)) any = 1;
        for (i = 0; i < n; i++)
            if (s->take[i] && (!any || INFER__LOAD(&s->pass[i]->cancel)))
                infer__req_end(s->pass[i], INFER_ERR_CANCELLED, any ? "the request was cancelled" : err.msg);
        /* (take[i] is set only for requests alive at the decode, and each ends once) */
        infer__pass_release(s);
        return 1;
    }
    if (st != INFER_OK) {
        for (i = 0; i < n; i++)
            if (s->take[i]) infer__req_end(s->pass[i], st, err.msg);
        infer__pass_release(s);
        return 1;
    }
    /* the tokens are in: sample where logits were kept */
    pos = 0;
    for (i = 0; i < n; i++) {
        infer_request *r = s->pass[i];
        if (!r || !s->take[i] || r->state != INFER__RQ_GEN) continue;
        r->has_pending = 0;
        if (r->ending) infer__req_end(r, INFER_OK, NULL);
        else if (s->take[i] > 1) infer__req_verify(r, pos);
        else infer__req_sample(r, infer_context_logits(c, pos));
        pos += s->take[i];
    }
    for (i = 0; i < n; i++) {
        infer_request *r = s->pass[i];
        if (!r || !s->take[i] || r->state != INFER__RQ_PROMPT) continue;
        r->fed += s->take[i];
        pos += s->take[i];
        if (r->progress && r->progress((float)r->fed / (float)stbds_arrlen(r->prompt), r->progress_user)) {
            infer__req_end(r, INFER_ERR_CANCELLED, "the request was cancelled by its progress callback");
            continue;
        }
        if (r->fed == (int)stbds_arrlen(r->prompt)) {
            infer__mutex_lock(&s->mu);
            r->metrics.n_prompt_tokens = r->fed - r->skip;
            r->metrics.prompt_ms = infer__now_ms() - r->t_prompt0;
            infer__mutex_unlock(&s->mu);
            if (r->n_copy_to && !infer__req_copy_out(r)) continue;
            if (r->n_predict <= 0) infer__req_end(r, INFER_OK, NULL);
            else infer__req_sample(r, infer_context_logits(c, pos - 1));
        }
    }
    ms = infer__now_ms() - t0;
    infer__sched_sample(s, b.n, ms);
    infer__pass_release(s);
    return 1;
}

/* Passes for about budget_ms (see infer_context_step). */
static void infer__sched_step(infer__sched *s, double budget_ms) {
    double t0 = infer__now_ms();
    int first = 1;
    for (;;) {
        /* -1: no limit (budget_ms <= 0); else what is left, never below 0 */
        double left = budget_ms > 0 ? INFER__MAX(0.0, budget_ms - (infer__now_ms() - t0)) : -1;
        if (budget_ms > 0 && !first && left <= 0) break;
        if (!infer__sched_pass(s, left, first)) break;
        if (budget_ms <= 0 || !INFER__LOAD(&s->n_open)) break;
        first = 0;
    }
}

/* ---- the scheduler's life ---- */

static infer__sched *infer__sched_new(infer_context *c) {
    infer__sched *s = (infer__sched *)infer__calloc(1, sizeof *s);
    if (!s) return NULL;
    s->c = c;
    infer__mutex_init(&s->mu);
    infer__cond_init(&s->cv);
    return s;
}

static void infer__sched_free(infer__sched *s) {
    s->c->sched = NULL;
    stbds_arrfree(s->pass);
    stbds_arrfree(s->take);
    stbds_arrfree(s->btok);
    stbds_arrfree(s->bseq);
    stbds_arrfree(s->blog);
    infer__cond_destroy(&s->cv);
    infer__mutex_destroy(&s->mu);
    INFER_FREE(s);
}

/* The scheduler of c, made and registered if it has none. */
static infer__sched *infer__sched_of(infer_context *c) {
    infer__sched *s = infer__ctx_sched(c);
    if (s) return s;
    s = infer__sched_new(c);
    if (!s) return NULL;
    c->sched = s;
    return s;
}

static void infer__req_free_fields(infer_request *r) {
    int i;
    if (r->own_sampler) infer_sampler_free(r->sampler);
    INFER_FREE(r->gbnf);
    for (i = 0; i < r->n_stop; i++) INFER_FREE(r->stop[i]);
    INFER_FREE(r->stop);
    for (i = 0; i < r->n_triggers; i++) INFER_FREE(r->triggers[i]);
    INFER_FREE(r->triggers);
    stbds_arrfree(r->reply);
    INFER_FREE(r->copy_to);
    INFER_FREE(r->think_end);
    stbds_arrfree(r->draft);
    stbds_arrfree(r->hist);
    INFER_FREE(r->rs_snap);
    INFER_FREE(r->rs_last);
    stbds_arrfree(r->hold);
    stbds_arrfree(r->top);
    stbds_arrfree(r->prompt);
    stbds_arrfree(r->text);
    stbds_arrfree(r->toks);
    stbds_arrfree(r->probs);
    stbds_arrfree(r->chosen_p);
}

/* Fills r from p (everything copied); r->sched set by the caller. */
static infer_status infer__req_init(infer_request *r, infer_context *c, const infer_request_params *p,
                                    infer_sampler *borrowed, infer_error *err) {
    const infer_model *m = c->model;
    const char *prompt = p->prompt ? p->prompt : "";
    size_t plen = strlen(prompt);
    int n, i;
    if (p->seq < 0 || p->seq >= infer_context_n_seq(c)) {
        infer__set_error(err, INFER_ERR_ARG, "sequence %d is outside the context's %d", p->seq, infer_context_n_seq(c));
        return INFER_ERR_ARG;
    }
    if (p->grammar && p->json_schema) {
        infer__set_error(err, INFER_ERR_ARG, "a request takes a grammar or a JSON schema, not both");
        return INFER_ERR_ARG;
    }
    if (p->n_stop < 0 || (p->n_stop > 0 && !p->stop) || p->n_probs < 0 || p->n_bias < 0 ||
        (p->n_bias > 0 && (!p->bias_ids || !p->bias))) {
        infer__set_error(err, INFER_ERR_ARG, "bad request parameters (stop, n_probs or bias)");
        return INFER_ERR_ARG;
    }
    r->seq = p->seq;
    r->n_past_req = p->n_past;
    r->n_predict = p->n_predict;
    r->n_probs = p->n_probs;
    r->cache_prompt = p->cache_prompt;
    r->spec_max = INFER__MAX(p->lookup, 0);
    if (p->draft) {
        if (p->draft == c || infer_model_n_vocab(p->draft->model) != infer_model_n_vocab(m)) {
            infer__set_error(err, INFER_ERR_ARG, p->draft == c ? "the draft context is the request's own"
                             : "the draft model's vocabulary (%d tokens) is not the model's (%d)",
                             infer_model_n_vocab(p->draft->model), infer_model_n_vocab(m));
            return INFER_ERR_ARG;
        }
        if (p->seq >= infer_context_n_seq(p->draft)) {
            infer__set_error(err, INFER_ERR_ARG, "the draft context has %d sequences; the request's is %d",
                             infer_context_n_seq(p->draft), p->seq);
            return INFER_ERR_ARG;
        }
        r->draft_ctx = p->draft;
        r->spec_max = INFER__MAX(p->draft_n, 0);
    }
    r->feed_last = 1;
    r->status = INFER_OK;
    r->t_start = infer__now_ms();
    if (borrowed) {
        r->sampler = borrowed;
    } else {
        infer_status st;
        r->sampler = infer_sampler_new(&p->sampling, infer_model_n_vocab(m), err);
        r->own_sampler = 1;
        if (!r->sampler) return err ? err->code : INFER_ERR_NOMEM;
        if (p->n_bias > 0 &&
            (st = infer_sampler_set_logit_bias(r->sampler, p->bias_ids, p->bias, p->n_bias, err)) != INFER_OK)
            return st;
        /* the grammar's text now (a bad schema fails here); compiled against
           the vocabulary as a worker's request starts (infer__request_start)
           or, stepped by infer_context_step, when it begins,
           since that takes a while for a large vocabulary */
        if (p->grammar) r->gbnf = infer__strndup(p->grammar, strlen(p->grammar));
        if (p->json_schema) {
            size_t len = 0;
            infer_status gst = infer_json_schema_to_grammar(p->json_schema, NULL, 0, &len, err);
            if (gst != INFER_OK) return gst;
            r->gbnf = (char *)INFER_MALLOC(len + 1);
            if (r->gbnf && (gst = infer_json_schema_to_grammar(p->json_schema, r->gbnf, len + 1, NULL, err)) != INFER_OK)
                return gst; /* (the second time only memory can fail) */
        }
        if ((p->grammar || p->json_schema) && !r->gbnf) {
            infer__set_error(err, INFER_ERR_NOMEM, "out of memory for the request's grammar");
            return INFER_ERR_NOMEM;
        }
    }
    if (p->n_grammar_triggers > 0 && r->gbnf) {
        if (!p->grammar_triggers) {
            infer__set_error(err, INFER_ERR_ARG, "n_grammar_triggers without grammar_triggers");
            return INFER_ERR_ARG;
        }
        if (!(r->triggers = (char **)infer__calloc((size_t)p->n_grammar_triggers, sizeof *r->triggers))) {
            infer__set_error(err, INFER_ERR_NOMEM, "out of memory for the grammar's triggers");
            return INFER_ERR_NOMEM;
        }
        for (i = 0; i < p->n_grammar_triggers; i++) {
            const char *t = p->grammar_triggers[i] ? p->grammar_triggers[i] : "";
            if (!*t || !strcmp(t, "^")) continue; /* an empty string triggers nothing */
            if (!(r->triggers[r->n_triggers] = infer__strndup(t, strlen(t)))) {
                infer__set_error(err, INFER_ERR_NOMEM, "out of memory for the grammar's triggers");
                return INFER_ERR_NOMEM;
            }
            r->n_triggers++;
        }
        r->lazy = 1;
    }
    if (p->n_copy_to > 0) {
        if (!p->copy_to) {
            infer__set_error(err, INFER_ERR_ARG, "n_copy_to without copy_to");
            return INFER_ERR_ARG;
        }
        for (i = 0; i < p->n_copy_to; i++)
            if (p->copy_to[i] < 0 || p->copy_to[i] >= infer_context_n_seq(c) || p->copy_to[i] == p->seq) {
                infer__set_error(err, INFER_ERR_ARG, "copy_to: sequence %d is outside the context's %d or the request's own",
                                 p->copy_to[i], infer_context_n_seq(c));
                return INFER_ERR_ARG;
            }
        if (!(r->copy_to = (int *)INFER_MALLOC(sizeof(int) * (size_t)p->n_copy_to))) {
            infer__set_error(err, INFER_ERR_NOMEM, "out of memory for copy_to");
            return INFER_ERR_NOMEM;
        }
        memcpy(r->copy_to, p->copy_to, sizeof(int) * (size_t)p->n_copy_to);
        r->n_copy_to = p->n_copy_to;
    }
    r->budget = -1;
    if (p->reasoning_budget >= 0 && (!r->gbnf || infer__req_waits_for(r, p->reasoning_end))) {
        const char *end = p->reasoning_end && *p->reasoning_end ? p->reasoning_end : "</think>";
        if (!(r->think_end = infer__strndup(end, strlen(end)))) {
            infer__set_error(err, INFER_ERR_NOMEM, "out of memory for reasoning_end");
            return INFER_ERR_NOMEM;
        }
        r->budget = p->reasoning_budget;
        r->thinking = p->reasoning_open ? 1 : 0; /* 0: not known until the reply starts */
    }
    r->progress = p->progress;
    r->progress_user = p->progress_user;
    if (p->n_stop > 0) {
        r->stop = (char **)infer__calloc((size_t)p->n_stop, sizeof *r->stop);
        if (!r->stop) {
            infer__set_error(err, INFER_ERR_NOMEM, "out of memory for the stop strings");
            return INFER_ERR_NOMEM;
        }
        for (i = 0; i < p->n_stop; i++) {
            const char *st = p->stop[i] ? p->stop[i] : "";
            if (!*st) continue; /* an empty string stops nothing */
            r->stop[r->n_stop] = infer__strndup(st, strlen(st));
            if (!r->stop[r->n_stop]) {
                infer__set_error(err, INFER_ERR_NOMEM, "out of memory for the stop strings");
                return INFER_ERR_NOMEM;
            }
            r->n_stop++;
        }
    }
    if (p->prompt_tokens) {
        int n_vocab = infer_model_n_vocab(m);
        if (p->n_prompt_tokens < 0) {
            infer__set_error(err, INFER_ERR_ARG, "n_prompt_tokens is %d", p->n_prompt_tokens);
            return INFER_ERR_ARG;
        }
        for (i = 0; i < p->n_prompt_tokens; i++)
            if (p->prompt_tokens[i] < 0 || p->prompt_tokens[i] >= n_vocab) {
                infer__set_error(err, INFER_ERR_ARG, "prompt token %d is %d, outside the vocabulary (%d)", i,
                                 (int)p->prompt_tokens[i], n_vocab);
                return INFER_ERR_ARG;
            }
        if (p->n_prompt_tokens > 0) {
            if (!infer__arr_setlen(r->prompt, p->n_prompt_tokens)) {
                infer__set_error(err, INFER_ERR_NOMEM, "out of memory for the prompt");
                return INFER_ERR_NOMEM;
            }
            memcpy(r->prompt, p->prompt_tokens, (size_t)p->n_prompt_tokens * sizeof *r->prompt);
        }
        return INFER_OK;
    }
    /* (the arguments are good, so tokenizing fails only for want of memory) */
    if (infer_tokenize(m, prompt, plen, NULL, 0, 0, 1, &n, NULL) != INFER_OK) n = -1;
    if (n > 0 && (!infer__arr_setlen(r->prompt, n) ||
                  infer_tokenize(m, prompt, plen, r->prompt, n, 0, 1, NULL, NULL) != INFER_OK))
        n = -1;
    if (n < 0) {
        infer__set_error(err, INFER_ERR_NOMEM, "out of memory tokenizing the prompt");
        return INFER_ERR_NOMEM;
    }
    return INFER_OK;
}

/* Appends r to s's list. */
static void infer__sched_add(infer__sched *s, infer_request *r) {
    r->sched = s;
    infer__mutex_lock(&s->mu);
    if (s->tail) s->tail->next = r;
    else s->head = r;
    s->tail = r;
    s->n_req++;
    s->n_open++;
    INFER__STORE(&s->n_open, s->n_open);
    infer__mutex_unlock(&s->mu);
}

/* ---- the public API ---- */

INFERDEF infer_request_params infer_request_default_params(void) {
    infer_request_params p;
    memset(&p, 0, sizeof p);
    p.n_past = -1;
    p.n_predict = 256;
    p.cache_prompt = 1;
    p.reasoning_budget = -1;
    p.sampling = infer_sampler_default_params();
    return p;
}

/* r joins c's scheduler (made if c has none), and the worker's list with
   it. For a worker, called under its life_mu. */
static infer_status infer__request_join(infer_context *c, infer_request *r, infer_worker *w, infer_error *err) {
    infer__sched *s = infer__ctx_sched(c);
    if (w && s && s->worker && s->worker != w) {
        infer__set_error(err, INFER_ERR_ARG, "the context's requests are already stepped by another worker");
        return INFER_ERR_ARG;
    }
    if (w && s && !s->worker && s->n_req > 0) {
        infer__set_error(err, INFER_ERR_ARG, "the context has requests stepped by infer_context_step: free them first");
        return INFER_ERR_ARG;
    }
    s = infer__sched_of(c);
    if (!s) {
        infer__set_error(err, INFER_ERR_NOMEM, "out of memory for a request");
        return INFER_ERR_NOMEM;
    }
#if INFER__REQ_THREADS
    if (w && !s->worker) {
        /* the context joins the worker's list */
        infer__mutex_lock(&w->mu);
        infer__mutex_lock(&s->mu);
        s->worker = w;
        infer__mutex_unlock(&s->mu);
        s->wnext = w->head;
        w->head = s;
        infer__mutex_unlock(&w->mu);
    }
#endif
    infer__sched_add(s, r);
#if INFER__REQ_THREADS
    if (s->worker) {
        infer_worker *sw = s->worker;
        infer__mutex_lock(&sw->mu);
        infer__cond_broadcast(&sw->wake);
        infer__mutex_unlock(&sw->mu);
    }
#endif
    return INFER_OK;
}

static infer_request *infer__request_start(infer_context *c, const infer_request_params *p, infer_worker *w,
                                           infer_error *err) {
    infer_request_params d = infer_request_default_params();
    infer_request *r;
    infer_status st;
    if (!c) {
        infer__set_error(err, INFER_ERR_ARG, "infer_request_start needs a context");
        return NULL;
    }
    if (!p) p = &d;
    r = (infer_request *)infer__calloc(1, sizeof *r);
    if (!r) {
        infer__set_error(err, INFER_ERR_NOMEM, "out of memory for a request");
        return NULL;
    }
    st = infer__req_init(r, c, p, NULL, err);
#if INFER__REQ_THREADS
    /* A worker's request compiles its grammar here, on the caller's thread:
       on the stepping thread it would stall every request of the batch (a
       large schema's takes seconds). A game loop's stays in its frame step. */
    if (st == INFER_OK && w && r->gbnf) {
        st = infer_sampler_set_grammar(r->sampler, c->model, r->gbnf, NULL, err);
        if (r->lazy) infer__sampler_grammar_wait(r->sampler);
        INFER_FREE(r->gbnf);
        r->gbnf = NULL;
    }
    if (st == INFER_OK && w) {
        infer__mutex_lock(&w->life_mu);
        st = infer__request_join(c, r, w, err);
        infer__mutex_unlock(&w->life_mu);
    }
#endif
    if (st == INFER_OK && !w) st = infer__request_join(c, r, w, err);
    if (st != INFER_OK) {
        infer__req_free_fields(r);
        INFER_FREE(r);
        return NULL;
    }
    return r;
}

INFERDEF infer_request *infer_request_start(infer_context *c, const infer_request_params *p, infer_error *err) {
    return infer__request_start(c, p, NULL, err);
}

INFERDEF int infer_context_step(infer_context *c, double budget_ms) {
    infer__sched *s = c ? infer__ctx_sched(c) : NULL;
    int n;
    if (!s) return 0;
    infer__mutex_lock(&s->mu);
    if (s->worker) {
        n = s->n_open;
        infer__mutex_unlock(&s->mu);
        return n;
    }
    s->stepping = 1;
    infer__mutex_unlock(&s->mu);
    infer__sched_step(s, budget_ms);
    infer__mutex_lock(&s->mu);
    s->stepping = 0;
    n = s->n_open;
    infer__cond_broadcast(&s->cv);
    infer__mutex_unlock(&s->mu);
    return n;
}

INFERDEF int infer_request_done(const infer_request *r) {
    int d;
    infer__mutex_lock(&r->sched->mu);
    d = r->done;
    infer__mutex_unlock(&r->sched->mu);
    return d;
}

INFERDEF infer_status infer_request_status(const infer_request *r, infer_error *err) {
    infer_status st;
    infer__mutex_lock(&r->sched->mu);
    st = r->status;
    if (err) {
        err->code = st;
        snprintf(err->msg, sizeof err->msg, "%s", r->msg);
    }
    infer__mutex_unlock(&r->sched->mu);
    return st;
}

INFERDEF size_t infer_request_text(const infer_request *r, size_t from, char *buf, size_t size) {
    size_t n, len;
    infer__mutex_lock(&r->sched->mu);
    len = stbds_arrlen(r->text);
    n = from < len ? len - from : 0;
    if (buf && size) {
        size_t w = INFER__MIN(n, size - 1);
        if (w) memcpy(buf, r->text + from, w);
        buf[w] = 0;
    }
    infer__mutex_unlock(&r->sched->mu);
    return n;
}

INFERDEF infer_status infer_request_tokens(const infer_request *r, infer_token *out, int max, int *n_tokens,
                                           infer_error *err) {
    int n;
    if (n_tokens) *n_tokens = 0;
    if (!r || max < 0 || (!out && max > 0)) {
        infer__set_error(err, INFER_ERR_ARG, "request tokens: %s", !r ? "no request" : "max with no room for them");
        return INFER_ERR_ARG;
    }
    infer__mutex_lock(&r->sched->mu);
    n = (int)stbds_arrlen(r->toks);
    if (max > 0 && n > 0) memcpy(out, r->toks, (size_t)INFER__MIN(n, max) * sizeof *out);
    infer__mutex_unlock(&r->sched->mu);
    if (n_tokens) *n_tokens = n;
    return INFER_OK;
}

INFERDEF infer_status infer_request_prompt_tokens(const infer_request *r, infer_token *out, int max, int *n_tokens,
                                                  infer_error *err) {
    int n;
    if (n_tokens) *n_tokens = 0;
    if (!r || max < 0 || (!out && max > 0)) {
        infer__set_error(err, INFER_ERR_ARG, "request prompt tokens: %s",
                         !r ? "no request" : "max with no room for them");
        return INFER_ERR_ARG;
    }
    infer__mutex_lock(&r->sched->mu);
    n = (int)stbds_arrlen(r->prompt);
    if (max > 0 && n > 0) memcpy(out, r->prompt, (size_t)INFER__MIN(n, max) * sizeof *out);
    infer__mutex_unlock(&r->sched->mu);
    if (n_tokens) *n_tokens = n;
    return INFER_OK;
}

INFERDEF infer_status infer_request_top_probs(const infer_request *r, int i, infer_token_prob *out, int n,
                                              int *n_probs, infer_error *err) {
    int k = 0, j, bad;
    if (n_probs) *n_probs = 0;
    if (!r || n < 0 || (!out && n > 0)) {
        infer__set_error(err, INFER_ERR_ARG, "request top probs: %s", !r ? "no request" : "n with no room for them");
        return INFER_ERR_ARG;
    }
    infer__mutex_lock(&r->sched->mu);
    bad = i < 0 || i >= (int)stbds_arrlen(r->toks);
    if (!bad && r->n_probs > 0)
        for (j = 0; j < r->n_probs && k < n; j++)
            if (r->probs[(size_t)i * r->n_probs + j].id >= 0) out[k++] = r->probs[(size_t)i * r->n_probs + j];
    infer__mutex_unlock(&r->sched->mu);
    if (bad) {
        infer__set_error(err, INFER_ERR_ARG, "request top probs: token %d was not generated", i);
        return INFER_ERR_ARG;
    }
    if (n_probs) *n_probs = k;
    return INFER_OK;
}

INFERDEF float infer_request_token_prob(const infer_request *r, int i) {
    float p = -1;
    infer__mutex_lock(&r->sched->mu);
    if (i >= 0 && i < (int)stbds_arrlen(r->chosen_p)) p = r->chosen_p[i];
    infer__mutex_unlock(&r->sched->mu);
    return p;
}

INFERDEF int infer_request_cached_tokens(const infer_request *r) {
    int n;
    infer__mutex_lock(&r->sched->mu);
    n = r->n_cached;
    infer__mutex_unlock(&r->sched->mu);
    return n;
}

INFERDEF infer_metrics infer_request_metrics(const infer_request *r) {
    infer_metrics m;
    const infer_context *c = r->sched->c;
    infer__mutex_lock(&r->sched->mu);
    m = r->metrics;
    infer__mutex_unlock(&r->sched->mu);
    m.load_ms = c->model->load_ms;
    m.model_bytes = infer_model_weight_bytes(c->model);
    m.peak_rss_bytes = infer__peak_rss_bytes();
    m.prompt_tps = m.prompt_ms > 0 ? m.n_prompt_tokens * 1000.0 / m.prompt_ms : 0;
    m.gen_tps = m.gen_ms > 0 ? m.n_gen_intervals * 1000.0 / m.gen_ms : 0;
    m.token_ms_avg = m.n_gen_intervals ? m.gen_ms / m.n_gen_intervals : 0;
    return m;
}

/* Ends r as cancelled on the calling thread where no thread steps its
   context (holding off steps meanwhile); else leaves it to the stepper.
   Called with mu held; returns with it held. */
static void infer__req_end_here(infer_request *r) {
    infer__sched *s = r->sched;
    if (s->stepping || r->done) return;
    s->stepping = 1;
    infer__mutex_unlock(&s->mu);
    infer__req_end(r, INFER_ERR_CANCELLED, "the request was cancelled");
    infer__mutex_lock(&s->mu);
    s->stepping = 0;
    infer__cond_broadcast(&s->cv);
}

INFERDEF void infer_request_cancel(infer_request *r) {
    if (!r) return;
    INFER__STORE(&r->cancel, 1); /* what a running pass's abort callback reads */
    infer__mutex_lock(&r->sched->mu);
    infer__req_end_here(r);
    infer__mutex_unlock(&r->sched->mu);
}

static void infer__request_free(infer_request *r) {
    infer__sched *s = r->sched;
    infer_request **pp;
    int last;
    infer_worker *w;
    INFER__STORE(&r->cancel, 1);
    infer__mutex_lock(&s->mu);
    /* a stepper ends it at its next pass (a pass it is in stops between
       layers); else it ends here, its prompt taken back if cut short */
    while (!r->done && s->stepping) infer__cond_wait(&s->cv, &s->mu);
    infer__req_end_here(r);
    while (r->in_pass) infer__cond_wait(&s->cv, &s->mu);
    for (pp = &s->head; *pp != r; pp = &(*pp)->next) {}
    *pp = r->next;
    if (s->tail == r) {
        infer_request *t = s->head;
        while (t && t->next) t = t->next;
        s->tail = t;
    }
    last = --s->n_req == 0;
    w = s->worker;
    infer__mutex_unlock(&s->mu);
    infer__req_free_fields(r);
    INFER_FREE(r);
    if (!last) return;
#if INFER__REQ_THREADS
    if (w) { /* out of the worker's list once no thread of it steps s */
        infer__sched **sp;
        infer__mutex_lock(&w->mu);
        while (s->claimed) infer__cond_wait(&w->idle, &w->mu);
        for (sp = &w->head; *sp && *sp != s; sp = &(*sp)->wnext) {}
        if (*sp) *sp = s->wnext;
        infer__mutex_unlock(&w->mu);
    }
#else
    (void)w;
#endif
    infer__sched_free(s);
}

INFERDEF void infer_request_free(infer_request *r) {
#if INFER__REQ_THREADS
    infer_worker *w;
    if (!r) return;
    /* a worker's requests start and end on any thread: the scheduler they
       share is made and freed under the worker's life_mu */
    infer__mutex_lock(&r->sched->mu);
    w = r->sched->worker;
    infer__mutex_unlock(&r->sched->mu);
    if (w) infer__mutex_lock(&w->life_mu);
    infer__request_free(r);
    if (w) infer__mutex_unlock(&w->life_mu);
#else
    if (r) infer__request_free(r);
#endif
}

/* ---- the worker ---- */

#if INFER__REQ_THREADS
static void infer__worker_main(void *arg) {
    infer_worker *w = (infer_worker *)arg;
    infer__mutex_lock(&w->mu);
    for (;;) {
        infer__sched *s, **sp, *pick = NULL;
        double slice_ms = w->slice_ms;
        if (w->stop) break;
        for (s = w->head; s; s = s->wnext)
            if (!s->claimed && INFER__LOAD(&s->n_open) > 0) {
                pick = s;
                break;
            }
        if (!pick) {
            infer__cond_wait(&w->wake, &w->mu);
            continue;
        }
        pick->claimed = 1;
        /* to the end of the list, so other contexts get the next turn */
        for (sp = &w->head; *sp != pick; sp = &(*sp)->wnext) {}
        *sp = pick->wnext;
        pick->wnext = NULL;
        for (sp = &w->head; *sp; sp = &(*sp)->wnext) {}
        *sp = pick;
        infer__mutex_unlock(&w->mu);

        infer__mutex_lock(&pick->mu);
        pick->stepping = 1;
        infer__mutex_unlock(&pick->mu);
        infer__sched_step(pick, slice_ms);
        infer__mutex_lock(&pick->mu);
        pick->stepping = 0;
        infer__cond_broadcast(&pick->cv);
        infer__mutex_unlock(&pick->mu);

        infer__mutex_lock(&w->mu);
        pick->claimed = 0;
        infer__cond_broadcast(&w->idle);
    }
    infer__mutex_unlock(&w->mu);
}
#endif

INFERDEF infer_worker *infer_worker_new(int n_threads, infer_error *err) {
#if INFER__REQ_THREADS
    infer_worker *w;
    int i;
    if (n_threads < 1 || n_threads > 256) {
        infer__set_error(err, INFER_ERR_ARG, "a worker needs 1 to 256 threads, not %d", n_threads);
        return NULL;
    }
    w = (infer_worker *)infer__calloc(1, sizeof *w);
    if (w) w->threads = (infer__thread *)infer__calloc((size_t)n_threads, sizeof *w->threads);
    if (!w || !w->threads) {
        INFER_FREE(w);
        infer__set_error(err, INFER_ERR_NOMEM, "out of memory for a worker");
        return NULL;
    }
    infer__mutex_init(&w->mu);
    infer__mutex_init(&w->life_mu);
    infer__cond_init(&w->wake);
    infer__cond_init(&w->idle);
    w->slice_ms = INFER__WORKER_SLICE_MS;
    for (i = 0; i < n_threads; i++) {
        if (!infer__thread_start(&w->threads[i], infer__worker_main, w)) break;
        w->n_threads++;
    }
    if (!w->n_threads) {
        infer_worker_free(w);
        infer__set_error(err, INFER_ERR_NOMEM, "could not start a worker thread");
        return NULL;
    }
    return w;
#else
    (void)n_threads;
    infer__set_error(err, INFER_ERR_UNSUPPORTED, "workers need threads, which this build lacks");
    return NULL;
#endif
}

INFERDEF infer_request *infer_worker_start(infer_worker *w, infer_context *c, const infer_request_params *p,
                                           infer_error *err) {
    if (!w) {
        infer__set_error(err, INFER_ERR_ARG, "infer_worker_start needs a worker");
        return NULL;
    }
    return infer__request_start(c, p, w, err);
}

INFERDEF void infer_worker_set_slice(infer_worker *w, double ms) {
#if INFER__REQ_THREADS
    if (!w) return;
    infer__mutex_lock(&w->mu);
    w->slice_ms = ms;
    infer__mutex_unlock(&w->mu);
#else
    (void)w, (void)ms;
#endif
}

INFERDEF void infer_worker_free(infer_worker *w) {
#if INFER__REQ_THREADS
    infer__sched *s;
    int i;
    if (!w) return;
    /* a running pass stops between layers once its requests are cancelled */
    infer__mutex_lock(&w->mu);
    w->stop = 1;
    for (s = w->head; s; s = s->wnext) {
        infer_request *r;
        infer__mutex_lock(&s->mu);
        for (r = s->head; r; r = r->next) INFER__STORE(&r->cancel, 1);
        infer__mutex_unlock(&s->mu);
    }
    infer__cond_broadcast(&w->wake);
    infer__mutex_unlock(&w->mu);
    for (i = 0; i < w->n_threads; i++) infer__thread_join(w->threads[i]);
    /* the contexts go back to infer_context_step, their requests ended */
    while ((s = w->head)) {
        w->head = s->wnext;
        s->wnext = NULL;
        infer__mutex_lock(&s->mu);
        s->worker = NULL;
        s->claimed = 0;
        infer__mutex_unlock(&s->mu);
        infer__sched_end_all(s, INFER_ERR_CANCELLED, "the request was cancelled (its worker was freed)");
    }
    infer__cond_destroy(&w->wake);
    infer__cond_destroy(&w->idle);
    infer__mutex_destroy(&w->mu);
    infer__mutex_destroy(&w->life_mu);
    INFER_FREE(w->threads);
    INFER_FREE(w);
#else
    (void)w;
#endif
}

/* ---- infer_generate: a request stepped to its end on this thread ---- */

static infer_status infer__generate(infer_context *c, infer_sampler *smp, const char *prompt, int n_predict,
                           infer_piece_fn on_piece, void *user, infer_error *err) {
    infer_request_params p = infer_request_default_params();
    infer__sched s;
    infer_request r;
    size_t sent = 0;
    int n, stop = 0;
    infer_status st;
    memset(&s, 0, sizeof s);
    memset(&r, 0, sizeof r);
    s.c = c;
    infer__mutex_init(&s.mu);
    infer__cond_init(&s.cv);
    p.prompt = prompt;
    p.n_predict = n_predict;
    st = infer__req_init(&r, c, &p, smp, err);
    r.feed_last = 0;
    r.bos_always = 1;
    stbds_arrsetlen(c->prompt_tokens, 0);
    stbds_arrsetlen(c->gen_tokens, 0);
    if (st == INFER_OK && !stbds_arrlen(r.prompt) && !(infer_model_add_bos(c->model) && infer_model_bos(c->model) >= 0)) {
        infer__set_error(err, INFER_ERR_ARG, "the prompt is empty and the model adds no BOS token");
        st = INFER_ERR_ARG;
    }
    if (st == INFER_OK) {
        infer__sched_add(&s, &r);
        s.stepping = 1;
        while (!r.done) {
            infer__sched_pass(&s, -1, 1);
            n = (int)stbds_arrlen(r.text);
            if (on_piece && (size_t)n > sent && !stop) {
                stop = on_piece(r.text + sent, n - (int)sent, user) != 0;
                sent = (size_t)n;
                if (stop && !r.done) {
                    r.ending = 1; /* what was streamed stands; nothing more is held back */
                    infer__req_end(&r, INFER_OK, NULL);
                }
            }
        }
        st = r.status;
        if (st != INFER_OK) infer__set_error(err, st, "%s", r.msg);
        /* the context's own record of it */
        {
            infer_metrics *m = &c->metrics, *q = &r.metrics;
            m->n_prompt_tokens += q->n_prompt_tokens;
            m->prompt_ms += q->prompt_ms;
            if (q->n_gen_tokens) m->ttft_ms = q->ttft_ms;
            m->n_gen_tokens += q->n_gen_tokens;
            if (q->n_gen_intervals) {
                if (m->n_gen_intervals == 0 || q->token_ms_min < m->token_ms_min) m->token_ms_min = q->token_ms_min;
                if (q->token_ms_max > m->token_ms_max) m->token_ms_max = q->token_ms_max;
            }
            m->n_gen_intervals += q->n_gen_intervals;
            m->gen_ms += q->gen_ms;
        }
        if (!infer__arr_room(c->prompt_tokens, stbds_arrlen(r.prompt)) || !infer__arr_room(c->gen_tokens, stbds_arrlen(r.toks))) {
            if (st == INFER_OK) infer__set_error(err, INFER_ERR_NOMEM, "out of memory for the generated tokens' record");
            st = INFER_ERR_NOMEM;
        } else {
            if (stbds_arrlen(r.prompt))
                memcpy(stbds_arraddnptr(c->prompt_tokens, stbds_arrlen(r.prompt)), r.prompt, stbds_arrlen(r.prompt) * sizeof *r.prompt);
            if (stbds_arrlen(r.toks))
                memcpy(stbds_arraddnptr(c->gen_tokens, stbds_arrlen(r.toks)), r.toks, stbds_arrlen(r.toks) * sizeof *r.toks);
        }
    }
    infer__req_free_fields(&r);
    stbds_arrfree(s.pass);
    stbds_arrfree(s.take);
    stbds_arrfree(s.btok);
    stbds_arrfree(s.bseq);
    stbds_arrfree(s.blog);
    infer__cond_destroy(&s.cv);
    infer__mutex_destroy(&s.mu);
    return st;
}

INFERDEF infer_status infer_generate(infer_context *c, infer_sampler *s, const char *prompt, int n_predict,
                                     infer_piece_fn on_piece, void *user, infer_error *err) {
    if (!c || !s) {
        infer__set_error(err, INFER_ERR_ARG, "infer_generate needs a context and a sampler");
        return INFER_ERR_ARG;
    }
    return infer__generate(c, s, prompt, n_predict, on_piece, user, err);
}

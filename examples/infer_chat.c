/* infer chat - an interactive multi-turn chat with a model's chat template.
   Each line on stdin is a user turn (a pipe works too; EOF ends the chat);
   the reply streams to stdout. The KV cache is kept across turns: each turn
   decodes only what it adds to the formatted conversation (the end of the
   last reply, the new user message, the assistant prompt). When the context
   is full the chat says so on stderr and ends (no turns are dropped).
   Where the template writes a reply otherwise than it was generated (Qwen3
   drops an earlier reply's reasoning), the next turn takes the cache back to
   before that reply and feeds it again as the template writes it.
   --think off asks Qwen3 and SmolLM3 for answers without reasoning.
   Each reply is a request (infer_request_start) stepped one forward pass
   at a time: --stop strings end it, and with --context-shift a full
   context drops its older half (after --keep positions) and goes on. */
#define _XOPEN_SOURCE 700 /* isatty */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

int infer_cmd_chat(int argc, char **argv);
int cli_output_request(const cli_output *o, const infer_model *m, infer_request_params *p, char **owned); /* infer.c */

#define CHAT_MAX_STOP 16

typedef struct chat_opts {
    const char *model, *system;
    int n_predict, threads, n_ctx;
    const char *stop[CHAT_MAX_STOP];
    int n_stop, shift, keep;
    cli_output out; /* --grammar, --json-schema, --logit-bias, --n-probs */
    infer_device device;
    infer_type kv_type;
    infer_sampler_params sp;
    int no_think; /* --think off */
} chat_opts;

static int chat_parse(int argc, char **argv, chat_opts *o) {
    int i;
    memset(o, 0, sizeof *o);
    o->n_predict = 256;
    o->threads = 2;
    o->device = INFER_DEVICE_AUTO;
    o->sp = infer_sampler_default_params();
    for (i = 2; i < argc; i += 2) { /* every option but --context-shift takes a value */
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int ok = 1;
        static const char *const opts[] = {"-m", "--model", "--system", "-n", "-t", "--threads", "-c", "--ctx",
                                           "--temp", "--top-k", "--top-p", "--min-p", "--repeat-penalty", "--seed",
                                           "--device", "--kv-type", "--think", "--stop", "--keep"};
        size_t k;
        if (!strcmp(a, "--context-shift")) {
            o->shift = 1;
            i--;
            continue;
        }
        if (cli_output_flag(a)) {
            if (!v) return cli_fail("option %s needs a value", a), 0;
            cli_output_option(a, v, &o->out, &ok);
            if (!ok) return fprintf(stderr, "infer: bad value '%s' for %s\n", v, a), 0;
            continue;
        }
        for (k = 0; k < sizeof opts / sizeof opts[0] && strcmp(a, opts[k]); k++) {}
        if (k == sizeof opts / sizeof opts[0]) return cli_fail("unknown option %s (see infer --help)", a), 0;
        if (!v) return cli_fail("option %s needs a value", a), 0;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) o->model = v;
        else if (!strcmp(a, "--system")) o->system = v;
        else if (!strcmp(a, "--device")) {
            if (!cli_device(v, &o->device)) return 0;
        } else if (!strcmp(a, "--kv-type")) {
            if (!cli_kv_type(v, &o->kv_type)) return 0;
        } else if (!strcmp(a, "--think")) {
            ok = !strcmp(v, "on") || !strcmp(v, "off");
            o->no_think = !strcmp(v, "off");
        } else if (!strcmp(a, "--stop")) {
            if (o->n_stop == CHAT_MAX_STOP) return cli_fail("%s", "at most 16 --stop strings"), 0;
            ok = *v != 0;
            o->stop[o->n_stop++] = v;
        } else if (!strcmp(a, "--keep")) ok = cli_int(v, &o->keep) && o->keep >= 0;
        else if (!strcmp(a, "-n")) ok = cli_int(v, &o->n_predict) && o->n_predict >= 0;
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) ok = cli_int(v, &o->threads) && o->threads >= 1 && o->threads <= 256;
        else if (!strcmp(a, "-c") || !strcmp(a, "--ctx")) ok = cli_int(v, &o->n_ctx) && o->n_ctx >= 0;
        else cli_sampling_option(a, v, &o->sp, &ok);
        if (!ok) {
            fprintf(stderr, "infer: bad value '%s' for %s\n", v, a);
            return 0;
        }
    }
    if (!o->model) return cli_fail("%s", "no model given (-m MODEL)"), 0;
    return 1;
}

/* One line of stdin without its newline, or NULL at EOF. Caller frees. */
static char *chat_read_line(FILE *f) {
    size_t cap = 256, n = 0;
    char *s = (char *)malloc(cap);
    int c;
    if (!s) return NULL;
    while ((c = fgetc(f)) != EOF && c != '\n') {
        if (n + 1 == cap) {
            char *t = (char *)realloc(s, cap *= 2);
            if (!t) return free(s), NULL;
            s = t;
        }
        s[n++] = (char)c;
    }
    if (c == EOF && n == 0) return free(s), NULL;
    if (n && s[n - 1] == '\r') n--;
    s[n] = 0;
    return s;
}

/* A growable string. */
typedef struct chat_str {
    char *p;
    size_t n, cap;
} chat_str;

static int chat_append(chat_str *s, const char *p, size_t n) {
    if (s->n + n + 1 > s->cap) {
        size_t cap = (s->n + n + 1) * 2;
        char *q = (char *)realloc(s->p, cap);
        if (!q) return 0;
        s->p = q;
        s->cap = cap;
    }
    memcpy(s->p + s->n, p, n);
    s->n += n;
    s->p[s->n] = 0;
    return 1;
}

typedef struct chat_state {
    infer_model *m;
    infer_context *c;
    infer_chat_template tmpl;
    infer_chat_message *msgs;
    int n_msgs, cap_msgs;
    int n_fed;       /* messages whose text is in the KV cache */
    int reply_open;  /* the cache ends in a reply whose end-of-turn text is not fed yet */
    /* where to go back to when the last reply must be fed again: the cache
       before its assistant prompt (else before its whole turn), and n_fed
       and reply_open there */
    int back_past, back_fed, back_open;
    const chat_opts *o;
    infer_request_params base; /* each reply's output control */
    int n_turns;
    int shifted;     /* the context dropped positions: back_past no longer holds */
} chat_state;

static int chat_push(chat_state *st, const char *role, const char *content, size_t len) {
    char *copy = (char *)malloc(len + 1);
    if (!copy) return 0;
    memcpy(copy, content, len);
    copy[len] = 0;
    if (st->n_msgs == st->cap_msgs) {
        int cap = st->cap_msgs ? st->cap_msgs * 2 : 16;
        infer_chat_message *p = (infer_chat_message *)realloc(st->msgs, (size_t)cap * sizeof *p);
        if (!p) return free(copy), 0;
        st->msgs = p;
        st->cap_msgs = cap;
    }
    st->msgs[st->n_msgs].role = role;
    st->msgs[st->n_msgs].content = copy;
    st->n_msgs++;
    return 1;
}

/* Text of a formatting call, malloc'd; NULL when out of memory. */
static char *chat_format(const chat_state *st, int n, int from, int add) {
    int len = infer_chat_format(&st->tmpl, st->msgs, n, from, add, NULL, 0);
    char *s = len >= 0 ? (char *)malloc((size_t)len + 1) : NULL;
    if (s) infer_chat_format(&st->tmpl, st->msgs, n, from, add, s, (size_t)len + 1);
    return s;
}

/* The cache holds the last reply as it was generated: the assistant prompt,
   the reply, the end-of-turn text. Where the template writes that message
   otherwise, the cache goes back to before that assistant prompt (or to
   nothing, where a sliding window cannot go back) and feeds it again. */
static void chat_rewrite_reply(chat_state *st) {
    int r = st->n_msgs - 2; /* the reply; the new user message follows it */
    int ne = infer_chat_end_of_turn(&st->tmpl, NULL, 0);
    char *gen, *hist, *eot;
    int same = 1;
    if (!st->reply_open || r < 0 || ne < 0 || st->shifted) return;
    gen = chat_format(st, r, r, 1);
    hist = chat_format(st, r + 1, r, 0);
    eot = (char *)malloc((size_t)ne + 1);
    if (gen && hist && eot) {
        size_t ng = strlen(gen), nr = strlen(st->msgs[r].content);
        infer_chat_end_of_turn(&st->tmpl, eot, (size_t)ne + 1);
        same = strlen(hist) == ng + nr + (size_t)ne && !memcmp(hist, gen, ng) &&
               !memcmp(hist + ng, st->msgs[r].content, nr) && !memcmp(hist + ng + nr, eot, (size_t)ne);
    }
    free(gen), free(hist), free(eot);
    if (same) return;
    infer_context_truncate(st->c, st->back_past);
    if (infer_context_n_past(st->c) == st->back_past) {
        st->n_fed = st->back_fed;
        st->reply_open = st->back_open;
    } else {
        infer_context_truncate(st->c, 0);
        st->n_fed = 0;
        st->reply_open = 0;
    }
}

/* The text this turn adds to the cache: the end of the previous reply, the
   messages not yet fed, the assistant prompt. */
static char *chat_turn_text(const chat_state *st) {
    int ne = st->reply_open ? infer_chat_end_of_turn(&st->tmpl, NULL, 0) : 0;
    int nf = infer_chat_format(&st->tmpl, st->msgs, st->n_msgs, st->n_fed, 1, NULL, 0);
    char *text;
    if (ne < 0 || nf < 0) return NULL;
    text = (char *)malloc((size_t)ne + (size_t)nf + 1);
    if (!text) return NULL;
    text[0] = 0;
    if (ne) infer_chat_end_of_turn(&st->tmpl, text, (size_t)ne + 1);
    infer_chat_format(&st->tmpl, st->msgs, st->n_msgs, st->n_fed, 1, text + ne, (size_t)nf + 1);
    return text;
}

/* Runs one turn for the last (user) message. Returns 0 to go on, 1 when the
   context is full (said on stderr), -1 on an error. */
static int chat_turn(chat_state *st, int n_predict, int tty) {
    infer_error err;
    infer_request_params rp;
    infer_request *r;
    chat_str reply = {NULL, 0, 0};
    char *text;
    infer_token *toks = NULL;
    size_t printed = 0;
    int n_shown = 0, n, add_bos, n_ctx = infer_context_n_ctx(st->c), full = 0, n_gen, past0;
    int n_gp = infer_chat_format(&st->tmpl, st->msgs, st->n_msgs, st->n_msgs, 1, NULL, 0), n_a;
    infer_status status;
    chat_rewrite_reply(st);
    st->back_past = infer_context_n_past(st->c);
    st->back_fed = st->n_fed;
    st->back_open = st->reply_open;
    text = chat_turn_text(st);
    if (!text) return fprintf(stderr, "infer: out of memory\n"), -1;
    add_bos = infer_context_n_past(st->c) == 0 && infer_model_add_bos(st->m);
    n = infer_tokenize(st->m, text, strlen(text), NULL, 0, add_bos, 1);
    if (n < 0 || !(toks = (infer_token *)malloc(((size_t)n + 1) * sizeof *toks))) {
        free(text);
        return fprintf(stderr, "infer: the turn could not be tokenized\n"), -1;
    }
    infer_tokenize(st->m, text, strlen(text), toks, n, add_bos, 1);
    /* where the assistant prompt begins, if it begins on a token boundary
       (its own tokens end the turn's): a reply fed again starts there */
    n_a = n_gp > 0 && (size_t)n_gp <= strlen(text) ? infer_tokenize(st->m, text, strlen(text) - (size_t)n_gp, NULL, 0, add_bos, 1)
                                                   : -1;
    if (n_a >= 0 && n_a <= n) {
        infer_token *a = (infer_token *)malloc(((size_t)n_a + 1) * sizeof *a);
        if (a && infer_tokenize(st->m, text, strlen(text) - (size_t)n_gp, a, n_a, add_bos, 1) == n_a &&
            !memcmp(a, toks, (size_t)n_a * sizeof *a)) {
            st->back_past += n_a;
            st->back_fed = st->n_msgs;
            st->back_open = 0;
        }
        free(a);
    }
    free(toks);
    /* room for the turn and at least one reply token (a context that
       shifts makes room itself) */
    if (!st->o->shift && infer_context_n_past(st->c) + n + 1 > n_ctx) {
        free(text);
        fprintf(stderr, "infer: the context is full (%d of %d tokens used; this turn needs %d more): ending the chat\n",
                infer_context_n_past(st->c), n_ctx, n);
        return 1;
    }
    /* the reply: a request on the cache, stepped a forward pass at a time */
    rp = st->base;
    rp.prompt = text;
    rp.n_predict = n_predict;
    rp.sampling = st->o->sp;
    rp.sampling.seed += (uint64_t)st->n_turns++; /* each turn draws afresh */
    rp.stop = st->o->stop;
    rp.n_stop = st->o->n_stop;
    past0 = infer_context_n_past(st->c);
    r = infer_request_start(st->c, &rp, &err);
    free(text);
    if (!r) return fprintf(stderr, "infer: %s\n", err.msg), -1;
    st->n_fed = st->n_msgs;
    for (;;) {
        int left = infer_context_step(st->c, 0);
        size_t len = infer_request_text(r, printed, NULL, 0);
        if (len) {
            char *p = (char *)malloc(len + 1);
            if (!p) break; /* the reply ends short; the request is freed below */
            infer_request_text(r, printed, p, len + 1);
            fwrite(p, 1, len, stdout);
            fflush(stdout);
            chat_append(&reply, p, len);
            printed += len;
            free(p);
        }
        if (st->o->out.n_probs > 0) /* each token's most probable ones, on stderr */
            for (; n_shown < infer_request_tokens(r, NULL, 0); n_shown++) {
                infer_token_prob top[CLI_MAX_PROBS];
                int k = infer_request_top_probs(r, n_shown, top, st->o->out.n_probs), j;
                fprintf(stderr, "[probs]");
                for (j = 0; j < k; j++) {
                    char piece[256];
                    int pl = infer_token_to_piece(st->m, top[j].id, piece, sizeof piece);
                    fprintf(stderr, " '%.*s' %.3f", pl > 0 && pl <= (int)sizeof piece ? pl : 0, piece, top[j].p);
                }
                fputc('\n', stderr);
            }
        if (!left) break;
    }
    status = infer_request_status(r, &err);
    /* the tokens the cache took: every one generated but an end of generation */
    n_gen = infer_request_tokens(r, NULL, 0);
    if (n_gen > 0) {
        infer_token *all = (infer_token *)malloc((size_t)n_gen * sizeof *all);
        if (all) {
            infer_request_tokens(r, all, n_gen);
            if (infer_model_is_eog(st->m, all[n_gen - 1])) n_gen--;
            free(all);
        }
    }
    if (st->o->shift && infer_context_n_past(st->c) != past0 + n + n_gen) st->shifted = 1;
    infer_request_free(r);
    fputc('\n', stdout);
    fflush(stdout);
    if (status == INFER_ERR_CONTEXT_FULL) full = 1;
    else if (status != INFER_OK) {
        free(reply.p);
        return fprintf(stderr, "infer: %s\n", err.msg), -1;
    }
    if (!chat_push(st, "assistant", reply.p ? reply.p : "", reply.n)) {
        free(reply.p);
        return fprintf(stderr, "infer: out of memory\n"), -1;
    }
    free(reply.p);
    st->n_fed = st->n_msgs;
    st->reply_open = 1;
    (void)tty;
    fprintf(stderr, "[%d tokens read, %d generated, %d of %d in context]\n", n, n_gen,
            infer_context_n_past(st->c), n_ctx);
    if (full) {
        fprintf(stderr, "infer: the context is full (%d tokens): ending the chat\n", n_ctx);
        return 1;
    }
    return 0;
}

int infer_cmd_chat(int argc, char **argv) {
    chat_opts o;
    chat_state st;
    infer_error err;
    infer_model_params mp = infer_model_default_params();
    infer_context_params cp = infer_context_default_params();
    int rc = 0, tty, i;
    char *line, *owned = NULL;
    if (!chat_parse(argc, argv, &o)) return 1;
    memset(&st, 0, sizeof st);
    mp.device = o.device;
    st.m = infer_model_load(o.model, &mp, &err);
    if (!st.m) return cli_fail("%s", err.msg);
    if (infer_model_warning(st.m)) fprintf(stderr, "infer: warning: %s\n", infer_model_warning(st.m));
    cp.n_threads = o.threads;
    cp.n_ctx = o.n_ctx;
    cp.kv_type = o.kv_type;
    cp.full_policy = o.shift ? INFER_FULL_SHIFT : INFER_FULL_STOP;
    cp.n_keep = o.keep;
    st.o = &o;
    st.c = infer_context_new(st.m, &cp, &err);
    if (!st.c) {
        infer_model_free(st.m);
        return cli_fail("%s", err.msg);
    }
    st.base = infer_request_default_params();
    if (!cli_output_request(&o.out, st.m, &st.base, &owned)) {
        rc = 1;
        goto done;
    }
    st.tmpl = infer_chat_template_detect(st.m);
    st.tmpl.no_think = o.no_think;
    if (st.tmpl.fallback)
        fprintf(stderr, "infer: warning: the model's chat template is missing or not recognized; using ChatML\n");
    if (o.system && !chat_push(&st, "system", o.system, strlen(o.system))) {
        rc = cli_fail("%s", "out of memory");
        goto done;
    }
    tty = isatty(0);
    for (;;) {
        int r;
        if (tty) fputs("> ", stdout), fflush(stdout);
        line = chat_read_line(stdin);
        if (!line) break;
        if (!line[0]) {
            free(line);
            continue;
        }
        if (!chat_push(&st, "user", line, strlen(line))) {
            free(line);
            rc = cli_fail("%s", "out of memory");
            break;
        }
        free(line);
        r = chat_turn(&st, o.n_predict, tty);
        if (r < 0) rc = 1;
        if (r) break;
    }
done:
    free(owned);
    for (i = 0; i < st.n_msgs; i++) free((void *)st.msgs[i].content);
    free(st.msgs);
    infer_context_free(st.c);
    infer_model_free(st.m);
    return rc;
}

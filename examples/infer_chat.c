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
   A template that writes <think> (Qwen3, SmolLM3, DeepSeek R1 distills)
   has each reply split by infer_output_parser: the reasoning is shown
   apart from the answer (see chat_notes), only the answer goes into the
   conversation, and --reasoning-budget N closes the reasoning after N
   tokens. --chat-template-file FILE (or --jinja, the model's own template)
   formats the chat through the Jinja interpreter instead of the built-in
   formats: each turn renders the whole conversation and the request's
   prompt reuse feeds only what the cache does not hold yet.
   Each reply is a request (infer_request_start) stepped one forward pass
   at a time: --stop strings end it, and with --context-shift a full
   context drops its older half (after --keep positions) and goes on. */
#define _XOPEN_SOURCE 700 /* isatty */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

int infer_cmd_chat(int argc, char **argv);

static const char *const chat_notes =
    "\n"
    "  -n N is per reply; the sampling, --grammar ... --n-probs, --lookup, --draft and RoPE flags\n"
    "  work as run's (infer run --help); the draft model follows the conversation in a context of\n"
    "  its own, as long as the chat's.\n"
    "  --think off also sets a Jinja template's enable_thinking (false), --think on too (true).\n"
    "  --reasoning-effort low|medium|high sets a Jinja template's reasoning_effort (gpt-oss's\n"
    "  \"Reasoning: high\"); a harmony template's replies are split by channel, analysis the reasoning.\n"
    "  A model whose own template is harmony's (gpt-oss) or Gemma 4's is chatted with through it, as\n"
    "  --jinja; Gemma 4's thinking channel is its reasoning (it thinks with --think on).\n"
    "  --reasoning show|hide: a reply's reasoning (<think>...</think>, where the template writes\n"
    "  one) is shown apart from the answer (show, the default) or not at all (hide). On a terminal\n"
    "  it comes first on stdout, dimmed (not under NO_COLOR), after \"[reasoning] \"; when stdout is\n"
    "  not a terminal it goes to stderr, each of its lines after \"[reasoning] \", so stdout holds\n"
    "  only the answers. Only the answer is kept in the conversation.\n"
    "  --reasoning-budget N: a reply still reasoning after N tokens is made to close its reasoning\n"
    "  (\"</think>\") and answer (not with --grammar or --json-schema, which decide the text).\n"
    "  --chat-template-file F: the Jinja template in F (messages, add_generation_prompt, bos_token,\n"
    "  eos_token) instead of the built-in format recognized from the model's template; --jinja:\n"
    "  the same with the model's own template (tokenizer.chat_template).\n"
    "  A template that fails or calls raise_exception ends the chat with its one-line error\n"
    "  (exit 1).\n";
int cli_output_request(const cli_output *o, const infer_model *m, infer_request_params *p, char **owned); /* infer.c */

typedef struct chat_opts {
    cli_common c; /* -m, -n, -t, -c, sampling, --device, --kv-type, --stop, --keep, RoPE, --lookup, --draft */
    const char *system;
    int shift;
    cli_output out; /* --grammar, --json-schema, --logit-bias, --n-probs */
    int no_think; /* --think off */
    int think_on; /* --think on given (Gemma 4 thinks only when asked) */
    const char *effort;         /* --reasoning-effort (NULL: not given) */
    int hide_reasoning;         /* --reasoning hide */
    int reasoning_budget;       /* --reasoning-budget (-1: none) */
    const char *template_file;  /* --chat-template-file */
    int jinja_own;              /* --jinja */
} chat_opts;

/* 1: parsed; 0: a bad command line (said on stderr); 2: --help was printed. */
static int chat_parse(int argc, char **argv, chat_opts *o) {
    int i;
    memset(o, 0, sizeof *o);
    cli_common_defaults(&o->c, 256);
    o->reasoning_budget = -1;
    for (i = 2; i < argc; i++) {
        const char *a = argv[i], *v;
        int ok = 1, shared, takes = cli_flag_check(argc, argv, i, CLI_CMD_CHAT);
        if (takes < 0) return 0;
        v = takes ? argv[i + 1] : NULL;
        if (cli_is_help(a)) {
            printf("usage: infer chat -m MODEL [options]   (user turns from stdin, one a line; EOF ends the chat)\n");
            cli_print_options(stdout, CLI_CMD_CHAT);
            fputs(chat_notes, stdout);
            return 2;
        }
        if (!strcmp(a, "--context-shift")) o->shift = 1;
        else if (!strcmp(a, "--jinja")) o->jinja_own = 1;
        else if (cli_output_option(a, v, &o->out, &ok)) {
        } else if (!strcmp(a, "--system")) o->system = v;
        else if (!strcmp(a, "--think")) {
            ok = !strcmp(v, "on") || !strcmp(v, "off");
            o->no_think = !strcmp(v, "off");
            o->think_on = !strcmp(v, "on");
        } else if (!strcmp(a, "--reasoning")) {
            ok = !strcmp(v, "show") || !strcmp(v, "hide");
            o->hide_reasoning = !strcmp(v, "hide");
        } else if (!strcmp(a, "--reasoning-effort")) {
            ok = !strcmp(v, "low") || !strcmp(v, "medium") || !strcmp(v, "high");
            o->effort = v;
        } else if (!strcmp(a, "--reasoning-budget")) ok = cli_int(v, &o->reasoning_budget) && o->reasoning_budget >= 0;
        else if (!strcmp(a, "--chat-template-file")) o->template_file = v;
        else if ((shared = cli_common_option(a, v, &o->c, &ok)) < 0) return 0;
        else if (!shared) return cli_fail("option %s is not handled (a bug)", a), 0;
        if (!ok) {
            fprintf(stderr, "infer: bad value '%s' for %s\n", v, a);
            return 0;
        }
        i += takes;
    }
    cli_rope_defaults(&o->c.rope);
    if (!o->c.model) return cli_fail("%s", "no model given (-m MODEL)"), 0;
    if (o->template_file && o->jinja_own) return cli_fail("%s", "give only one of --chat-template-file and --jinja"), 0;
    if (o->c.draft_n && !o->c.draft) return cli_fail("%s", "--draft-n needs --draft MODEL"), 0;
    if (o->c.draft && o->c.lookup) return cli_fail("%s", "give only one of --lookup and --draft"), 0;
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
    infer_model *draft_m; /* --draft, and its context */
    infer_context *draft_c;
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
    char *jinja;     /* a Jinja template's text (--chat-template-file, --jinja), or NULL:
                        the built-in format tmpl */
    char bos[64], eos[64]; /* the model's BOS and EOS texts, for the Jinja template */
    char *held;      /* Jinja: the text the cache holds (the last prompt and reply) */
    int split;       /* replies go through infer_output_parser (the template writes <think>) */
    infer_tool_format channels; /* ... by the template's own channels: harmony's (gpt-oss's) or
                                  Gemma 4's thinking channel; else INFER_TOOL_FORMAT_NONE */
    int out_tty;     /* stdout is a terminal: reasoning shown there, before the answer */
    int faint;       /* ... dimmed (ANSI faint; not under NO_COLOR) */
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
    size_t len = 0;
    char *s = infer_chat_format(&st->tmpl, st->msgs, n, from, add, NULL, 0, &len, NULL) == INFER_OK
                  ? (char *)malloc(len + 1) : NULL;
    if (s) infer_chat_format(&st->tmpl, st->msgs, n, from, add, s, len + 1, NULL, NULL);
    return s;
}

/* s as a JSON string (quoted, escaped) onto out. */
static int chat_json_string(chat_str *out, const char *s) {
    static const char hex[] = "0123456789abcdef";
    int ok = chat_append(out, "\"", 1);
    for (; ok && *s; s++) {
        unsigned char ch = (unsigned char)*s;
        char esc[7] = {'\\', 'u', '0', '0', hex[ch >> 4], hex[ch & 15], 0};
        if (ch == '"' || ch == '\\') esc[1] = (char)ch, ok = chat_append(out, esc, 2);
        else if (ch < 0x20) ok = chat_append(out, esc, 6);
        else ok = chat_append(out, s, 1);
    }
    return ok && chat_append(out, "\"", 1);
}

/* The conversation so far (the first n messages), then the assistant
   prompt, rendered by the Jinja template as transformers'
   apply_chat_template would: {"messages", "add_generation_prompt": true,
   "bos_token", "eos_token"} (and "enable_thinking": false with --think
   off, true with --think on, "reasoning_effort" with --reasoning-effort). A BOS the text opens with is dropped where tokenizing adds one.
   malloc'd, or NULL with the one-line error printed. */
static char *chat_render(const chat_state *st, int n) {
    chat_str vars = {NULL, 0, 0};
    infer_error err;
    int raised = 0, ok, i;
    char *text;
    size_t nb = strlen(st->bos);
    ok = chat_append(&vars, "{\"messages\": [", 14);
    for (i = 0; ok && i < n; i++)
        ok = chat_append(&vars, i ? ", {\"role\": " : "{\"role\": ", i ? 11 : 9) && chat_json_string(&vars, st->msgs[i].role) &&
             chat_append(&vars, ", \"content\": ", 13) && chat_json_string(&vars, st->msgs[i].content) &&
             chat_append(&vars, "}", 1);
    ok = ok && chat_append(&vars, "], \"add_generation_prompt\": true, \"bos_token\": ", 47) &&
         chat_json_string(&vars, st->bos) && chat_append(&vars, ", \"eos_token\": ", 15) &&
         chat_json_string(&vars, st->eos);
    if (ok && st->o->no_think) ok = chat_append(&vars, ", \"enable_thinking\": false", 26);
    if (ok && st->o->think_on) ok = chat_append(&vars, ", \"enable_thinking\": true", 25);
    if (ok && st->o->effort)
        ok = chat_append(&vars, ", \"reasoning_effort\": ", 22) && chat_json_string(&vars, st->o->effort);
    if (!ok || !chat_append(&vars, "}", 1)) {
        free(vars.p);
        fprintf(stderr, "infer: out of memory\n");
        return NULL;
    }
    text = infer_jinja_render(st->jinja, vars.p, NULL, &raised, &err);
    free(vars.p);
    if (!text) {
        if (err.code == INFER_ERR_NOMEM) fprintf(stderr, "infer: out of memory\n");
        else if (raised) fprintf(stderr, "infer: the chat template raised an exception: %s\n", err.msg);
        else fprintf(stderr, "infer: the chat template: %s\n", err.msg);
        return NULL;
    }
    /* the request puts BOS in front itself: a second one would differ from
       what the model was trained on */
    if (nb && infer_model_add_bos(st->m) && !strncmp(text, st->bos, nb)) memmove(text, text + nb, strlen(text) - nb + 1);
    return text;
}

/* 1 where a prompt ends inside an open <think> (blanks after it aside):
   the reply then begins in its reasoning (DeepSeek R1's templates, a
   template with thinking forced). */
static int chat_opens_think(const char *prompt) {
    size_t n = strlen(prompt);
    while (n && (prompt[n - 1] == ' ' || prompt[n - 1] == '\n' || prompt[n - 1] == '\r' || prompt[n - 1] == '\t')) n--;
    return n >= 7 && !memcmp(prompt + n - 7, "<think>", 7);
}

/* Writes one reply's parts as they become certain: the reasoning apart
   from the answer, as chat_notes describes. */
typedef struct chat_printer {
    const chat_state *st;
    int in_reasoning; /* the reasoning's opening was written, its end not yet */
    int line_start;   /* (stderr) the next reasoning byte begins a line */
} chat_printer;

static void chat_print_reasoning(chat_printer *pr, const char *s, size_t n) {
    size_t i;
    if (!n || pr->st->o->hide_reasoning) return;
    if (pr->st->out_tty) { /* before the answer on the terminal, dimmed */
        if (!pr->in_reasoning) fputs(pr->st->faint ? "\033[2m[reasoning] " : "[reasoning] ", stdout);
        pr->in_reasoning = 1;
        fwrite(s, 1, n, stdout);
        fflush(stdout);
        return;
    }
    /* on stderr, every line marked, so that a log can be read (or grepped) apart */
    if (!pr->in_reasoning) pr->line_start = 1;
    pr->in_reasoning = 1;
    for (i = 0; i < n; i++) {
        if (pr->line_start) fputs("[reasoning] ", stderr);
        fputc(s[i], stderr);
        pr->line_start = s[i] == '\n';
    }
    fflush(stderr);
}

static void chat_end_reasoning(chat_printer *pr) {
    if (!pr->in_reasoning) return;
    if (pr->st->out_tty) fputs(pr->st->faint ? "\033[0m\n" : "\n", stdout), fflush(stdout);
    else if (!pr->line_start) fputc('\n', stderr), fflush(stderr);
    pr->in_reasoning = 0;
}

static void chat_print_content(chat_printer *pr, const char *s, size_t n) {
    if (!n) return;
    chat_end_reasoning(pr);
    fwrite(s, 1, n, stdout);
    fflush(stdout);
}

/* The cache holds the last reply as it was generated: the assistant prompt,
   the reply, the end-of-turn text. Where the template writes that message
   otherwise, the cache goes back to before that assistant prompt (or to
   nothing, where a sliding window cannot go back) and feeds it again. */
static void chat_rewrite_reply(chat_state *st) {
    int r = st->n_msgs - 2; /* the reply; the new user message follows it */
    size_t ne = 0;
    char *gen, *hist, *eot;
    int same = 1;
    if (!st->reply_open || r < 0 || infer_chat_end_of_turn(&st->tmpl, NULL, 0, &ne, NULL) != INFER_OK || st->shifted)
        return;
    gen = chat_format(st, r, r, 1);
    hist = chat_format(st, r + 1, r, 0);
    eot = (char *)malloc(ne + 1);
    if (gen && hist && eot) {
        size_t ng = strlen(gen), nr = strlen(st->msgs[r].content);
        infer_chat_end_of_turn(&st->tmpl, eot, ne + 1, NULL, NULL);
        same = strlen(hist) == ng + nr + ne && !memcmp(hist, gen, ng) &&
               !memcmp(hist + ng, st->msgs[r].content, nr) && !memcmp(hist + ng + nr, eot, ne);
    }
    free(gen), free(hist), free(eot);
    if (same) return;
    infer_seq_truncate(st->c, 0, st->back_past, NULL, NULL);
    if (infer_seq_n_past(st->c, 0) == st->back_past) {
        st->n_fed = st->back_fed;
        st->reply_open = st->back_open;
    } else {
        infer_seq_truncate(st->c, 0, 0, NULL, NULL);
        st->n_fed = 0;
        st->reply_open = 0;
    }
}

/* The text this turn adds to the cache: the end of the previous reply, the
   messages not yet fed, the assistant prompt. */
static char *chat_turn_text(const chat_state *st) {
    size_t ne = 0, nf = 0;
    char *text;
    if (st->reply_open && infer_chat_end_of_turn(&st->tmpl, NULL, 0, &ne, NULL) != INFER_OK) return NULL;
    if (infer_chat_format(&st->tmpl, st->msgs, st->n_msgs, st->n_fed, 1, NULL, 0, &nf, NULL) != INFER_OK) return NULL;
    text = (char *)malloc(ne + nf + 1);
    if (!text) return NULL;
    text[0] = 0;
    if (ne) infer_chat_end_of_turn(&st->tmpl, text, ne + 1, NULL, NULL);
    infer_chat_format(&st->tmpl, st->msgs, st->n_msgs, st->n_fed, 1, text + ne, nf + 1, NULL, NULL);
    return text;
}

/* Bytes a and b share from their start. */
static size_t chat_common_prefix(const char *a, const char *b) {
    size_t n = 0;
    while (a[n] && a[n] == b[n]) n++;
    return n;
}

/* Runs one turn for the last (user) message. Returns 0 to go on, 1 when the
   context is full (said on stderr), -1 on an error. */
static int chat_turn(chat_state *st, int n_predict) {
    infer_error err;
    infer_request_params rp;
    infer_request *r;
    chat_str reply = {NULL, 0, 0};
    chat_printer pr;
    infer_output_parser *parser = NULL;
    infer_output_delta delta;
    infer_output_result res;
    infer_metrics metrics;
    char *text, *full = NULL, *answer = NULL;
    size_t printed = 0, answer_len = 0;
    int n_shown = 0, n, add_bos, n_ctx = infer_context_n_ctx(st->c), full_ctx = 0, n_gen, past0, n_read, ok = 1;
    cli_progress prog;
    /* from_start: the prompt is the whole conversation, fed with n_past 0
       (the cache's prefix of it kept by prompt reuse) */
    int from_start = 0;
    infer_reasoning reasoning = INFER_REASONING_NONE;
    infer_status status;
    memset(&pr, 0, sizeof pr);
    pr.st = st;
    if (st->jinja) {
        /* the whole conversation, rendered afresh: a template may write an
           earlier turn otherwise once a later one follows (drop its
           reasoning); prompt reuse then feeds again from the first token
           that differs */
        if (!(full = chat_render(st, st->n_msgs))) return -1;
        if (!st->shifted) {
            text = full;
            from_start = 1;
        } else {
            /* after a context shift the cache no longer begins with the
               conversation: only the text past what it holds is fed on (where
               the template rewrote that text, the cache keeps it as it was) */
            text = full + chat_common_prefix(st->held ? st->held : "", full);
        }
        text = strdup(text);
        if (!text) return free(full), fprintf(stderr, "infer: out of memory\n"), -1;
        add_bos = from_start && infer_model_add_bos(st->m);
    } else {
        size_t n_gp = 0;
        int n_a;
        infer_token *toks = NULL;
        infer_chat_format(&st->tmpl, st->msgs, st->n_msgs, st->n_msgs, 1, NULL, 0, &n_gp, NULL);
        chat_rewrite_reply(st);
        st->back_past = infer_seq_n_past(st->c, 0);
        st->back_fed = st->n_fed;
        st->back_open = st->reply_open;
        text = chat_turn_text(st);
        if (!text) return fprintf(stderr, "infer: out of memory\n"), -1;
        add_bos = infer_seq_n_past(st->c, 0) == 0 && infer_model_add_bos(st->m);
        if (infer_tokenize(st->m, text, strlen(text), NULL, 0, add_bos, 1, &n, NULL) != INFER_OK) n = -1;
        if (n < 0 || !(toks = (infer_token *)malloc(((size_t)n + 1) * sizeof *toks))) {
            free(text);
            return fprintf(stderr, "infer: the turn could not be tokenized\n"), -1;
        }
        infer_tokenize(st->m, text, strlen(text), toks, n, add_bos, 1, NULL, NULL);
        /* where the assistant prompt begins, if it begins on a token boundary
           (its own tokens end the turn's): a reply fed again starts there */
        if (!(n_gp > 0 && n_gp <= strlen(text)) ||
            infer_tokenize(st->m, text, strlen(text) - (size_t)n_gp, NULL, 0, add_bos, 1, &n_a, NULL) != INFER_OK)
            n_a = -1;
        if (n_a >= 0 && n_a <= n) {
            infer_token *a = (infer_token *)malloc(((size_t)n_a + 1) * sizeof *a);
            if (a && infer_tokenize(st->m, text, strlen(text) - (size_t)n_gp, a, n_a, add_bos, 1, NULL, NULL) == INFER_OK &&
                !memcmp(a, toks, (size_t)n_a * sizeof *a)) {
                st->back_past += n_a;
                st->back_fed = st->n_msgs;
                st->back_open = 0;
            }
            free(a);
        }
        free(toks);
    }
    if (infer_tokenize(st->m, text, strlen(text), NULL, 0, add_bos, 1, &n, NULL) != INFER_OK) n = -1;
    if (n < 0) {
        free(text), free(full);
        return fprintf(stderr, "infer: the turn could not be tokenized\n"), -1;
    }
    /* room for the turn and at least one reply token (a context that
       shifts makes room itself) */
    if (!st->o->shift && (from_start ? 0 : infer_seq_n_past(st->c, 0)) + n + 1 > n_ctx) {
        if (from_start)
            fprintf(stderr, "infer: the context is full (the conversation takes %d tokens of %d): ending the chat\n", n,
                    n_ctx);
        else
            fprintf(stderr,
                    "infer: the context is full (%d of %d tokens used; this turn needs %d more): ending the chat\n",
                    infer_seq_n_past(st->c, 0), n_ctx, n);
        free(text), free(full);
        return 1;
    }
    /* a template that writes <think>: the reply's reasoning is split off,
       from its first byte where the prompt left <think> open */
    if (st->split || st->o->reasoning_budget >= 0)
        reasoning = chat_opens_think(full ? full : text) ? INFER_REASONING_OPEN : INFER_REASONING_AUTO;
    if ((reasoning != INFER_REASONING_NONE || st->channels != INFER_TOOL_FORMAT_NONE) &&
        !(parser = infer_output_parser_new(st->channels, reasoning, &err))) {
        free(text), free(full);
        return fprintf(stderr, "infer: %s\n", err.msg), -1;
    }
    /* the reply: a request on the cache, stepped a forward pass at a time */
    rp = st->base;
    rp.prompt = text;
    if (from_start) rp.n_past = 0;
    rp.n_predict = n_predict;
    rp.sampling = st->o->c.sp;
    rp.sampling.seed += (uint64_t)st->n_turns++; /* each turn draws afresh */
    rp.stop = st->o->c.stop;
    rp.n_stop = st->o->c.n_stop;
    rp.reasoning_budget = st->o->reasoning_budget;
    rp.lookup = st->o->c.lookup;
    rp.draft = st->draft_c;
    rp.draft_n = st->draft_c ? (st->o->c.draft_n ? st->o->c.draft_n : 4) : 0;
    rp.reasoning_open = reasoning == INFER_REASONING_OPEN;
    past0 = from_start ? 0 : infer_seq_n_past(st->c, 0);
    cli_progress_begin(&prog, "prompt");
    rp.progress = cli_progress_report;
    rp.progress_user = &prog;
    r = infer_request_start(st->c, &rp, &err);
    free(text);
    if (!r) {
        infer_output_parser_free(parser);
        free(full);
        return fprintf(stderr, "infer: %s\n", err.msg), -1;
    }
    st->n_fed = st->n_msgs;
    for (;;) {
        int left = infer_context_step(st->c, 0);
        size_t len = infer_request_text(r, printed, NULL, 0);
        if (len && ok) {
            char *p = (char *)malloc(len + 1);
            if (!p) ok = 0; /* out of memory: said once the request ends */
            else {
                infer_request_text(r, printed, p, len + 1);
                if (!chat_append(&reply, p, len)) ok = 0;
                printed += len;
                if (!parser) fwrite(p, 1, len, stdout), fflush(stdout);
                else if (infer_output_parser_push(parser, p, len, &delta, &err) == INFER_OK) {
                    chat_print_reasoning(&pr, delta.reasoning, delta.reasoning_len);
                    chat_print_content(&pr, delta.content, delta.content_len);
                } else ok = 0;
                free(p);
            }
            if (!ok) infer_request_cancel(r);
        }
        if (st->o->out.n_probs > 0) /* each token's most probable ones, on stderr */
            for (;; n_shown++) {
                infer_token_prob top[CLI_MAX_PROBS];
                int k = 0, j, n_now = 0;
                infer_request_tokens(r, NULL, 0, &n_now, NULL);
                if (n_shown >= n_now) break;
                infer_request_top_probs(r, n_shown, top, st->o->out.n_probs < CLI_MAX_PROBS ? st->o->out.n_probs
                                        : CLI_MAX_PROBS, &k, NULL);
                fprintf(stderr, "[probs]");
                for (j = 0; j < k; j++) {
                    char piece[256];
                    size_t pl = 0;
                    infer_token_to_piece(st->m, top[j].id, piece, sizeof piece, &pl, NULL);
                    fprintf(stderr, " '%.*s' %.3f", pl < sizeof piece ? (int)pl : 0, piece, top[j].p);
                }
                fputc('\n', stderr);
            }
        if (!left) break;
    }
    status = infer_request_status(r, &err);
    /* the tokens the cache took: every one generated but an end of generation */
    infer_request_tokens(r, NULL, 0, &n_gen, NULL);
    if (n_gen > 0) {
        infer_token *all = (infer_token *)malloc((size_t)n_gen * sizeof *all);
        if (all) {
            infer_request_tokens(r, all, n_gen, NULL, NULL);
            if (infer_model_is_eog(st->m, all[n_gen - 1])) n_gen--;
            free(all);
        }
    }
    if (st->o->shift && infer_seq_n_past(st->c, 0) != past0 + n + n_gen) st->shifted = 1;
    n_read = n - (from_start ? infer_request_cached_tokens(r) : 0);
    metrics = infer_request_metrics(r);
    infer_request_free(r);
    if (parser) { /* what was held back, and the answer alone for the conversation */
        if (ok && infer_output_parser_finish(parser, &delta, &res, &err) == INFER_OK) {
            chat_print_reasoning(&pr, delta.reasoning, delta.reasoning_len);
            chat_print_content(&pr, delta.content, delta.content_len);
            if ((answer = (char *)malloc(res.content_len + 1)) != NULL) {
                memcpy(answer, res.content, res.content_len);
                answer_len = res.content_len;
            }
        }
        chat_end_reasoning(&pr);
        infer_output_parser_free(parser);
        if (!answer) ok = 0;
    }
    fputc('\n', stdout);
    fflush(stdout);
    if (ok && st->jinja) { /* what the cache holds now, for a turn after a context shift */
        free(st->held);
        if ((st->held = (char *)malloc(strlen(full) + reply.n + 1)) != NULL) {
            memcpy(st->held, full, strlen(full));
            memcpy(st->held + strlen(full), reply.p ? reply.p : "", reply.n);
            st->held[strlen(full) + reply.n] = 0;
        } else ok = 0;
    }
    free(full);
    if (!ok) {
        free(reply.p), free(answer);
        return fprintf(stderr, "infer: out of memory\n"), -1;
    }
    if (status == INFER_ERR_CONTEXT_FULL) full_ctx = 1;
    else if (status != INFER_OK) {
        free(reply.p), free(answer);
        return fprintf(stderr, "infer: %s\n", err.msg), -1;
    }
    if (!chat_push(st, "assistant", answer ? answer : reply.p ? reply.p : "", answer ? answer_len : reply.n)) {
        free(reply.p), free(answer);
        return fprintf(stderr, "infer: out of memory\n"), -1;
    }
    free(reply.p), free(answer);
    st->n_fed = st->n_msgs;
    st->reply_open = 1;
    fprintf(stderr, "[%d tokens read, %d generated, %d of %d in context", n_read, n_gen, infer_seq_n_past(st->c, 0),
            n_ctx);
    if (metrics.n_draft_tokens > 0) /* --lookup, --draft */
        fprintf(stderr, ", %d of %d drafted accepted", metrics.n_draft_accepted, metrics.n_draft_tokens);
    fprintf(stderr, "]\n");
    if (full_ctx) {
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
    char *line, *owned = NULL, *own = NULL;
    if ((rc = chat_parse(argc, argv, &o)) != 1) return rc == 2 ? 0 : 1;
    rc = 0;
    memset(&st, 0, sizeof st);
    mp.device = o.c.device;
    mp.rope_scaling = o.c.rope.rope_scaling;
    mp.rope_scale = o.c.rope.rope_scale;
    st.m = infer_model_load(o.c.model, &mp, &err);
    if (!st.m) return cli_fail("%s", err.msg);
    if (infer_model_warning(st.m)) fprintf(stderr, "infer: warning: %s\n", infer_model_warning(st.m));
    cp.n_threads = o.c.threads;
    cp.n_ctx = o.c.n_ctx;
    cp.kv_type = o.c.kv_type;
    cp.full_policy = o.shift ? INFER_FULL_POLICY_SHIFT : INFER_FULL_POLICY_STOP;
    cp.n_keep = o.c.keep;
    st.o = &o;
    st.c = infer_context_new(st.m, &cp, &err);
    if (!st.c) {
        infer_model_free(st.m);
        return cli_fail("%s", err.msg);
    }
    cli_context_warning(st.m, infer_context_n_ctx(st.c), &o.c.rope);
    if (o.c.draft && !(st.draft_m = cli_load_draft(o.c.draft, o.c.device, st.m, o.c.threads, infer_context_n_ctx(st.c),
                                                 o.c.kv_type, &st.draft_c))) {
        rc = 1;
        goto done;
    }
    st.base = infer_request_default_params();
    if (!cli_output_request(&o.out, st.m, &st.base, &owned)) {
        rc = 1;
        goto done;
    }
    own = infer_model_chat_template_text(st.m, st.bos, sizeof st.bos, st.eos, sizeof st.eos, NULL);
    if (o.template_file) {
        if (!(st.jinja = cli_read_file(o.template_file, CLI_TEXT_FILE_MAX, "a chat template", NULL))) {
            rc = 1;
            goto done;
        }
    } else if (o.jinja_own || (own && (infer_tool_format_detect(own) == INFER_TOOL_FORMAT_HARMONY ||
                                       infer_tool_format_detect(own) == INFER_TOOL_FORMAT_GEMMA4))) {
        /* (harmony, gpt-oss's: no built-in format writes it; Gemma 4's:
           the built-in one never thinks, nor writes tools) */
        if (!own) {
            rc = cli_fail("--jinja: %s has no chat template (tokenizer.chat_template)", o.c.model);
            goto done;
        }
        st.jinja = own;
        own = NULL;
    } else {
        st.tmpl = infer_chat_template_detect(st.m);
        st.tmpl.no_think = o.no_think;
        if (o.effort)
            fprintf(stderr, "infer: warning: --reasoning-effort reaches Jinja templates only (--jinja, "
                            "--chat-template-file): the built-in %s format has no such setting\n",
                    infer_chat_template_name(st.tmpl.kind));
        if (st.tmpl.fallback)
            fprintf(stderr, "infer: warning: the model's chat template is missing or not recognized; using ChatML\n");
    }
    /* replies are split where the template writes reasoning ("<think>",
       or R1's "</think>" alone): the Jinja one, else the model's own */
    st.split = strstr(st.jinja ? st.jinja : own ? own : "", "think>") != NULL;
    st.channels = infer_tool_format_detect(st.jinja ? st.jinja : own);
    if (st.channels != INFER_TOOL_FORMAT_HARMONY && st.channels != INFER_TOOL_FORMAT_GEMMA4)
        st.channels = INFER_TOOL_FORMAT_NONE;
    st.out_tty = os_isatty(1);
    st.faint = st.out_tty && !getenv("NO_COLOR");
    if (o.system && !chat_push(&st, "system", o.system, strlen(o.system))) {
        rc = cli_fail("%s", "out of memory");
        goto done;
    }
    if (st.jinja) { /* a template that cannot render a first turn fails now, not after one is typed */
        char *probe;
        if (!chat_push(&st, "user", "Hello", 5)) {
            rc = cli_fail("%s", "out of memory");
            goto done;
        }
        probe = chat_render(&st, st.n_msgs);
        st.n_msgs--;
        free((void *)st.msgs[st.n_msgs].content);
        if (!probe) {
            rc = 1;
            goto done;
        }
        free(probe);
    }
    tty = os_isatty(0);
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
        r = chat_turn(&st, o.c.n_predict);
        if (r < 0) rc = 1;
        if (r) break;
    }
done:
    free(owned);
    free(own);
    free(st.jinja);
    free(st.held);
    for (i = 0; i < st.n_msgs; i++) free((void *)st.msgs[i].content);
    free(st.msgs);
    infer_context_free(st.draft_c);
    infer_model_free(st.draft_m);
    infer_context_free(st.c);
    infer_model_free(st.m);
    return rc;
}

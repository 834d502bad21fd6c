/* cli.h - option parsing the infer subcommands share: one-line errors,
   strict numbers, and the sampling flags of run and chat. */
#ifndef INFER_CLI_H
#define INFER_CLI_H
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* open, fstat, read: a file is checked as regular before a byte is read
   (the including file defines _XOPEN_SOURCE for them under -std=c99) */
#include "os.h"

#include "infer.h"

#if defined(__GNUC__) || defined(__clang__)
#define CLI_MAYBE_UNUSED __attribute__((unused)) /* a command uses some of them */
#else
#define CLI_MAYBE_UNUSED
#endif

/* ---- the flag table: every flag of every subcommand ---- */

/* The subcommands, as bits of cli_flag.cmds (run's bit also covers eval,
   tokenize and info, which share its parser). */
#define CLI_CMD_RUN 0x01u
#define CLI_CMD_CHAT 0x02u
#define CLI_CMD_BENCH 0x04u
#define CLI_CMD_EMBED 0x08u
#define CLI_CMD_PERPLEXITY 0x10u
#define CLI_CMD_QUANTIZE 0x20u
#define CLI_CMD_TEMPLATE 0x40u
#define CLI_CMD_SERVE 0x80u
#define CLI_CMD_ALL 0xffu

/* One flag: its name, another name for the same flag (NULL: none), its
   value's name (NULL: a flag without a value), the commands that accept it
   and a one-line help. A name may have several entries, for commands that
   give it different meanings (bench's -p N, run's -p TEXT). */
typedef struct cli_flag {
    const char *name, *alias, *value;
    unsigned cmds;
    const char *help;
} cli_flag;

#define CLI_GEN (CLI_CMD_RUN | CLI_CMD_CHAT)
#define CLI_SPEC (CLI_CMD_RUN | CLI_CMD_CHAT | CLI_CMD_BENCH | CLI_CMD_SERVE)

/* The table; *n gets its length. */
static CLI_MAYBE_UNUSED const cli_flag *cli_flags(size_t *n) {
    static const cli_flag t[] = {
        {"-h", "--help", NULL, CLI_CMD_ALL, "this help"},
        {"-m", "--model", "MODEL", CLI_GEN | CLI_CMD_PERPLEXITY | CLI_CMD_TEMPLATE, "the model, a GGUF file"},
        {"-m", NULL, "MODEL", CLI_CMD_BENCH | CLI_CMD_EMBED | CLI_CMD_SERVE, "the model, a GGUF file"},
        {"--template", NULL, "FILE", CLI_CMD_TEMPLATE, "a Jinja chat template (instead of -m's)"},
        {"--conversation", NULL, "FILE.json", CLI_CMD_TEMPLATE, "the messages to render, a JSON array"},
        {"-p", "--prompt", "TEXT", CLI_CMD_RUN, "the prompt (tokenize: the text)"},
        {"-p", NULL, "TEXT", CLI_CMD_EMBED, "the text to embed"},
        {"-p", NULL, "N", CLI_CMD_BENCH, "prompt tokens (default 128)"},
        {"-f", "--file", "FILE", CLI_CMD_RUN, "the prompt (tokenize: the text) read from FILE"},
        {"-f", "--file", "FILE", CLI_CMD_PERPLEXITY, "the text to score"},
        {"-f", NULL, "FILE", CLI_CMD_EMBED, "the texts to embed, one a line"},
        {"--tokens", NULL, "IDS", CLI_CMD_RUN, "eval: the token ids to decode, \"1 2 3\""},
        {"--system", NULL, "TEXT", CLI_CMD_CHAT, "a system message first"},
        {"-n", NULL, "N", CLI_GEN, "most tokens to generate (run 128; chat 256 a reply)"},
        {"-n", NULL, "N", CLI_CMD_BENCH, "tokens generated (default 64)"},
        {"-r", NULL, "N", CLI_CMD_BENCH, "repetitions (default 5)"},
        {"-d", NULL, "DEPTH", CLI_CMD_BENCH, "tokens already in the context (default 0)"},
        {"-t", "--threads", "N", CLI_GEN | CLI_CMD_PERPLEXITY | CLI_CMD_QUANTIZE, "threads"},
        {"-t", NULL, "N", CLI_CMD_BENCH | CLI_CMD_EMBED | CLI_CMD_SERVE, "threads"},
        {"-c", "--ctx", "N", CLI_GEN | CLI_CMD_PERPLEXITY, "context length (0: the model's)"},
        {"-c", NULL, "N", CLI_CMD_EMBED, "context length"},
        {"-c", NULL, "N", CLI_CMD_SERVE, "context length per sequence"},
        {"-o", NULL, "md|json|csv", CLI_CMD_BENCH, "the output's format (default md)"},
        {"-o", NULL, "json|text", CLI_CMD_EMBED, "the output's format (default json)"},
        {"--pooling", NULL, "mean|last|first", CLI_CMD_EMBED, "how token vectors make one (default mean)"},
        {"--no-normalize", NULL, NULL, CLI_CMD_EMBED, "vectors as pooled, not of length 1"},
        {"--chunks", NULL, "N", CLI_CMD_PERPLEXITY, "score at most N chunks of -c tokens"},
        {"--allow-requantize", NULL, NULL, CLI_CMD_QUANTIZE, "quantize tensors that are quantized already"},
        {"--temp", NULL, "T", CLI_GEN, "temperature (0: greedy)"},
        {"--top-k", NULL, "K", CLI_GEN, "sample from the K most probable tokens"},
        {"--top-p", NULL, "P", CLI_GEN, "nucleus sampling: tokens of probability mass P"},
        {"--min-p", NULL, "P", CLI_GEN, "drop tokens under P times the top one's probability"},
        {"--repeat-penalty", NULL, "R", CLI_GEN, "penalize repeated tokens (1: none)"},
        {"--seed", NULL, "S", CLI_GEN, "the sampler's seed"},
        {"--device", NULL, "cpu|cuda|auto", CLI_SPEC | CLI_CMD_EMBED | CLI_CMD_PERPLEXITY,
         "where the forward pass runs (auto: the GPU where there is one)"},
        {"--kv-type", NULL, "f16|q8_0|q4_0", CLI_SPEC | CLI_CMD_PERPLEXITY, "the KV cache's format (q8_0: half the memory)"},
        {"--stop", NULL, "STR", CLI_GEN, "end the reply at STR (not printed); may repeat"},
        {"--context-shift", NULL, NULL, CLI_GEN, "a full context drops its older half and goes on"},
        {"--keep", NULL, "N", CLI_GEN, "positions --context-shift keeps at the start"},
        {"--grammar", NULL, "GBNF", CLI_GEN, "the output follows a GBNF grammar (rule root)"},
        {"--grammar-file", NULL, "FILE", CLI_GEN, "the same, the grammar read from FILE"},
        {"--json-schema", NULL, "SCHEMA", CLI_GEN, "the output is JSON the schema allows"},
        {"--json-schema-file", NULL, "FILE", CLI_GEN, "the same, the schema read from FILE"},
        {"--logit-bias", NULL, "ID(+|-)B", CLI_GEN, "add B to token ID's logit (ID-inf: never chosen); may repeat"},
        {"--n-probs", NULL, "N", CLI_GEN, "each token's N most probable tokens (run: in --json, else stderr)"},
        {"--json", NULL, NULL, CLI_CMD_RUN, "run, eval: one JSON object on stdout"},
        {"--no-bos", NULL, NULL, CLI_CMD_RUN, "tokenize: no beginning-of-sequence token"},
        {"--special", NULL, NULL, CLI_CMD_RUN, "tokenize: special tokens' text as those tokens"},
        {"--prompt-cache", NULL, "FILE", CLI_CMD_RUN, "reuse the prompt state saved in FILE, then save it there"},
        {"--beams", NULL, "N", CLI_CMD_RUN, "beam search of N beams instead of sampling"},
        {"--length-penalty", NULL, "L", CLI_CMD_RUN, "beams score sum(log p) / length^L (default 1)"},
        {"--lookup", NULL, "N", CLI_SPEC, "speculative decoding: draft up to N tokens by prompt lookup"},
        {"--draft", NULL, "MODEL", CLI_SPEC, "speculative decoding with a draft model of the same vocabulary"},
        {"--draft-n", NULL, "N", CLI_SPEC, "tokens the draft model drafts a pass (default 4)"},
        {"--rope-scaling", NULL, "none|linear|yarn", CLI_GEN | CLI_CMD_SERVE, "RoPE scaling to reach past the trained context"},
        {"--rope-scale", NULL, "F", CLI_GEN | CLI_CMD_SERVE, "reach F times the trained context"},
        {"--think", NULL, "on|off", CLI_CMD_CHAT, "off: Qwen3 and SmolLM3 answer without reasoning"},
        {"--reasoning", NULL, "show|hide", CLI_CMD_CHAT, "a reply's <think> reasoning shown apart, or hidden"},
        {"--reasoning-effort", NULL, "low|medium|high", CLI_CMD_CHAT, "a Jinja template's reasoning_effort (gpt-oss)"},
        {"--reasoning-budget", NULL, "N", CLI_CMD_CHAT | CLI_CMD_SERVE, "close a reply's reasoning after N tokens"},
        {"--chat-template-file", NULL, "FILE", CLI_CMD_CHAT | CLI_CMD_SERVE, "format chats with the Jinja template in FILE"},
        {"--jinja", NULL, NULL, CLI_CMD_CHAT, "format the chat with the model's own Jinja template"},
        {"--parallel", NULL, "N", CLI_CMD_BENCH, "N sequences decoding together (default 1)"},
        {"--parallel", "-np", "N", CLI_CMD_SERVE, "replies decoding together (default 4)"},
        {"--host", NULL, "HOST", CLI_CMD_SERVE, "the address to listen on (default 127.0.0.1)"},
        {"--port", NULL, "PORT", CLI_CMD_SERVE, "the port (default 8080; 0: a free one)"},
        {"--api-key", NULL, "KEY", CLI_CMD_SERVE, "requests need Authorization: Bearer KEY"},
        {"--alias", NULL, "NAME", CLI_CMD_SERVE, "the model's name in the API"},
        {"--queue", NULL, "N", CLI_CMD_SERVE, "requests that may wait for a sequence (default 16)"},
        {"--max-body", NULL, "BYTES", CLI_CMD_SERVE, "a request body's size limit (default 1048576)"},
        {"--max-schema", NULL, "BYTES", CLI_CMD_SERVE, "response_format's schema limit (default 524288)"},
        {"--max-grammar", NULL, "BYTES", CLI_CMD_SERVE, "the grammar made from it, limit (default 8388608)"},
        {"--max-messages", NULL, "N", CLI_CMD_SERVE, "messages a request may hold (default 1024)"},
        {"--max-connections", NULL, "N", CLI_CMD_SERVE, "connections open at once (default 1000)"},
        {"--read-timeout", NULL, "SECS", CLI_CMD_SERVE, "for a request's headers and body (default 10)"},
        {"--drain-timeout", NULL, "SECS", CLI_CMD_SERVE, "on SIGTERM, for the replies in flight (default 30)"},
    };
    *n = sizeof t / sizeof t[0];
    return t;
}

/* The entry of flag a in command cmd (a CLI_CMD_ bit), or NULL. */
static CLI_MAYBE_UNUSED const cli_flag *cli_flag_find(const char *a, unsigned cmd) {
    size_t n, i;
    const cli_flag *t = cli_flags(&n);
    for (i = 0; i < n; i++)
        if ((t[i].cmds & cmd) && (!strcmp(a, t[i].name) || (t[i].alias && !strcmp(a, t[i].alias)))) return &t[i];
    return NULL;
}

/* Checks argv[i] as a flag of command cmd (argv[1] names it): 1 when it
   takes argv[i + 1] as its value, 0 when it takes none, -1 (the one-line
   error printed) when it is unknown or its value is missing. */
static CLI_MAYBE_UNUSED int cli_flag_check(int argc, char **argv, int i, unsigned cmd) {
    const cli_flag *f = cli_flag_find(argv[i], cmd);
    if (!f) {
        fprintf(stderr, "infer: unknown option %s (see infer %s --help)\n", argv[i], argv[1]);
        return -1;
    }
    if (f->value && i + 1 >= argc) {
        fprintf(stderr, "infer: option %s needs a value\n", argv[i]);
        return -1;
    }
    return f->value != NULL;
}

/* 1 if a asks for help (-h, --help). */
static CLI_MAYBE_UNUSED int cli_is_help(const char *a) { return !strcmp(a, "-h") || !strcmp(a, "--help"); }

/* Prints "options:" and command cmd's options, one a line, from the
   table (notes after them go after a blank line). */
static CLI_MAYBE_UNUSED void cli_print_options(FILE *f, unsigned cmd) {
    size_t n, i;
    const cli_flag *t = cli_flags(&n);
    fprintf(f, "options:\n");
    for (i = 0; i < n; i++) {
        char head[64];
        int w;
        if (!(t[i].cmds & cmd)) continue;
        w = snprintf(head, sizeof head, "%s%s%s%s%s", t[i].name, t[i].alias ? ", " : "", t[i].alias ? t[i].alias : "",
                     t[i].value ? " " : "", t[i].value ? t[i].value : "");
        if (w < 26) fprintf(f, "  %-26s %s\n", head, t[i].help);
        else fprintf(f, "  %s\n  %-26s %s\n", head, "", t[i].help);
    }
}

/* Prints "infer: " fmt (with one string argument) and a newline; returns 1. */
static CLI_MAYBE_UNUSED int cli_fail(const char *fmt, const char *arg) {
    fprintf(stderr, "infer: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    return 1;
}

/* The whole of s as a number, or 0. */
static CLI_MAYBE_UNUSED int cli_int(const char *s, int *out) {
    char *end;
    long v;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < -2147483647L || v > 2147483647L) return 0;
    *out = (int)v;
    return 1;
}

static CLI_MAYBE_UNUSED int cli_float(const char *s, float *out) {
    char *end;
    double v;
    errno = 0;
    v = strtod(s, &end);
    if (errno || end == s || *end) return 0;
    *out = (float)v;
    return 1;
}

/* --device NAME: cpu, cuda or auto; 0 (with the one-line error printed)
   for another name. */
static CLI_MAYBE_UNUSED int cli_device(const char *v, infer_device *d) {
    int x = infer_device_from_name(v);
    if (x < 0) {
        fprintf(stderr, "infer: bad value '%s' for --device (cpu, cuda or auto)\n", v);
        return 0;
    }
    *d = (infer_device)x;
    return 1;
}

/* --kv-type NAME: f16, q8_0 or q4_0, the KV cache's format; 0 (with the
   one-line error printed) for another name. */
static CLI_MAYBE_UNUSED int cli_kv_type(const char *v, infer_type *t) {
    if (!strcmp(v, "f16")) *t = INFER_TYPE_F16;
    else if (!strcmp(v, "q8_0")) *t = INFER_TYPE_Q8_0;
    else if (!strcmp(v, "q4_0")) *t = INFER_TYPE_Q4_0;
    else {
        fprintf(stderr, "infer: bad value '%s' for --kv-type (f16, q8_0 or q4_0)\n", v);
        return 0;
    }
    return 1;
}

/* When a is a sampling flag (--temp --top-k --top-p --min-p
   --repeat-penalty --seed), parses its value v into sp, sets *ok to whether
   the value was valid, and returns 1; else returns 0. */
static CLI_MAYBE_UNUSED int cli_sampling_option(const char *a, const char *v, infer_sampler_params *sp, int *ok) {
    if (!strcmp(a, "--temp")) *ok = cli_float(v, &sp->temperature) && sp->temperature >= 0;
    else if (!strcmp(a, "--top-k")) *ok = cli_int(v, &sp->top_k);
    else if (!strcmp(a, "--top-p")) *ok = cli_float(v, &sp->top_p) && sp->top_p > 0 && sp->top_p <= 1;
    else if (!strcmp(a, "--min-p")) *ok = cli_float(v, &sp->min_p) && sp->min_p >= 0 && sp->min_p <= 1;
    else if (!strcmp(a, "--repeat-penalty")) *ok = cli_float(v, &sp->repeat_penalty) && sp->repeat_penalty > 0;
    else if (!strcmp(a, "--seed")) {
        char *end;
        unsigned long long s;
        errno = 0;
        s = strtoull(v, &end, 10);
        *ok = !errno && end != v && !*end;
        sp->seed = s;
    } else return 0;
    return 1;
}

/* ---- output control: grammar, JSON schema, logit bias, top probabilities ---- */

#define CLI_MAX_BIAS 256
#define CLI_MAX_PROBS 64

/* What --grammar, --grammar-file, --json-schema, --json-schema-file,
   --logit-bias and --n-probs asked for (zero it first). Files are read by
   cli_output_apply, so nothing here needs freeing. */
typedef struct cli_output {
    const char *grammar;          /* GBNF text */
    const char *grammar_file;     /* a .gbnf file */
    const char *json_schema;      /* schema text */
    const char *json_schema_file; /* a schema file */
    infer_token bias_id[CLI_MAX_BIAS];
    float bias[CLI_MAX_BIAS];
    int n_bias;
    int n_probs;                  /* top probabilities to show per token (0: none) */
} cli_output;

/* --logit-bias ID(+|-)BIAS as llama.cpp writes it: 15043+1, 15043-0.5,
   15043-inf (never chosen). */
static CLI_MAYBE_UNUSED int cli_logit_bias(const char *v, cli_output *o) {
    char *end;
    long id;
    double b;
    errno = 0;
    id = strtol(v, &end, 10);
    if (errno || end == v || id < 0 || id > 2147483647L || (*end != '+' && *end != '-')) return 0;
    v = end;
    if (!((v[1] >= '0' && v[1] <= '9') || v[1] == '.' || v[1] == 'i' || v[1] == 'I')) return 0;
    b = strtod(v + 1, &end);
    if (end == v + 1 || *end || b != b) return 0;
    if (o->n_bias == CLI_MAX_BIAS) return 0;
    o->bias_id[o->n_bias] = (infer_token)id;
    o->bias[o->n_bias++] = (float)(*v == '-' ? -b : b);
    return 1;
}

/* When a is one of the flags above, stores its value v in o, sets *ok to
   whether the value was valid (--n-probs: 0 to CLI_MAX_PROBS), and returns
   1; else returns 0. */
static CLI_MAYBE_UNUSED int cli_output_option(const char *a, const char *v, cli_output *o, int *ok) {
    *ok = 1;
    if (!strcmp(a, "--grammar")) o->grammar = v;
    else if (!strcmp(a, "--grammar-file")) o->grammar_file = v;
    else if (!strcmp(a, "--json-schema")) o->json_schema = v;
    else if (!strcmp(a, "--json-schema-file")) o->json_schema_file = v;
    else if (!strcmp(a, "--logit-bias")) *ok = cli_logit_bias(v, o);
    else if (!strcmp(a, "--n-probs")) *ok = cli_int(v, &o->n_probs) && o->n_probs >= 0 && o->n_probs <= CLI_MAX_PROBS;
    else return 0;
    return 1;
}

/* 1 if a is one of the flags above (each takes a value). */
static CLI_MAYBE_UNUSED int cli_output_flag(const char *a) {
    static cli_output o;
    int ok;
    return cli_output_option(a, "", &o, &ok);
}

/* Size caps of the files the commands read whole into memory: past them
   a file is refused rather than read (a runaway file, or a device such as
   /dev/zero, must not take all memory). */
#define CLI_TEXT_FILE_MAX ((size_t)64 << 20) /* grammars, schemas, prompts, texts to tokenize or embed */

/* Why a path that exists is no regular file, or NULL when it is one (or
   cannot be looked at; opening it then says why). Never opens it. */
#define cli_not_regular os_not_regular

/* The whole of the regular file at path, NUL-terminated (its length, less
   the NUL, in *len when len is not NULL), or NULL with a one-line
   "infer: ..." error printed. what names the file for the errors ("a
   grammar file"); a file over cap bytes is refused, the error naming the
   cap. A FIFO, device or directory is refused without waiting on it.
   Caller frees. */
static CLI_MAYBE_UNUSED char *cli_read_file(const char *path, size_t cap, const char *what, size_t *len) {
    char *buf;
    size_t n = 0, size;
    const char *kind;
#if !defined(_WIN32)
    struct stat st;
    /* O_NONBLOCK: opening a FIFO would otherwise wait for a writer */
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    if (fd < 0) {
        fprintf(stderr, "infer: cannot open %s (%s): %s\n", path, what, strerror(errno));
        return NULL;
    }
    if (fstat(fd, &st) != 0) {
        fprintf(stderr, "infer: cannot read %s (%s): %s\n", path, what, strerror(errno));
        close(fd);
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        kind = S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISCHR(st.st_mode) ? "a character device"
                                                                                                      : "a special file";
        fprintf(stderr, "infer: %s is %s, not a regular file (%s)\n", path, kind, what);
        close(fd);
        return NULL;
    }
    if ((unsigned long long)st.st_size > (unsigned long long)cap) {
        fprintf(stderr, "infer: %s is larger than %zu MiB, the limit for %s\n", path, cap >> 20, what);
        close(fd);
        return NULL;
    }
    size = (size_t)st.st_size;
    if (!(buf = (char *)malloc(size + 1))) {
        fprintf(stderr, "infer: out of memory reading %s\n", path);
        close(fd);
        return NULL;
    }
    /* reads to the end, not to st_size: a file that grows meanwhile still stops at cap */
    for (;;) {
        ssize_t r = read(fd, buf + n, size + 1 - n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            fprintf(stderr, "infer: cannot read %s (%s): %s\n", path, what, strerror(errno));
            free(buf);
            close(fd);
            return NULL;
        }
        if (r == 0) break;
        n += (size_t)r;
        if (n == size + 1) { /* it grew: take more, up to the cap */
            char *p;
            if (size >= cap) {
                fprintf(stderr, "infer: %s is larger than %zu MiB, the limit for %s\n", path, cap >> 20, what);
                free(buf);
                close(fd);
                return NULL;
            }
            size = size * 2 + 4096 < cap ? size * 2 + 4096 : cap;
            if (!(p = (char *)realloc(buf, size + 1))) {
                fprintf(stderr, "infer: out of memory reading %s\n", path);
                free(buf);
                close(fd);
                return NULL;
            }
            buf = p;
        }
    }
    close(fd);
#else
    FILE *f;
    size_t got;
    if ((kind = cli_not_regular(path)) != NULL) {
        fprintf(stderr, "infer: %s is %s, not a regular file (%s)\n", path, kind, what);
        return NULL;
    }
    if (!(f = os_fopen(path, "rb"))) {
        fprintf(stderr, "infer: cannot open %s (%s): %s\n", path, what, strerror(errno));
        return NULL;
    }
    size = 65536;
    if (!(buf = (char *)malloc(size + 1))) {
        fclose(f);
        fprintf(stderr, "infer: out of memory reading %s\n", path);
        return NULL;
    }
    while ((got = fread(buf + n, 1, size + 1 - n, f)) > 0) {
        n += got;
        if (n == size + 1) {
            char *p;
            if (size >= cap) {
                fprintf(stderr, "infer: %s is larger than %zu MiB, the limit for %s\n", path, cap >> 20, what);
                free(buf);
                fclose(f);
                return NULL;
            }
            size = size * 2 < cap ? size * 2 : cap;
            if (!(p = (char *)realloc(buf, size + 1))) {
                fprintf(stderr, "infer: out of memory reading %s\n", path);
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = p;
        }
    }
    if (ferror(f)) {
        fprintf(stderr, "infer: cannot read %s (%s)\n", path, what);
        free(buf);
        fclose(f);
        return NULL;
    }
    fclose(f);
#endif
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}

/* Puts o's grammar (or JSON schema) and logit biases on sampler s for
   model m. Returns 1, or 0 with a one-line "infer: ..." error printed. */
static CLI_MAYBE_UNUSED int cli_output_apply(const cli_output *o, infer_sampler *s, const infer_model *m) {
    const char *src = o->grammar ? o->grammar : o->grammar_file ? o->grammar_file : o->json_schema ? o->json_schema
                                                                                                  : o->json_schema_file;
    int n_src = !!o->grammar + !!o->grammar_file + !!o->json_schema + !!o->json_schema_file, i, ok = 1;
    int nv = infer_model_n_vocab(m), schema = o->json_schema || o->json_schema_file;
    int file = o->grammar_file || o->json_schema_file;
    char *text = NULL, *gbnf = NULL;
    infer_error err;
    memset(&err, 0, sizeof err);
    for (i = 0; i < o->n_bias; i++)
        if (o->bias_id[i] >= nv) {
            fprintf(stderr, "infer: --logit-bias: token %d is out of range (the model has %d tokens)\n",
                    (int)o->bias_id[i], nv);
            return 0;
        }
    if (infer_sampler_set_logit_bias(s, o->bias_id, o->bias, o->n_bias, &err) != INFER_OK) {
        fprintf(stderr, "infer: --logit-bias: %s\n", err.msg);
        return 0;
    }
    if (!n_src) return 1;
    if (n_src > 1) {
        fprintf(stderr, "infer: give only one of --grammar, --grammar-file, --json-schema, --json-schema-file\n");
        return 0;
    }
    if (file && !(text = cli_read_file(src, CLI_TEXT_FILE_MAX, schema ? "a JSON schema file" : "a grammar file", NULL)))
        return 0;
    if (schema) {
        const char *sch = file ? text : src;
        size_t n = 0;
        infer_status st = infer_json_schema_to_grammar(sch, NULL, 0, &n, &err);
        if (st != INFER_OK || !(gbnf = (char *)malloc(n + 1))) ok = 0;
        else if (infer_json_schema_to_grammar(sch, gbnf, n + 1, NULL, &err) != INFER_OK) ok = 0;
        if (st == INFER_OK && !gbnf) snprintf(err.msg, sizeof err.msg, "out of memory");
    }
    if (ok && infer_sampler_set_grammar(s, m, schema ? gbnf : file ? text : src, NULL, &err) != INFER_OK) ok = 0;
    if (!ok) {
        if (file) fprintf(stderr, "infer: %s: %s\n", src, err.msg);
        else fprintf(stderr, "infer: %s\n", err.msg);
    }
    free(text);
    free(gbnf);
    return ok;
}

/* Prints n most probable tokens as one line: [probs] 'piece' 0.512 ...
   (pieces escaped; a control token, or one too long to show, as ''). */
static CLI_MAYBE_UNUSED void cli_print_probs(FILE *f, const infer_model *m, const infer_token_prob *top, int n) {
    int i, k;
    fprintf(f, "[probs]");
    for (i = 0; i < n; i++) {
        char piece[256];
        size_t n_piece = 0;
        int len;
        infer_token_to_piece(m, top[i].id, piece, sizeof piece, &n_piece, NULL);
        len = n_piece < sizeof piece ? (int)n_piece : 0;
        fprintf(f, " '");
        for (k = 0; k < len; k++) {
            unsigned char c = (unsigned char)piece[k];
            if (c == '\'' || c == '\\') fprintf(f, "\\%c", c);
            else if (c < 0x20 || c == 0x7f) fprintf(f, "\\x%02x", c);
            else fputc(c, f);
        }
        fprintf(f, "' %.3f", top[i].p);
    }
    fputc('\n', f);
}

/* The last sample's o->n_probs most probable tokens (after bias and
   grammar, at temperature 1), as cli_print_probs writes them. */
static CLI_MAYBE_UNUSED void cli_output_print_probs(const cli_output *o, const infer_sampler *s,
                                                    const infer_model *m, FILE *f) {
    infer_token_prob top[CLI_MAX_PROBS];
    int k = 0;
    if (o->n_probs <= 0) return;
    infer_sampler_top_probs(s, top, o->n_probs < CLI_MAX_PROBS ? o->n_probs : CLI_MAX_PROBS, &k, NULL);
    cli_print_probs(f, m, top, k);
}

/* When a is a RoPE scaling flag (--rope-scaling none|linear|yarn,
   --rope-scale F), parses v into mp, sets *ok, and returns 1; else 0. */
static CLI_MAYBE_UNUSED int cli_rope_option(const char *a, const char *v, infer_model_params *mp, int *ok) {
    if (!strcmp(a, "--rope-scaling")) {
        *ok = 1;
        if (!strcmp(v, "none")) mp->rope_scaling = INFER_ROPE_SCALING_NONE;
        else if (!strcmp(v, "linear")) mp->rope_scaling = INFER_ROPE_SCALING_LINEAR;
        else if (!strcmp(v, "yarn")) mp->rope_scaling = INFER_ROPE_SCALING_YARN;
        else {
            fprintf(stderr, "infer: bad value '%s' for --rope-scaling (none, linear or yarn)\n", v);
            *ok = -1; /* said */
        }
        return 1;
    }
    if (!strcmp(a, "--rope-scale")) {
        *ok = cli_float(v, &mp->rope_scale) && mp->rope_scale >= 1 && mp->rope_scale <= 1024;
        return 1;
    }
    return 0;
}

/* --rope-scale without --rope-scaling means YaRN (--rope-scaling linear or
   yarn without --rope-scale: the library's one-line error at loading). */
static CLI_MAYBE_UNUSED void cli_rope_defaults(infer_model_params *mp) {
    if (mp->rope_scale > 0 && mp->rope_scaling == INFER_ROPE_SCALING_FILE) mp->rope_scaling = INFER_ROPE_SCALING_YARN;
}

#define CLI_MAX_STOP 16

/* The options run and chat share (cli_common_option's), embedded in each command's own options. */
typedef struct cli_common {
    const char *model;
    int n_predict, threads, n_ctx;
    const char *stop[CLI_MAX_STOP];
    int n_stop, keep;
    int lookup;         /* --lookup: speculative decoding's draft tokens (0: none) */
    const char *draft;  /* --draft: a draft model's file (NULL: none) */
    int draft_n;        /* --draft-n: its tokens a pass (0: the default, 4) */
    infer_device device;
    infer_type kv_type;
    infer_sampler_params sp;
    infer_model_params rope; /* --rope-scaling, --rope-scale: its rope fields */
} cli_common;

/* The shared options' defaults; only -n's differs between the commands. */
static CLI_MAYBE_UNUSED void cli_common_defaults(cli_common *c, int n_predict) {
    memset(c, 0, sizeof *c);
    c->n_predict = n_predict;
    c->threads = 2;
    c->device = INFER_DEVICE_AUTO;
    c->sp = infer_sampler_default_params();
}

/* One shared flag a with its value v (not NULL). 1: handled, *ok says
   whether v was good; 0: not a shared flag; -1: a bad value, said on stderr. */
static CLI_MAYBE_UNUSED int cli_common_option(const char *a, const char *v, cli_common *c, int *ok) {
    *ok = 1;
    if (!strcmp(a, "-m") || !strcmp(a, "--model")) c->model = v;
    else if (!strcmp(a, "--stop")) {
        if (c->n_stop == CLI_MAX_STOP) return cli_fail("%s", "at most 16 --stop strings"), -1;
        *ok = *v != 0;
        c->stop[c->n_stop++] = v;
    } else if (!strcmp(a, "--keep")) *ok = cli_int(v, &c->keep) && c->keep >= 0;
    else if (!strcmp(a, "--lookup")) *ok = cli_int(v, &c->lookup) && c->lookup >= 0 && c->lookup <= 64;
    else if (!strcmp(a, "--draft")) c->draft = v;
    else if (!strcmp(a, "--draft-n")) *ok = cli_int(v, &c->draft_n) && c->draft_n >= 1 && c->draft_n <= 64;
    else if (!strcmp(a, "--device")) {
        if (!cli_device(v, &c->device)) return -1;
    } else if (!strcmp(a, "--kv-type")) {
        if (!cli_kv_type(v, &c->kv_type)) return -1;
    } else if (!strcmp(a, "-n")) *ok = cli_int(v, &c->n_predict) && c->n_predict >= 0;
    else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) *ok = cli_int(v, &c->threads) && c->threads >= 1 && c->threads <= 256;
    else if (!strcmp(a, "-c") || !strcmp(a, "--ctx")) *ok = cli_int(v, &c->n_ctx) && c->n_ctx >= 0;
    else if (cli_sampling_option(a, v, &c->sp, ok)) {
    } else if (cli_rope_option(a, v, &c->rope, ok)) {
        if (*ok < 0) return -1;
    } else return 0;
    return 1;
}

/* Warns, on stderr, when a context of n_ctx positions is past what the
   model was trained on and no RoPE scaling was asked for: what the
   positions past it do, and what --rope-scaling would do instead. */
static CLI_MAYBE_UNUSED void cli_context_warning(const infer_model *m, int n_ctx, const infer_model_params *mp) {
    int trained = infer_model_n_ctx_train(m);
    double factor;
    if (n_ctx <= trained || trained <= 0 || mp->rope_scaling != INFER_ROPE_SCALING_FILE) return;
    factor = (double)n_ctx / trained;
    fprintf(stderr,
            "infer: warning: -c %d is past the model's trained context (context_length %d): it never saw "
            "positions past %d, and its output there may lose its thread. --rope-scaling yarn --rope-scale %.4g "
            "would stretch its slow RoPE frequencies %.4gx to fit, keeping the fast ones (short-range detail); "
            "--rope-scaling linear divides every position by %.4g instead (coarser). Either costs some quality "
            "within the trained context; a model fine-tuned for long contexts says so in its GGUF.\n",
            n_ctx, trained, trained, factor, factor, factor);
}

/* A long prompt's progress on stderr (infer_request_params.progress for
   run, chat and serve): a line once the prompt has taken CLI_PROGRESS_S
   seconds, then at most one every CLI_PROGRESS_S, and the last; a terminal
   sees one line rewritten in place. cli_progress_begin before the
   request starts; label says whose prompt. */
#define CLI_PROGRESS_S 2.0
typedef struct cli_progress {
    const char *label;
    double t0, last;
    int shown, tty;
} cli_progress;

/* --draft: the draft model, of the target's vocabulary, and where dc is
   given its context (n_ctx, as long as the target's); NULL with the
   one-line error printed. */
static CLI_MAYBE_UNUSED infer_model *cli_load_draft(const char *path, infer_device device, const infer_model *target,
                                                   int threads, int n_ctx, infer_type kv_type, infer_context **dc) {
    infer_error err;
    infer_model_params mp = infer_model_default_params();
    infer_context_params cp = infer_context_default_params();
    infer_model *dm;
    mp.device = device;
    if (!(dm = infer_model_load(path, &mp, &err))) {
        fprintf(stderr, "infer: --draft: %s\n", err.msg);
        return NULL;
    }
    if (infer_model_n_vocab(dm) != infer_model_n_vocab(target)) {
        fprintf(stderr, "infer: --draft: the draft model has %d tokens in its vocabulary, the model %d: they must be the same\n",
                infer_model_n_vocab(dm), infer_model_n_vocab(target));
        infer_model_free(dm);
        return NULL;
    }
    if (!dc) return dm;
    cp.n_threads = threads;
    cp.n_ctx = n_ctx;
    cp.kv_type = kv_type;
    if (!(*dc = infer_context_new(dm, &cp, &err))) {
        fprintf(stderr, "infer: --draft: %s\n", err.msg);
        infer_model_free(dm);
        return NULL;
    }
    return dm;
}

static CLI_MAYBE_UNUSED double cli_seconds(void) { return os_now_ms() / 1e3; }

static CLI_MAYBE_UNUSED void cli_progress_begin(cli_progress *p, const char *label) {
    p->label = label;
    p->t0 = p->last = cli_seconds();
    p->shown = 0;
    p->tty = os_isatty(2);
}

static CLI_MAYBE_UNUSED int cli_progress_report(float share, void *user) {
    cli_progress *p = (cli_progress *)user;
    double now = cli_seconds(), spent = now - p->t0;
    int last = share >= 1.0f;
    if (!last && now - p->last < CLI_PROGRESS_S) return 0;
    if (last && !p->shown) return 0; /* a prompt that never took long */
    p->last = now;
    p->shown = 1;
    if (last)
        fprintf(stderr, "%sinfer: %s: read in %.1f s%s\n", p->tty ? "\r" : "", p->label, spent, p->tty ? "\033[K" : "");
    else
        fprintf(stderr, "%sinfer: %s: %.0f%% read in %.0f s, about %.0f s left%s", p->tty ? "\r" : "", p->label,
                100.0 * share, spent, share > 0 ? spent * (1.0 - share) / share : 0.0, p->tty ? "\033[K" : "\n");
    fflush(stderr);
    return 0;
}

#endif

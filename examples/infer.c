/* infer - the command-line tool: run, eval, tokenize, info.
   Every error is one line on stderr and a non-zero exit. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

int infer_cmd_chat(int argc, char **argv); /* infer_chat.c */
int infer_cmd_quantize(int argc, char **argv);   /* infer_quantize.c */
int infer_cmd_perplexity(int argc, char **argv); /* infer_perplexity.c */
int infer_cmd_bench(int argc, char **argv);      /* infer_bench.c */
int infer_cmd_embed(int argc, char **argv);      /* infer_embed.c */

static const char *usage =
    "usage: infer COMMAND [options]\n"
    "  run       -m MODEL [-p PROMPT] [-n N] [--temp T] [--top-k K] [--top-p P] [--min-p P]\n"
    "            [--repeat-penalty R] [--seed S] [-t THREADS] [-c CTX] [--json] [--device D]\n"
    "            [--kv-type f16|q8_0]\n"
    "  eval      -m MODEL --tokens \"1 2 3\" [--json] [-t THREADS] [--device D]\n"
    "  tokenize  -m MODEL (-p TEXT | --file PATH) [--no-bos] [--special]\n"
    "  info      -m MODEL [--device D]\n"
    "  chat      -m MODEL [--system TEXT] [-n N per reply] [--temp T] [--top-k K] [--top-p P] [--min-p P]\n"
    "            [--repeat-penalty R] [--seed S] [-t THREADS] [-c CTX] [--device D]   (user turns from stdin)\n"
    "            [--kv-type f16|q8_0] [--think on|off]\n"
    "  quantize  IN.gguf OUT.gguf TYPE [-t THREADS] [--allow-requantize]\n"
    "            (TYPE: F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q4_K Q5_K Q6_K Q4_K_M Q5_K_M)\n"
    "  perplexity -m MODEL -f FILE [-c CTX] [-t THREADS] [--chunks N] [--device D]\n"
    "  bench     -m MODEL [-p 128] [-n 64] [-r 5] [-t THREADS] [-o md|json|csv] [--device D] [--parallel N]\n"
    "  embed     -m MODEL (-p TEXT | -f FILE) [--pooling mean|last|first] [--no-normalize] [-o json|text]\n"
    "            [--kv-type f16|q8_0]\n"
    "  --kv-type T: the KV cache's format, f16 (the default) or q8_0 (half the memory)\n"
    "  --think off: Qwen3 and SmolLM3 answer without reasoning (chat; on is the default)\n"
    "  --device D: where the forward pass runs: cpu, cuda or auto (the default: the GPU when\n"
    "            this build has CUDA and one is present, else the CPU)\n";

typedef struct options {
    const char *model, *prompt, *file, *tokens;
    int n_predict, threads, n_ctx, json, no_bos, special;
    infer_device device;
    infer_type kv_type;
    infer_sampler_params sp;
} options;

/* The options that take a value. */
static int known_option(const char *a) {
    static const char *const opts[] = {"-m", "--model", "-p", "--prompt", "-f", "--file", "--tokens", "-n",
                                       "-t", "--threads", "-c", "--ctx", "--temp", "--top-k", "--top-p",
                                       "--min-p", "--repeat-penalty", "--seed", "--device", "--kv-type"};
    size_t i;
    for (i = 0; i < sizeof opts / sizeof opts[0]; i++)
        if (!strcmp(a, opts[i])) return 1;
    return 0;
}

/* Parses argv[2..]; returns 0 and prints the problem on a bad flag. */
static int parse_options(int argc, char **argv, options *o) {
    int i;
    memset(o, 0, sizeof *o);
    o->n_predict = 128;
    o->threads = 2;
    o->device = INFER_DEVICE_AUTO;
    o->sp = infer_sampler_default_params();
    for (i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int ok = 1, takes = 1;
        if (!strcmp(a, "--json")) o->json = 1, takes = 0;
        else if (!strcmp(a, "--no-bos")) o->no_bos = 1, takes = 0;
        else if (!strcmp(a, "--special")) o->special = 1, takes = 0;
        else if (!known_option(a)) return cli_fail("unknown option %s (see infer --help)", a), 0;
        else if (!v) return cli_fail("option %s needs a value", a), 0;
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) o->model = v;
        else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) o->prompt = v;
        else if (!strcmp(a, "-f") || !strcmp(a, "--file")) o->file = v;
        else if (!strcmp(a, "--tokens")) o->tokens = v;
        else if (!strcmp(a, "--device")) {
            if (!cli_device(v, &o->device)) return 0;
        } else if (!strcmp(a, "--kv-type")) {
            if (!cli_kv_type(v, &o->kv_type)) return 0;
        } else if (!strcmp(a, "-n")) ok = cli_int(v, &o->n_predict) && o->n_predict >= 0;
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) ok = cli_int(v, &o->threads) && o->threads >= 1 && o->threads <= 256;
        else if (!strcmp(a, "-c") || !strcmp(a, "--ctx")) ok = cli_int(v, &o->n_ctx) && o->n_ctx >= 0;
        else if (cli_sampling_option(a, v, &o->sp, &ok)) {
        } else return cli_fail("unknown option %s (see infer --help)", a), 0;
        if (!ok) {
            fprintf(stderr, "infer: bad value '%s' for %s\n", v, a);
            return 0;
        }
        i += takes;
    }
    if (!o->model) return cli_fail("%s", "no model given (-m MODEL)"), 0;
    return 1;
}

static void json_string(FILE *f, const char *s, size_t n) {
    size_t i;
    fputc('"', f);
    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c == '\n') fputs("\\n", f);
        else if (c == '\r') fputs("\\r", f);
        else if (c == '\t') fputs("\\t", f);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

static void json_tokens(FILE *f, const infer_token *t, int n) {
    int i;
    fputc('[', f);
    for (i = 0; i < n; i++) fprintf(f, i ? ",%d" : "%d", t[i]);
    fputc(']', f);
}

static infer_model *load(const options *o, int vocab_only) {
    infer_error err;
    infer_model_params mp = infer_model_default_params();
    infer_model *m;
    mp.vocab_only = vocab_only;
    mp.device = o->device;
    m = infer_model_load(o->model, &mp, &err);
    if (!m) fprintf(stderr, "infer: %s\n", err.msg);
    else if (infer_model_warning(m)) fprintf(stderr, "infer: warning: %s\n", infer_model_warning(m));
    return m;
}

/* ---- run ---- */

typedef struct text_sink {
    int json;
    char *buf;
    size_t len, cap;
} text_sink;

static int on_piece(const char *piece, int len, void *user) {
    text_sink *s = (text_sink *)user;
    if (!s->json) {
        fwrite(piece, 1, (size_t)len, stdout);
        fflush(stdout);
        return 0;
    }
    if (s->len + (size_t)len > s->cap) {
        size_t cap = (s->cap + (size_t)len) * 2;
        char *p = (char *)realloc(s->buf, cap);
        if (!p) return 1;
        s->buf = p;
        s->cap = cap;
    }
    memcpy(s->buf + s->len, piece, (size_t)len);
    s->len += (size_t)len;
    return 0;
}

static void print_metrics(FILE *f, const infer_metrics *mt, int json) {
    if (json) {
        fprintf(f,
                "{\"load_ms\":%.3f,\"prompt_tokens\":%d,\"prompt_ms\":%.3f,\"prompt_tps\":%.2f,\"ttft_ms\":%.3f,"
                "\"generated_tokens\":%d,\"gen_ms\":%.3f,\"gen_tps\":%.2f,\"token_ms_min\":%.3f,"
                "\"token_ms_avg\":%.3f,\"token_ms_max\":%.3f,\"model_bytes\":%zu,\"context_bytes\":%zu,"
                "\"peak_rss_bytes\":%zu}",
                mt->load_ms, mt->n_prompt_tokens, mt->prompt_ms, mt->prompt_tps, mt->ttft_ms, mt->n_gen_tokens,
                mt->gen_ms, mt->gen_tps, mt->token_ms_min, mt->token_ms_avg, mt->token_ms_max, mt->model_bytes,
                mt->context_bytes, mt->peak_rss_bytes);
        return;
    }
    fprintf(f, "\n\nload %.1f ms | prompt %d tokens in %.1f ms (%.1f t/s) | first token after %.1f ms\n",
            mt->load_ms, mt->n_prompt_tokens, mt->prompt_ms, mt->prompt_tps, mt->ttft_ms);
    fprintf(f, "generated %d tokens in %.1f ms (%.1f t/s), per token min %.2f avg %.2f max %.2f ms\n",
            mt->n_gen_tokens, mt->gen_ms, mt->gen_tps, mt->token_ms_min, mt->token_ms_avg, mt->token_ms_max);
    fprintf(f, "memory: weights %.1f MiB, context %.1f MiB, peak RSS %.1f MiB\n", mt->model_bytes / 1048576.0,
            mt->context_bytes / 1048576.0, mt->peak_rss_bytes / 1048576.0);
}

static int cmd_run(const options *o) {
    infer_error err;
    infer_context_params cp = infer_context_default_params();
    infer_model *m = load(o, 0);
    infer_context *c;
    infer_sampler *s;
    text_sink sink;
    infer_metrics mt;
    int rc = 0;
    if (!m) return 1;
    cp.n_threads = o->threads;
    cp.n_ctx = o->n_ctx;
    cp.kv_type = o->kv_type;
    c = infer_context_new(m, &cp, &err);
    if (!c) {
        fprintf(stderr, "infer: %s\n", err.msg);
        infer_model_free(m);
        return 1;
    }
    s = infer_sampler_new(&o->sp, infer_model_n_vocab(m));
    memset(&sink, 0, sizeof sink);
    sink.json = o->json;
    if (!s || infer_generate(c, s, o->prompt ? o->prompt : "", o->n_predict, on_piece, &sink, &err)) {
        fprintf(stderr, "infer: %s\n", s ? err.msg : "out of memory");
        rc = 1;
    } else {
        mt = infer_context_metrics(c);
        if (o->json) {
            int np, ng;
            const infer_token *pt = infer_context_prompt_tokens(c, &np);
            const infer_token *gt = infer_context_generated_tokens(c, &ng);
            printf("{\"prompt_tokens\":");
            json_tokens(stdout, pt, np);
            printf(",\"tokens\":");
            json_tokens(stdout, gt, ng);
            printf(",\"text\":");
            json_string(stdout, sink.buf ? sink.buf : "", sink.len);
            printf(",\"metrics\":");
            print_metrics(stdout, &mt, 1);
            printf("}\n");
        } else {
            print_metrics(stderr, &mt, 0);
        }
    }
    free(sink.buf);
    infer_sampler_free(s);
    infer_context_free(c);
    infer_model_free(m);
    return rc;
}

/* ---- eval ---- */

static int cmd_eval(const options *o) {
    infer_error err;
    infer_context_params cp = infer_context_default_params();
    infer_model *m;
    infer_context *c;
    infer_token *toks = NULL;
    int n = 0, cap = 0, i, j, rc = 0;
    const char *p;
    if (!o->tokens) return cli_fail("%s", "eval needs --tokens \"ID ID ...\"");
    for (p = o->tokens; *p;) {
        char *end;
        long v;
        while (*p == ' ' || *p == ',' || *p == '\t' || *p == '\n') p++;
        if (!*p) break;
        errno = 0;
        v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > 2147483647L) {
            free(toks);
            return cli_fail("bad token id in --tokens: %s", p);
        }
        if (n == cap) {
            infer_token *t = (infer_token *)realloc(toks, (size_t)(cap = cap ? cap * 2 : 64) * sizeof *toks);
            if (!t) return free(toks), cli_fail("%s", "out of memory");
            toks = t;
        }
        toks[n++] = (infer_token)v;
        p = end;
    }
    if (!n) return free(toks), cli_fail("%s", "--tokens holds no ids");
    m = load(o, 0);
    if (!m) return free(toks), 1;
    cp.n_threads = o->threads;
    cp.kv_type = o->kv_type;
    cp.n_ctx = o->n_ctx ? o->n_ctx : (n > infer_model_n_ctx_train(m) ? n : 0);
    if (cp.n_ctx && cp.n_ctx < n) cp.n_ctx = n;
    c = infer_context_new(m, &cp, &err);
    if (!c || infer_decode(c, toks, n, 1, &err)) {
        fprintf(stderr, "infer: %s\n", err.msg);
        rc = 1;
    } else {
        int nv = infer_model_n_vocab(m);
        printf("{\"logits\":[");
        for (i = 0; i < n; i++) {
            const float *l = infer_get_logits(c, i);
            printf(i ? ",[" : "[");
            for (j = 0; j < nv; j++) printf(j ? ",%.9g" : "%.9g", l[j]);
            printf("]");
        }
        printf("]}\n");
    }
    infer_context_free(c);
    infer_model_free(m);
    free(toks);
    return rc;
}

/* ---- tokenize ---- */

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t cap = 0, n = 0, r;
    if (!f) return NULL;
    do {
        if (n == cap) {
            char *b = (char *)realloc(buf, cap = cap ? cap * 2 : 65536);
            if (!b) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = b;
        }
        r = fread(buf + n, 1, cap - n, f);
        n += r;
    } while (r > 0);
    fclose(f);
    *len = n;
    return buf ? buf : (char *)calloc(1, 1);
}

static int cmd_tokenize(const options *o) {
    infer_model *m;
    char *text;
    size_t len;
    infer_token *toks;
    int n, i, bos;
    if (!o->prompt == !o->file) return cli_fail("%s", "tokenize needs one of -p TEXT or --file PATH");
    if (o->file) {
        text = read_file(o->file, &len);
        if (!text) return cli_fail("cannot read %s", o->file);
    } else {
        len = strlen(o->prompt);
        text = (char *)malloc(len + 1);
        if (!text) return cli_fail("%s", "out of memory");
        memcpy(text, o->prompt, len + 1);
    }
    m = load(o, 1);
    if (!m) return free(text), 1;
    bos = !o->no_bos && infer_model_add_bos(m);
    n = infer_tokenize(m, text, len, NULL, 0, bos, o->special);
    toks = (infer_token *)malloc(((size_t)(n > 0 ? n : 0) + 1) * sizeof *toks);
    if (n < 0 || !toks) {
        fprintf(stderr, "infer: the text could not be tokenized\n");
        free(toks);
        free(text);
        infer_model_free(m);
        return 1;
    }
    infer_tokenize(m, text, len, toks, n, bos, o->special);
    for (i = 0; i < n; i++) printf(i ? " %d" : "%d", toks[i]);
    printf("\n");
    free(toks);
    free(text);
    infer_model_free(m);
    return 0;
}

/* ---- info ---- */

static int cmd_info(const options *o) {
    infer_error err;
    infer_gguf *g = infer_gguf_open(o->model, &err);
    infer_model_params mp = infer_model_default_params();
    infer_model *m;
    char buf[512];
    int64_t i;
    int d;
    if (!g) return cli_fail("%s", err.msg);
    printf("file: %s\nGGUF version %u, %lld metadata keys, %lld tensors\n\n", o->model, infer_gguf_version(g),
           (long long)infer_gguf_n_kv(g), (long long)infer_gguf_n_tensors(g));
    for (i = 0; i < infer_gguf_n_kv(g); i++) {
        infer_gguf_kv_to_string(g, i, buf, sizeof buf);
        printf("  %-40s = %s\n", infer_gguf_key(g, i), buf);
    }
    printf("\n  %-32s %-6s %-22s %12s\n", "tensor", "type", "shape", "bytes");
    for (i = 0; i < infer_gguf_n_tensors(g); i++) {
        infer_tensor_info t;
        char shape[64];
        size_t pos = 0;
        infer_gguf_tensor(g, i, &t);
        for (d = 0; d < t.n_dims; d++)
            pos += (size_t)snprintf(shape + pos, sizeof shape - pos, d ? " x %lld" : "%lld", (long long)t.ne[d]);
        printf("  %-32s %-6s %-22s %12zu\n", t.name, infer_type_name(t.type), shape, t.nbytes);
    }
    mp.vocab_only = infer_gguf_n_tensors(g) == 0;
    mp.device = o->device;
    infer_gguf_close(g);
    m = infer_model_load(o->model, &mp, &err);
    if (!m) {
        printf("\nmodel: cannot be loaded: %s\n", err.msg);
        return 1;
    }
    infer_model_describe(m, buf, sizeof buf);
    printf("\nmodel: %s\n", buf);
    if (!mp.vocab_only && infer_model_device(m) == INFER_DEVICE_CUDA) printf("device: cuda (%s)\n", infer_model_device_name(m));
    else if (!mp.vocab_only) printf("device: cpu\n");
    if (infer_model_warning(m)) printf("warning: %s\n", infer_model_warning(m));
    infer_model_free(m);
    return 0;
}

int main(int argc, char **argv) {
    options o;
    const char *cmd = argc > 1 ? argv[1] : NULL;
    if (!cmd || !strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        fputs(usage, cmd ? stdout : stderr);
        return cmd ? 0 : 1;
    }
    if (!strcmp(cmd, "chat")) return infer_cmd_chat(argc, argv);
    if (!strcmp(cmd, "quantize")) return infer_cmd_quantize(argc, argv);
    if (!strcmp(cmd, "perplexity")) return infer_cmd_perplexity(argc, argv);
    if (!strcmp(cmd, "bench")) return infer_cmd_bench(argc, argv);
    if (!strcmp(cmd, "embed")) return infer_cmd_embed(argc, argv);
    if (strcmp(cmd, "run") && strcmp(cmd, "eval") && strcmp(cmd, "tokenize") && strcmp(cmd, "info")) {
        fprintf(stderr, "infer: unknown command '%s' (see infer --help)\n", cmd);
        return 1;
    }
    if (!parse_options(argc, argv, &o)) return 1;
    if (!strcmp(cmd, "run")) return cmd_run(&o);
    if (!strcmp(cmd, "eval")) return cmd_eval(&o);
    if (!strcmp(cmd, "tokenize")) return cmd_tokenize(&o);
    return cmd_info(&o);
}

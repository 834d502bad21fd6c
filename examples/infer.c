/* infer - the command-line tool: run, eval, tokenize, info, and the
   commands of infer_*.c (chat, quantize, perplexity, bench, embed, serve).
   Every error is one line on stderr and a non-zero exit. */
#define _XOPEN_SOURCE 700 /* open, fstat (cli.h reads only regular files) */
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
int infer_cmd_template(int argc, char **argv);   /* infer_template.c */
#ifdef INFER_CLI_SERVE
int infer_cmd_serve(int argc, char **argv);      /* infer_serve.c, where libmicrohttpd and cJSON were found */
#endif

static const char *usage =
    "usage: infer COMMAND [options]   (infer COMMAND --help: its options; infer --version)\n"
    "  run       -m MODEL (-p PROMPT | -f FILE): generate text from a prompt\n"
    "  eval      -m MODEL --tokens \"1 2 3\": every position's logits, as JSON\n"
    "  tokenize  -m MODEL (-p TEXT | --file PATH): the text's token ids\n"
    "  info      -m MODEL: the GGUF's metadata and tensors\n"
    "  chat      -m MODEL: a conversation, user turns from stdin\n"
    "  quantize  IN.gguf OUT.gguf TYPE: a model converted to another type\n"
    "            (TYPE: F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q4_K Q5_K Q6_K Q4_K_M Q5_K_M)\n"
    "  perplexity -m MODEL -f FILE: the model's perplexity on a text\n"
    "  bench     -m MODEL: prompt and generation speed\n"
    "  embed     -m MODEL (-p TEXT | -f FILE): embedding vectors\n"
    "  serve     -m MODEL: an OpenAI-compatible server\n"
    "  template  (--template FILE | -m MODEL) --conversation FILE.json: the chat template's text, rendered\n"
    "  version   this build's version (also infer --version)\n";

/* run's notes after its options (eval, tokenize and info share them) */
static const char *run_notes =
    "\n"
    "  -f FILE: the prompt as -p gives it, less one final newline. --stop, --logit-bias may repeat.\n"
    "  --lookup N: the context's own earlier tokens drafted, verified in the same pass; output\n"
    "  unchanged. --draft MODEL drafts greedily in a context of its own (give one of the two).\n"
    "  --rope-scaling linear|yarn --rope-scale F: reach F times the model's trained context (-c past\n"
    "  it warns): linear divides positions by F, YaRN stretches the slow RoPE frequencies only;\n"
    "  none: no scaling even where the GGUF sets one. --rope-scale alone means yarn.\n"
    "  A prompt that takes over 2 s to read shows its progress on stderr.\n";

/* Every command's options, from cli.h's table (infer --help). */
static void print_all_options(FILE *f) {
    static const struct {
        const char *name;
        unsigned cmd;
    } cmds[] = {{"run, eval, tokenize, info", CLI_CMD_RUN}, {"chat", CLI_CMD_CHAT},
                {"quantize", CLI_CMD_QUANTIZE},           {"perplexity", CLI_CMD_PERPLEXITY},
                {"bench", CLI_CMD_BENCH},                 {"embed", CLI_CMD_EMBED},
                {"serve", CLI_CMD_SERVE},                 {"template", CLI_CMD_TEMPLATE}};
    size_t i;
    for (i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        fprintf(f, "\n%s ", cmds[i].name);
        cli_print_options(f, cmds[i].cmd);
    }
}

typedef struct options {
    cli_common c; /* -m, -n, -t, -c, sampling, --device, --kv-type, --stop, --keep, RoPE, --lookup, --draft */
    const char *prompt, *file, *tokens;
    int json, no_bos, special;
    int shift, beams;
    float length_penalty;
    const char *prompt_cache;
    cli_output out; /* --grammar, --json-schema, --logit-bias, --n-probs */
} options;

/* Parses argv[2..]; returns 0 and prints the problem on a bad flag, 2 on
   -h/--help. */
static int parse_options(int argc, char **argv, options *o) {
    int i;
    memset(o, 0, sizeof *o);
    cli_common_defaults(&o->c, 128);
    o->length_penalty = 1.0f;
    for (i = 2; i < argc; i++) {
        const char *a = argv[i], *v;
        int ok = 1, shared, takes = cli_flag_check(argc, argv, i, CLI_CMD_RUN);
        if (takes < 0) return 0;
        v = takes ? argv[i + 1] : NULL;
        if (cli_is_help(a)) return 2;
        else if (!strcmp(a, "--json")) o->json = 1;
        else if (!strcmp(a, "--no-bos")) o->no_bos = 1;
        else if (!strcmp(a, "--special")) o->special = 1;
        else if (!strcmp(a, "--context-shift")) o->shift = 1;
        else if (cli_output_option(a, v, &o->out, &ok)) {
        } else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) o->prompt = v;
        else if (!strcmp(a, "-f") || !strcmp(a, "--file")) o->file = v;
        else if (!strcmp(a, "--tokens")) o->tokens = v;
        else if (!strcmp(a, "--beams")) ok = cli_int(v, &o->beams) && o->beams >= 1 && o->beams <= 64;
        else if (!strcmp(a, "--length-penalty")) ok = cli_float(v, &o->length_penalty);
        else if (!strcmp(a, "--prompt-cache")) o->prompt_cache = v;
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
    mp.device = o->c.device;
    mp.rope_scaling = o->c.rope.rope_scaling;
    mp.rope_scale = o->c.rope.rope_scale;
    m = infer_model_load(o->c.model, &mp, &err);
    if (!m) fprintf(stderr, "infer: %s\n", err.msg);
    else if (infer_model_warning(m)) fprintf(stderr, "infer: warning: %s\n", infer_model_warning(m));
    return m;
}

/* ---- output control for requests ---- */

/* Puts o (cli.h's --grammar ... --n-probs) into request parameters p for
   model m; *owned gets a file's text to free after the request starts.
   Returns 1, or 0 with the one-line error printed. (Also used by chat.) */
int cli_output_request(const cli_output *o, const infer_model *m, infer_request_params *p, char **owned);
int cli_output_request(const cli_output *o, const infer_model *m, infer_request_params *p, char **owned) {
    const char *file = o->grammar_file ? o->grammar_file : o->json_schema_file;
    int n_src = !!o->grammar + !!o->grammar_file + !!o->json_schema + !!o->json_schema_file, i;
    *owned = NULL;
    for (i = 0; i < o->n_bias; i++)
        if (o->bias_id[i] >= infer_model_n_vocab(m)) {
            fprintf(stderr, "infer: --logit-bias: token %d is out of range (the model has %d tokens)\n",
                    (int)o->bias_id[i], infer_model_n_vocab(m));
            return 0;
        }
    if (n_src > 1) {
        fprintf(stderr, "infer: give only one of --grammar, --grammar-file, --json-schema, --json-schema-file\n");
        return 0;
    }
    if (file && !(*owned = cli_read_file(file, CLI_TEXT_FILE_MAX, o->grammar_file ? "a grammar file" : "a JSON schema file",
                                         NULL)))
        return 0;
    p->grammar = o->grammar ? o->grammar : o->grammar_file ? *owned : NULL;
    p->json_schema = o->json_schema ? o->json_schema : o->json_schema_file ? *owned : NULL;
    p->bias_ids = o->bias_id;
    p->bias = o->bias;
    p->n_bias = o->n_bias;
    p->n_probs = o->n_probs;
    return 1;
}

/* Token i's top probabilities, one line as cli.h prints them. */
static void print_probs(const infer_request *r, const infer_model *m, int i, int n_probs, FILE *f) {
    infer_token_prob top[CLI_MAX_PROBS];
    int k = 0;
    infer_request_top_probs(r, i, top, n_probs < CLI_MAX_PROBS ? n_probs : CLI_MAX_PROBS, &k, NULL);
    cli_print_probs(f, m, top, k);
}

/* ---- run ---- */

/* Prints the request's text from *printed on (to out, or appended to a
   buffer for --json). Returns 0 when out of memory. */
static int flush_text(const infer_request *r, size_t *printed, FILE *out, char **buf, size_t *len) {
    size_t n = infer_request_text(r, *printed, NULL, 0);
    char *p;
    if (!n) return 1;
    p = (char *)realloc(*buf, *len + n + 1);
    if (!p) return 0;
    *buf = p;
    infer_request_text(r, *printed, p + *len, n + 1);
    if (out) {
        fwrite(p + *len, 1, n, out);
        fflush(out);
    } else {
        *len += n;
    }
    *printed += n;
    return 1;
}

static void print_metrics(FILE *f, const infer_metrics *mt, int json) {
    if (json) {
        fprintf(f,
                "{\"load_ms\":%.3f,\"prompt_tokens\":%d,\"prompt_ms\":%.3f,\"prompt_tps\":%.2f,\"ttft_ms\":%.3f,"
                "\"generated_tokens\":%d,\"gen_ms\":%.3f,\"gen_tps\":%.2f,\"token_ms_min\":%.3f,"
                "\"token_ms_avg\":%.3f,\"token_ms_max\":%.3f,\"model_bytes\":%zu,\"context_bytes\":%zu,"
                "\"peak_rss_bytes\":%zu,\"draft_tokens\":%d,\"draft_accepted\":%d}",
                mt->load_ms, mt->n_prompt_tokens, mt->prompt_ms, mt->prompt_tps, mt->ttft_ms, mt->n_gen_tokens,
                mt->gen_ms, mt->gen_tps, mt->token_ms_min, mt->token_ms_avg, mt->token_ms_max, mt->model_bytes,
                mt->context_bytes, mt->peak_rss_bytes, mt->n_draft_tokens, mt->n_draft_accepted);
        return;
    }
    fprintf(f, "\n\nload %.1f ms | prompt %d tokens in %.1f ms (%.1f t/s) | first token after %.1f ms\n",
            mt->load_ms, mt->n_prompt_tokens, mt->prompt_ms, mt->prompt_tps, mt->ttft_ms);
    fprintf(f, "generated %d tokens in %.1f ms (%.1f t/s), per token min %.2f avg %.2f max %.2f ms\n",
            mt->n_gen_tokens, mt->gen_ms, mt->gen_tps, mt->token_ms_min, mt->token_ms_avg, mt->token_ms_max);
    if (mt->n_draft_tokens > 0)
        fprintf(f, "speculation: %d draft tokens, %d accepted (acceptance rate %.1f%%)\n", mt->n_draft_tokens,
                mt->n_draft_accepted, 100.0 * mt->n_draft_accepted / mt->n_draft_tokens);
    fprintf(f, "memory: weights %.1f MiB, context %.1f MiB, peak RSS %.1f MiB\n", mt->model_bytes / 1048576.0,
            mt->context_bytes / 1048576.0, mt->peak_rss_bytes / 1048576.0);
}

/* --beams: the best hypothesis of a beam search, as run prints a reply. */
static int run_beams(const options *o, infer_model *m, infer_context *c) {
    infer_beam_params bp = infer_beam_default_params();
    infer_error err;
    infer_token *out;
    infer_detok d;
    char piece[256], *text;
    size_t used = 0;
    float score = 0;
    int n, i;
    bp.n_beams = o->beams;
    bp.length_penalty = o->length_penalty;
    bp.n_predict = o->c.n_predict > 0 ? o->c.n_predict : 1;
    out = (infer_token *)malloc(sizeof *out * (size_t)bp.n_predict);
    if (!out) return cli_fail("%s", "out of memory");
    if (infer_beam_search(c, o->prompt ? o->prompt : "", &bp, out, bp.n_predict, &n, &score, &err) != INFER_OK) {
        free(out);
        return cli_fail("%s", err.msg);
    }
    text = (char *)malloc((size_t)n * 256 + 256);
    if (!text) {
        free(out);
        return cli_fail("%s", "out of memory");
    }
    memset(&d, 0, sizeof d);
    for (i = 0; i <= n; i++) {
        size_t len = 0;
        if (i < n) infer_detok_push(&d, m, out[i], piece, sizeof piece, &len, NULL);
        else infer_detok_flush(&d, piece, sizeof piece, &len, NULL);
        if (len > 0) memcpy(text + used, piece, len), used += len;
    }
    if (o->json) {
        printf("{\"tokens\":");
        json_tokens(stdout, out, n);
        printf(",\"text\":");
        json_string(stdout, text, used);
        printf(",\"score\":%.6f,\"beams\":%d}\n", score, o->beams);
    } else {
        fwrite(text, 1, used, stdout); /* as a sampled reply: no newline of its own */
    }
    free(text);
    fprintf(stderr, "infer: beam search of %d beams: %d tokens, score %.4f (sum of log p / length^%g)\n", o->beams, n,
            score, o->length_penalty);
    free(out);
    return 0;
}

/* --prompt-cache FILE: the prompt decoded into sequence 0, reusing what
   FILE's saved state shares with it, and its state saved there again;
   the request then continues from the sequence (its prompt empty). */
static int prompt_cache(const options *o, infer_model *m, infer_context *c) {
    infer_error err;
    const char *text = o->prompt ? o->prompt : "";
    int n = 0, k = 0, nc = 0;
    cli_progress prog;
    infer_token *t;
    const infer_token *cached;
    const char *kind = cli_not_regular(o->prompt_cache);
    if (infer_tokenize(m, text, strlen(text), NULL, 0, infer_model_add_bos(m), 1, &n, &err) != INFER_OK)
        return cli_fail("%s", err.msg);
    if (n <= 0) return cli_fail("%s", "--prompt-cache needs a prompt");
    /* it is read and then written: a FIFO or device would wait or never end */
    if (kind) {
        fprintf(stderr, "infer: --prompt-cache %s is %s, not a regular file\n", o->prompt_cache, kind);
        return 1;
    }
    t = (infer_token *)malloc(sizeof *t * (size_t)n);
    if (!t) return cli_fail("%s", "out of memory");
    infer_tokenize(m, text, strlen(text), t, n, infer_model_add_bos(m), 1, NULL, NULL);
    if (infer_seq_state_load_file(c, 0, o->prompt_cache, &err) == INFER_OK) {
        cached = infer_seq_tokens(c, 0, &nc);
        while (k < nc && k < n && cached[k] == t[k]) k++;
        if (k == n && nc == n && infer_seq_logits(c, 0)) { /* the same prompt: nothing to decode */
        } else {
            if (k == n) k--; /* the last token again, for its logits */
            infer_seq_truncate(c, 0, k, &k, NULL);
        }
    } else if (err.code != INFER_ERR_IO) {
        fprintf(stderr, "infer: warning: %s: %s; the prompt is decoded afresh\n", o->prompt_cache, err.msg);
    }
    cli_progress_begin(&prog, "prompt");
    infer_context_set_progress(c, cli_progress_report, &prog);
    if (k < n && infer_seq_n_past(c, 0) < n && infer_decode(c, t + k, n - k, 0, &err) != INFER_OK) {
        free(t);
        return cli_fail("%s", err.msg);
    }
    fprintf(stderr, "infer: prompt cache %s: %d of %d prompt tokens reused\n", o->prompt_cache, k, n);
    free(t);
    if (infer_seq_state_save_file(c, 0, o->prompt_cache, &err) != INFER_OK) return cli_fail("%s", err.msg);
    return 0;
}

static int cmd_run(const options *o) {
    infer_error err;
    infer_model *dm = NULL;
    infer_context *dc = NULL;
    infer_context_params cp = infer_context_default_params();
    infer_request_params rp = infer_request_default_params();
    infer_model *m;
    infer_context *c;
    infer_request *r;
    infer_metrics mt;
    char *text = NULL, *owned = NULL;
    size_t printed = 0, len = 0;
    int rc = 0, probs_shown = 0;
    cli_progress prog;
    if (o->c.lookup && o->c.draft) return cli_fail("%s", "give only one of --lookup and --draft");
    if (o->c.draft_n && !o->c.draft) return cli_fail("%s", "--draft-n needs --draft MODEL");
    if (!(m = load(o, 0))) return 1;
    cp.n_threads = o->c.threads;
    cp.n_ctx = o->c.n_ctx;
    cp.kv_type = o->c.kv_type;
    cp.full_policy = o->shift ? INFER_FULL_POLICY_SHIFT : INFER_FULL_POLICY_STOP;
    cp.n_keep = o->c.keep;
    cp.n_seq = o->beams > 1 ? o->beams : 1;
    if (o->beams && (o->out.grammar || o->out.grammar_file || o->out.json_schema || o->out.json_schema_file ||
                     o->c.n_stop || o->out.n_probs || o->prompt_cache || o->c.lookup || o->c.draft)) {
        infer_model_free(m);
        return cli_fail("%s", "--beams does not combine with grammars, --stop, --n-probs, --prompt-cache, --lookup or --draft");
    }
    c = infer_context_new(m, &cp, &err);
    if (!c) {
        fprintf(stderr, "infer: %s\n", err.msg);
        infer_model_free(m);
        return 1;
    }
    cli_context_warning(m, infer_context_n_ctx(c), &o->c.rope);
    if (o->beams || (o->prompt_cache && prompt_cache(o, m, c))) {
        rc = o->beams ? run_beams(o, m, c) : 1;
        infer_context_free(c);
        infer_model_free(m);
        return rc;
    }
    rp.prompt = o->prompt_cache ? "" : o->prompt ? o->prompt : "";
    if (o->prompt_cache) rp.n_past = -1; /* continue the decoded prompt */
    rp.n_predict = o->c.n_predict;
    rp.lookup = o->c.lookup;
    rp.sampling = o->c.sp;
    rp.stop = o->c.stop;
    rp.n_stop = o->c.n_stop;
    rp.progress = cli_progress_report;
    rp.progress_user = &prog;
    cli_progress_begin(&prog, "prompt");
    if (!cli_output_request(&o->out, m, &rp, &owned)) {
        infer_context_free(c);
        infer_model_free(m);
        return 1;
    }
    if (o->c.draft) {
        if (!(dm = cli_load_draft(o->c.draft, o->c.device, m, o->c.threads, infer_context_n_ctx(c), o->c.kv_type, &dc))) {
            free(owned);
            infer_context_free(c);
            infer_model_free(m);
            return 1;
        }
        rp.draft = dc;
        rp.draft_n = o->c.draft_n ? o->c.draft_n : 4;
    }
    r = infer_request_start(c, &rp, &err);
    free(owned);
    if (!r) {
        fprintf(stderr, "infer: %s\n", err.msg);
        infer_context_free(dc);
        infer_model_free(dm);
        infer_context_free(c);
        infer_model_free(m);
        return 1;
    }
    /* one forward pass per step: the text streams as it comes */
    for (;;) {
        int left = infer_context_step(c, 0);
        if (!flush_text(r, &printed, o->json ? NULL : stdout, &text, &len)) break;
        if (o->out.n_probs > 0 && !o->json)
            for (;; probs_shown++) {
                int n_gen = 0;
                infer_request_tokens(r, NULL, 0, &n_gen, NULL);
                if (probs_shown >= n_gen) break;
                print_probs(r, m, probs_shown, o->out.n_probs, stderr);
            }
        if (!left) break;
    }
    if (!flush_text(r, &printed, o->json ? NULL : stdout, &text, &len)) {
        fprintf(stderr, "infer: out of memory\n");
        rc = 1;
    } else if (infer_request_status(r, &err) != INFER_OK) {
        /* the text so far stands (printed, or in the JSON), then why it ended */
        if (!o->json && printed) fputc('\n', stdout);
        if (err.code == INFER_ERR_CONTEXT_FULL && !o->shift && !strncmp(err.msg, "the context is full", 19))
            fprintf(stderr, "infer: %s (a larger -c, or --context-shift, goes on)\n", err.msg);
        else fprintf(stderr, "infer: %s\n", err.msg);
        rc = 1;
    }
    mt = infer_request_metrics(r);
    if (o->json) { /* the object in any case; "error" says why it ended early */
        int np = 0, ng = 0;
        infer_token *pt, *gt;
        infer_request_prompt_tokens(r, NULL, 0, &np, NULL);
        infer_request_tokens(r, NULL, 0, &ng, NULL);
        pt = (infer_token *)malloc(((size_t)np + 1) * sizeof *pt);
        gt = (infer_token *)malloc(((size_t)ng + 1) * sizeof *gt);
        if (pt && gt) {
            infer_request_prompt_tokens(r, pt, np, NULL, NULL);
            infer_request_tokens(r, gt, ng, NULL, NULL);
            printf("{\"prompt_tokens\":");
            json_tokens(stdout, pt, np);
            printf(",\"tokens\":");
            json_tokens(stdout, gt, ng);
            printf(",\"text\":");
            json_string(stdout, text ? text : "", len);
            printf(",\"metrics\":");
            print_metrics(stdout, &mt, 1);
            if (o->out.n_probs > 0) { /* per generated token, its most probable ones */
                int i, j;
                printf(",\"probs\":[");
                for (i = 0; i < ng; i++) {
                    infer_token_prob top[CLI_MAX_PROBS];
                    int k = 0;
                    infer_request_top_probs(r, i, top, o->out.n_probs < CLI_MAX_PROBS ? o->out.n_probs : CLI_MAX_PROBS,
                                            &k, NULL);
                    printf(i ? ",[" : "[");
                    for (j = 0; j < k; j++) {
                        char piece[256];
                        size_t pl = 0;
                        infer_token_to_piece(m, top[j].id, piece, sizeof piece, &pl, NULL);
                        printf("%s{\"id\":%d,\"piece\":", j ? "," : "", top[j].id);
                        json_string(stdout, piece, pl < sizeof piece ? pl : 0);
                        printf(",\"p\":%.6g}", top[j].p);
                    }
                    printf("]");
                }
                printf("]");
            }
            if (rc) {
                printf(",\"error\":");
                json_string(stdout, err.msg, strlen(err.msg));
            }
            printf("}\n");
        } else if (!rc) {
            fprintf(stderr, "infer: out of memory\n");
            rc = 1;
        }
        free(pt);
        free(gt);
    } else if (rc == 0) {
        print_metrics(stderr, &mt, 0);
    }
    free(text);
    infer_request_free(r);
    infer_context_free(dc);
    infer_model_free(dm);
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
    cp.n_threads = o->c.threads;
    cp.kv_type = o->c.kv_type;
    cp.n_ctx = o->c.n_ctx ? o->c.n_ctx : (n > infer_model_n_ctx_train(m) ? n : 0);
    if (cp.n_ctx && cp.n_ctx < n) cp.n_ctx = n;
    c = infer_context_new(m, &cp, &err);
    if (!c || infer_decode(c, toks, n, 1, &err)) {
        fprintf(stderr, "infer: %s\n", err.msg);
        rc = 1;
    } else {
        int nv = infer_model_n_vocab(m);
        printf("{\"logits\":[");
        for (i = 0; i < n; i++) {
            const float *l = infer_context_logits(c, i);
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

static int cmd_tokenize(const options *o) {
    infer_model *m;
    char *text;
    size_t len;
    infer_token *toks;
    int n, i, bos;
    if (!o->prompt == !o->file) return cli_fail("%s", "tokenize needs one of -p TEXT or --file PATH");
    if (o->file) {
        text = cli_read_file(o->file, CLI_TEXT_FILE_MAX, "a text to tokenize", &len);
        if (!text) return 1;
    } else {
        len = strlen(o->prompt);
        text = (char *)malloc(len + 1);
        if (!text) return cli_fail("%s", "out of memory");
        memcpy(text, o->prompt, len + 1);
    }
    m = load(o, 1);
    if (!m) return free(text), 1;
    bos = !o->no_bos && infer_model_add_bos(m);
    if (infer_tokenize(m, text, len, NULL, 0, bos, o->special, &n, NULL) != INFER_OK) n = -1;
    toks = (infer_token *)malloc(((size_t)(n > 0 ? n : 0) + 1) * sizeof *toks);
    if (n < 0 || !toks) {
        fprintf(stderr, "infer: the text could not be tokenized\n");
        free(toks);
        free(text);
        infer_model_free(m);
        return 1;
    }
    infer_tokenize(m, text, len, toks, n, bos, o->special, NULL, NULL);
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
    infer_gguf *g = infer_gguf_open(o->c.model, &err);
    infer_model_params mp = infer_model_default_params();
    infer_model *m;
    char buf[512];
    int64_t i;
    int d;
    if (!g) return cli_fail("%s", err.msg);
    printf("file: %s\nGGUF version %u, %lld metadata keys, %lld tensors\n\n", o->c.model, infer_gguf_version(g),
           (long long)infer_gguf_n_kv(g), (long long)infer_gguf_n_tensors(g));
    for (i = 0; i < infer_gguf_n_kv(g); i++) {
        infer_gguf_kv_to_string(g, i, buf, sizeof buf, NULL, NULL);
        printf("  %-40s = %s\n", infer_gguf_key(g, i), buf);
    }
    printf("\n  %-32s %-6s %-22s %12s\n", "tensor", "type", "shape", "bytes");
    for (i = 0; i < infer_gguf_n_tensors(g); i++) {
        infer_tensor_info t;
        char shape[64];
        size_t pos = 0;
        infer_gguf_tensor(g, i, &t, NULL);
        for (d = 0; d < t.n_dims; d++)
            pos += (size_t)snprintf(shape + pos, sizeof shape - pos, d ? " x %lld" : "%lld", (long long)t.ne[d]);
        printf("  %-32s %-6s %-22s %12zu\n", t.name, infer_type_name(t.type), shape, t.nbytes);
    }
    mp.vocab_only = infer_gguf_n_tensors(g) == 0;
    mp.device = o->c.device;
    infer_gguf_close(g);
    m = infer_model_load(o->c.model, &mp, &err);
    if (!m) {
        printf("\nmodel: cannot be loaded: %s\n", err.msg);
        return 1;
    }
    infer_model_describe(m, buf, sizeof buf, NULL, NULL);
    printf("\nmodel: %s\n", buf);
    if (!mp.vocab_only && infer_model_device(m) == INFER_DEVICE_CUDA) printf("device: cuda (%s)\n", infer_model_device_name(m));
    else if (!mp.vocab_only) printf("device: cpu\n");
    if (infer_model_warning(m)) printf("warning: %s\n", infer_model_warning(m));
    infer_model_free(m);
    return 0;
}

int main(int argc, char **argv) {
    options o;
    const char *cmd;
    os_init_main(&argc, &argv); /* UTF-8 arguments, binary streams (Windows) */
    cmd = argc > 1 ? argv[1] : NULL;
    if (!cmd || !strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        fputs(usage, cmd ? stdout : stderr);
        print_all_options(cmd ? stdout : stderr);
        return cmd ? 0 : 1;
    }
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
        printf("infer %s (infer.h)\n", infer_version());
        return 0;
    }
    if (!strcmp(cmd, "chat")) return infer_cmd_chat(argc, argv);
    if (!strcmp(cmd, "quantize")) return infer_cmd_quantize(argc, argv);
    if (!strcmp(cmd, "perplexity")) return infer_cmd_perplexity(argc, argv);
    if (!strcmp(cmd, "bench")) return infer_cmd_bench(argc, argv);
    if (!strcmp(cmd, "embed")) return infer_cmd_embed(argc, argv);
    if (!strcmp(cmd, "template")) return infer_cmd_template(argc, argv);
#ifdef INFER_CLI_SERVE
    if (!strcmp(cmd, "serve")) return infer_cmd_serve(argc, argv);
#else
    if (!strcmp(cmd, "serve")) {
        fprintf(stderr, "infer: this build has no server: libmicrohttpd and cJSON were not found when it was "
                        "configured (Debian: libmicrohttpd-dev libcjson-dev)\n");
        return 1;
    }
#endif
    if (strcmp(cmd, "run") && strcmp(cmd, "eval") && strcmp(cmd, "tokenize") && strcmp(cmd, "info")) {
        fprintf(stderr, "infer: unknown command '%s' (see infer --help)\n", cmd);
        return 1;
    }
    switch (parse_options(argc, argv, &o)) {
    case 0: return 1;
    case 2:
        printf("usage: infer %s -m MODEL [options]   (run, eval, tokenize and info share them)\n", cmd);
        cli_print_options(stdout, CLI_CMD_RUN);
        fputs(run_notes, stdout);
        return 0;
    }
    if (o.file && (!strcmp(cmd, "eval") || !strcmp(cmd, "info")))
        return cli_fail("-f/--file is not an option of %s (run and tokenize read text from a file)", cmd);
    if (!strcmp(cmd, "run")) {
        char *prompt_file = NULL;
        size_t len;
        int rc;
        if (o.file && o.prompt) return cli_fail("%s", "give one of -p PROMPT or -f FILE");
        /* read before the model loads: a wrong path fails at once */
        if (o.file && !(o.prompt = prompt_file = cli_read_file(o.file, CLI_TEXT_FILE_MAX, "a prompt file", &len))) return 1;
        /* the newline an editor ends a file with is not part of the prompt (llama.cpp drops it too) */
        if (prompt_file && len && prompt_file[len - 1] == '\n') prompt_file[len - 1] = 0;
        rc = cmd_run(&o);
        free(prompt_file);
        return rc;
    }
    if (!strcmp(cmd, "eval")) return cmd_eval(&o);
    if (!strcmp(cmd, "tokenize")) return cmd_tokenize(&o);
    return cmd_info(&o);
}

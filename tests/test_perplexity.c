/* test_perplexity.c - `infer perplexity` and infer_perplexity_chunk: the
   running estimates and the final one with its uncertainty, against the
   same quantity computed here from infer_decode's logits, chunked and
   scored as llama.cpp's perplexity tool does; and clean errors. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

#define MODEL_REL "models/stories260K.gguf"
#define CTX 64

static void need_shared(void) {
    if (!tu_have_shared()) cr_skip_test("../shared is absent: no model to score text with");
}

static const char *model_path(void) {
    static char p[512];
    tu_shared_path(p, sizeof p, MODEL_REL);
    return p;
}

static const char *story =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she saw "
    "a big red ball under a tree. She ran to the ball and kicked it. The ball went very high and landed in a pond. "
    "Lily was sad because she could not get the ball. Then a kind duck swam to the ball and pushed it back to her. "
    "Lily smiled and said, \"Thank you, duck!\" The duck quacked and swam away. Lily played with her ball all day. "
    "When the sun went down, her mom called her home for dinner. Lily told her mom about the kind duck. Her mom "
    "was happy and gave her a big hug. That night, Lily dreamed about the duck and the pond. The next day, Tom "
    "came to play. Tom had a small blue car. They played with the car and the ball together and had lots of fun.\n";

static char text_path[256];

static void write_text(const char *text) {
    FILE *f;
    snprintf(text_path, sizeof text_path, "/tmp/infer_ppl_XXXXXX");
    cr_assert_neq(mkstemp(text_path), -1);
    f = fopen(text_path, "wb");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
}

/* The perplexity computed here: llama.cpp's recipe written out again. */
static double direct_ppl(infer_model *m, const char *text, int n_ctx, int max_chunks, int *n_chunks_out,
                         double *running, double *unc) {
    infer_error err;
    infer_context_params cp = infer_context_default_params();
    infer_context *c;
    infer_token *toks;
    int n, n_chunk, i, j, k, nv = infer_model_n_vocab(m);
    double nll = 0, nll2 = 0, mean, var;
    long count = 0;
    if (infer_tokenize(m, text, strlen(text), NULL, 0, infer_model_add_bos(m), 0, &n, NULL) != INFER_OK) n = -1;
    toks = (infer_token *)malloc((size_t)n * sizeof *toks);
    infer_tokenize(m, text, strlen(text), toks, n, infer_model_add_bos(m), 0, NULL, NULL);
    n_chunk = n / n_ctx;
    if (max_chunks > 0 && n_chunk > max_chunks) n_chunk = max_chunks;
    cp.n_ctx = n_ctx;
    c = infer_context_new(m, &cp, &err);
    cr_assert_not_null(c, "%s", err.msg);
    for (i = 0; i < n_chunk; i++) {
        infer_token *chunk = toks + (size_t)i * n_ctx, first_tok = chunk[0];
        if (infer_model_add_bos(m)) chunk[0] = infer_model_bos(m);
        infer_seq_truncate(c, 0, 0, NULL, NULL);
        cr_assert_eq(infer_decode(c, chunk, n_ctx, 1, &err), INFER_OK, "%s", err.msg);
        for (j = n_ctx / 2; j < n_ctx - 1; j++) {
            const float *l = infer_context_logits(c, j);
            double mx = l[0], sum = 0, v;
            for (k = 1; k < nv; k++) mx = fmax(mx, l[k]);
            for (k = 0; k < nv; k++) sum += exp(l[k] - mx);
            v = -(l[chunk[j + 1]] - mx - log(sum));
            nll += v;
            nll2 += v * v;
            count++;
        }
        chunk[0] = first_tok;
        running[i] = exp(nll / count);
    }
    mean = nll / count;
    var = nll2 / count - mean * mean;
    *unc = exp(mean) * sqrt(var / (count - 1));
    *n_chunks_out = n_chunk;
    infer_context_free(c);
    free(toks);
    return exp(mean);
}

static char *cli(const char *args, int *status, int with_stderr) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' %s %s", INFER_CLI_PATH, args, with_stderr ? "2>&1 >/dev/null" : "2>/dev/null");
    return tu_run(cmd, status);
}

static char *long_text(int copies) {
    size_t n = strlen(story);
    char *t = (char *)malloc(n * (size_t)copies + 1);
    int i;
    for (i = 0; i < copies; i++) memcpy(t + n * (size_t)i, story, n);
    t[n * (size_t)copies] = 0;
    return t;
}

Test(perplexity, cli_matches_direct_computation) {
    infer_error err;
    infer_model *m;
    char *text, args[1024], *out, *p;
    double running[256], unc, ppl, cli_final, cli_unc;
    int n_chunks, status, i;
    need_shared();
    text = long_text(3);
    write_text(text);
    m = infer_model_load(model_path(), NULL, &err);
    cr_assert_not_null(m, "%s", err.msg);
    ppl = direct_ppl(m, text, CTX, -1, &n_chunks, running, &unc);
    cr_assert(n_chunks >= 4 && n_chunks < 256, "%d chunks", n_chunks);
    cr_assert(isfinite(ppl) && ppl > 1 && ppl < infer_model_n_vocab(m), "ppl %g", ppl);

    snprintf(args, sizeof args, "perplexity -m '%s' -f '%s' -c %d -t 2", model_path(), text_path, CTX);
    out = cli(args, &status, 0);
    cr_assert_eq(status, 0, "%s", out);
    /* "[1]x,[2]y,...": one running estimate per chunk, as computed here */
    for (i = 0, p = out; i < n_chunks; i++) {
        char tag[16];
        double v;
        snprintf(tag, sizeof tag, "[%d]", i + 1);
        p = strstr(p, tag);
        cr_assert_not_null(p, "no %s in:\n%s", tag, out);
        p += strlen(tag);
        v = strtod(p, &p);
        cr_assert_eq(*p, ',');
        cr_assert(fabs(v - running[i]) <= 1e-4 * running[i] + 1e-4, "chunk %d: %.4f, here %.6f", i + 1, v, running[i]);
    }
    {
        char tag[16];
        snprintf(tag, sizeof tag, "[%d]", n_chunks + 1);
        cr_assert_null(strstr(out, tag), "more chunks than the text holds:\n%s", out);
    }
    p = strstr(out, "Final estimate: PPL = ");
    cr_assert_not_null(p, "%s", out);
    cr_assert_eq(sscanf(p, "Final estimate: PPL = %lf +/- %lf", &cli_final, &cli_unc), 2, "%s", p);
    cr_assert(fabs(cli_final - ppl) <= 1e-4 * ppl + 1e-4, "final %.4f, here %.6f", cli_final, ppl);
    cr_assert(fabs(cli_unc - unc) <= 1e-4 * unc + 1e-5, "uncertainty %.5f, here %.6f", cli_unc, unc);
    cr_assert(cli_unc > 0 && cli_unc < cli_final);
    free(out);

    /* --chunks N stops after N */
    snprintf(args, sizeof args, "perplexity -m '%s' -f '%s' -c %d --chunks 2", model_path(), text_path, CTX);
    out = cli(args, &status, 0);
    cr_assert_eq(status, 0);
    cr_assert(strstr(out, "[2]") && !strstr(out, "[3]"), "%s", out);
    direct_ppl(m, text, CTX, 2, &n_chunks, running, &unc);
    p = strstr(out, "Final estimate: PPL = ");
    cr_assert(p && sscanf(p, "Final estimate: PPL = %lf", &cli_final) == 1);
    cr_assert(fabs(cli_final - running[1]) <= 1e-4 * running[1] + 1e-4);
    free(out);
    infer_model_free(m);
    unlink(text_path);
    free(text);
}

Test(perplexity, api_chunks_equal_direct) {
    infer_error err;
    infer_model *m;
    infer_context *c;
    infer_context_params cp = infer_context_default_params();
    infer_perplexity acc;
    infer_token toks[1024];
    char *text;
    double running[256], unc, ppl, u2;
    int n, n_chunks, i;
    need_shared();
    text = long_text(2);
    m = infer_model_load(model_path(), NULL, &err);
    cr_assert_not_null(m, "%s", err.msg);
    ppl = direct_ppl(m, text, CTX, -1, &n_chunks, running, &unc);
    if (infer_tokenize(m, text, strlen(text), toks, 1024, infer_model_add_bos(m), 0, &n, NULL) != INFER_OK) n = -1;
    cr_assert(n > 2 * CTX && n <= 1024);
    cp.n_ctx = CTX;
    cp.n_threads = 2;
    c = infer_context_new(m, &cp, &err);
    memset(&acc, 0, sizeof acc);
    for (i = 0; i < n / CTX; i++) {
        cr_assert_eq(infer_perplexity_chunk(c, toks + i * CTX, CTX, &acc, &err), INFER_OK, "%s", err.msg);
        cr_assert(fabs(infer_perplexity_value(&acc, NULL) - running[i]) <= 1e-6 * running[i]);
    }
    cr_assert_eq(acc.count, (int64_t)(n / CTX) * (CTX - CTX / 2 - 1));
    cr_assert(fabs(infer_perplexity_value(&acc, &u2) - ppl) <= 1e-6 * ppl);
    cr_assert(fabs(u2 - unc) <= 1e-6 * unc);
    /* the caller's tokens are not changed (BOS goes into a copy) */
    {
        infer_token again[1024];
        infer_tokenize(m, text, strlen(text), again, 1024, infer_model_add_bos(m), 0, NULL, NULL);
        cr_assert_eq(memcmp(again, toks, (size_t)n * sizeof *toks), 0);
    }
    /* a chunk larger than the context is an error, not a crash */
    cr_assert_neq(infer_perplexity_chunk(c, toks, CTX + 1, &acc, &err), INFER_OK);
    cr_assert_eq(infer_perplexity_chunk(c, toks, 1, &acc, &err), INFER_ERR_ARG);
    infer_context_free(c);
    infer_model_free(m);
    free(text);
}

static int count_char(const char *s, char ch) {
    int n = 0;
    for (; *s; s++) n += *s == ch;
    return n;
}

Test(perplexity, cli_errors) {
    char args[1024], *out;
    int status;
    size_t i;
    need_shared();
    write_text("Too short.\n");
    {
        const char *bad[] = {"perplexity -m '%s'", "perplexity -m '%s' -f /nonexistent/file.txt",
                             "perplexity -m '%s' -f '%s' -c 64", "perplexity -m '%s' -f '%s' -c zero",
                             "perplexity -m '%s' -f '%s' --bogus 1", "perplexity -f '%s'",
                             "perplexity -m '%s' -f '%s' -c"};
        for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            if (i == 5) snprintf(args, sizeof args, bad[i], text_path);
            else snprintf(args, sizeof args, bad[i], model_path(), text_path);
            out = cli(args, &status, 1);
            cr_assert(status > 0 && status < 128, "infer %s: status %d", args, status);
            cr_assert_eq(count_char(out, '\n'), 1, "infer %s: stderr is not one line:\n%s", args, out);
            free(out);
        }
    }
    /* the missing -f is named */
    snprintf(args, sizeof args, "perplexity -m '%s'", model_path());
    out = cli(args, &status, 1);
    cr_assert(strstr(out, "-f"), "%s", out);
    free(out);
    unlink(text_path);
}

/* The newer architectures (../shared/arch, random weights): perplexity over
   the licence text of ../shared's long references is finite, each chunk's
   running value and the final one with its uncertainty from
   infer_perplexity_chunk equal the direct computation from infer_decode's
   logits, and on one of them `infer perplexity` prints the same. The
   values are large (random weights; gemma2's soft-capped logits reach
   about 1e10), so only finiteness is asked of them, not a bound. */
#define ARCH_CTX 128
#define ARCH_CHUNKS 3

static char *licence_text(void) {
    char path[512], *json, *text;
    tu_json *ref;
    const tu_json *prompt;
    tu_shared_path(path, sizeof path, "reference/synth-qwen3moe-f16.long.json");
    json = tu_read_file(path, NULL);
    cr_assert_not_null(json, "cannot read %s", path);
    ref = tu_json_parse(json);
    free(json);
    prompt = tu_json_get(ref, "prompt");
    cr_assert(prompt && prompt->kind == TU_STR, "%s has no prompt", path);
    text = strdup(prompt->str);
    tu_json_free(ref);
    return text;
}

Test(perplexity, arch_models_finite_and_equal_direct, .timeout = 300) {
    static const char *models[] = {"synth-qwen3moe-f16", "synth-gemma2-f16", "synth-phi3-f16", "synth-gemma3-f16"};
    char *text, path[512], args[1536], *out, *p;
    size_t k;
    int status;
    need_shared();
    text = licence_text();
    write_text(text);
    for (k = 0; k < sizeof models / sizeof models[0]; k++) {
        infer_error err;
        infer_model *m;
        infer_context *c;
        infer_context_params cp = infer_context_default_params();
        infer_perplexity acc;
        infer_token *toks;
        double running[ARCH_CHUNKS], unc, ppl, v, u;
        int n, n_chunks, i;
        snprintf(path, sizeof path, "%s/arch/%s.gguf", INFER_SHARED_DIR, models[k]);
        m = infer_model_load(path, NULL, &err);
        cr_assert_not_null(m, "%s: %s", models[k], err.msg);
        ppl = direct_ppl(m, text, ARCH_CTX, ARCH_CHUNKS, &n_chunks, running, &unc);
        cr_assert_eq(n_chunks, ARCH_CHUNKS, "%s: %d chunks", models[k], n_chunks);
        cr_assert(isfinite(ppl) && ppl > 1 && isfinite(unc) && unc > 0, "%s: ppl %g +/- %g", models[k], ppl, unc);

        if (infer_tokenize(m, text, strlen(text), NULL, 0, infer_model_add_bos(m), 0, &n, NULL) != INFER_OK) n = -1;
        toks = (infer_token *)malloc((size_t)n * sizeof *toks);
        infer_tokenize(m, text, strlen(text), toks, n, infer_model_add_bos(m), 0, NULL, NULL);
        cr_assert_geq(n, ARCH_CTX * ARCH_CHUNKS);
        cp.n_ctx = ARCH_CTX;
        cp.n_threads = 2;
        c = infer_context_new(m, &cp, &err);
        cr_assert_not_null(c, "%s: %s", models[k], err.msg);
        memset(&acc, 0, sizeof acc);
        for (i = 0; i < ARCH_CHUNKS; i++) {
            cr_assert_eq(infer_perplexity_chunk(c, toks + i * ARCH_CTX, ARCH_CTX, &acc, &err), INFER_OK, "%s: %s",
                         models[k], err.msg);
            v = infer_perplexity_value(&acc, NULL);
            cr_assert(isfinite(v) && fabs(v - running[i]) <= 1e-6 * running[i], "%s: chunk %d: %g, direct %g",
                      models[k], i + 1, v, running[i]);
        }
        v = infer_perplexity_value(&acc, &u);
        cr_assert(fabs(v - ppl) <= 1e-6 * ppl && fabs(u - unc) <= 1e-6 * unc, "%s: %g +/- %g, direct %g +/- %g",
                  models[k], v, u, ppl, unc);
        cr_log_info("%s: PPL over %d chunks of %d = %.4f +/- %.4f", models[k], ARCH_CHUNKS, ARCH_CTX, ppl, unc);
        infer_context_free(c);
        free(toks);

        if (k == 1) { /* gemma2: sliding window, soft-capping, tied output */
            double cli_final, cli_unc;
            snprintf(args, sizeof args, "perplexity -m '%s' -f '%s' -c %d --chunks %d -t 2", path, text_path,
                     ARCH_CTX, ARCH_CHUNKS);
            out = cli(args, &status, 0);
            cr_assert_eq(status, 0, "infer %s: status %d\n%s", args, status, out);
            for (i = 0, p = out; i < ARCH_CHUNKS; i++) {
                char tag[16];
                snprintf(tag, sizeof tag, "[%d]", i + 1);
                p = strstr(p, tag);
                cr_assert_not_null(p, "no %s in:\n%s", tag, out);
                v = strtod(p + strlen(tag), &p);
                cr_assert(fabs(v - running[i]) <= 1e-4 * running[i] + 1e-4, "chunk %d: %.4f, here %.6f", i + 1, v,
                          running[i]);
            }
            p = strstr(out, "Final estimate: PPL = ");
            cr_assert_not_null(p, "%s", out);
            cr_assert_eq(sscanf(p, "Final estimate: PPL = %lf +/- %lf", &cli_final, &cli_unc), 2, "%s", p);
            cr_assert(fabs(cli_final - ppl) <= 1e-4 * ppl + 1e-4, "final %.4f, here %.6f", cli_final, ppl);
            cr_assert(fabs(cli_unc - unc) <= 1e-4 * unc + 1e-5, "uncertainty %.5f, here %.6f", cli_unc, unc);
            free(out);
        }
        infer_model_free(m);
    }
    unlink(text_path);
    free(text);
}

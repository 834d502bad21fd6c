/* test_cli.c - the infer command-line tool, run as a program: every error is
   one line on stderr and a non-zero exit (never a crash); info, eval, run
   and tokenize print what the library computes for the same input, and
   tokenize matches llama.cpp's ids from ../shared/reference. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"
#include "tests/status_calls.h"

#define MODEL_REL "models/stories260K.gguf"

static void need_shared(void) {
    if (!tu_have_shared()) cr_skip_test("../shared is absent: no model to run the CLI on");
}

static const char *model_path(void) {
    static char p[512];
    tu_shared_path(p, sizeof p, MODEL_REL);
    return p;
}

/* single-quoted for sh */
static char *sq(const char *s) {
    size_t n = strlen(s), i, o = 0;
    char *q = (char *)malloc(n * 4 + 3);
    q[o++] = '\'';
    for (i = 0; i < n; i++) {
        if (s[i] == '\'') {
            memcpy(q + o, "'\\''", 4);
            o += 4;
        } else {
            q[o++] = s[i];
        }
    }
    q[o++] = '\'';
    q[o] = 0;
    return q;
}

/* stdout of the CLI with args (already shell-quoted where needed) */
static char *cli_stdout(const char *args, int *status) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' %s 2>/dev/null", INFER_CLI_PATH, args);
    return tu_run(cmd, status);
}

/* stderr of the CLI (stdout dropped) */
static char *cli_stderr(const char *args, int *status) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' %s 2>&1 >/dev/null", INFER_CLI_PATH, args);
    return tu_run(cmd, status);
}

static int count_char(const char *s, char c) {
    int n = 0;
    for (; *s; s++) n += *s == c;
    return n;
}

/* args must fail: non-zero exit, not a signal, exactly one line on stderr
   that mentions one of the '|'-separated words in kw (NULL: anything) */
static void expect_one_line_error(const char *args, const char *kw) {
    int status = 0;
    char *err = cli_stderr(args, &status);
    cr_assert_not_null(err, "could not run the CLI");
    cr_assert_neq(status, 0, "infer %s: exit status 0 (stderr: %s)", args, err);
    cr_assert(status > 0 && status < 128, "infer %s: exit status %d (killed by a signal?); stderr: %s", args, status,
              err);
    cr_assert_eq(count_char(err, '\n'), 1, "infer %s: stderr is not exactly one line:\n%s", args, err);
    cr_assert(strlen(err) > 2 && err[strlen(err) - 1] == '\n', "infer %s: stderr: %s", args, err);
    if (kw) {
        char buf[256], *tok, *save = NULL;
        int found = 0;
        snprintf(buf, sizeof buf, "%s", kw);
        for (tok = strtok_r(buf, "|", &save); tok && !found; tok = strtok_r(NULL, "|", &save))
            found = strstr(err, tok) != NULL;
        cr_assert(found, "infer %s: error \"%.*s\" does not mention %s", args, (int)strlen(err) - 1, err, kw);
    }
    free(err);
}

static char *write_temp(const void *data, size_t n) {
    char *path = strdup("/tmp/infer_test_cli_XXXXXX");
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    cr_assert_eq(write(fd, data, n), (ssize_t)n);
    close(fd);
    return path;
}

/* ---- errors ------------------------------------------------------------------ */

Test(cli, errors_without_a_model) {
    char *notgguf = write_temp("this is not a model\n", 20);
    char args[1024];
    expect_one_line_error("run -m /nonexistent/dir/missing.gguf -p hi", "missing.gguf");
    expect_one_line_error("info -m /nonexistent/dir/missing.gguf", "missing.gguf");
    expect_one_line_error("tokenize -m /nonexistent/dir/missing.gguf -p hi", "missing.gguf");
    expect_one_line_error("eval -m /nonexistent/dir/missing.gguf --tokens 1", "missing.gguf");
    snprintf(args, sizeof args, "run -m %s -p hi", notgguf);
    expect_one_line_error(args, "GGUF|magic");
    snprintf(args, sizeof args, "info -m %s", notgguf);
    expect_one_line_error(args, "GGUF|magic");
    expect_one_line_error("run -m /tmp -p hi", "/tmp");
    expect_one_line_error("run -p hi", "-m|model");
    expect_one_line_error("run", "-m|model");
    expect_one_line_error("frobnicate -m x.gguf", "frobnicate");
    unlink(notgguf);
    free(notgguf);
}

Test(cli, bad_flags_and_values) {
    char args[1024];
    const char *m;
    struct {
        const char *flags, *kw;
    } cases[] = {
        {"run -m %s --bogus 1", "--bogus"},
        {"run -m %s -p hi --bogus", "--bogus"},
        {"run -m %s -n", "-n"},
        {"run -m %s -p", "-p"},
        {"run -m %s -p hi --temp", "--temp"},
        {"run -m %s -n abc", "abc"},
        {"run -m %s -n 12x", "12x"},
        {"run -m %s -n -3", "-3"},
        {"run -m %s -n 99999999999999999999", "-n"},
        {"run -m %s --temp -1", "--temp"},
        {"run -m %s --temp warm", "warm"},
        {"run -m %s --top-p 2", "--top-p"},
        {"run -m %s --min-p -0.5", "--min-p"},
        {"run -m %s --repeat-penalty 0", "--repeat-penalty"},
        {"run -m %s --seed xyz", "xyz"},
        {"run -m %s -t 0", "-t"},
        {"run -m %s -c -5", "-c"},
        {"run -m %s --kv-type q5_0", "--kv-type"},
        {"run -m %s -p hi --kv-type q8_0", "multiple of 32"}, /* stories260K's heads are 8 values */
        {"chat -m %s --kv-type f32", "--kv-type"},
        {"bench -m %s --kv-type bf16", "--kv-type"},
        {"run -m %s --lookup -1", "--lookup"},
        {"run -m %s --lookup 65", "--lookup"},
        {"run -m %s --lookup 4 --beams 2", "--lookup"},
        {"bench -m %s --lookup 99", "--lookup"},
        {"bench -m %s --draft-n 0", "--draft-n"},
        {"bench -m %s --draft-n 3", "--draft"},
        {"bench -m %s --draft /nonexistent/draft.gguf", "draft.gguf"},
        {"eval -m %s", "--tokens"},
        {"eval -m %s --tokens 'one two'", "one"},
        {"eval -m %s --tokens ''", "--tokens|token"},
        {"eval -m %s --tokens '1 99999'", "99999"},
        {"eval -m %s --tokens '1 -4'", "-4"},
        {"tokenize -m %s", "-p|--file"},
        {"tokenize -m %s -p hi --file /etc/hostname", "-p|--file"},
        {"tokenize -m %s --file /nonexistent/prompt.txt", "prompt.txt"},
    };
    size_t i;
    need_shared();
    m = model_path();
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(args, sizeof args, cases[i].flags, m);
        expect_one_line_error(args, cases[i].kw);
    }
}

Test(cli, unknown_flag_is_called_unknown) {
    char args[1024];
    need_shared();
    /* whether or not a word follows it, an unknown flag is unknown (not an
       option missing its value) */
    snprintf(args, sizeof args, "run -m %s --bogus 1", model_path());
    expect_one_line_error(args, "unknown");
    snprintf(args, sizeof args, "run -m %s -p hi --bogus", model_path());
    expect_one_line_error(args, "unknown");
}

/* ---- help and parsing come from one table (examples/cli.h) ---- */

/* The flags of the options section ("options:" up to a blank line) of help
   text out: names[k] (malloc'd), and takes[k] whether its help shows a value. */
static int help_flags(const char *out, char **names, int *takes, int max) {
    const char *p = strstr(out, "options:\n"), *end;
    int n = 0;
    cr_assert_not_null(p, "no options section in:\n%s", out);
    p += 9;
    end = strstr(p, "\n\n");
    if (!end) end = p + strlen(p);
    while (p < end) {
        const char *eol = strchr(p, '\n'), *head = p + 2, *head_end;
        if (!eol) eol = end;
        if (!strncmp(p, "  -", 3)) {
            const char *gap = strstr(head, "  ");
            head_end = gap && gap < eol ? gap : eol;
            /* "-t, --threads N": the names, comma-separated, then the value's name */
            {
                char buf[128], *tok, *save = NULL, *sp;
                int value, first = n;
                snprintf(buf, sizeof buf, "%.*s", (int)(head_end - head), head);
                sp = strchr(buf, ' ');
                while (sp && sp[-1] == ',') sp = strchr(sp + 1, ' ');
                value = sp != NULL;
                if (sp) *sp = 0;
                for (tok = strtok_r(buf, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
                    cr_assert(n < max && tok[0] == '-', "bad flag '%s' in help:\n%s", tok, out);
                    names[n++] = strdup(tok);
                }
                for (; first < n; first++) takes[first] = value;
            }
        }
        p = eol + 1;
    }
    return n;
}

Test(cli, every_flag_that_help_lists_is_accepted) {
    static const char *const cmds[] = {"run",        "eval",     "tokenize", "info",  "chat", "bench",
                                       "embed",      "perplexity", "quantize", "template", "serve"};
    size_t c;
    for (c = 0; c < sizeof cmds / sizeof cmds[0]; c++) {
        char args[512], *out, *names[256], want[256];
        int takes[256], n, k, status = 0, saw_value = 0;
        snprintf(args, sizeof args, "%s --help", cmds[c]);
        out = cli_stdout(args, &status);
        cr_assert_not_null(out);
        if (!strcmp(cmds[c], "serve") && status != 0) { /* a build without the server */
            free(out);
            continue;
        }
        cr_assert_eq(status, 0, "infer %s: exit %d", args, status);
        n = help_flags(out, names, takes, 256);
        cr_assert_geq(n, 3, "infer %s lists %d flags:\n%s", args, n, out);
        for (k = 0; k < n; k++) {
            char *err;
            if (!strcmp(names[k], "-h") || !strcmp(names[k], "--help")) {
                free(names[k]);
                continue;
            }
            /* accepted: parsing goes past it (and its value) to the made-up flag after */
            snprintf(args, sizeof args, "%s %s %s--zz-made-up", cmds[c], names[k], takes[k] ? "1 " : "");
            err = cli_stderr(args, &status);
            cr_assert(status > 0 && status < 128 && count_char(err, '\n') == 1, "infer %s: %d, %s", args, status, err);
            cr_assert(strstr(err, "unknown option --zz-made-up (see infer ") || strstr(err, "bad value '1' for "),
                      "infer %s: %s (%s is in its --help)", args, err, names[k]);
            free(err);
            if (takes[k]) { /* and without its value */
                saw_value = 1;
                snprintf(args, sizeof args, "%s %s", cmds[c], names[k]);
                snprintf(want, sizeof want, "infer: option %s needs a value\n", names[k]);
                err = cli_stderr(args, &status);
                cr_assert(status > 0 && status < 128, "infer %s: exit %d", args, status);
                cr_assert_str_eq(err, want, "infer %s", args);
                free(err);
            }
            free(names[k]);
        }
        cr_assert(saw_value, "infer %s --help shows no flag with a value", cmds[c]);
        /* a made-up flag: the one-line error naming the command's help */
        snprintf(args, sizeof args, "%s --zz-made-up", cmds[c]);
        snprintf(want, sizeof want, "infer: unknown option --zz-made-up (see infer %s --help)\n", cmds[c]);
        out = (free(out), cli_stderr(args, &status));
        cr_assert(status > 0 && status < 128, "infer %s: exit %d", args, status);
        cr_assert_str_eq(out, want, "infer %s", args);
        free(out);
    }
}

/* infer --help lists each command's options, and each command's --help
   lists the same ones. */
Test(cli, help_lists_every_commands_flags) {
    static const char *const cmds[] = {"run", "chat", "quantize", "perplexity", "bench", "embed", "template", "serve"};
    int status = 0;
    char *all = cli_stdout("--help", &status);
    size_t c;
    cr_assert_eq(status, 0);
    for (c = 0; c < sizeof cmds / sizeof cmds[0]; c++) {
        char args[64], *out, *sec;
        out = cli_stdout((snprintf(args, sizeof args, "%s --help", cmds[c]), args), &status);
        if (!strcmp(cmds[c], "serve") && status != 0) {
            free(out);
            continue;
        }
        sec = strstr(out, "options:\n");
        cr_assert_not_null(sec, "%s", out);
        {
            const char *e = strstr(sec, "\n\n");
            size_t len = e ? (size_t)(e - sec) + 1 : strlen(sec);
            sec[len] = 0;
        }
        cr_assert(strstr(all, sec), "infer --help lacks infer %s --help's options:\n%s", cmds[c], sec);
        free(out);
    }
    free(all);
}

Test(cli, bad_model_files) {
    char args[1024], path[512];
    need_shared();
    tu_shared_path(path, sizeof path, "bad/gguf-v1.gguf");
    snprintf(args, sizeof args, "run -m %s -p hi", path);
    expect_one_line_error(args, "version 1");
    snprintf(args, sizeof args, "info -m %s", path);
    expect_one_line_error(args, "version 1");
    tu_shared_path(path, sizeof path, "bad/rows-not-multiple-of-block.gguf");
    snprintf(args, sizeof args, "run -m %s -p hi", path);
    expect_one_line_error(args, "block");
}

Test(cli, prompt_longer_than_context) {
    char args[4096];
    char *p = sq("Once upon a time there was a little girl named Lily who loved to play in the park with her big red "
                 "ball every single day of the week.");
    need_shared();
    snprintf(args, sizeof args, "run -m %s -c 16 -n 4 -p %s", model_path(), p);
    expect_one_line_error(args, "context");
    snprintf(args, sizeof args, "run -m %s -c 16 -n 4 --json -p %s", model_path(), p);
    expect_one_line_error(args, "context");
    free(p);
}

/* ---- info ---------------------------------------------------------------------- */

Test(cli, info_prints_metadata_and_tensors) {
    char args[1024];
    int status;
    char *out;
    infer_error err;
    infer_gguf *g;
    int64_t i;
    need_shared();
    snprintf(args, sizeof args, "info -m %s", model_path());
    out = cli_stdout(args, &status);
    cr_assert_eq(status, 0, "infer info failed");
    cr_assert(strstr(out, "general.architecture"), "no general.architecture in:\n%s", out);
    cr_assert(strstr(out, "llama"));
    cr_assert(strstr(out, "blk.0.attn_q.weight"));
    cr_assert(strstr(out, "token_embd.weight"));
    cr_assert(strstr(out, "F32"));
    /* every key and every tensor the library sees, each on its own line */
    g = infer_gguf_open(model_path(), &err);
    cr_assert_not_null(g, "%s", err.msg);
    for (i = 0; i < infer_gguf_n_kv(g); i++)
        cr_assert(strstr(out, infer_gguf_key(g, i)), "info lacks key %s", infer_gguf_key(g, i));
    for (i = 0; i < infer_gguf_n_tensors(g); i++) {
        infer_tensor_info t;
        char shape[64];
        const char *line;
        infer_gguf_tensor(g, i, &t, NULL);
        line = strstr(out, t.name);
        cr_assert(line, "info lacks tensor %s", t.name);
        /* its row length appears on its line */
        snprintf(shape, sizeof shape, "%lld", (long long)t.ne[0]);
        {
            const char *eol = strchr(line, '\n');
            const char *hit = strstr(line + strlen(t.name), shape);
            cr_assert(hit && (!eol || hit < eol), "tensor %s: no %s on its line", t.name, shape);
        }
    }
    infer_gguf_close(g);
    free(out);
}

/* ---- eval ---------------------------------------------------------------------- */

static const tu_json *logit_rows(const tu_json *root) {
    if (root->kind == TU_ARR) return root;
    return tu_json_get(root, "logits");
}

Test(cli, eval_json_matches_library) {
    char args[1024];
    int status, r, j;
    char *out;
    tu_json *root;
    const tu_json *rows;
    const infer_token toks[3] = {1, 403, 407};
    infer_error err;
    infer_model *m;
    infer_context *c;
    int nv;
    double worst = 0;
    need_shared();
    snprintf(args, sizeof args, "eval -m %s --tokens \"1 403 407\" --json", model_path());
    out = cli_stdout(args, &status);
    cr_assert_eq(status, 0, "infer eval failed");
    root = tu_json_parse(out);
    cr_assert_not_null(root, "infer eval --json is not JSON:\n%.300s", out);
    rows = logit_rows(root);
    cr_assert(rows && rows->kind == TU_ARR, "no logits array");
    cr_assert_eq(rows->n, 3, "%d rows of logits for 3 tokens", rows->n);

    m = infer_model_load(model_path(), NULL, &err);
    cr_assert_not_null(m, "%s", err.msg);
    nv = infer_model_n_vocab(m);
    cr_assert_eq(nv, 512, "README: stories260K has a vocabulary of 512");
    c = infer_context_new(m, NULL, &err);
    cr_assert_not_null(c, "%s", err.msg);
    cr_assert_eq(infer_decode(c, toks, 3, 1, &err), INFER_OK, "%s", err.msg);
    for (r = 0; r < 3; r++) {
        const float *l = infer_context_logits(c, r);
        const tu_json *row = &rows->items[r];
        cr_assert_not_null(l);
        cr_assert_eq(row->kind, TU_ARR);
        cr_assert_eq(row->n, nv, "row %d has %d values, want %d", r, row->n, nv);
        for (j = 0; j < nv; j++) {
            double d = fabs(row->items[j].num - l[j]);
            cr_assert_eq(row->items[j].kind, TU_NUM);
            cr_assert_leq(d, 1e-4 * fmax(1.0, fabs(l[j])), "row %d id %d: CLI %.9g, library %.9g", r, j,
                          row->items[j].num, l[j]);
            worst = fmax(worst, d);
        }
    }
    /* the logits are not all alike (a broken row would be) */
    cr_assert_neq(rows->items[0].items[0].num, rows->items[0].items[1].num);
    infer_context_free(c);
    infer_model_free(m);
    tu_json_free(root);
    free(out);
}

/* ---- run ------------------------------------------------------------------------ */

static tu_json *run_json(const char *flags, char **raw) {
    char args[4096];
    int status;
    char *out;
    tu_json *root;
    snprintf(args, sizeof args, "run -m %s %s --json", model_path(), flags);
    out = cli_stdout(args, &status);
    cr_assert_eq(status, 0, "infer %s failed", args);
    root = tu_json_parse(out);
    cr_assert_not_null(root, "infer %s: not JSON:\n%.500s", args, out);
    cr_assert_eq(root->kind, TU_OBJ);
    if (raw) *raw = out;
    else free(out);
    return root;
}

static const tu_json *field(const tu_json *o, const char *key, tu_kind kind) {
    const tu_json *f = tu_json_get(o, key);
    cr_assert_not_null(f, "JSON lacks %s", key);
    cr_assert_eq(f->kind, kind, "JSON field %s has kind %d, want %d", key, (int)f->kind, (int)kind);
    return f;
}

Test(cli, run_greedy_json_matches_library) {
    tu_json *root = NULL;
    const tu_json *pt, *gt, *text, *mt;
    infer_error err;
    infer_model *m;
    infer_context *c;
    infer_token ptoks[64], want[16];
    char want_text[1024];
    size_t tlen = 0;
    int np, ng = 0, i, nv;
    const char *prompt = "Once upon a time";
    static const char *metric_names[] = {"load_ms", "prompt_tokens", "generated_tokens", "gen_tps", "ttft_ms",
                                         "token_ms_min", "token_ms_avg", "token_ms_max", "peak_rss_bytes"};
    need_shared();
    root = run_json("-p \"Once upon a time\" -n 16 --temp 0", NULL);
    pt = field(root, "prompt_tokens", TU_ARR);
    gt = field(root, "tokens", TU_ARR);
    text = field(root, "text", TU_STR);
    mt = field(root, "metrics", TU_OBJ);

    /* the library, greedy by hand */
    m = infer_model_load(model_path(), NULL, &err);
    cr_assert_not_null(m, "%s", err.msg);
    nv = infer_model_n_vocab(m);
    if (infer_tokenize(m, prompt, strlen(prompt), ptoks, 64, infer_model_add_bos(m), 1, &np, NULL) != INFER_OK) np = -1;
    cr_assert(np > 0 && np <= 64);
    cr_assert_eq(pt->n, np, "CLI prompt has %d tokens, library %d", pt->n, np);
    for (i = 0; i < np; i++) cr_assert_eq((int)pt->items[i].num, ptoks[i], "prompt token %d", i);
    c = infer_context_new(m, NULL, &err);
    cr_assert_not_null(c, "%s", err.msg);
    cr_assert_eq(infer_decode(c, ptoks, np, 0, &err), INFER_OK, "%s", err.msg);
    for (ng = 0; ng < 16; ng++) {
        const float *l = infer_context_logits(c, -1);
        int b = 0, j;
        for (j = 1; j < nv; j++)
            if (l[j] > l[b]) b = j;
        want[ng] = b;
        if (infer_model_is_eog(m, b)) {
            ng++;
            break;
        }
        {
            char piece[256];
            int n = sc_token_to_piece(m, b, piece, sizeof piece);
            cr_assert(n >= 0 && n < (int)sizeof piece && tlen + (size_t)n < sizeof want_text);
            memcpy(want_text + tlen, piece, (size_t)n);
            tlen += (size_t)n;
        }
        if (ng + 1 < 16) cr_assert_eq(infer_decode(c, &want[ng], 1, 0, &err), INFER_OK, "%s", err.msg);
    }
    want_text[tlen] = 0;
    cr_assert(gt->n >= 1 && gt->n <= 16, "%d tokens for -n 16", gt->n);
    cr_assert_eq(gt->n, ng, "CLI generated %d tokens, library greedy %d", gt->n, ng);
    for (i = 0; i < ng; i++)
        cr_assert_eq((int)gt->items[i].num, want[i], "greedy token %d: CLI %d, library %d", i, (int)gt->items[i].num,
                     want[i]);
    /* the text is the pieces of the tokens (an end token adds nothing) */
    cr_assert_str_eq(text->str, want_text);

    for (i = 0; i < (int)(sizeof metric_names / sizeof metric_names[0]); i++) {
        const tu_json *f = field(mt, metric_names[i], TU_NUM);
        cr_assert(f->num >= 0 && isfinite(f->num), "metric %s = %g", metric_names[i], f->num);
    }
    cr_assert_eq((int)tu_json_get(mt, "prompt_tokens")->num, np);
    {
        /* generated_tokens counts the tokens generated; tolerate the last
           one (sampled, never run through the model) left out of the
           per-token timings */
        int gen = (int)tu_json_get(mt, "generated_tokens")->num;
        cr_assert_eq(gen, ng, "metrics say %d generated tokens, the output has %d", gen, ng);
    }
    cr_assert_leq(tu_json_get(mt, "token_ms_min")->num, tu_json_get(mt, "token_ms_avg")->num + 1e-3);
    cr_assert_leq(tu_json_get(mt, "token_ms_avg")->num, tu_json_get(mt, "token_ms_max")->num + 1e-3);
    cr_assert_gt(tu_json_get(mt, "gen_tps")->num, 0);
    cr_assert_gt(tu_json_get(mt, "ttft_ms")->num, 0);
    cr_assert_gt(tu_json_get(mt, "peak_rss_bytes")->num, 1e6, "peak RSS under 1 MB?");
    infer_context_free(c);
    infer_model_free(m);
    tu_json_free(root);
}

static void token_list(const tu_json *root, int *out, int *n) {
    const tu_json *gt = field(root, "tokens", TU_ARR);
    int i;
    *n = gt->n;
    for (i = 0; i < gt->n && i < 64; i++) out[i] = (int)gt->items[i].num;
}

Test(cli, run_seeded_sampling_is_reproducible) {
    tu_json *a, *b;
    int ta[64], tb[64], na, nb, s, differs = 0;
    need_shared();
    a = run_json("-p \"Once upon a time\" -n 24 --temp 0.8 --seed 42", NULL);
    b = run_json("-p \"Once upon a time\" -n 24 --temp 0.8 --seed 42", NULL);
    token_list(a, ta, &na);
    token_list(b, tb, &nb);
    cr_assert_eq(na, nb);
    cr_assert_eq(memcmp(ta, tb, sizeof(int) * (size_t)na), 0, "the same seed gave different tokens");
    cr_assert_str_eq(tu_json_get(a, "text")->str, tu_json_get(b, "text")->str);
    tu_json_free(b);
    /* some other seed gives another story */
    for (s = 1; s <= 4 && !differs; s++) {
        char flags[128];
        int tc[64], nc;
        tu_json *c;
        snprintf(flags, sizeof flags, "-p \"Once upon a time\" -n 24 --temp 0.8 --seed %d", s);
        c = run_json(flags, NULL);
        token_list(c, tc, &nc);
        differs = nc != na || memcmp(ta, tc, sizeof(int) * (size_t)na) != 0;
        tu_json_free(c);
    }
    cr_assert(differs, "seeds 1 to 4 all gave seed 42's tokens");
    tu_json_free(a);
}

/* --lookup: the same greedy tokens, drafts counted in the metrics (a
   story that repeats its phrases, so some are accepted), and the text
   line's acceptance rate. */
Test(cli, run_lookup_keeps_the_greedy_tokens) {
    tu_json *a, *b;
    int ta[64], tb[64], na, nb, status;
    const tu_json *mt;
    char args[1024], *err;
    need_shared();
    a = run_json("-p \"Tom had a red ball. Tom liked the red ball. One day, Tom\" -n 60 --temp 0", NULL);
    b = run_json("-p \"Tom had a red ball. Tom liked the red ball. One day, Tom\" -n 60 --temp 0 --lookup 5", NULL);
    token_list(a, ta, &na);
    token_list(b, tb, &nb);
    cr_assert_eq(na, nb);
    cr_assert_eq(memcmp(ta, tb, sizeof(int) * (size_t)(na < 64 ? na : 64)), 0, "--lookup changed the greedy tokens");
    mt = field(b, "metrics", TU_OBJ);
    cr_expect_gt(field(mt, "draft_tokens", TU_NUM)->num, 0, "nothing was drafted");
    cr_expect_gt(field(mt, "draft_accepted", TU_NUM)->num, 0, "no draft token was accepted");
    cr_expect_eq(field(field(a, "metrics", TU_OBJ), "draft_tokens", TU_NUM)->num, 0);
    tu_json_free(a);
    tu_json_free(b);
    snprintf(args, sizeof args, "run -m %s -p \"Tom had a red ball. Tom liked the red ball. One day, Tom\" -n 60 "
             "--temp 0 --lookup 5", model_path());
    err = cli_stderr(args, &status);
    cr_assert_eq(status, 0, "%s", err);
    cr_expect(strstr(err, "acceptance rate"), "no acceptance rate in the timing lines:\n%s", err);
    free(err);
}

/* ---- tokenize ------------------------------------------------------------------- */

static int parse_ids(const char *s, int *out, int max) {
    int n = 0;
    char *end;
    for (;;) {
        long v;
        while (*s == ' ' || *s == '\n') s++;
        if (!*s) break;
        v = strtol(s, &end, 10);
        cr_assert_neq(end, s, "tokenize output is not ids: %s", s);
        cr_assert_lt(n, max);
        out[n++] = (int)v;
        s = end;
    }
    return n;
}

static void check_tokenize(const char *ref_name) {
    char ref_path[512], args[2048];
    char *text, *out, *q, *tmp;
    tu_json *ref;
    const tu_json *prompt, *ids;
    int got[256], n, i, status;
    tu_shared_path(ref_path, sizeof ref_path, ref_name);
    text = tu_read_file(ref_path, NULL);
    cr_assert_not_null(text, "cannot read %s", ref_path);
    ref = tu_json_parse(text);
    free(text);
    cr_assert_not_null(ref);
    prompt = field(ref, "prompt", TU_STR);
    ids = field(ref, "prompt_tokens", TU_ARR);
    q = sq(prompt->str);

    /* with BOS, as llama.cpp tokenized it */
    snprintf(args, sizeof args, "tokenize -m %s -p %s", model_path(), q);
    out = cli_stdout(args, &status);
    cr_assert_eq(status, 0);
    n = parse_ids(out, got, 256);
    cr_assert_eq(n, ids->n, "%s: %d ids, llama.cpp %d: %s", ref_name, n, ids->n, out);
    for (i = 0; i < n; i++) cr_assert_eq(got[i], (int)ids->items[i].num, "%s: id %d", ref_name, i);
    free(out);

    /* --no-bos drops exactly the BOS */
    snprintf(args, sizeof args, "tokenize -m %s --no-bos -p %s", model_path(), q);
    out = cli_stdout(args, &status);
    cr_assert_eq(status, 0);
    n = parse_ids(out, got, 256);
    cr_assert_eq(n, ids->n - 1, "--no-bos: %d ids: %s", n, out);
    for (i = 0; i < n; i++) cr_assert_eq(got[i], (int)ids->items[i + 1].num, "--no-bos: id %d", i);
    free(out);

    /* --file with the same bytes (no trailing newline) */
    tmp = write_temp(prompt->str, strlen(prompt->str));
    snprintf(args, sizeof args, "tokenize -m %s --file %s", model_path(), tmp);
    out = cli_stdout(args, &status);
    cr_assert_eq(status, 0);
    n = parse_ids(out, got, 256);
    cr_assert_eq(n, ids->n, "--file: %d ids: %s", n, out);
    for (i = 0; i < n; i++) cr_assert_eq(got[i], (int)ids->items[i].num, "--file: id %d", i);
    free(out);
    unlink(tmp);
    free(tmp);
    free(q);
    tu_json_free(ref);
}

Test(cli, tokenize_matches_llama_cpp) {
    need_shared();
    check_tokenize("reference/stories260K.p1.json");
    check_tokenize("reference/stories260K.p2.json");
}

/* ---- chat ---------------------------------------------------------------------- */

/* `infer chat` on the newer architectures (random weights: the replies are
   garbage, but the chat must run): three user turns from a pipe, each
   reported on stderr as "[R tokens read, G generated, C of N in context]",
   where each turn's tokens add up (the KV cache is kept across turns), and
   nothing else on stderr but the missing template's warning (the synth
   files have none: ChatML). qwen3moe routes through experts; gemma3's
   sliding layers keep a ring of 32 positions, which the conversation (about
   200 tokens) wraps; phi3 has fused projections and its own vocabulary. */
Test(cli, chat_runs_on_newer_architectures) {
    static const char *models[] = {"synth-qwen3moe-f16", "synth-gemma3-f16", "synth-phi3-f16"};
    size_t k;
    need_shared();
    for (k = 0; k < sizeof models / sizeof models[0]; k++) {
        char path[512], cmd[2048], *out, *p;
        int status, turns = 0, in_ctx = 0;
        tu_shared_path(path, sizeof path, "arch/");
        snprintf(path + strlen(path), sizeof path - strlen(path), "%s.gguf", models[k]);
        snprintf(cmd, sizeof cmd,
                 "printf 'Hello\\nTell me a story about the sea and the wind.\\nThanks\\n' | '%s' chat -m '%s' -n 8 "
                 "--temp 0 2>&1 >/dev/null",
                 INFER_CLI_PATH, path);
        out = tu_run(cmd, &status);
        cr_assert_not_null(out);
        cr_assert_eq(status, 0, "%s: infer chat exited with %d:\n%s", models[k], status, out);
        for (p = out; *p;) {
            char *nl = strchr(p, '\n');
            int r, g, c, n;
            if (!nl) nl = p + strlen(p);
            if (sscanf(p, "[%d tokens read, %d generated, %d of %d in context]", &r, &g, &c, &n) == 4) {
                turns++;
                cr_assert(r > 0 && g >= 0 && g <= 8 && c == in_ctx + r + g && c <= n,
                          "%s: turn %d: %d read, %d generated, %d of %d in context after %d:\n%s", models[k], turns,
                          r, g, c, n, in_ctx, out);
                in_ctx = c;
            } else {
                cr_assert(strstr(p, "warning") && (size_t)(nl - p) < 200 && strstr(p, "ChatML"),
                          "%s: unexpected on stderr: %.*s", models[k], (int)(nl - p), p);
            }
            p = *nl ? nl + 1 : nl;
        }
        cr_assert_eq(turns, 3, "%s: %d turns reported:\n%s", models[k], turns, out);
        free(out);
    }
}

/* `infer chat --draft`: bench/make_model.py's test-target with test-draft
   (one vocabulary, random weights) over three turns, greedy: the replies
   are byte for byte those without a draft, the draft model follows the
   conversation (each turn's line counts drafted tokens), and the flags'
   misuses are refused in one line. */
Test(cli, chat_with_a_draft_model_keeps_the_greedy_replies) {
    char dir[64], cmd[4096], *plain, *drafted, *err, *p;
    int st = tu_make_draft_pair(dir, sizeof dir) ? 0 : 1, turns = 0;
    static const char *const turns_in = "printf 'Hello there\\nTell me a story about the sea and the wind.\\nThanks\\n'";
    if (st != 0) {
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        free(tu_run(cmd, &st));
        cr_skip_test("bench/make_model.py needs numpy and gguf");
    }
    snprintf(cmd, sizeof cmd, "%s | '%s' chat -m '%s/target.gguf' -n 16 --temp 0 -c 512 2>/dev/null", turns_in,
             INFER_CLI_PATH, dir);
    plain = tu_run(cmd, &st);
    cr_assert_eq(st, 0, "%s", plain);
    snprintf(cmd, sizeof cmd, "%s | '%s' chat -m '%s/target.gguf' -n 16 --temp 0 -c 512 --draft '%s/draft.gguf' "
             "--draft-n 3 2>/dev/null", turns_in, INFER_CLI_PATH, dir, dir);
    drafted = tu_run(cmd, &st);
    cr_assert_eq(st, 0, "%s", drafted);
    cr_assert(strlen(plain) > 3, "no replies: '%s'", plain);
    cr_expect_str_eq(drafted, plain, "the replies changed under a draft model");
    snprintf(cmd, sizeof cmd, "%s | '%s' chat -m '%s/target.gguf' -n 16 --temp 0 -c 512 --draft '%s/draft.gguf' "
             "--draft-n 3 2>&1 >/dev/null", turns_in, INFER_CLI_PATH, dir, dir);
    err = tu_run(cmd, &st);
    cr_assert_eq(st, 0, "%s", err);
    for (p = err; (p = strstr(p, " drafted accepted]")) != NULL; p++) {
        const char *q = p;
        int a = -1, d = -1;
        while (q > err && q[-1] != ',') q--;
        cr_assert_eq(sscanf(q, " %d of %d", &a, &d), 2, "%s", err);
        cr_expect(d > 0 && a >= 0 && a <= d, "turn %d: %d of %d drafted accepted", turns + 1, a, d);
        turns++;
    }
    cr_expect_eq(turns, 3, "each turn reports its drafts:\n%s", err);
    free(plain), free(drafted), free(err);
    /* misuses: one line each, nothing run */
    {
        static const char *const bad[][2] = {
            {"--draft-n 3", "--draft-n needs --draft"},
            {"--lookup 2 --draft DIR/draft.gguf", "only one of --lookup and --draft"},
            {"--draft DIR/none.gguf", "none.gguf"},
            {"--draft DIR/draft.gguf --draft-n 0", "--draft-n"},
        };
        size_t k;
        for (k = 0; k < sizeof bad / sizeof bad[0]; k++) {
            char flags[512], *o, *d = strstr(bad[k][0], "DIR");
            if (d) snprintf(flags, sizeof flags, "%.*s%s%s", (int)(d - bad[k][0]), bad[k][0], dir, d + 3);
            else snprintf(flags, sizeof flags, "%s", bad[k][0]);
            snprintf(cmd, sizeof cmd, "echo hi | '%s' chat -m '%s/target.gguf' %s 2>&1 >/dev/null", INFER_CLI_PATH,
                     dir, flags);
            o = tu_run(cmd, &st);
            cr_expect_neq(st, 0, "%s: accepted", flags);
            cr_expect(strstr(o, bad[k][1]) && strchr(o, '\n') == o + strlen(o) - 1, "%s: %s", flags, o);
            free(o);
        }
    }
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    free(tu_run(cmd, &st));
}

/* ---- version, help, -f ------------------------------------------------------- */

Test(cli, version_and_help_name_every_command) {
    static const char *const commands[] = {"run", "eval", "tokenize", "info", "chat", "quantize", "perplexity",
                                           "bench", "embed", "serve", "version"};
    const char *args[] = {"--version", "version"};
    char want[64], *out;
    int status, i;
    cr_assert_str_eq(infer_version(), INFER_VERSION, "the library's version is not its header's");
    snprintf(want, sizeof want, "infer %s (infer.h)\n", INFER_VERSION);
    for (i = 0; i < 2; i++) {
        out = cli_stdout(args[i], &status);
        cr_assert_eq(status, 0, "infer %s: exit %d", args[i], status);
        cr_assert_str_eq(out, want, "infer %s", args[i]);
        free(out);
    }
    out = cli_stdout("--help", &status);
    cr_assert_eq(status, 0);
    for (i = 0; i < (int)(sizeof commands / sizeof commands[0]); i++) {
        char line[32];
        snprintf(line, sizeof line, "\n  %s ", commands[i]);
        cr_assert(strstr(out, line), "infer --help does not list %s:\n%s", commands[i], out);
    }
    free(out);
}

Test(cli, run_reads_the_prompt_from_a_file) {
    static const char prompt[] = "Once upon a time\n"; /* the final newline is not part of the prompt */
    char *path = write_temp(prompt, sizeof prompt - 1), args[1024], *err;
    tu_json *from_file, *from_arg;
    const tu_json *a, *b;
    int i, status;
    need_shared();
    snprintf(args, sizeof args, "-f %s -n 8 --temp 0", path);
    from_file = run_json(args, NULL);
    from_arg = run_json("-p \"Once upon a time\" -n 8 --temp 0", NULL);
    a = field(from_file, "prompt_tokens", TU_ARR);
    b = field(from_arg, "prompt_tokens", TU_ARR);
    cr_assert_eq(a->n, b->n, "-f: %d prompt tokens, -p: %d", a->n, b->n);
    for (i = 0; i < a->n; i++) cr_assert_eq(a->items[i].num, b->items[i].num, "prompt token %d", i);
    cr_assert_str_eq(field(from_file, "text", TU_STR)->str, field(from_arg, "text", TU_STR)->str);

    /* a missing file: one line naming it, exit 1, before any model loads */
    snprintf(args, sizeof args, "run -m %s -f /nonexistent/dir/prompt.txt", model_path());
    expect_one_line_error(args, "/nonexistent/dir/prompt.txt");
    err = cli_stderr(args, &status);
    cr_assert_eq(status, 1, "exit %d", status);
    cr_assert_null(strstr(err, "empty"), "%s", err);
    free(err);
    snprintf(args, sizeof args, "run -m %s -p hi -f %s", model_path(), path);
    expect_one_line_error(args, "-p|-f");
    snprintf(args, sizeof args, "eval -m %s --tokens 1 -f %s", model_path(), path);
    expect_one_line_error(args, "-f");
    snprintf(args, sizeof args, "chat -m %s -f %s", model_path(), path); /* chat reads its turns from stdin */
    expect_one_line_error(args, "-f");
    tu_json_free(from_file);
    tu_json_free(from_arg);
    unlink(path);
    free(path);
}

/* `infer embed -f`: output i is line i + 1, an empty line included (the
   embedding of the empty text: stories260K adds a BOS token). */
Test(cli, embed_file_keeps_every_line) {
    static const char text[] = "Once upon a time\n\nthe end\n";
    char *path = write_temp(text, sizeof text - 1), args[1024], *lines, *empty, *first, *p;
    tu_json *root;
    const tu_json *data;
    int status, i, n = 0;
    need_shared();
    snprintf(args, sizeof args, "embed -m %s -f %s", model_path(), path);
    p = cli_stdout(args, &status);
    cr_assert_eq(status, 0, "infer %s: exit %d", args, status);
    root = tu_json_parse(p);
    cr_assert_not_null(root, "not JSON: %.300s", p);
    data = field(root, "data", TU_ARR);
    cr_assert_eq(data->n, 3, "%d embeddings for 3 lines", data->n);
    for (i = 0; i < 3; i++) cr_assert_eq((int)field(&data->items[i], "index", TU_NUM)->num, i);
    tu_json_free(root);
    free(p);

    snprintf(args, sizeof args, "embed -m %s -f %s -o text", model_path(), path);
    lines = cli_stdout(args, &status);
    cr_assert_eq(status, 0);
    snprintf(args, sizeof args, "embed -m %s -p '' -o text", model_path());
    empty = cli_stdout(args, &status);
    cr_assert_eq(status, 0);
    snprintf(args, sizeof args, "embed -m %s -p 'Once upon a time' -o text", model_path());
    first = cli_stdout(args, &status);
    cr_assert_eq(status, 0);
    for (p = lines; *p; p++) n += *p == '\n';
    cr_assert_eq(n, 3, "%d lines of output for 3 lines:\n%s", n, lines);
    cr_assert_eq(strncmp(lines, first, strlen(first)), 0, "line 1 is not the embedding of its text");
    p = strchr(lines, '\n') + 1;
    cr_assert_eq(strncmp(p, empty, strlen(empty)), 0, "line 2 is not the embedding of the empty text");
    free(lines);
    free(empty);
    free(first);
    unlink(path);
    free(path);
}

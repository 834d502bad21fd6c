/* infer template (--template FILE | -m MODEL) --conversation FILE.json
   Prints what the chat template renders for the conversation, exactly (no
   newline added); on a template error, one line on stderr and exit 1.
   The conversation is a JSON object: messages, tools (optional),
   add_generation_prompt, bos_token, eos_token, kwargs (its keys become
   variables too). With -m the template is the model's
   tokenizer.chat_template, and bos/eos default to its tokens' texts. */
#define _XOPEN_SOURCE 700 /* open, fstat (cli.h reads only regular files) */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wunused-function" /* cli.h's parsers this command does not use */
#endif
#include "cli.h"

int infer_cmd_template(int argc, char **argv);

/* The end of the JSON value at p (which starts at one, after blanks), or
   NULL where it is malformed. Only spans are found here; the renderer
   parses the values (and reports their errors). */
static const char *tpl_skip_ws(const char *p) {
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    return p;
}

static const char *tpl_skip_value(const char *p) {
    int depth = 0;
    p = tpl_skip_ws(p);
    do {
        if (*p == '"') {
            for (p++; *p != '"'; p++) {
                if (!*p) return NULL;
                if (*p == '\\' && !*++p) return NULL;
            }
            p++;
        } else if (*p == '{' || *p == '[') {
            depth++;
            p++;
        } else if (*p == '}' || *p == ']') {
            if (--depth < 0) return NULL;
            p++;
        } else if (*p == ',' || *p == ':' || *p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') {
            if (!depth) return NULL;
            p++;
        } else if (*p) {
            while (*p && !strchr(",:]} \t\n\r", *p)) p++;
        } else return NULL;
    } while (depth > 0);
    return p;
}

/* Appends s[0..n) to the malloc'd buffer *b of length *len. */
static int tpl_append(char **b, size_t *len, const char *s, size_t n) {
    char *nb = (char *)realloc(*b, *len + n + 1);
    if (!nb) return 0;
    memcpy(nb + *len, s, n);
    *len += n;
    nb[*len] = 0;
    *b = nb;
    return 1;
}

/* A JSON string literal of s (for the model's token texts). */
static int tpl_append_json_str(char **b, size_t *len, const char *s) {
    int ok = tpl_append(b, len, "\"", 1);
    for (; *s && ok; s++) {
        char esc[8];
        if (*s == '"' || *s == '\\') {
            esc[0] = '\\';
            esc[1] = *s;
            ok = tpl_append(b, len, esc, 2);
        } else if ((unsigned char)*s < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", (unsigned char)*s);
            ok = tpl_append(b, len, esc, 6);
        } else ok = tpl_append(b, len, s, 1);
    }
    return ok && tpl_append(b, len, "\"", 1);
}

/* The renderer's context: the conversation's variables, kwargs' members
   among them, bos_token/eos_token from the file or else the given texts.
   NULL (with the reason on stderr) where the file is not a JSON object. */
static char *tpl_context(const char *conv, const char *bos, const char *eos) {
    char *ctx = NULL;
    size_t len = 0;
    int have_bos = 0, have_eos = 0, first = 1, ok;
    const char *p = tpl_skip_ws(conv);
    if (*p != '{') goto bad;
    ok = tpl_append(&ctx, &len, "{", 1);
    p = tpl_skip_ws(p + 1);
    while (ok && *p != '}') {
        const char *key = p, *key_end, *val, *val_end;
        if (*p != '"' || !(key_end = tpl_skip_value(p))) goto bad;
        p = tpl_skip_ws(key_end);
        if (*p != ':') goto bad;
        val = tpl_skip_ws(p + 1);
        if (!(val_end = tpl_skip_value(val))) goto bad;
        if ((size_t)(key_end - key) == 8 && !memcmp(key, "\"kwargs\"", 8)) {
            /* its members, without the braces */
            const char *in = tpl_skip_ws(val + 1), *in_end = val_end - 1;
            if (*val != '{') goto bad;
            while (in_end > in && strchr(" \t\n\r", in_end[-1])) in_end--;
            if (in_end > in) {
                ok = (first || tpl_append(&ctx, &len, ",", 1)) && tpl_append(&ctx, &len, in, (size_t)(in_end - in));
                first = 0;
            }
        } else {
            have_bos |= (size_t)(key_end - key) == 11 && !memcmp(key, "\"bos_token\"", 11);
            have_eos |= (size_t)(key_end - key) == 11 && !memcmp(key, "\"eos_token\"", 11);
            ok = (first || tpl_append(&ctx, &len, ",", 1)) && tpl_append(&ctx, &len, key, (size_t)(val_end - key));
            first = 0;
        }
        p = tpl_skip_ws(val_end);
        if (*p == ',') p = tpl_skip_ws(p + 1);
        else if (*p != '}') goto bad;
    }
    if (ok && !have_bos) {
        ok = (first || tpl_append(&ctx, &len, ",", 1)) && tpl_append(&ctx, &len, "\"bos_token\":", 12) &&
             tpl_append_json_str(&ctx, &len, bos);
        first = 0;
    }
    if (ok && !have_eos)
        ok = (first || tpl_append(&ctx, &len, ",", 1)) && tpl_append(&ctx, &len, "\"eos_token\":", 12) &&
             tpl_append_json_str(&ctx, &len, eos);
    if (ok && tpl_append(&ctx, &len, "}", 1)) return ctx;
    fprintf(stderr, "infer: out of memory\n");
    free(ctx);
    return NULL;
bad:
    fprintf(stderr, "infer: the conversation file is not a JSON object of the expected shape\n");
    free(ctx);
    return NULL;
}

int infer_cmd_template(int argc, char **argv) {
    const char *template_path = NULL, *model_path = NULL, *conv_path = NULL;
    char *tmpl = NULL, *conv = NULL, *ctx = NULL, *out = NULL, bos[256] = "", eos[256] = "";
    infer_error err;
    int i, rc = 1;
    for (i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (cli_flag_check(argc, argv, i, CLI_CMD_TEMPLATE) < 0) return 1;
        if (cli_is_help(a)) {
            printf("usage: infer template (--template FILE | -m MODEL) --conversation FILE.json\n");
            cli_print_options(stdout, CLI_CMD_TEMPLATE);
            return 0;
        }
        if (!strcmp(a, "--template")) template_path = v;
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) model_path = v;
        else if (!strcmp(a, "--conversation")) conv_path = v;
        else return cli_fail("option %s is not handled (a bug)", a);
        i++;
    }
    if (!template_path == !model_path) return cli_fail("give one of --template FILE and -m MODEL%s", "");
    if (!conv_path) return cli_fail("missing --conversation FILE.json%s", "");
    if (template_path) {
        if (!(tmpl = cli_read_file(template_path, CLI_TEXT_FILE_MAX, "a chat template", NULL))) goto done;
    } else {
        infer_model_params mp = infer_model_default_params();
        infer_model *m;
        mp.vocab_only = 1;
        if (!(m = infer_model_load(model_path, &mp, &err))) {
            fprintf(stderr, "infer: cannot load %s: %s\n", model_path, err.msg);
            goto done;
        }
        tmpl = infer_model_chat_template_text(m, bos, sizeof bos, eos, sizeof eos, NULL);
        infer_model_free(m);
        if (!tmpl) {
            fprintf(stderr, "infer: %s has no tokenizer.chat_template\n", model_path);
            goto done;
        }
    }
    if (!(conv = cli_read_file(conv_path, CLI_TEXT_FILE_MAX, "a conversation", NULL))) goto done;
    if (!(ctx = tpl_context(conv, bos, eos))) goto done;
    if (!(out = infer_jinja_render(tmpl, ctx, NULL, NULL, &err))) {
        fprintf(stderr, "infer: template error: %s\n", err.msg);
        goto done;
    }
    fwrite(out, 1, strlen(out), stdout);
    rc = fflush(stdout) == 0 ? 0 : 1;
done:
    free(out);
    free(ctx);
    free(conv);
    free(tmpl);
    return rc;
}

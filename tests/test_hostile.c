/* test_hostile.c - hostile GGUF files: tests/make_hostile.py writes them
   into the build directory (a small valid model with one thing wrong in
   each: cut short, a count, length or offset that lies, overflowing
   dimensions, a bad alignment, NaN hyperparameters, a vocabulary at odds
   with itself, ...) with a manifest saying where each must be refused and
   which field the error must name. Each is loaded from its file and from
   memory (an exact-size heap copy, so ASan sees any read past its end);
   the ASan build's LeakSanitizer checks that refusing frees everything.
   The files of ../shared/bad are refused the same way. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* Criterion's workers report LeakSanitizer's findings at exit but still
   pass the test: in a sanitizer build each test asks for a leak check
   itself, and fails on one. */
#if defined(__SANITIZE_ADDRESS__)
#define HOSTILE_LEAK_CHECK 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HOSTILE_LEAK_CHECK 1
#endif
#endif
#ifdef HOSTILE_LEAK_CHECK
#include <sanitizer/lsan_interface.h>
#endif

#ifndef INFER_HOSTILE_DIR
#error "INFER_HOSTILE_DIR (where make_hostile.py wrote the files) must be defined"
#endif

#define MAX_SHOWN 40 /* failures printed in full; the rest are counted */

typedef struct entry {
    char file[200];
    char stage[8];
    char kw[200];
} entry;

typedef struct tally {
    int files, failures;
} tally;

/* The manifest's entries (comment lines skipped); *real_absent is set when
   the generator had no real model to cut. */
static entry *read_manifest(int *n, int *real_absent) {
    char *text = tu_read_file(INFER_HOSTILE_DIR "/manifest.tsv", NULL), *line, *save = NULL;
    entry *e = NULL;
    int cap = 0;
    *n = 0;
    *real_absent = 0;
    cr_assert_not_null(text, "no %s/manifest.tsv: build the hostile_files target (tests/make_hostile.py)",
                       INFER_HOSTILE_DIR);
    for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *f1, *f2;
        if (line[0] == '#') {
            *real_absent = 1;
            continue;
        }
        f1 = strchr(line, '\t');
        f2 = f1 ? strchr(f1 + 1, '\t') : NULL;
        cr_assert(f1 && f2, "manifest line without three fields: %s", line);
        if (*n == cap) e = (entry *)realloc(e, sizeof *e * (size_t)(cap = cap ? 2 * cap : 1024));
        cr_assert_not_null(e);
        snprintf(e[*n].file, sizeof e[*n].file, "%.*s", (int)(f1 - line), line);
        snprintf(e[*n].stage, sizeof e[*n].stage, "%.*s", (int)(f2 - f1 - 1), f1 + 1);
        snprintf(e[*n].kw, sizeof e[*n].kw, "%s", f2 + 1);
        (*n)++;
    }
    free(text);
    return e;
}

static void assert_no_leaks(const char *what) {
#ifdef HOSTILE_LEAK_CHECK
    cr_assert_eq(__lsan_do_recoverable_leak_check(), 0, "%s: memory leaked (LeakSanitizer's report is above)", what);
#else
    (void)what;
#endif
}

static void fail(tally *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(tally *t, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (t->failures++ < MAX_SHOWN) cr_log_error("%s", msg);
}

/* A refusal: no object, an error code, one non-empty line naming kw. */
static void check_refusal(tally *t, const void *obj, const infer_error *err, const char *file, const char *via,
                          const char *kw) {
    size_t len = strnlen(err->msg, sizeof err->msg);
    if (obj) fail(t, "%s: %s accepted it", file, via);
    else if (err->code == INFER_OK) fail(t, "%s: %s refused it with the code INFER_OK (\"%s\")", file, via, err->msg);
    else if (len == 0 || len == sizeof err->msg) fail(t, "%s: %s: empty or unterminated message", file, via);
    else if (strchr(err->msg, '\n')) fail(t, "%s: %s: the message is not one line: %s", file, via, err->msg);
    else if (!tu_names_any(err->msg, kw)) fail(t, "%s: %s: \"%s\" does not name %s", file, via, err->msg, kw);
}

static infer_error fresh(void) {
    infer_error err;
    memset(&err, 0, sizeof err);
    err.code = INFER_OK;
    return err;
}

/* Loads one file every way its stage says and checks each outcome. */
static void check_file(tally *t, const char *path, const char *file, const char *stage, const char *kw) {
    size_t len;
    char *whole = tu_read_file(path, &len);
    uint8_t *data;
    infer_error err;
    infer_model *m;
    infer_gguf *g;
    infer_model_params vocab_only = infer_model_default_params();
    int ok = !strcmp(stage, "ok");
    vocab_only.vocab_only = 1;
    t->files++;
    if (!whole) {
        fail(t, "%s: cannot read it", path);
        return;
    }
    data = (uint8_t *)malloc(len ? len : 1); /* exactly the file: ASan catches a read past it */
    cr_assert_not_null(data);
    memcpy(data, whole, len);
    free(whole);

    err = fresh();
    m = infer_model_load(path, NULL, &err);
    if (ok && !m) fail(t, "%s: a valid file was refused: %s", file, err.msg);
    if (!ok) check_refusal(t, m, &err, file, "infer_model_load", kw);
    infer_model_free(m);

    err = fresh();
    m = infer_model_load_memory(data, len, NULL, &err);
    if (ok && !m) fail(t, "%s: a valid file was refused from memory: %s", file, err.msg);
    if (!ok) check_refusal(t, m, &err, file, "infer_model_load_memory", kw);
    infer_model_free(m);

    if (!strcmp(stage, "gguf")) {
        /* the GGUF reader itself must refuse it */
        err = fresh();
        g = infer_gguf_open(path, &err);
        check_refusal(t, g, &err, file, "infer_gguf_open", kw);
        infer_gguf_close(g);
        err = fresh();
        g = infer_gguf_open_memory(data, len, &err);
        check_refusal(t, g, &err, file, "infer_gguf_open_memory", kw);
        infer_gguf_close(g);
    } else if (!strcmp(stage, "vocab") || !strcmp(stage, "model")) {
        /* well-formed GGUF: the reader takes it, and the vocabulary decides */
        err = fresh();
        g = infer_gguf_open_memory(data, len, &err);
        if (!g) fail(t, "%s: the GGUF reader refused it (expected the %s loader to): %s", file, stage, err.msg);
        infer_gguf_close(g);
        err = fresh();
        m = infer_model_load_memory(data, len, &vocab_only, &err);
        if (!strcmp(stage, "vocab")) check_refusal(t, m, &err, file, "infer_model_load_memory vocab_only", kw);
        else if (!m) fail(t, "%s: the vocabulary was refused (expected the model loader to): %s", file, err.msg);
        infer_model_free(m);
    } else if (!strcmp(stage, "any")) {
        /* refused somewhere; if the reader refuses, clearly too */
        err = fresh();
        g = infer_gguf_open_memory(data, len, &err);
        if (!g) check_refusal(t, g, &err, file, "infer_gguf_open_memory", "*");
        infer_gguf_close(g);
    } else if (!ok) {
        fail(t, "%s: unknown stage '%s' in the manifest", file, stage);
    }
    free(data);
}

/* Every manifest entry whose file name starts with prefix; returns how many. */
static int check_entries(const char *prefix) {
    int n, real_absent, i, matched = 0, stages[5] = {0, 0, 0, 0, 0};
    static const char *const stage_names[5] = {"gguf", "vocab", "model", "any", "ok"};
    entry *e = read_manifest(&n, &real_absent);
    tally t = {0, 0};
    for (i = 0; i < n; i++) {
        char path[512];
        int s;
        if (strncmp(e[i].file, prefix, strlen(prefix)) != 0) continue;
        snprintf(path, sizeof path, "%s/%s", INFER_HOSTILE_DIR, e[i].file);
        check_file(&t, path, e[i].file, e[i].stage, e[i].kw);
        for (s = 0; s < 5; s++)
            if (!strcmp(e[i].stage, stage_names[s])) stages[s]++;
        matched++;
    }
    free(e);
    assert_no_leaks(prefix);
    cr_log_info("%s*: %d files (%d refused by the GGUF reader, %d by the vocabulary, %d by the model loader, %d cut "
                "short anywhere, %d valid that must load): %d failures",
                prefix, matched, stages[0], stages[1], stages[2], stages[3], stages[4], t.failures);
    cr_assert_eq(t.failures, 0, "%d of the checks on %d %s* files failed (the first %d are logged above)", t.failures,
                 matched, prefix, MAX_SHOWN);
    return matched;
}

Test(hostile, synthetic_model_files, .timeout = 600) {
    int n = check_entries("syn-");
    /* the generator's families: a set much smaller means one went missing */
    cr_assert_gt(n, 1500, "only %d synthetic files in the manifest", n);
}

Test(hostile, real_model_cut_and_patched, .timeout = 600) {
    int n, real_absent;
    entry *e;
    if (!tu_have_shared()) cr_skip_test("../shared is absent: stories260K.gguf is not cut and patched");
    e = read_manifest(&n, &real_absent);
    free(e);
    cr_assert(!real_absent, "../shared is here but the hostile set was made without stories260K.gguf: "
                            "rebuild the hostile_files target");
    cr_assert_gt(check_entries("stories260K-"), 1000);
}

/* ../shared/bad: each file refused from its path and from memory, with the
   reason named where the README gives it. */
Test(hostile, shared_bad_files) {
    char dir[512];
    DIR *d;
    struct dirent *de;
    tally t = {0, 0};
    if (!tu_have_shared()) cr_skip_test("../shared is absent: no bad files to refuse");
    tu_shared_path(dir, sizeof dir, "bad");
    d = opendir(dir);
    cr_assert_not_null(d, "no %s", dir);
    while ((de = readdir(d)) != NULL) {
        char path[1024];
        const char *kw = "*";
        if (de->d_name[0] == '.') continue;
        if (!strcmp(de->d_name, "gguf-v1.gguf")) kw = "version 1";
        else if (!strcmp(de->d_name, "rows-not-multiple-of-block.gguf")) kw = "block";
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        check_file(&t, path, de->d_name, "any", kw);
    }
    closedir(d);
    assert_no_leaks(dir);
    cr_assert_geq(t.files, 2, "expected at least the two files the README lists in %s", dir);
    cr_assert_eq(t.failures, 0, "%d checks of %s failed", t.failures, dir);
}

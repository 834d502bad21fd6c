/* test_files.c - files named by a user are checked before they are read:
   a FIFO (whose open() would wait for a writer), a directory or a device
   such as /dev/zero (endless) given as a model, a saved state, a grammar,
   a JSON schema, a prompt cache or a text gets a one-line error at once,
   and a regular file over a command's size cap is refused naming the cap.
   The library is checked here through a private copy built with
   INFER_NO_MMAP (its read-whole-file path; this file calls only that
   copy), and the CLI, whose library maps files, as a program: together
   both of infer__blob_open's paths. */
#define _XOPEN_SOURCE 700 /* mkfifo, mkdtemp, ftruncate */
#define INFER_NO_MMAP
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "infer_private.h"
#include "testutil.h"

#define MODEL_REL "models/stories260K.gguf"

/* The CLI runs under `timeout`, so that a regression that waits on a FIFO
   fails the test rather than leaves a process behind, and (outside ASan,
   which needs a large address space) with its memory capped, so that one
   that reads /dev/zero without end fails rather than takes the machine's. */
#if defined(__SANITIZE_ADDRESS__)
#define CLI_LIMITS ""
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CLI_LIMITS ""
#endif
#endif
#ifndef CLI_LIMITS
#define CLI_LIMITS "ulimit -v 4194304; "
#endif

/* LeakSanitizer reads this in the ASan build: Criterion's runner leaks two
   48-byte blocks of its own (no frame of ours) when these tests run two at
   a time, as CTest runs them (see lsan_criterion.supp). */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libcriterion.so\n"; }

static char dir[64];

/* A fresh directory holding a FIFO "fifo" (nobody ever writes to it). */
static void make_dir(void) {
    char fifo[128];
    snprintf(dir, sizeof dir, "/tmp/infer_test_files_XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
}

static void remove_dir(void) {
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

TestSuite(files, .init = make_dir, .fini = remove_dir);

static const char *in_dir(const char *name) {
    static char p[4][160];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

/* A sparse regular file of n bytes (no disk blocks): for the size caps. */
static const char *sparse_file(const char *name, off_t n) {
    const char *path = in_dir(name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    cr_assert(fd >= 0);
    cr_assert_eq(ftruncate(fd, n), 0);
    close(fd);
    return path;
}

static int have_model(void) { return tu_have_shared(); }

static const char *model_path(void) {
    static char p[512];
    tu_shared_path(p, sizeof p, MODEL_REL);
    return p;
}

/* The CLI with args must fail within its time limit with exactly one line
   on stderr naming every '|'-free word of need (separated by ';'). */
static void cli_refuses(const char *args, const char *need) {
    char cmd[4096], words[256], *w, *save = NULL;
    int status = 0, lines = 0;
    char *err, *p;
    snprintf(cmd, sizeof cmd, "%stimeout -s KILL 20 '%s' %s 2>&1 >/dev/null </dev/null", CLI_LIMITS, INFER_CLI_PATH,
             args);
    err = tu_run(cmd, &status);
    cr_assert_not_null(err, "could not run the CLI");
    cr_assert(status > 0 && status < 124, "infer %s: exit status %d (124/137: it hung or was killed); stderr: %s", args,
              status, err);
    for (p = err; *p; p++) lines += *p == '\n';
    cr_assert_eq(lines, 1, "infer %s: stderr is not one line:\n%s", args, err);
    snprintf(words, sizeof words, "%s", need);
    for (w = strtok_r(words, ";", &save); w; w = strtok_r(NULL, ";", &save))
        cr_assert(tu_names_any(err, w), "infer %s: the error '%s' does not say %s", args, err, w);
    free(err);
}

/* ---- the library (its INFER_NO_MMAP path) ---- */

Test(files, library_refuses_fifo_directory_and_device, .timeout = 30) {
    infer_error err;
    memset(&err, 0, sizeof err);
    cr_assert_null(infer_model_load(in_dir("fifo"), NULL, &err));
    cr_assert_eq(err.code, INFER_ERR_IO);
    cr_assert(strstr(err.msg, "FIFO") && strstr(err.msg, "not a regular file"), "%s", err.msg);
    cr_assert_null(infer_model_load(dir, NULL, &err));
    cr_assert(strstr(err.msg, "directory"), "%s", err.msg);
    cr_assert_null(infer_model_load("/dev/zero", NULL, &err));
    cr_assert(strstr(err.msg, "not a regular file"), "%s", err.msg);
    cr_assert_null(infer_gguf_open(in_dir("fifo"), &err));
    cr_assert(strstr(err.msg, "FIFO"), "%s", err.msg);
}

Test(files, library_state_files, .timeout = 60) {
    infer_model *m;
    infer_context *c;
    infer_context_params cp = infer_context_default_params();
    infer_error err;
    if (!have_model()) cr_skip_test("../shared is absent: no model for a context");
    m = infer_model_load(model_path(), NULL, &err);
    cr_assert(m, "%s", err.msg);
    cp.n_ctx = 32;
    c = infer_context_new(m, &cp, &err);
    cr_assert(c, "%s", err.msg);
    cr_assert_eq(infer_seq_state_load_file(c, 0, in_dir("fifo"), &err), INFER_ERR_IO);
    cr_assert(strstr(err.msg, "FIFO"), "%s", err.msg);
    cr_assert_eq(infer_seq_state_load_file(c, 0, dir, &err), INFER_ERR_IO);
    cr_assert(strstr(err.msg, "directory"), "%s", err.msg);
    cr_assert_eq(infer_seq_state_load_file(c, 0, "/dev/zero", &err), INFER_ERR_IO);
    /* saving to a FIFO that nobody reads must not wait for a reader */
    cr_assert_eq(infer_seq_state_save_file(c, 0, in_dir("fifo"), &err), INFER_ERR_IO);
    cr_assert(strstr(err.msg, "FIFO"), "%s", err.msg);
    /* a regular file still works both ways */
    cr_assert_eq(infer_seq_state_save_file(c, 0, in_dir("state"), &err), INFER_OK, "%s", err.msg);
    cr_assert_eq(infer_seq_state_load_file(c, 0, in_dir("state"), &err), INFER_OK, "%s", err.msg);
    infer_context_free(c);
    infer_model_free(m);
}

/* ---- the CLI (the library's mapped path, and the CLI's own readers) ---- */

Test(files, cli_fifo_and_directory_model, .timeout = 60) {
    char args[1024];
    snprintf(args, sizeof args, "tokenize -m '%s' -p hi", in_dir("fifo"));
    cli_refuses(args, "FIFO;not a regular file");
    snprintf(args, sizeof args, "info -m '%s'", in_dir("fifo"));
    cli_refuses(args, "FIFO");
    snprintf(args, sizeof args, "run -m '%s' -p hi", dir);
    cli_refuses(args, "directory");
    cli_refuses("run -m /dev/zero -p hi", "not a regular file");
}

Test(files, cli_fifo_grammar_schema_and_prompt_cache, .timeout = 120) {
    char args[1024];
    if (!have_model()) cr_skip_test("../shared is absent: the grammar is read after the model loads");
    snprintf(args, sizeof args, "run -m '%s' -p hi -n 1 --grammar-file '%s'", model_path(), in_dir("fifo"));
    cli_refuses(args, "FIFO;grammar file");
    snprintf(args, sizeof args, "run -m '%s' -p hi -n 1 --json-schema-file '%s'", model_path(), in_dir("fifo"));
    cli_refuses(args, "FIFO;JSON schema file");
    snprintf(args, sizeof args, "run -m '%s' -p hi -n 1 --prompt-cache '%s'", model_path(), in_dir("fifo"));
    cli_refuses(args, "FIFO;prompt-cache");
    snprintf(args, sizeof args, "run -m '%s' -p hi -n 1 --prompt-cache '%s'", model_path(), dir);
    cli_refuses(args, "directory");
    snprintf(args, sizeof args, "run -m '%s' -p hi -n 1 --grammar-file '%s'", model_path(), dir);
    cli_refuses(args, "directory;grammar file");
}

/* /dev/zero never ends: each whole-file reader refuses it as no regular
   file, naming which file it was. */
Test(files, cli_dev_zero_refused, .timeout = 120) {
    char args[1024];
    const char *m = have_model() ? model_path() : "/nonexistent/model.gguf";
    snprintf(args, sizeof args, "tokenize -m '%s' --file /dev/zero", m);
    cli_refuses(args, "not a regular file;text to tokenize");
    snprintf(args, sizeof args, "perplexity -m '%s' -f /dev/zero", m);
    cli_refuses(args, "not a regular file;text to score");
    snprintf(args, sizeof args, "embed -m '%s' -f /dev/zero", m);
    cli_refuses(args, "not a regular file;text to embed");
    snprintf(args, sizeof args, "tokenize -m '%s' --file '%s'", m, in_dir("fifo"));
    cli_refuses(args, "FIFO");
    snprintf(args, sizeof args, "perplexity -m '%s' -f '%s'", m, in_dir("fifo"));
    cli_refuses(args, "FIFO");
    snprintf(args, sizeof args, "embed -m '%s' -f '%s'", m, dir);
    cli_refuses(args, "directory");
    if (!have_model()) cr_skip_test("../shared is absent: the grammar is read after the model loads");
    snprintf(args, sizeof args, "run -m '%s' -p hi -n 1 --grammar-file /dev/zero", m);
    cli_refuses(args, "not a regular file;grammar file");
    snprintf(args, sizeof args, "run -m '%s' -p hi -n 1 --json-schema-file /dev/zero", m);
    cli_refuses(args, "not a regular file;JSON schema file");
}

/* A regular file one byte over a command's cap is refused, the error naming
   the cap (sparse files: nothing is written to disk, nothing is read). */
Test(files, cli_size_caps, .timeout = 120) {
    char args[1024];
    const char *m = have_model() ? model_path() : "/nonexistent/model.gguf";
    const char *big = sparse_file("big.txt", ((off_t)64 << 20) + 1);
    const char *huge = sparse_file("huge.txt", ((off_t)1 << 30) + 1);
    snprintf(args, sizeof args, "tokenize -m '%s' --file '%s'", m, big);
    cli_refuses(args, "larger than 64 MiB;text to tokenize");
    snprintf(args, sizeof args, "embed -m '%s' -f '%s'", m, big);
    cli_refuses(args, "larger than 64 MiB;text to embed");
    snprintf(args, sizeof args, "perplexity -m '%s' -f '%s'", m, huge);
    cli_refuses(args, "larger than 1024 MiB;text to score");
    if (!have_model()) cr_skip_test("../shared is absent: the grammar is read after the model loads");
    snprintf(args, sizeof args, "run -m '%s' -p hi -n 1 --grammar-file '%s'", m, big);
    cli_refuses(args, "larger than 64 MiB;the limit for a grammar file");
    snprintf(args, sizeof args, "run -m '%s' -p hi -n 1 --json-schema-file '%s'", m, big);
    cli_refuses(args, "larger than 64 MiB;JSON schema file");
}

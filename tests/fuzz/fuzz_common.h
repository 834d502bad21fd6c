/* What the fuzzing harnesses share: the test data directory, loading a
   vocabulary once per process, and the input as a C string. Each harness
   is one file with LLVMFuzzerTestOneInput; built with -DINFER_FUZZ=ON it
   links libFuzzer's main, otherwise replay_main.c's (which runs the files
   it is given: the regression inputs in every build). */
#ifndef FUZZ_COMMON_H
#define FUZZ_COMMON_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "infer.h"

#ifndef INFER_SHARED_DIR
#define INFER_SHARED_DIR "../shared"
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* ../shared, or $INFER_SHARED_DIR where set. */
static inline const char *fuzz_shared_dir(void) {
    const char *env = getenv("INFER_SHARED_DIR");
    return env && *env ? env : INFER_SHARED_DIR;
}

/* A harness whose data is in ../shared exits 77 (CTest's skip) without it. */
static inline void fuzz_require_shared(const char *harness) {
    struct stat st;
    if (stat(fuzz_shared_dir(), &st) != 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "%s: SKIPPED: %s is absent (its vocabularies are there)\n", harness, fuzz_shared_dir());
        exit(77);
    }
}

/* A vocabulary-only model from ../shared (path relative to it); exits 77
   where the file is missing, as the tests do. */
static inline infer_model *fuzz_load_vocab(const char *harness, const char *rel) {
    char path[1024];
    infer_model_params mp = infer_model_default_params();
    infer_error err;
    infer_model *m;
    mp.vocab_only = 1;
    snprintf(path, sizeof path, "%s/%s", fuzz_shared_dir(), rel);
    if (!(m = infer_model_load(path, &mp, &err))) {
        fprintf(stderr, "%s: SKIPPED: %s: %s\n", harness, path, err.msg);
        exit(77);
    }
    return m;
}

/* The input as a NUL-terminated string (malloc'd; an embedded NUL ends it
   early, as it would any C caller's text). */
static inline char *fuzz_cstr(const uint8_t *data, size_t size) {
    char *s = (char *)malloc(size + 1);
    if (!s) abort();
    if (size) memcpy(s, data, size);
    s[size] = 0;
    return s;
}

/* Fails the run (libFuzzer reports it as a crash, with the input). */
#define FUZZ_CHECK(cond, ...)                                                                        \
    do {                                                                                             \
        if (!(cond)) {                                                                               \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);                 \
            fprintf(stderr, __VA_ARGS__);                                                            \
            fputc('\n', stderr);                                                                     \
            abort();                                                                                 \
        }                                                                                            \
    } while (0)

#endif

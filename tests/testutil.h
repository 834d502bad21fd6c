/* testutil.h - helpers shared by the tests: where ../shared is, reading
   files, a small JSON reader for llama.cpp's reference outputs, and running
   the CLI. */
#ifndef INFER_TESTUTIL_H
#define INFER_TESTUTIL_H
#include <stddef.h>

#include "infer.h"

/* Path under ../shared (static buffer per call site is not used: caller's). */
void tu_shared_path(char *buf, size_t size, const char *rel);
/* 1 if ../shared exists (tests skip, saying so, when it does not). */
int tu_have_shared(void);
/* The largest |a[i] - b[i]| over a's logit range (max - min of a). */
double tu_logit_diff(const float *a, const float *b, int n);
/* Whole file, NUL-terminated; NULL on failure. Caller frees. */
char *tu_read_file(const char *path, size_t *len);

typedef enum { TU_NULL, TU_BOOL, TU_NUM, TU_STR, TU_ARR, TU_OBJ } tu_kind;
typedef struct tu_json {
    tu_kind kind;
    double num;
    char *str;                 /* TU_STR */
    char *key;                 /* members of a TU_OBJ */
    struct tu_json *items;     /* TU_ARR elements or TU_OBJ members */
    int n;
} tu_json;

/* Parses text; NULL on a syntax error. */
tu_json *tu_json_parse(const char *text);
void tu_json_free(tu_json *j);
const tu_json *tu_json_get(const tu_json *obj, const char *key);

/* Runs a shell command, capturing stdout (and its exit status). */
char *tu_run(const char *cmd, int *status);
/* bench/make_model.py's test-draft and test-target (one vocabulary) into a
   new directory dir (size bytes) as draft.gguf and target.gguf; 0 where
   they could not be made (numpy or gguf missing). */
int tu_make_draft_pair(char *dir, size_t size);
/* Whether msg names one of kw's alternatives (separated by '|'), case
   aside; a NULL, "" or "*" kw accepts any message. */
int tu_names_any(const char *msg, const char *kw);

#endif

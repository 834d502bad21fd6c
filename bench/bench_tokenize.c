/* bench_tokenize - tokenizer throughput: about 1 MB of English text (the GPL
   and other licence texts Debian ships under /usr/share/common-licenses,
   concatenated and repeated to 1 MiB), then pathological inputs (1 MiB of one
   repeated character, 1 MiB of long "words" without spaces), with each
   vocabulary given. Prints MB/s and seconds as mean +- stddev of 5 runs.

       bench_tokenize VOCAB.gguf... [--text FILE]

   e.g. bench_tokenize ../shared/tokenizer/ggml-vocab-*.gguf */
#define _XOPEN_SOURCE 700
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "infer.h"
#include "../examples/os.h"

#define RUNS 5
#define TARGET (1 << 20)

static double now_s(void) { return os_now_ms() / 1e3; }

static int append_file(char **buf, size_t *n, size_t *cap, const char *path) {
    FILE *f = fopen(path, "rb");
    char tmp[65536];
    size_t r;
    if (!f) return 0;
    while ((r = fread(tmp, 1, sizeof tmp, f)) > 0) {
        if (*n + r > *cap) {
            char *b = (char *)realloc(*buf, *cap = (*n + r) * 2);
            if (!b) return fclose(f), 0;
            *buf = b;
        }
        memcpy(*buf + *n, tmp, r);
        *n += r;
    }
    fclose(f);
    return 1;
}

/* English text of exactly TARGET bytes (cut at a line end where it can). */
static char *english_text(const char *file, size_t *len) {
    static const char *const files[] = {"/usr/share/common-licenses/GPL-3", "/usr/share/common-licenses/GPL-2",
                                        "/usr/share/common-licenses/LGPL-2.1", "/usr/share/common-licenses/Apache-2.0",
                                        "/usr/share/common-licenses/MPL-2.0", "/usr/share/common-licenses/Artistic",
                                        "/usr/share/common-licenses/GFDL-1.3"};
    char *src = NULL, *out;
    size_t n = 0, cap = 0, i, o = 0;
    if (file) append_file(&src, &n, &cap, file);
    else
        for (i = 0; i < sizeof files / sizeof files[0]; i++) append_file(&src, &n, &cap, files[i]);
    if (!n) return free(src), NULL;
    out = (char *)malloc(TARGET);
    while (o < TARGET) {
        size_t k = n < TARGET - o ? n : TARGET - o;
        memcpy(out + o, src, k);
        o += k;
    }
    free(src);
    *len = TARGET;
    while (*len > TARGET - 4096 && out[*len - 1] != '\n') (*len)--; /* no cut UTF-8 character */
    return out;
}

static void run(const infer_model *m, const char *label, const char *text, size_t len) {
    double t[RUNS], mean = 0, var = 0;
    int i, n = 0;
    infer_token *toks = (infer_token *)malloc((len + 2) * sizeof *toks);
    for (i = 0; i < RUNS; i++) {
        double t0 = now_s();
        if (infer_tokenize(m, text, len, toks, (int)len + 2, 0, 0, &n, NULL) != INFER_OK) n = -1;
        t[i] = now_s() - t0;
        mean += t[i];
    }
    mean /= RUNS;
    for (i = 0; i < RUNS; i++) var += (t[i] - mean) * (t[i] - mean);
    var /= RUNS - 1;
    printf("  %-28s %8.2f MB/s   %.4f +- %.4f s   %d tokens\n", label, len / mean / 1e6, mean, sqrt(var), n);
    fflush(stdout);
    free(toks);
}

int main(int argc, char **argv) {
    const char *textfile = NULL;
    char *eng, *rep, *words;
    size_t elen, i;
    int a, nv = 0;
    for (a = 1; a < argc; a++)
        if (!strcmp(argv[a], "--text") && a + 1 < argc) textfile = argv[++a];
    eng = english_text(textfile, &elen);
    if (!eng) {
        fprintf(stderr, "bench_tokenize: no English text (give --text FILE)\n");
        return 1;
    }
    rep = (char *)malloc(TARGET);
    words = (char *)malloc(TARGET);
    memset(rep, 'a', TARGET);
    for (i = 0; i < TARGET; i++) /* 1000-letter "words" separated by spaces */
        words[i] = (i % 1001 == 1000) ? ' ' : "abcdefghijklmnopqrstuvwxyz"[(i * 7 + i / 13) % 26];
    printf("English text: %zu bytes; %d runs each\n", elen, RUNS);
    for (a = 1; a < argc; a++) {
        infer_error err;
        infer_model_params mp = infer_model_default_params();
        infer_model *m;
        const char *name;
        if (!strcmp(argv[a], "--text")) {
            a++;
            continue;
        }
        mp.vocab_only = 1;
        m = infer_model_load(argv[a], &mp, &err);
        if (!m) {
            fprintf(stderr, "bench_tokenize: %s\n", err.msg);
            continue;
        }
        name = strrchr(argv[a], '/') ? strrchr(argv[a], '/') + 1 : argv[a];
        printf("%s\n", name);
        run(m, "English 1 MiB", eng, elen);
        run(m, "'a' x 1 MiB", rep, TARGET);
        run(m, "1000-letter words, 1 MiB", words, TARGET);
        infer_model_free(m);
        nv++;
    }
    free(eng);
    free(rep);
    free(words);
    if (!nv) {
        fprintf(stderr, "usage: bench_tokenize VOCAB.gguf... [--text FILE]\n");
        return 1;
    }
    return 0;
}

/* testutil.c - see testutil.h. */
#define _XOPEN_SOURCE 700 /* popen */
#include "testutil.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

void tu_shared_path(char *buf, size_t size, const char *rel) { snprintf(buf, size, "%s/%s", INFER_SHARED_DIR, rel); }

int tu_have_shared(void) {
    struct stat st;
    return stat(INFER_SHARED_DIR "/README.md", &st) == 0;
}

char *tu_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    char *buf;
    long n;
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = (char *)malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) buf[n] = 0;
    if (len) *len = (size_t)n;
    return buf;
}

/* ---- JSON ---- */

typedef struct { const char *p; int bad; } tu_parser;

static void ws(tu_parser *ps) {
    while (*ps->p == ' ' || *ps->p == '\n' || *ps->p == '\r' || *ps->p == '\t') ps->p++;
}

static void put_utf8(char **o, unsigned cp) {
    unsigned char *u = (unsigned char *)*o;
    if (cp < 0x80) *u++ = (unsigned char)cp;
    else if (cp < 0x800) *u++ = (unsigned char)(0xc0 | cp >> 6), *u++ = (unsigned char)(0x80 | (cp & 0x3f));
    else if (cp < 0x10000)
        *u++ = (unsigned char)(0xe0 | cp >> 12), *u++ = (unsigned char)(0x80 | ((cp >> 6) & 0x3f)),
        *u++ = (unsigned char)(0x80 | (cp & 0x3f));
    else
        *u++ = (unsigned char)(0xf0 | cp >> 18), *u++ = (unsigned char)(0x80 | ((cp >> 12) & 0x3f)),
        *u++ = (unsigned char)(0x80 | ((cp >> 6) & 0x3f)), *u++ = (unsigned char)(0x80 | (cp & 0x3f));
    *o = (char *)u;
}

static char *parse_string(tu_parser *ps) {
    const char *s = ++ps->p;
    char *out, *o;
    size_t n = 0;
    while (s[n] && s[n] != '"') n += s[n] == '\\' && s[n + 1] ? 2 : 1;
    if (!s[n]) return ps->bad = 1, NULL;
    o = out = (char *)malloc(n + 1);
    while (*ps->p != '"') {
        char c = *ps->p++;
        if (c != '\\') {
            *o++ = c;
            continue;
        }
        c = *ps->p++;
        switch (c) {
        case 'n': *o++ = '\n'; break;
        case 't': *o++ = '\t'; break;
        case 'r': *o++ = '\r'; break;
        case 'b': *o++ = '\b'; break;
        case 'f': *o++ = '\f'; break;
        case 'u': {
            unsigned cp = (unsigned)strtoul((char[5]){ps->p[0], ps->p[1], ps->p[2], ps->p[3], 0}, NULL, 16);
            ps->p += 4;
            if (cp >= 0xd800 && cp < 0xdc00 && ps->p[0] == '\\' && ps->p[1] == 'u') {
                unsigned lo = (unsigned)strtoul((char[5]){ps->p[2], ps->p[3], ps->p[4], ps->p[5], 0}, NULL, 16);
                ps->p += 6;
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            }
            put_utf8(&o, cp);
            break;
        }
        default: *o++ = c;
        }
    }
    ps->p++;
    *o = 0;
    return out;
}

static void parse_value(tu_parser *ps, tu_json *v);

static void parse_items(tu_parser *ps, tu_json *v, char close, int keyed) {
    int cap = 0;
    ps->p++;
    ws(ps);
    if (*ps->p == close) {
        ps->p++;
        return;
    }
    for (;;) {
        tu_json item;
        char *key = NULL;
        memset(&item, 0, sizeof item);
        ws(ps);
        if (keyed) {
            if (*ps->p != '"') return (void)(ps->bad = 1);
            key = parse_string(ps);
            ws(ps);
            if (*ps->p++ != ':') return (void)(free(key), ps->bad = 1);
        }
        parse_value(ps, &item);
        item.key = key;
        if (v->n == cap) v->items = (tu_json *)realloc(v->items, (size_t)(cap = cap ? cap * 2 : 8) * sizeof *v->items);
        v->items[v->n++] = item;
        if (ps->bad) return;
        ws(ps);
        if (*ps->p == ',') {
            ps->p++;
            continue;
        }
        if (*ps->p == close) {
            ps->p++;
            return;
        }
        ps->bad = 1;
        return;
    }
}

static void parse_value(tu_parser *ps, tu_json *v) {
    ws(ps);
    if (*ps->p == '{') v->kind = TU_OBJ, parse_items(ps, v, '}', 1);
    else if (*ps->p == '[') v->kind = TU_ARR, parse_items(ps, v, ']', 0);
    else if (*ps->p == '"') v->kind = TU_STR, v->str = parse_string(ps);
    else if (!strncmp(ps->p, "null", 4)) v->kind = TU_NULL, ps->p += 4;
    else if (!strncmp(ps->p, "true", 4)) v->kind = TU_BOOL, v->num = 1, ps->p += 4;
    else if (!strncmp(ps->p, "false", 5)) v->kind = TU_BOOL, ps->p += 5;
    else {
        char *end;
        v->kind = TU_NUM;
        v->num = strtod(ps->p, &end);
        if (end == ps->p) ps->bad = 1;
        ps->p = end;
    }
}

static void free_value(tu_json *v) {
    int i;
    for (i = 0; i < v->n; i++) free_value(&v->items[i]);
    free(v->items);
    free(v->str);
    free(v->key);
}

tu_json *tu_json_parse(const char *text) {
    tu_parser ps;
    tu_json *v = (tu_json *)calloc(1, sizeof *v);
    ps.p = text;
    ps.bad = 0;
    parse_value(&ps, v);
    if (ps.bad) {
        tu_json_free(v);
        return NULL;
    }
    return v;
}

void tu_json_free(tu_json *j) {
    if (!j) return;
    free_value(j);
    free(j);
}

const tu_json *tu_json_get(const tu_json *obj, const char *key) {
    int i;
    if (!obj || obj->kind != TU_OBJ) return NULL;
    for (i = 0; i < obj->n; i++)
        if (obj->items[i].key && !strcmp(obj->items[i].key, key)) return &obj->items[i];
    return NULL;
}

char *tu_run(const char *cmd, int *status) {
    FILE *p = popen(cmd, "r");
    char *buf = NULL;
    size_t n = 0, cap = 0, r;
    int st;
    if (!p) return NULL;
    do {
        if (n + 4096 > cap) buf = (char *)realloc(buf, cap = cap ? cap * 2 : 65536);
        r = fread(buf + n, 1, cap - n - 1, p);
        n += r;
    } while (r > 0);
    buf[n] = 0;
    st = pclose(p);
    if (status) *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return buf;
}

int tu_names_any(const char *msg, const char *kw) {
    const char *alt = kw;
    if (!kw || !kw[0] || !strcmp(kw, "*")) return 1;
    while (*alt) {
        size_t n = strcspn(alt, "|"), i, j;
        for (i = 0; n && msg[i]; i++) {
            for (j = 0; j < n && msg[i + j]; j++)
                if (tolower((unsigned char)msg[i + j]) != tolower((unsigned char)alt[j])) break;
            if (j == n) return 1;
        }
        alt += n + (alt[n] == '|');
    }
    return 0;
}

/* The project's root, where bench/make_model.py lies; every build of the
   tests names it (CMake, neon_check.sh), and one that does not finds no
   script and makes no pair. */
#ifndef INFER_SOURCE_DIR
#define INFER_SOURCE_DIR "."
#endif

int tu_make_draft_pair(char *dir, size_t size) {
    char cmd[2048], *out;
    int status;
    snprintf(dir, size, "/tmp/infer_draft_XXXXXX");
    if (!mkdtemp(dir)) return 0;
    snprintf(cmd, sizeof cmd,
             "python3 '%s/bench/make_model.py' test-draft f32 -o '%s/draft.gguf' >/dev/null 2>&1 && "
             "python3 '%s/bench/make_model.py' test-target f32 --seed 2 -o '%s/target.gguf' >/dev/null 2>&1",
             INFER_SOURCE_DIR, dir, INFER_SOURCE_DIR, dir);
    out = tu_run(cmd, &status);
    free(out);
    return status == 0;
}

double tu_logit_diff(const float *a, const float *b, int n) {
    float lo = a[0], hi = a[0];
    double worst = 0;
    int i;
    for (i = 0; i < n; i++) {
        lo = fminf(lo, a[i]), hi = fmaxf(hi, a[i]);
        worst = fmax(worst, fabs((double)a[i] - b[i]));
    }
    return hi > lo ? worst / (hi - lo) : worst;
}

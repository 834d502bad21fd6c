/* cli.h - option parsing the infer subcommands share: one-line errors,
   strict numbers, and the sampling flags of run and chat. */
#ifndef INFER_CLI_H
#define INFER_CLI_H
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer.h"

/* Prints "infer: " fmt (with one string argument) and a newline; returns 1. */
static int cli_fail(const char *fmt, const char *arg) {
    fprintf(stderr, "infer: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    return 1;
}

/* The whole of s as a number, or 0. */
static int cli_int(const char *s, int *out) {
    char *end;
    long v;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < -2147483647L || v > 2147483647L) return 0;
    *out = (int)v;
    return 1;
}

static int cli_float(const char *s, float *out) {
    char *end;
    double v;
    errno = 0;
    v = strtod(s, &end);
    if (errno || end == s || *end) return 0;
    *out = (float)v;
    return 1;
}

/* --device NAME: cpu, cuda or auto; 0 (with the one-line error printed)
   for another name. */
static int cli_device(const char *v, infer_device *d) {
    int x = infer_device_from_name(v);
    if (x < 0) {
        fprintf(stderr, "infer: bad value '%s' for --device (cpu, cuda or auto)\n", v);
        return 0;
    }
    *d = (infer_device)x;
    return 1;
}

/* --kv-type NAME: f16 or q8_0, the KV cache's format; 0 (with the
   one-line error printed) for another name. */
static int cli_kv_type(const char *v, infer_type *t) {
    if (!strcmp(v, "f16")) *t = INFER_TYPE_F16;
    else if (!strcmp(v, "q8_0")) *t = INFER_TYPE_Q8_0;
    else {
        fprintf(stderr, "infer: bad value '%s' for --kv-type (f16 or q8_0)\n", v);
        return 0;
    }
    return 1;
}

/* When a is a sampling flag (--temp --top-k --top-p --min-p
   --repeat-penalty --seed), parses its value v into sp, sets *ok to whether
   the value was valid, and returns 1; else returns 0. */
static int cli_sampling_option(const char *a, const char *v, infer_sampler_params *sp, int *ok) {
    if (!strcmp(a, "--temp")) *ok = cli_float(v, &sp->temperature) && sp->temperature >= 0;
    else if (!strcmp(a, "--top-k")) *ok = cli_int(v, &sp->top_k);
    else if (!strcmp(a, "--top-p")) *ok = cli_float(v, &sp->top_p) && sp->top_p > 0 && sp->top_p <= 1;
    else if (!strcmp(a, "--min-p")) *ok = cli_float(v, &sp->min_p) && sp->min_p >= 0 && sp->min_p <= 1;
    else if (!strcmp(a, "--repeat-penalty")) *ok = cli_float(v, &sp->repeat_penalty) && sp->repeat_penalty > 0;
    else if (!strcmp(a, "--seed")) {
        char *end;
        unsigned long long s;
        errno = 0;
        s = strtoull(v, &end, 10);
        *ok = !errno && end != v && !*end;
        sp->seed = s;
    } else return 0;
    return 1;
}

#endif

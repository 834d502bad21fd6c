/* bench_kernels - speed of every vec_dot (and activation quantizer) per
   instruction set this CPU runs: nanoseconds per 4096-value row and values
   per nanosecond, mean +- stddev over runs. Not a test.

       bench_kernels [runs] [n] [packed]   (defaults: 10 runs, n = 4096)

   then matrix x tokens products on 2 threads, old kernels against packed
   weights (GMAC/s), and one token through ~512 MiB of packed matrices
   (GB/s); "packed" runs only those.

   The rows (64 of them) stay in cache, so this measures the kernels'
   arithmetic, not memory bandwidth. Like the tests it compiles its own copy
   of the implementation and calls its static internals. */
#include "../tests/infer_private.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROWS 64

static const infer_type weight_types[] = {INFER_TYPE_F32,  INFER_TYPE_F16,  INFER_TYPE_BF16,   INFER_TYPE_Q8_0,
                                          INFER_TYPE_Q4_0, INFER_TYPE_Q4_1, INFER_TYPE_Q5_0,   INFER_TYPE_Q5_1,
                                          INFER_TYPE_Q2_K, INFER_TYPE_Q3_K, INFER_TYPE_Q4_K,   INFER_TYPE_Q5_K,
                                          INFER_TYPE_Q6_K, INFER_TYPE_IQ4_NL, INFER_TYPE_IQ4_XS};
static const infer_type act_types[] = {INFER_TYPE_Q8_0, INFER_TYPE_Q8_1, INFER_TYPE_Q8_K, INFER_TYPE_F16, INFER_TYPE_BF16};

static uint64_t rng = 88172645463325252ull;
static float frand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

static volatile float sink;

static void stats(const double *v, int n, double *mean, double *sd) {
    double s = 0, q = 0;
    int i;
    for (i = 0; i < n; i++) s += v[i];
    *mean = s / n;
    for (i = 0; i < n; i++) q += (v[i] - *mean) * (v[i] - *mean);
    *sd = n > 1 ? sqrt(q / (n - 1)) : 0;
}

/* times fn over enough calls for ~20 ms, returns ns per call */
static double time_dot(infer__vec_dot_fn fn, int n, const uint8_t *w, size_t row, const void *x) {
    long iters = 0, target = 1;
    double t0, t1;
    float acc = 0;
    for (;;) {
        long i;
        t0 = infer__now_ms();
        for (i = 0; i < target; i++) acc += fn(n, w + (size_t)(i % ROWS) * row, x);
        t1 = infer__now_ms();
        iters = target;
        if (t1 - t0 > 20) break;
        target *= 2;
    }
    sink = acc;
    return (t1 - t0) * 1e6 / (double)iters;
}

static double time_quant(infer__from_float_fn fn, const float *x, void *out, int n) {
    long iters = 0, target = 1;
    double t0, t1;
    for (;;) {
        long i;
        t0 = infer__now_ms();
        for (i = 0; i < target; i++) fn(x, out, n);
        t1 = infer__now_ms();
        iters = target;
        if (t1 - t0 > 20) break;
        target *= 2;
    }
    return (t1 - t0) * 1e6 / (double)iters;
}

/* ---- matrix products on 2 threads: the old path (gemm, or the vec_dot
   loop for one token) against packed weights ---- */

typedef struct {
    const infer__kernels *k;
    infer_type t;
    int n, rows, n_tok, n_mats, packed;
    uint8_t **w;      /* n_mats matrices, row-major (old) or packed */
    size_t ws;        /* bytes per row, old layout */
    const uint8_t *x; /* n_tok activation rows, vec_dot_type */
    size_t xs;
    float *y; /* [n_tok][rows] */
} mm_job;

/* 64-byte aligned blocks (C99 has no aligned_alloc): the original
   pointer is kept just before the aligned one */
static void *amalloc(size_t size) {
    uint8_t *p = (uint8_t *)malloc(size + 64 + sizeof(void *)), *a;
    if (!p) return NULL;
    a = (uint8_t *)(((uintptr_t)p + sizeof(void *) + 63) & ~(uintptr_t)63);
    memcpy(a - sizeof(void *), &p, sizeof p);
    return a;
}
static void afree(void *a) {
    void *p;
    if (!a) return;
    memcpy(&p, (uint8_t *)a - sizeof(void *), sizeof p);
    free(p);
}

/* whole groups of rows per thread, as the forward pass splits them */
static void mm_task(void *arg, int ith, int nth) {
    const mm_job *j = (const mm_job *)arg;
    int ng = (j->rows + INFER__PACK_ROWS - 1) / INFER__PACK_ROWS, mi, r, t;
    int r0 = ng * ith / nth * INFER__PACK_ROWS, r1 = INFER__MIN(j->rows, ng * (ith + 1) / nth * INFER__PACK_ROWS);
    if (r1 <= r0) return;
    for (mi = 0; mi < j->n_mats; mi++) {
        const uint8_t *w = j->w[mi];
        if (j->packed)
            j->k->gemm_packed[j->t](j->n, w + infer__pack_offset(j->k, j->t, j->n, r0), r1 - r0, j->x, j->xs, j->n_tok,
                                    j->y + r0, (size_t)j->rows);
        else if (j->n_tok == 1 || !j->k->gemm[j->t])
            for (t = 0; t < j->n_tok; t++)
                for (r = r0; r < r1; r++)
                    j->y[(size_t)t * j->rows + r] = j->k->vec_dot[j->t](j->n, w + (size_t)r * j->ws, j->x + (size_t)t * j->xs);
        else
            j->k->gemm[j->t](j->n, w + (size_t)r0 * j->ws, j->ws, r1 - r0, j->x, j->xs, j->n_tok, j->y + r0, (size_t)j->rows);
    }
}

/* ms per call of the job, best of `runs` timings of >= 50 ms each */
static double time_mm(infer__pool *pool, mm_job *j, int runs) {
    double best = 0;
    int run;
    infer__pool_run(pool, mm_task, j); /* warm up */
    for (run = 0; run < runs; run++) {
        long iters = 0, batch = 1, i;
        double t0 = infer__now_ms(), t1, per;
        do { /* batches of 1, 1, 2, 4, ... calls */
            for (i = 0; i < batch; i++) infer__pool_run(pool, mm_task, j);
            iters += batch;
            batch = iters;
            t1 = infer__now_ms();
        } while (t1 - t0 < 50);
        per = (t1 - t0) / (double)iters;
        if (!best || per < best) best = per;
    }
    return best;
}

/* a plain read of the same bytes, for scale: memchr for a byte that is
   not there (libc's is vectorized) over each thread's half */
typedef struct {
    const uint8_t *p;
    size_t size;
    volatile int found;
} read_job;
static void read_task(void *arg, int ith, int nth) {
    read_job *r = (read_job *)arg;
    size_t a = r->size * ith / nth, b = r->size * (ith + 1) / nth;
    if (memchr(r->p + a, 0xab, b - a)) r->found = 1;
}
static double read_gbs(infer__pool *pool, size_t size, int runs) {
    uint8_t *p = (uint8_t *)malloc(size);
    read_job r = {NULL, 0, 0};
    double best = 0;
    int run;
    if (!p) return 0;
    memset(p, 1, size); /* not 0: a VM may back zero pages by one shared page */
    r.p = p, r.size = size;
    for (run = 0; run < runs; run++) {
        double t0 = infer__now_ms(), gbs;
        infer__pool_run(pool, read_task, &r);
        gbs = (double)size / (infer__now_ms() - t0) / 1e6;
        if (gbs > best) best = gbs;
    }
    free(p);
    return best;
}

static void bench_packed(const infer__kernels *k, int runs) {
    static const infer_type types[] = {INFER_TYPE_Q4_0, INFER_TYPE_Q8_0, INFER_TYPE_Q4_K, INFER_TYPE_Q6_K, INFER_TYPE_F16, INFER_TYPE_BF16};
    static const int shapes[][2] = {{5632, 2048}, {2048, 2048}}; /* rows x n (TinyLlama's FFN up and attention) */
    static const int toks[] = {1, 8, 128};
    infer__pool *pool = infer__pool_new(2);
    int ti, si, ki;
    printf("\nmatrix x tokens on %d threads, %s kernels: GMAC/s (best of %d), old = gemm (vec_dot loop for 1 token)\n",
           infer__pool_size(pool), infer__isa_name(k->isa), runs);
    printf("%-6s %-11s %5s %9s %9s %7s\n", "format", "matrix", "tok", "old", "packed", "speedup");
    for (ti = 0; ti < (int)(sizeof types / sizeof types[0]); ti++) {
        infer_type t = types[ti];
        const infer__type_traits *tt = infer__traits(t);
        if (!k->gemm_packed[t]) continue;
        for (si = 0; si < 2; si++) {
            int rows = shapes[si][0], n = shapes[si][1], r, i;
            size_t ws = infer__row_size(t, n), xs = infer__row_size(tt->vec_dot_type, n);
            uint8_t *w = (uint8_t *)malloc(ws * rows), *pk = (uint8_t *)amalloc(k->pack_size[t](n, rows));
            uint8_t *x = (uint8_t *)malloc(xs * 128);
            float *f = (float *)malloc(sizeof(float) * n), *y = (float *)malloc(sizeof(float) * (size_t)rows * 128);
            for (r = 0; r < rows; r++) {
                for (i = 0; i < n; i++) f[i] = frand();
                if (tt->quantize) tt->quantize(f, w + (size_t)r * ws, n);
                else tt->from_float(f, w + (size_t)r * ws, n);
            }
            for (r = 0; r < 128; r++) {
                for (i = 0; i < n; i++) f[i] = frand();
                k->from_float[tt->vec_dot_type](f, x + (size_t)r * xs, n);
            }
            k->pack[t](w, ws, n, rows, pk);
            for (ki = 0; ki < 3; ki++) {
                mm_job j = {k, t, n, rows, toks[ki], 1, 0, NULL, ws, x, xs, y};
                double macs = (double)rows * n * toks[ki], old, neu;
                j.w = &w;
                old = time_mm(pool, &j, runs);
                j.w = &pk, j.packed = 1;
                neu = time_mm(pool, &j, runs);
                printf("%-6s %5dx%-5d %5d %9.1f %9.1f %6.2fx\n", tt->name, rows, n, toks[ki], macs / old / 1e6,
                       macs / neu / 1e6, old / neu);
                fflush(stdout);
            }
            free(w), afree(pk), free(x), free(f), free(y);
        }
    }
    /* one token through many matrices (like a model's layers), 512 MiB
       of weights: far past every cache, so this is memory bandwidth */
    printf("\none token, %s-shaped 5632x2048 matrices totalling ~512 MiB (not in cache): GB/s of weights read\n",
           "TinyLlama");
    printf("(a plain read of 512 MiB on the same threads: %.1f GB/s)\n", read_gbs(pool, (size_t)512 << 20, runs));
    printf("%-6s %9s %9s\n", "format", "old", "packed");
    for (ti = 0; ti < (int)(sizeof types / sizeof types[0]); ti++) {
        infer_type t = types[ti];
        const infer__type_traits *tt = infer__traits(t);
        int rows = 5632, n = 2048, r, i, m, n_mats;
        size_t ws = infer__row_size(t, n), xs = infer__row_size(tt->vec_dot_type, n), psize;
        uint8_t **w, **pk, *x;
        float *f, *y;
        double old, neu;
        if (!k->gemm_packed[t]) continue;
        psize = k->pack_size[t](n, rows);
        n_mats = (int)((512u << 20) / psize) + 1;
        w = (uint8_t **)malloc(sizeof(uint8_t *) * n_mats), pk = (uint8_t **)malloc(sizeof(uint8_t *) * n_mats);
        x = (uint8_t *)malloc(xs), f = (float *)malloc(sizeof(float) * n), y = (float *)malloc(sizeof(float) * rows);
        for (i = 0; i < n; i++) f[i] = frand();
        k->from_float[tt->vec_dot_type](f, x, n);
        w[0] = (uint8_t *)malloc(ws * rows);
        for (r = 0; r < rows; r++) {
            for (i = 0; i < n; i++) f[i] = frand();
            if (tt->quantize) tt->quantize(f, w[0] + (size_t)r * ws, n);
            else tt->from_float(f, w[0] + (size_t)r * ws, n);
        }
        for (m = 0; m < n_mats; m++) {
            if (m) w[m] = (uint8_t *)malloc(ws * rows), memcpy(w[m], w[0], ws * rows);
            pk[m] = (uint8_t *)amalloc(psize);
            k->pack[t](w[0], ws, n, rows, pk[m]);
        }
        {
            mm_job j = {k, t, n, rows, 1, n_mats, 0, NULL, ws, x, xs, y};
            j.w = w;
            old = time_mm(pool, &j, runs);
            j.w = pk, j.packed = 1;
            neu = time_mm(pool, &j, runs);
        }
        printf("%-6s %9.1f %9.1f\n", tt->name, (double)ws * rows * n_mats / old / 1e6, (double)psize * n_mats / neu / 1e6);
        fflush(stdout);
        for (m = 0; m < n_mats; m++) free(w[m]), afree(pk[m]);
        free(w), free(pk), free(x), free(f), free(y);
    }
    infer__pool_free(pool);
}

int main(int argc, char **argv) {
    int runs = argc > 1 ? atoi(argv[1]) : 10, n = argc > 2 ? atoi(argv[2]) : 4096;
    int only_packed = argc > 3 && !strcmp(argv[3], "packed");
    infer__kernels ks[INFER__ISA_COUNT];
    int have[INFER__ISA_COUNT], isa, ti, r;
    float *xf;
    double *v;
    if (runs < 1 || n < 256 || n % 256) {
        fprintf(stderr, "usage: bench_kernels [runs] [n, a multiple of 256]\n");
        return 2;
    }
    xf = (float *)malloc((size_t)n * ROWS * sizeof(float));
    v = (double *)malloc((size_t)runs * sizeof(double));
    for (r = 0; r < n * ROWS; r++) xf[r] = frand();
    for (isa = 0; isa < INFER__ISA_COUNT; isa++) have[isa] = infer__kernels_install(&ks[isa], (infer__isa)isa);
    if (only_packed) goto packed;
    printf("vec_dot, one row of %d values (%d rows in cache), ns per row: mean +- stddev over %d runs\n", n, ROWS, runs);
    printf("%-8s", "format");
    for (isa = 0; isa < INFER__ISA_COUNT; isa++)
        if (have[isa]) printf(" %22s", infer__isa_name((infer__isa)isa));
    printf("   best speed-up\n");
    for (ti = 0; ti < (int)(sizeof weight_types / sizeof weight_types[0]); ti++) {
        infer_type t = weight_types[ti];
        const infer__type_traits *tt = infer__traits(t);
        infer_type vt = tt->vec_dot_type;
        size_t row = infer__row_size(t, n);
        uint8_t *w, *xq;
        double scalar_mean = 0, best = 0;
        if (!tt->vec_dot || !tt->quantize) continue;
        w = (uint8_t *)malloc(row * ROWS);
        xq = (uint8_t *)malloc((size_t)n * sizeof(float) + 64);
        for (r = 0; r < ROWS; r++) tt->quantize(xf + (size_t)r * n, w + (size_t)r * row, n);
        if (vt == INFER_TYPE_F32) memcpy(xq, xf, (size_t)n * sizeof(float));
        else ks[0].from_float[vt](xf, xq, n);
        printf("%-8s", tt->name);
        for (isa = 0; isa < INFER__ISA_COUNT; isa++) {
            double mean, sd;
            if (!have[isa]) continue;
            for (r = 0; r < runs; r++) v[r] = time_dot(ks[isa].vec_dot[t], n, w, row, xq);
            stats(v, runs, &mean, &sd);
            if (isa == 0) scalar_mean = mean;
            else if (!best || mean < best) best = mean;
            printf(" %12.1f +- %7.1f", mean, sd);
        }
        printf("   %6.1fx\n", best ? scalar_mean / best : 1.0);
        fflush(stdout);
        free(w);
        free(xq);
    }
    printf("\nfrom_float (activation quantizer), %d values, ns per row\n", n);
    for (ti = 0; ti < (int)(sizeof act_types / sizeof act_types[0]); ti++) {
        infer_type t = act_types[ti];
        uint8_t *out = (uint8_t *)malloc((size_t)n * sizeof(float));
        double scalar_mean = 0, best = 0;
        printf("%-8s", infer_type_name(t));
        for (isa = 0; isa < INFER__ISA_COUNT; isa++) {
            double mean, sd;
            if (!have[isa]) continue;
            for (r = 0; r < runs; r++) v[r] = time_quant(ks[isa].from_float[t], xf, out, n);
            stats(v, runs, &mean, &sd);
            if (isa == 0) scalar_mean = mean;
            else if (!best || mean < best) best = mean;
            printf(" %12.1f +- %7.1f", mean, sd);
        }
        printf("   %6.1fx\n", best ? scalar_mean / best : 1.0);
        free(out);
    }
packed:
    for (isa = INFER__ISA_COUNT - 1; isa > 0; isa--)
        if (have[isa]) {
            bench_packed(&ks[isa], runs < 3 ? runs : 3);
            break;
        }
    free(xf);
    free(v);
    return 0;
}

/* cuda_formats.c - the CUDA backend on every weight format it reads, the
   ones no model in ../shared has (IQ4_XS; F32, BF16 and the 32-value
   formats at dim 256) included: synth-256-f16's weights are converted in
   memory to one format, then the same model runs on the CPU and on the
   GPU, and their logits must agree within the reference tests'
   tolerances. Uses the implementation's internals (a private copy with
   INFER_CUDA, its GPU calls going to the linked backend: the real one in a
   CUDA build as test_cuda_formats, tests/cuda_emu.h's CPU emulation
   elsewhere as test_cuda_formats_emu). Skips without a GPU. */
#define INFER_CUDA
#include "infer_private.h"

#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include "testutil.h"

typedef struct format_case {
    infer_type type;
    float tol; /* share of the logit range */
} format_case;

/* Every 2-D weight of m converted to format t (through floats); the new
   bytes are owned by *keep. */
static void convert(infer_model *m, infer_type t, void ***keep, int *n_keep) {
    int64_t i;
    const infer__type_traits *to = infer__traits(t);
    *keep = (void **)calloc((size_t)m->gguf->n_tensors, sizeof(void *));
    *n_keep = 0;
    for (i = 0; i < m->gguf->n_tensors; i++) {
        infer__tensor *w = &m->gguf->tensors[i];
        int64_t r, n = w->ne[0];
        size_t row = infer__row_size(t, n);
        float *f;
        uint8_t *out;
        if (w->n_dims != 2) continue;
        cr_assert(n % to->block_size == 0, "%s: rows of %lld do not fit %s", w->name, (long long)n, to->name);
        f = (float *)malloc(sizeof(float) * (size_t)n);
        out = (uint8_t *)malloc(row * (size_t)w->ne[1]);
        for (r = 0; r < w->ne[1]; r++) {
            infer__traits(w->type)->to_float((const uint8_t *)w->data + (size_t)r * infer__row_size(w->type, n), f, n);
            to->quantize(f, out + (size_t)r * row, n);
        }
        free(f);
        w->data = out;
        w->type = t;
        w->nbytes = row * (size_t)w->ne[1];
        (*keep)[(*n_keep)++] = out;
    }
}

/* The k largest entries of l (ids, descending). */
static void top_k(const float *l, int nv, int k, int *ids) {
    int i, j;
    for (i = 0; i < k; i++) ids[i] = -1;
    for (j = 0; j < nv; j++) {
        for (i = k; i > 0 && (ids[i - 1] < 0 || l[j] > l[ids[i - 1]]); i--)
            if (i < k) ids[i] = ids[i - 1];
        if (i < k) ids[i] = j;
    }
}

/* As test_cuda.c: the CPU's top 16 ids and the GPU's top 8, each within
   tol of the CPU row's logit range; returns the worst share. */
static double compare(const float *c, const float *g, int nv, float tol, const char *name, int pos) {
    float lo = c[0], hi = c[0];
    double worst = 0;
    int ids[24], j;
    for (j = 1; j < nv; j++) lo = fminf(lo, c[j]), hi = fmaxf(hi, c[j]);
    top_k(c, nv, 16, ids);
    top_k(g, nv, 8, ids + 16);
    for (j = 0; j < 24; j++) {
        double d = fabs((double)g[ids[j]] - c[ids[j]]) / (hi - lo);
        cr_assert(isfinite(g[ids[j]]), "%s: position %d, token %d: GPU logit %f", name, pos, ids[j], g[ids[j]]);
        if (d > worst) worst = d;
    }
    cr_expect(worst <= tol, "%s: position %d: GPU and CPU differ by %.2f%% of the logit range (limit %.0f%%)", name, pos,
              100 * worst, 100 * tol);
    return worst;
}

ParameterizedTestParameters(cuda_formats, format) {
    static format_case cases[] = {
        {INFER_TYPE_F32, 0.01f},   {INFER_TYPE_F16, 0.01f},   {INFER_TYPE_BF16, 0.01f}, {INFER_TYPE_Q8_0, 0.01f},
        {INFER_TYPE_Q4_0, 0.03f},  {INFER_TYPE_Q4_1, 0.03f},  {INFER_TYPE_Q5_0, 0.03f}, {INFER_TYPE_Q5_1, 0.03f},
        {INFER_TYPE_IQ4_NL, 0.03f}, {INFER_TYPE_Q2_K, 0.05f}, {INFER_TYPE_Q3_K, 0.05f}, {INFER_TYPE_Q4_K, 0.03f},
        {INFER_TYPE_Q5_K, 0.03f},  {INFER_TYPE_Q6_K, 0.03f},  {INFER_TYPE_IQ4_XS, 0.03f}, {INFER_TYPE_MXFP4, 0.03f},
    };
    return cr_make_param_array(format_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(format_case *fc, cuda_formats, format, .timeout = 600) {
    char path[512];
    infer_error err;
    infer_model *m;
    infer_context *cc, *gc;
    infer_context_params cp = infer_context_default_params();
    infer_model_params mp = infer_model_default_params();
    infer_token toks[9] = {1, 403, 407, 300, 12, 77, 250, 100, 5};
    void **keep;
    int n_keep, i, nv;
    double worst = 0, w;
    const char *name = infer__traits(fc->type)->name;
    snprintf(path, sizeof path, "%s/models/synth-256-f16.gguf", INFER_SHARED_DIR);
    if (!tu_have_shared()) cr_skip_test("../shared is absent: no model");
    {
        int n_dev;
        char msg[256];
        n_dev = infer_cuda_device_count(msg, sizeof msg);
        if (n_dev <= 0) cr_skip_test("no CUDA GPU on this machine: %s", msg);
    }
    mp.device = INFER_DEVICE_CPU;
    m = infer_model_load(path, &mp, &err);
    cr_assert_not_null(m, "%s", err.msg);
    nv = infer_model_n_vocab(m);
    convert(m, fc->type, &keep, &n_keep);
    /* the weights were packed at load in their first format: again, in this one */
    infer__weights_free(m);
    cr_assert(infer__weights_prepare(m, NULL, NULL, 0, &err), "%s", err.msg);
    cp.n_threads = 2;
    cp.n_ctx = 16;
    cp.n_batch = 4; /* the prompt in two batches */
    cc = infer_context_new(m, &cp, &err); /* before the upload: a CPU context */
    cr_assert_not_null(cc, "%s", err.msg);
    cr_assert(infer__model_place(m, INFER_DEVICE_CUDA, &err), "%s on the GPU: %s", name, err.msg);
    gc = infer_context_new(m, &cp, &err); /* after it: a GPU context */
    cr_assert_not_null(gc, "%s", err.msg);
    cr_assert(gc->gpu != NULL && cc->gpu == NULL);
    cr_assert_eq(infer_decode(cc, toks, 6, 1, &err), INFER_OK, "%s", err.msg);
    cr_assert_eq(infer_decode(gc, toks, 6, 1, &err), INFER_OK, "GPU: %s", err.msg);
    for (i = 0; i < 6; i++) {
        w = compare(infer_context_logits(cc, i), infer_context_logits(gc, i), nv, fc->tol, name, i);
        worst = w > worst ? w : worst;
    }
    for (i = 6; i < 9; i++) {
        cr_assert_eq(infer_decode(cc, &toks[i], 1, 0, &err), INFER_OK, "%s", err.msg);
        cr_assert_eq(infer_decode(gc, &toks[i], 1, 0, &err), INFER_OK, "GPU: %s", err.msg);
        w = compare(infer_context_logits(cc, -1), infer_context_logits(gc, -1), nv, fc->tol, name, i);
        worst = w > worst ? w : worst;
    }
    cr_log_info("%s: worst GPU-CPU difference %.3f%% of range (limit %.0f%%)", name, 100 * worst,
                100 * fc->tol);
    infer_context_free(cc);
    infer_context_free(gc);
    infer_model_free(m);
    for (i = 0; i < n_keep; i++) free(keep[i]);
    free(keep);
}

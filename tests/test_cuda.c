/* test_cuda.c - the CUDA backend against the CPU, and choosing the device.
   For every model in ../shared/models (and the arch/ llama variants with
   rope_freqs and tied output): each reference prompt (prompt and
   llama.cpp's greedy continuation, teacher-forced) runs on the CPU and on
   the GPU; every position's logits must agree within the reference tests'
   tolerances (a share of the CPU row's logit range, for the CPU's top 16
   ids and the GPU's top 8), the prompt in batches and the continuation one
   token at a time (the decode graph). The GPU tests skip, saying so, in a
   build without INFER_CUDA or on a machine without a GPU; the device
   selection test runs everywhere. The other architectures of ../shared/arch
   are refused by the backend, naming the features it lacks (auto: the CPU,
   with a warning). */
#define _XOPEN_SOURCE 700 /* setenv */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#ifndef INFER_TEST_CUDA_BUILD
#define INFER_TEST_CUDA_BUILD 0 /* tests/CMakeLists.txt sets 1 with -DINFER_CUDA=ON */
#endif
/* test_cuda_emu: the same tests, the GPU code run on the CPU by
   tests/cuda_emu.h, thousands of times slower: each reference's
   continuation is cut to a few tokens and the 1891-token ones are left to
   long_context below. */
#ifdef INFER_TEST_CUDA_EMULATED
#define MAX_CONTINUATION 4
#define SKIP_LONG_REFERENCES 1
#else
#define MAX_CONTINUATION 1000
#define SKIP_LONG_REFERENCES 0
#endif

/* The reference tests' tolerances, by the model's format suffix. */
static float tolerance_for(const char *model) {
    static const struct { const char *suffix; float tol; } t[] = {
        {"f32", 0.01f}, {"f16", 0.01f}, {"bf16", 0.01f}, {"q8_0", 0.01f}, {"q4_0", 0.03f},
        {"q4_1", 0.03f}, {"q5_0", 0.03f}, {"q5_1", 0.03f}, {"iq4_nl", 0.03f}, {"q4_k", 0.03f},
        {"q5_k", 0.03f}, {"q6_k", 0.03f}, {"q4_k_m", 0.03f}, {"q2_k", 0.05f}, {"q3_k", 0.05f},
        {"stories260K", 0.01f},
    };
    size_t i, n = strlen(model);
    for (i = 0; i < sizeof t / sizeof t[0]; i++) {
        size_t k = strlen(t[i].suffix);
        if (n >= k && !strcmp(model + n - k, t[i].suffix)) return t[i].tol;
    }
    return 0.01f;
}

static infer_model *load(const char *path, infer_device d, infer_error *err) {
    infer_model_params mp = infer_model_default_params();
    mp.device = d;
    return infer_model_load(path, &mp, err);
}

/* The model on the GPU, or a skip that says why not. */
static infer_model *load_gpu_or_skip(const char *path) {
    infer_error err;
    infer_model *m;
    if (!INFER_TEST_CUDA_BUILD) cr_skip_test("this build has no CUDA backend (configure with -DINFER_CUDA=ON)");
    m = load(path, INFER_DEVICE_CUDA, &err);
    if (!m && err.code == INFER_ERR_DEVICE && strstr(err.msg, "no CUDA GPU"))
        cr_skip_test("no CUDA GPU on this machine: %s", err.msg);
    cr_assert_not_null(m, "%s on the GPU: %s", path, err.msg);
    cr_assert_eq(infer_model_device(m), INFER_DEVICE_CUDA);
    return m;
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

/* GPU row g against CPU row c; returns the worst difference as a share of
   the CPU row's range. */
static double compare_row(const float *c, const float *g, int nv, float tol, const char *what, int pos) {
    int ids[24], i;
    float lo = c[0], hi = c[0];
    double worst = 0;
    for (i = 1; i < nv; i++) lo = fminf(lo, c[i]), hi = fmaxf(hi, c[i]);
    top_k(c, nv, 16, ids);
    top_k(g, nv, 8, ids + 16);
    for (i = 0; i < 24; i++) {
        double diff = fabs((double)g[ids[i]] - c[ids[i]]) / (hi - lo);
        cr_assert(isfinite(g[ids[i]]), "%s: position %d, token %d: GPU logit %f", what, pos, ids[i], g[ids[i]]);
        if (diff > worst) worst = diff;
        cr_expect(diff <= tol, "%s: position %d, token %d: GPU %.5f vs CPU %.5f (%.2f%% of range, limit %.0f%%)", what,
                  pos, ids[i], g[ids[i]], c[ids[i]], 100 * diff, 100 * tol);
    }
    return worst;
}

static int argmax(const float *l, int nv) {
    int i, b = 0;
    for (i = 1; i < nv; i++)
        if (l[i] > l[b]) b = i;
    return b;
}

/* One reference file's tokens on both devices. */
static void compare_one(infer_model *cpu, infer_model *gpu, const char *ref_path, float tol) {
    size_t len;
    char *text = tu_read_file(ref_path, &len);
    tu_json *ref;
    const tu_json *ptoks, *gtoks;
    infer_token *toks;
    infer_context *cc, *gc;
    infer_context_params cp = infer_context_default_params();
    infer_error err;
    int np, ng, n, i, nv = infer_model_n_vocab(cpu);
    double worst = 0;
    cr_assert_not_null(text, "cannot read %s", ref_path);
    ref = tu_json_parse(text);
    free(text);
    cr_assert_not_null(ref, "cannot parse %s", ref_path);
    ptoks = tu_json_get(ref, "prompt_tokens");
    gtoks = tu_json_get(ref, "greedy_tokens");
    cr_assert(ptoks && gtoks, "%s lacks tokens", ref_path);
    np = ptoks->n;
    ng = gtoks->n < MAX_CONTINUATION ? gtoks->n : MAX_CONTINUATION;
    n = np + ng;
    toks = (infer_token *)malloc(sizeof *toks * (size_t)n);
    for (i = 0; i < np; i++) toks[i] = (infer_token)ptoks->items[i].num;
    for (i = 0; i < ng; i++) toks[np + i] = (infer_token)gtoks->items[i].num;

    cp.n_threads = 2;
    cp.n_ctx = n + 8;
    cc = infer_context_new(cpu, &cp, &err);
    cr_assert_not_null(cc, "%s", err.msg);
    /* the GPU's prompt in batches of 7: positions past the first batch
       start mid-cache */
    cp.n_batch = 7;
    gc = infer_context_new(gpu, &cp, &err);
    cr_assert_not_null(gc, "%s", err.msg);
    cr_assert_eq(infer_context_device(gc), INFER_DEVICE_CUDA);

    cr_assert_eq(infer_decode(cc, toks, np, 1, &err), INFER_OK, "%s", err.msg);
    cr_assert_eq(infer_decode(gc, toks, np, 1, &err), INFER_OK, "GPU: %s", err.msg);
    for (i = 0; i < np; i++) {
        double w = compare_row(infer_get_logits(cc, i), infer_get_logits(gc, i), nv, tol, ref_path, i);
        if (w > worst) worst = w;
    }
    /* the continuation one token at a time: the GPU replays its graph */
    for (i = np; i < n; i++) {
        const float *c, *g;
        double w;
        cr_assert_eq(infer_decode(cc, &toks[i], 1, 0, &err), INFER_OK, "%s", err.msg);
        cr_assert_eq(infer_decode(gc, &toks[i], 1, 0, &err), INFER_OK, "GPU: %s", err.msg);
        c = infer_get_logits(cc, -1);
        g = infer_get_logits(gc, -1);
        w = compare_row(c, g, nv, tol, ref_path, i);
        if (w > worst) worst = w;
        {
            int ids[2], bc = argmax(c, nv), bg = argmax(g, nv);
            float lo = c[0], hi = c[0];
            int j;
            for (j = 1; j < nv; j++) lo = fminf(lo, c[j]), hi = fmaxf(hi, c[j]);
            top_k(c, nv, 2, ids);
            if (c[ids[0]] - c[ids[1]] > 2 * tol * (hi - lo)) /* not a near-tie */
                cr_expect_eq(bg, bc, "%s: position %d: GPU's greedy choice %d, CPU's %d", ref_path, i, bg, bc);
        }
    }
    cr_log_info("%s: %d positions, worst GPU-CPU difference %.3f%% of range (limit %.0f%%)", ref_path, n,
                100 * worst, 100 * tol);
    infer_context_free(cc);
    infer_context_free(gc);
    free(toks);
    tu_json_free(ref);
}

static void compare_model(const char *dir, const char *file) {
    char path[1024], name[256], refdir[512], prefix[260], ref[1024];
    DIR *d;
    struct dirent *e;
    infer_error err;
    infer_model *cpu, *gpu;
    int n_refs = 0;
    snprintf(path, sizeof path, "%s/%s/%s", INFER_SHARED_DIR, dir, file);
    snprintf(name, sizeof name, "%.*s", (int)(strlen(file) - 5), file);
    gpu = load_gpu_or_skip(path);
    cpu = load(path, INFER_DEVICE_CPU, &err);
    cr_assert_not_null(cpu, "%s: %s", path, err.msg);
    snprintf(refdir, sizeof refdir, "%s/reference", INFER_SHARED_DIR);
    snprintf(prefix, sizeof prefix, "%s.", name);
    d = opendir(refdir);
    cr_assert_not_null(d, "cannot list %s", refdir);
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0) continue;
        if (SKIP_LONG_REFERENCES && strstr(e->d_name, ".long.")) continue;
        snprintf(ref, sizeof ref, "%s/%s", refdir, e->d_name);
        compare_one(cpu, gpu, ref, tolerance_for(name));
        n_refs++;
    }
    closedir(d);
    cr_expect_gt(n_refs, 0, "no reference files for %s", name);
    infer_model_free(cpu);
    infer_model_free(gpu);
}

static int is_gguf(const char *f) {
    size_t n = strlen(f);
    return n > 5 && !strcmp(f + n - 5, ".gguf");
}

typedef struct model_case {
    char dir[16];   /* models or arch */
    char file[112]; /* NAME.gguf; empty when ../shared is absent */
} model_case;

static void free_cases(struct criterion_test_params *p) { cr_free(p->params); }

/* Every model in ../shared/models, and the llama variants of arch/ with
   rope_freqs (Llama 3.1 RoPE factors) and a tied output (no output.weight). */
ParameterizedTestParameters(cuda, model) {
    char dir[512];
    DIR *d;
    struct dirent *e;
    model_case *cases;
    size_t n = 0, cap = 64;
    cases = (model_case *)cr_malloc(cap * sizeof *cases);
    memset(cases, 0, cap * sizeof *cases);
    snprintf(dir, sizeof dir, "%s/models", INFER_SHARED_DIR);
    d = opendir(dir);
    while (d && (e = readdir(d)) != NULL && n + 2 < cap)
        if (is_gguf(e->d_name) && strlen(e->d_name) < sizeof cases[0].file) {
            snprintf(cases[n].dir, sizeof cases[n].dir, "models");
            snprintf(cases[n].file, sizeof cases[n].file, "%s", e->d_name);
            n++;
        }
    if (d) closedir(d);
    if (n) {
        snprintf(cases[n].dir, sizeof cases[n].dir, "arch");
        snprintf(cases[n++].file, sizeof cases[0].file, "synth-llama3-f16.gguf");
        snprintf(cases[n].dir, sizeof cases[n].dir, "arch");
        snprintf(cases[n++].file, sizeof cases[0].file, "synth-llama-tied-f16.gguf");
    } else {
        n = 1; /* one case, to say it skips */
    }
    return cr_make_param_array(model_case, cases, n, free_cases);
}

ParameterizedTest(model_case *mc, cuda, model, .timeout = 900) {
    if (!tu_have_shared() || !mc->file[0]) cr_skip_test("../shared is absent: no models to compare");
    compare_model(mc->dir, mc->file);
}

/* Far into the context: attention over more keys than one warp's tile
   (every warp of a head busy, several tiles each, merged), for a prompt
   batch and for decode steps after it. */
Test(cuda, long_context, .timeout = 900) {
    char path[512];
    infer_model *cpu, *gpu;
    infer_context *cc, *gc;
    infer_context_params cp = infer_context_default_params();
    infer_error err;
    infer_token toks[146];
    double worst = 0, w;
    int i, nv;
    if (!tu_have_shared()) cr_skip_test("../shared is absent: no model");
    tu_shared_path(path, sizeof path, "models/stories260K.gguf");
    gpu = load_gpu_or_skip(path);
    cpu = load(path, INFER_DEVICE_CPU, &err);
    cr_assert_not_null(cpu, "%s", err.msg);
    nv = infer_model_n_vocab(cpu);
    for (i = 0; i < 146; i++) toks[i] = i == 0 ? 1 : 3 + (i * 37) % (nv - 3);
    cp.n_ctx = 160;
    cp.n_threads = 2;
    cc = infer_context_new(cpu, &cp, &err);
    gc = infer_context_new(gpu, &cp, &err);
    cr_assert(cc && gc, "%s", err.msg);
    /* 140 positions: 5 tiles of 32 keys, two for warp 0 */
    cr_assert_eq(infer_decode(cc, toks, 140, 1, &err), INFER_OK, "%s", err.msg);
    cr_assert_eq(infer_decode(gc, toks, 140, 1, &err), INFER_OK, "GPU: %s", err.msg);
    for (i = 0; i < 140; i++) {
        w = compare_row(infer_get_logits(cc, i), infer_get_logits(gc, i), nv, 0.01f, "stories260K long", i);
        worst = w > worst ? w : worst;
    }
    for (i = 140; i < 146; i++) {
        cr_assert_eq(infer_decode(cc, &toks[i], 1, 0, &err), INFER_OK, "%s", err.msg);
        cr_assert_eq(infer_decode(gc, &toks[i], 1, 0, &err), INFER_OK, "GPU: %s", err.msg);
        w = compare_row(infer_get_logits(cc, -1), infer_get_logits(gc, -1), nv, 0.01f, "stories260K long", i);
        worst = w > worst ? w : worst;
    }
    cr_log_info("stories260K, 146 positions: worst GPU-CPU difference %.3f%% of range", 100 * worst);
    infer_context_free(cc);
    infer_context_free(gc);
    infer_model_free(cpu);
    infer_model_free(gpu);
}

/* Two contexts of one GPU model keep separate caches, and truncating the
   cache then decoding again gives the first run's logits. */
Test(cuda, contexts_and_truncation) {
    char path[512];
    infer_model *m;
    infer_context *a, *b;
    infer_error err;
    infer_token toks[6] = {1, 400, 401, 402, 403, 404};
    float *first;
    int nv, i;
    if (!tu_have_shared()) cr_skip_test("../shared is absent: no model");
    tu_shared_path(path, sizeof path, "models/stories260K.gguf");
    m = load_gpu_or_skip(path);
    nv = infer_model_n_vocab(m);
    a = infer_context_new(m, NULL, &err);
    b = infer_context_new(m, NULL, &err);
    cr_assert(a && b, "%s", err.msg);
    for (i = 0; i < 6; i++) cr_assert_eq(infer_decode(a, &toks[i], 1, 0, &err), INFER_OK, "%s", err.msg);
    first = (float *)malloc(sizeof(float) * (size_t)nv);
    memcpy(first, infer_get_logits(a, -1), sizeof(float) * (size_t)nv);
    cr_assert_eq(infer_decode(b, toks, 6, 0, &err), INFER_OK, "%s", err.msg);
    for (i = 0; i < nv; i++) cr_assert_float_eq(infer_get_logits(b, -1)[i], first[i], 1e-3f + 1e-3f * fabsf(first[i]));
    infer_context_truncate(a, 3);
    for (i = 3; i < 6; i++) cr_assert_eq(infer_decode(a, &toks[i], 1, 0, &err), INFER_OK, "%s", err.msg);
    for (i = 0; i < nv; i++) cr_assert_float_eq(infer_get_logits(a, -1)[i], first[i], 1e-5f + 1e-5f * fabsf(first[i]));
    free(first);
    infer_context_free(a);
    infer_context_free(b);
    infer_model_free(m);
}

static int stop_after(void *user) { return --*(int *)user < 0; }

/* The abort callback stops a GPU prompt between layers: INFER_ERR_CANCELLED,
   nothing advanced, and the next decode gives the uncancelled logits; a
   GPU context refuses several sequences and shifting. */
Test(cuda, abort_between_layers) {
    char path[512];
    infer_model *m;
    infer_context *a, *b;
    infer_context_params p = infer_context_default_params();
    infer_error err;
    infer_token toks[6] = {1, 400, 401, 402, 403, 404};
    int left = 2, nv, i;
    if (!tu_have_shared()) cr_skip_test("../shared is absent: no model");
    tu_shared_path(path, sizeof path, "models/stories260K.gguf");
    m = load_gpu_or_skip(path);
    nv = infer_model_n_vocab(m);
    a = infer_context_new(m, NULL, &err);
    b = infer_context_new(m, NULL, &err);
    cr_assert(a && b, "%s", err.msg);
    infer_context_set_abort(a, stop_after, &left);
    cr_assert_eq(infer_decode(a, toks, 6, 0, &err), INFER_ERR_CANCELLED);
    cr_assert_eq(infer_context_n_past(a), 0);
    cr_assert_eq(left, -1, "asked before the pass and after each layer until it said stop");
    left = 1000;
    cr_assert_eq(infer_decode(a, toks, 6, 0, &err), INFER_OK, "%s", err.msg);
    cr_assert_eq(infer_decode(b, toks, 6, 0, &err), INFER_OK, "%s", err.msg);
    for (i = 0; i < nv; i++) cr_assert_eq(infer_get_logits(a, -1)[i], infer_get_logits(b, -1)[i]);
    p.n_seq = 2;
    cr_assert_null(infer_context_new(m, &p, &err));
    cr_assert_eq(err.code, INFER_ERR_UNSUPPORTED);
    infer_context_free(a);
    infer_context_free(b);
    infer_model_free(m);
}

/* What each device request does in this build on this machine. Runs
   everywhere: without CUDA, with CUDA and no GPU (CI), with a GPU. */
Test(cuda, device_selection) {
    char path[512];
    infer_error err;
    infer_model *m, *a;
    int have_gpu;
    if (!tu_have_shared()) cr_skip_test("../shared is absent: no model");
    tu_shared_path(path, sizeof path, "models/stories260K.gguf");
    unsetenv("INFER_DEVICE");

    m = load(path, INFER_DEVICE_CPU, &err);
    cr_assert_not_null(m, "%s", err.msg);
    cr_assert_eq(infer_model_device(m), INFER_DEVICE_CPU);
    cr_assert_null(infer_model_warning(m));
    infer_model_free(m);

    m = load(path, INFER_DEVICE_CUDA, &err);
    a = load(path, INFER_DEVICE_AUTO, &err);
    cr_assert_not_null(a, "auto must always load: %s", err.msg);
    have_gpu = m != NULL;
    if (!INFER_TEST_CUDA_BUILD) {
        cr_assert_null(m, "cuda in a build without CUDA");
        cr_assert_eq(err.code, INFER_ERR_UNSUPPORTED);
        cr_assert(strstr(err.msg, "this build has no CUDA backend") != NULL, "%s", err.msg);
        cr_assert_eq(infer_model_device(a), INFER_DEVICE_CPU);
        cr_assert_null(infer_model_warning(a), "auto without CUDA is the CPU, silently");
    } else if (!have_gpu) {
        infer_model *b = load(path, INFER_DEVICE_CUDA, &err);
        cr_assert_null(b);
        cr_assert_eq(err.code, INFER_ERR_DEVICE, "%s", err.msg);
        cr_assert(strstr(err.msg, "device cuda requested, but no CUDA GPU is present") != NULL, "%s", err.msg);
        cr_assert_eq(infer_model_device(a), INFER_DEVICE_CPU);
        cr_assert_not_null(infer_model_warning(a), "auto falling back must say so");
        cr_assert(strstr(infer_model_warning(a), "no CUDA GPU") && strstr(infer_model_warning(a), "running on the CPU"),
                  "%s", infer_model_warning(a));
        cr_assert_eq(strchr(infer_model_warning(a), '\n'), NULL, "one line");
        cr_log_info("auto without a GPU: %s", infer_model_warning(a));
    } else {
        cr_assert_eq(infer_model_device(m), INFER_DEVICE_CUDA);
        cr_assert_eq(infer_model_device(a), INFER_DEVICE_CUDA);
        cr_assert_null(infer_model_warning(a));
        cr_log_info("GPU: %s", infer_model_device_name(m));
    }
    infer_model_free(m);
    infer_model_free(a);

    /* INFER_DEVICE replaces auto (only auto) */
    setenv("INFER_DEVICE", "cpu", 1);
    a = load(path, INFER_DEVICE_AUTO, &err);
    cr_assert_not_null(a, "%s", err.msg);
    cr_assert_eq(infer_model_device(a), INFER_DEVICE_CPU);
    cr_assert_null(infer_model_warning(a));
    infer_model_free(a);
    setenv("INFER_DEVICE", "gpu", 1);
    a = load(path, INFER_DEVICE_AUTO, &err);
    if (INFER_TEST_CUDA_BUILD) {
        cr_assert_null(a, "INFER_DEVICE=gpu must be refused");
        cr_assert(strstr(err.msg, "INFER_DEVICE=gpu") != NULL, "%s", err.msg);
    }
    infer_model_free(a);
    unsetenv("INFER_DEVICE");

    cr_assert_str_eq(infer_device_name(INFER_DEVICE_CUDA), "cuda");
    cr_assert_eq(infer_device_from_name("auto"), INFER_DEVICE_AUTO);
    cr_assert_eq(infer_device_from_name("GPU"), -1);
}

static int count_char(const char *s, char c) {
    int n = 0;
    for (; *s; s++) n += *s == c;
    return n;
}

Test(cuda, cli_device_flag) {
    char model[512], cmd[2048];
    char *out;
    int st, i;
    const char *bad[] = {"run -m '%s' -p hi --device gpu", "info -m '%s' --device gpu", "bench -m '%s' --device gpu",
                         "chat -m '%s' --device gpu", "perplexity -m '%s' -f /dev/null --device gpu",
                         "eval -m '%s' --tokens 1 --device"};
    if (!tu_have_shared()) cr_skip_test("../shared is absent: no model");
    tu_shared_path(model, sizeof model, "models/stories260K.gguf");
    for (i = 0; i < (int)(sizeof bad / sizeof bad[0]); i++) {
        char args[1024];
        snprintf(args, sizeof args, bad[i], model);
        snprintf(cmd, sizeof cmd, "'%s' %s 2>&1 >/dev/null", INFER_CLI_PATH, args);
        out = tu_run(cmd, &st);
        cr_assert_not_null(out);
        cr_expect(st > 0 && st < 128, "infer %s: status %d", args, st);
        cr_expect_eq(count_char(out, '\n'), 1, "infer %s: stderr is not one line:\n%s", args, out);
        cr_expect(strstr(out, "--device") != NULL, "infer %s: error does not name --device: %s", args, out);
        free(out);
    }
    /* the CPU on request, said by info and bench */
    snprintf(cmd, sizeof cmd, "'%s' info -m '%s' --device cpu 2>/dev/null", INFER_CLI_PATH, model);
    out = tu_run(cmd, &st);
    cr_assert_eq(st, 0, "%s", out);
    cr_expect(strstr(out, "\ndevice: cpu\n") != NULL, "info does not say the device: %s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "'%s' bench -m '%s' -p 4 -n 2 -r 1 -o csv --device cpu 2>/dev/null", INFER_CLI_PATH, model);
    out = tu_run(cmd, &st);
    cr_assert_eq(st, 0, "%s", out);
    cr_expect(strstr(out, ",device,") && strstr(out, ",cpu,4,0,"), "bench does not say the device: %s", out);
    free(out);
    /* cuda: runs with a GPU; otherwise one clear line */
    snprintf(cmd, sizeof cmd, "'%s' run -m '%s' -p hi -n 2 --device cuda 2>&1 >/dev/null", INFER_CLI_PATH, model);
    out = tu_run(cmd, &st);
    cr_assert_not_null(out);
    /* a build without CUDA can never run there */
    if (!INFER_TEST_CUDA_BUILD) cr_expect_neq(st, 0, "--device cuda succeeded in a build without CUDA: %s", out);
    if (st != 0) {
        cr_expect_eq(count_char(out, '\n'), 1, "stderr is not one line:\n%s", out);
        cr_expect(strstr(out, "cuda") != NULL, "%s", out);
    }
    free(out);
}

/* The arch models beyond plain llama: the CUDA backend refuses each, by
   the features it lacks (cuda requested: an error; auto: the CPU, with a
   warning that says why), while the plain llama ones (rope_freqs, tied
   output) run on the GPU. The backend runs none of these features yet
   (infer_cuda.cu's INFER_CUDA_FEATURES): when it learns one, take it out
   of the lists below. */
Test(cuda, architectures, .timeout = 900) {
    static const struct {
        const char *model, *features; /* as backend.h names them, in its order */
    } refused[] = {
        {"qwen2", "NeoX RoPE, biases"},
        {"qwen3", "NeoX RoPE, q/k norms, query width != model width"},
        {"qwen3moe", "NeoX RoPE, q/k norms, experts"},
        {"gemma", "NeoX RoPE, GELU, scaled embeddings, an attention scale"},
        {"gemma2", "NeoX RoPE, post-norms, GELU, scaled embeddings, an attention scale, soft-capping, sliding windows"},
        {"gemma3", "NeoX RoPE, q/k norms, post-norms, GELU, scaled embeddings, an attention scale, sliding windows, "
                   "per-layer RoPE"},
        {"phi3", "NeoX RoPE, an attention scale"},
        {"smollm3", "per-layer RoPE"},
    };
    static const char *const plain[] = {"llama3", "llama-tied"};
    infer_token toks[4] = {1, 400, 401, 402};
    char path[512], rel[128], want[256];
    infer_context_params cp = infer_context_default_params();
    infer_error err;
    infer_model *m, *cpu;
    infer_context *c, *cc;
    size_t i;
    int j, nv;
    if (!tu_have_shared()) cr_skip_test("../shared is absent: no arch models");
    unsetenv("INFER_DEVICE");
    cp.n_ctx = 16;
    cp.n_threads = 2;
    for (i = 0; i < sizeof plain / sizeof plain[0]; i++) {
        snprintf(rel, sizeof rel, "arch/synth-%s-f16.gguf", plain[i]);
        tu_shared_path(path, sizeof path, rel);
        infer_model_free(load_gpu_or_skip(path)); /* skips without a GPU, as the other GPU tests */
        m = load(path, INFER_DEVICE_AUTO, &err);
        cr_assert_not_null(m, "%s: %s", plain[i], err.msg);
        cr_expect_eq(infer_model_device(m), INFER_DEVICE_CUDA, "%s with auto: %s", plain[i], infer_model_warning(m));
        cr_expect_null(infer_model_warning(m), "%s: %s", plain[i], infer_model_warning(m));
        cpu = load(path, INFER_DEVICE_CPU, &err);
        cr_assert_not_null(cpu, "%s: %s", plain[i], err.msg);
        c = infer_context_new(m, &cp, &err);
        cc = infer_context_new(cpu, &cp, &err);
        cr_assert(c && cc, "%s: %s", plain[i], err.msg);
        cr_expect_eq(infer_context_device(c), INFER_DEVICE_CUDA);
        cr_assert_eq(infer_decode(c, toks, 4, 1, &err), INFER_OK, "%s on the GPU: %s", plain[i], err.msg);
        cr_assert_eq(infer_decode(cc, toks, 4, 1, &err), INFER_OK, "%s: %s", plain[i], err.msg);
        nv = infer_model_n_vocab(m);
        for (j = 0; j < 4; j++) compare_row(infer_get_logits(cc, j), infer_get_logits(c, j), nv, 0.01f, path, j);
        infer_context_free(c);
        infer_context_free(cc);
        infer_model_free(cpu);
        infer_model_free(m);
    }
    for (i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        snprintf(rel, sizeof rel, "arch/synth-%s-f16.gguf", refused[i].model);
        tu_shared_path(path, sizeof path, rel);
        snprintf(want, sizeof want, "the model uses %s, which", refused[i].features);
        m = load(path, INFER_DEVICE_CUDA, &err);
        cr_expect_null(m, "%s ran on the GPU", refused[i].model);
        infer_model_free(m);
        cr_expect_eq(err.code, INFER_ERR_UNSUPPORTED, "%s: %s", refused[i].model, err.msg);
        cr_expect(strstr(err.msg, "device cuda: ") && strstr(err.msg, want), "%s: '%s' does not say '%s'",
                  refused[i].model, err.msg, want);
        cr_expect_null(strchr(err.msg, '\n'), "%s: one line", refused[i].model);
        /* auto: the CPU, saying why */
        m = load(path, INFER_DEVICE_AUTO, &err);
        cr_assert_not_null(m, "%s with auto: %s", refused[i].model, err.msg);
        cr_expect_eq(infer_model_device(m), INFER_DEVICE_CPU, "%s", refused[i].model);
        cr_assert_not_null(infer_model_warning(m), "%s: auto fell back to the CPU without a warning", refused[i].model);
        cr_expect(strstr(infer_model_warning(m), want) && strstr(infer_model_warning(m), "running on the CPU"),
                  "%s: warning '%s' does not say '%s'", refused[i].model, infer_model_warning(m), want);
        cr_expect_null(strchr(infer_model_warning(m), '\n'), "%s: one line", refused[i].model);
        c = infer_context_new(m, &cp, &err);
        cr_assert_not_null(c, "%s: %s", refused[i].model, err.msg);
        cr_expect_eq(infer_context_device(c), INFER_DEVICE_CPU);
        cr_expect_eq(infer_decode(c, toks, 4, 0, &err), INFER_OK, "%s on the CPU: %s", refused[i].model, err.msg);
        cr_log_info("%s with auto: %s", refused[i].model, infer_model_warning(m));
        infer_context_free(c);
        infer_model_free(m);
    }
}

/* Long prompts made visible, and contexts past the trained one: the
   progress callbacks of infer_decode (infer_context_set_progress) and of
   requests (infer_request_params.progress) report rising shares ending at
   1.0 and cancel when told to, the context then as it was; RoPE scaling
   asked for at loading (infer_model_params.rope_scaling) changes the
   positions' encoding as it should and refuses bad factors; the CLI warns
   when -c is past the trained context, unless scaling was asked for. On
   stories260K from ../shared (each test skips, saying so, without it). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "tests/status_calls.h"

#define MODEL "models/stories260K.gguf"

static infer_model *load(const infer_model_params *mp) {
    char path[1024];
    infer_error err;
    infer_model *m;
    if (!tu_have_shared()) cr_skip_test("../shared is absent: these tests need its stories260K");
    tu_shared_path(path, sizeof path, MODEL);
    m = infer_model_load(path, mp, &err);
    cr_assert(m, "%s", err.msg);
    return m;
}

static infer_context *ctx(infer_model *m, int n_batch) {
    infer_context_params p = infer_context_default_params();
    infer_error err;
    infer_context *c;
    p.n_ctx = 256, p.n_batch = n_batch, p.n_threads = 2;
    c = infer_context_new(m, &p, &err);
    cr_assert(c, "%s", err.msg);
    return c;
}

/* The shares reported, and the call (1 = first) at which to cancel (0: never). */
typedef struct shares {
    float got[64];
    int n, cancel_at;
} shares;

static int on_progress(float share, void *user) {
    shares *s = (shares *)user;
    if (s->n < 64) s->got[s->n] = share;
    s->n++;
    return s->cancel_at && s->n >= s->cancel_at;
}

static void check_rising(const shares *s, int calls) {
    int i;
    cr_assert_eq(s->n, calls, "%d progress calls, expected %d", s->n, calls);
    for (i = 1; i < s->n; i++) cr_assert_gt(s->got[i], s->got[i - 1], "share %d (%g) not above %g", i, s->got[i], s->got[i - 1]);
    cr_assert_gt(s->got[0], 0.0f);
    cr_assert_eq(s->got[s->n - 1], 1.0f, "the last share is %g", s->got[s->n - 1]);
}

static void prompt_tokens(infer_token *t, int n) {
    int i;
    for (i = 0; i < n; i++) t[i] = 1 + (i * 37) % 500;
}

Test(progress, decode_reports_each_pass_and_cancels) {
    infer_model *m = load(NULL);
    infer_context *c = ctx(m, 8), *fresh = ctx(m, 8);
    infer_token t[50];
    infer_error err;
    shares s;
    int nv = infer_model_n_vocab(m), i;
    prompt_tokens(t, 50);
    /* 50 tokens in passes of 8: 7 passes, 7 calls */
    memset(&s, 0, sizeof s);
    infer_context_set_progress(c, on_progress, &s);
    cr_assert_eq(infer_decode(c, t, 50, 0, &err), INFER_OK, "%s", err.msg);
    check_rising(&s, 7);
    /* one pass: no call */
    memset(&s, 0, sizeof s);
    cr_assert_eq(infer_decode(c, t, 8, 0, &err), INFER_OK, "%s", err.msg);
    cr_assert_eq(s.n, 0);
    /* cancelled at the third pass: nothing of the call stays */
    infer_seq_truncate(c, 0, 0, NULL, NULL);
    memset(&s, 0, sizeof s);
    s.cancel_at = 3;
    cr_assert_eq(infer_decode(c, t, 50, 0, &err), INFER_ERR_CANCELLED);
    cr_assert(tu_names_any(err.msg, "progress"), "%s", err.msg);
    cr_assert_eq(infer_seq_n_past(c, 0), 0);
    /* and the context works as a fresh one */
    infer_context_set_progress(c, NULL, NULL);
    cr_assert_eq(infer_decode(c, t, 50, 0, &err), INFER_OK, "%s", err.msg);
    cr_assert_eq(infer_decode(fresh, t, 50, 0, &err), INFER_OK, "%s", err.msg);
    for (i = 0; i < nv; i++) cr_assert_eq(infer_context_logits(c, -1)[i], infer_context_logits(fresh, -1)[i]);
    infer_context_free(c);
    infer_context_free(fresh);
    infer_model_free(m);
}

static infer_request *start(infer_context *c, const infer_token *t, int n, shares *s, infer_error *err) {
    infer_request_params p = infer_request_default_params();
    p.prompt_tokens = t, p.n_prompt_tokens = n;
    p.n_predict = 4;
    p.sampling.temperature = 0;
    p.progress = on_progress;
    p.progress_user = s;
    return infer_request_start(c, &p, err);
}

Test(progress, request_reports_its_prompt_and_cancels) {
    infer_model *m = load(NULL);
    infer_context *c = ctx(m, 8);
    infer_token t[60];
    infer_error err;
    infer_request *r;
    shares s;
    prompt_tokens(t, 60);
    memset(&s, 0, sizeof s);
    r = start(c, t, 60, &s, &err);
    cr_assert(r, "%s", err.msg);
    while (infer_context_step(c, 0)) {}
    cr_assert_eq(infer_request_status(r, &err), INFER_OK, "%s", err.msg);
    /* 60 tokens and BOS in chunks of 8: 8 chunks */
    check_rising(&s, 8);
    cr_assert_eq(sc_request_tokens(r, NULL, 0), 4);
    infer_request_free(r);
    /* told to stop at the second chunk: the request ends cancelled */
    memset(&s, 0, sizeof s);
    s.cancel_at = 2;
    r = start(c, t, 60, &s, &err);
    cr_assert(r, "%s", err.msg);
    while (infer_context_step(c, 0)) {}
    cr_assert_eq(infer_request_status(r, &err), INFER_ERR_CANCELLED);
    cr_assert(tu_names_any(err.msg, "progress"), "%s", err.msg);
    cr_assert_eq(s.n, 2);
    cr_assert_eq(sc_request_tokens(r, NULL, 0), 0);
    infer_request_free(r);
    infer_context_free(c);
    infer_model_free(m);
}

/* The last position's logits after t[0..n). */
static float *logits_after(infer_model *m, const infer_token *t, int n) {
    infer_context *c = ctx(m, 64);
    infer_error err;
    float *out = (float *)malloc(sizeof(float) * (size_t)infer_model_n_vocab(m));
    cr_assert_eq(infer_decode(c, t, n, 0, &err), INFER_OK, "%s", err.msg);
    memcpy(out, infer_context_logits(c, -1), sizeof(float) * (size_t)infer_model_n_vocab(m));
    infer_context_free(c);
    return out;
}

static double worst(const float *a, const float *b, int n) {
    double w = 0;
    int i;
    for (i = 0; i < n; i++) w = fmax(w, fabs((double)a[i] - b[i]));
    return w;
}

Test(progress, rope_scaling_at_loading) {
    infer_model_params mp = infer_model_default_params();
    infer_model *plain = load(NULL), *none, *linear, *yarn, *m;
    infer_token t[40];
    float *a, *b, *l, *y, *one_a, *one_l;
    char path[1024];
    infer_error err;
    int nv = infer_model_n_vocab(plain);
    prompt_tokens(t, 40);
    mp.rope_scaling = INFER_ROPE_SCALING_NONE;
    none = load(&mp);
    mp.rope_scaling = INFER_ROPE_SCALING_LINEAR, mp.rope_scale = 4;
    linear = load(&mp);
    mp.rope_scaling = INFER_ROPE_SCALING_YARN;
    yarn = load(&mp);
    a = logits_after(plain, t, 40), b = logits_after(none, t, 40);
    l = logits_after(linear, t, 40), y = logits_after(yarn, t, 40);
    /* stories260K's file asks for no scaling: none is the same model */
    cr_assert_eq(worst(a, b, nv), 0.0);
    /* scaled positions: other logits, each scaling its own */
    cr_assert_gt(worst(a, l, nv), 1e-3);
    cr_assert_gt(worst(a, y, nv), 1e-3);
    cr_assert_gt(worst(l, y, nv), 1e-3);
    /* position 0 turns by no angle: one token alone is the same under linear scaling */
    one_a = logits_after(plain, t, 1), one_l = logits_after(linear, t, 1);
    cr_assert_eq(worst(one_a, one_l, nv), 0.0);
    /* a factor below 1, or none, is refused at loading */
    tu_shared_path(path, sizeof path, MODEL);
    mp.rope_scaling = INFER_ROPE_SCALING_YARN, mp.rope_scale = 0;
    m = infer_model_load(path, &mp, &err);
    cr_assert_null(m);
    cr_assert_eq(err.code, INFER_ERR_ARG);
    cr_assert(tu_names_any(err.msg, "rope_scale"), "%s", err.msg);
    mp.rope_scaling = (infer_rope_scaling)9, mp.rope_scale = 2;
    m = infer_model_load(path, &mp, &err);
    cr_assert_null(m);
    cr_assert_eq(err.code, INFER_ERR_ARG);
    free(a), free(b), free(l), free(y), free(one_a), free(one_l);
    infer_model_free(plain), infer_model_free(none), infer_model_free(linear), infer_model_free(yarn);
}

/* stderr of `infer ARGS` (stdout dropped), and its exit status. */
static char *cli_stderr(const char *args, int *status) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' %s 2>&1 >/dev/null", INFER_CLI_PATH, args);
    return tu_run(cmd, status);
}

/* `infer run` on model path with flags fails with one line naming what. */
static void expect_one_line_error(const char *path, const char *flags, const char *what) {
    char args[1400];
    char *out;
    int status;
    snprintf(args, sizeof args, "run -m '%s' -p x %s", path, flags);
    out = cli_stderr(args, &status);
    cr_assert_neq(status, 0, "%s", flags);
    cr_assert(strstr(out, what) && strchr(out, '\n') == out + strlen(out) - 1, "%s: %s", flags, out);
    free(out);
}

Test(progress, cli_warns_past_the_trained_context) {
    infer_model *m = load(NULL);
    char path[1024], args[1400];
    char *out;
    int status, trained = infer_model_n_ctx_train(m);
    infer_model_free(m);
    tu_shared_path(path, sizeof path, MODEL);
    snprintf(args, sizeof args, "run -m '%s' -p 'Once upon' -n 2 -c %d", path, 2 * trained);
    out = cli_stderr(args, &status);
    cr_assert_eq(status, 0, "%s", out);
    cr_assert(strstr(out, "past the model's trained context"), "no warning for -c %d: %s", 2 * trained, out);
    cr_assert(strstr(out, "--rope-scale 2"), "the warning does not give the factor: %s", out);
    free(out);
    /* within it, or scaled: no warning */
    snprintf(args, sizeof args, "run -m '%s' -p 'Once upon' -n 2 -c %d", path, trained);
    out = cli_stderr(args, &status);
    cr_assert_eq(status, 0, "%s", out);
    cr_assert_null(strstr(out, "trained context"), "%s", out);
    free(out);
    snprintf(args, sizeof args, "run -m '%s' -p 'Once upon' -n 2 -c %d --rope-scaling yarn --rope-scale 2", path,
             2 * trained);
    out = cli_stderr(args, &status);
    cr_assert_eq(status, 0, "%s", out);
    cr_assert_null(strstr(out, "trained context"), "%s", out);
    free(out);
    /* bad values: one line, a failing status */
    expect_one_line_error(path, "--rope-scaling cubic", "--rope-scaling");
    expect_one_line_error(path, "--rope-scale 0.5", "--rope-scale");
    expect_one_line_error(path, "--rope-scaling linear", "rope_scale");
}

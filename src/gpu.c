/* gpu.c - where the forward pass runs. Every build has the CPU's (forward.c);
   one compiled with INFER_CUDA can also hand a model to infer_cuda.cu
   through backend.h: the weights are uploaded once at load, each context
   gets its KV cache (attention.c's layout, in device memory) and scratch
   on the GPU, and infer_decode's batches go to infer_cuda_forward instead
   of infer__forward. */
#include "context.h"

INFERDEF const char *infer_device_name(infer_device d) {
    switch (d) {
    case INFER_DEVICE_CPU: return "cpu";
    case INFER_DEVICE_CUDA: return "cuda";
    case INFER_DEVICE_AUTO: return "auto";
    }
    return "?";
}

INFERDEF int infer_device_from_name(const char *name) {
    if (!name) return -1;
    if (!strcmp(name, "cpu")) return INFER_DEVICE_CPU;
    if (!strcmp(name, "cuda")) return INFER_DEVICE_CUDA;
    if (!strcmp(name, "auto")) return INFER_DEVICE_AUTO;
    return -1;
}

INFERDEF infer_device infer_context_device(const infer_context *c) { return c->model->device; }

#ifdef INFER_CUDA

INFERDEF const char *infer_model_device_name(const infer_model *m) {
    return m->gpu ? infer_cuda_model_device_name(m->gpu) : "cpu";
}

/* Records why auto chose the CPU, after the vocabulary's own warning. */
static int infer__model_note(infer_model *m, const char *why, infer_error *err) {
    const char *vw = infer__vocab_warning(m->vocab);
    size_t n = strlen(why) + (vw ? strlen(vw) + 2 : 0) + 1;
    m->device_note = (char *)INFER_MALLOC(n);
    if (!m->device_note) {
        infer__set_error(err, INFER_ERR_NOMEM, "out of memory");
        return 0;
    }
    snprintf(m->device_note, n, "%s%s%s", vw ? vw : "", vw ? "; " : "", why);
    return 1;
}

static int infer__model_place(infer_model *m, infer_device want, infer_error *err) {
    const char *env = getenv("INFER_DEVICE");
    char msg[256], why[400];
    int rc;
    m->device = INFER_DEVICE_CPU;
    if (want == INFER_DEVICE_AUTO && env && *env) {
        int e = infer_device_from_name(env);
        if (e < 0) {
            infer__set_error(err, INFER_ERR_ARG, "INFER_DEVICE=%s is not cpu, cuda or auto", env);
            return 0;
        }
        want = (infer_device)e;
    }
    if (want == INFER_DEVICE_CPU) return 1;
    if (infer_cuda_device_count(msg, sizeof msg) <= 0) {
        if (want == INFER_DEVICE_CUDA) {
            infer__set_error(err, INFER_ERR_DEVICE, "device cuda requested, but no CUDA GPU is present (%s)", msg);
            return 0;
        }
        snprintf(why, sizeof why, "no CUDA GPU is present (%s); running on the CPU", msg);
        return infer__model_note(m, why, err);
    }
    rc = infer_cuda_model_new(m, &m->gpu, msg, sizeof msg);
    if (rc == INFER_BACKEND_OK) {
        m->device = INFER_DEVICE_CUDA;
        return 1;
    }
    m->gpu = NULL;
    if (want == INFER_DEVICE_CUDA) {
        infer__set_error(err, rc == INFER_BACKEND_UNSUPPORTED ? INFER_ERR_UNSUPPORTED : INFER_ERR_DEVICE,
                         "device cuda: %s", msg);
        return 0;
    }
    snprintf(why, sizeof why, "the CUDA backend cannot run this model (%s); running on the CPU", msg);
    return infer__model_note(m, why, err);
}

static void infer__model_unplace(infer_model *m) {
    if (m->gpu) infer_cuda_model_free(m->gpu);
    m->gpu = NULL;
}

static int infer__context_attach(infer_context *c, infer_error *err) {
    char msg[256];
    size_t bytes = 0;
    infer__rs_state rs;
    if (!c->model->gpu) return 1;
    rs.mem = c->rs, rs.slot = c->rs_slot, rs.at = c->rs_at, rs.n_seq = c->n_seq;
    if (infer_cuda_context_new(c->model->gpu, &c->kv, c->rs ? &rs : NULL, c->n_batch, c->match_llama, &c->gpu, &bytes,
                               msg, sizeof msg)) {
        c->gpu = NULL;
        infer__set_error(err, INFER_ERR_DEVICE, "CUDA context of %d tokens: %s", c->n_ctx, msg);
        return 0;
    }
    c->bytes += bytes;
    return 1;
}

static void infer__context_detach(infer_context *c) {
    if (c->gpu) infer_cuda_context_free(c->gpu);
    c->gpu = NULL;
}

static void *infer__kv_mem_alloc(void *gpu, size_t bytes) {
    char msg[256];
    return gpu ? infer_cuda_alloc(gpu, bytes, msg, sizeof msg) : infer__calloc_huge(bytes);
}

static void infer__kv_mem_free(void *gpu, void *p) {
    if (gpu) infer_cuda_free(gpu, p);
    else INFER_FREE(p);
}

static int infer__kv_mem_copy(void *gpu, void *dst, const void *src, size_t n, int kind) {
    char msg[256];
    if (!n) return 1;
    if (gpu) return infer_cuda_copy(gpu, dst, src, n, kind, msg, sizeof msg) == INFER_BACKEND_OK;
    memmove(dst, src, n);
    return 1;
}

INFERDEF double infer_model_device_bandwidth(const infer_model *m) {
    return m && m->gpu ? infer_cuda_bandwidth(m->gpu) : 0.0;
}

static int infer__backend_should_stop(void *c) { return infer__aborted((const infer_context *)c); }

/* The GPU's pass: the batch as backend.h describes it (each token's
   sequence and recurrent state slots from its run, RoPE's angles computed
   here as forward.c computes them). */
static infer_status infer__gpu_forward(infer_context *c, const infer_token *tokens, int n, int n_groups, int n_sel,
                                       float *logits, float *hidden, infer_error *err) {
    const infer_model *m = c->model;
    infer_backend_batch b;
    char msg[256];
    float *margin = NULL;
    int g, t, r, rc;
    for (g = 0; g < n_groups; g++)
        for (t = c->groups[g].start; t < c->groups[g].start + c->groups[g].n; t++) {
            c->seq_of[t] = c->groups[g].seq;
            if (c->rs_of) c->rs_of[t] = c->groups[g].rs_src, c->rs_of[c->n_batch + t] = c->groups[g].rs_dst;
        }
    for (t = 0; t < n; t++)
        for (r = 0; r < m->n_ropes; r++)
            infer__rope_angles(c->rope + ((size_t)t * m->n_ropes + r) * m->rope_dim, &m->ropes[r], c->rope_freqs[r],
                               c->pos[t]);
    memset(&b, 0, sizeof b);
    b.tokens = tokens, b.n = n, b.pos = c->pos, b.seq = c->seq_of, b.rope = c->rope;
    if (c->rs_of) b.rs_src = c->rs_of, b.rs_dst = c->rs_of + c->n_batch;
    b.n_sel = n_sel, b.sel = c->sel, b.logits = logits, b.hidden = hidden;
    b.should_stop = infer__backend_should_stop, b.stop_user = c;
    if (c->route.margin) { /* tests ask for routing margins */
        margin = (float *)INFER_MALLOC(sizeof(float) * (size_t)n);
        if (!margin) {
            infer__set_error(err, INFER_ERR_NOMEM, "out of memory for the routing margins");
            return INFER_ERR_NOMEM;
        }
        b.route_margin = margin;
    }
    rc = infer_cuda_forward(c->gpu, &b, msg, sizeof msg);
    if (margin && !rc)
        for (t = 0; t < n; t++) c->route.margin[c->pos[t]] = INFER__MIN(c->route.margin[c->pos[t]], margin[t]);
    INFER_FREE(margin);
    if (rc == INFER_BACKEND_CANCELLED) return INFER_ERR_CANCELLED;
    if (rc) {
        infer__set_error(err, INFER_ERR_DEVICE, "CUDA forward pass: %s", msg);
        return INFER_ERR_DEVICE;
    }
    return INFER_OK;
}

static infer_status infer__backend_forward(infer_context *c, const infer_token *tokens, int n, int n_groups, int n_sel,
                                           float *logits, float *hidden, infer_error *err) {
    if (c->gpu) return infer__gpu_forward(c, tokens, n, n_groups, n_sel, logits, hidden, err);
    return infer__forward(c, tokens, n, n_groups, n_sel, logits, hidden) ? INFER_ERR_CANCELLED : INFER_OK;
}

#else /* the CPU only */

INFERDEF const char *infer_model_device_name(const infer_model *m) {
    (void)m;
    return "cpu";
}
static int infer__model_place(infer_model *m, infer_device want, infer_error *err) {
    (void)want, (void)err; /* model.c has refused CUDA already */
    m->device = INFER_DEVICE_CPU;
    return 1;
}
static void infer__model_unplace(infer_model *m) { (void)m; }
static int infer__context_attach(infer_context *c, infer_error *err) {
    (void)c, (void)err;
    return 1;
}
static void infer__context_detach(infer_context *c) { (void)c; }
static void *infer__kv_mem_alloc(void *gpu, size_t bytes) {
    (void)gpu;
    return infer__calloc_huge(bytes);
}
static void infer__kv_mem_free(void *gpu, void *p) {
    (void)gpu;
    INFER_FREE(p);
}
static int infer__kv_mem_copy(void *gpu, void *dst, const void *src, size_t n, int kind) {
    (void)gpu, (void)kind;
    if (n) memmove(dst, src, n);
    return 1;
}
INFERDEF double infer_model_device_bandwidth(const infer_model *m) {
    (void)m;
    return 0.0;
}
static infer_status infer__backend_forward(infer_context *c, const infer_token *tokens, int n, int n_groups, int n_sel,
                                           float *logits, float *hidden, infer_error *err) {
    (void)err;
    return infer__forward(c, tokens, n, n_groups, n_sel, logits, hidden) ? INFER_ERR_CANCELLED : INFER_OK;
}

#endif

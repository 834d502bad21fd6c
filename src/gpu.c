/* gpu.c - where the forward pass runs. Every build has the CPU's (forward.c);
   one compiled with INFER_CUDA can also hand a model to infer_cuda.cu
   through backend.h: the weights are uploaded once at load, each context
   gets its KV cache and scratch on the GPU, and infer_decode's batches go
   to infer_cuda_forward instead of infer__forward. */
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

/* NULL (a weight the model does not have, such as an experts layer's dense
   FFN) gives an empty one; the features tell the backend why. */
static infer_backend_tensor infer__backend_tensor(const infer__tensor *t) {
    infer_backend_tensor b;
    memset(&b, 0, sizeof b);
    if (!t) return b;
    b.name = t->name;
    b.data = t->data;
    b.type = (int)t->type;
    b.ne0 = t->ne[0];
    b.ne1 = t->n_dims > 1 ? t->ne[1] : 1;
    b.nbytes = t->nbytes;
    return b;
}

/* The description's features beyond plain llama, as backend.h names them. */
static unsigned infer__model_features(const infer_model *m) {
    unsigned f = 0;
    int l;
    const infer__rope *r = &m->ropes[0];
    if (r->neox) f |= INFER_BACKEND_F_NEOX;
    if (m->act == INFER__ACT_GELU) f |= INFER_BACKEND_F_GELU;
    if (m->embd_scale > 0) f |= INFER_BACKEND_F_EMBD_SCALE;
    if (m->attn_scale_q || m->attn_scale != 1.0f / sqrtf((float)m->head_dim)) f |= INFER_BACKEND_F_ATTN_SCALE;
    if (m->attn_softcap > 0 || m->final_softcap > 0) f |= INFER_BACKEND_F_SOFTCAP;
    if (m->q_dim != m->dim) f |= INFER_BACKEND_F_WIDE_Q;
    if (r->freq_scale != 1.0f || r->ext_factor != 0.0f || r->attn_factor != 1.0f || r->freqs_long ||
        (r->freqs && r->freqs != m->rope_freqs))
        f |= INFER_BACKEND_F_ROPE_SCALING;
    for (l = 0; l < m->n_layers; l++) {
        const infer__layer *L = &m->layers[l];
        if (L->bq || L->bk || L->bv || L->bo) f |= INFER_BACKEND_F_QKV_BIAS;
        if (L->q_norm || L->k_norm) f |= INFER_BACKEND_F_QK_NORM;
        if (L->post_attn_norm || L->post_ffn_norm) f |= INFER_BACKEND_F_POST_NORMS;
        if (L->window) f |= INFER_BACKEND_F_SLIDING;
        if (L->ffn_router) f |= INFER_BACKEND_F_EXPERTS;
        if (L->rope != 0) f |= INFER_BACKEND_F_ROPE_LAYERS;
    }
    return f;
}

static int infer__model_place(infer_model *m, infer_device want, infer_error *err) {
    const char *env = getenv("INFER_DEVICE");
    infer_backend_model d;
    infer_backend_layer *layers;
    char msg[256], why[400];
    int l, rc;
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
    layers = (infer_backend_layer *)infer__calloc((size_t)m->n_layers, sizeof *layers);
    if (!layers) {
        infer__set_error(err, INFER_ERR_NOMEM, "out of memory");
        return 0;
    }
    memset(&d, 0, sizeof d);
    d.features = infer__model_features(m);
    d.n_vocab = m->n_vocab, d.dim = m->dim, d.n_layers = m->n_layers, d.n_heads = m->n_heads;
    d.n_kv_heads = m->n_kv_heads, d.head_dim = m->head_dim, d.ffn_dim = m->ffn_dim, d.rope_dim = m->rope_dim;
    d.rope_base = m->rope_base, d.norm_eps = m->norm_eps, d.rope_freqs = m->rope_freqs;
    d.tok_embd = infer__backend_tensor(m->tok_embd);
    d.output_norm = infer__backend_tensor(m->output_norm);
    d.output = infer__backend_tensor(m->output);
    d.output_is_tok_embd = m->output == m->tok_embd;
    for (l = 0; l < m->n_layers; l++) {
        const infer__layer *L = &m->layers[l];
        infer_backend_layer *B = &layers[l];
        B->attn_norm = infer__backend_tensor(L->attn_norm), B->ffn_norm = infer__backend_tensor(L->ffn_norm);
        B->wq = infer__backend_tensor(L->wq), B->wk = infer__backend_tensor(L->wk);
        B->wv = infer__backend_tensor(L->wv), B->wo = infer__backend_tensor(L->wo);
        B->w_gate = infer__backend_tensor(L->w_gate), B->w_up = infer__backend_tensor(L->w_up);
        B->w_down = infer__backend_tensor(L->w_down);
    }
    d.layers = layers;
    rc = infer_cuda_model_new(&d, &m->gpu, msg, sizeof msg);
    INFER_FREE(layers);
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
    if (!c->model->gpu) return 1;
    if (infer_cuda_context_new(c->model->gpu, c->n_ctx, c->n_batch, &c->gpu, &bytes, msg, sizeof msg)) {
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

static infer_status infer__backend_forward(infer_context *c, const infer_token *tokens, int n, int n_groups, int n_sel,
                                           float *logits, float *hidden, infer_error *err) {
    if (c->gpu) {
        /* one sequence: the rows from the first selected one on, then the selected ones packed */
        int first = n_sel ? c->sel[0] : n, j;
        char msg[256];
        (void)n_groups;
        if (hidden) {
            infer__set_error(err, INFER_ERR_UNSUPPORTED, "embeddings are not available on the GPU yet");
            return INFER_ERR_UNSUPPORTED;
        }
        int rc = infer_cuda_forward(c->gpu, tokens, n, c->pos[0], first, logits, c->abort_fn,
                                    c->abort_user, msg, sizeof msg);
        if (rc == INFER_BACKEND_CANCELLED) return INFER_ERR_CANCELLED;
        if (rc) {
            infer__set_error(err, INFER_ERR_DEVICE, "CUDA forward pass: %s", msg);
            return INFER_ERR_DEVICE;
        }
        for (j = 0; j < n_sel; j++)
            if (c->sel[j] - first != j)
                memmove(logits + (size_t)j * c->model->n_vocab, logits + (size_t)(c->sel[j] - first) * c->model->n_vocab,
                        (size_t)c->model->n_vocab * sizeof(float));
        return INFER_OK;
    }
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
static infer_status infer__backend_forward(infer_context *c, const infer_token *tokens, int n, int n_groups, int n_sel,
                                           float *logits, float *hidden, infer_error *err) {
    (void)err;
    return infer__forward(c, tokens, n, n_groups, n_sel, logits, hidden) ? INFER_ERR_CANCELLED : INFER_OK;
}

#endif

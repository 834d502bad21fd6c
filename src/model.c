/* model.c - a model: hyperparameters from GGUF metadata and the named
   weight tensors, checked for shape and format once, at load. */
#include "internal.h"

INFERDEF infer_model_params infer_model_default_params(void) {
    infer_model_params p;
    memset(&p, 0, sizeof p);
    p.device = INFER_DEVICE_AUTO;
    return p;
}

static const infer_vocab *infer__model_vocab(const infer_model *m) { return m->vocab; }

/* Finds a weight and checks its shape; ne1 = 0 for a vector. */
static const infer__tensor *infer__model_weight(infer_model *m, const char *name, int64_t ne0, int64_t ne1,
                                                int required, infer_error *err, int *ok) {
    const infer__tensor *t = infer__gguf_tensor(m->gguf, name);
    const infer__type_traits *tt;
    if (!*ok) return NULL;
    if (!t) {
        if (required) {
            infer__set_error(err, INFER_ERR_FORMAT, "model has no tensor %s", name);
            *ok = 0;
        }
        return NULL;
    }
    if (t->ne[0] != ne0 || (ne1 ? t->ne[1] != ne1 || t->n_dims != 2 : t->n_dims != 1)) {
        infer__set_error(err, INFER_ERR_FORMAT, "tensor %s has shape [%lld, %lld], expected [%lld, %lld]", name,
                         (long long)t->ne[0], (long long)t->ne[1], (long long)ne0, (long long)(ne1 ? ne1 : 1));
        *ok = 0;
        return NULL;
    }
    m->bound[t - m->gguf->tensors] = 1;
    tt = infer__traits(t->type);
    if (!tt->is_supported) {
        infer__set_error(err, INFER_ERR_UNSUPPORTED, "tensor %s: weight format %s is not supported", name, tt->name);
        *ok = 0;
        return NULL;
    }
    if (ne1 && ne0 % infer__traits(tt->vec_dot_type)->block_size != 0) {
        infer__set_error(err, INFER_ERR_FORMAT, "tensor %s: rows of %lld do not fit %s activation blocks", name,
                         (long long)ne0, infer__traits(tt->vec_dot_type)->name);
        *ok = 0;
        return NULL;
    }
    if (!ne1 && t->type != INFER_TYPE_F32) {
        infer__set_error(err, INFER_ERR_UNSUPPORTED, "tensor %s: norm weights must be F32, not %s", name, tt->name);
        *ok = 0;
        return NULL;
    }
    return t;
}

/* Reads {arch}.suffix as an integer into *out; required ones must exist. */
static int infer__model_hparam(infer_model *m, const char *suffix, int *out, int required, infer_error *err) {
    char key[128];
    int64_t v;
    snprintf(key, sizeof key, "%s.%s", m->arch, suffix);
    if (!infer__gguf_get_int(m->gguf, key, &v)) {
        if (!required) return 1;
        infer__set_error(err, INFER_ERR_FORMAT, "model metadata lacks %s", key);
        return 0;
    }
    if (v <= 0 || v > (1 << 24)) {
        infer__set_error(err, INFER_ERR_FORMAT, "model metadata %s = %lld is out of range", key, (long long)v);
        return 0;
    }
    *out = (int)v;
    return 1;
}

static int infer__model_load_hparams(infer_model *m, infer_error *err) {
    char key[128];
    double f;
    infer__str arch;
    if (!infer__gguf_get_str(m->gguf, "general.architecture", &arch)) {
        infer__set_error(err, INFER_ERR_FORMAT, "model metadata lacks general.architecture");
        return 0;
    }
    if (arch.n >= sizeof m->arch) arch.n = sizeof m->arch - 1;
    memcpy(m->arch, arch.p, (size_t)arch.n);
    m->arch[arch.n] = 0;
    if (strcmp(m->arch, "llama") != 0) {
        infer__set_error(err, INFER_ERR_UNSUPPORTED, "model architecture '%s' is not supported (supported: llama)",
                         m->arch);
        return 0;
    }
    if (!infer__model_hparam(m, "embedding_length", &m->dim, 1, err) ||
        !infer__model_hparam(m, "block_count", &m->n_layers, 1, err) ||
        !infer__model_hparam(m, "attention.head_count", &m->n_heads, 1, err) ||
        !infer__model_hparam(m, "feed_forward_length", &m->ffn_dim, 1, err))
        return 0;
    m->n_kv_heads = m->n_heads;
    m->n_ctx_train = 2048;
    if (!infer__model_hparam(m, "attention.head_count_kv", &m->n_kv_heads, 0, err) ||
        !infer__model_hparam(m, "context_length", &m->n_ctx_train, 0, err))
        return 0;
    if (m->dim % m->n_heads != 0 || m->n_heads % m->n_kv_heads != 0) {
        infer__set_error(err, INFER_ERR_FORMAT, "model has %d heads and %d KV heads for dimension %d", m->n_heads,
                         m->n_kv_heads, m->dim);
        return 0;
    }
    m->head_dim = m->dim / m->n_heads;
    m->rope_dim = m->head_dim;
    if (!infer__model_hparam(m, "rope.dimension_count", &m->rope_dim, 0, err)) return 0;
    if (m->rope_dim > m->head_dim || m->rope_dim % 2) {
        infer__set_error(err, INFER_ERR_FORMAT, "rope dimension %d does not fit head size %d", m->rope_dim, m->head_dim);
        return 0;
    }
    m->rope_base = 10000.0f;
    snprintf(key, sizeof key, "%s.rope.freq_base", m->arch);
    if (infer__gguf_get_float(m->gguf, key, &f)) m->rope_base = (float)f;
    m->norm_eps = 1e-5f;
    snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", m->arch);
    if (infer__gguf_get_float(m->gguf, key, &f)) m->norm_eps = (float)f;
    return 1;
}

static int infer__model_bind_weights(infer_model *m, infer_error *err) {
    int ok = 1, l, kv_dim = m->n_kv_heads * m->head_dim;
    int64_t i;
    const infer__tensor *emb = infer__gguf_tensor(m->gguf, "token_embd.weight");
    m->bound = (unsigned char *)infer__calloc((size_t)m->gguf->n_tensors, 1);
    if (!m->bound) {
        infer__set_error(err, INFER_ERR_NOMEM, "out of memory");
        return 0;
    }
    if (!emb || emb->n_dims != 2) {
        infer__set_error(err, INFER_ERR_FORMAT, "model has no 2-D tensor token_embd.weight");
        return 0;
    }
    m->n_vocab = (int)emb->ne[1];
    if (m->n_vocab != infer__vocab_n_tokens(m->vocab)) {
        infer__set_error(err, INFER_ERR_FORMAT, "token_embd.weight has %d rows but the vocabulary %d tokens",
                         m->n_vocab, infer__vocab_n_tokens(m->vocab));
        return 0;
    }
    m->tok_embd = infer__model_weight(m, "token_embd.weight", m->dim, m->n_vocab, 1, err, &ok);
    m->output_norm = infer__model_weight(m, "output_norm.weight", m->dim, 0, 1, err, &ok);
    m->output = infer__model_weight(m, "output.weight", m->dim, m->n_vocab, 0, err, &ok);
    if (!m->output) m->output = m->tok_embd; /* tied embeddings */
    {
        const infer__tensor *rf = infer__model_weight(m, "rope_freqs.weight", m->rope_dim / 2, 0, 0, err, &ok);
        m->rope_freqs = rf ? (const float *)rf->data : NULL;
    }
    /* every layer has its own tensors: a count the file cannot hold is a
       corrupt header, refused before allocating per-layer tables for it */
    if (m->n_layers > m->gguf->n_tensors) {
        infer__set_error(err, INFER_ERR_FORMAT, "model metadata claims %d layers but the file holds only %lld tensors",
                         m->n_layers, (long long)m->gguf->n_tensors);
        return 0;
    }
    m->layers = (infer__layer *)infer__calloc((size_t)m->n_layers, sizeof(infer__layer));
    if (!m->layers || !m->bound) {
        infer__set_error(err, INFER_ERR_NOMEM, "out of memory");
        return 0;
    }
    for (l = 0; l < m->n_layers && ok; l++) {
        infer__layer *L = &m->layers[l];
        char name[96];
#define INFER__W(field, suffix, ne0, ne1)                                      \
        snprintf(name, sizeof name, "blk.%d." suffix, l);                      \
        L->field = infer__model_weight(m, name, ne0, ne1, 1, err, &ok)
        INFER__W(attn_norm, "attn_norm.weight", m->dim, 0);
        INFER__W(wq, "attn_q.weight", m->dim, m->dim);
        INFER__W(wk, "attn_k.weight", m->dim, kv_dim);
        INFER__W(wv, "attn_v.weight", m->dim, kv_dim);
        INFER__W(wo, "attn_output.weight", m->dim, m->dim);
        INFER__W(ffn_norm, "ffn_norm.weight", m->dim, 0);
        INFER__W(w_gate, "ffn_gate.weight", m->dim, m->ffn_dim);
        INFER__W(w_up, "ffn_up.weight", m->dim, m->ffn_dim);
        INFER__W(w_down, "ffn_down.weight", m->ffn_dim, m->dim);
#undef INFER__W
    }
    /* a tensor the forward pass would ignore means a variant we do not
       implement (biases, extra norms): refuse rather than compute wrongly */
    for (i = 0; i < m->gguf->n_tensors && ok; i++)
        if (!m->bound[i]) {
            infer__set_error(err, INFER_ERR_UNSUPPORTED, "tensor %s is not part of the %s architecture as implemented",
                             m->gguf->tensors[i].name, m->arch);
            ok = 0;
        }
    return ok;
}

static infer_model *infer__model_from_gguf(infer_gguf *g, const infer_model_params *params, double t0,
                                           infer_error *err) {
    infer_model_params defaults = infer_model_default_params();
    infer_model *m;
    if (!g) return NULL;
    if (!params) params = &defaults;
#ifndef INFER_CUDA
    if (params->device == INFER_DEVICE_CUDA) {
        infer__set_error(err, INFER_ERR_UNSUPPORTED, "device cuda requested, but this build has no CUDA backend");
        infer_gguf_close(g);
        return NULL;
    }
#endif
    if (params->device != INFER_DEVICE_CPU && params->device != INFER_DEVICE_CUDA &&
        params->device != INFER_DEVICE_AUTO) {
        infer__set_error(err, INFER_ERR_ARG, "unknown device %d", (int)params->device);
        infer_gguf_close(g);
        return NULL;
    }
    m = (infer_model *)infer__calloc(1, sizeof *m);
    if (!m) {
        infer_gguf_close(g);
        infer__set_error(err, INFER_ERR_NOMEM, "out of memory");
        return NULL;
    }
    m->gguf = g;
    m->vocab = infer__vocab_load(g, err);
    if (!m->vocab) goto fail;
    m->n_vocab = infer__vocab_n_tokens(m->vocab);
    if (!params->vocab_only) {
        if (!g->has_data) {
            infer__set_error(err, INFER_ERR_FORMAT, "file ends before its tensor data (a vocab-only file?)");
            goto fail;
        }
        if (!infer__model_load_hparams(m, err) || !infer__model_bind_weights(m, err)) goto fail;
        if (!infer__model_place(m, params->device, err)) goto fail;
    }
    INFER_FREE(m->bound);
    m->bound = NULL;
    m->load_ms = infer__now_ms() - t0;
    return m;
fail:
    infer_model_free(m);
    return NULL;
}

INFERDEF infer_model *infer_model_load(const char *path, const infer_model_params *params, infer_error *err) {
    double t0 = infer__now_ms();
    return infer__model_from_gguf(infer_gguf_open(path, err), params, t0, err);
}

INFERDEF infer_model *infer_model_load_memory(const void *data, size_t size, const infer_model_params *params,
                                              infer_error *err) {
    double t0 = infer__now_ms();
    return infer__model_from_gguf(infer_gguf_open_memory(data, size, err), params, t0, err);
}

INFERDEF void infer_model_free(infer_model *m) {
    if (!m) return;
    infer__model_unplace(m);
    INFER_FREE(m->device_note);
    if (m->vocab) infer__vocab_free(m->vocab);
    INFER_FREE(m->layers);
    INFER_FREE(m->bound);
    infer_gguf_close(m->gguf);
    INFER_FREE(m);
}

INFERDEF const infer_gguf *infer_model_gguf(const infer_model *m) { return m->gguf; }
INFERDEF int infer_model_n_vocab(const infer_model *m) { return m->n_vocab; }
INFERDEF int infer_model_n_ctx_train(const infer_model *m) { return m->n_ctx_train; }
INFERDEF infer_token infer_model_bos(const infer_model *m) { return infer__vocab_bos(m->vocab); }
INFERDEF infer_token infer_model_eos(const infer_model *m) { return infer__vocab_eos(m->vocab); }
INFERDEF int infer_model_is_eog(const infer_model *m, infer_token t) { return infer__vocab_is_eog(m->vocab, t); }
INFERDEF int infer_model_add_bos(const infer_model *m) { return infer__vocab_add_bos(m->vocab); }
INFERDEF double infer_model_load_ms(const infer_model *m) { return m->load_ms; }
INFERDEF const char *infer_model_warning(const infer_model *m) {
    return m->device_note ? m->device_note : infer__vocab_warning(m->vocab);
}
INFERDEF infer_device infer_model_device(const infer_model *m) { return m->device; }

INFERDEF size_t infer_model_weight_bytes(const infer_model *m) {
    size_t n = 0;
    int64_t i;
    for (i = 0; i < m->gguf->n_tensors; i++) n += m->gguf->tensors[i].nbytes;
    return n;
}

INFERDEF int infer_model_describe(const infer_model *m, char *buf, size_t size) {
    if (!m->n_layers)
        return snprintf(buf, size, "vocabulary only: %d tokens", m->n_vocab);
    return snprintf(buf, size,
                    "%s: dim %d, %d layers, %d heads (%d KV, size %d), ffn %d, vocab %d, context %d, "
                    "rope base %g dims %d, rms eps %g",
                    m->arch, m->dim, m->n_layers, m->n_heads, m->n_kv_heads, m->head_dim, m->ffn_dim, m->n_vocab,
                    m->n_ctx_train, m->rope_base, m->rope_dim, m->norm_eps);
}

/* model.c - a model: hyperparameters from GGUF metadata and the named
   weight tensors, checked for shape and format once, at load. */
#include "internal.h"
#include "backend.h"

INFERDEF infer_model_params infer_model_default_params(void) {
    infer_model_params p;
    memset(&p, 0, sizeof p);
    p.device = INFER_DEVICE_AUTO;
    return p;
}

static const infer_vocab *infer__model_vocab(const infer_model *m) { return m->vocab; }

/* The size a shape symbol stands for in layer L of this model (NULL: the model's). */
static int64_t infer__model_size_of(const infer_model *m, const infer__layer *L, int d) {
    switch (d) {
    case INFER__D_DIM: return m->dim;
    case INFER__D_Q: return L ? L->q_dim : m->q_dim;
    case INFER__D_KV: return L ? L->kv_dim : m->kv_dim;
    case INFER__D_FFN: return L ? L->ffn_dim : m->ffn_dim;
    case INFER__D_HEAD: return L ? L->head_dim : m->head_dim;
    case INFER__D_EXPERTS: return m->n_expert;
    case INFER__D_EXPERT_FFN: return m->expert_ffn;
    case INFER__D_EXPERT_FFN2: return 2 * (int64_t)m->expert_ffn;
    case INFER__D_Q_OUT: return (m->q_gate ? 2 : 1) * (int64_t)(L ? L->q_dim : m->q_dim);
    case INFER__D_ONE: return 1;
    case INFER__D_CONV: return m->ssm_conv;
    case INFER__D_CONV_CH: return m->conv_ch;
    case INFER__D_REC_IN: return m->rec_in_dim;
    case INFER__D_INNER: return m->ssm_inner;
    case INFER__D_SSM_HEADS: return m->ssm_heads;
    case INFER__D_STATE: return m->ssm_state;
    case INFER__D_NORM_GROUP: return m->ssm_groups ? m->ssm_inner / m->ssm_groups : 0;
    case INFER__D_GROUPS: return m->ssm_groups;
    case INFER__D_HEADS: return m->n_heads;
    case INFER__D_PLE: return m->ple_dim;
    case INFER__D_ALTUP: return m->n_altup;
    case INFER__D_ALTUP2: return (int64_t)m->n_altup * m->n_altup;
    case INFER__D_LAUREL: return m->laurel_rank;
    }
    return 0;
}

/* Checks a weight the model uses: shape [ne0] (ne1 = 0), [ne0, ne1] or
   [ne0, ne1, ne2], format, and marks it bound. */
static const infer__tensor *infer__model_check(infer_model *m, const infer__tensor *t, int64_t ne0, int64_t ne1,
                                               int64_t ne2, infer_error *err, int *ok) {
    const infer__type_traits *tt;
    int dims = ne2 ? 3 : ne1 ? 2 : 1;
    if (!*ok) return NULL;
    if (t->n_dims != dims || t->ne[0] != ne0 || (dims > 1 && t->ne[1] != ne1) || (dims > 2 && t->ne[2] != ne2)) {
        if (dims == 3)
            infer__set_error(err, INFER_ERR_FORMAT,
                             "tensor %s has shape [%lld, %lld, %lld], expected [%lld, %lld, %lld] from the metadata",
                             t->name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)ne0,
                             (long long)ne1, (long long)ne2);
        else
            infer__set_error(err, INFER_ERR_FORMAT, "tensor %s has shape [%lld, %lld], expected [%lld, %lld] from the metadata",
                             t->name, (long long)t->ne[0], (long long)t->ne[1], (long long)ne0,
                             (long long)(ne1 ? ne1 : 1));
        *ok = 0;
        return NULL;
    }
    if (t >= m->gguf->tensors && t < m->gguf->tensors + m->gguf->n_tensors) m->bound[t - m->gguf->tensors] = 1;
    tt = infer__traits(t->type);
    if (!tt->is_supported) {
        infer__set_error(err, INFER_ERR_UNSUPPORTED, "tensor %s: weight format %s is not supported", t->name, tt->name);
        *ok = 0;
        return NULL;
    }
    /* the kernels read values and blocks' scales in place: a file with a
       smaller general.alignment than 4 (or a caller's buffer) must not
       put them at odd addresses */
    if ((uintptr_t)t->data % 4 != 0) {
        infer__set_error(err, INFER_ERR_FORMAT, "tensor %s: its data is not at a multiple of 4 bytes (general.alignment %llu)",
                         t->name, (unsigned long long)m->gguf->alignment);
        *ok = 0;
        return NULL;
    }
    if (dims > 1 && ne0 % infer__traits(tt->vec_dot_type)->block_size != 0) {
        infer__set_error(err, INFER_ERR_FORMAT, "tensor %s: rows of %lld do not fit %s activation blocks", t->name,
                         (long long)ne0, infer__traits(tt->vec_dot_type)->name);
        *ok = 0;
        return NULL;
    }
    if (dims == 1 && t->type != INFER_TYPE_F32) {
        infer__set_error(err, INFER_ERR_UNSUPPORTED, "tensor %s: norm weights and biases must be F32, not %s", t->name,
                         tt->name);
        *ok = 0;
        return NULL;
    }
    return t;
}

/* Finds a weight by name and checks it; NULL (an error if required) when absent. */
static const infer__tensor *infer__model_weight(infer_model *m, const char *name, int64_t ne0, int64_t ne1,
                                                int required, infer_error *err, int *ok) {
    const infer__tensor *t = infer__gguf_tensor(m->gguf, name);
    if (!*ok) return NULL;
    if (!t) {
        if (required) {
            infer__set_error(err, INFER_ERR_FORMAT, "model has no tensor %s", name);
            *ok = 0;
        }
        return NULL;
    }
    return infer__model_check(m, t, ne0, ne1, 0, err, ok);
}

/* Reads {arch}.suffix as an integer into *out; required ones must exist.
   A key of another type (an array, a string) is an error, not a default. */
static int infer__model_hparam(infer_model *m, const char *suffix, int *out, int required, infer_error *err) {
    char key[128];
    int64_t v;
    snprintf(key, sizeof key, "%s.%s", m->arch, suffix);
    if (!infer__gguf_get_int(m->gguf, key, &v)) {
        if (infer__gguf_kv(m->gguf, key)) {
            infer__set_error(err, INFER_ERR_FORMAT, "model metadata %s is not a single integer", key);
            return 0;
        }
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

/* Reads {arch}.suffix as a float into *out (left alone when absent): it
   must be finite and, unless may_be_zero, positive. */
static int infer__model_fparam(infer_model *m, const char *suffix, float *out, int may_be_zero, infer_error *err) {
    char key[128];
    double f;
    snprintf(key, sizeof key, "%s.%s", m->arch, suffix);
    if (!infer__gguf_get_float(m->gguf, key, &f)) {
        if (!infer__gguf_kv(m->gguf, key)) return 1;
        infer__set_error(err, INFER_ERR_FORMAT, "model metadata %s is not a number", key);
        return 0;
    }
    /* NaN, the infinities, and tiny values whose reciprocals would be */
    if (!(f == f) || f > FLT_MAX || f < (may_be_zero ? 0.0 : FLT_MIN) || (f > 0 && f < FLT_MIN)) {
        infer__set_error(err, INFER_ERR_FORMAT, "model metadata %s = %g is out of range", key, f);
        return 0;
    }
    *out = (float)f;
    return 1;
}

/* A hybrid's {arch}.attention.head_count_kv array: one count per layer, 0
   for a recurrent layer; the attention layers' counts must agree (one KV
   layout). Sets n_kv_heads and n_recurrent, and *is_array; a single
   integer is left to the caller. */
static int infer__model_kv_pattern(infer_model *m, int *is_array, infer_error *err) {
    char key[128];
    const infer__kv *kv;
    int l, kvh = 0;
    snprintf(key, sizeof key, "%s.attention.head_count_kv", m->arch);
    kv = infer__gguf_kv(m->gguf, key);
    *is_array = kv && kv->type == INFER_GGUF_TYPE_ARRAY;
    if (!*is_array) return 1;
    if (kv->arr_n != (uint64_t)m->n_layers) {
        infer__set_error(err, INFER_ERR_FORMAT, "model metadata %s has %llu values for %d layers", key,
                         (unsigned long long)kv->arr_n, m->n_layers);
        return 0;
    }
    for (l = 0; l < m->n_layers; l++) {
        int64_t v = -1;
        if (!infer__gguf_get_int_at(m->gguf, key, (uint64_t)l, &v) || v < 0 || v > m->n_heads) {
            infer__set_error(err, INFER_ERR_FORMAT, "model metadata %s[%d] is not a count of 0..%d heads", key, l, m->n_heads);
            return 0;
        }
        if (!v) {
            m->n_recurrent++;
        } else if (kvh && v != kvh) {
            infer__set_error(err, INFER_ERR_UNSUPPORTED, "model metadata %s: attention layers with %d and %lld KV heads",
                             key, kvh, (long long)v);
            return 0;
        } else {
            kvh = (int)v;
        }
    }
    m->n_kv_heads = kvh ? kvh : m->n_heads;
    return 1;
}

/* The recurrent layers' sizes: {arch}.ssm.* (LFM2: shortconv.l_cache),
   checked against each other, and the state a sequence keeps per layer. */
static int infer__model_ssm_hparams(infer_model *m, const infer__arch *a, infer_error *err) {
    if (a->recurrent == INFER__LAYER_SHORTCONV) {
        if (!infer__model_hparam(m, "shortconv.l_cache", &m->ssm_conv, 1, err)) return 0;
        m->conv_ch = m->dim;
        m->rec_in_dim = 3 * m->dim; /* b, c, x */
    } else {
        if (!infer__model_hparam(m, "ssm.conv_kernel", &m->ssm_conv, 1, err) ||
            !infer__model_hparam(m, "ssm.inner_size", &m->ssm_inner, 1, err) ||
            !infer__model_hparam(m, "ssm.state_size", &m->ssm_state, 1, err) ||
            !infer__model_hparam(m, "ssm.time_step_rank", &m->ssm_heads, 1, err) ||
            !infer__model_hparam(m, "ssm.group_count", &m->ssm_groups, 1, err))
            return 0;
        if (m->ssm_inner % m->ssm_heads || m->ssm_heads % m->ssm_groups || m->ssm_inner % m->ssm_groups) {
            infer__set_error(err, INFER_ERR_FORMAT,
                             "model metadata %s.ssm: inner size %d, %d heads and %d groups do not divide evenly", m->arch,
                             m->ssm_inner, m->ssm_heads, m->ssm_groups);
            return 0;
        }
        if (m->ssm_state > 1024 || m->ssm_inner > (1 << 16)) {
            infer__set_error(err, INFER_ERR_FORMAT, "model metadata %s.ssm: state %d or inner size %d is out of range",
                             m->arch, m->ssm_state, m->ssm_inner);
            return 0;
        }
        /* q, k: a state width per group; v: the inner width */
        m->conv_ch = m->ssm_inner + 2 * m->ssm_groups * m->ssm_state;
        if (a->recurrent == INFER__LAYER_DELTANET) {
            if (m->ssm_inner / m->ssm_heads != m->ssm_state) {
                infer__set_error(err, INFER_ERR_UNSUPPORTED,
                                 "model metadata %s.ssm: value heads of %d differ from key heads of %d", m->arch,
                                 m->ssm_inner / m->ssm_heads, m->ssm_state);
                return 0;
            }
            m->rec_in_dim = m->conv_ch;
            m->rs_ssm_floats = (size_t)m->ssm_heads * m->ssm_state * m->ssm_state;
        } else { /* Mamba2: z, xBC, dt */
            m->rec_in_dim = m->ssm_inner + m->conv_ch + m->ssm_heads;
            m->rs_ssm_floats = (size_t)m->ssm_inner * m->ssm_state;
        }
    }
    if (m->ssm_conv < 2 || m->ssm_conv > 16) {
        infer__set_error(err, INFER_ERR_FORMAT, "model metadata %s: a convolution of %d taps is out of range (2..16)",
                         m->arch, m->ssm_conv);
        return 0;
    }
    m->rs_conv_floats = (size_t)(m->ssm_conv - 1) * m->conv_ch;
    return 1;
}

/* Which layers attend and which are recurrent (the file's pattern). */
static int infer__model_layer_kinds(infer_model *m, const infer__arch *a, infer_error *err) {
    char key[128];
    int l, interval = 4;
    if (!a->recurrent) return 1;
    m->n_recurrent = 0;
    if (a->flags & INFER__A_ATTN_INTERVAL) {
        if (!infer__model_hparam(m, "full_attention_interval", &interval, 0, err)) return 0;
        for (l = 0; l < m->n_layers; l++)
            if ((l + 1) % interval) m->layers[l].kind = (infer__layer_kind)a->recurrent, m->n_recurrent++;
        return 1;
    }
    snprintf(key, sizeof key, "%s.attention.head_count_kv", m->arch);
    for (l = 0; l < m->n_layers; l++) {
        int64_t v = 1;
        infer__gguf_get_int_at(m->gguf, key, (uint64_t)l, &v); /* checked by infer__model_kv_pattern */
        if (!v) m->layers[l].kind = (infer__layer_kind)a->recurrent, m->n_recurrent++;
    }
    return 1;
}

/* RoPE scaling: {arch}.rope.scaling.* (type none, linear, yarn or
   longrope), as llama.cpp reads them; fills the global layers' RoPE. */
static int infer__model_rope_scaling(infer_model *m, infer__rope *r, infer_error *err) {
    char key[128];
    infer__str type;
    float factor = 0, attn_factor = 1, yarn_attn = 1, ext = -1;
    int yarn = 0, none = 0, orig = 0;
    snprintf(key, sizeof key, "%s.rope.scaling.type", m->arch);
    if (infer__gguf_get_str(m->gguf, key, &type)) {
#define INFER__IS(s) (type.n == sizeof(s) - 1 && !memcmp(type.p, s, sizeof(s) - 1))
        if (INFER__IS("yarn")) yarn = 1;
        else if (INFER__IS("none")) none = 1;
        else if (!INFER__IS("linear") && !INFER__IS("longrope")) {
            infer__set_error(err, INFER_ERR_UNSUPPORTED, "model metadata %s = '%.*s' is not supported (none, linear, yarn, longrope)",
                             key, (int)INFER__MIN(type.n, 32), type.p);
            return 0;
        }
#undef INFER__IS
    }
    if (!infer__model_fparam(m, "rope.scaling.factor", &factor, 1, err)) return 0;
    if (factor == 0 && !infer__model_fparam(m, "rope.scale_linear", &factor, 1, err)) return 0;
    if (!infer__model_fparam(m, "rope.scaling.attn_factor", &attn_factor, 0, err) ||
        !infer__model_fparam(m, "rope.scaling.yarn_attn_factor", &yarn_attn, 0, err) ||
        !infer__model_fparam(m, "rope.scaling.yarn_ext_factor", &ext, 1, err) ||
        !infer__model_fparam(m, "rope.scaling.yarn_beta_fast", &r->beta_fast, 0, err) ||
        !infer__model_fparam(m, "rope.scaling.yarn_beta_slow", &r->beta_slow, 0, err) ||
        !infer__model_hparam(m, "rope.scaling.original_context_length", &orig, 0, err))
        return 0;
    r->freq_scale = none || factor == 0 ? 1.0f : 1.0f / factor;
    r->ext_factor = ext >= 0 ? ext : yarn ? 1.0f : 0.0f;
    r->attn_factor = yarn_attn * attn_factor;
    r->n_ctx_orig = orig ? orig : m->n_ctx_train;
    return 1;
}

/* The caller's RoPE scaling over the file's (infer_model_params.rope_scaling):
   the global layers' only, as the file's (sliding layers see short ranges). */
static int infer__model_rope_override(infer_model *m, const infer_model_params *p, infer_error *err) {
    infer__rope *r = &m->ropes[0];
    if (p->rope_scaling == INFER_ROPE_SCALING_FILE) return 1;
    if (p->rope_scaling < INFER_ROPE_SCALING_FILE || p->rope_scaling > INFER_ROPE_SCALING_YARN) {
        infer__set_error(err, INFER_ERR_ARG, "rope_scaling %d is not one of infer_rope_scaling's", (int)p->rope_scaling);
        return 0;
    }
    if (p->rope_scaling != INFER_ROPE_SCALING_NONE && !(p->rope_scale >= 1.0f && p->rope_scale <= 1024.0f)) {
        infer__set_error(err, INFER_ERR_ARG, "rope_scale %g is outside 1..1024 (linear and YaRN scaling need a factor)",
                         (double)p->rope_scale);
        return 0;
    }
    r->freq_scale = p->rope_scaling == INFER_ROPE_SCALING_NONE ? 1.0f : 1.0f / p->rope_scale;
    r->ext_factor = p->rope_scaling == INFER_ROPE_SCALING_YARN ? 1.0f : 0.0f;
    r->attn_factor = 1.0f;
    return 1;
}

/* {arch}.suffix for layer l: one integer for all layers, or an array of
   one per layer (range-checked as infer__model_hparam's). */
static int infer__model_layer_hparam(infer_model *m, const char *suffix, int l, int *out, infer_error *err) {
    char key[128];
    const infer__kv *kv;
    int64_t v = 0;
    snprintf(key, sizeof key, "%s.%s", m->arch, suffix);
    kv = infer__gguf_kv(m->gguf, key);
    if (!kv || kv->type != INFER_GGUF_TYPE_ARRAY) return infer__model_hparam(m, suffix, out, 1, err);
    if (kv->arr_n != (uint64_t)m->n_layers || !infer__gguf_get_int_at(m->gguf, key, (uint64_t)l, &v) || v <= 0 ||
        v > (1 << 24)) {
        infer__set_error(err, INFER_ERR_FORMAT, "model metadata %s is not %d counts, one per layer", key, m->n_layers);
        return 0;
    }
    *out = (int)v;
    return 1;
}

/* Layer shapes that differ by layer (INFER__A_LAYER_SHAPES, Gemma 4):
   which layers slide (sliding_window_pattern, a flag per layer), their
   heads (key_length_swa, else key_length), KV heads and FFN widths (an
   array or one value), and the sliding layers' RoPE (rope.freq_base_swa,
   rope.dimension_count_swa). The model's shape becomes the largest. */
static int infer__model_layer_shapes(infer_model *m, infer_error *err) {
    char key[128];
    int hd_full = m->head_dim, hd_swa = 0, v_swa = 0, rot_swa = 0, l;
    infer__rope *swa = &m->ropes[1];
    if (!infer__model_hparam(m, "attention.key_length_swa", &hd_swa, 1, err) ||
        !infer__model_hparam(m, "attention.value_length_swa", &v_swa, 0, err))
        return 0;
    rot_swa = hd_swa;
    if (!infer__model_hparam(m, "rope.dimension_count_swa", &rot_swa, 0, err)) return 0;
    if ((v_swa && v_swa != hd_swa) || rot_swa > hd_swa || rot_swa % 2) {
        infer__set_error(err, INFER_ERR_FORMAT,
                         "model metadata %s: sliding layers' heads of %d keys, %d values and %d rotated do not fit", m->arch,
                         hd_swa, v_swa, rot_swa);
        return 0;
    }
    *swa = m->ropes[0];
    swa->n_rot = rot_swa;
    swa->freq_scale = 1.0f, swa->ext_factor = 0.0f, swa->attn_factor = 1.0f;
    if (!infer__model_fparam(m, "rope.freq_base_swa", &swa->base, 0, err)) return 0;
    m->n_ropes = 2;
    snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", m->arch);
    m->head_dim = m->q_dim = m->kv_dim = m->n_kv_heads = m->ffn_dim = 0;
    for (l = 0; l < m->n_layers; l++) {
        infer__layer *L = &m->layers[l];
        int slides = 0;
        if (!infer__gguf_get_bool_at(m->gguf, key, (uint64_t)l, &slides) &&
            (!infer__gguf_kv(m->gguf, key) || infer__gguf_kv(m->gguf, key)->arr_n != (uint64_t)m->n_layers)) {
            infer__set_error(err, INFER_ERR_FORMAT, "model metadata %s is not %d flags, one per layer", key, m->n_layers);
            return 0;
        }
        L->window = slides ? m->n_swa : 0;
        L->rope = slides ? 1 : 0;
        L->head_dim = slides ? hd_swa : hd_full;
        if (!infer__model_layer_hparam(m, "attention.head_count_kv", l, &L->n_kv_heads, err) ||
            !infer__model_layer_hparam(m, "feed_forward_length", l, &L->ffn_dim, err))
            return 0;
        if (L->n_kv_heads > m->n_heads || m->n_heads % L->n_kv_heads) {
            infer__set_error(err, INFER_ERR_FORMAT, "%s.attention.head_count %d is not a multiple of layer %d's %d KV heads",
                             m->arch, m->n_heads, l, L->n_kv_heads);
            return 0;
        }
        L->q_dim = m->n_heads * L->head_dim;
        L->kv_dim = L->n_kv_heads * L->head_dim;
        m->head_dim = INFER__MAX(m->head_dim, L->head_dim);
        m->q_dim = INFER__MAX(m->q_dim, L->q_dim);
        m->kv_dim = INFER__MAX(m->kv_dim, L->kv_dim);
        m->n_kv_heads = INFER__MAX(m->n_kv_heads, L->n_kv_heads);
        m->ffn_dim = INFER__MAX(m->ffn_dim, L->ffn_dim);
    }
    m->rope_dim = INFER__MAX(m->rope_dim, rot_swa);
    return 1;
}

static int infer__model_load_hparams(infer_model *m, const infer__arch *a, infer_error *err) {
    int k_len = 0, v_len = 0, kv_array = 0;
    infer__rope *r = &m->ropes[0];
    if (!infer__model_hparam(m, "embedding_length", &m->dim, 1, err) ||
        !infer__model_hparam(m, "block_count", &m->n_layers, 1, err) ||
        !infer__model_hparam(m, "attention.head_count", &m->n_heads, 1, err))
        return 0;
    /* every layer has its own tensors: a count the file cannot hold is a
       corrupt header, refused before allocating per-layer tables for it */
    if (m->n_layers > m->gguf->n_tensors) {
        infer__set_error(err, INFER_ERR_FORMAT, "model metadata %s.block_count = %d: more layers than the file's %lld tensors",
                         m->arch, m->n_layers, (long long)m->gguf->n_tensors);
        return 0;
    }
    m->layers = (infer__layer *)infer__calloc((size_t)m->n_layers, sizeof(infer__layer));
    if (!m->layers) {
        infer__set_error(err, INFER_ERR_NOMEM, "out of memory");
        return 0;
    }
    m->n_kv_heads = m->n_heads;
    m->n_ctx_train = 2048;
    if (!(a->flags & INFER__A_LAYER_SHAPES)) { /* else per layer: infer__model_layer_shapes */
        char key[128];
        const infer__kv *ff;
        snprintf(key, sizeof key, "%s.feed_forward_length", m->arch);
        ff = infer__gguf_kv(m->gguf, key);
        if (ff && ff->type == INFER_GGUF_TYPE_ARRAY) { /* one width per layer (Gemma 3n's files): the widest */
            int l;
            for (l = 0; l < m->n_layers; l++) {
                if (!infer__model_layer_hparam(m, "feed_forward_length", l, &m->layers[l].ffn_dim, err)) return 0;
                m->ffn_dim = INFER__MAX(m->ffn_dim, m->layers[l].ffn_dim);
            }
        } else if (!infer__model_hparam(m, "feed_forward_length", &m->ffn_dim, !(a->flags & INFER__A_MOE), err)) {
            return 0;
        }
        if ((a->flags & INFER__A_KV_PATTERN) && !infer__model_kv_pattern(m, &kv_array, err)) return 0;
        if (!kv_array && !infer__model_hparam(m, "attention.head_count_kv", &m->n_kv_heads, 0, err)) return 0;
    }
    if (!infer__model_hparam(m, "context_length", &m->n_ctx_train, 0, err) ||
        !infer__model_hparam(m, "attention.key_length", &k_len, 0, err) ||
        !infer__model_hparam(m, "attention.value_length", &v_len, 0, err))
        return 0;
    if (m->n_heads % m->n_kv_heads != 0) {
        infer__set_error(err, INFER_ERR_FORMAT, "%s.attention.head_count %d is not a multiple of head_count_kv %d",
                         m->arch, m->n_heads, m->n_kv_heads);
        return 0;
    }
    if (!k_len && m->dim % m->n_heads != 0) {
        infer__set_error(err, INFER_ERR_FORMAT, "%s.embedding_length %d is not a multiple of attention.head_count %d",
                         m->arch, m->dim, m->n_heads);
        return 0;
    }
    m->head_dim = k_len ? k_len : m->dim / m->n_heads;
    if (v_len && v_len != m->head_dim) {
        infer__set_error(err, INFER_ERR_UNSUPPORTED, "%s.attention.value_length %d differs from key_length %d",
                         m->arch, v_len, m->head_dim);
        return 0;
    }
    if ((int64_t)m->n_heads * m->head_dim > (1 << 20)) {
        infer__set_error(err, INFER_ERR_FORMAT, "%s.attention.head_count %d times heads of %d values is out of range",
                         m->arch, m->n_heads, m->head_dim);
        return 0;
    }
    m->q_dim = m->n_heads * m->head_dim;
    m->kv_dim = m->n_kv_heads * m->head_dim;
    m->rope_dim = m->head_dim;
    if (!infer__model_hparam(m, "rope.dimension_count", &m->rope_dim, 0, err)) return 0;
    if (m->rope_dim > m->head_dim || m->rope_dim % 2) {
        infer__set_error(err, INFER_ERR_FORMAT, "%s.rope.dimension_count %d does not fit heads of %d", m->arch,
                         m->rope_dim, m->head_dim);
        return 0;
    }
    m->rope_base = 10000.0f;
    m->norm_eps = 1e-5f;
    if (!infer__model_fparam(m, "rope.freq_base", &m->rope_base, 0, err) ||
        !infer__model_fparam(m, "attention.layer_norm_rms_epsilon", &m->norm_eps, 0, err))
        return 0;

    /* RoPE: the global layers' (with any scaling), and the sliding layers'
       where the architecture fixes their base */
    r->n_rot = m->rope_dim;
    r->neox = (a->flags & INFER__A_NEOX) != 0;
    r->base = m->rope_base;
    r->beta_fast = 32.0f;
    r->beta_slow = 1.0f;
    if (!infer__model_rope_scaling(m, r, err)) return 0;
    m->n_ropes = 1;
    if (a->swa_rope_base > 0) {
        m->ropes[1] = *r;
        m->ropes[1].base = a->swa_rope_base;
        if ((a->flags & INFER__A_ALTUP) && !infer__model_fparam(m, "rope.freq_base_swa", &m->ropes[1].base, 0, err))
            return 0;
        m->ropes[1].freq_scale = 1.0f;
        m->n_ropes = 2;
    }

    /* sliding window */
    if (a->swa_pattern || (a->flags & INFER__A_LAYER_SHAPES)) {
        char key[128];
        m->n_swa = a->swa_default;
        if (!infer__model_hparam(m, "attention.sliding_window", &m->n_swa, !a->swa_default, err)) return 0;
        if (m->n_swa > m->n_ctx_train) {
            snprintf(key, sizeof key, "%s.attention.sliding_window", m->arch);
            infer__set_error(err, INFER_ERR_FORMAT, "model metadata %s = %d is larger than %s.context_length %d", key,
                             m->n_swa, m->arch, m->n_ctx_train);
            return 0;
        }
    }

    if (a->flags & INFER__A_LAYER_SHAPES) {
        if (!infer__model_layer_shapes(m, err)) return 0;
    } else {
        int l;
        for (l = 0; l < m->n_layers; l++) {
            infer__layer *L = &m->layers[l];
            L->head_dim = m->head_dim, L->n_kv_heads = m->n_kv_heads;
            if (!L->ffn_dim) L->ffn_dim = m->ffn_dim; /* else the file's width for this layer */
            L->q_dim = m->q_dim, L->kv_dim = m->kv_dim;
        }
    }

    /* features */
    m->act = a->flags & INFER__A_GELU ? INFER__ACT_GELU
           : a->flags & INFER__A_SWIGLU_CLAMP ? INFER__ACT_SWIGLU_CLAMP : INFER__ACT_SILU;
    m->embd_scale = a->flags & INFER__A_EMBD_SCALE ? sqrtf((float)m->dim) : 0.0f;
    m->attn_scale_q = (a->flags & INFER__A_Q_SCALE) != 0;
    m->attn_scale = 1.0f / sqrtf((float)m->head_dim);
    /* Gemma 2 and 3 27B scale queries by 1/sqrt(dim / heads) (their
       query_pre_attn_scalar), told apart by their layer count as llama.cpp does */
    if ((!strcmp(m->arch, "gemma2") && m->n_layers == 46) || (!strcmp(m->arch, "gemma3") && m->n_layers == 62))
        m->attn_scale = 1.0f / sqrtf((float)(m->dim / m->n_heads));
    if (!infer__model_fparam(m, "attention.scale", &m->attn_scale, 0, err)) return 0;
    if (a->flags & INFER__A_SOFTCAP) {
        m->attn_softcap = 50.0f;
        m->final_softcap = 30.0f;
        if (!infer__model_fparam(m, "attn_logit_softcapping", &m->attn_softcap, 0, err) ||
            !infer__model_fparam(m, "final_logit_softcapping", &m->final_softcap, 0, err))
            return 0;
    }

    if (a->flags & INFER__A_FINAL_SOFTCAP) {
        m->final_softcap = 30.0f;
        if (!infer__model_fparam(m, "final_logit_softcapping", &m->final_softcap, 0, err)) return 0;
    }
    if (a->flags & INFER__A_UNSCALED) m->attn_scale = 1.0f, m->attn_scale_q = 0;
    m->v_norm = (a->flags & INFER__A_V_NORM) != 0;
    /* KV sharing: the layers from kv_from_start on keep no cache; it must
       leave a layer of each kind (sliding, global) to read from */
    m->n_layer_kv = a->kv_from_start ? INFER__MIN(a->kv_from_start, m->n_layers) : m->n_layers;
    {
        char key[128];
        int64_t shared = 0;
        snprintf(key, sizeof key, "%s.attention.shared_kv_layers", m->arch);
        if (!a->kv_from_start && infer__gguf_kv(m->gguf, key)) {
            if (!infer__gguf_get_int(m->gguf, key, &shared) || shared < 0 || shared >= m->n_layers) {
                infer__set_error(err, INFER_ERR_FORMAT, "model metadata %s is not a count of 0..%d layers", key,
                                 m->n_layers - 1);
                return 0;
            }
            m->n_layer_kv = m->n_layers - (int)shared;
        }
    }
    if (a->flags & INFER__A_ALTUP) { /* llama.cpp fixes these whatever the file says */
        m->n_altup = 4;
        m->altup_active = 0;
        m->laurel_rank = 64;
    }
    if (a->flags & INFER__A_PLE) { /* 0: none (Gemma 4's larger models) */
        char key[128];
        int64_t v = -1;
        snprintf(key, sizeof key, "%s.embedding_length_per_layer_input", m->arch);
        if (!infer__gguf_get_int(m->gguf, key, &v) || v < 0 || v > (1 << 16)) {
            infer__set_error(err, INFER_ERR_FORMAT, "model metadata %s is %s", key,
                             infer__gguf_kv(m->gguf, key) ? "out of range" : "missing");
            return 0;
        }
        m->ple_dim = (int)v;
    }
    if ((int64_t)m->ple_dim * m->n_layers > (1 << 24)) {
        infer__set_error(err, INFER_ERR_FORMAT, "%s.embedding_length_per_layer_input %d times %d layers is out of range",
                         m->arch, m->ple_dim, m->n_layers);
        return 0;
    }

    m->q_gate = (a->flags & INFER__A_Q_GATE) != 0;
    if (a->flags & INFER__A_GRANITE_SCALES) {
        float logit = 0;
        if (!infer__model_fparam(m, "embedding_scale", &m->embd_scale, 1, err) ||
            !infer__model_fparam(m, "residual_scale", &m->residual_scale, 1, err) ||
            !infer__model_fparam(m, "logit_scale", &logit, 1, err))
            return 0;
        if (logit > 0) m->logit_scale = 1.0f / logit;
    }
    if (a->recurrent && !infer__model_ssm_hparams(m, a, err)) return 0;

    /* experts: counts, the experts' FFN width, gating and normalisation */
    m->expert_ffn = m->ffn_dim;
    if (a->flags & (INFER__A_MOE | INFER__A_MOE_OPT)) {
        char key[128];
        /* gpt-oss's files name neither its gating nor its normalisation */
        int gating = a->flags & INFER__A_TOPK_SOFTMAX ? 3 : 1, required = (a->flags & INFER__A_MOE) != 0;
        int64_t v = -1;
        snprintf(key, sizeof key, "%s.expert_count", m->arch);
        /* present in any type (a float would not be read as a count: an error below) */
        infer__gguf_get_int(m->gguf, key, &v);
        if (infer__gguf_kv(m->gguf, key) || required) {
            if (v == 0) {
                infer__set_error(err, INFER_ERR_FORMAT, "model metadata %s = 0: an experts model needs experts", key);
                return 0;
            }
            if (!infer__model_hparam(m, "expert_count", &m->n_expert, 1, err) ||
                !infer__model_hparam(m, "expert_used_count", &m->n_expert_used, 1, err) ||
                !infer__model_hparam(m, "expert_feed_forward_length", &m->expert_ffn, 0, err) ||
                !infer__model_hparam(m, "expert_gating_func", &gating, 0, err))
                return 0;
            if (!m->expert_ffn) {
                infer__set_error(err, INFER_ERR_FORMAT, "model metadata lacks %s.expert_feed_forward_length", m->arch);
                return 0;
            }
            if (m->n_expert > 512) {
                infer__set_error(err, INFER_ERR_FORMAT, "model metadata %s = %d is out of range (at most 512)", key,
                                 m->n_expert);
                return 0;
            }
            if (m->n_expert_used > m->n_expert) {
                infer__set_error(err, INFER_ERR_FORMAT, "model metadata %s.expert_used_count %d exceeds expert_count %d",
                                 m->arch, m->n_expert_used, m->n_expert);
                return 0;
            }
            if (gating != 1 && gating != 3) {
                infer__set_error(err, INFER_ERR_UNSUPPORTED,
                                 "model metadata %s.expert_gating_func = %d is not supported (1 softmax, 3 softmax of the chosen)",
                                 m->arch, gating);
                return 0;
            }
            m->gating = gating == 3 ? INFER__GATING_SOFTMAX_TOPK : INFER__GATING_SOFTMAX;
            m->expert_norm = !(a->flags & INFER__A_TOPK_SOFTMAX);
            snprintf(key, sizeof key, "%s.expert_weights_norm", m->arch);
            infer__gguf_get_bool(m->gguf, key, &m->expert_norm);
        }
    }

    return 1;
}

/* A row view of a fused tensor: rows [r0, r0 + rows) of t, as a tensor of its own. */
static const infer__tensor *infer__model_view(infer_model *m, const infer__tensor *t, int64_t r0, int64_t rows,
                                              const char *part) {
    infer__tensor *v = &m->views[m->n_views++];
    size_t row = infer__row_size(t->type, t->ne[0]);
    char name[160];
    *v = *t;
    snprintf(name, sizeof name, "%s[%s]", t->name, part);
    v->name = infer__strndup(name, strlen(name));
    v->ne[1] = rows;
    v->offset = t->offset + (uint64_t)r0 * row;
    v->nbytes = (size_t)rows * row;
    v->data = (const uint8_t *)t->data + (size_t)r0 * row;
    return v;
}

/* Binds one layer's tensors from the table: which are there, their shapes,
   fused tensors split into views. */
static void infer__model_bind_layer(infer_model *m, const infer__arch *a, int l, infer_error *err, int *ok) {
    infer__layer *L = &m->layers[l];
    const infer__tensor *qkv = NULL, *up = NULL, *gate;
    char name[96];
    int i, n_specs, moe = (a->flags & INFER__A_MOE) != 0, fused_ffn = 0, fused_exps = 0, shares_kv = l >= m->n_layer_kv;
    const infer__tensor_spec *specs = infer__arch_layer_tensors(&n_specs);
    if (a->flags & INFER__A_MOE_OPT) {
        snprintf(name, sizeof name, "blk.%d.ffn_gate_inp.weight", l);
        moe = infer__gguf_tensor(m->gguf, name) != NULL;
        if (moe && !m->n_expert) {
            infer__set_error(err, INFER_ERR_FORMAT, "tensor %s is there but the metadata lacks %s.expert_count", name,
                             m->arch);
            *ok = 0;
            return;
        }
    }
    if (a->flags & INFER__A_FUSED) {
        snprintf(name, sizeof name, "blk.%d.attn_qkv.weight", l);
        if ((qkv = infer__gguf_tensor(m->gguf, name)) != NULL) {
            qkv = infer__model_check(m, qkv, m->dim, m->q_dim + 2 * m->kv_dim, 0, err, ok);
            if (!*ok) return;
            L->wq = infer__model_view(m, qkv, 0, m->q_dim, "q");
            L->wk = infer__model_view(m, qkv, m->q_dim, m->kv_dim, "k");
            L->wv = infer__model_view(m, qkv, m->q_dim + m->kv_dim, m->kv_dim, "v");
        }
        snprintf(name, sizeof name, "blk.%d.ffn_gate.weight", l);
        gate = infer__gguf_tensor(m->gguf, name);
        snprintf(name, sizeof name, "blk.%d.ffn_up.weight", l);
        up = infer__gguf_tensor(m->gguf, name);
        if (!moe && !gate && up && up->n_dims == 2 && up->ne[1] == 2 * (int64_t)m->ffn_dim) {
            up = infer__model_check(m, up, m->dim, 2 * (int64_t)m->ffn_dim, 0, err, ok);
            if (!*ok) return;
            L->w_gate = infer__model_view(m, up, 0, m->ffn_dim, "gate"); /* gate is the first half */
            L->w_up = infer__model_view(m, up, m->ffn_dim, m->ffn_dim, "up");
            fused_ffn = 1;
        }
    }
    if (moe) { /* Gemma 4's experts: gate and up fused, each expert's gate rows then its up rows */
        snprintf(name, sizeof name, "blk.%d.ffn_gate_up_exps.weight", l);
        if ((up = infer__gguf_tensor(m->gguf, name)) != NULL) {
            L->gate_exps = infer__model_check(m, up, m->dim, 2 * (int64_t)m->expert_ffn, m->n_expert, err, ok);
            if (!*ok) return;
            fused_exps = 1;
        }
    }
    for (i = 0; i < n_specs && *ok; i++) {
        const infer__tensor_spec *s = &specs[i];
        const infer__tensor **field = (const infer__tensor **)((char *)L + s->field);
        const infer__tensor *t;
        int required;
        if (s->kinds && !(s->kinds & (1u << L->kind))) continue; /* another kind of layer's */
        switch (s->when) {
        case INFER__T_ALWAYS: required = 1; break;
        case INFER__T_UNLESS:
            if (a->flags & s->flag) continue;
            required = 1;
            break;
        case INFER__T_OPTIONAL: required = 0; break;
        case INFER__T_FLAG:
            if (!(a->flags & s->flag)) continue; /* not part of this architecture: left unbound */
            if (s->flag == INFER__A_PLE && !m->ple_dim) continue; /* per-layer inputs of width 0: none */
            required = 1;
            break;
        case INFER__T_UNFUSED:
            if (qkv) continue;
            required = 1;
            break;
        case INFER__T_DENSE:
            if ((moe && !(a->flags & INFER__A_MOE_DENSE)) ||
                (fused_ffn && (s->field == offsetof(infer__layer, w_gate) || s->field == offsetof(infer__layer, w_up))))
                continue;
            required = 1;
            break;
        case INFER__T_FLAG_OPTIONAL:
            if (!(a->flags & s->flag)) continue;
            required = 0;
            break;
        case INFER__T_EXPERT_FLAG:
            if (!moe || !(a->flags & s->flag)) continue;
            required = 1;
            break;
        default: /* INFER__T_EXPERT */
            if (!moe || (fused_exps && (s->field == offsetof(infer__layer, gate_exps) ||
                                        s->field == offsetof(infer__layer, up_exps))))
                continue;
            required = 1;
        }
        /* a layer that reads an earlier layer's cache may lack k and v; a
           V_FROM_K model's layer may lack v (it takes the raw k) */
        if (shares_kv && (s->field == offsetof(infer__layer, wk) || s->field == offsetof(infer__layer, wv) ||
                          s->field == offsetof(infer__layer, bk) || s->field == offsetof(infer__layer, bv) ||
                          s->field == offsetof(infer__layer, k_norm)))
            required = 0;
        if ((a->flags & INFER__A_V_FROM_K) && s->field == offsetof(infer__layer, wv)) required = 0;
        snprintf(name, sizeof name, "blk.%d.%s", l, s->suffix);
        t = infer__gguf_tensor(m->gguf, name);
        if (!t) {
            if (required) {
                if (s->when == INFER__T_UNFUSED && (a->flags & INFER__A_FUSED)) /* phi3: neither form */
                    infer__set_error(err, INFER_ERR_FORMAT,
                                     "model has no tensor %s nor a fused blk.%d.attn_qkv.weight (required by %s)", name,
                                     l, m->arch);
                else
                    infer__set_error(err, INFER_ERR_FORMAT, "model has no tensor %s (required by %s)", name, m->arch);
                *ok = 0;
            }
            continue;
        }
        *field = infer__model_check(m, t, infer__model_size_of(m, L, s->ne0), infer__model_size_of(m, L, s->ne1),
                                    infer__model_size_of(m, L, s->ne2), err, ok);
        if (!*ok && err && (s->ne0 == INFER__D_FFN || s->ne1 == INFER__D_FFN)) { /* a width the file gave per layer: say which */
            const infer__kv *ff;
            snprintf(name, sizeof name, "%s.feed_forward_length", m->arch);
            ff = infer__gguf_kv(m->gguf, name);
            if (ff && ff->type == INFER_GGUF_TYPE_ARRAY) {
                char msg[sizeof err->msg];
                snprintf(msg, sizeof msg, "%.150s (layer %d's width in %.60s)", err->msg, l, name);
                memcpy(err->msg, msg, sizeof msg);
            }
        }
    }
    /* the stacked experts as matrices of n_expert * rows: expert e is rows
       [e * rows, (e + 1) * rows) */
    if (*ok && L->gate_exps) {
        const infer__tensor **st[3];
        st[0] = &L->gate_exps, st[1] = &L->up_exps, st[2] = &L->down_exps;
        for (i = 0; i < 3; i++) {
            const infer__tensor *t = *st[i];
            infer__tensor *v;
            if (!t) continue; /* up, fused into gate */
            v = (infer__tensor *)infer__model_view(m, t, 0, t->ne[1] * t->ne[2], "stacked");
            v->n_dims = 2;
            v->ne[2] = 1;
            *st[i] = v;
        }
    }
    /* where this layer's attention looks and how it turns (LAYER_SHAPES:
       from the file's pattern, infer__model_layer_shapes) */
    if (!(a->flags & INFER__A_LAYER_SHAPES)) {
        L->window = 0;
        L->rope = 0;
        if (a->swa_pattern && l % a->swa_pattern < a->swa_pattern - 1) {
            L->window = m->n_swa;
            if (m->n_ropes > 1) L->rope = 1;
        }
    }
    if (a->no_rope_step && l % a->no_rope_step == a->no_rope_step - 1) L->rope = -1;
    if (a->flags & INFER__A_GRANITE_SCALES) { /* RoPE only where the model was fine-tuned with it */
        char key[128];
        int tuned = 0;
        snprintf(key, sizeof key, "%s.rope.scaling.finetuned", m->arch);
        infer__gguf_get_bool(m->gguf, key, &tuned);
        if (!tuned) L->rope = -1;
    }
    if (L->kind != INFER__LAYER_ATTENTION) L->rope = -1, L->window = 0;
    if (a->sparse_layers && l < a->sparse_layers) L->ffn_sparsity = 1.6448533535003662f; /* the normal's 95% quantile */
    /* KV sharing: a layer past the caches reads the last cache of its
       kind (sliding or not) before them, and keeps no k, v of its own */
    L->kv_layer = l;
    if (l >= m->n_layer_kv && *ok) {
        int src;
        for (src = m->n_layer_kv - 1; src >= 0 && (m->layers[src].window != 0) != (L->window != 0); src--) {}
        if (src < 0) {
            infer__set_error(err, INFER_ERR_FORMAT, "layer %d shares a KV cache, but no layer before %d is %s", l,
                             m->n_layer_kv, L->window ? "sliding" : "global");
            *ok = 0;
            return;
        }
        if (m->layers[src].head_dim != L->head_dim || m->layers[src].n_kv_heads != L->n_kv_heads) {
            infer__set_error(err, INFER_ERR_FORMAT, "layer %d shares layer %d's KV cache, but their heads differ", l, src);
            *ok = 0;
            return;
        }
        L->kv_layer = src;
        L->wk = L->wv = L->bk = L->bv = L->k_norm = NULL;
    }
}

/* The GELU of every F16 value, rounded to F16 as llama.cpp's table is. */
static int infer__model_gelu_table(infer_model *m, infer_error *err) {
    uint32_t h;
    m->gelu_table = (float *)INFER_MALLOC(65536 * sizeof(float));
    if (!m->gelu_table) {
        infer__set_error(err, INFER_ERR_NOMEM, "out of memory");
        return 0;
    }
    for (h = 0; h < 65536; h++) {
        float x = infer__fp16_to_fp32((uint16_t)h);
        /* llama.cpp builds it with contracted arithmetic: 1 + a x^2 as an fma */
        float g = 0.5f * x * (1.0f + infer__tanhf(0.79788456080286535587989211986876f * x * infer__fmaf(0.044715f * x, x, 1.0f)));
        m->gelu_table[h] = infer__fp16_to_fp32(infer__fp32_to_fp16(g));
    }
    return 1;
}

static int infer__model_bind_weights(infer_model *m, const infer__arch *a, infer_error *err) {
    int ok = 1, l;
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
    if (emb->ne[1] != infer__vocab_n_tokens(m->vocab)) {
        infer__set_error(err, INFER_ERR_FORMAT, "token_embd.weight has %lld rows but the vocabulary %d tokens",
                         (long long)emb->ne[1], infer__vocab_n_tokens(m->vocab));
        return 0;
    }
    m->n_vocab = (int)emb->ne[1];
    m->tok_embd = infer__model_weight(m, "token_embd.weight", m->dim, m->n_vocab, 1, err, &ok);
    m->output_norm = infer__model_weight(m, a->flags & INFER__A_EMBD_NORM_OUT ? "token_embd_norm.weight" : "output_norm.weight",
                                         m->dim, 0, 1, err, &ok);
    m->output = infer__model_weight(m, "output.weight", m->dim, m->n_vocab, 0, err, &ok);
    if (!m->output) m->output = m->tok_embd; /* tied embeddings */
    {
        const infer__tensor *rf = infer__model_weight(m, "rope_freqs.weight", m->ropes[0].n_rot / 2, 0, 0, err, &ok);
        m->rope_freqs = rf ? (const float *)rf->data : NULL;
        m->ropes[0].freqs = m->rope_freqs;
        if (a->flags & INFER__A_LONGROPE) { /* short factors up to the original context, long beyond */
            const infer__tensor *lo = infer__model_weight(m, "rope_factors_long.weight", m->rope_dim / 2, 0, 0, err, &ok);
            const infer__tensor *sh = infer__model_weight(m, "rope_factors_short.weight", m->rope_dim / 2, 0, 0, err, &ok);
            if (!m->rope_freqs && sh) m->ropes[0].freqs = (const float *)sh->data;
            if (!m->rope_freqs && lo) m->ropes[0].freqs_long = (const float *)lo->data;
        }
    }
    if (!ok) return 0;
    m->views = (infer__tensor *)infer__calloc((size_t)m->n_layers * 8 + 2 * INFER__MAX_ALTUP, sizeof(infer__tensor));
    if (!m->views) {
        infer__set_error(err, INFER_ERR_NOMEM, "out of memory");
        return 0;
    }
    if (m->ple_dim) {
        int64_t all = (int64_t)m->ple_dim * m->n_layers;
        m->ple_embd = infer__model_weight(m, "per_layer_token_embd.weight", all, m->n_vocab, 1, err, &ok);
        m->ple_model_proj = infer__model_weight(m, "per_layer_model_proj.weight", m->dim, all, 1, err, &ok);
        m->ple_proj_norm = infer__model_weight(m, "per_layer_proj_norm.weight", m->ple_dim, 0, 1, err, &ok);
    }
    if (m->n_altup) { /* [dim, dim, n_altup - 1]: one matrix per stream past the first */
        static const char *const names[2] = {"altup_proj.weight", "altup_unembd_proj.weight"};
        int j, s;
        for (s = 0; s < 2 && ok; s++) {
            const infer__tensor *t = infer__gguf_tensor(m->gguf, names[s]);
            if (!t) {
                infer__set_error(err, INFER_ERR_FORMAT, "model has no tensor %s (required by %s)", names[s], m->arch);
                return 0;
            }
            t = infer__model_check(m, t, m->dim, m->dim, m->n_altup - 1, err, &ok);
            for (j = 0; ok && j < m->n_altup - 1; j++) {
                char part[24];
                infer__tensor *v;
                snprintf(part, sizeof part, "stream %d", j + 1);
                v = (infer__tensor *)infer__model_view(m, t, (int64_t)j * m->dim, m->dim, part);
                v->n_dims = 2;
                v->ne[2] = 1;
                (s ? m->altup_down : m->altup_up)[j] = v;
            }
        }
    }
    if (!ok) return 0;
    if (!infer__model_layer_kinds(m, a, err)) return 0;
    for (l = 0; l < m->n_layers && ok; l++) infer__model_bind_layer(m, a, l, err, &ok);
    /* a tensor the forward pass would ignore means a variant we do not
       implement: refuse rather than compute wrongly */
    for (i = 0; i < m->gguf->n_tensors && ok; i++)
        if (!m->bound[i]) {
            infer__set_error(err, INFER_ERR_UNSUPPORTED, "tensor %s is not part of the %s architecture as implemented",
                             m->gguf->tensors[i].name, m->arch);
            ok = 0;
        }
    if (ok && m->act == INFER__ACT_GELU && !infer__model_gelu_table(m, err)) ok = 0;
    return ok;
}

/* Reads general.architecture and finds its row. */
static const infer__arch *infer__model_arch(infer_model *m, infer_error *err) {
    infer__str arch;
    const infer__arch *a;
    char list[256];
    if (!infer__gguf_get_str(m->gguf, "general.architecture", &arch)) {
        infer__set_error(err, INFER_ERR_FORMAT, infer__gguf_kv(m->gguf, "general.architecture")
                                                    ? "model metadata general.architecture is not a string"
                                                    : "model metadata lacks general.architecture");
        return NULL;
    }
    if (arch.n >= sizeof m->arch) arch.n = sizeof m->arch - 1;
    memcpy(m->arch, arch.p, (size_t)arch.n);
    m->arch[arch.n] = 0;
    a = infer__arch_find(m->arch);
    if (!a) {
        infer__arch_list(list, sizeof list);
        infer__set_error(err, INFER_ERR_UNSUPPORTED, "model architecture '%s' is not supported (supported: %s)", m->arch,
                         list);
    }
    return a;
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
        const infer__arch *a = infer__model_arch(m, err);
        if (!a || !infer__model_load_hparams(m, a, err) || !infer__model_rope_override(m, params, err) ||
            !infer__model_bind_weights(m, a, err))
            goto fail;
        if (params->progress && params->progress(0.1f, params->progress_user)) goto cancelled;
        if (!infer__model_place(m, params->device, err)) goto fail;
        /* the CPU's kernels read their own layouts: made here, once */
        if (!infer__weights_prepare(m, params->progress, params->progress_user, 0.1f, err)) goto fail;
    }
    if (params->progress && params->progress(1.0f, params->progress_user)) goto cancelled;
    INFER_FREE(m->bound);
    m->bound = NULL;
    m->load_ms = infer__now_ms() - t0;
    return m;
cancelled:
    infer__set_error(err, INFER_ERR_CANCELLED, "loading cancelled by the progress callback");
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
    int i;
    if (!m) return;
    infer__model_unplace(m);
    infer__weights_free(m);
    INFER_FREE(m->device_note);
    if (m->vocab) infer__vocab_free(m->vocab);
    INFER_FREE(m->layers);
    for (i = 0; m->views && i < m->n_views; i++) INFER_FREE((char *)m->views[i].name);
    INFER_FREE(m->views);
    INFER_FREE(m->gelu_table);
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

INFERDEF infer_status infer_model_describe(const infer_model *m, char *buf, size_t size, size_t *n_out,
                                           infer_error *err) {
    int n;
    if (n_out) *n_out = 0;
    if (!m || (!buf && size)) {
        infer__set_error(err, INFER_ERR_ARG, "describe: %s", !m ? "no model" : "no buffer");
        return INFER_ERR_ARG;
    }
    if (!m->n_layers)
        n = snprintf(buf, size, "vocabulary only: %d tokens", m->n_vocab);
    else
        n = snprintf(buf, size,
                    "%s: dim %d, %d layers, %d heads (%d KV, size %d), ffn %d, vocab %d, context %d, "
                    "rope base %g dims %d, rms eps %g",
                    m->arch, m->dim, m->n_layers, m->n_heads, m->n_kv_heads, m->head_dim, m->ffn_dim, m->n_vocab,
                    m->n_ctx_train, m->rope_base, m->rope_dim, m->norm_eps);
    if (n_out) *n_out = n > 0 ? (size_t)n : 0;
    return INFER_OK;
}

/* context.c - a context: its sequences' KV cache, the CPU pass's scratch and plan of products.
   The plan holds, per layer, each product step's weights (packed for the
   context's kernels where they are) and the converted input each reads.
   A context on the GPU keeps only the batch's bookkeeping and RoPE angles
   here (its cache lives in device memory, its scratch in gpu.c's half). */
#include "context.h"

INFERDEF infer_context_params infer_context_default_params(void) {
    infer_context_params p;
    memset(&p, 0, sizeof p);
    return p;
}

static void *infer__ctx_alloc(infer_context *c, size_t n, size_t size, int *ok) {
    void *p = infer__calloc(n ? n : 1, size);
    if (!p) *ok = 0;
    c->bytes += n * size;
    return p;
}

/* Sets up a product step: which converted input each op reads. */
static void infer__product_init(infer__product *p, int n_ops, const infer__tensor *const *w, float *const *y,
                                const int *ldy) {
    int i, j;
    memset(p, 0, sizeof *p);
    p->n_ops = n_ops;
    for (i = 0; i < n_ops; i++) {
        infer_type vt = infer__traits(w[i]->type)->vec_dot_type;
        p->w[i] = w[i];
        p->y[i] = y[i];
        p->ldy[i] = ldy[i];
        p->chunks += (w[i]->ne[1] + INFER__PACK_ROWS - 1) / INFER__PACK_ROWS;
        p->slot[i] = -1;
        if (vt == INFER_TYPE_F32) continue;
        for (j = 0; j < p->n_x && p->x_type[j] != vt; j++) {}
        if (j == p->n_x) p->x_type[p->n_x++] = vt;
        p->slot[i] = j;
    }
}

/* Points the product's ops at the model's packed weights, where this
   context's kernels multiply that layout (a context matching llama.cpp
   may lack a packed kernel the model's default has). */
static void infer__product_use_packed(const infer_context *c, infer__product *p) {
    int i;
    for (i = 0; i < p->n_ops; i++)
        if (c->kern.gemm_packed[p->w[i]->type]) p->packed[i] = infer__weights_packed(c->model, p->w[i]);
}

static float *infer__rs_slot(const infer_context *c, int seq, int slot) {
    return c->rs + ((size_t)seq * 2 + (size_t)slot) * c->rs_slot;
}
static float *infer__rs_at(const infer_context *c, int seq, int slot, int l) { return infer__rs_slot(c, seq, slot) + c->rs_at[l]; }

/* Each sequence's two state slots of the recurrent layers, where the
   model runs (the device's memory for a GPU model: zeroed, as the host's),
   and, on a GPU, each token's slots for its pass. 0 when memory runs out. */
static int infer__context_rs(infer_context *c) {
    const infer_model *m = c->model;
    int ok = 1, l;
    size_t bytes;
    c->rs_at = (size_t *)infer__ctx_alloc(c, (size_t)m->n_layers, sizeof(size_t), &ok);
    for (l = 0; ok && l < m->n_layers; l++)
        if (m->layers[l].kind != INFER__LAYER_ATTENTION)
            c->rs_at[l] = c->rs_slot, c->rs_slot += m->rs_conv_floats + m->rs_ssm_floats;
    if (m->gpu) c->rs_of = (int *)infer__ctx_alloc(c, 2 * (size_t)c->n_batch, sizeof(int), &ok);
    if (!ok) return 0;
    bytes = (size_t)c->n_seq * 2 * c->rs_slot * sizeof(float);
    c->rs = (float *)infer__kv_mem_alloc(m->gpu, bytes);
    c->bytes += bytes;
    return c->rs != NULL;
}

/* A recurrent layer's products: its input (and Qwen3.5's gate z) in one
   step, Qwen3.5's beta and alpha in the router's, its output in o's. */
static void infer__plan_recurrent(infer_context *c, const infer__layer *L, infer__product *p) {
    const infer_model *m = c->model;
    const infer__tensor *w[3];
    float *y[3];
    int ld[3], n = 1;
    w[0] = L->rec_in, y[0] = c->rin, ld[0] = m->rec_in_dim;
    if (L->rec_gate) w[1] = L->rec_gate, y[1] = c->rgate, ld[1] = m->ssm_inner, n = 2;
    infer__product_init(&p[INFER__P_QKV], n, w, y, ld);
    if (L->rec_beta) {
        w[0] = L->rec_beta, w[1] = L->rec_alpha;
        y[0] = c->rba, y[1] = c->rba + m->ssm_heads;
        ld[0] = ld[1] = 2 * m->ssm_heads;
        infer__product_init(&p[INFER__P_ROUTER], 2, w, y, ld);
    }
    infer__product_init(&p[INFER__P_O], 1, &L->rec_out, &c->xb, &m->dim);
}

static int infer__plan(infer_context *c) {
    const infer_model *m = c->model;
    int l, j, n_steps = m->n_layers * INFER__P_PER_LAYER + INFER__P_MODEL_STEPS;
    infer__product *mp;
    c->plan = (infer__product *)infer__calloc((size_t)n_steps, sizeof(infer__product));
    if (!c->plan) return 0;
    for (l = 0; l < m->n_layers; l++) {
        const infer__layer *L = &m->layers[l];
        infer__product *p = c->plan + (size_t)l * INFER__P_PER_LAYER;
        const infer__tensor *w[3];
        float *y[3];
        int ld[3];
        if (L->kind != INFER__LAYER_ATTENTION) {
            infer__plan_recurrent(c, L, p);
        } else {
            w[0] = L->wq, w[1] = L->wk, w[2] = L->wv;
            y[0] = m->q_gate ? c->qg : c->q, y[1] = c->k, y[2] = c->v;
            ld[0] = m->q_gate ? 2 * m->q_dim : m->q_dim, ld[1] = ld[2] = m->kv_dim;
            /* q alone where k and v are an earlier layer's; q and k where v is k */
            infer__product_init(&p[INFER__P_QKV], L->kv_layer != l ? 1 : L->wv ? 3 : 2, w, y, ld);
            infer__product_init(&p[INFER__P_O], 1, &L->wo, &c->xb, &m->dim);
        }
        if (L->ffn_router) { /* experts: the router, then gate/up (or gate and up fused) and down per expert */
            int gu = L->w_gate ? INFER__P_EXPERTS_GATE_UP : INFER__P_GATE_UP, dn = L->w_gate ? INFER__P_EXPERTS_DOWN : INFER__P_DOWN;
            infer__product_init(&p[INFER__P_ROUTER], 1, &L->ffn_router, &c->route.logits, &m->n_expert);
            w[0] = L->gate_exps, w[1] = L->up_exps;
            y[0] = c->hb, y[1] = c->hb2;
            ld[0] = ld[1] = L->up_exps ? m->expert_ffn : 2 * m->expert_ffn;
            infer__product_init(&p[gu], L->up_exps ? 2 : 1, w, y, ld);
            infer__product_init(&p[dn], 1, &L->down_exps, &c->moe_out, &m->dim);
            p[gu].expert_rows = ld[0];
            p[dn].expert_rows = m->dim;
        }
        if (L->w_gate) { /* dense, or beside the experts */
            w[0] = L->w_gate, w[1] = L->w_up;
            y[0] = c->hb, y[1] = c->hb2;
            ld[0] = ld[1] = m->ffn_dim;
            infer__product_init(&p[INFER__P_GATE_UP], 2, w, y, ld);
            infer__product_init(&p[INFER__P_DOWN], 1, &L->w_down, &c->xb, &m->dim);
        }
        if (L->laurel_l) {
            infer__product_init(&p[INFER__P_LAUREL_L], 1, &L->laurel_l, &c->laurel_mid, &m->laurel_rank);
            infer__product_init(&p[INFER__P_LAUREL_R], 1, &L->laurel_r, &c->laurel, &m->dim);
        }
        if (L->ple_gate) {
            infer__product_init(&p[INFER__P_PLE_GATE], 1, &L->ple_gate, &c->ple_h, &m->ple_dim);
            infer__product_init(&p[INFER__P_PLE_PROJ], 1, &L->ple_proj, &c->xb, &m->dim);
        }
    }
    mp = c->plan + (size_t)m->n_layers * INFER__P_PER_LAYER;
    /* the output's rows go straight to the caller's logits (set per pass) */
    infer__product_init(&mp[INFER__P_OUTPUT], 1, &m->output, &c->logits, &m->n_vocab);
    if (m->ple_dim) {
        int all = m->ple_dim * m->n_layers;
        infer__product_init(&mp[INFER__P_PLE_MODEL], 1, &m->ple_model_proj, &c->ple, &all);
    }
    if (m->n_altup) { /* stream j + 1 of each token from the embedding; streams 1.. merged back */
        float *y[INFER__MAX_ALTUP - 1];
        int ld[INFER__MAX_ALTUP - 1];
        for (j = 0; j < m->n_altup - 1; j++) {
            float *down = c->alt_pred + (size_t)j * m->dim; /* merged stream j + 1, in prediction j's place */
            y[j] = c->alt + (size_t)(j + 1) * m->dim, ld[j] = m->n_altup * m->dim;
            infer__product_init(&mp[INFER__P_ALTUP_DOWN + j], 1, &m->altup_down[j], &down, &ld[j]);
        }
        infer__product_init(&mp[INFER__P_ALTUP_UP], m->n_altup - 1, m->altup_up, y, ld);
    }
    for (l = 0; l < n_steps; l++) infer__product_use_packed(c, &c->plan[l]);
    return 1;
}

/* The RoPE factors this context uses: LongRoPE's long ones when the
   context is longer than the model's original one (as llama.cpp picks). */
static void infer__context_rope_freqs(infer_context *c) {
    const infer_model *m = c->model;
    int r;
    for (r = 0; r < m->n_ropes; r++) {
        const infer__rope *rp = &m->ropes[r];
        c->rope_freqs[r] = rp->freqs_long && c->n_ctx > rp->n_ctx_orig ? rp->freqs_long : rp->freqs;
    }
}

INFERDEF infer_context *infer_context_new(infer_model *m, const infer_context_params *params, infer_error *err) {
    infer_context_params defaults = infer_context_default_params();
    infer_context *c;
    infer_type kv_type;
    int ok = 1, widest, pairs, moe = 0, l;
    if (!m || !m->n_layers) {
        infer__set_error(err, INFER_ERR_ARG, "a context needs a model with weights (not vocab-only)");
        return NULL;
    }
    if (!params) params = &defaults;
    if (params->n_ctx < 0 || params->n_batch < 0 || params->n_threads < 0 || params->n_threads > 512 ||
        params->n_seq < 0 || params->n_seq > 4096 || params->n_keep < 0 ||
        (params->full_policy != INFER_FULL_POLICY_STOP && params->full_policy != INFER_FULL_POLICY_SHIFT)) {
        infer__set_error(err, INFER_ERR_ARG, "context parameters out of range");
        return NULL;
    }
    kv_type = params->kv_type == INFER_TYPE_F32 ? INFER_TYPE_F16 : params->kv_type;
    c = (infer_context *)infer__calloc(1, sizeof *c);
    if (!c) {
        infer__set_error(err, INFER_ERR_NOMEM, "out of memory");
        return NULL;
    }
    c->model = m;
    c->kern = m->cpu->kern; /* the kernels the model's weights were packed for */
    c->n_ctx = params->n_ctx ? params->n_ctx : INFER__MIN(m->n_ctx_train, 4096);
    c->n_seq = params->n_seq ? params->n_seq : 1;
    c->n_batch = params->n_batch ? params->n_batch : 512;
    c->n_batch = INFER__MIN(c->n_batch, c->n_ctx * c->n_seq);
    c->full_policy = params->full_policy;
    c->n_keep = INFER__MIN(params->n_keep, c->n_ctx / 2); /* shifting must free something */
    c->seqs = (infer__seq *)infer__calloc((size_t)c->n_seq, sizeof(infer__seq));
    if (!c->seqs) {
        INFER_FREE(c);
        infer__set_error(err, INFER_ERR_NOMEM, "out of memory");
        return NULL;
    }
    for (l = 0; l < c->n_seq; l++) c->seqs[l].logit_row = -1;
    infer__context_rope_freqs(c);
    {
        /* a context that shifts keeps every position of a sliding window's
           layer too: moving positions down needs the ones a ring drops */
        int ring_batch = c->full_policy == INFER_FULL_POLICY_SHIFT ? c->n_ctx : INFER__MIN(c->n_batch, c->n_ctx);
        if (!infer__kv_init(&c->kv, kv_type, m, m->gpu, c->n_ctx, ring_batch, c->n_seq, err)) {
            infer_context_free(c);
            return NULL;
        }
        c->bytes += infer__kv_bytes(&c->kv);
    }
    for (l = 0; l < m->n_layers; l++) moe |= m->layers[l].ffn_router != NULL;
    /* prompts summed otherwise than llama.cpp sums them move logits by a
       fraction of a percent; routing (experts), soft-capped attention and
       scaled embeddings turn that into several (measured: synth gemma2 4%,
       Gemma 3 270M 7%), and recurrent layers carry them in their state
       (synth qwen35 0.41% against 0.3% allowed), so such models take llama.cpp's order by default
       (on the GPU too: see infer_cuda.cu's "llama.cpp's order") */
    c->match_llama = params->match_llama > 0 ||
                     (params->match_llama == 0 && (moe || m->attn_softcap > 0 || m->embd_scale > 0 || m->n_recurrent));
    for (l = 0; l < c->n_seq; l++) c->seqs[l].rs_ckpt = -1;
    if (m->n_recurrent && !infer__context_rs(c)) {
        infer_context_free(c);
        infer__set_error(err, m->gpu ? INFER_ERR_DEVICE : INFER_ERR_NOMEM,
                         "out of %s memory for the recurrent state of %d sequences", m->gpu ? "device" : "host", c->n_seq);
        return NULL;
    }
    if (!infer__context_attach(c, err)) { /* a GPU model: its scratch there, over the cache and the state */
        infer_context_free(c);
        return NULL;
    }
    c->pool = infer__pool_new(params->n_threads ? params->n_threads : 1);
    if (!c->pool) ok = 0;
    c->n_threads = c->pool ? infer__pool_size(c->pool) : 1;
    if (!c->gpu && c->match_llama) {
        int t;
        for (t = 0; t < INFER_TYPE_COUNT; t++)
            if (c->kern.gemm_packed_ordered[t]) c->kern.gemm_packed[t] = c->kern.gemm_packed_ordered[t];
        for (t = 0; t < INFER_TYPE_COUNT; t++)
            if (c->kern.gemm_unordered[t]) c->kern.gemm[t] = NULL;
        /* F16 everywhere as one 16-lane dot: packed where that kernel exists */
        c->kern.gemm_packed[INFER_TYPE_F16] = c->kern.gemm_packed_ordered[INFER_TYPE_F16];
        c->kern.gemm[INFER_TYPE_F16] = NULL;
        c->kern.vec_dot[INFER_TYPE_F16] = c->kern.f16_dot_ordered;
        c->kern.qk_f16 = NULL;
    }
    /* the batch's bookkeeping and RoPE angles, which both passes read */
    c->pos = (int *)infer__ctx_alloc(c, (size_t)c->n_batch, sizeof(int), &ok);
    c->sel = (int *)infer__ctx_alloc(c, (size_t)c->n_batch, sizeof(int), &ok);
    c->seq_of = (int *)infer__ctx_alloc(c, (size_t)c->n_batch, sizeof(int), &ok);
    c->groups = (infer__group *)infer__ctx_alloc(c, (size_t)c->n_batch, sizeof(infer__group), &ok);
    c->rope = (float *)infer__ctx_alloc(c, (size_t)m->n_ropes * c->n_batch * m->rope_dim, sizeof(float), &ok);
    if (c->gpu) { /* the rest is the CPU pass's scratch */
        if (!ok) {
            infer_context_free(c);
            infer__set_error(err, INFER_ERR_NOMEM, "out of memory for a context of %d tokens", params->n_ctx);
            return NULL;
        }
        return c;
    }
    pairs = moe ? c->n_batch * m->n_expert_used : 0;
    widest = INFER__MAX(INFER__MAX(INFER__MAX(m->dim, m->q_dim), INFER__MAX(m->ffn_dim, m->expert_ffn)),
                        INFER__MAX(m->ssm_inner, m->ple_dim));
    c->xq_rows = INFER__MAX(c->n_batch, pairs);
    c->x = (float *)infer__ctx_alloc(c, (size_t)c->n_batch * m->dim, sizeof(float), &ok);
    c->xb = (float *)infer__ctx_alloc(c, (size_t)c->n_batch * m->dim, sizeof(float), &ok);
    c->q = (float *)infer__ctx_alloc(c, (size_t)c->n_batch * m->q_dim, sizeof(float), &ok);
    c->k = (float *)infer__ctx_alloc(c, (size_t)c->n_batch * m->kv_dim, sizeof(float), &ok);
    c->v = (float *)infer__ctx_alloc(c, (size_t)c->n_batch * m->kv_dim, sizeof(float), &ok);
    c->att = (float *)infer__ctx_alloc(c, (size_t)c->n_batch * m->q_dim, sizeof(float), &ok);
    /* gate and up of the experts fused: both in hb */
    c->hb = (float *)infer__ctx_alloc(c, INFER__MAX((size_t)c->n_batch * m->ffn_dim, (size_t)pairs * 2 * m->expert_ffn),
                                      sizeof(float), &ok);
    c->hb2 = (float *)infer__ctx_alloc(c, INFER__MAX((size_t)c->n_batch * m->ffn_dim, (size_t)pairs * m->expert_ffn),
                                       sizeof(float), &ok);
    if (m->n_recurrent) {
        c->rin = (float *)infer__ctx_alloc(c, (size_t)c->n_batch * m->rec_in_dim, sizeof(float), &ok);
        c->rout = (float *)infer__ctx_alloc(c, (size_t)c->n_batch * INFER__MAX(m->ssm_inner, m->dim), sizeof(float), &ok);
        c->rgate = (float *)infer__ctx_alloc(c, (size_t)c->n_batch * m->ssm_inner, sizeof(float), &ok);
        c->rba = (float *)infer__ctx_alloc(c, (size_t)c->n_batch * 2 * m->ssm_heads, sizeof(float), &ok);
        c->rec_scratch_n = infer__rec_scratch_floats(m);
        c->rec_scratch = (float *)infer__ctx_alloc(c, (size_t)c->n_threads * c->rec_scratch_n, sizeof(float), &ok);
        if (infer__rec_shared_floats(m, c->n_batch))
            c->rec_shared = (float *)infer__ctx_alloc(c, infer__rec_shared_floats(m, c->n_batch), sizeof(float), &ok);
    }
    if (m->q_gate) {
        c->qg = (float *)infer__ctx_alloc(c, (size_t)c->n_batch * 2 * m->q_dim, sizeof(float), &ok);
        c->gate = (float *)infer__ctx_alloc(c, (size_t)c->n_batch * m->q_dim, sizeof(float), &ok);
    }
    if (m->n_altup) {
        size_t streams = (size_t)c->n_batch * m->n_altup * m->dim;
        c->alt = (float *)infer__ctx_alloc(c, streams, sizeof(float), &ok);
        c->alt_pred = (float *)infer__ctx_alloc(c, streams, sizeof(float), &ok);
        c->laurel = (float *)infer__ctx_alloc(c, (size_t)c->n_batch * m->dim, sizeof(float), &ok);
        c->laurel_mid = (float *)infer__ctx_alloc(c, (size_t)c->n_batch * m->laurel_rank, sizeof(float), &ok);
    }
    if (m->ple_dim) {
        c->ple = (float *)infer__ctx_alloc(c, (size_t)c->n_batch * m->n_layers * m->ple_dim, sizeof(float), &ok);
        c->ple_h = (float *)infer__ctx_alloc(c, (size_t)c->n_batch * m->ple_dim, sizeof(float), &ok);
    }
    if (moe) {
        for (l = 0; l < m->n_layers; l++)
            if (m->layers[l].ffn_router && m->layers[l].w_gate && !c->moe_dense) {
                c->moe_dense = (float *)infer__ctx_alloc(c, (size_t)c->n_batch * m->dim, sizeof(float), &ok);
                c->router_in = (float *)infer__ctx_alloc(c, (size_t)c->n_batch * m->dim, sizeof(float), &ok);
            }
        c->moe_out = (float *)infer__ctx_alloc(c, (size_t)pairs * m->dim, sizeof(float), &ok);
        c->route.expert = (int *)infer__ctx_alloc(c, (size_t)pairs, sizeof(int), &ok);
        c->route.weight = (float *)infer__ctx_alloc(c, (size_t)pairs, sizeof(float), &ok);
        c->route.pair_of = (int *)infer__ctx_alloc(c, (size_t)pairs, sizeof(int), &ok);
        c->route.pair_token = (int *)infer__ctx_alloc(c, (size_t)pairs, sizeof(int), &ok);
        c->route.start = (int *)infer__ctx_alloc(c, (size_t)m->n_expert + 1, sizeof(int), &ok);
        c->route.logits = (float *)infer__ctx_alloc(c, (size_t)c->n_batch * m->n_expert, sizeof(float), &ok);
    }
    c->attn_scratch_n = infer__attn_scratch_floats(m->head_dim, c->match_llama && c->kv.type == INFER_TYPE_F16, c->n_ctx);
    c->attn_scratch = (float *)infer__ctx_alloc(c, (size_t)c->n_threads * c->attn_scratch_n, sizeof(float), &ok);
    /* split attention: as many tokens as INFER__ATT_SCORES holds the scores
       of, up to INFER__ATT_SPLIT_TOKENS, on one worker too (its sums are
       every worker count's); runs of whole tiles, INFER__ATT_SPLITS of them
       cover the context */
    c->attn_split_tokens = INFER__MIN(INFER__ATT_SPLIT_TOKENS, INFER__ATT_SCORES / (m->n_heads * c->n_ctx));
    c->attn_split_len = INFER__ATT_TILE * ((c->n_ctx + INFER__ATT_TILE * INFER__ATT_SPLITS - 1) / (INFER__ATT_TILE * INFER__ATT_SPLITS));
    if (c->attn_split_tokens > 0) {
        c->attn_part = (float *)infer__ctx_alloc(
            c, (size_t)c->attn_split_tokens * m->n_heads * INFER__ATT_SPLITS * ((size_t)m->head_dim + INFER__ATT_PART_HEAD), sizeof(float), &ok);
        c->attn_scores = (float *)infer__ctx_alloc(c, (size_t)c->attn_split_tokens * m->n_heads * c->n_ctx, sizeof(float), &ok);
    }
    /* F16 (2 bytes a value) is the widest converted form */
    c->xq_row_max = (size_t)widest * sizeof(uint16_t);
    c->xq = infer__ctx_alloc(c, (size_t)c->xq_rows * INFER__MAX_FUSED, c->xq_row_max, &ok);
    if (m->n_altup) c->mv_row = (uint8_t *)infer__ctx_alloc(c, (size_t)c->n_threads, c->xq_row_max, &ok);
    if (ok && !infer__plan(c)) ok = 0;
    if (!ok) {
        infer_context_free(c);
        infer__set_error(err, INFER_ERR_NOMEM, "out of memory for a context of %d tokens", params->n_ctx);
        return NULL;
    }
    return c;
}

INFERDEF void infer_context_free(infer_context *c) {
    int l;
    if (!c) return;
    infer__context_detach(c);
    infer__pool_free(c->pool);
    infer__kv_free(&c->kv);
    INFER_FREE(c->x);
    INFER_FREE(c->xb);
    INFER_FREE(c->q);
    INFER_FREE(c->k);
    INFER_FREE(c->v);
    INFER_FREE(c->att);
    INFER_FREE(c->hb);
    INFER_FREE(c->hb2);
    INFER_FREE(c->moe_out);
    INFER_FREE(c->moe_dense);
    INFER_FREE(c->router_in);
    if (c->rs) infer__kv_mem_free(c->model->gpu, c->rs);
    INFER_FREE(c->rs_at);
    INFER_FREE(c->rs_of);
    INFER_FREE(c->rin);
    INFER_FREE(c->rout);
    INFER_FREE(c->rgate);
    INFER_FREE(c->rba);
    INFER_FREE(c->qg);
    INFER_FREE(c->gate);
    INFER_FREE(c->alt);
    INFER_FREE(c->alt_pred);
    INFER_FREE(c->laurel);
    INFER_FREE(c->laurel_mid);
    INFER_FREE(c->ple);
    INFER_FREE(c->ple_h);
    INFER_FREE(c->mv_row);
    INFER_FREE(c->route.expert);
    INFER_FREE(c->route.weight);
    INFER_FREE(c->route.pair_of);
    INFER_FREE(c->route.pair_token);
    INFER_FREE(c->route.start);
    INFER_FREE(c->route.logits);
    INFER_FREE(c->rope);
    INFER_FREE(c->attn_scratch);
    INFER_FREE(c->rec_scratch);
    INFER_FREE(c->rec_shared);
    INFER_FREE(c->attn_part);
    INFER_FREE(c->attn_scores);
    INFER_FREE(c->xq);
    INFER_FREE(c->plan);
    INFER_FREE(c->pos);
    INFER_FREE(c->sel);
    INFER_FREE(c->seq_of);
    INFER_FREE(c->groups);
    INFER_FREE(c->logits);
    stbds_arrfree(c->row_of);
    stbds_arrfree(c->order);
    stbds_arrfree(c->btok);
    stbds_arrfree(c->flags);
    for (l = 0; c->seqs && l < c->n_seq; l++) stbds_arrfree(c->seqs[l].tokens);
    INFER_FREE(c->seqs);
    stbds_arrfree(c->prompt_tokens);
    stbds_arrfree(c->gen_tokens);
    INFER_FREE(c);
}

INFERDEF int infer_context_n_ctx(const infer_context *c) { return c->n_ctx; }
INFERDEF const char *infer_context_isa(const infer_context *c) { return infer__isa_name(c->kern.isa); }
INFERDEF int infer_context_n_seq(const infer_context *c) { return c->n_seq; }
INFERDEF int infer_context_match_llama(const infer_context *c) { return c->match_llama; }
INFERDEF void infer_context_set_abort(infer_context *c, infer_abort_fn fn, void *user) {
    c->abort_fn = fn;
    c->abort_user = user;
}
INFERDEF void infer_context_set_progress(infer_context *c, infer_progress_fn fn, void *user) {
    c->progress_fn = fn;
    c->progress_user = user;
}
static int infer__aborted(const infer_context *c) {
    return (c->abort_fn && c->abort_fn(c->abort_user)) || (c->sched && infer__sched_should_stop(c->sched));
}

/* weights.c - the weights prepared once per model for this CPU's kernels:
   every matrix a product multiplies, repacked (pack.c's layouts) into one
   arena the model owns and every context shares read-only. */
#include "internal.h"

#define INFER__PACK_ARENA_ALIGN ((size_t)2 << 20) /* a huge page */

/* Whether w (of which each expert holds expert_rows rows, 0: not experts)
   has a packed form under kernels k. Experts are packed only when each
   expert starts a whole group of rows. */
static int infer__weight_packs(const infer__kernels *k, const infer__tensor *w, int expert_rows) {
    infer_type t = w->type;
    if (expert_rows && expert_rows % INFER__PACK_ROWS) return 0;
    return k->pack_size[t] && k->pack[t] && k->gemm_packed[t];
}

/* The matrices the forward pass multiplies, with their experts' rows: the
   packing plan. Returns how many (at most 14 per layer, and the model's:
   AltUp's, the per-layer inputs', the output). */
static int infer__weights_list(const infer_model *m, const infer__tensor **w, int *expert_rows) {
    int n = 0, l;
#define INFER__ADD(t, er) ((t) ? (void)(w[n] = (t), expert_rows[n++] = (er)) : (void)0)
    for (l = 0; l < m->n_layers; l++) {
        const infer__layer *L = &m->layers[l];
        if (L->kind != INFER__LAYER_ATTENTION) {
            INFER__ADD(L->rec_in, 0), INFER__ADD(L->rec_out, 0);
            if (L->rec_gate) INFER__ADD(L->rec_gate, 0);
            if (L->rec_beta) INFER__ADD(L->rec_beta, 0), INFER__ADD(L->rec_alpha, 0);
        } else {
            INFER__ADD(L->wq, 0), INFER__ADD(L->wk, 0), INFER__ADD(L->wv, 0), INFER__ADD(L->wo, 0);
        }
        if (L->ffn_router) { /* gate_exps without up_exps: each expert's gate and up rows */
            INFER__ADD(L->ffn_router, 0);
            INFER__ADD(L->gate_exps, L->up_exps ? m->expert_ffn : 2 * m->expert_ffn), INFER__ADD(L->up_exps, m->expert_ffn);
            INFER__ADD(L->down_exps, m->dim);
        }
        INFER__ADD(L->w_gate, 0), INFER__ADD(L->w_up, 0), INFER__ADD(L->w_down, 0); /* dense (beside experts too) */
        INFER__ADD(L->laurel_l, 0), INFER__ADD(L->laurel_r, 0), INFER__ADD(L->ple_gate, 0), INFER__ADD(L->ple_proj, 0);
    }
    for (l = 0; l < m->n_altup - 1; l++) INFER__ADD(m->altup_up[l], 0), INFER__ADD(m->altup_down[l], 0);
    INFER__ADD(m->ple_model_proj, 0);
    INFER__ADD(m->output, 0);
#undef INFER__ADD
    return n;
}

static size_t infer__weight_packed_bytes(const infer__kernels *k, const infer__tensor *w) {
    return (k->pack_size[w->type](w->ne[0], w->ne[1]) + 63) / 64 * 64;
}

/* Chooses the model's kernels and, for a CPU model, repacks its weights
   where they have a packed form; the mapped originals of packed weights are let go (the
   token embedding's rows are still read, so its pages stay). progress
   goes from `from` to 1 over the packing; returns 0 (err set) when it
   cancels or memory runs out. */
static int infer__weights_prepare(infer_model *m, infer_progress_fn progress, void *user, float from, infer_error *err) {
    int cap = m->n_layers * 14 + 2 * INFER__MAX_ALTUP + 2, n, i, j;
    const infer__tensor **w = (const infer__tensor **)infer__calloc((size_t)cap, sizeof *w);
    int *er = (int *)infer__calloc((size_t)cap, sizeof(int));
    size_t total = 0, done = 0;
    uint8_t *at;
    struct infer__cpu_weights *cw = (struct infer__cpu_weights *)infer__calloc(1, sizeof *cw);
    m->cpu = cw; /* freed with the model (infer__weights_free) */
    if (!cw || !w || !er) goto nomem;
    if (!infer__kernels_select(&cw->kern, err)) goto fail_quiet;
    if (m->device != INFER_DEVICE_CPU) goto done; /* a GPU's weights are its own */
    n = infer__weights_list(m, w, er);
    /* each tensor once (a shared output, a view bound twice) */
    for (i = 0; i < n; i++) {
        for (j = 0; j < i && w[j] != w[i]; j++) {}
        if (j < i || !infer__weight_packs(&cw->kern, w[i], er[i])) continue;
        total += infer__weight_packed_bytes(&cw->kern, w[i]);
        cw->n_packed++;
    }
    if (!total) goto done;
    cw->packed_w = (const infer__tensor **)infer__calloc((size_t)cw->n_packed, sizeof *cw->packed_w);
    cw->packed_at = (const uint8_t **)infer__calloc((size_t)cw->n_packed, sizeof *cw->packed_at);
    /* one arena, aligned so the OS can back it with huge pages: generation
       streams it all once per token */
    cw->packed_raw = (uint8_t *)INFER_MALLOC(total + INFER__PACK_ARENA_ALIGN);
    if (!cw->packed_w || !cw->packed_at || !cw->packed_raw) goto nomem;
    cw->packed_bytes = total + INFER__PACK_ARENA_ALIGN;
    at = cw->packed_raw + (INFER__PACK_ARENA_ALIGN - (uintptr_t)cw->packed_raw % INFER__PACK_ARENA_ALIGN);
    infer__advise_huge(at, total);
    cw->n_packed = 0;
    for (i = 0; i < n; i++) {
        const infer__tensor *t = w[i];
        for (j = 0; j < i && w[j] != t; j++) {}
        if (j < i || !infer__weight_packs(&cw->kern, t, er[i])) continue;
        cw->kern.pack[t->type](t->data, infer__row_size(t->type, t->ne[0]), t->ne[0], t->ne[1], at);
        cw->packed_w[cw->n_packed] = t;
        cw->packed_at[cw->n_packed++] = at;
        if (t != m->tok_embd) infer__blob_forget(&m->gguf->blob, t->data, t->nbytes);
        at += infer__weight_packed_bytes(&cw->kern, t);
        done += infer__weight_packed_bytes(&cw->kern, t);
        if (progress && progress(from + (1 - from) * (float)((double)done / (double)total), user)) {
            infer__set_error(err, INFER_ERR_CANCELLED, "loading cancelled by the progress callback");
            goto fail_quiet;
        }
    }
done:
    INFER_FREE(w);
    INFER_FREE(er);
    return 1;
nomem:
    infer__set_error(err, INFER_ERR_NOMEM, "out of memory for the packed weights (%zu bytes)", total);
fail_quiet:
    INFER_FREE(w);
    INFER_FREE(er);
    return 0;
}

/* w's packed copy, or NULL. */
static const uint8_t *infer__weights_packed(const infer_model *m, const infer__tensor *w) {
    const struct infer__cpu_weights *cw = m->cpu;
    int i;
    for (i = 0; cw && i < cw->n_packed; i++)
        if (cw->packed_w[i] == w) return cw->packed_at[i];
    return NULL;
}

static void infer__weights_free(infer_model *m) {
    struct infer__cpu_weights *cw = m->cpu;
    if (!cw) return;
    INFER_FREE(cw->packed_raw);
    INFER_FREE(cw->packed_w);
    INFER_FREE(cw->packed_at);
    INFER_FREE(cw);
    m->cpu = NULL;
}

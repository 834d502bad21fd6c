/* context.h - what a context holds (KV cache, scratch, the plan of
   products) and what attention.c, context.c, product.c, forward.c,
   decode.c and the parts after them share about it. */
#ifndef INFER_CONTEXT_H
#define INFER_CONTEXT_H
#include "internal.h"
#include "backend.h"

/* ---- attention.c: the KV cache and attention over it ---- */
#ifndef INFER__ATT_TILE
/* keys per tile: long enough that a token's products are long rows (V is
   read a run of 512 bytes per value at a time) and few calls */
#define INFER__ATT_TILE 256
#endif
#define INFER__ATT_ROWS 64 /* query rows (tokens x heads of one group) per work item, at most */
#define INFER__ATT_PV_CHUNKS 4 /* the ordered pass's p.V: chunks of 16 keys a call, at most */
/* A pass of a few tokens past the first run of keys splits each item's
   keys into runs, so that every worker streams the cache
   (flash-decoding): see infer__attn_item. The runs are fixed positions,
   INFER__ATT_SPLITS of them over the context (infer_context.attn_split_len
   keys each), so a token's sums are the same whatever else its pass holds
   and on any number of workers: a draft verified in one pass gives the
   logits one-token passes give. The runs keep their scores in the context
   (infer_context.attn_scores), at most INFER__ATT_SCORES floats: tokens x
   heads x the context's positions. */
#define INFER__ATT_SPLITS 8
#define INFER__ATT_SPLIT_TOKENS 16
#define INFER__ATT_SCORES (1 << 22)
#define INFER__ATT_PART_HEAD 3 /* floats before a run's p.V in its partial result: max, sum (a double) */
/* scores an unsplit item keeps between its passes (rows x keys), at most:
   a prompt's item of 64 rows keeps them over 16k keys, so deep prompts
   make their scores once (a worker's scratch: rows x the context's
   positions where that is less) */
#ifndef INFER__ATT_KEPT
#define INFER__ATT_KEPT (1 << 20)
#endif

/* The cache itself (infer__kv_cache) is in backend.h: a GPU reads it too. */

/* Per-worker scratch of attention (INFER__ATT_ROWS query rows). */
typedef struct infer__attn_scratch {
    uint8_t *qx;      /* query rows in K's dot type */
    float *s, *acc, *pv, *m, *l;
    float *inv;       /* rows' 1 / sum, where their scores are kept whole */
    float *qk_work;   /* kernels.qk_f16's and pv_f16's */
    uint16_t *p;      /* probabilities in F16 */
    float *kept;      /* an item's scores between its passes */
    size_t n_kept;    /* floats there */
    /* llama.cpp's order only: p.V's 16 key lanes per row and value, a
       chunk of 16 keys' V values and probabilities, the rows' sums */
    float *lanes, *vchunk, *pchunk;
    double *sum;
} infer__attn_scratch;

/* The shape of one layer's attention for a batch: n_tok tokens from
   position pos0, q rows of n_heads heads (stride ldq), out likewise. */
typedef struct infer__attn_batch {
    const infer__kv_cache *kv;
    const infer__kernels *kern;
    int seq, layer, pos0, n_tok, n_heads;
    int head_dim, n_kv_heads; /* the layer's (its KV rows may be wider: the cache's rows are the largest layer's) */
    int window;    /* keys a query sees, 0: all */
    float scale;   /* on the scores (after soft-capping) */
    float softcap; /* scores become c * tanh(s / c), 0: no */
    int ordered;   /* summed in llama.cpp's order (an F16 cache; infer__attn_item_ordered) */
    const float *sinks; /* a logit per head in each row's max and sum that adds no value, or NULL */
    const float *q;
    float *out;
    int ldq, ldo;
    /* keys split into n_splits runs (1: not split, out written), in
       phase 1 (scores and stats) or 2 (p.V; 0 when not split); the
       partial results of token t, head h, run r at part + ((t * n_heads
       + h) * n_splits + r) * (head_dim + INFER__ATT_PART_HEAD): max, sum
       (a double in two floats' room), p.V; the scores of
       token t, head h at scores + (t * n_heads + h) * scores_ld, by key
       from the item's first */
    int n_splits, phase;
    int split_len; /* keys per run: run r is positions [r * split_len, (r + 1) * split_len) */
    float *part, *scores;
    size_t scores_ld;
} infer__attn_batch;

/* gpu: the GPU model whose device holds the cache, or NULL (host memory) */
static int infer__kv_init(infer__kv_cache *kv, infer_type type, const infer_model *m, void *gpu, int n_ctx, int n_batch,
                          int n_seq, infer_error *err);
static void infer__kv_free(infer__kv_cache *kv);
static size_t infer__kv_bytes(const infer__kv_cache *kv);
/* hi: one past the highest position the sequence's cache has written */
static int infer__kv_can_rewind(const infer__kv_cache *kv, const infer_model *m, int hi, int n_past);
static void infer__kv_store(infer__kv_cache *kv, const infer__kernels *kern, int seq, int layer, int pos, const float *k,
                            const float *v, int n);
static size_t infer__attn_scratch_floats(int head_dim, int ordered, int n_ctx);
static size_t infer__rec_scratch_floats(const infer_model *m);
static size_t infer__rec_shared_floats(const infer_model *m, int n_batch);
static void infer__attn_scratch_carve(infer__attn_scratch *sc, float *base, int head_dim, int ordered, int n_ctx);
static int infer__attn_n_items(const infer__attn_batch *b);
/* item < infer__attn_n_items(b) * b->n_splits: run item % n_splits of the
   keys of item / n_splits */
static void infer__attn_item(const infer__attn_batch *b, int item, infer__attn_scratch *sc);
static void infer__attn_merge(const float *part, int n_heads, int head_dim, int n_splits, int t0, int t1, float *out,
                              int ldo);
static void infer__attn_item_ordered(const infer__attn_batch *b, int item, infer__attn_scratch *sc);

/* ---- context.c, product.c, forward.c, decode.c: the context, its products,
   the forward pass, decoding ---- */
#define INFER__MAX_FUSED 3 /* products sharing one input, run as one step */

/* A step of products that read the same input (q, k, v; gate, up): the
   input is converted once per activation type it needs, and the workers
   split the rows of all of them. */
typedef struct infer__product {
    int n_ops, n_x;
    const infer__tensor *w[INFER__MAX_FUSED];
    int slot[INFER__MAX_FUSED];          /* the converted input each op reads; -1: the f32 input */
    infer_type x_type[INFER__MAX_FUSED]; /* the types of the n_x converted inputs */
    float *y[INFER__MAX_FUSED];
    int ldy[INFER__MAX_FUSED];
    const uint8_t *packed[INFER__MAX_FUSED]; /* the weights repacked for this ISA (pack.c), or NULL */
    int64_t chunks;                      /* INFER__PACK_ROWS-row pieces of all ops, the unit of the split */
    int expert_rows;                     /* experts: rows of one expert (each op stacks n_expert), else 0 */
} infer__product;

/* Per layer: q/k/v, o, the experts' router (empty in a dense layer),
   gate/up (or the experts' gate/up), down (or the experts' down);
   LAuReL's two products and the per-layer input's gate and projection
   (empty where the model has none). */
enum {
    INFER__P_QKV, INFER__P_O, INFER__P_ROUTER, INFER__P_GATE_UP, INFER__P_DOWN, INFER__P_LAUREL_L, INFER__P_LAUREL_R,
    INFER__P_PLE_GATE, INFER__P_PLE_PROJ,
    INFER__P_EXPERTS_GATE_UP, INFER__P_EXPERTS_DOWN, /* experts beside a dense FFN (GATE_UP, DOWN) */
    INFER__P_PER_LAYER
};
/* After the layers' steps, the model's: the output, the per-layer inputs'
   product of the embedding, AltUp's streams made (one step of n_altup - 1
   products of the embedding) and merged (one step per stream past the first). */
enum { INFER__P_OUTPUT, INFER__P_PLE_MODEL, INFER__P_ALTUP_UP, INFER__P_ALTUP_DOWN,
       INFER__P_MODEL_STEPS = INFER__P_ALTUP_DOWN + INFER__MAX_ALTUP - 1 };

/* The routing of one batch through a layer's experts: each token's chosen
   experts (slots t * k + j) and their weights, and the same choices as
   pairs sorted by expert, so each expert multiplies its tokens at once. */
typedef struct infer__moe_route {
    int *expert;      /* per slot */
    float *weight;    /* per slot */
    int *pair_of;     /* per slot: its pair */
    int *pair_token;  /* per pair */
    int *start;       /* per expert, and one past the last: its first pair */
    float *logits;    /* per token: the router's logits (n_expert) */
    float *margin;    /* per position, or NULL: the least relative gap between the last chosen
                         expert's probability and the next one's, over the layers (tests set it) */
} infer__moe_route;

/* One sequence of a context: a conversation with a cache of its own. */
typedef struct infer__seq {
    int n_past;          /* positions its cache holds */
    int hi;              /* one past the highest position written (a ring's rewind checks it) */
    infer_token *tokens; /* stb_ds array: the token at each position */
    int logit_row;       /* the row of its last position in logits, or -1 */
    int inexact;         /* 1 + the first position whose cache a removal from
                            the middle (a context shift) left unlike a fresh
                            prefill's (prompt reuse keeps no more); 0: none */
    /* infer_decode_batch's bookkeeping: tokens in this batch, the last
       one's index, n_past when the call began */
    int pending, last, start_past;
    /* recurrent layers: the state slot (0, 1) that is the sequence's now;
       the other holds its state at position rs_ckpt (-1: none), the
       checkpoint a truncation goes back to; rs_fresh: no pass of this
       decode call has written the other slot yet */
    int rs_cur, rs_ckpt, rs_fresh;
} infer__seq;

/* A run of one sequence's tokens in a forward pass: tokens start.. of the
   pass, at positions pos0.. of sequence seq. */
typedef struct infer__group {
    int seq, start, n, pos0;
    int rs_src, rs_dst; /* recurrent layers: the state slots read and written; src -1: zeros */
} infer__group;

struct infer_context {
    infer_model *model;
    int n_ctx, n_batch, n_seq;
    infer__seq *seqs;
    infer_full_policy full_policy;
    int n_keep;
    infer_abort_fn abort_fn;
    void *abort_user;
    infer_progress_fn progress_fn; /* infer_context_set_progress */
    void *progress_user;
    struct infer__sched *sched; /* request.c's scheduler of this context's requests, or NULL */
    void *gpu;          /* the GPU half of a CUDA model's context (gpu.c), or NULL */
    infer__pool *pool;
    int n_threads;
    int product_next;   /* a product's chunks handed out past the workers' fixed shares (product.c) */
    infer__kernels kern; /* the kernels of the chosen instruction set */
    infer__kv_cache kv;
    /* activations of one batch, a row per token (per pair for experts) */
    float *x, *xb, *q, *k, *v, *att, *hb, *hb2, *moe_out;
    float *moe_dense, *router_in; /* experts beside a dense FFN: its output; the router's input */
    float *rope;        /* per RoPE of the model, per token: cos, sin of each rotated pair */
    const float *rope_freqs[INFER__MAX_ROPES]; /* the factors this context's length picks */
    float *attn_scratch; /* per worker */
    size_t attn_scratch_n;
    float *rec_scratch; /* per worker: the chunked scans' (recurrent.c) */
    size_t rec_scratch_n;
    float *rec_shared; /* a batch's chunks' products that heads share (recurrent.c) */
    float *attn_part;   /* split attention's partial results (infer__attn_batch.part) */
    float *attn_scores; /* and its scores (.scores, rows of n_ctx) */
    int attn_split_tokens; /* the most tokens a pass may have to be split: what attn_scores holds */
    int attn_split_len;    /* keys per run of a split pass (infer__attn_batch.split_len) */
    int match_llama; /* sums in llama.cpp's order (infer_context_params.match_llama) */
    void *xq;           /* converted inputs: INFER__MAX_FUSED slots of n_rows rows */
    size_t xq_row_max;  /* bytes of one converted row, largest case */
    int xq_rows;        /* rows per slot: n_batch, or n_batch * experts used */
    infer__moe_route route;
    /* recurrent layers: each sequence's two state slots (infer__seq.rs_cur),
       rs_slot floats each, layer l's part at rs_at[l] (its conv window,
       then its scan state: backend.h's infer__rs_state), in the memory of
       the model's device (as the KV cache: infer__kv_mem_copy moves its
       bytes); and their activations, a row per token: the
       input product, Qwen3.5's gate z, its beta and alpha logits, the
       scan's output */
    float *rs;
    size_t rs_slot, *rs_at;
    float *rin, *rgate, *rba, *rout;
    float *qg, *gate; /* attention with a gate (model.q_gate): attn_q's output, then the gates */
    /* AltUp (model.n_altup): each token's streams, n_altup rows of dim, and
       their predictions; LAuReL's output and its low-rank middle; the
       per-layer inputs (n_layers rows of ple_dim a token) and one layer's
       gated input; a worker's converted row for the small products
       (infer__matvec) */
    float *alt, *alt_pred, *laurel, *laurel_mid, *ple, *ple_h;
    uint8_t *mv_row;
    infer__product *plan; /* INFER__P_PER_LAYER per layer, then the output */
    /* one pass's tokens (n_batch): each one's position, the sequences'
       runs, and which rows go out as logits */
    int *pos, *sel;
    int *seq_of;        /* each token's sequence (the GPU's pass reads it) */
    int *rs_of;         /* a GPU model's recurrent layers: each token's state slots read (n_batch), then written */
    infer__group *groups;
    float *logits;      /* rows of n_vocab */
    int logit_cap_rows;
    int *row_of;        /* stb_ds array: per token of the last decode, its logits row or -1 */
    int *order;         /* stb_ds arrays: a batch's tokens by sequence (indices, ids) */
    infer_token *btok;
    int8_t *flags;      /* stb_ds array: infer_decode's all-logits flags */
    size_t bytes;       /* memory this context holds */
    /* metrics.c's record, kept by infer_generate (request.c) */
    infer_metrics metrics;
    infer_token *prompt_tokens, *gen_tokens; /* stb_ds arrays */
};

/* context.c: asks the abort callback, and whether a request in the pass
   was cancelled (worker 0 only). */
static int infer__aborted(const infer_context *c);
typedef struct infer__sched infer__sched;
static int infer__sched_should_stop(const infer__sched *s); /* request.c */

/* product.c: the products of the CPU pass (the plan's steps). Slot `slot`
   of the packing arena (c->xq): xq_rows converted input rows. */
static uint8_t *infer__xq_slot(const infer_context *c, int slot);
/* Converts input rows t0..t1 (of n values, stride ldx) into each type the
   product reads; row t lands at row t - base of the slot. */
static void infer__product_convert(const infer_context *c, const infer__product *p, const float *x, int ldx, int t0,
                                   int t1, int base);
/* Each worker's part of the rows of every op of the product, for n_tok
   converted input rows (x: the f32 input, for ops that read it as is;
   out0 replaces the first op's output): a fixed share, then chunks
   handed out from c->product_next, which worker 0 starts over
   (infer__product_ready) before the barrier ahead of each product. */
static void infer__product_ready(infer_context *c, int ith);
static void infer__product_run(infer_context *c, const infer__product *p, const float *x, int ldx, int n_tok,
                               float *out0, int ith, int nth);
/* The experts: token t's choice from its router logits (pos: its
   position, for rt->margin), the batch's (token, expert) pairs sorted by
   expert, and this worker's share of an experts product over the pairs. */
static void infer__moe_choose(const infer_model *m, infer__moe_route *rt, int t, int pos);
static void infer__moe_pairs(const infer_model *m, infer__moe_route *rt, int n_tok);
static void infer__moe_product(const infer_context *c, const infer__product *p, int ith, int nth);

/* forward.c: one forward pass of n (<= n_batch) tokens: n_groups runs of
   sequences (c->groups), each token's position in c->pos; the final
   normed hidden state of the n_sel tokens c->sel[] (ascending) goes
   through the output into logits (n_vocab floats a row), or, given
   hidden, into hidden (dim floats a row) instead. Returns 0, or 1 where the abort callback stopped
   it (then no sequence has advanced). */
static int infer__forward(infer_context *c, const infer_token *tokens, int n, int n_groups, int n_sel, float *logits,
                          float *hidden);
/* RoPE (rope.c): cos and sin of position pos's angles; rotating one
   head by them (fused: with llama.cpp's contracted FMAs). */
static void infer__rope_angles(float *cs, const infer__rope *r, const float *freqs, int pos);
static void infer__rope_rotate(float *x, const float *cs, int n_rot, int neox, const infer__kernels *fused);

/* recurrent.c: the recurrent layers' kernels over one run of a sequence
   (src: the state it starts from, NULL for zeros; dst: the state it ends in) */
static float infer__sigmoidf(float x);
static void infer__rec_conv(const float *in, const float *mul, int ldi, float *out, int ldo, int n, int c0, int c1, int K,
                            const float *w, const float *bias, int silu, const float *src, float *dst);
static void infer__rec_mamba2(const infer__kernels *kern, const infer_model *m, const infer__layer *L, int h,
                              const float *xbc, const float *dt, int ld, float *y, int ldy, int n, const float *src,
                              float *dst);
static void infer__rec_deltanet(const infer__kernels *kern, const infer_model *m, const infer__layer *L, int h,
                                const float *qkv, int ld, const float *ba, int ldba, float *o, int ldo, int n,
                                const float *src, float *dst);
/* ... and a prompt's run in chunks (INFER__REC_CHUNK): Mamba2's products
   that a group's heads share, made once per chunk into shared, then each
   head's scan; the delta rule's; w the worker's scratch */
static void infer__rec_mamba2_chunk_shared(const infer__kernels *kern, const infer_model *m, int g, const float *rows,
                                           int ld, int nc, float *out);
static void infer__rec_mamba2_chunked(const infer__kernels *kern, const infer_model *m, const infer__layer *L, int h,
                                      const float *xbc, const float *dt, int ld, const float *shared, float *y, int ldy,
                                      int n, const float *src, float *dst, float *w);
static void infer__rec_deltanet_chunked(const infer__kernels *kern, const infer_model *m, const infer__layer *L, int h,
                                        const float *qkv, int ld, const float *ba, int ldba, float *o, int ldo, int n,
                                        const float *src, float *dst, float *w);
static void infer__l2norm(float *x, int n, float eps);
static void infer__gated_norm(const infer__kernels *kern, float *y, const float *z, const float *w, int n, float eps,
                              int gate_first);
/* context.c: sequence seq's state slot `slot` (rs_slot floats), and layer l's part of it (a recurrent layer) */
static float *infer__rs_slot(const infer_context *c, int seq, int slot);
static float *infer__rs_at(const infer_context *c, int seq, int slot, int l);
/* decode.c: room for rows of logits (n_vocab floats); 0 when memory runs
   out. */
static int infer__reserve_logits(infer_context *c, int rows);

#endif /* INFER_CONTEXT_H */

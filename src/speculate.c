/* speculate.c - speculative decoding's drafts: tokens proposed cheaply,
   then verified by the model in one forward pass (request.c feeds a
   request's pending token and its draft together, logits kept at every
   position, and samples through them).

   Why the output does not change. Position j's logits (after the pending
   token and draft[0..j)) are exactly those one-token decoding would have
   had there once draft[0..j) were accepted, so request.c samples token j
   from them with the request's own sampler, as without a draft, and goes
   on to position j + 1 only where that token is draft[j]. For a greedy
   sampler that is the longest prefix of the draft the model agrees with,
   plus the model's own next token: the output is the same token for token.
   With sampling, it is the standard rejection rule (Leviathan et al.
   2023, Chen et al. 2023) for a draft that is deterministic: its q puts
   all mass on the draft token x, so the rule "accept x with probability
   min(1, p(x)/q(x)) = p(x), else sample from max(0, p - q) renormalised"
   reads "accept x with probability p(x), else sample from p with x
   removed, renormalised". Drawing t from p and accepting exactly when
   t == x does that: P(t = x) = p(x), and given t != x, t follows p without
   x renormalised. So each token is one draw from the distribution it would
   have had without speculation, the sampler's penalties, grammar and
   random sequence advanced by kept tokens only (a grammar needs no special
   case: each row is sampled under the grammar's state after the tokens
   before it). A draft model that drafts greedily is deterministic too, so
   the same holds for it. The one difference: a pass of several tokens
   sums some products in another order than a one-token pass (the batched
   kernels), so the logits may differ in their last bits and a near-tie,
   or a seeded draw that falls on a boundary, can go the other way. */
#include "context.h"

/* Prompt lookup (n-gram) drafting: the tokens that followed the most
   recent earlier occurrence of the last n tokens of hist[0..n_hist), for
   n from ngram_max down to ngram_min (a longer match predicts better, a
   shorter one more often); up to max_draft of them into out. Returns how
   many (0: no earlier occurrence, or nothing to propose). */
static int infer__spec_lookup(const infer_token *hist, int n_hist, int ngram_min, int ngram_max, int max_draft,
                              infer_token *out) {
    int ng, i, j, n;
    if (!hist || max_draft <= 0) return 0;
    for (ng = INFER__MIN(ngram_max, n_hist - 1); ng >= INFER__MAX(ngram_min, 1); ng--) {
        const infer_token *tail = hist + n_hist - ng;
        /* from the latest start that leaves a token after the match */
        for (i = n_hist - ng - 1; i >= 0; i--) {
            for (j = 0; j < ng && hist[i + j] == tail[j]; j++) {}
            if (j < ng) continue;
            n = INFER__MIN(max_draft, n_hist - (i + ng));
            memcpy(out, hist + i + ng, (size_t)n * sizeof *out);
            return n;
        }
    }
    return 0;
}

/* Feeds tokens[0..n) to sequence seq of c in passes of at most 64 tokens,
   the last one's logits kept. */
static infer_status infer__spec_feed(infer_context *c, int seq, const infer_token *tokens, int n, infer_error *err) {
    int seqs[64], i, at;
    for (i = 0; i < 64; i++) seqs[i] = seq;
    for (at = 0; at < n; at += 64) {
        infer_batch b;
        infer_status st;
        b.n = INFER__MIN(64, n - at);
        b.tokens = tokens + at;
        b.seq = seqs;
        b.logits = NULL; /* the last token's */
        if ((st = infer_decode_batch(c, &b, err)) != INFER_OK) return st;
    }
    return INFER_OK;
}

/* A draft model's proposal: sequence seq of the draft context dc is made
   to hold hist[0..n_hist) (what it already shares with hist kept, the
   rest fed), then its greedy tokens are decoded one by one, up to
   max_draft of them (fewer where its context has no room, or after an
   end-of-generation token), into out. Greedy keeps the draft
   deterministic (see the rule above). Returns how many; 0 where the draft
   context fails (err set), which costs the request nothing but the
   speed-up. Its cache then holds hist and the draft but the last token:
   the next call keeps what the target accepted. */
static int infer__spec_draft_model(infer_context *dc, int seq, const infer_token *hist, int n_hist, int max_draft,
                                   infer_token *out, infer_error *err) {
    const infer_model *dm = dc->model;
    int n_tok = 0, common = 0, kept, n = 0, n_vocab = infer_model_n_vocab(dm), i;
    const infer_token *t = infer_seq_tokens(dc, seq, &n_tok);
    if (n_hist <= 0 || max_draft <= 0) return 0;
    while (t && common < n_tok && common < n_hist && t[common] == hist[common]) common++;
    if (common >= n_hist) common = n_hist - 1; /* the last token is fed again for its logits */
    infer_seq_truncate(dc, seq, common, &kept, NULL); /* (a sliding window may keep less) */
    max_draft = INFER__MIN(max_draft, infer_context_n_ctx(dc) - n_hist);
    if (max_draft <= 0 || infer__spec_feed(dc, seq, hist + kept, n_hist - kept, err) != INFER_OK) return 0;
    while (n < max_draft) {
        const float *l = infer_seq_logits(dc, seq);
        infer_token best = 0;
        if (!l) break;
        for (i = 1; i < n_vocab; i++)
            if (l[i] > l[best]) best = i;
        out[n++] = best;
        if (n == max_draft || infer_model_is_eog(dm, best)) break;
        if (infer__spec_feed(dc, seq, &best, 1, err) != INFER_OK) break;
    }
    return n;
}

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
   n from ngram_max down to 1 (a longer match predicts better, a shorter
   one more often); up to max_draft of them into out. Returns how many (0:
   no earlier occurrence, or nothing to propose). */
static int infer__spec_lookup(const infer_token *hist, int n_hist, int ngram_max, int max_draft, infer_token *out) {
    int ng, i, j, n;
    if (!hist || max_draft <= 0) return 0;
    for (ng = INFER__MIN(ngram_max, n_hist - 1); ng >= 1; ng--) {
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

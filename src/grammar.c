/* grammar.c - the GBNF matcher, and the mask of tokens that may come next
   (gbnf.c compiles the text; schema.c writes JSON schemas as GBNF).

   The matcher is a pushdown automaton, as llama.cpp's: a state is a set of
   stacks of element positions, each stack's top a character set the next
   code point must match; an empty stack means the grammar may end there.
   Text is matched as Unicode code points decoded from the tokens' bytes, a
   character split across tokens carried as a partial state. */
#include "internal.h"
#include "gbnf.h"

/* ---- the matcher ------------------------------------------------------------ */

/* Stack sets live in an arena of ints, each as [n_stacks, ints in all]
   followed by its stacks, each [length, hash, positions bottom to top].
   A walk over the token trie keeps one set per depth, last in first out. */
typedef struct infer__gframe {
    int len, p, base, a, a_end; /* an expansion of the reference p on top of a stack len long */
} infer__gframe;

typedef struct infer__gm {
    const infer__grules *g;
    int *pool;
    int n, cap;
    int *tmp; /* a stack being expanded: tmp_cap ints, grown up to max_depth + 1 */
    int tmp_cap, max_depth, max_stacks;
    infer__gframe *frames; /* the expansions running (a stack of their own, not the C stack) */
    int frames_cap;
    uint32_t *ht_gen;
    int *ht_off;
    int ht_size;  /* a power of two, grown to stay at most half full */
    int set_room; /* stacks a set may hold before the table grows (or the limit) */
    uint32_t gen;
    int set_off, set_count;
    long steps; /* rule expansions for the set being built */
    int nomem; /* the arena could not grow: what it computed since is wrong */
    const char *limit; /* likewise for a limit that was exceeded: which */
} infer__gm;

/* A match state: a set (off < 0: none, nothing can follow) and the part
   of a UTF-8 character read so far: its bits, the bytes still to come and
   the range the next one must be in. */
typedef struct infer__gst {
    int off;
    uint32_t cp;
    int remain, lo, hi;
} infer__gst;

static void infer__gm_free(infer__gm *m) {
    INFER_FREE(m->pool);
    INFER_FREE(m->tmp);
    INFER_FREE(m->frames);
    INFER_FREE(m->ht_gen);
    INFER_FREE(m->ht_off);
    memset(m, 0, sizeof *m);
}

static int infer__gm_init(infer__gm *m, const infer__grules *g) {
    memset(m, 0, sizeof *m);
    m->g = g;
    m->cap = 4096;
    m->max_depth = INFER__MAX(INFER__G_MAX_DEPTH, g->n_el);
    m->max_stacks = INFER__MAX(INFER__G_MAX_STACKS, g->n_el);
    m->tmp_cap = 1024;
    m->frames_cap = 256;
    m->ht_size = INFER__G_HT;
    m->set_room = INFER__MIN(INFER__G_HT / 2, m->max_stacks);
    m->pool = (int *)INFER_MALLOC((size_t)m->cap * sizeof(int));
    m->tmp = (int *)INFER_MALLOC((size_t)m->tmp_cap * sizeof(int));
    m->frames = (infer__gframe *)INFER_MALLOC((size_t)m->frames_cap * sizeof *m->frames);
    m->ht_gen = (uint32_t *)infer__calloc(INFER__G_HT, sizeof(uint32_t));
    m->ht_off = (int *)infer__calloc(INFER__G_HT, sizeof(int));
    if (!m->pool || !m->tmp || !m->frames || !m->ht_gen || !m->ht_off) {
        infer__gm_free(m);
        return 0;
    }
    return 1;
}

/* Marks the state wrong because a limit was exceeded (the first one named). */
static void infer__gm_limit(infer__gm *m, const char *which) {
    if (!m->limit) m->limit = which;
}

static int infer__gm_reserve(infer__gm *m, int k) {
    int cap;
    int *p;
    if (m->n + k <= m->cap) return 1;
    if ((long)m->n + k > INFER__G_MAX_POOL_INTS) {
        infer__gm_limit(m, "the grammar's matcher needs more than 512 MiB of stacks (infer.h's limit)");
        return 0;
    }
    cap = (int)INFER__MIN(INFER__MAX((long)m->cap * 2, (long)m->n + k + 1024), (long)INFER__G_MAX_POOL_INTS);
    p = (int *)INFER_REALLOC(m->pool, (size_t)cap * sizeof(int));
    if (!p) {
        m->nomem = 1;
        return 0;
    }
    m->pool = p;
    m->cap = cap;
    return 1;
}

/* Room in tmp for a stack of need elements: 0 (flagged) past max_depth. */
static int infer__gm_tmp_fit(infer__gm *m, int need) {
    int cap;
    int *p;
    if (need <= m->tmp_cap) return 1;
    if (need > m->max_depth) {
        infer__gm_limit(m, "the text nests deeper than the grammar's matcher allows (a stack of more than "
                           INFER__G_STR(INFER__G_MAX_DEPTH) " elements or the grammar's element count, "
                           "infer.h's limit)");
        return 0;
    }
    cap = (int)INFER__MIN(INFER__MAX((long)m->tmp_cap * 2, (long)need), (long)m->max_depth);
    p = (int *)INFER_REALLOC(m->tmp, (size_t)cap * sizeof(int));
    if (!p) {
        m->nomem = 1;
        return 0;
    }
    m->tmp = p;
    m->tmp_cap = cap;
    return 1;
}

static int infer__gm_is_end(const infer__grules *g, int p) {
    return g->el[p].type == INFER__GE_END || g->el[p].type == INFER__GE_ALT;
}

static int infer__gm_in(const infer__grules *g, int set, uint32_t cp) {
    const infer__grange *r = g->ranges + g->set_first[set], *e = g->ranges + g->set_first[set + 1];
    for (; r < e; r++) {
        if (cp < r->lo) return 0;
        if (cp <= r->hi) return 1;
    }
    return 0;
}

static int infer__gm_overlaps(const infer__grules *g, int set, uint32_t lo, uint32_t hi) {
    const infer__grange *r = g->ranges + g->set_first[set], *e = g->ranges + g->set_first[set + 1];
    for (; r < e && r->lo <= hi; r++)
        if (r->hi >= lo) return 1;
    return 0;
}

/* Doubles the table that deduplicates stacks, the set being built moved
   into it. */
static int infer__gm_ht_grow(infer__gm *m) {
    int size = m->ht_size * 2, k, o;
    uint32_t *gen = (uint32_t *)infer__calloc((size_t)size, sizeof(uint32_t));
    int *off = (int *)infer__calloc((size_t)size, sizeof(int));
    if (!gen || !off) {
        INFER_FREE(gen);
        INFER_FREE(off);
        m->nomem = 1;
        return 0;
    }
    INFER_FREE(m->ht_gen);
    INFER_FREE(m->ht_off);
    m->ht_gen = gen;
    m->ht_off = off;
    m->ht_size = size;
    m->set_room = INFER__MIN(size / 2, m->max_stacks);
    for (k = 0, o = m->set_off + 2; k < m->set_count; k++, o += m->pool[o] + 2) {
        int slot = m->pool[o + 1] & (size - 1);
        while (gen[slot] == m->gen) slot = (slot + 1) & (size - 1);
        gen[slot] = m->gen;
        off[slot] = o;
    }
    return 1;
}

/* Adds stack s to the set being built, unless it holds it already. */
static void infer__gm_add(infer__gm *m, const int *s, int len) {
    uint32_t h = 2166136261u;
    int i, slot, o;
    for (i = 0; i < len; i++) h = (h ^ (uint32_t)s[i]) * 16777619u;
    h &= 0x7fffffff;
    slot = (int)(h & (uint32_t)(m->ht_size - 1));
    while (m->ht_gen[slot] == m->gen) {
        o = m->ht_off[slot];
        if (m->pool[o] == len && m->pool[o + 1] == (int)h && !memcmp(m->pool + o + 2, s, (size_t)len * sizeof(int)))
            return;
        slot = (slot + 1) & (m->ht_size - 1);
    }
    if (m->set_count >= m->set_room) { /* the table half full, or the limit */
        if (m->set_count >= m->max_stacks) {
            infer__gm_limit(m, "the grammar is more ambiguous than the matcher allows (a state of more than "
                               INFER__G_STR(INFER__G_MAX_STACKS) " stacks or the grammar's element count, "
                               "infer.h's limit)");
            return;
        }
        if (!infer__gm_ht_grow(m)) return;
        slot = (int)(h & (uint32_t)(m->ht_size - 1));
        while (m->ht_gen[slot] == m->gen) slot = (slot + 1) & (m->ht_size - 1);
    }
    if (!infer__gm_reserve(m, len + 2)) return;
    o = m->n;
    m->pool[o] = len;
    m->pool[o + 1] = (int)h;
    if (len) memcpy(m->pool + o + 2, s, (size_t)len * sizeof(int));
    m->n += len + 2;
    m->ht_gen[slot] = m->gen;
    m->ht_off[slot] = o;
    m->set_count++;
}

static int infer__gm_begin(infer__gm *m) {
    if (!infer__gm_reserve(m, 2)) return 0;
    m->set_off = m->n;
    m->n += 2;
    m->set_count = 0;
    m->steps = 0;
    if (++m->gen == 0) { /* wrapped: old stamps could match again */
        memset(m->ht_gen, 0, (size_t)m->ht_size * sizeof(uint32_t));
        m->gen = 1;
    }
    return 1;
}

/* Closes the set being built: its offset, or -1 (and nothing kept) when it
   holds no stack. */
static int infer__gm_end(infer__gm *m) {
    if (!m->set_count) {
        m->n = m->set_off;
        return -1;
    }
    m->pool[m->set_off] = m->set_count;
    m->pool[m->set_off + 1] = m->n - m->set_off;
    return m->set_off;
}

/* Room for one more frame of infer__gm_expand: 0 (flagged) past
   4 * max_depth of them. */
static int infer__gm_frames_grow(infer__gm *m) {
    long cap = INFER__MIN(2L * m->frames_cap, 4L * m->max_depth);
    infer__gframe *f;
    if (m->frames_cap >= cap) {
        infer__gm_limit(m, "the grammar's matcher would expand rules nested deeper than 4 times its stack "
                           "limit (infer.h's limit)");
        return 0;
    }
    f = (infer__gframe *)INFER_REALLOC(m->frames, (size_t)cap * sizeof *f);
    if (!f) {
        m->nomem = 1;
        return 0;
    }
    m->frames = f;
    m->frames_cap = (int)cap;
    return 1;
}

/* Expands the stack tmp[0..len) until its top is a character set (or it
   is empty) and adds the results: a rule reference on top is replaced by
   what follows it (unless it ends its alternative) and, on that, each of
   the rule's alternatives. tmp[0..len) is as it was on return. A
   depth-first search with a stack of frames of its own (one per reference
   being expanded), so that deep grammars cannot overflow the C stack;
   terminates because left recursion is refused. */
static void infer__gm_expand(infer__gm *m, int len) {
    const infer__grules *g = m->g;
    int depth = 0, a = 0, a_end = 0, base = 0; /* the innermost frame's, kept out of memory */
    for (;;) {
        /* the stack tmp[0..len): added, or a frame to expand its top */
        if (len == 0 || g->el[m->tmp[len - 1]].type == INFER__GE_TERM) infer__gm_add(m, m->tmp, len);
        else if (m->limit || m->nomem) return; /* the state is wrong already: no more work */
        else if (++m->steps > INFER__G_MAX_STEPS) {
            infer__gm_limit(m, "the grammar's matcher would take more than " INFER__G_STR(INFER__G_MAX_STEPS)
                               " steps for one character (infer.h's limit)");
            return;
        } else if (depth < m->frames_cap || infer__gm_frames_grow(m)) {
            int p = m->tmp[len - 1], r = g->el[p].val;
            infer__gframe *f = &m->frames[depth];
            if (depth) m->frames[depth - 1].a = a;
            depth++;
            f->len = len;
            f->p = p;
            base = len - 1;
            if (!infer__gm_is_end(g, p + 1)) m->tmp[base++] = p + 1;
            f->base = base;
            a = g->alt_first[r];
            f->a_end = a_end = g->alt_first[r + 1];
        } /* else flagged: the state is wrong */
        if (!depth) return;
        /* the innermost frame's next alternative; one that starts with a
           character set is added here (the common case, kept cheap) */
        for (;;) {
            int q;
            if (a == a_end) {
                const infer__gframe *f = &m->frames[--depth];
                m->tmp[f->len - 1] = f->p;
                if (!depth) return;
                a = f[-1].a;
                a_end = f[-1].a_end;
                base = f[-1].base;
                continue;
            }
            q = g->alt_pos[a++];
            if (infer__gm_is_end(g, q)) {
                len = base;
                break;
            }
            if (base >= m->tmp_cap && !infer__gm_tmp_fit(m, base + 1)) continue; /* flagged */
            m->tmp[base] = q;
            if (g->el[q].type == INFER__GE_TERM) infer__gm_add(m, m->tmp, base + 1);
            else {
                len = base + 1;
                break;
            }
        }
    }
}

/* The set of the stacks of set `off` that match code point cp, moved past
   it; -1 when none does. */
static int infer__gm_advance(infer__gm *m, int off, uint32_t cp) {
    const infer__grules *g = m->g;
    int k, n_st, i;
    if (!infer__gm_begin(m)) return -1;
    n_st = m->pool[off];
    i = off + 2;
    for (k = 0; k < n_st; k++) {
        int len = m->pool[i];
        if (len > 0) {
            int top = m->pool[i + 1 + len];
            if (infer__gm_in(g, g->el[top].val, cp) && (len <= m->tmp_cap || infer__gm_tmp_fit(m, len))) {
                int l = len - 1;
                memcpy(m->tmp, m->pool + i + 2, (size_t)l * sizeof(int));
                if (!infer__gm_is_end(g, top + 1)) m->tmp[l++] = top + 1;
                infer__gm_expand(m, l); /* may move the pool */
            }
        }
        i += len + 2;
    }
    return infer__gm_end(m);
}

/* The grammar's start: each alternative of the root rule, expanded. */
static int infer__gm_start(infer__gm *m) {
    const infer__grules *g = m->g;
    int a;
    if (!infer__gm_begin(m)) return -1;
    for (a = g->alt_first[g->root]; a < g->alt_first[g->root + 1]; a++) {
        int q = g->alt_pos[a];
        if (infer__gm_is_end(g, q)) infer__gm_add(m, m->tmp, 0);
        else {
            m->tmp[0] = q;
            infer__gm_expand(m, 1);
        }
    }
    return infer__gm_end(m);
}

/* Whether some stack of the state's set may take a code point in the range
   a partly read character can still become. */
static int infer__gm_partial_ok(const infer__gm *m, const infer__gst *st) {
    const infer__grules *g = m->g;
    int shift = 6 * (st->remain - 1), k, n_st, i;
    uint32_t base = st->cp << (6 * st->remain);
    uint32_t lo = base | (uint32_t)(st->lo & 0x3F) << shift;
    uint32_t hi = base | (uint32_t)(st->hi & 0x3F) << shift | ((1u << shift) - 1);
    if (st->off < 0) return 0;
    n_st = m->pool[st->off];
    i = st->off + 2;
    for (k = 0; k < n_st; k++) {
        int len = m->pool[i];
        if (len > 0 && infer__gm_overlaps(g, g->el[m->pool[i + 1 + len]].val, lo, hi)) return 1;
        i += len + 2;
    }
    return 0;
}

/* Reads one byte of UTF-8 after state in: 1 with *cp when it completes a
   character, 0 when the character goes on (out holds the part read; its
   set is in's), -1 for bytes that are not UTF-8 (no overlong forms,
   surrogates or values past U+10FFFF). */
static int infer__gm_utf8(const infer__gst *in, unsigned b, infer__gst *out, uint32_t *cp) {
    int remain, lo = 0x80, hi = 0xBF;
    uint32_t c = 0;
    if (in->remain == 0) {
        remain = infer__utf8_lead(b, &lo, &hi, &c);
        if (remain < 0) return -1;
        if (remain == 0) {
            *cp = c;
            return 1;
        }
    } else {
        if ((int)b < in->lo || (int)b > in->hi) return -1;
        c = in->cp << 6 | (b & 0x3F);
        remain = in->remain - 1;
        if (remain == 0) {
            *cp = c;
            return 1;
        }
    }
    out->off = in->off;
    out->cp = c;
    out->remain = remain;
    out->lo = lo;
    out->hi = hi;
    return 0;
}

/* Moves state in past one byte into out (its set, if a character was
   completed, appended to the arena). 0 where the grammar refuses it, or
   the bytes are not UTF-8. */
static int infer__gm_step(infer__gm *m, const infer__gst *in, unsigned b, infer__gst *out) {
    uint32_t cp;
    int r;
    if (in->off < 0) return 0;
    r = infer__gm_utf8(in, b, out, &cp);
    if (r < 0) return 0;
    if (r == 0) return infer__gm_partial_ok(m, out);
    out->off = infer__gm_advance(m, in->off, cp);
    out->remain = 0, out->cp = 0, out->lo = out->hi = 0; /* no character half read */
    return out->off >= 0;
}

/* Whether the grammar may end in this state: no character half read and
   an empty stack in the set. */
static int infer__gm_done(const infer__gm *m, const infer__gst *st) {
    int k, n_st, i;
    if (st->off < 0 || st->remain) return 0;
    n_st = m->pool[st->off];
    i = st->off + 2;
    for (k = 0; k < n_st; k++) {
        if (m->pool[i] == 0) return 1;
        i += m->pool[i] + 2;
    }
    return 0;
}

/* Moves st past n bytes; 0 (st's set gone) if the grammar refuses them. */
static int infer__gm_feed(infer__gm *m, infer__gst *st, const char *bytes, size_t n) {
    size_t i;
    for (i = 0; i < n; i++) {
        infer__gst next;
        if (!infer__gm_step(m, st, (unsigned char)bytes[i], &next)) {
            st->off = -1;
            return 0;
        }
        *st = next;
    }
    return 1;
}

/* Whole-text match (for tests and checks): 1 if text is a complete
   sentence of the grammar, 0 if it is a proper prefix of one, -1 if no
   sentence starts with it; -2 if memory ran out or a limit of the
   matcher was exceeded (then, with limit, which: NULL when memory). */
INFER__UNUSED static int infer__grules_match_why(const infer__grules *g, const char *text, size_t n,
                                                  const char **limit) {
    infer__gm m;
    infer__gst st;
    int r;
    if (limit) *limit = NULL;
    if (!infer__gm_init(&m, g)) return -2;
    memset(&st, 0, sizeof st);
    st.off = infer__gm_start(&m);
    r = infer__gm_feed(&m, &st, text, n) ? infer__gm_done(&m, &st) : -1;
    if (m.nomem || m.limit) {
        if (limit) *limit = m.limit;
        r = -2;
    }
    infer__gm_free(&m);
    return r;
}

INFER__UNUSED static int infer__grules_match(const infer__grules *g, const char *text, size_t n) {
    return infer__grules_match_why(g, text, n, NULL);
}

/* Scratch of a walk over the trie: the state at each depth, and two
   tables that make most steps a lookup. Within one walk every set is kept
   once (interned: same stacks, same offset), so the set a code point
   leads to from a set is remembered by the pair; inside a JSON string,
   say, most of the vocabulary's bytes then cost a table probe. Entries of
   earlier walks are told apart by a generation stamp. */
#define INFER__G_MEMO 16384     /* remembered steps (direct-mapped: a collision replaces) */
#define INFER__G_SETS 65536     /* slots for the interned sets; at half full the walk starts again unmemoized */
#define INFER__G_WALK_INTS (1 << 22) /* arena ints one memoized walk may use, likewise */

typedef struct infer__gmemo {
    uint32_t gen;
    int off, res;
    uint32_t cp;
} infer__gmemo;

typedef struct infer__gset {
    uint32_t gen, h;
    int off;
} infer__gset;

typedef struct infer__gwalk {
    infer__gst *st; /* per depth: max_len + 1 */
    int *mark;      /* per depth: the arena's size after its state (walks without the tables) */
    infer__gmemo *memo;
    infer__gset *sets;
    int n_sets;
    uint32_t gen;
} infer__gwalk;

static void infer__gwalk_free(infer__gwalk *w) {
    INFER_FREE(w->st);
    INFER_FREE(w->mark);
    INFER_FREE(w->memo);
    INFER_FREE(w->sets);
    memset(w, 0, sizeof *w);
}

static int infer__gwalk_init(infer__gwalk *w, int max_len) {
    memset(w, 0, sizeof *w);
    w->st = (infer__gst *)INFER_MALLOC(((size_t)max_len + 1) * sizeof *w->st);
    w->mark = (int *)INFER_MALLOC(((size_t)max_len + 1) * sizeof *w->mark);
    w->memo = (infer__gmemo *)infer__calloc(INFER__G_MEMO, sizeof *w->memo);
    w->sets = (infer__gset *)infer__calloc(INFER__G_SETS, sizeof *w->sets);
    if (!w->st || !w->mark || !w->memo || !w->sets) {
        infer__gwalk_free(w);
        return 0;
    }
    return 1;
}

/* The offset of the set equal to the one at off (just made, at the arena's
   end: dropped when an equal one is kept), keeping it if new; -2 when the
   tables are full. */
static int infer__gwalk_intern(infer__gwalk *w, infer__gm *m, int off) {
    const int *p = m->pool + off;
    int size = p[1], i, slot;
    uint32_t h = 2166136261u;
    for (i = 0; i < size; i++) h = (h ^ (uint32_t)p[i]) * 16777619u;
    slot = (int)(h & (INFER__G_SETS - 1));
    while (w->sets[slot].gen == w->gen) {
        const infer__gset *e = &w->sets[slot];
        if (e->h == h && m->pool[e->off + 1] == size &&
            !memcmp(m->pool + e->off, p, (size_t)size * sizeof(int))) {
            m->n = off;
            return e->off;
        }
        slot = (slot + 1) & (INFER__G_SETS - 1);
    }
    if (w->n_sets >= INFER__G_SETS / 2) return -2;
    w->sets[slot].gen = w->gen;
    w->sets[slot].h = h;
    w->sets[slot].off = off;
    w->n_sets++;
    return off;
}

static void infer__gwalk_start(infer__gwalk *w) {
    if (++w->gen == 0) { /* wrapped: old stamps could match again */
        memset(w->memo, 0, INFER__G_MEMO * sizeof *w->memo);
        memset(w->sets, 0, INFER__G_SETS * sizeof *w->sets);
        w->gen = 1;
    }
    w->n_sets = 0;
}

/* ---- a grammar over a model's tokens -------------------------------------- */

/* The compiled grammar, the match state, and a trie of every token's text
   (nodes in preorder: node i's subtree is nodes i .. nend[i] - 1, so a
   walk skips a refused branch in one step). */
typedef struct infer__grammar {
    infer__grules *g;
    infer__gm m;
    infer__gst cur;     /* the current state; its set at the arena's start */
    infer__gst start;   /* the initial state, kept in `init` */
    int *init;
    int init_n;
    int n_vocab;
    char *pieces;       /* token t's text: pieces[poff[t] .. poff[t + 1]) */
    int *poff;
    unsigned char *eog; /* per token: ends generation */
    infer_token *eog_ids;
    int n_eog;
    int n_nodes, max_len;
    unsigned char *nbyte;
    int *ndepth, *nend, *ntok; /* ntok: n_nodes + 1; node i's tokens are toks[ntok[i] .. ntok[i + 1]) */
    infer_token *toks;
    infer__gwalk walk;
    int *snap; /* the state before the last sample, for infer_sampler_top_probs */
    int snap_n, snap_cap;
    infer__gst snap_st;
} infer__grammar;

static void infer__grammar_free(infer__grammar *G) {
    if (!G) return;
    infer__grules_free(G->g);
    infer__gm_free(&G->m);
    INFER_FREE(G->init);
    INFER_FREE(G->pieces);
    INFER_FREE(G->poff);
    INFER_FREE(G->eog);
    INFER_FREE(G->eog_ids);
    INFER_FREE(G->nbyte);
    INFER_FREE(G->ndepth);
    INFER_FREE(G->nend);
    INFER_FREE(G->ntok);
    INFER_FREE(G->toks);
    infer__gwalk_free(&G->walk);
    INFER_FREE(G->snap);
    INFER_FREE(G);
}

/* Makes st the current state: its set moved to the arena's start. */
static void infer__grammar_settle(infer__grammar *G, infer__gst st) {
    if (st.off >= 0) {
        int size = G->m.pool[st.off + 1];
        if (st.off > 0) memmove(G->m.pool, G->m.pool + st.off, (size_t)size * sizeof(int));
        st.off = 0;
        G->m.n = size;
    } else G->m.n = 0;
    G->cur = st;
}

static void infer__grammar_reset(infer__grammar *G) {
    infer__gst st = G->start;
    G->m.n = 0;
    G->m.nomem = 0;
    G->m.limit = NULL;
    if (st.off >= 0) {
        memcpy(G->m.pool, G->init, (size_t)G->init_n * sizeof(int)); /* the arena holds at least this much */
        G->m.n = G->init_n;
    }
    G->cur = st;
}

typedef struct infer__gpiece {
    const unsigned char *p;
    int len;
    infer_token id;
} infer__gpiece;

static int infer__gpiece_cmp(const void *a, const void *b) {
    const infer__gpiece *x = (const infer__gpiece *)a, *y = (const infer__gpiece *)b;
    int n = INFER__MIN(x->len, y->len), c = memcmp(x->p, y->p, (size_t)n);
    if (c) return c;
    if (x->len != y->len) return x->len - y->len;
    return x->id - y->id;
}

/* Lays out the trie of items[lo..hi) (sorted, sharing their first depth
   bytes) as node n_nodes and its subtree. */
static void infer__grammar_trie(infer__grammar *G, const infer__gpiece *items, int lo, int hi, int depth, int byte,
                                int *n_toks) {
    int id = G->n_nodes++;
    G->nbyte[id] = (unsigned char)byte;
    G->ndepth[id] = depth;
    G->ntok[id] = *n_toks;
    while (lo < hi && items[lo].len == depth) G->toks[(*n_toks)++] = items[lo++].id;
    while (lo < hi) {
        int b = items[lo].p[depth], j = lo + 1;
        while (j < hi && items[j].p[depth] == b) j++;
        infer__grammar_trie(G, items, lo, j, depth + 1, b, n_toks);
        lo = j;
    }
    G->nend[id] = G->n_nodes;
}

static infer__grammar *infer__grammar_new(const infer_model *model, int n_vocab, const char *gbnf, const char *root,
                                          infer_error *err) {
    infer__grammar *G;
    infer__gpiece *items = NULL;
    int t, n_items = 0, n_toks = 0;
    size_t total = 0;
    infer__grules *g = infer__gbnf_compile(gbnf, root, err);
    if (!g) return NULL;
    G = (infer__grammar *)infer__calloc(1, sizeof *G);
    if (!G) {
        infer__grules_free(g);
        goto oom;
    }
    G->g = g;
    G->n_vocab = n_vocab;
    if (!infer__gm_init(&G->m, g)) goto oom;
    /* the start state, kept to reset to */
    memset(&G->start, 0, sizeof G->start);
    G->start.off = infer__gm_start(&G->m);
    if (G->m.nomem) goto oom;
    if (G->m.limit) { /* the start state alone is past the matcher's limits */
        infer__set_error(err, INFER_ERR_ARG, "grammar: %s", G->m.limit);
        infer__grammar_free(G);
        return NULL;
    }
    if (G->start.off >= 0) {
        G->init_n = G->m.n;
        G->init = (int *)INFER_MALLOC((size_t)G->init_n * sizeof(int));
        if (!G->init) goto oom;
        memcpy(G->init, G->m.pool, (size_t)G->init_n * sizeof(int));
    }
    infer__grammar_reset(G);
    /* every token's text */
    G->poff = (int *)infer__calloc((size_t)n_vocab + 1, sizeof(int));
    G->eog = (unsigned char *)infer__calloc((size_t)n_vocab, 1);
    G->eog_ids = (infer_token *)infer__calloc((size_t)n_vocab, sizeof(infer_token));
    if (!G->poff || !G->eog || !G->eog_ids) goto oom;
    for (t = 0; t < n_vocab; t++) {
        size_t len = 0;
        infer_token_to_piece(model, t, NULL, 0, &len, NULL);
        G->poff[t] = (int)total;
        total += len;
        if (infer_model_is_eog(model, t)) G->eog[t] = 1, G->eog_ids[G->n_eog++] = t;
    }
    G->poff[n_vocab] = (int)total;
    G->pieces = (char *)INFER_MALLOC(total + 1);
    items = (infer__gpiece *)infer__calloc((size_t)n_vocab + 1, sizeof *items);
    if (!G->pieces || !items) goto oom;
    for (t = 0; t < n_vocab; t++) {
        int len = G->poff[t + 1] - G->poff[t];
        /* (its NUL goes where the next piece starts, or in the last byte) */
        if (len > 0) infer_token_to_piece(model, t, G->pieces + G->poff[t], (size_t)len + 1, NULL, NULL);
        /* end of generation goes by the grammar's end, not by its text;
           empty (control) tokens are never text the grammar could want */
        if (len <= 0 || G->eog[t]) continue;
        items[n_items].p = (const unsigned char *)G->pieces + G->poff[t];
        items[n_items].len = len;
        items[n_items++].id = t;
        if (len > G->max_len) G->max_len = len;
    }
    qsort(items, (size_t)n_items, sizeof *items, infer__gpiece_cmp);
    G->nbyte = (unsigned char *)INFER_MALLOC(total + 1);
    G->ndepth = (int *)INFER_MALLOC((total + 1) * sizeof(int));
    G->nend = (int *)INFER_MALLOC((total + 1) * sizeof(int));
    G->ntok = (int *)INFER_MALLOC((total + 2) * sizeof(int));
    G->toks = (infer_token *)INFER_MALLOC(((size_t)n_items + 1) * sizeof(infer_token));
    if (!G->nbyte || !G->ndepth || !G->nend || !G->ntok || !G->toks || !infer__gwalk_init(&G->walk, G->max_len))
        goto oom;
    infer__grammar_trie(G, items, 0, n_items, 0, 0, &n_toks);
    G->ntok[G->n_nodes] = n_toks;
    INFER_FREE(items);
    return G;
oom:
    INFER_FREE(items);
    infer__grammar_free(G);
    infer__set_error(err, INFER_ERR_NOMEM, "grammar: out of memory");
    return NULL;
}

static int infer__grammar_done(const infer__grammar *G) { return infer__gm_done(&G->m, &G->cur); }

/* Whether memory ran out, or a limit of the matcher was exceeded, since the
   last reset: the state is then wrong (infer__grammar_limit says which
   limit). */
static int infer__grammar_nomem(const infer__grammar *G) { return G->m.nomem || G->m.limit; }

/* The limit infer__grammar_nomem stands for, a one-line message; NULL when
   it is memory that ran out (or nothing went wrong). */
INFER__UNUSED static const char *infer__grammar_limit(const infer__grammar *G) { return G->m.limit; }

/* Whether token t may come next: its bytes run through a copy of the state
   (end of generation: where the grammar may end). */
static int infer__grammar_allows(infer__grammar *G, infer_token t) {
    infer__gst st = G->cur;
    int n0 = G->m.n, ok, len;
    if (t < 0 || t >= G->n_vocab) return 0;
    if (G->eog[t]) return infer__grammar_done(G);
    len = G->poff[t + 1] - G->poff[t];
    if (len <= 0) return 0;
    ok = infer__gm_feed(&G->m, &st, G->pieces + G->poff[t], (size_t)len);
    G->m.n = n0;
    return ok;
}

/* Moves the grammar past token t's text. End-of-generation and empty
   tokens leave it as it is; a token it refuses leaves it refusing
   everything (until a reset). */
static void infer__grammar_accept(infer__grammar *G, infer_token t) {
    infer__gst st = G->cur;
    int len;
    if (t < 0 || t >= G->n_vocab || G->eog[t]) return;
    len = G->poff[t + 1] - G->poff[t];
    if (len <= 0) return;
    infer__gm_feed(&G->m, &st, G->pieces + G->poff[t], (size_t)len);
    infer__grammar_settle(G, st);
}

/* Moves the grammar past text that is no one token's (a lazy grammar's
   trigger and what followed it); 0, leaving the state as it was, where the
   grammar refuses it. */
static int infer__grammar_accept_text(infer__grammar *G, const char *text, size_t n) {
    infer__gst st = G->cur;
    int n0 = G->m.n;
    if (!infer__gm_feed(&G->m, &st, text, n) || G->m.nomem || G->m.limit) {
        G->m.n = n0;
        return 0;
    }
    infer__grammar_settle(G, st);
    return 1;
}

/* The walk with the tables; -1 (allowed half made) when they overflow. */
static int infer__grammar_walk_memo(const infer__grammar *G, infer__gm *m, const infer__gst *start, infer__gwalk *w,
                                    unsigned char *allowed, int count) {
    int i, k, n0 = m->n;
    infer__gwalk_start(w);
    w->st[0] = *start;
    if (infer__gwalk_intern(w, m, start->off) != start->off) return -1; /* start's set ends the arena */
    for (i = 1; i < G->n_nodes;) {
        int d = G->ndepth[i], r;
        const infer__gst *in = &w->st[d - 1];
        infer__gst *out = &w->st[d];
        uint32_t cp;
        r = infer__gm_utf8(in, G->nbyte[i], out, &cp);
        if (r == 0) r = infer__gm_partial_ok(m, out);
        else if (r == 1) {
            infer__gmemo *e = &w->memo[((uint32_t)in->off * 2654435761u ^ cp * 40503u) & (INFER__G_MEMO - 1)];
            int res;
            if (e->gen == w->gen && e->off == in->off && e->cp == cp) res = e->res;
            else {
                res = infer__gm_advance(m, in->off, cp);
                if (res >= 0 && (res = infer__gwalk_intern(w, m, res)) == -2) break;
                if (m->n - n0 > INFER__G_WALK_INTS) break;
                e->gen = w->gen;
                e->off = in->off;
                e->cp = cp;
                e->res = res;
            }
            out->off = res;
            out->remain = 0;
            r = res >= 0;
        }
        if (r <= 0) {
            i = G->nend[i];
            continue;
        }
        for (k = G->ntok[i]; k < G->ntok[i + 1]; k++) allowed[G->toks[k]] = 1, count++;
        i++;
    }
    m->n = n0;
    return i < G->n_nodes ? -1 : count;
}

/* The walk keeping only the states on the path (each depth's set above
   the last, dropped on the way back): memory bounded by the depth. */
static int infer__grammar_walk_plain(const infer__grammar *G, infer__gm *m, const infer__gst *start, infer__gwalk *w,
                                     unsigned char *allowed, int count) {
    int i, k;
    w->st[0] = *start;
    w->mark[0] = m->n;
    for (i = 1; i < G->n_nodes;) {
        int d = G->ndepth[i];
        m->n = w->mark[d - 1];
        if (!infer__gm_step(m, &w->st[d - 1], G->nbyte[i], &w->st[d])) {
            i = G->nend[i];
            continue;
        }
        w->mark[d] = m->n;
        for (k = G->ntok[i]; k < G->ntok[i + 1]; k++) allowed[G->toks[k]] = 1, count++;
        i++;
    }
    m->n = w->mark[0];
    return count;
}

/* The tokens state `start` allows, into allowed (n_vocab bytes, 1 where
   allowed); returns how many. A depth-first walk of the trie that carries
   the state down byte by byte and leaves a branch as soon as no stack
   survives its bytes. start's set must end the arena. memo: with the
   tables (falling back to the plain walk when they fill up). */
static int infer__grammar_walk(const infer__grammar *G, infer__gm *m, const infer__gst *start, infer__gwalk *w,
                               unsigned char *allowed, int memo) {
    int k, count = 0, r;
    memset(allowed, 0, (size_t)G->n_vocab);
    if (infer__gm_done(m, start))
        for (k = 0; k < G->n_eog; k++) allowed[G->eog_ids[k]] = 1, count++;
    if (start->off < 0) return count;
    if (memo && (r = infer__grammar_walk_memo(G, m, start, w, allowed, count)) >= 0) return r;
    if (memo) { /* half made: again from the start */
        memset(allowed, 0, (size_t)G->n_vocab);
        for (k = 0; k < G->n_eog && count; k++) allowed[G->eog_ids[k]] = 1;
    }
    return infer__grammar_walk_plain(G, m, start, w, allowed, count);
}

static int infer__grammar_mask(infer__grammar *G, unsigned char *allowed) {
    return infer__grammar_walk(G, &G->m, &G->cur, &G->walk, allowed, 1);
}

/* Keeps the current state for infer__grammar_mask_snapshot. */
static void infer__grammar_snapshot(infer__grammar *G) {
    int n = G->cur.off >= 0 ? G->m.n : 0;
    if (n > G->snap_cap) {
        int *p = (int *)INFER_REALLOC(G->snap, (size_t)n * sizeof(int));
        if (!p) {
            G->snap_st.off = -1;
            G->m.nomem = 1;
            return;
        }
        G->snap = p;
        G->snap_cap = n;
    }
    if (n) memcpy(G->snap, G->m.pool, (size_t)n * sizeof(int));
    G->snap_n = n;
    G->snap_st = G->cur;
}

/* The mask of the state kept by the last snapshot, with scratch of its own
   (the grammar is not changed); -1 when out of memory. */
static int infer__grammar_mask_snapshot(const infer__grammar *G, unsigned char *allowed) {
    infer__gm m;
    infer__gwalk w;
    int count = -1;
    if (!infer__gwalk_init(&w, G->max_len)) return -1;
    if (infer__gm_init(&m, G->g)) {
        if (infer__gm_reserve(&m, G->snap_n)) {
            if (G->snap_n) memcpy(m.pool, G->snap, (size_t)G->snap_n * sizeof(int));
            m.n = G->snap_n;
            count = infer__grammar_walk(G, &m, &G->snap_st, &w, allowed, 1);
            if (m.nomem || m.limit) count = -1;
        }
        infer__gm_free(&m);
    }
    infer__gwalk_free(&w);
    return count;
}

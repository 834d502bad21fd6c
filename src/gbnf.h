/* gbnf.h - a compiled GBNF grammar, as gbnf.c writes it and grammar.c's
   matcher reads it: elements, rules, character sets, and their limits. */
#ifndef INFER_GBNF_H
#define INFER_GBNF_H
#include "internal.h"

enum { INFER__GE_END = 0, INFER__GE_ALT, INFER__GE_REF, INFER__GE_TERM };

typedef struct infer__gel {
    int type, val; /* REF: rule id; TERM: character set id */
} infer__gel;

typedef struct infer__grange {
    uint32_t lo, hi;
} infer__grange;

/* A compiled grammar: rule r starts at el[rule_start[r]]; its alternatives
   start at alt_pos[alt_first[r] .. alt_first[r + 1]); character set s is
   the sorted, disjoint ranges[set_first[s] .. set_first[s + 1]) (negated
   classes are stored as their complement). */
typedef struct infer__grules {
    infer__gel *el;
    int n_el, n_rules, n_sets, root;
    int *rule_start, *alt_first, *alt_pos, *set_first;
    infer__grange *ranges;
} infer__grules;

/* Limits, each refused with an error that names it (none drops anything
   silently). The compiled grammar: elements (rule ends included) and
   character-set ranges; groups nested in the text. The matcher: a stack
   may be as deep, and a state hold as many stacks, as the larger of its
   constant and the grammar's element count (a stack deeper than that
   repeats a position: recursion the text itself nests); its arena of
   stacks is bounded too. */
#define INFER__G_MAX_ELEMENTS (1 << 20)
#define INFER__G_MAX_RANGES (1 << 20)
#define INFER__G_MAX_NEST 10000
#define INFER__G_MAX_DEPTH 65536
#define INFER__G_MAX_STACKS 65536
#define INFER__G_MAX_POOL_INTS (1 << 27) /* 512 MiB of stacks */
#define INFER__G_MAX_STEPS 4194304      /* rule expansions for one character (ambiguity run wild): the test
                                           suite's grammars take at most 131,089, and 4M take about 40 ms */
#define INFER__G_STR_(x) #x
#define INFER__G_STR(x) INFER__G_STR_(x) /* a limit's number in a message */
#define INFER__G_HT 4096 /* the first size of the table that deduplicates stacks (it grows) */

static void infer__grules_free(infer__grules *g);
/* Parses GBNF text; NULL with err set (INFER_ERR_ARG: a one-line message
   naming the problem and where it is). */
static infer__grules *infer__gbnf_compile(const char *text, const char *root, infer_error *err);
#endif /* INFER_GBNF_H */

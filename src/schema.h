/* schema.h - the schema converter's state, shared by schema.c and regex.c (a
   pattern's errors and shared rules go through the converter). */
#ifndef INFER_SCHEMA_H
#define INFER_SCHEMA_H
#include "internal.h"

/* a rule name taken, and the number to try next for names made from it */
typedef struct infer__sg_name {
    const char *name;
    int next;
} infer__sg_name;

typedef struct infer__sg {
    infer__jp *jp;          /* for errors: positions in the schema text */
    char **rules;           /* stbds: each rule's line, in order (the root first) */
    char **names;           /* stbds: the names of the schema's own rules (owned) */
    infer__sg_name *taken;  /* open-addressed hash table of every name in use */
    size_t taken_cap, taken_n;
    size_t size;            /* bytes of the rules written so far */
    double expanded;        /* items repeated so far, multiplied out */
    unsigned used;          /* shared rules used, as bits */
} infer__sg;

typedef struct infer__rx {
    infer__sg *sg;
    const infer__jv *v; /* the pattern: errors point at it */
    const char *p, *end;
    int depth;
} infer__rx;

/* the shared rule which (INFER__SP_...), marked used; its name (schema.c) */
static const char *infer__sg_prim(infer__sg *sg, int which);
/* the alternatives at rx->p as GBNF into b (regex.c) */
static int infer__rx_alternates(infer__rx *rx, infer__sb *b, int *nullable, double *weight);

#endif

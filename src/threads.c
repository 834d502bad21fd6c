/* threads.c - a persistent worker pool: threads are made once per context
   and woken for each parallel op, never created per op. The calling thread
   works as worker 0, so a pool of 1 runs everything inline.
   An op is a few microseconds during generation, so handing it out and
   waiting for it must cost less than that: workers spin on an atomic
   counter (yielding now and then, in case threads outnumber cores) and only
   fall asleep (platform.h's waiter) after a long idle spell. */
#include "internal.h"

#define INFER__SPINS_BEFORE_YIELD 64
#define INFER__SPINS_BEFORE_SLEEP (1 << 16)

struct infer__pool {
    int n;
    infer__thread *threads;
    infer__task_fn fn;
    void *arg;
    int generation; /* bumped (release) once fn/arg are published */
    int pending;    /* workers that have not finished the current op */
    int stop;
    int sleepers;   /* workers asleep on wake, or about to be */
    int bar_count;  /* workers at the barrier in this phase */
    int bar_phase;  /* bumped when the last one arrives */
    infer__waiter wake;
};

typedef struct infer__worker_arg {
    infer__pool *pool;
    int ith;
} infer__worker_arg;

/* a counter's next value, wrapping (as the atomic adds do) */
static int infer__wrap_inc(int v) { return (int)((unsigned)v + 1u); }

static void infer__spin(long *spins) {
    if (++*spins % INFER__SPINS_BEFORE_YIELD == 0) infer__thread_yield();
    else INFER__CPU_RELAX();
}

/* Waits until the generation differs from seen; returns the new one. */
static int infer__pool_wait(infer__pool *p, int seen) {
    int g;
    long spins = 0;
    while ((g = infer__atomic_load(&p->generation, INFER__ACQUIRE)) == seen) {
        if (spins < INFER__SPINS_BEFORE_SLEEP) {
            infer__spin(&spins);
            continue;
        }
        /* sequentially consistent on both sides (here and in pool_run), so
           either we see the new generation or the publisher sees us asleep */
        infer__atomic_fetch_add(&p->sleepers, 1, INFER__SEQ_CST);
        infer__waiter_wait(&p->wake, &p->generation, seen);
        infer__atomic_fetch_add(&p->sleepers, -1, INFER__SEQ_CST);
        spins = 0;
    }
    return g;
}

static void infer__worker(void *v) {
    infer__worker_arg wa = *(infer__worker_arg *)v;
    infer__pool *p = wa.pool;
    int seen = 0;
    INFER_FREE(v);
    for (;;) {
        seen = infer__pool_wait(p, seen);
        if (infer__atomic_load(&p->stop, INFER__ACQUIRE)) return;
        p->fn(p->arg, wa.ith, p->n);
        infer__atomic_fetch_add(&p->pending, -1, INFER__RELEASE);
    }
}

static infer__pool *infer__pool_new(int n_threads) {
    infer__pool *p = (infer__pool *)infer__calloc(1, sizeof *p);
    int i;
    if (!p) return NULL;
    if (n_threads < 1 || !INFER__THREADS) n_threads = 1;
    p->n = n_threads;
    infer__waiter_init(&p->wake);
    p->threads = (infer__thread *)infer__calloc((size_t)n_threads, sizeof(infer__thread));
    if (!p->threads) {
        p->n = 1;
        return p;
    }
    for (i = 1; i < n_threads; i++) {
        infer__worker_arg *wa = (infer__worker_arg *)INFER_MALLOC(sizeof *wa);
        if (!wa) break;
        wa->pool = p;
        wa->ith = i;
        if (!infer__thread_start(&p->threads[i], infer__worker, wa)) {
            INFER_FREE(wa);
            break;
        }
    }
    p->n = i; /* fewer if threads could not be made */
    return p;
}

static void infer__pool_free(infer__pool *p) {
    int i;
    if (!p) return;
    infer__atomic_store(&p->stop, 1, INFER__RELEASE);
    infer__atomic_fetch_add(&p->generation, 1, INFER__SEQ_CST);
    infer__waiter_wake(&p->wake, &p->generation);
    for (i = 1; i < p->n; i++) infer__thread_join(p->threads[i]);
    infer__waiter_destroy(&p->wake);
    INFER_FREE(p->threads);
    INFER_FREE(p);
}

static int infer__pool_size(const infer__pool *p) { return p->n; }

static void infer__pool_run(infer__pool *p, infer__task_fn fn, void *arg) {
    long spins = 0;
    if (p->n == 1) {
        fn(arg, 0, 1);
        return;
    }
    p->fn = fn;
    p->arg = arg;
    infer__atomic_store(&p->pending, p->n - 1, INFER__RELAXED);
    /* the waiter's lock is only touched when someone sleeps */
    infer__atomic_fetch_add(&p->generation, 1, INFER__SEQ_CST);
    if (infer__atomic_load(&p->sleepers, INFER__SEQ_CST)) infer__waiter_wake(&p->wake, &p->generation);
    fn(arg, 0, p->n);
    while (infer__atomic_load(&p->pending, INFER__ACQUIRE) > 0) infer__spin(&spins);
}

/* A task's steps meet here: the last worker to arrive opens the next phase.
   Workers spin (yielding now and then) since a step lasts microseconds. */
static void infer__pool_barrier(infer__pool *p) {
    int phase;
    long spins = 0;
    if (p->n == 1) return;
    phase = infer__atomic_load(&p->bar_phase, INFER__ACQUIRE);
    if (infer__atomic_fetch_add(&p->bar_count, 1, INFER__SEQ_CST) + 1 == p->n) {
        infer__atomic_store(&p->bar_count, 0, INFER__RELAXED);
        infer__atomic_store(&p->bar_phase, infer__wrap_inc(phase), INFER__RELEASE);
        return;
    }
    while (infer__atomic_load(&p->bar_phase, INFER__ACQUIRE) == phase) infer__spin(&spins);
}

static int infer__atomic_next(int *v) { return infer__atomic_fetch_add(v, 1, INFER__RELAXED); }

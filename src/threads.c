/* threads.c - a persistent worker pool: threads are made once per context
   and woken for each parallel op, never created per op. The calling thread
   works as worker 0, so a pool of 1 runs everything inline.
   An op is a few microseconds during generation, so handing it out and
   waiting for it must cost less than that: workers spin on an atomic
   counter (yielding now and then, in case threads outnumber cores) and only
   fall asleep on a condition variable after a long idle spell. */
#include "internal.h"

#if defined(_WIN32) || !defined(__GNUC__)
/* No pool here yet: everything runs on the calling thread. */
struct infer__pool { int n; };
static infer__pool *infer__pool_new(int n_threads) {
    infer__pool *p = (infer__pool *)infer__calloc(1, sizeof *p);
    (void)n_threads;
    if (p) p->n = 1;
    return p;
}
static void infer__pool_free(infer__pool *p) { INFER_FREE(p); }
static int infer__pool_size(const infer__pool *p) { return p->n; }
static void infer__pool_run(infer__pool *p, infer__task_fn fn, void *arg) { (void)p; fn(arg, 0, 1); }
static void infer__pool_barrier(infer__pool *p) { (void)p; }
static int infer__atomic_next(int *v) { return (*v)++; }
#else

#if defined(__x86_64__) || defined(__i386__)
#define INFER__PAUSE() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define INFER__PAUSE() __asm__ __volatile__("yield")
#else
#define INFER__PAUSE() ((void)0)
#endif

/* Emscripten 3.1's condition variable (musl's, over its futex) was seen
   to miss wake-ups: a worker then slept out its 100 ms slice, and a token
   of stories260K took 300 ms on two threads. There idle workers wait on
   the generation word itself (Atomics.wait) and the publisher wakes them
   by it (Atomics.notify), which wakes at once. */
#if defined(__EMSCRIPTEN_PTHREADS__)
#include <emscripten/threading.h>
#define INFER__FUTEX_POOL 1
#endif

#define INFER__SPINS_BEFORE_YIELD 64
#define INFER__SPINS_BEFORE_SLEEP (1 << 16)

struct infer__pool {
    int n;
    pthread_t *threads;
    infer__task_fn fn;
    void *arg;
    unsigned generation; /* bumped (release) once fn/arg are published */
    int pending;         /* workers that have not finished the current op */
    int stop;
    int sleepers;        /* workers waiting on wake, under mu */
    int bar_count;       /* workers at the barrier in this phase */
    unsigned bar_phase;  /* bumped when the last one arrives */
    pthread_mutex_t mu;
    pthread_cond_t wake;
};

typedef struct infer__worker_arg {
    infer__pool *pool;
    int ith;
} infer__worker_arg;

/* Waits until the generation differs from seen; returns the new one. */
static unsigned infer__pool_wait(infer__pool *p, unsigned seen) {
    unsigned g;
    long spins = 0;
    while ((g = __atomic_load_n(&p->generation, __ATOMIC_ACQUIRE)) == seen) {
        if (++spins < INFER__SPINS_BEFORE_SLEEP) {
            if (spins % INFER__SPINS_BEFORE_YIELD == 0) sched_yield();
            else INFER__PAUSE();
            continue;
        }
        /* sequentially consistent on both sides (here and in pool_run), so
           either we see the new generation or the publisher sees us asleep */
#ifdef INFER__FUTEX_POOL
        __atomic_add_fetch(&p->sleepers, 1, __ATOMIC_SEQ_CST);
        while (__atomic_load_n(&p->generation, __ATOMIC_SEQ_CST) == seen)
            emscripten_futex_wait(&p->generation, seen, INFINITY); /* returns at once if it moved on */
        __atomic_sub_fetch(&p->sleepers, 1, __ATOMIC_SEQ_CST);
#else
        pthread_mutex_lock(&p->mu);
        __atomic_add_fetch(&p->sleepers, 1, __ATOMIC_SEQ_CST);
        while (__atomic_load_n(&p->generation, __ATOMIC_SEQ_CST) == seen) pthread_cond_wait(&p->wake, &p->mu);
        __atomic_sub_fetch(&p->sleepers, 1, __ATOMIC_SEQ_CST);
        pthread_mutex_unlock(&p->mu);
#endif
        spins = 0;
    }
    return g;
}

static void *infer__worker(void *v) {
    infer__worker_arg wa = *(infer__worker_arg *)v;
    infer__pool *p = wa.pool;
    unsigned seen = 0;
    INFER_FREE(v);
    for (;;) {
        seen = infer__pool_wait(p, seen);
        if (__atomic_load_n(&p->stop, __ATOMIC_ACQUIRE)) return NULL;
        p->fn(p->arg, wa.ith, p->n);
        __atomic_sub_fetch(&p->pending, 1, __ATOMIC_RELEASE);
    }
}

static infer__pool *infer__pool_new(int n_threads) {
    infer__pool *p = (infer__pool *)infer__calloc(1, sizeof *p);
    int i;
    if (!p) return NULL;
    if (n_threads < 1) n_threads = 1;
    p->n = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    p->threads = (pthread_t *)infer__calloc((size_t)n_threads, sizeof(pthread_t));
    if (!p->threads) {
        p->n = 1;
        return p;
    }
    for (i = 1; i < n_threads; i++) {
        infer__worker_arg *wa = (infer__worker_arg *)INFER_MALLOC(sizeof *wa);
        if (!wa) break;
        wa->pool = p;
        wa->ith = i;
        if (pthread_create(&p->threads[i], NULL, infer__worker, wa) != 0) {
            INFER_FREE(wa);
            break;
        }
    }
    p->n = i; /* fewer if threads could not be made */
    return p;
}

/* Publishes the next generation and wakes sleepers. */
static void infer__pool_publish(infer__pool *p) {
    __atomic_add_fetch(&p->generation, 1, __ATOMIC_RELEASE);
#ifdef INFER__FUTEX_POOL
    emscripten_futex_wake(&p->generation, INT_MAX);
#else
    pthread_mutex_lock(&p->mu);
    if (p->sleepers) pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
#endif
}

static void infer__pool_free(infer__pool *p) {
    int i;
    if (!p) return;
    __atomic_store_n(&p->stop, 1, __ATOMIC_RELEASE);
    infer__pool_publish(p);
    for (i = 1; i < p->n; i++) pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
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
    __atomic_store_n(&p->pending, p->n - 1, __ATOMIC_RELAXED);
    /* the mutex is only touched when someone sleeps */
    __atomic_add_fetch(&p->generation, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&p->sleepers, __ATOMIC_SEQ_CST)) {
#ifdef INFER__FUTEX_POOL
        emscripten_futex_wake(&p->generation, INT_MAX);
#else
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
#endif
    }
    fn(arg, 0, p->n);
    while (__atomic_load_n(&p->pending, __ATOMIC_ACQUIRE) > 0)
        if (++spins % INFER__SPINS_BEFORE_YIELD == 0) sched_yield();
        else INFER__PAUSE();
}

/* A task's steps meet here: the last worker to arrive opens the next phase.
   Workers spin (yielding now and then) since a step lasts microseconds. */
static void infer__pool_barrier(infer__pool *p) {
    unsigned phase;
    long spins = 0;
    if (p->n == 1) return;
    phase = __atomic_load_n(&p->bar_phase, __ATOMIC_ACQUIRE);
    if (__atomic_add_fetch(&p->bar_count, 1, __ATOMIC_ACQ_REL) == p->n) {
        __atomic_store_n(&p->bar_count, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&p->bar_phase, phase + 1, __ATOMIC_RELEASE);
        return;
    }
    while (__atomic_load_n(&p->bar_phase, __ATOMIC_ACQUIRE) == phase)
        if (++spins % INFER__SPINS_BEFORE_YIELD == 0) sched_yield();
        else INFER__PAUSE();
}

static int infer__atomic_next(int *v) { return __atomic_fetch_add(v, 1, __ATOMIC_RELAXED); }
#endif

/* threads.c - a persistent worker pool: threads are made once per context
   and woken for each parallel op, never created per op. The calling thread
   works as worker 0, so a pool of 1 runs everything inline. */
#include "internal.h"

#if defined(_WIN32)
/* No pool on Windows yet: everything runs on the calling thread. */
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
#else

struct infer__pool {
    int n;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    infer__task_fn fn;
    void *arg;
    unsigned long generation; /* bumped per op; workers run each op once */
    int running;              /* workers still busy with the current op */
    int stop;
};

typedef struct infer__worker_arg {
    infer__pool *pool;
    int ith;
} infer__worker_arg;

static void *infer__worker(void *v) {
    infer__worker_arg wa = *(infer__worker_arg *)v;
    infer__pool *p = wa.pool;
    unsigned long seen = 0;
    INFER_FREE(v);
    for (;;) {
        infer__task_fn fn;
        void *arg;
        pthread_mutex_lock(&p->mu);
        while (!p->stop && p->generation == seen) pthread_cond_wait(&p->wake, &p->mu);
        if (p->stop) {
            pthread_mutex_unlock(&p->mu);
            return NULL;
        }
        seen = p->generation;
        fn = p->fn;
        arg = p->arg;
        pthread_mutex_unlock(&p->mu);
        fn(arg, wa.ith, p->n);
        pthread_mutex_lock(&p->mu);
        if (--p->running == 0) pthread_cond_signal(&p->done);
        pthread_mutex_unlock(&p->mu);
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
    pthread_cond_init(&p->done, NULL);
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

static void infer__pool_free(infer__pool *p) {
    int i;
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (i = 1; i < p->n; i++) pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
    INFER_FREE(p->threads);
    INFER_FREE(p);
}

static int infer__pool_size(const infer__pool *p) { return p->n; }

static void infer__pool_run(infer__pool *p, infer__task_fn fn, void *arg) {
    if (p->n == 1) {
        fn(arg, 0, 1);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->arg = arg;
    p->running = p->n - 1;
    p->generation++;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    fn(arg, 0, p->n);
    pthread_mutex_lock(&p->mu);
    while (p->running > 0) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
#endif

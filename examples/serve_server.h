/* serve_server.h - infer serve's shared state: the server, its open connections and its slots. */
#ifndef SERVE_SERVER_H
#define SERVE_SERVER_H
#include <pthread.h>
#include <stddef.h>
#include <time.h>

#include "infer.h"
#include "serve_metrics.h"

#define SERVE_MAX_STOP 16
#define SERVE_MAX_N 16 /* replies to one prompt (the API's n) */
/* A reply whose client accepts no byte for this long is dropped. */
#define SERVE_SEND_TIMEOUT_S 60u
/* A request's "user" (or "session_id"): longer ones are a 400 */
#define SERVE_USER_MAX 256

struct server;

/* One open connection: whether a request is arriving and by when it must
   have arrived. Listed from libmicrohttpd's STARTED notice to its CLOSED
   one, which comes before the socket is closed (daemon.c in 0.9.75), so the
   watchdog never shuts down a descriptor another connection reuses. Its
   current request's record (requests on a connection come one at a time)
   is what the metrics count and the access log prints. */
typedef struct conn {
    struct server *s;
    int fd;
    int reading;      /* a request (headers or body) is arriving */
    int requests;     /* requests whose headers came on it */
    int fresh;        /* counted in server.n_fresh: its first request is not yet accepted or refused */
    int cut;          /* the watchdog shut it down */
    double deadline;  /* now_ms() by which the request must be in */
    struct conn *prev, *next;
    /* the current request */
    serve_route route;
    char method[8];
    unsigned status;  /* of the reply queued (0: none yet) */
    double t0;        /* now_ms() when its headers came */
    char user[SERVE_USER_MAX + 1];
    int has_user;
    int n_prompt, n_generated;
} conn;

/* Per sequence: who used it last, and what its cache held when a request
   took it (shown by /slots until that request has tokens to show). */
typedef struct slot_info {
    char user[SERVE_USER_MAX + 1];
    int has_user;
    infer_request *r;        /* the request running on it, or NULL */
    int taken_n;             /* its cached positions when taken */
    unsigned long long taken_hash;
} slot_info;

/* ---- The server: one model, one context of n_slots sequences ---------- */

typedef struct server {
    infer_model *model;
    infer_context *ctx;    /* n_slots sequences, stepped by worker */
    infer_worker *worker;
    infer_chat_template tmpl;
    /* the Jinja chat template chats go through: the model's own, or
       --chat-template-file's; NULL: the built-in format tmpl */
    char *jinja;
    char bos[64], eos[64]; /* the model's BOS and EOS texts, for the template */
    /* how the template writes tool calls (INFER_TOOL_FORMAT_NONE: it knows no
       tools, which are then described to the model in the system message and
       called in the generic format), and whether it writes <think> */
    infer_tool_format tool_fmt;
    int think;
    int reasoning_budget;  /* --reasoning-budget: a request's default (-1: none) */
    int lookup;            /* --lookup: a request's default speculative draft by prompt lookup (0: none) */
    /* --draft: a draft model and its context of n_slots sequences of n_ctx
       positions (a request's sequence i drafts in its sequence i, stepped
       by the worker with the request), and --draft-n: a request's default
       draft length (0: the draft model unused) */
    infer_model *draft_model;
    infer_context *draft_ctx;
    int draft_n;
    int n_ctx, n_slots, max_queue, n_threads;
    size_t max_body;
    const char *model_id, *api_key;
    long created;          /* when it started: /v1/models' "created" */
    /* slots: which sequences a request holds, and how many wait for one */
    pthread_mutex_t mu;
    pthread_cond_t slot_freed;
    int *slot_busy, n_waiting, n_served;
    /* embeddings run in a context of their own, one at a time */
    pthread_mutex_t embed_mu;
    infer_context *embed_ctx;
    /* hostile clients: limits and time-outs (serve_usage) */
    unsigned read_timeout, max_connections;
    size_t max_schema, max_grammar;
    int max_messages;
    /* every open connection, for the watchdog that cuts slow requests */
    pthread_mutex_t conn_mu;
    conn *conns;
    pthread_t watchdog;
    int watchdog_started;
    int stopping;          /* atomic: set once, when the server stops */
    int listening;         /* atomic: the daemon started (mhd_log prints from then on) */
    unsigned long long seed_counter;
    /* a load balancer's replica: loading, then ready; draining after
       SIGTERM, cancelling once --drain-timeout has passed (all atomic) */
    int ready, draining, cancelling;
    int load_cancel;       /* atomic: a signal came while loading */
    double load_seconds;
    int n_inflight;        /* under mu: model requests accepted and not yet over */
    int n_fresh;           /* under conn_mu: connections whose first request is not yet accepted or refused */
    struct job *jobs;      /* under mu: every completion in progress (the drain cancels them) */
    slot_info *slots;      /* under mu */
    serve_metrics metrics;
} server;

static inline int server_stopping(server *s) { return __atomic_load_n(&s->stopping, __ATOMIC_ACQUIRE); }
static inline int server_ready(server *s) { return __atomic_load_n(&s->ready, __ATOMIC_ACQUIRE); }
static inline int server_draining(server *s) { return __atomic_load_n(&s->draining, __ATOMIC_ACQUIRE); }
static inline int server_cancelling(server *s) { return __atomic_load_n(&s->cancelling, __ATOMIC_ACQUIRE); }

static inline double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

#endif

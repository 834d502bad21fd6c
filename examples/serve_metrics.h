/* serve_metrics.h - infer serve's GET /metrics: counters and histograms that
   the request handlers add to, and gauges the server reads from its own
   state when scraped, written in Prometheus' text exposition format 0.0.4.
   Also the routes (the endpoint label, and what the access log names). */
#ifndef SERVE_METRICS_H
#define SERVE_METRICS_H
#include <pthread.h>

/* The paths the server answers, each under one name (an alias without
   /v1 counts as its /v1 route); anything else is OTHER. */
typedef enum serve_route {
    SERVE_ROUTE_CHAT,
    SERVE_ROUTE_COMPLETIONS,
    SERVE_ROUTE_EMBEDDINGS,
    SERVE_ROUTE_MESSAGES,
    SERVE_ROUTE_MODELS,
    SERVE_ROUTE_MODEL,      /* /v1/models/{id} */
    SERVE_ROUTE_HEALTH,
    SERVE_ROUTE_READY,
    SERVE_ROUTE_METRICS,
    SERVE_ROUTE_SLOTS,
    SERVE_ROUTE_OTHER,
    SERVE_ROUTE_COUNT
} serve_route;

serve_route serve_route_of(const char *url);
/* The route's label: "/v1/chat/completions", ..., "other". */
const char *serve_route_name(serve_route r);

#define SERVE_HISTOGRAM_BOUNDS 14

typedef struct serve_histogram {
    const double *bounds; /* upper bounds, rising; +Inf is implied */
    int n_bounds;
    unsigned long long counts[SERVE_HISTOGRAM_BOUNDS + 1]; /* per bucket, not cumulative; the last is +Inf's */
    unsigned long long count;
    double sum;
} serve_histogram;

/* Room for every (route, status) pair seen: the statuses the server sends
   are few (200, 400, 401, 404, 405, 413, 500, 503). */
#define SERVE_METRICS_REPLY_KINDS 256

typedef struct serve_metrics {
    pthread_mutex_t mu;
    struct {
        serve_route route;
        unsigned status;
        unsigned long long n;
    } replies[SERVE_METRICS_REPLY_KINDS];
    int n_reply_kinds;
    unsigned long long prompt_tokens, generated_tokens;
    unsigned long long cache_hits, cache_reused_tokens;
    serve_histogram ttft, tpot;
} serve_metrics;

/* What the server knows when scraped. */
typedef struct serve_gauges {
    int queue_length;          /* requests waiting for a sequence */
    int busy, idle;            /* sequences */
    long long kv_tokens;       /* positions cached over all sequences */
    long long kv_capacity;     /* all sequences' positions (0 while loading) */
    double load_seconds;       /* 0 while loading */
    int ready, draining;
} serve_gauges;

void serve_metrics_init(serve_metrics *m);
void serve_metrics_destroy(serve_metrics *m);
/* One reply sent: infer_requests_total{endpoint, status}. */
void serve_metrics_reply(serve_metrics *m, serve_route route, unsigned status);
/* One request's tokens: prompt (embeddings' inputs too) and generated. */
void serve_metrics_tokens(serve_metrics *m, long long n_prompt, long long n_generated);
/* One completion's timings (a negative one is not observed) and the
   prompt tokens it took from a sequence's cache. */
void serve_metrics_completion(serve_metrics *m, double ttft_s, double tpot_s, int cached_tokens);
/* The page: malloc'd text, or NULL when out of memory. */
char *serve_metrics_text(serve_metrics *m, const serve_gauges *g);

#endif

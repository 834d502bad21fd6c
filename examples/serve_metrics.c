/* serve_metrics.c - infer serve's Prometheus metrics (serve_metrics.h). */
#include "serve_metrics.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const route_names[SERVE_ROUTE_COUNT] = {
    "/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/messages", "/v1/models", "/v1/models/{id}",
    "/health",              "/ready",          "/metrics",       "/slots",       "other"};

serve_route serve_route_of(const char *url) {
    /* OpenAI's paths are also taken without /v1 (clients given a base URL
       without it) */
    const char *api = !strncmp(url, "/v1/", 4) ? url + 3 : url;
    if (!strcmp(api, "/chat/completions")) return SERVE_ROUTE_CHAT;
    if (!strcmp(api, "/completions")) return SERVE_ROUTE_COMPLETIONS;
    if (!strcmp(api, "/embeddings")) return SERVE_ROUTE_EMBEDDINGS;
    if (!strcmp(url, "/v1/messages")) return SERVE_ROUTE_MESSAGES;
    if (!strcmp(api, "/models")) return SERVE_ROUTE_MODELS;
    if (!strncmp(api, "/models/", 8)) return SERVE_ROUTE_MODEL;
    if (!strcmp(url, "/health")) return SERVE_ROUTE_HEALTH;
    if (!strcmp(url, "/ready")) return SERVE_ROUTE_READY;
    if (!strcmp(url, "/metrics")) return SERVE_ROUTE_METRICS;
    if (!strcmp(url, "/slots")) return SERVE_ROUTE_SLOTS;
    return SERVE_ROUTE_OTHER;
}

const char *serve_route_name(serve_route r) { return (unsigned)r < SERVE_ROUTE_COUNT ? route_names[r] : "other"; }

/* Time to first token: from a request's arrival (its wait for a sequence
   included) to its first token; from a few ms (a cached prompt on a small
   model) to a minute (a long prompt on a slow machine, a long queue). */
static const double ttft_bounds[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
/* Time per output token after the first: a token takes from about a
   millisecond (a small model on a GPU) to a second. */
static const double tpot_bounds[] = {0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.15, 0.25, 0.5, 1};

static void histogram_init(serve_histogram *h, const double *bounds, int n) {
    memset(h, 0, sizeof *h);
    h->bounds = bounds;
    h->n_bounds = n;
}

static void histogram_observe(serve_histogram *h, double v) {
    int i = 0;
    while (i < h->n_bounds && v > h->bounds[i]) i++; /* le: a value on a bound is in its bucket */
    h->counts[i]++;
    h->count++;
    h->sum += v;
}

void serve_metrics_init(serve_metrics *m) {
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->mu, NULL);
    histogram_init(&m->ttft, ttft_bounds, (int)(sizeof ttft_bounds / sizeof *ttft_bounds));
    histogram_init(&m->tpot, tpot_bounds, (int)(sizeof tpot_bounds / sizeof *tpot_bounds));
}

void serve_metrics_destroy(serve_metrics *m) { pthread_mutex_destroy(&m->mu); }

void serve_metrics_reply(serve_metrics *m, serve_route route, unsigned status) {
    int i;
    pthread_mutex_lock(&m->mu);
    for (i = 0; i < m->n_reply_kinds; i++)
        if (m->replies[i].route == route && m->replies[i].status == status) break;
    if (i == m->n_reply_kinds && i < SERVE_METRICS_REPLY_KINDS) { /* (full: cannot happen with the server's statuses) */
        m->replies[i].route = route;
        m->replies[i].status = status;
        m->replies[i].n = 0;
        m->n_reply_kinds++;
    }
    if (i < m->n_reply_kinds) m->replies[i].n++;
    pthread_mutex_unlock(&m->mu);
}

void serve_metrics_tokens(serve_metrics *m, long long n_prompt, long long n_generated) {
    pthread_mutex_lock(&m->mu);
    m->prompt_tokens += (unsigned long long)(n_prompt > 0 ? n_prompt : 0);
    m->generated_tokens += (unsigned long long)(n_generated > 0 ? n_generated : 0);
    pthread_mutex_unlock(&m->mu);
}

void serve_metrics_completion(serve_metrics *m, double ttft_s, double tpot_s, int cached_tokens) {
    pthread_mutex_lock(&m->mu);
    if (ttft_s >= 0) histogram_observe(&m->ttft, ttft_s);
    if (tpot_s >= 0) histogram_observe(&m->tpot, tpot_s);
    if (cached_tokens > 0) {
        m->cache_hits++;
        m->cache_reused_tokens += (unsigned long long)cached_tokens;
    }
    pthread_mutex_unlock(&m->mu);
}

/* ---- The text format --------------------------------------------------------- */

typedef struct page {
    char *text;
    size_t len, cap;
    int failed; /* out of memory: the page is dropped */
} page;

static void put(page *p, const char *fmt, ...) {
    va_list ap;
    int n;
    if (p->failed) return;
    va_start(ap, fmt);
    n = vsnprintf(p->text + p->len, p->cap - p->len, fmt, ap);
    va_end(ap);
    if (n < 0) {
        p->failed = 1;
        return;
    }
    if ((size_t)n >= p->cap - p->len) { /* grow and write it again */
        size_t cap = (p->len + (size_t)n + 1) * 2;
        char *t = (char *)realloc(p->text, cap);
        if (!t) {
            p->failed = 1;
            return;
        }
        p->text = t;
        p->cap = cap;
        va_start(ap, fmt);
        vsnprintf(p->text + p->len, p->cap - p->len, fmt, ap);
        va_end(ap);
    }
    p->len += (size_t)n;
}

static void family(page *p, const char *name, const char *type, const char *help) {
    put(p, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void histogram_put(page *p, const char *name, const char *help, const serve_histogram *h) {
    unsigned long long cumulative = 0;
    int i;
    family(p, name, "histogram", help);
    for (i = 0; i < h->n_bounds; i++) {
        cumulative += h->counts[i];
        put(p, "%s_bucket{le=\"%g\"} %llu\n", name, h->bounds[i], cumulative);
    }
    put(p, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.9g\n%s_count %llu\n", name, h->count, name, h->sum, name, h->count);
}

char *serve_metrics_text(serve_metrics *m, const serve_gauges *g) {
    page p = {NULL, 0, 0, 0};
    int i;
    if (!(p.text = (char *)malloc(p.cap = 8192))) return NULL;
    p.text[0] = 0;
    pthread_mutex_lock(&m->mu);
    family(&p, "infer_requests_total", "counter", "HTTP requests answered, by endpoint (route) and status code.");
    for (i = 0; i < m->n_reply_kinds; i++)
        put(&p, "infer_requests_total{endpoint=\"%s\",status=\"%u\"} %llu\n", serve_route_name(m->replies[i].route),
            m->replies[i].status, m->replies[i].n);
    family(&p, "infer_prompt_tokens_total", "counter", "Prompt tokens of completions and embeddings (BOS included).");
    put(&p, "infer_prompt_tokens_total %llu\n", m->prompt_tokens);
    family(&p, "infer_generated_tokens_total", "counter", "Tokens generated (as usage.completion_tokens counts them).");
    put(&p, "infer_generated_tokens_total %llu\n", m->generated_tokens);
    histogram_put(&p, "infer_time_to_first_token_seconds",
                  "From a completion's arrival (its wait for a sequence included) to its first token.", &m->ttft);
    histogram_put(&p, "infer_time_per_output_token_seconds",
                  "A completion's mean time between its generated tokens, after the first.", &m->tpot);
    family(&p, "infer_prompt_cache_hits_total", "counter", "Completions that reused a cached prompt prefix.");
    put(&p, "infer_prompt_cache_hits_total %llu\n", m->cache_hits);
    family(&p, "infer_prompt_cache_reused_tokens_total", "counter", "Prompt tokens taken from a sequence's cache, not fed.");
    put(&p, "infer_prompt_cache_reused_tokens_total %llu\n", m->cache_reused_tokens);
    pthread_mutex_unlock(&m->mu);
    family(&p, "infer_queue_length", "gauge", "Requests waiting for a sequence.");
    put(&p, "infer_queue_length %d\n", g->queue_length);
    family(&p, "infer_sequences", "gauge", "Sequences (--parallel) by state.");
    put(&p, "infer_sequences{state=\"busy\"} %d\ninfer_sequences{state=\"idle\"} %d\n", g->busy, g->idle);
    family(&p, "infer_kv_cache_usage_ratio", "gauge", "Positions cached over all sequences, over all their positions.");
    put(&p, "infer_kv_cache_usage_ratio %.6g\n", g->kv_capacity > 0 ? (double)g->kv_tokens / (double)g->kv_capacity : 0.0);
    family(&p, "infer_kv_cache_tokens", "gauge", "Positions cached over all sequences.");
    put(&p, "infer_kv_cache_tokens %lld\n", g->kv_tokens);
    family(&p, "infer_model_load_seconds", "gauge", "Seconds the model (and draft model) took to load; 0 while loading.");
    put(&p, "infer_model_load_seconds %.6g\n", g->load_seconds);
    family(&p, "infer_ready", "gauge", "1 when requests are served, 0 while loading or draining.");
    put(&p, "infer_ready %d\n", g->ready && !g->draining);
    family(&p, "infer_draining", "gauge", "1 once SIGTERM or SIGINT began the drain.");
    put(&p, "infer_draining %d\n", g->draining);
    if (p.failed) {
        free(p.text);
        return NULL;
    }
    return p.text;
}

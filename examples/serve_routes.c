/* serve_routes.c - infer serve's endpoints and their handlers, and the connections they come on. */
#define _GNU_SOURCE /* POLLRDHUP */
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <microhttpd.h>
#include <math.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wunused-function" /* cli.h's parsers this command does not use */
#endif
#include "cli.h"
#include "serve_anthropic.h"
#include "serve_metrics.h"
#include "serve_request.h"
#include "serve_routes.h"
#include "serve_server.h"
#include "serve_tools.h"

/* ---- UTF-8: JSON gets valid text ---------------------------------------- */

/* A NUL-terminated copy of s[0..n) with each byte that is not part of a
   valid UTF-8 character replaced by U+FFFD (cJSON writes bytes as given). */
static char *utf8_clean(const char *s, size_t n) {
    char *out = (char *)malloc(n * 3 + 1);
    if (out) infer_utf8_clean(s, n, out);
    return out;
}

/* ---- Replies --------------------------------------------------------------- */

/* libmicrohttpd's inactivity limit for con, its clock restarted (setting
   the limit restarts the clock only where it was 0: connection.c). */
static void connection_timeout(struct MHD_Connection *con, unsigned secs) {
    MHD_set_connection_option(con, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
    MHD_set_connection_option(con, MHD_CONNECTION_OPTION_TIMEOUT, secs);
}

static conn *conn_of(struct MHD_Connection *con);

/* Every reply goes out here: counted by the metrics as it is queued (so a
   client that has its reply finds it counted), its status kept for the
   access log. While draining, the connection is closed after it: the
   client's next request goes to another replica. */
static mhd_result queue_reply(struct MHD_Connection *con, unsigned status, struct MHD_Response *res) {
    conn *c = conn_of(con);
    if (c) {
        c->status = status;
        serve_metrics_reply(&c->s->metrics, c->route, status);
        if (server_draining(c->s)) MHD_add_response_header(res, MHD_HTTP_HEADER_CONNECTION, "close");
    }
    return MHD_queue_response(con, status, res);
}

/* Queues body (taken over) with its status and content type. */
static mhd_result send_text(struct MHD_Connection *con, unsigned status, char *body, const char *type) {
    struct MHD_Response *res;
    mhd_result ret;
    if (!body) return MHD_NO;
    res = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!res) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(res, "Content-Type", type);
    if (status == 401) MHD_add_response_header(res, "WWW-Authenticate", "Bearer");
    /* the clock starts now: a reply that took longer than the read
       time-out to make is still sent */
    connection_timeout(con, SERVE_SEND_TIMEOUT_S);
    ret = queue_reply(con, status, res);
    MHD_destroy_response(res);
    return ret;
}

static mhd_result send_body(struct MHD_Connection *con, unsigned status, char *body) {
    return send_text(con, status, body, "application/json");
}

static mhd_result send_json(struct MHD_Connection *con, unsigned status, cJSON *j) {
    char *body = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return send_body(con, status, body);
}

/* OpenAI's error object: {"error": {"message", "type", "param", "code"}}. */
static cJSON *error_object(unsigned status, const char *param, const char *code, const char *msg) {
    cJSON *j = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(j, "error");
    const char *type = status == 401 ? "authentication_error"
                       : status == 404 ? "not_found_error"
                       : status == 503 ? "server_overloaded"
                       : status >= 500 ? "server_error"
                                       : "invalid_request_error";
    char *clean = utf8_clean(msg, strlen(msg));
    cJSON_AddStringToObject(e, "message", clean ? clean : "error");
    free(clean);
    cJSON_AddStringToObject(e, "type", type);
    if (param) cJSON_AddStringToObject(e, "param", param);
    else cJSON_AddNullToObject(e, "param");
    if (code) cJSON_AddStringToObject(e, "code", code);
    else cJSON_AddNullToObject(e, "code");
    return j;
}

static mhd_result send_error(struct MHD_Connection *con, unsigned status, const char *param, const char *code,
                             const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return send_json(con, status, error_object(status, param, code, msg));
}

/* ---- Watching the client -------------------------------------------------- */

/* A client's socket as a handler watches it. A FIN is either a client that
   closed (gone) or one that only half-closed after sending its request (it
   still reads the reply). To tell them apart, an interim "100 Continue" is
   written, at most once a second, while no byte of the reply has been: a
   closed socket answers it with a reset (HTTP/1.1 clients skip 1xx replies
   before the final one). Later, write errors tell. */
typedef struct client_watch {
    int fd;
    int may_probe;     /* HTTP/1.1 and nothing of the reply sent yet */
    int fin_ends;      /* a FIN alone means gone (HTTP/1.0: no 1xx to probe with) */
    int fin;           /* the client sent a FIN */
    double last_probe; /* now_ms() of the last interim reply */
} client_watch;

/* Waits up to ms for the client's socket; 1 if the client has gone (closed
   or reset its end). Data it sends early (a pipelined request) is left. */
static int client_gone(client_watch *w, int ms) {
    static const char interim[] = "HTTP/1.1 100 Continue\r\n\r\n";
    struct pollfd p;
    char c;
    if (w->fd < 0) {
        usleep((useconds_t)ms * 1000);
        return 0;
    }
    p.fd = w->fd;
    /* after a FIN it is readable for ever: then only errors are waited for */
    p.events = w->fin ? 0 : POLLIN | POLLRDHUP;
    p.revents = 0;
    if (poll(&p, 1, ms) > 0) {
        if (p.revents & (POLLHUP | POLLERR | POLLNVAL)) return 1;
        if (!w->fin) {
            if ((p.revents & POLLRDHUP) || recv(w->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0) {
                if (w->fin_ends) return 1;
                w->fin = 1;
            } else {
                usleep((useconds_t)ms * 1000); /* readable but open: do not spin on it */
                return 0;
            }
        }
    }
    if (w->fin && w->may_probe && now_ms() - w->last_probe >= 1000) {
        ssize_t n = send(w->fd, interim, sizeof interim - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        w->last_probe = now_ms();
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return 1; /* EPIPE, ECONNRESET */
        if (n >= 0 && n < (ssize_t)sizeof interim - 1) w->may_probe = 0; /* never half an interim reply again */
    }
    return 0;
}

static int connection_fd(struct MHD_Connection *con) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(con, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? (int)ci->connect_fd : -1;
}

/* ---- Connections and the read time-out -------------------------------------- */

static conn *conn_of(struct MHD_Connection *con) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(con, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? (conn *)ci->socket_context : NULL;
}

/* A request begins to arrive (reading: its deadline starts now) or has
   arrived whole (its reply is not the watchdog's business). */
static void conn_reading(server *s, struct MHD_Connection *con, int reading) {
    conn *c = conn_of(con);
    if (!c) return;
    pthread_mutex_lock(&s->conn_mu);
    c->reading = reading;
    if (reading) c->deadline = now_ms() + s->read_timeout * 1e3;
    pthread_mutex_unlock(&s->conn_mu);
}

void serve_on_connection(void *cls, struct MHD_Connection *con, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
    server *s = (server *)cls;
    conn *c = (conn *)*socket_context;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        /* without a record only libmicrohttpd's inactivity limit cuts it */
        if (!(c = (conn *)calloc(1, sizeof *c))) return;
        c->s = s;
        c->fd = connection_fd(con);
        c->reading = 1;
        c->deadline = now_ms() + s->read_timeout * 1e3;
        c->fresh = 1;
        pthread_mutex_lock(&s->conn_mu);
        s->n_fresh++;
        c->next = s->conns;
        if (s->conns) s->conns->prev = c;
        s->conns = c;
        pthread_mutex_unlock(&s->conn_mu);
        *socket_context = c;
    } else if (c) { /* MHD_CONNECTION_NOTIFY_CLOSED: its socket is still open */
        pthread_mutex_lock(&s->conn_mu);
        if (c->fresh) s->n_fresh--;
        if (c->prev) c->prev->next = c->next;
        else s->conns = c->next;
        if (c->next) c->next->prev = c->prev;
        pthread_mutex_unlock(&s->conn_mu);
        free(c);
        *socket_context = NULL;
    }
}

/* Shuts down the sockets of requests past their deadline: libmicrohttpd's
   own limit is on inactivity, which a byte a second never reaches. Its
   thread then sees the socket end and closes the connection. */
void *serve_watchdog_main(void *arg) {
    server *s = (server *)arg;
    while (!server_stopping(s)) {
        double now = now_ms();
        int n_cut = 0;
        conn *c;
        pthread_mutex_lock(&s->conn_mu);
        for (c = s->conns; c; c = c->next)
            if (c->reading && !c->cut && now > c->deadline) {
                shutdown(c->fd, SHUT_RDWR);
                c->cut = 1;
                n_cut++;
            }
        pthread_mutex_unlock(&s->conn_mu);
        if (n_cut)
            fprintf(stderr, "infer serve: %d connection%s cut: no whole request within the read time-out (%u s)\n",
                    n_cut, n_cut > 1 ? "s" : "", s->read_timeout);
        usleep(200 * 1000);
    }
    return NULL;
}

/* ---- Slots ----------------------------------------------------------------- */

/* Positions of a free sequence's cache that [BOS] + tokens starts with.
   (Its tokens change only under a request, and a free one has none.) */
static int slot_common_prefix(const server *s, int slot, const infer_token *tokens, int n) {
    int n_seq, bos = infer_model_add_bos(s->model) && infer_model_bos(s->model) >= 0, k = 0;
    const infer_token *t = infer_seq_tokens(s->ctx, slot, &n_seq);
    if (!t) return 0;
    if (n_seq > infer_seq_n_past(s->ctx, slot)) n_seq = infer_seq_n_past(s->ctx, slot);
    while (k < n_seq && k < bos + n && t[k] == (k < bos ? infer_model_bos(s->model) : tokens[k - bos])) k++;
    return k;
}

/* FNV-1a, 64 bits, over the ids' 4 bytes each, least significant first:
   /slots' prefix_hash, equal for equal caches. */
static unsigned long long tokens_hash(const infer_token *t, int n) {
    unsigned long long h = 0xcbf29ce484222325ULL;
    int i, b;
    for (i = 0; i < n; i++)
        for (b = 0; b < 4; b++) {
            h ^= ((uint32_t)t[i] >> (8 * b)) & 0xff;
            h *= 0x100000001b3ULL;
        }
    return h;
}

/* A free sequence's cached positions and their hash (under mu: its tokens
   change only under a request). */
static int slot_cached(const server *s, int slot, unsigned long long *hash) {
    int n = 0;
    const infer_token *t = infer_seq_tokens(s->ctx, slot, &n);
    if (!t) n = 0;
    if (n > infer_seq_n_past(s->ctx, slot)) n = infer_seq_n_past(s->ctx, slot);
    *hash = tokens_hash(t, n);
    return n;
}

/* Takes a free sequence for a request of user (NULL: none), under mu. */
static void slot_take(server *s, int slot, const char *user) {
    slot_info *si = &s->slots[slot];
    s->slot_busy[slot] = 1;
    si->taken_n = slot_cached(s, slot, &si->taken_hash);
    si->has_user = user != NULL;
    snprintf(si->user, sizeof si->user, "%s", user ? user : "");
}

/* n free sequences for a request, taken together (so that requests of
   several never hold some each and wait for more): first the one the
   request's user ran on last (a session comes back to its cache), else the
   one whose cache shares the longest prefix with its prompt (the request
   reuses it), else the emptiest (the others keep theirs); then the
   emptiest others. Waits in the queue while too few are free (watching
   the client); -1 with *status 503 when the queue is full or the drain
   cancels it, or -1 when the client left or the server stops; else
   slots[0..n) and 0. */
static int slot_acquire(server *s, client_watch *w, const infer_token *tokens, int n_tokens, const char *user, int n,
                        int *slots, unsigned *status) {
    int slot = -1, i, k;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        int best = -1, best_past = 0, best_mine = 0, n_free = 0;
        for (i = 0; i < s->n_slots; i++) n_free += !s->slot_busy[i];
        for (i = 0; i < s->n_slots && n_free >= n; i++)
            if (!s->slot_busy[i]) {
                int common = slot_common_prefix(s, i, tokens, n_tokens), past = infer_seq_n_past(s->ctx, i);
                int mine = user && s->slots[i].has_user && !strcmp(s->slots[i].user, user);
                if (slot < 0 || mine > best_mine ||
                    (mine == best_mine && (common > best || (common == best && past < best_past))))
                    slot = i, best = common, best_past = past, best_mine = mine;
            }
        if (slot >= 0) {
            slot_take(s, slot, user);
            slots[0] = slot;
            for (k = 1; k < n; k++) { /* the emptiest of the rest */
                int pick = -1;
                for (i = 0; i < s->n_slots; i++)
                    if (!s->slot_busy[i] && (pick < 0 || infer_seq_n_past(s->ctx, i) < infer_seq_n_past(s->ctx, pick)))
                        pick = i;
                slot_take(s, pick, user);
                slots[k] = pick;
            }
            break;
        }
        if (s->n_waiting >= s->max_queue || server_cancelling(s)) {
            *status = 503;
            break;
        }
        s->n_waiting++;
        pthread_mutex_unlock(&s->mu);
        /* not a condition wait: the client's socket must be watched too */
        {
            int gone = client_gone(w, 5);
            pthread_mutex_lock(&s->mu);
            s->n_waiting--;
            if (gone || server_stopping(s)) {
                *status = 499;
                break;
            }
        }
    }
    pthread_mutex_unlock(&s->mu);
    return slot < 0 ? -1 : 0;
}

static void slot_release(server *s, int slot) {
    pthread_mutex_lock(&s->mu);
    s->slot_busy[slot] = 0;
    s->n_served++;
    pthread_cond_broadcast(&s->slot_freed);
    pthread_mutex_unlock(&s->mu);
}

/* ---- A completion in flight ----------------------------------------------- */

/* The API a completion answers in: OpenAI's, or Anthropic's Messages. */
enum { SERVE_API_OPENAI, SERVE_API_ANTHROPIC };

/* One of a completion's n replies: its request on its sequence, and what
   of it went out. */
typedef struct choice {
    infer_request *r;
    int slot;
    size_t sent;                 /* bytes of the text already sent */
    infer_output_parser *parser; /* a chat's reply split (tools, reasoning), or NULL */
    int lp_sent;                 /* streaming: tokens whose logprobs went out */
    size_t lp_offset;            /* text completions: the text offset of the next */
    int ended;                   /* streaming: its last chunk went out */
} choice;

typedef struct job {
    server *s;
    struct MHD_Connection *con;
    client_watch watch;
    int api, chat, stream, include_usage, max_tokens;
    int n_prompt;
    char id[48];
    long created;
    double t0;
    int stage;               /* streaming: 0 opening, 1 text, 2 end, 3 over */
    char *out;               /* SSE bytes not yet handed to libmicrohttpd */
    size_t out_len, out_pos, out_cap;
    const char *path;
    int logprobs, top_logprobs;
    int n;                   /* choices */
    choice ch[SERVE_MAX_N];
    anthropic_blocks blocks; /* Anthropic's stream: its content blocks so far */
    cli_progress progress;   /* its first choice's prompt, on stderr when long */
    char progress_label[80];
    double t_start;          /* now_ms() when its first choice's request started */
    struct job *prev, *next; /* in s->jobs (listed) */
    int listed;
    int accounted;           /* its tokens and timings went to the metrics */
} job;

static void job_append(job *j, const char *p, size_t n) {
    if (j->out_len + n + 1 > j->out_cap) {
        size_t cap = (j->out_len + n + 1) * 2;
        char *o = (char *)realloc(j->out, cap);
        if (!o) return;
        j->out = o;
        j->out_cap = cap;
    }
    memcpy(j->out + j->out_len, p, n);
    j->out_len += n;
}

/* Appends "data: <json>\n\n" and frees the object. */
static void job_event(job *j, cJSON *ev) {
    char *text = cJSON_PrintUnformatted(ev);
    cJSON_Delete(ev);
    if (!text) return;
    job_append(j, "data: ", 6);
    job_append(j, text, strlen(text));
    job_append(j, "\n\n", 2);
    free(text);
}

/* The text from byte `from` on, as it is now: malloc'd, its length in *n. */
static char *request_text_from(const infer_request *r, size_t from, size_t *n) {
    char small[512], *buf;
    size_t len = infer_request_text(r, from, small, sizeof small);
    if (len < sizeof small) {
        buf = (char *)malloc(len + 1);
        if (buf) memcpy(buf, small, len + 1);
    } else { /* it may have grown since: keep what fits the room asked for */
        size_t room = len, now;
        buf = (char *)malloc(room + 1);
        if (buf) {
            now = infer_request_text(r, from, buf, room + 1);
            len = now < room ? now : room;
        }
    }
    *n = buf ? len : 0;
    return buf;
}


/* Appends "event: <name>\ndata: <json>\n\n" (Anthropic's events) and frees
   the object. */
static void job_event_named(void *ctx, const char *name, cJSON *ev) {
    job *j = (job *)ctx;
    job_append(j, "event: ", 7);
    job_append(j, name, strlen(name));
    job_append(j, "\n", 1);
    job_event(j, ev);
}

/* Choice i's tokens generated (an end-of-generation token left out), and
   whether it ended by the model's choice or the token limit. */
/* How many tokens r has generated, and its prompt's (0 for no request). */
static int req_n_gen(const infer_request *r) {
    int n = 0;
    infer_request_tokens(r, NULL, 0, &n, NULL);
    return n;
}
static int req_n_prompt(const infer_request *r) {
    int n = 0;
    infer_request_prompt_tokens(r, NULL, 0, &n, NULL);
    return n;
}

static int job_gen_tokens(const job *j, int i, const char **finish) {
    infer_token t[1];
    const infer_request *r = j->ch[i].r;
    int n = req_n_gen(r), eog = 0;
    infer_error err;
    infer_status st = infer_request_status(r, &err);
    if (n > 0) {
        infer_token *all = (infer_token *)malloc(sizeof(infer_token) * (size_t)n);
        if (all) {
            infer_request_tokens(r, all, n, NULL, NULL);
            t[0] = all[n - 1];
            eog = infer_model_is_eog(j->s->model, t[0]);
            free(all);
        }
    }
    if (finish)
        *finish = st == INFER_ERR_CONTEXT_FULL ? "length" : (!eog && n >= j->max_tokens) ? "length" : "stop";
    return n - eog;
}

/* every choice's generated tokens together */
static int job_gen_total(const job *j) {
    int i, n = 0;
    for (i = 0; i < j->n; i++)
        if (j->ch[i].r) n += job_gen_tokens(j, i, NULL);
    return n;
}

static cJSON *job_usage(const job *j) {
    cJSON *u = cJSON_CreateObject(), *d;
    int n_gen = job_gen_total(j);
    cJSON_AddNumberToObject(u, "prompt_tokens", j->n_prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", n_gen);
    cJSON_AddNumberToObject(u, "total_tokens", j->n_prompt + n_gen);
    /* OpenAI's field: prompt tokens found in the sequence's cache, not fed */
    d = cJSON_AddObjectToObject(u, "prompt_tokens_details");
    cJSON_AddNumberToObject(d, "cached_tokens", infer_request_cached_tokens(j->ch[0].r));
    return u;
}

/* llama.cpp's server reports these beside usage; clients that know them
   show speeds. (The first choice's.) */
static cJSON *job_timings(const job *j) {
    infer_metrics mt = infer_request_metrics(j->ch[0].r);
    cJSON *t = cJSON_CreateObject();
    cJSON_AddNumberToObject(t, "prompt_n", mt.n_prompt_tokens);
    cJSON_AddNumberToObject(t, "prompt_ms", mt.prompt_ms);
    cJSON_AddNumberToObject(t, "prompt_per_second", mt.prompt_tps);
    cJSON_AddNumberToObject(t, "predicted_n", mt.n_gen_tokens);
    cJSON_AddNumberToObject(t, "predicted_ms", mt.gen_ms);
    cJSON_AddNumberToObject(t, "predicted_per_second", mt.gen_tps);
    cJSON_AddNumberToObject(t, "ttft_ms", mt.ttft_ms);
    if (mt.n_draft_tokens > 0) { /* speculative decoding (llama.cpp's names) */
        cJSON_AddNumberToObject(t, "draft_n", mt.n_draft_tokens);
        cJSON_AddNumberToObject(t, "draft_n_accepted", mt.n_draft_accepted);
    }
    return t;
}

/* The frame every reply object shares: id, object, created, model. */
static cJSON *job_object(const job *j, const char *object) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", j->id);
    cJSON_AddStringToObject(o, "object", object);
    cJSON_AddNumberToObject(o, "created", (double)j->created);
    cJSON_AddStringToObject(o, "model", j->s->model_id);
    return o;
}

/* The logprobs of choice i's generated tokens [from, to): a chat's
   {"content": [..]} or a text completion's object; JSON null without
   logprobs. */
static cJSON *job_logprobs(const job *j, int i, int from, int to) {
    cJSON *o;
    if (!j->logprobs) return cJSON_CreateNull();
    if (!j->chat) return serve_logprobs_text(j->s->model, j->ch[i].r, from, to, j->top_logprobs, j->ch[i].lp_offset);
    o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "content", serve_logprobs_content(j->s->model, j->ch[i].r, from, to, j->top_logprobs));
    return o;
}

/* Streaming: the logprobs of choice i's tokens generated since its last
   chunk, or NULL without logprobs. */
static cJSON *job_logprobs_more(job *j, int i) {
    choice *c = &j->ch[i];
    int n;
    cJSON *lp;
    if (!j->logprobs) return NULL;
    n = req_n_gen(c->r);
    lp = job_logprobs(j, i, c->lp_sent, n);
    if (!j->chat) { /* the next chunk's offsets follow these tokens' text */
        cJSON *t;
        cJSON_ArrayForEach(t, cJSON_GetObjectItem(lp, "tokens")) c->lp_offset += strlen(t->valuestring);
    }
    c->lp_sent = n;
    return lp;
}

/* One streamed choice i: a chat delta (owned; NULL: an empty one) or a
   text piece, with finish_reason when given and logprobs (owned) when not
   NULL. */
static cJSON *job_chunk_delta(const job *j, int i, cJSON *delta, const char *text, const char *finish, cJSON *logprobs) {
    cJSON *o = job_object(j, j->chat ? "chat.completion.chunk" : "text_completion");
    cJSON *choices = cJSON_AddArrayToObject(o, "choices"), *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "index", i);
    if (j->chat) {
        cJSON_AddItemToObject(c, "delta", delta ? delta : cJSON_CreateObject());
        if (logprobs) cJSON_AddItemToObject(c, "logprobs", logprobs);
    } else {
        cJSON_Delete(delta);
        cJSON_AddStringToObject(c, "text", text ? text : "");
        cJSON_AddItemToObject(c, "logprobs", logprobs ? logprobs : cJSON_CreateNull());
    }
    if (finish) cJSON_AddStringToObject(c, "finish_reason", finish);
    else cJSON_AddNullToObject(c, "finish_reason");
    cJSON_AddItemToArray(choices, c);
    return o;
}

/* Once per job, when its reply is over or cut: its tokens and timings to
   the metrics and, with_conn (on the connection's own thread, which is
   there), its counts to the access log's record. */
static void job_account(job *j, int with_conn) {
    infer_metrics mt;
    int n_gen;
    if (j->accounted || !j->n || !j->ch[0].r) return;
    j->accounted = 1;
    n_gen = job_gen_total(j);
    mt = infer_request_metrics(j->ch[0].r);
    serve_metrics_tokens(&j->s->metrics, j->n_prompt, n_gen);
    /* time to first token from the request's arrival: its wait for a
       sequence (and n replies' shared prompt) counted as a client sees it */
    serve_metrics_completion(&j->s->metrics, mt.n_gen_tokens > 0 ? (j->t_start - j->t0 + mt.ttft_ms) / 1e3 : -1,
                             mt.n_gen_intervals > 0 ? mt.token_ms_avg / 1e3 : -1, infer_request_cached_tokens(j->ch[0].r));
    if (with_conn) {
        conn *c = conn_of(j->con);
        if (c) c->n_generated = n_gen;
    }
}

/* The message of a reply that the drain's time-out cut. */
static const char drain_cancelled[] = "the server is shutting down: this reply was cancelled (--drain-timeout)";

/* Ends a job: cancels and frees its requests, gives its sequences back. */
static void job_free(job *j) {
    server *s;
    int i;
    if (!j) return;
    s = j->s;
    job_account(j, 0); /* (a reply cut short: its connection may be gone) */
    pthread_mutex_lock(&s->mu);
    if (j->listed) { /* the drain cancels it no longer */
        if (j->prev) j->prev->next = j->next;
        else s->jobs = j->next;
        if (j->next) j->next->prev = j->prev;
    }
    for (i = 0; i < j->n; i++)
        if (j->ch[i].slot >= 0) s->slots[j->ch[i].slot].r = NULL;
    pthread_mutex_unlock(&s->mu);
    for (i = 0; i < j->n; i++) {
        choice *c = &j->ch[i];
        if (c->r) {
            infer_request_cancel(c->r);
            infer_request_free(c->r); /* (from any thread: request.c locks what it shares) */
        }
        if (c->slot >= 0) slot_release(j->s, c->slot);
        infer_output_parser_free(c->parser);
    }
    free(j->out);
    free(j);
}

/* Streams choice i's new text: what its parser made certain, or the text
   as it is. Returns whether anything went out. */
static int job_stream_text(job *j, int i, const char *text, size_t n) {
    choice *c = &j->ch[i];
    if (c->parser) { /* split: what became certain of content, reasoning and calls */
        infer_output_delta d;
        infer_error err;
        cJSON *delta;
        if (infer_output_parser_push(c->parser, text, n, &d, &err) != INFER_OK) return 0;
        if (j->api == SERVE_API_ANTHROPIC) return anthropic_stream_delta(&j->blocks, &d, job_event_named, j);
        delta = cJSON_CreateObject();
        if (!serve_delta_fill(delta, &d)) {
            cJSON_Delete(delta);
            return 0;
        }
        job_event(j, job_chunk_delta(j, i, delta, NULL, NULL, job_logprobs_more(j, i)));
        return 1;
    } else {
        char *clean = utf8_clean(text, n);
        cJSON *d = NULL;
        if (!clean) return 0;
        if (j->chat) {
            d = cJSON_CreateObject();
            cJSON_AddStringToObject(d, "content", clean);
        }
        job_event(j, job_chunk_delta(j, i, d, clean, NULL, job_logprobs_more(j, i)));
        free(clean);
        return 1;
    }
}

/* Streams choice i's end: what its parser held back, then its
   finish_reason (tool_calls where it called tools). */
static void job_stream_end(job *j, int i) {
    choice *c = &j->ch[i];
    const char *finish;
    infer_error err;
    job_gen_tokens(j, i, &finish);
    if (c->parser) {
        infer_output_delta d;
        infer_output_result res;
        if (!strcmp(finish, "length")) infer_output_parser_cut(c->parser);
        if (infer_output_parser_finish(c->parser, &d, &res, &err) == INFER_OK) {
            if (j->api == SERVE_API_ANTHROPIC) {
                anthropic_stream_delta(&j->blocks, &d, job_event_named, j);
            } else {
                cJSON *delta = cJSON_CreateObject();
                if (serve_delta_fill(delta, &d))
                    job_event(j, job_chunk_delta(j, i, delta, NULL, NULL, job_logprobs_more(j, i)));
                else
                    cJSON_Delete(delta);
            }
            if (res.n_calls > 0) finish = "tool_calls";
        }
    }
    if (j->api == SERVE_API_ANTHROPIC)
        anthropic_stream_end(&j->blocks, finish, job_gen_tokens(j, i, NULL), job_event_named, j);
    else
        job_event(j, job_chunk_delta(j, i, NULL, NULL, finish, NULL));
    c->ended = 1;
}

/* Streaming: the next events into j->out. 0 when there is nothing new yet. */
static int job_stream_more(job *j) {
    int i, any = 0, open = 0;
    if (j->stage == 0) {
        if (j->api == SERVE_API_ANTHROPIC)
            anthropic_stream_start(j->id, j->s->model_id, j->n_prompt, infer_request_cached_tokens(j->ch[0].r),
                                   job_event_named, j);
        else if (j->chat)
            for (i = 0; i < j->n; i++) {
                cJSON *d = cJSON_CreateObject();
                cJSON_AddStringToObject(d, "role", "assistant");
                cJSON_AddStringToObject(d, "content", "");
                job_event(j, job_chunk_delta(j, i, d, NULL, NULL, NULL));
            }
        j->stage = 1;
        return 1;
    }
    if (j->stage == 1) {
        for (i = 0; i < j->n; i++) {
            choice *c = &j->ch[i];
            int done;
            size_t n;
            char *text;
            infer_error err;
            infer_status st;
            if (c->ended) continue;
            done = infer_request_done(c->r);
            if (!(text = request_text_from(c->r, c->sent, &n))) {
                open++;
                continue;
            }
            /* the request's detokenizer never ends its text inside a character */
            if (n > 0) {
                any |= job_stream_text(j, i, text, n);
                c->sent += n;
            }
            free(text);
            if (!done) {
                open++;
                continue;
            }
            st = infer_request_status(c->r, &err);
            if (st != INFER_OK && st != INFER_ERR_CONTEXT_FULL) {
                /* the stream has begun: the error goes as an event of its own, and ends it */
                const char *msg = st == INFER_ERR_CANCELLED && server_cancelling(j->s) ? drain_cancelled : err.msg;
                if (j->api == SERVE_API_ANTHROPIC)
                    job_event_named(j, "error", anthropic_error(msg == drain_cancelled ? "overloaded_error" : "api_error", msg));
                else
                    job_event(j, error_object(msg == drain_cancelled ? 503 : 500, NULL, NULL, msg));
                if (j->api == SERVE_API_OPENAI) job_append(j, "data: [DONE]\n\n", 14);
                if (msg != drain_cancelled) fprintf(stderr, "infer serve: POST %s: the stream ended by an error: %s\n", j->path, msg);
                job_account(j, 1);
                j->stage = 3;
                return 1;
            }
            job_stream_end(j, i);
            any = 1;
        }
        if (open) return any;
        j->stage = 2;
    }
    if (j->stage == 2) {
        if (j->api == SERVE_API_OPENAI) {
            if (j->include_usage) {
                cJSON *u = job_object(j, j->chat ? "chat.completion.chunk" : "text_completion");
                cJSON_AddArrayToObject(u, "choices");
                cJSON_AddItemToObject(u, "usage", job_usage(j));
                cJSON_AddItemToObject(u, "timings", job_timings(j));
                job_event(j, u);
            }
            job_append(j, "data: [DONE]\n\n", 14);
        }
        job_account(j, 1);
        j->stage = 3;
        return 1;
    }
    return 0;
}

/* libmicrohttpd's content reader for a stream: blocks (this connection's
   own thread) until there is something to send, the reply is over, or the
   client has gone. */
static ssize_t job_stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    job *j = (job *)cls;
    (void)pos;
    for (;;) {
        if (j->out_pos < j->out_len) {
            size_t n = j->out_len - j->out_pos;
            if (n > max) n = max;
            memcpy(buf, j->out + j->out_pos, n);
            j->out_pos += n;
            connection_timeout(j->con, SERVE_SEND_TIMEOUT_S); /* the client has that long to take it */
            if (j->out_pos == j->out_len) j->out_pos = j->out_len = 0;
            return (ssize_t)n;
        }
        if (j->stage == 3) return MHD_CONTENT_READER_END_OF_STREAM;
        if (job_stream_more(j)) continue;
        if (client_gone(&j->watch, 2) || server_stopping(j->s)) {
            fprintf(stderr, "infer serve: POST %s: the client went away: request cancelled (sequence %d)\n", j->path,
                    j->ch[0].slot);
            job_account(j, 1);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
    }
}

static void job_stream_free(void *cls) { job_free((job *)cls); }

/* ---- The completion endpoints ---------------------------------------------- */

/* How a chat's reply is split: the tool format where tools are on (the
   generic one for a template that knows none); reasoning where the
   template writes <think> (its prompt ending in an open one: the reply
   begins inside it, as DeepSeek R1's and Qwen3's with thinking forced). */
static void chat_reply_parsing(const server *s, completion_call *cc, const char *prompt) {
    size_t n = strlen(prompt);
    while (n > 0 && (prompt[n - 1] == '\n' || prompt[n - 1] == ' ')) n--;
    cc->parse_fmt = INFER_TOOL_FORMAT_NONE;
    if (serve_tools_active(&cc->tools))
        cc->parse_fmt = s->tool_fmt == INFER_TOOL_FORMAT_NONE || !s->jinja ? INFER_TOOL_FORMAT_GENERIC : s->tool_fmt;
    /* harmony (gpt-oss): every reply is messages on channels, its
       analysis the reasoning, tools or not */
    if (s->jinja && s->tool_fmt == INFER_TOOL_FORMAT_HARMONY) cc->parse_fmt = INFER_TOOL_FORMAT_HARMONY;
    /* Gemma 4: its thinking channel is the reasoning, tools or not (as
       harmony's, a call written without tools offered is still one) */
    if (s->jinja && s->tool_fmt == INFER_TOOL_FORMAT_GEMMA4 && cc->parse_fmt == INFER_TOOL_FORMAT_NONE)
        cc->parse_fmt = INFER_TOOL_FORMAT_GEMMA4;
    cc->reasoning = INFER_REASONING_NONE;
    if (s->think && s->jinja)
        cc->reasoning = n >= 7 && !memcmp(prompt + n - 7, "<think>", 7) ? INFER_REASONING_OPEN : INFER_REASONING_AUTO;
    cc->parse = cc->parse_fmt != INFER_TOOL_FORMAT_NONE || cc->reasoning != INFER_REASONING_NONE;
}

/* A completion's body as its request's parameters: the fields read, the
   prompt (a chat's messages through the template) made and tokenized to
   check that it fits the context, max_tokens capped by what is left. No
   connection is involved (tests/fuzz/serve_request.c calls it too). 1 when
   the request can start; else 0 with b saying why (a 400). cc is freed by
   completion_call_free in either case; *prompt is malloc'd (cc.p.prompt). */
static int completion_from_body(server *s, const char *body_text, int chat, completion_call *cc, char **prompt,
                                int *n_prompt, bad_field *b) {
    cJSON *f;
    memset(cc, 0, sizeof *cc);
    cc->p = infer_request_default_params();
    cc->max_tokens = -1;
    *prompt = NULL;
    cc->body = cJSON_Parse(body_text);
    if (!cc->body || !cJSON_IsObject(cc->body)) {
        serve_bad(b, NULL, "the request body is not a JSON object");
        b->code = "invalid_json";
        return 0;
    }
    cc->chat = chat;
    if (!serve_read_completion_fields(s, cc->body, cc, b)) return 0;
    if (chat) {
        const char *param = NULL;
        char msg[300];
        if (!serve_tools_read(cc->body, &cc->tools, &param, msg, sizeof msg)) return serve_bad(b, param, "%s", msg);
        if (serve_tools_active(&cc->tools) && (cc->schema || cc->p.grammar))
            return serve_bad(b, cc->schema ? "response_format" : "grammar",
                       "%s and tools cannot be used together", cc->schema ? "response_format" : "grammar");
        if (!(*prompt = serve_chat_prompt(s, cc->body, serve_field(cc->body, "messages"), &cc->tools, b))) return 0;
        chat_reply_parsing(s, cc, *prompt);
    } else {
        f = serve_field(cc->body, "prompt");
        if (cJSON_IsArray(f) && cJSON_GetArraySize(f) == 1 && cJSON_IsString(cJSON_GetArrayItem(f, 0)))
            f = cJSON_GetArrayItem(f, 0);
        if (!cJSON_IsString(f)) return serve_bad(b, "prompt", "'prompt' must be a string");
        if (cJSON_IsTrue(serve_field(cc->body, "echo"))) return serve_bad(b, "echo", "echo is not supported by this server");
        *prompt = strdup(f->valuestring);
        if (cc->max_tokens < 0) cc->max_tokens = 16; /* the API's default for text completions */
    }
    /* tokenized once: counted here, passed to the request as tokens (BOS
       is the request's to add); max_tokens is capped by what the context
       has left after the prompt */
    {
        int n;
        if (infer_tokenize(s->model, *prompt, strlen(*prompt), NULL, 0, 0, 1, &n, NULL) != INFER_OK) n = -1;
        if (n < 0) return serve_bad(b, chat ? "messages" : "prompt", "the prompt could not be tokenized");
        if (n > 0 && (!(cc->tokens = (infer_token *)malloc(sizeof(infer_token) * (size_t)n)) ||
                      infer_tokenize(s->model, *prompt, strlen(*prompt), cc->tokens, n, 0, 1, NULL, NULL) != INFER_OK))
            return serve_bad(b, chat ? "messages" : "prompt", "the prompt could not be tokenized");
        cc->p.prompt_tokens = cc->tokens;
        cc->p.n_prompt_tokens = n;
        *n_prompt = n + (infer_model_add_bos(s->model) && infer_model_bos(s->model) >= 0);
    }
    if (*n_prompt >= s->n_ctx) {
        serve_bad(b, chat ? "messages" : "prompt", "the prompt is %d tokens; this server's context holds %d", *n_prompt,
            s->n_ctx);
        b->code = "context_length_exceeded";
        return 0;
    }
    if (cc->max_tokens < 0 || cc->max_tokens > s->n_ctx - *n_prompt) cc->max_tokens = s->n_ctx - *n_prompt;
    cc->p.prompt = *prompt;
    cc->p.n_predict = cc->max_tokens;
    cc->p.n_past = 0;
    return 1;
}

/* A chat's tool grammar into cc.p: forced from the first token with
   tool_choice required or named (after the reasoning, where the prompt
   opened it), lazily at the format's triggers with auto. 1, or 0 with b
   set (a 400) or *status 500. */
static int tool_grammar(server *s, completion_call *cc, bad_field *b, unsigned *status) {
    const char *const *triggers;
    static const char *const think_end[] = {"</think>"};
    int n_triggers;
    char msg[300];
    cc->tool_gbnf = serve_tools_grammar(&cc->tools, cc->parse_fmt, &triggers, &n_triggers, msg, sizeof msg);
    if (!cc->tool_gbnf) {
        if (!strcmp(msg, "out of memory")) *status = 500;
        return serve_bad(b, "tools", "%s", msg);
    }
    if (cc->reasoning == INFER_REASONING_OPEN && !triggers && !strncmp(cc->tool_gbnf, "root ::= ", 9)) {
        /* the reply begins inside <think>: free until it closes, then the call */
        static const char head[] = "root ::= \"</think>\" [ \\n]{0,4} tool-root\ntool-";
        size_t n = strlen(cc->tool_gbnf);
        char *g = (char *)malloc(sizeof head + n);
        if (!g) {
            *status = 500;
            return 0;
        }
        memcpy(g, head, sizeof head - 1);
        memcpy(g + sizeof head - 1, cc->tool_gbnf, n + 1);
        free(cc->tool_gbnf);
        cc->tool_gbnf = g;
        triggers = think_end;
        n_triggers = 1;
    }
    if (strlen(cc->tool_gbnf) > s->max_grammar) {
        b->code = "tools_too_complex";
        return serve_bad(b, "tools", "tools: the grammar of their calls is %zu bytes; this server takes at most %zu (--max-grammar)",
                   strlen(cc->tool_gbnf), s->max_grammar);
    }
    cc->p.grammar = cc->tool_gbnf;
    cc->p.json_schema = NULL;
    cc->p.grammar_triggers = triggers;
    cc->p.n_grammar_triggers = n_triggers;
    return 1;
}


/* Choice i's whole reply, split by its parser where it has one: *res, and
   1; else 0 (the text as it is, in *text). *text is malloc'd (free it). */
static int job_reply(job *j, int i, char **text, size_t *n, infer_output_result *res) {
    choice *c = &j->ch[i];
    const char *finish;
    infer_error err;
    *text = request_text_from(c->r, 0, n);
    job_gen_tokens(j, i, &finish);
    if (c->parser && !strcmp(finish, "length")) infer_output_parser_cut(c->parser); /* a call it cut is none */
    return c->parser && *text && infer_output_parser_push(c->parser, *text, *n, NULL, &err) == INFER_OK &&
           infer_output_parser_finish(c->parser, NULL, res, &err) == INFER_OK;
}

/* Choice i of a finished job, OpenAI's way: a chat's message (content,
   reasoning_content, tool_calls) or a text completion's text. */
static cJSON *job_choice_json(job *j, int i) {
    const char *finish;
    size_t n;
    char *text, *clean;
    infer_output_result res;
    int parsed = job_reply(j, i, &text, &n, &res);
    cJSON *c = cJSON_CreateObject();
    job_gen_tokens(j, i, &finish);
    clean = text ? utf8_clean(text, n) : NULL;
    cJSON_AddNumberToObject(c, "index", i);
    if (j->chat) {
        cJSON *m = cJSON_AddObjectToObject(c, "message");
        cJSON_AddStringToObject(m, "role", "assistant");
        if (parsed) {
            char *part = utf8_clean(res.content, res.content_len);
            if (res.content_len || !res.n_calls) cJSON_AddStringToObject(m, "content", part ? part : "");
            else cJSON_AddNullToObject(m, "content"); /* the API's for a reply of calls only */
            free(part);
            if (res.reasoning_len) {
                part = utf8_clean(res.reasoning_content, res.reasoning_len);
                cJSON_AddStringToObject(m, "reasoning_content", part ? part : "");
                free(part);
            }
            if (res.n_calls > 0) {
                cJSON_AddItemToObject(m, "tool_calls", serve_tool_calls_json(res.calls, res.n_calls));
                finish = "tool_calls";
            }
        } else {
            cJSON_AddStringToObject(m, "content", clean ? clean : "");
        }
    } else {
        cJSON_AddStringToObject(c, "text", clean ? clean : "");
    }
    cJSON_AddItemToObject(c, "logprobs", job_logprobs(j, i, 0, req_n_gen(j->ch[i].r)));
    cJSON_AddStringToObject(c, "finish_reason", finish);
    free(text);
    free(clean);
    return c;
}

/* The whole reply of a finished job, in its API's shape. */
static cJSON *job_reply_json(job *j) {
    cJSON *o;
    int i;
    if (j->api == SERVE_API_ANTHROPIC) {
        const char *finish;
        size_t n;
        char *text;
        infer_output_result res;
        int parsed = job_reply(j, 0, &text, &n, &res), n_gen = job_gen_tokens(j, 0, &finish);
        if (!parsed) {
            memset(&res, 0, sizeof res);
            res.content = text ? text : "";
            res.content_len = text ? n : 0;
            res.reasoning_content = "";
        }
        o = anthropic_message(j->id, j->s->model_id, &res, finish, j->n_prompt, n_gen,
                              infer_request_cached_tokens(j->ch[0].r));
        free(text);
        return o;
    }
    o = job_object(j, j->chat ? "chat.completion" : "text_completion");
    {
        cJSON *choices = cJSON_AddArrayToObject(o, "choices");
        for (i = 0; i < j->n; i++) cJSON_AddItemToArray(choices, job_choice_json(j, i));
    }
    cJSON_AddItemToObject(o, "usage", job_usage(j));
    cJSON_AddItemToObject(o, "timings", job_timings(j));
    return o;
}

/* Waits for r, watching the client. 0 when the client left or the server
   stops (r is not freed). Once the drain's time-out has passed, r is
   cancelled (and ends so). */
static int job_wait(job *j, infer_request *r) {
    while (!infer_request_done(r)) {
        if (client_gone(&j->watch, 2) || server_stopping(j->s)) {
            fprintf(stderr, "infer serve: POST %s: the client went away: request cancelled (sequence %d)\n", j->path,
                    j->ch[0].slot);
            job_account(j, 1);
            return 0;
        }
        if (server_cancelling(j->s)) infer_request_cancel(r);
    }
    return 1;
}

/* Starts the job's n requests on its sequences. With n > 1 the prompt is
   fed once, on the first, and copied into the others (copy_to); each then
   finds it whole in its cache. 1, or 0 with *status (499: the client left)
   or b set. */
static int job_start(job *j, completion_call *cc, bad_field *b, unsigned *status) {
    server *s = j->s;
    infer_error err;
    int i;
    if (j->n > 1) {
        infer_request_params pre = cc->p;
        infer_request *r;
        int to[SERVE_MAX_N];
        for (i = 1; i < j->n; i++) to[i - 1] = j->ch[i].slot;
        pre.seq = j->ch[0].slot;
        pre.n_predict = 0;
        pre.grammar = NULL, pre.json_schema = NULL, pre.n_grammar_triggers = 0, pre.n_probs = 0;
        pre.copy_to = to, pre.n_copy_to = j->n - 1;
        if (!(r = infer_worker_start(s->worker, s->ctx, &pre, &err))) return serve_bad(b, NULL, "%s", err.msg);
        if (!job_wait(j, r)) {
            infer_request_cancel(r);
            infer_request_free(r);
            *status = 499;
            return 0;
        }
        if (infer_request_status(r, &err) != INFER_OK) {
            infer_request_free(r);
            return serve_bad(b, NULL, "%s", err.msg);
        }
        infer_request_free(r);
    }
    for (i = 0; i < j->n; i++) {
        infer_request_params p = cc->p;
        p.seq = j->ch[i].slot;
        if (i == 0) { /* the others' prompts are the first's, copied */
            snprintf(j->progress_label, sizeof j->progress_label, "%s (sequence %d): prompt", j->id, p.seq);
            cli_progress_begin(&j->progress, j->progress_label);
            p.progress = cli_progress_report;
            p.progress_user = &j->progress;
        }
        p.sampling.seed += (uint64_t)i; /* n samples, not one n times */
        if (cc->parse && !(j->ch[i].parser = infer_output_parser_new(cc->parse_fmt, cc->reasoning, &err))) {
            *status = 500;
            return 0;
        }
        /* the tools' declared string parameters stay text (Qwen3.5's XML) */
        if (j->ch[i].parser && cc->tools.tools_json &&
            infer_output_parser_set_tools(j->ch[i].parser, cc->tools.tools_json, &err) != INFER_OK) {
            *status = 500;
            return 0;
        }
        /* no lock of ours: a large schema's grammar is compiled here, on this
           connection's thread, while other requests start and step */
        {
            infer_request *r;
            if (i == 0) j->t_start = now_ms();
            r = infer_worker_start(s->worker, s->ctx, &p, &err);
            if (!r) return serve_bad(b, cc->schema ? "response_format" : NULL, "%s", err.msg);
            /* listed where the drain and /slots find it */
            pthread_mutex_lock(&s->mu);
            j->ch[i].r = r;
            s->slots[p.seq].r = r;
            if (server_cancelling(s)) infer_request_cancel(r); /* the drain's time-out passed as it started */
            pthread_mutex_unlock(&s->mu);
        }
    }
    return 1;
}

/* An error reply in the job's API's shape. */
static mhd_result send_api_error(struct MHD_Connection *con, int api, unsigned status, const char *param,
                                 const char *code, const char *msg) {
    if (api == SERVE_API_ANTHROPIC)
        return send_json(con, status, anthropic_error(status == 400 ? "invalid_request_error"
                                                      : status == 503 ? "overloaded_error" : "api_error", msg));
    return send_error(con, status, param, code, "%s", msg);
}

/* A completion: body_text in the API's shape (an Anthropic body already
   made an OpenAI chat's), answered in it. */
static mhd_result serve_completion_api(server *s, struct MHD_Connection *con, const char *path, const char *body_text,
                                       int chat, int http11, int api) {
    completion_call cc;
    bad_field b = {NULL, {0}, NULL};
    char *prompt = NULL, *gbnf = NULL;
    job *j = NULL;
    infer_error err;
    unsigned status = 0;
    mhd_result ret;
    int n_prompt = 0, i, ok = completion_from_body(s, body_text, chat, &cc, &prompt, &n_prompt, &b);
    {   /* for the access log */
        conn *c = conn_of(con);
        const char *user = NULL;
        bad_field ignored;
        if (c && cc.body && serve_read_user(cc.body, &user, &ignored) && user) {
            snprintf(c->user, sizeof c->user, "%s", user);
            c->has_user = 1;
        }
        if (c) c->n_prompt = ok ? n_prompt : 0;
    }
    if (!ok) goto bad_request;
    if (api == SERVE_API_ANTHROPIC && !cc.parse) { /* content blocks: always split */
        cc.parse = 1;
        cc.parse_fmt = INFER_TOOL_FORMAT_NONE;
    }
#if defined(__linux__) && defined(SYS_gettid)
    /* Making and compiling a grammar (infer_worker_start) is this thread's
       work, done at a lower priority than the batch's threads: on a
       machine of few cores it would slow every reply meanwhile. Nice is
       per thread on Linux; it stays (an unprivileged thread cannot raise
       it again), which only slows this connection's own parsing. */
    if (cc.schema || cc.p.grammar || serve_tools_active(&cc.tools)) setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 10);
#endif
    if (cc.schema) {
        /* The schema's grammar made here, its size checked first: a short
           schema can make a long grammar (optional properties: quadratic),
           and compiling one takes time and memory growing faster than it. */
        size_t len = 0;
        if (infer_json_schema_to_grammar(cc.schema, NULL, 0, &len, &err) != INFER_OK) {
            serve_bad(&b, "response_format", "%s", err.msg);
            goto bad_request;
        }
        if (len > s->max_grammar) {
            serve_bad(&b, "response_format", "response_format: the schema's grammar is %zu bytes; this server takes at most %zu (--max-grammar)",
                len, s->max_grammar);
            b.code = "schema_too_complex";
            goto bad_request;
        }
        if (!(gbnf = (char *)malloc(len + 1)) ||
            infer_json_schema_to_grammar(cc.schema, gbnf, len + 1, NULL, &err) != INFER_OK) {
            status = 500;
            goto fail;
        }
        cc.p.grammar = gbnf;
        cc.p.json_schema = NULL;
    }
    if (chat && serve_tools_active(&cc.tools) && !tool_grammar(s, &cc, &b, &status)) {
        if (status) goto fail;
        goto bad_request;
    }
    if (cc.reasoning_budget >= 0 && cc.reasoning != INFER_REASONING_NONE) {
        cc.p.reasoning_budget = cc.reasoning_budget;
        cc.p.reasoning_open = cc.reasoning == INFER_REASONING_OPEN;
    }

    j = (job *)calloc(1, sizeof *j);
    if (!j) {
        status = 500;
        goto fail;
    }
    j->s = s;
    j->api = api;
    j->n = cc.n;
    for (i = 0; i < SERVE_MAX_N; i++) j->ch[i].slot = -1;
    j->con = con;
    j->watch.fd = connection_fd(con);
    j->watch.may_probe = http11;
    j->watch.fin_ends = !http11;
    j->chat = chat;
    j->stream = cc.stream;
    j->include_usage = cc.include_usage;
    j->max_tokens = cc.max_tokens;
    j->n_prompt = n_prompt;
    j->created = (long)time(NULL);
    j->t0 = now_ms();
    j->path = path;
    j->logprobs = cc.logprobs;
    j->top_logprobs = cc.top_logprobs;
    snprintf(j->id, sizeof j->id, "%s-%llx%04x",
             api == SERVE_API_ANTHROPIC ? "msg" : chat ? "chatcmpl" : "cmpl", (unsigned long long)cc.p.sampling.seed,
             (unsigned)rand() & 0xffff);
    pthread_mutex_lock(&s->mu); /* in progress: listed for the drain */
    j->next = s->jobs;
    if (s->jobs) s->jobs->prev = j;
    s->jobs = j;
    j->listed = 1;
    pthread_mutex_unlock(&s->mu);
    {
        int slots[SERVE_MAX_N];
        if (slot_acquire(s, &j->watch, cc.p.prompt_tokens, cc.p.n_prompt_tokens, cc.user, j->n, slots, &status) < 0)
            goto fail;
        for (i = 0; i < j->n; i++) j->ch[i].slot = slots[i];
    }
    if (!job_start(j, &cc, &b, &status)) {
        if (status) goto fail;
        goto bad_request;
    }
    free(prompt);
    prompt = NULL;
    free(gbnf);
    gbnf = NULL;
    serve_completion_call_free(&cc);

    if (j->stream) {
        struct MHD_Response *res = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, job_stream_read, j,
                                                                     job_stream_free);
        if (!res) {
            job_free(j);
            return MHD_NO;
        }
        MHD_add_response_header(res, "Content-Type", "text/event-stream");
        MHD_add_response_header(res, "Cache-Control", "no-cache");
        j->watch.may_probe = j->watch.fin_ends = 0; /* the reply begins: from now on write errors tell */
        connection_timeout(con, SERVE_SEND_TIMEOUT_S);
        ret = queue_reply(con, 200, res);
        MHD_destroy_response(res);
        return ret;
    }
    /* not streamed: wait for the whole reply, watching the client */
    for (i = 0; i < j->n; i++)
        if (!job_wait(j, j->ch[i].r)) {
            job_free(j);
            return MHD_NO;
        }
    for (i = 0; i < j->n; i++) {
        infer_status st = infer_request_status(j->ch[i].r, &err);
        if (st != INFER_OK && st != INFER_ERR_CONTEXT_FULL) {
            int cut = st == INFER_ERR_CANCELLED && server_cancelling(s);
            unsigned code = cut ? 503 : st == INFER_ERR_ARG || st == INFER_ERR_FORMAT ? 400 : 500;
            job_account(j, 1);
            ret = send_api_error(con, api, code, NULL, cut ? "server_shutting_down" : NULL, cut ? drain_cancelled : err.msg);
            job_free(j);
            return ret;
        }
    }
    {
        cJSON *o = job_reply_json(j);
        job_account(j, 1);
        job_free(j);
        return send_json(con, 200, o);
    }

bad_request:
    status = 400;
fail:
    free(prompt);
    free(gbnf);
    serve_completion_call_free(&cc);
    if (j) job_free(j);
    if (status == 499) return MHD_NO; /* the client left while waiting */
    if (server_cancelling(s)) /* (a 400 too: the request that fed n replies' prompt was cancelled) */
        return send_api_error(con, api, 503, NULL, "server_shutting_down", drain_cancelled);
    if (status == 503) {
        char msg[128];
        snprintf(msg, sizeof msg, "every sequence is busy and the queue (%d) is full: try again later", s->max_queue);
        return send_api_error(con, api, 503, NULL, "queue_full", msg);
    }
    if (status == 400) {
        if (!b.code) fprintf(stderr, "infer serve: POST %s 400: %s\n", path, b.msg);
        return send_api_error(con, api, 400, b.param, b.code, b.msg);
    }
    return send_api_error(con, api, 500, NULL, NULL, "out of memory");
}

static mhd_result serve_completion(server *s, struct MHD_Connection *con, const char *path, const char *body_text,
                                   int chat, int http11) {
    return serve_completion_api(s, con, path, body_text, chat, http11, SERVE_API_OPENAI);
}

/* Anthropic's Messages API: the body made an OpenAI chat's, answered in
   Anthropic's shapes (serve_anthropic.c). */
static mhd_result serve_messages(server *s, struct MHD_Connection *con, const char *body_text, int http11) {
    cJSON *body = cJSON_Parse(body_text), *chat;
    const char *param = NULL;
    char msg[300] = "", *text;
    mhd_result ret;
    if (!body) return send_json(con, 400, anthropic_error("invalid_request_error", "the request body is not JSON"));
    chat = anthropic_to_chat(body, &param, msg, sizeof msg);
    if (chat) { /* Anthropic's metadata.user_id is the request's user (sessions, the access log) */
        cJSON *meta = serve_field(body, "metadata"), *uid = cJSON_IsObject(meta) ? serve_field(meta, "user_id") : NULL;
        if (uid) cJSON_AddItemToObject(chat, "user", cJSON_Duplicate(uid, 1));
    }
    cJSON_Delete(body);
    if (!chat) {
        fprintf(stderr, "infer serve: POST /v1/messages 400: %s\n", msg[0] ? msg : "out of memory");
        return send_json(con, msg[0] ? 400 : 500, anthropic_error(msg[0] ? "invalid_request_error" : "api_error",
                                                                  msg[0] ? msg : "out of memory"));
    }
    text = cJSON_PrintUnformatted(chat);
    cJSON_Delete(chat);
    if (!text) return send_json(con, 500, anthropic_error("api_error", "out of memory"));
    ret = serve_completion_api(s, con, "/v1/messages", text, 1, http11, SERVE_API_ANTHROPIC);
    cJSON_free(text);
    return ret;
}

/* ---- Embeddings ---------------------------------------------------------------- */

static const char base64_digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* The floats' little-endian bytes in base64 (the API's encoding_format
   "base64", which the openai client asks for by default). */
static char *base64_floats(const float *v, int n) {
    const unsigned char *p = (const unsigned char *)v;
    size_t len = (size_t)n * 4, i, o = 0;
    char *out = (char *)malloc((len + 2) / 3 * 4 + 1);
    if (!out) return NULL;
    for (i = 0; i < len; i += 3) {
        unsigned x = (unsigned)p[i] << 16 | (i + 1 < len ? (unsigned)p[i + 1] << 8 : 0) | (i + 2 < len ? p[i + 2] : 0);
        out[o++] = base64_digits[x >> 18 & 63];
        out[o++] = base64_digits[x >> 12 & 63];
        out[o++] = i + 1 < len ? base64_digits[x >> 6 & 63] : '=';
        out[o++] = i + 2 < len ? base64_digits[x & 63] : '=';
    }
    out[o] = 0;
    return out;
}

/* One item of an embeddings request's input: a text, or token ids as a
   client that tokenizes for itself sends them (langchain's OpenAIEmbeddings
   does by default). */
typedef struct embed_input {
    const char *text;  /* NULL for tokens */
    infer_token *toks; /* malloc'd */
    int n_toks;
} embed_input;

/* The token ids of array a, each checked to be one of the model's n_vocab;
   into in. Returns 0 with msg set when one is not. */
static int embed_token_list(const cJSON *a, int index, int n_vocab, embed_input *in, char *msg, size_t size) {
    const cJSON *t;
    int n = cJSON_GetArraySize(a), k = 0;
    if (n < 1) return snprintf(msg, size, "input %d is an empty token list", index), 0;
    if (!(in->toks = (infer_token *)malloc(sizeof *in->toks * (size_t)n))) return snprintf(msg, size, "out of memory"), 0;
    cJSON_ArrayForEach(t, a) {
        double v = cJSON_IsNumber(t) ? t->valuedouble : -1;
        if (!cJSON_IsNumber(t) || v != (double)(long)v || v < 0 || v >= n_vocab)
            return snprintf(msg, size, "input %d, token %d is not a token id of this model (0 to %d)", index, k, n_vocab - 1),
                   0;
        in->toks[k++] = (infer_token)v;
    }
    in->n_toks = n;
    return 1;
}

static void embed_inputs_free(embed_input *in, int n) {
    int i;
    for (i = 0; in && i < n; i++) free(in[i].toks);
    free(in);
}

/* 'input' as OpenAI takes it: a string, an array of strings, an array of
   token ids, or an array of arrays of token ids. Returns the count (1 to
   256) with *out calloc'd, or 0 with msg set and nothing held. */
static int embed_inputs(const cJSON *input, int n_vocab, embed_input **out, char *msg, size_t size) {
    static const char *shape = "'input' must be a string, an array of 1 to 256 strings, an array of token ids, "
                               "or an array of 1 to 256 arrays of token ids";
    const cJSON *x;
    int n, i = 0, ids = cJSON_IsArray(input) && cJSON_IsNumber(input->child);
    *out = NULL;
    n = cJSON_IsString(input) || ids ? 1 : cJSON_IsArray(input) ? cJSON_GetArraySize(input) : 0;
    if (n < 1 || n > 256) return snprintf(msg, size, "%s", shape), 0;
    if (!(*out = (embed_input *)calloc((size_t)n, sizeof **out))) return snprintf(msg, size, "out of memory"), 0;
    if (cJSON_IsString(input)) {
        (*out)[0].text = input->valuestring;
        return 1;
    }
    if (ids) {
        if (embed_token_list(input, 0, n_vocab, &(*out)[0], msg, size)) return 1;
        embed_inputs_free(*out, 1);
        return *out = NULL, 0;
    }
    cJSON_ArrayForEach(x, input) {
        int ok = 1;
        if (cJSON_IsString(x)) (*out)[i].text = x->valuestring;
        else if (!cJSON_IsArray(x)) ok = 0, snprintf(msg, size, "%s", shape);
        else ok = embed_token_list(x, i, n_vocab, &(*out)[i], msg, size);
        if (!ok) {
            embed_inputs_free(*out, n);
            return *out = NULL, 0;
        }
        i++;
    }
    return n;
}

static mhd_result serve_embeddings(server *s, struct MHD_Connection *con, const char *body_text) {
    cJSON *body = cJSON_Parse(body_text), *input, *x, *o, *data;
    const char *fmt = "float";
    int n_in, i = 0, dim = infer_model_n_embd(s->model), n_tokens = 0;
    embed_input *in = NULL;
    float *e;
    infer_error err;
    conn *c = conn_of(con);
    const char *user = NULL;
    bad_field b;
    if (!body || !cJSON_IsObject(body)) {
        cJSON_Delete(body);
        return send_error(con, 400, NULL, "invalid_json", "the request body is not a JSON object");
    }
    if (!serve_read_user(body, &user, &b)) {
        cJSON_Delete(body);
        return send_error(con, 400, b.param, NULL, "%s", b.msg);
    }
    if (c && user) { /* for the access log */
        snprintf(c->user, sizeof c->user, "%s", user);
        c->has_user = 1;
    }
    input = serve_field(body, "input");
    x = serve_field(body, "encoding_format");
    if (x) {
        if (!cJSON_IsString(x) || (strcmp(x->valuestring, "float") && strcmp(x->valuestring, "base64"))) {
            cJSON_Delete(body);
            return send_error(con, 400, "encoding_format", NULL, "'encoding_format' must be float or base64");
        }
        fmt = x->valuestring;
    }
    /* the model's embeddings have one size: a request for it is granted, any other refused, not truncated */
    x = serve_field(body, "dimensions");
    if (x && (!cJSON_IsNumber(x) || x->valuedouble != dim)) {
        cJSON_Delete(body);
        return send_error(con, 400, "dimensions", NULL, "'dimensions' must be %d, the size of this model's embeddings", dim);
    }
    if (!(n_in = embed_inputs(input, infer_model_n_vocab(s->model), &in, err.msg, sizeof err.msg))) {
        cJSON_Delete(body);
        return send_error(con, 400, "input", NULL, "%s", err.msg);
    }
    if (!(e = (float *)malloc(sizeof(float) * (size_t)dim))) {
        embed_inputs_free(in, n_in);
        cJSON_Delete(body);
        return send_error(con, 500, NULL, NULL, "out of memory");
    }
    o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "object", "list");
    data = cJSON_AddArrayToObject(o, "data");
    pthread_mutex_lock(&s->embed_mu);
    if (!s->embed_ctx) { /* made on first use: a server that never embeds keeps the memory */
        infer_context_params cp = infer_context_default_params();
        cp.n_ctx = s->n_ctx;
        cp.n_threads = s->n_threads;
        s->embed_ctx = infer_context_new(s->model, &cp, &err);
    }
    for (; i < n_in && s->embed_ctx; i++) {
        const char *text = in[i].text;
        int nt = in[i].n_toks;
        cJSON *item;
        if (text && infer_tokenize(s->model, text, strlen(text), NULL, 0, infer_model_add_bos(s->model), 0, &nt, &err) !=
                        INFER_OK)
            nt = -1;
        if (nt > s->n_ctx) {
            snprintf(err.msg, sizeof err.msg, "input %d is %d tokens; this server's context holds %d", i, nt, s->n_ctx);
            break;
        }
        if ((text ? infer_embed(s->embed_ctx, 0, text, INFER_POOLING_MEAN, 1, e, &err)
                  : infer_embed_tokens(s->embed_ctx, 0, in[i].toks, nt, INFER_POOLING_MEAN, 1, e, &err)) != INFER_OK)
            break;
        n_tokens += nt;
        item = cJSON_CreateObject();
        cJSON_AddStringToObject(item, "object", "embedding");
        cJSON_AddNumberToObject(item, "index", i);
        if (!strcmp(fmt, "base64")) {
            char *b64 = base64_floats(e, dim);
            cJSON_AddStringToObject(item, "embedding", b64 ? b64 : "");
            free(b64);
        } else {
            cJSON *arr = cJSON_AddArrayToObject(item, "embedding");
            int k;
            for (k = 0; k < dim; k++) cJSON_AddItemToArray(arr, cJSON_CreateNumber(e[k]));
        }
        cJSON_AddItemToArray(data, item);
    }
    pthread_mutex_unlock(&s->embed_mu);
    free(e);
    embed_inputs_free(in, n_in);
    if (!s->embed_ctx || i < n_in) {
        cJSON_Delete(o);
        cJSON_Delete(body);
        return send_error(con, s->embed_ctx ? 400 : 500, "input", NULL, "%s", err.msg);
    }
    cJSON_AddStringToObject(o, "model", s->model_id);
    x = cJSON_AddObjectToObject(o, "usage");
    cJSON_AddNumberToObject(x, "prompt_tokens", n_tokens);
    cJSON_AddNumberToObject(x, "total_tokens", n_tokens);
    cJSON_Delete(body);
    serve_metrics_tokens(&s->metrics, n_tokens, 0);
    if (c) c->n_prompt = n_tokens;
    return send_json(con, 200, o);
}

/* ---- Routing ------------------------------------------------------------------ */

/* The served model as OpenAI describes one: GET /v1/models' item, and
   GET /v1/models/{id}'s answer. */
static cJSON *model_object(server *s) {
    cJSON *m = cJSON_CreateObject();
    char desc[256];
    cJSON_AddStringToObject(m, "id", s->model_id);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", (double)s->created);
    cJSON_AddStringToObject(m, "owned_by", "infer");
    infer_model_describe(s->model, desc, sizeof desc, NULL, NULL);
    cJSON_AddStringToObject(m, "description", desc);
    cJSON_AddNumberToObject(m, "n_ctx", s->n_ctx);
    return m;
}

static mhd_result serve_models(server *s, struct MHD_Connection *con) {
    cJSON *o = cJSON_CreateObject(), *data = cJSON_AddArrayToObject(o, "data");
    cJSON_AddStringToObject(o, "object", "list");
    cJSON_AddItemToArray(data, model_object(s));
    return send_json(con, 200, o);
}

/* GET /v1/models/{id}: id as libmicrohttpd gives the path, percent-decoded */
static mhd_result serve_model(server *s, struct MHD_Connection *con, const char *id) {
    if (strcmp(id, s->model_id))
        return send_error(con, 404, "model", "model_not_found", "the model '%s' does not exist; this server has '%s'", id,
                          s->model_id);
    return send_json(con, 200, model_object(s));
}

/* GET /health: the process answers (200 from the start, while loading
   too: {"status": "ok"}); once loaded, the sequences and the device. */
static mhd_result serve_health(server *s, struct MHD_Connection *con) {
    cJSON *o = cJSON_CreateObject();
    int busy = 0, i;
    if (!server_ready(s)) {
        cJSON_AddStringToObject(o, "status", "ok");
        return send_json(con, 200, o);
    }
    pthread_mutex_lock(&s->mu);
    for (i = 0; i < s->n_slots; i++) busy += s->slot_busy[i];
    cJSON_AddStringToObject(o, "status", "ok");
    cJSON_AddStringToObject(o, "version", infer_version());
    cJSON_AddNumberToObject(o, "slots_idle", s->n_slots - busy);
    cJSON_AddNumberToObject(o, "slots_processing", busy);
    cJSON_AddNumberToObject(o, "requests_waiting", s->n_waiting);
    cJSON_AddNumberToObject(o, "requests_served", s->n_served);
    cJSON_AddStringToObject(o, "device", infer_device_name(infer_model_device(s->model)));
    cJSON_AddStringToObject(o, "device_name", infer_model_device_name(s->model));
    pthread_mutex_unlock(&s->mu);
    return send_json(con, 200, o);
}

/* GET /ready: whether a load balancer should send requests here: 200
   {"status": "ready"}, or 503 {"status": "loading"} or "draining". */
static mhd_result serve_ready(server *s, struct MHD_Connection *con) {
    cJSON *o = cJSON_CreateObject();
    const char *state = server_draining(s) ? "draining" : server_ready(s) ? "ready" : "loading";
    cJSON_AddStringToObject(o, "status", state);
    return send_json(con, strcmp(state, "ready") ? 503 : 200, o);
}

/* Sequence i's cached positions and their hash, under mu: a free one's
   cache; a busy one's request, its prompt and the tokens generated so far
   (the cache it is filling); else what the cache held when taken. */
static int slot_now(server *s, int i, unsigned long long *hash) {
    slot_info *si = &s->slots[i];
    infer_token *t;
    int n_prompt, n_gen, n, got;
    if (!s->slot_busy[i]) return slot_cached(s, i, hash);
    *hash = si->taken_hash;
    if (!si->r) return si->taken_n;
    n_prompt = req_n_prompt(si->r);
    n_gen = req_n_gen(si->r);
    if (n_prompt + n_gen == 0 || !(t = (infer_token *)malloc(sizeof *t * (size_t)(n_prompt + n_gen)))) return si->taken_n;
    /* (there may be more by now: the counts first asked for are kept) */
    if (infer_request_prompt_tokens(si->r, t, n_prompt, &got, NULL) == INFER_OK && got < n_prompt) n_prompt = got;
    if (infer_request_tokens(si->r, t + n_prompt, n_gen, &got, NULL) == INFER_OK && got < n_gen) n_gen = got;
    n = n_prompt + n_gen;
    if (n_gen > 0 && infer_model_is_eog(s->model, t[n - 1])) n--; /* an end of generation is not kept */
    *hash = tokens_hash(t, n);
    free(t);
    return n;
}

/* The gauges of /metrics, as things are now. */
static void server_gauges(server *s, serve_gauges *g) {
    int i;
    memset(g, 0, sizeof *g);
    g->ready = server_ready(s);
    g->draining = server_draining(s);
    pthread_mutex_lock(&s->mu);
    g->queue_length = s->n_waiting;
    for (i = 0; i < s->n_slots; i++) {
        unsigned long long hash;
        g->busy += s->slot_busy[i];
        if (g->ready) g->kv_tokens += slot_now(s, i, &hash);
    }
    g->idle = s->n_slots - g->busy;
    pthread_mutex_unlock(&s->mu);
    if (g->ready) {
        g->kv_capacity = (long long)s->n_ctx * s->n_slots;
        g->load_seconds = s->load_seconds;
    }
}

/* GET /metrics: Prometheus' text format (serve_metrics.c). */
static mhd_result serve_metrics_page(server *s, struct MHD_Connection *con) {
    serve_gauges g;
    char *text;
    server_gauges(s, &g);
    if (!(text = serve_metrics_text(&s->metrics, &g))) return send_error(con, 500, NULL, NULL, "out of memory");
    return send_text(con, 200, text, "text/plain; version=0.0.4; charset=utf-8");
}

/* GET /slots: per sequence, its state, what its cache holds (the count
   and a hash that equal caches share) and the last request's user. */
static mhd_result serve_slots(server *s, struct MHD_Connection *con) {
    cJSON *a = cJSON_CreateArray();
    int i;
    pthread_mutex_lock(&s->mu);
    for (i = 0; i < s->n_slots; i++) {
        cJSON *o = cJSON_CreateObject();
        unsigned long long hash;
        char hex[17];
        int n = slot_now(s, i, &hash);
        snprintf(hex, sizeof hex, "%016llx", hash);
        cJSON_AddNumberToObject(o, "id", i);
        cJSON_AddStringToObject(o, "state", s->slot_busy[i] ? "busy" : "idle");
        cJSON_AddNumberToObject(o, "n_cached", n);
        cJSON_AddStringToObject(o, "prefix_hash", hex);
        if (s->slots[i].has_user) {
            char *clean = utf8_clean(s->slots[i].user, strlen(s->slots[i].user));
            cJSON_AddStringToObject(o, "user", clean ? clean : "");
            free(clean);
        } else {
            cJSON_AddNullToObject(o, "user");
        }
        cJSON_AddItemToArray(a, o);
    }
    pthread_mutex_unlock(&s->mu);
    return send_json(con, 200, a);
}

/* Compares in time independent of where the strings differ. */
static int same_secret(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b), i;
    unsigned diff = (unsigned)(la ^ lb);
    for (i = 0; i < la; i++) diff |= (unsigned)(a[i] ^ b[lb ? i % lb : 0]);
    return diff == 0;
}

/* A request's body as it arrives: kept up to max_body bytes. */
typedef struct upload {
    char *data;
    size_t len, cap;
    int too_big;
    int logged;    /* past the loading and draining gates: the access log has it */
    int inflight;  /* counted in s->n_inflight (a model request accepted) */
} upload;

/* A connection's first request is served even when it arrives during the
   drain: the connection was accepted before the drain stopped accepting,
   so a balancer sent the request here and will not resend a POST. The
   drain waits a moment for such requests (conn_settle, server_drain).
   Later requests on a kept-alive connection are refused with 503. */
static int conn_first_request(server *s, struct MHD_Connection *con) {
    conn *c = conn_of(con);
    int first;
    if (!c) return 0;
    pthread_mutex_lock(&s->conn_mu);
    first = c->requests++ == 0;
    pthread_mutex_unlock(&s->conn_mu);
    return first;
}

/* The connection's first request is accepted (counted in flight) or
   refused: the drain need not wait for it any more. */
static void conn_settle(server *s, struct MHD_Connection *con) {
    conn *c = conn_of(con);
    if (!c) return;
    pthread_mutex_lock(&s->conn_mu);
    if (c->fresh) c->fresh = 0, s->n_fresh--;
    pthread_mutex_unlock(&s->conn_mu);
}

/* Whether a route's requests run the model: counted in flight (the drain
   waits for them) and written to the access log. */
static int route_uses_model(serve_route r) {
    return r == SERVE_ROUTE_CHAT || r == SERVE_ROUTE_COMPLETIONS || r == SERVE_ROUTE_MESSAGES || r == SERVE_ROUTE_EMBEDDINGS;
}

mhd_result serve_on_request(void *cls, struct MHD_Connection *con, const char *url, const char *method,
                             const char *version, const char *upload_data, size_t *upload_size, void **con_cls) {
    server *s = (server *)cls;
    upload *u = (upload *)*con_cls;
    int get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
    int http11 = !strcmp(version, MHD_HTTP_VERSION_1_1); /* 1xx replies are for HTTP/1.1 clients only */
    int first;
    serve_route route = serve_route_of(url);
    if (!u) { /* the headers: set up for the body, and the request's record */
        conn *c = conn_of(con);
        if (!(u = (upload *)calloc(1, sizeof *u))) return MHD_NO;
        *con_cls = u;
        if (c) {
            c->route = route;
            snprintf(c->method, sizeof c->method, "%s", method);
            c->status = 0;
            c->t0 = now_ms();
            c->user[0] = 0;
            c->has_user = 0;
            c->n_prompt = c->n_generated = 0;
        }
        return MHD_YES;
    }
    if (*upload_size) {
        if (!u->too_big && u->len + *upload_size <= s->max_body) {
            if (u->len + *upload_size + 1 > u->cap) {
                size_t cap = (u->len + *upload_size + 1) * 2;
                char *d = (char *)realloc(u->data, cap > s->max_body + 1 ? s->max_body + 1 : cap);
                if (!d) return MHD_NO;
                u->data = d;
                u->cap = cap > s->max_body + 1 ? s->max_body + 1 : cap;
            }
            memcpy(u->data + u->len, upload_data, *upload_size);
            u->len += *upload_size;
        } else {
            u->too_big = 1; /* read and dropped: the answer is 413 */
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (u->data) u->data[u->len] = 0;
    conn_reading(s, con, 0); /* arrived whole: the reply takes what time it takes */
    first = conn_first_request(s, con);
    if (!route_uses_model(route)) conn_settle(s, con);

    /* for orchestrators and scrapers: no key, answered while loading and draining */
    if (route == SERVE_ROUTE_HEALTH || route == SERVE_ROUTE_READY || route == SERVE_ROUTE_METRICS) {
        if (!get) return send_error(con, 405, NULL, "method_not_allowed", "%s does not take %s", url, method);
        return route == SERVE_ROUTE_HEALTH ? serve_health(s, con)
               : route == SERVE_ROUTE_READY ? serve_ready(s, con)
                                            : serve_metrics_page(s, con);
    }
    if (s->api_key) {
        /* OpenAI's clients send Authorization: Bearer KEY; Anthropic's, x-api-key: KEY */
        const char *auth = MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Authorization");
        const char *xkey = MHD_lookup_connection_value(con, MHD_HEADER_KIND, "x-api-key");
        if (xkey && !auth && same_secret(xkey, s->api_key)) {
            /* accepted */
        } else if (!auth || strncmp(auth, "Bearer ", 7) || !same_secret(auth + 7, s->api_key)) {
            if (!auth) auth = xkey;
            fprintf(stderr, "infer serve: %s %s 401: %s API key\n", method, url, auth ? "a wrong" : "no");
            return send_error(con, 401, NULL, "invalid_api_key",
                              auth ? "the API key is not valid" : "an API key is needed (Authorization: Bearer KEY)");
        }
    }
    if (!server_ready(s))
        return send_error(con, 503, NULL, "model_loading", "the model is loading: try again once /ready answers 200");
    /* accepted (counted in flight) unless the drain has begun, atomically
       with its start: the drain never misses a request it should wait for */
    pthread_mutex_lock(&s->mu);
    if ((!server_draining(s) || first) && route_uses_model(route)) {
        s->n_inflight++;
        u->inflight = 1;
    }
    pthread_mutex_unlock(&s->mu);
    conn_settle(s, con); /* after the count: the drain reads the fresh, then the in-flight */
    if (server_draining(s) && !u->inflight && !first)
        return send_error(con, 503, NULL, "server_shutting_down", "the server is shutting down: send the request elsewhere");
    u->logged = 1; /* (a request refused above was not served here: a balancer sends it on) */
    if (u->too_big)
        return send_error(con, 413, NULL, "request_too_large", "the request body is larger than this server takes (%zu bytes)",
                          s->max_body);
    switch (route) {
    case SERVE_ROUTE_MODELS:
        if (get) return serve_models(s, con);
        break;
    case SERVE_ROUTE_MODEL:
        if (get) return serve_model(s, con, url + (url[1] == 'v' ? 11 : 8));
        break;
    case SERVE_ROUTE_CHAT:
        if (post) return serve_completion(s, con, "/v1/chat/completions", u->data ? u->data : "", 1, http11);
        break;
    case SERVE_ROUTE_COMPLETIONS:
        if (post) return serve_completion(s, con, "/v1/completions", u->data ? u->data : "", 0, http11);
        break;
    case SERVE_ROUTE_MESSAGES:
        if (post) return serve_messages(s, con, u->data ? u->data : "", http11);
        break;
    case SERVE_ROUTE_EMBEDDINGS:
        if (post) return serve_embeddings(s, con, u->data ? u->data : "");
        break;
    case SERVE_ROUTE_SLOTS:
        if (get) return serve_slots(s, con);
        break;
    default:
        return send_error(con, 404, NULL, "not_found", "there is no %s here", url);
    }
    return send_error(con, 405, NULL, "method_not_allowed", "%s does not take %s", url, method);
}

/* A user as the access log prints it: one field (a byte that is not
   printable ASCII, a space or '%' percent-encoded), "-" for none. */
static void log_user(const conn *c, char *out, size_t size) {
    const unsigned char *p = (const unsigned char *)c->user;
    size_t o = 0;
    if (!c->has_user || !*p) {
        snprintf(out, size, "-");
        return;
    }
    for (; *p && o + 4 <= size; p++)
        if (*p > 32 && *p < 127 && *p != '%') out[o++] = (char)*p;
        else o += (size_t)snprintf(out + o, size - o, "%%%02X", *p);
    out[o] = 0;
}

void serve_on_completed(void *cls, struct MHD_Connection *con, void **con_cls, enum MHD_RequestTerminationCode toe) {
    server *s = (server *)cls;
    upload *u = (upload *)*con_cls;
    conn *c = conn_of(con);
    (void)toe;
    /* the access log: one line per model request served, its reply over
       (a status of 499: none was sent, the client having left) */
    if (c && u && u->logged && route_uses_model(c->route)) {
        char user[3 * SERVE_USER_MAX + 1];
        log_user(c, user, sizeof user);
        fprintf(stderr, "infer serve: %s %s %u user=%s prompt=%d generated=%d %.0f ms\n", c->method,
                serve_route_name(c->route), c->status ? c->status : 499, user, c->n_prompt, c->n_generated,
                now_ms() - c->t0);
        c->route = SERVE_ROUTE_OTHER;
    }
    /* kept alive, the next request has the read time-out from now */
    connection_timeout(con, s->read_timeout);
    conn_reading(s, con, 1);
    if (u) {
        if (u->inflight) { /* (after its log line: the drain may end the process once none are left) */
            pthread_mutex_lock(&s->mu);
            s->n_inflight--;
            pthread_mutex_unlock(&s->mu);
        }
        free(u->data);
        free(u);
        *con_cls = NULL;
    }
}

/* Cancels every completion in progress; returns how many there are. */
int serve_jobs_cancel(server *s) {
    job *j;
    int n = 0, i;
    pthread_mutex_lock(&s->mu);
    for (j = s->jobs; j; j = j->next, n++)
        for (i = 0; i < j->n; i++)
            if (j->ch[i].r) infer_request_cancel(j->ch[i].r);
    pthread_mutex_unlock(&s->mu);
    return n;
}

/* infer serve - an OpenAI-compatible HTTP server on libmicrohttpd and cJSON.

   POST /v1/chat/completions and /v1/completions (streamed as server-sent
   events with "stream": true), POST /v1/embeddings, GET /v1/models,
   GET /v1/models/{id}, Anthropic's POST /v1/messages; for operators
   GET /health, /ready, /metrics (Prometheus' text format: serve_metrics.c)
   and /slots (each sequence's state, cached tokens and their hash). Every
   completion runs as an infer_request on one sequence
   of one context of --parallel sequences, which a background worker steps:
   replies in flight decode together in one batched forward pass, and a new
   request joins the running batch at the next pass. A request that finds
   every sequence busy waits in a queue of --queue places; beyond it the
   answer is 503. A client that disconnects cancels its request. With
   --draft, a draft model's context of as many sequences (and positions)
   mirrors the server's: a request on sequence i drafts in the draft
   context's sequence i, which the worker brings to the request's tokens
   each pass it drafts for. A request's "user" (or "session_id") is
   remembered by the sequence it ran on, which that user's next request
   prefers.

   As a replica behind a load balancer: it listens before it loads the
   model (/health answers 200 at once, /ready 503 until the model is in,
   everything else 503), so an orchestrator sees it alive and waits for it.
   SIGTERM or SIGINT drains it: the listening socket is closed, requests
   on open connections get 503 with Connection: close, and the replies in
   flight finish, for up to --drain-timeout seconds, after which they are
   cancelled (a stream ends with an error event); then it exits with 0. A
   second signal exits at once. Each completion and embeddings request
   gets one access-log line on stderr (on_completed).

   libmicrohttpd runs a thread per connection, so a handler may block while
   its reply is generated; it watches its socket meanwhile to notice a
   client that went away. Connections are many (--max-connections) and
   cheap; the model is guarded by the sequences and the queue. A request
   must arrive whole within --read-timeout seconds of its connection's
   start (or of the previous reply's end): a watchdog cuts slow ones. The
   time a reply takes is not limited by it. Built only where both libraries
   are found (CMakeLists.txt); infer.h itself needs neither. */
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

int infer_cmd_serve(int argc, char **argv);

/* ---- The command ------------------------------------------------------------------- */

/* libmicrohttpd's messages: dropped while the daemon starts (a failure to
   start is infer's one line, which names the reason), printed after. */
static void mhd_log(void *cls, const char *fmt, va_list ap) {
    server *s = (server *)cls;
    if (!__atomic_load_n(&s->listening, __ATOMIC_ACQUIRE)) return;
    fputs("infer serve: libmicrohttpd: ", stderr);
    vfprintf(stderr, fmt, ap);
}

static const char *serve_notes =
    "\n"
    "  A prompt that takes over 2 s to read shows its progress on stderr.\n"
    "  An OpenAI-compatible API: POST /v1/chat/completions, /v1/completions, /v1/embeddings;\n"
    "  GET /v1/models[/ID]; and Anthropic's POST /v1/messages. Chats take tools and\n"
    "  tool_choice (calls forced or shaped by a grammar), n (up to --parallel), logprobs, and give\n"
    "  reasoning_content apart; --reasoning-budget N (or a request's reasoning_budget, Anthropic's\n"
    "  thinking.budget_tokens) ends reasoning after N tokens (default -1: never). A chat's\n"
    "  reasoning_effort (low, medium, high) reaches a Jinja template as reasoning_effort (gpt-oss).\n"
    "  --lookup N: speculative decoding, each reply drafting up to N tokens a pass by prompt lookup\n"
    "  (its output unchanged; default 0: none); a request's \"speculative\": {\"lookup\": N} sets its own.\n"
    "  --draft MODEL: a draft model of the same vocabulary drafts --draft-n N tokens a pass (default 4)\n"
    "  instead, in a context of its own with as many sequences; a request's \"speculative\":\n"
    "  {\"draft_n\": N} sets its own (0: no draft). The timings then count draft_n and draft_n_accepted.\n"
    "  --parallel N replies decode together (default 4); --queue N more\n"
    "  wait for a sequence (default 16), beyond that 503. --port 0 picks a free port (printed).\n"
    "  A request's \"user\" (or \"session_id\") goes back to the sequence it last ran on where that is free.\n"
    "  --api-key KEY (or INFER_API_KEY): every request but /health, /ready and /metrics needs\n"
    "  Authorization: Bearer KEY (or x-api-key: KEY).\n"
    "  --max-connections N open at once (default 1000); --read-timeout SECS for a request's headers\n"
    "  and body to arrive, from the connection's start or the previous reply's end (default 10); a\n"
    "  reply may take any time, but one the client stops reading for 60 s is dropped. Per request:\n"
    "  --max-body BYTES (default 1048576), --max-schema BYTES of response_format's schema (default\n"
    "  524288) and --max-grammar BYTES of the GBNF grammar made from it (default 8388608: about 5 s\n"
    "  to compile), --max-messages N (default 1024), 16 stop strings, logit_bias entries up to the\n"
    "  vocabulary's size; beyond, 400 (413 for the body).\n"
    "  Chats go through the model's own Jinja chat template (tokenizer.chat_template), or FILE's;\n"
    "  chat_template_kwargs pass to it. Without one, the built-in format the template names.\n"
    "  Behind a load balancer: it listens before it loads the model (its address on stdout).\n"
    "  GET /health: 200 from the start; GET /ready: 200 once loaded, 503 while loading or draining;\n"
    "  GET /metrics: Prometheus' text format (these three need no key and answer while loading;\n"
    "  other paths are 503 then); GET /slots: each sequence's state, cached tokens, their hash and\n"
    "  last user. SIGTERM or SIGINT drains:\n"
    "  no new connections, 503 and Connection: close to new requests, the replies in flight finish\n"
    "  within --drain-timeout SECS (default 30; 0: cancelled at once) or are cancelled, then exit 0;\n"
    "  a second signal exits at once (1). One access-log line per model request on stderr:\n"
    "  METHOD PATH STATUS user=USER prompt=N generated=N MS ms.\n";

static void on_signal(int sig) { (void)sig; }

static const char *signal_name(int sig) { return sig == SIGINT ? "SIGINT" : "SIGTERM"; }

/* What the loader thread is given and reports. */
typedef struct serve_load {
    server *s;
    const char *model, *draft, *template_file;
    infer_model_params mp;
    infer_context_params cp;
    int ok;
    int done; /* atomic */
} serve_load;

/* The model loads' progress: a signal while loading cancels them. */
static int load_progress(float fraction, void *user) {
    (void)fraction;
    return __atomic_load_n(&((server *)user)->load_cancel, __ATOMIC_ACQUIRE);
}

static int load_cancelled(const server *s) { return __atomic_load_n(&s->load_cancel, __ATOMIC_ACQUIRE); }

/* The model, its context, the draft model's, the chat template and the
   worker into s. 0 on failure, said in one line (nothing said where a
   signal cancelled it). */
static int server_load(serve_load *l) {
    server *s = l->s;
    infer_error err;
    const char *delay = getenv("INFER_SERVE_LOAD_DELAY_MS");
    /* A test hook (tests/server_observe.py): the load takes that many ms
       longer, so that the loading state is seen without racing a small
       model's load. */
    if (delay) {
        double until = now_ms() + (double)atoi(delay);
        while (now_ms() < until && !load_cancelled(s)) usleep(10 * 1000);
    }
    l->mp.progress = load_progress;
    l->mp.progress_user = s;
    if (load_cancelled(s)) return 0;
    if (!(s->model = infer_model_load(l->model, &l->mp, &err))) {
        if (err.code != INFER_ERR_CANCELLED) cli_fail("%s", err.msg);
        return 0;
    }
    l->cp.n_seq = s->n_slots;
    l->cp.n_threads = s->n_threads;
    if (!(s->ctx = infer_context_new(s->model, &l->cp, &err))) return cli_fail("%s", err.msg), 0;
    s->n_ctx = infer_context_n_ctx(s->ctx);
    cli_context_warning(s->model, s->n_ctx, &l->mp);
    if (l->draft) { /* the draft model's context: the server's sequences and positions */
        infer_model_params dmp = infer_model_default_params();
        dmp.device = l->mp.device;
        dmp.progress = load_progress;
        dmp.progress_user = s;
        if (!(s->draft_model = infer_model_load(l->draft, &dmp, &err))) {
            if (err.code != INFER_ERR_CANCELLED) fprintf(stderr, "infer: --draft: %s\n", err.msg);
            return 0;
        }
        if (infer_model_n_vocab(s->draft_model) != infer_model_n_vocab(s->model)) {
            fprintf(stderr, "infer: --draft: the draft model has %d tokens in its vocabulary, the model %d: they must be "
                    "the same\n", infer_model_n_vocab(s->draft_model), infer_model_n_vocab(s->model));
            return 0;
        }
        l->cp.n_ctx = s->n_ctx;
        if (!(s->draft_ctx = infer_context_new(s->draft_model, &l->cp, &err))) {
            fprintf(stderr, "infer: --draft: %s\n", err.msg);
            return 0;
        }
    }
    s->tmpl = infer_chat_template_detect(s->model);
    { /* chats go through the model's own Jinja template, or the file's;
         one that cannot render a plain conversation falls back to the
         built-in format (a file's is an error) */
        char *own = infer_model_chat_template_text(s->model, s->bos, sizeof s->bos, s->eos, sizeof s->eos, NULL), *out;
        static const char probe[] =
            "{\"messages\": [{\"role\": \"user\", \"content\": \"Hello\"}], \"add_generation_prompt\": true}";
        int raised = 0;
        if (l->template_file) {
            free(own);
            if (!(own = cli_read_file(l->template_file, 1 << 20, "a chat template file", NULL))) return 0;
        }
        if (own && !(out = infer_jinja_render(own, probe, NULL, &raised, &err))) {
            if (l->template_file) {
                fprintf(stderr, "infer: %s: the chat template cannot render a one-message chat: %s\n", l->template_file,
                        err.msg);
                free(own);
                return 0;
            }
            fprintf(stderr, "infer serve: warning: the model's chat template cannot render a one-message chat (%s): "
                    "the built-in %s format is used\n", err.msg, infer_chat_template_name(s->tmpl.kind));
            free(own);
            own = NULL;
        } else if (own) {
            free(out);
        }
        s->jinja = own;
        s->tool_fmt = infer_tool_format_detect(own);
        s->think = own && strstr(own, "<think>") != NULL;
    }
    if (!(s->worker = infer_worker_new(1, &err))) return cli_fail("%s", err.msg), 0;
    /* one pass at a time, prompts in n_batch chunks: throughput, and a
       prompt split the same way whenever it is fed alone */
    infer_worker_set_slice(s->worker, 0);
    return 1;
}

static void *load_main(void *arg) {
    serve_load *l = (serve_load *)arg;
    double t0 = now_ms();
    l->ok = server_load(l);
    l->s->load_seconds = (now_ms() - t0) / 1e3;
    __atomic_store_n(&l->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* The next SIGINT or SIGTERM within ms, or 0. */
static int signal_wait(const sigset_t *sigs, int ms) {
    struct timespec t;
    int sig;
    t.tv_sec = ms / 1000;
    t.tv_nsec = (long)(ms % 1000) * 1000000L;
    sig = sigtimedwait(sigs, NULL, &t);
    return sig == SIGINT || sig == SIGTERM ? sig : 0;
}

/* How long the drain waits for a connection accepted before it to bring
   its first request (one that brings none is left to the read time-out). */
#define SERVE_FRESH_WAIT_MS 2000

/* A count read under the mutex that guards it. */
static int count_under(pthread_mutex_t *mu, const int *count) {
    int n;
    pthread_mutex_lock(mu);
    n = *count;
    pthread_mutex_unlock(mu);
    return n;
}
static int fresh_now(server *s) { return count_under(&s->conn_mu, &s->n_fresh); }
static int inflight_now(server *s) { return count_under(&s->mu, &s->n_inflight); }

/* After the first signal (sig): no new connections, no new requests on
   open ones, and the replies in flight finish for up to timeout_s seconds,
   then are cancelled. Returns when none is left; a second signal ends the
   process at once. *listen_fd: the listening socket, which the caller
   closes after MHD_stop_daemon (libmicrohttpd's rule for quiescing). */
static void server_drain(server *s, struct MHD_Daemon *d, MHD_socket *listen_fd, int sig, const sigset_t *sigs,
                         int timeout_s) {
    double start = now_ms(), give_up = 0;
    int n, cancelled = -1, again;
    /* libmicrohttpd stops accepting, and the socket stops listening: a new
       connection is refused at once (not left waiting in the backlog), so
       the balancer tries another replica */
    *listen_fd = MHD_quiesce_daemon(d);
    if (*listen_fd != MHD_INVALID_SOCKET) shutdown(*listen_fd, SHUT_RDWR);
    pthread_mutex_lock(&s->mu); /* (with the count: a request is either counted or refused) */
    __atomic_store_n(&s->draining, 1, __ATOMIC_RELEASE);
    n = s->n_inflight;
    pthread_mutex_unlock(&s->mu);
    fprintf(stderr, "infer serve: %s: draining %d repl%s (up to %d s)\n", signal_name(sig), n, n == 1 ? "y" : "ies",
            timeout_s);
    for (;;) {
        /* the fresh connections first: a first request is counted in flight
           before its connection stops being fresh, so none slips between */
        int fresh = fresh_now(s);
        if ((n = inflight_now(s)) == 0 && (fresh == 0 || now_ms() - start >= SERVE_FRESH_WAIT_MS)) break;
        if (cancelled < 0 && now_ms() - start >= timeout_s * 1e3) {
            __atomic_store_n(&s->cancelling, 1, __ATOMIC_RELEASE);
            cancelled = serve_jobs_cancel(s);
            fprintf(stderr, "infer serve: the drain time-out (%d s) passed: cancelled %d repl%s\n", timeout_s, cancelled,
                    cancelled == 1 ? "y" : "ies");
            /* a cancelled reply still sends its end; one whose client reads
               nothing more is cut by the stop after this */
            give_up = now_ms() + 5000;
        } else if (cancelled >= 0) {
            serve_jobs_cancel(s); /* (one that was starting the last time) */
            if (now_ms() > give_up) break;
        }
        if ((again = signal_wait(sigs, 20)) != 0) {
            fprintf(stderr, "infer serve: %s again: exiting at once, %d repl%s unfinished\n", signal_name(again), n,
                    n == 1 ? "y" : "ies");
            _exit(1);
        }
    }
    fprintf(stderr, "infer serve: drained in %.1f s%s: stopping\n", (now_ms() - start) / 1e3,
            n > 0 ? " (replies still sending are cut)" : "");
}

int infer_cmd_serve(int argc, char **argv) {
    server s;
    serve_load load;
    const char *model = NULL, *host = "127.0.0.1", *alias = NULL, *template_file = NULL, *draft = NULL;
    int port = 8080, i, rc = 1, sig, v6 = 0, drain_timeout = 30, stop_sig = 0;
    infer_model_params mp = infer_model_default_params();
    infer_context_params cp = infer_context_default_params();
    struct MHD_Daemon *d = NULL;
    MHD_socket listen_fd = MHD_INVALID_SOCKET;
    struct addrinfo hints, *ai = NULL;
    struct sockaddr_storage addr;
    sigset_t sigs;
    pthread_t loader;
    char desc[256];
    long threads = sysconf(_SC_NPROCESSORS_ONLN);
    memset(&s, 0, sizeof s);
    s.n_slots = 4;
    s.max_queue = 16;
    s.max_body = 1 << 20;
    s.max_connections = 1000;
    s.read_timeout = 10;
    s.max_schema = 512 << 10;
    s.max_grammar = 8 << 20;
    s.reasoning_budget = -1;
    s.max_messages = 1024;
    s.n_threads = threads > 0 ? (int)threads : 1;
    s.api_key = getenv("INFER_API_KEY");
    if (s.api_key && !s.api_key[0]) s.api_key = NULL;
    for (i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int ok = 1;
        if (cli_flag_check(argc, argv, i, CLI_CMD_SERVE) < 0) return 1;
        if (cli_is_help(a)) {
            printf("usage: infer serve -m MODEL [options]\n");
            cli_print_options(stdout, CLI_CMD_SERVE);
            printf("%s", serve_notes);
            return 0;
        }
        if (!strcmp(a, "-m")) model = v;
        else if (!strcmp(a, "--host")) host = v;
        else if (!strcmp(a, "--alias")) alias = v;
        else if (!strcmp(a, "--api-key")) s.api_key = v[0] ? v : NULL;
        else if (!strcmp(a, "--port")) ok = cli_int(v, &port) && port >= 0 && port <= 65535;
        else if (!strcmp(a, "--parallel") || !strcmp(a, "-np")) ok = cli_int(v, &s.n_slots) && s.n_slots >= 1 && s.n_slots <= 256;
        else if (!strcmp(a, "--queue")) ok = cli_int(v, &s.max_queue) && s.max_queue >= 0 && s.max_queue <= 100000;
        else if (!strcmp(a, "-c")) ok = cli_int(v, &cp.n_ctx) && cp.n_ctx >= 8;
        else if (cli_rope_option(a, v, &mp, &ok)) {
            if (ok < 0) return 1;
        }
        else if (!strcmp(a, "-t")) ok = cli_int(v, &s.n_threads) && s.n_threads >= 1 && s.n_threads <= 512;
        else if (!strcmp(a, "--kv-type")) {
            if (!cli_kv_type(v, &cp.kv_type)) return 1;
        } else if (!strcmp(a, "--device")) {
            if (!cli_device(v, &mp.device)) return 1;
        } else if (!strcmp(a, "--max-body")) {
            int mb = 0;
            ok = cli_int(v, &mb) && mb >= 1024;
            s.max_body = (size_t)mb;
        } else if (!strcmp(a, "--max-schema")) {
            int ms = 0;
            ok = cli_int(v, &ms) && ms >= 2;
            s.max_schema = (size_t)ms;
        } else if (!strcmp(a, "--reasoning-budget")) {
            ok = cli_int(v, &s.reasoning_budget) && s.reasoning_budget >= -1;
        } else if (!strcmp(a, "--lookup")) {
            ok = cli_int(v, &s.lookup) && s.lookup >= 0 && s.lookup <= 64;
        } else if (!strcmp(a, "--draft")) {
            draft = v;
        } else if (!strcmp(a, "--draft-n")) {
            ok = cli_int(v, &s.draft_n) && s.draft_n >= 1 && s.draft_n <= 64;
        } else if (!strcmp(a, "--max-grammar")) {
            int mg = 0;
            ok = cli_int(v, &mg) && mg >= 64;
            s.max_grammar = (size_t)mg;
        } else if (!strcmp(a, "--max-connections")) {
            int mc = 0;
            ok = cli_int(v, &mc) && mc >= 1 && mc <= 1000000;
            s.max_connections = (unsigned)mc;
        } else if (!strcmp(a, "--read-timeout")) {
            int rt = 0;
            ok = cli_int(v, &rt) && rt >= 1 && rt <= 86400;
            s.read_timeout = (unsigned)rt;
        } else if (!strcmp(a, "--chat-template-file")) {
            template_file = v;
        } else if (!strcmp(a, "--max-messages")) {
            ok = cli_int(v, &s.max_messages) && s.max_messages >= 1;
        } else if (!strcmp(a, "--drain-timeout")) {
            ok = cli_int(v, &drain_timeout) && drain_timeout >= 0 && drain_timeout <= 86400;
        } else {
            return cli_fail("option %s is not handled (a bug)", a);
        }
        if (!ok) {
            fprintf(stderr, "infer: bad value '%s' for %s\n", v, a);
            return 1;
        }
        i++;
    }
    if (!model) return cli_fail("%s", "serve needs a model: infer serve -m MODEL.gguf");
    if (s.draft_n && !draft) return cli_fail("%s", "--draft-n needs a draft model: --draft MODEL");
    if (!s.draft_n) s.draft_n = 4;
    cli_rope_defaults(&mp);
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    if (getaddrinfo(host, NULL, &hints, &ai) || !ai || ai->ai_addrlen > sizeof addr) {
        if (ai) freeaddrinfo(ai);
        return cli_fail("cannot listen on host '%s': not an address of this machine", host);
    }
    memcpy(&addr, ai->ai_addr, ai->ai_addrlen);
    v6 = ai->ai_family == AF_INET6;
    freeaddrinfo(ai);
    if (v6) ((struct sockaddr_in6 *)&addr)->sin6_port = htons((uint16_t)port);
    else ((struct sockaddr_in *)&addr)->sin_port = htons((uint16_t)port);

    /* what the handlers use while the model loads */
    s.slot_busy = (int *)calloc((size_t)s.n_slots, sizeof(int));
    s.slots = (slot_info *)calloc((size_t)s.n_slots, sizeof(slot_info));
    if (!s.slot_busy || !s.slots) {
        free(s.slot_busy);
        free(s.slots);
        return cli_fail("%s", "out of memory");
    }
    if (alias) {
        s.model_id = alias;
    } else {
        const char *slash = strrchr(model, '/');
        s.model_id = slash ? slash + 1 : model;
    }
    s.created = (long)time(NULL);
    pthread_mutex_init(&s.mu, NULL);
    pthread_cond_init(&s.slot_freed, NULL);
    pthread_mutex_init(&s.embed_mu, NULL);
    pthread_mutex_init(&s.conn_mu, NULL);
    serve_metrics_init(&s.metrics);
    srand((unsigned)time(NULL));
    { /* a descriptor per connection: the soft limit raised where it is short */
        struct rlimit rl;
        rlim_t want = (rlim_t)s.max_connections + 256;
        if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want) {
            rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? want : rl.rlim_max;
            setrlimit(RLIMIT_NOFILE, &rl);
            if (rl.rlim_cur < want)
                fprintf(stderr, "infer serve: warning: %lu file descriptors allowed; --max-connections %u needs about %lu\n",
                        (unsigned long)rl.rlim_cur, s.max_connections, (unsigned long)want);
        }
    }

    /* SIGINT/SIGTERM are taken by sigwait below: blocked before any thread
       starts, so every thread inherits the mask. SIGPIPE is ignored: a write
       to a client that left must fail, not end the server. */
    signal(SIGPIPE, SIG_IGN);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    /* listening first (MHD_USE_ITC: the drain quiesces it) */
    d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ERROR_LOG |
                             MHD_USE_ITC | (v6 ? MHD_USE_IPv6 : 0),
                         (uint16_t)port, NULL, NULL, serve_on_request, &s, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, &s,
                         MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                         MHD_OPTION_NOTIFY_COMPLETED, serve_on_completed, &s, MHD_OPTION_NOTIFY_CONNECTION, serve_on_connection,
                         &s, MHD_OPTION_CONNECTION_LIMIT, s.max_connections, MHD_OPTION_CONNECTION_TIMEOUT,
                         s.read_timeout, MHD_OPTION_END);
    if (!d) {
        fprintf(stderr, "infer: cannot listen on %s port %d: %s\n", host, port, errno ? strerror(errno) : "failed");
        goto done;
    }
    __atomic_store_n(&s.listening, 1, __ATOMIC_RELEASE);
    if (pthread_create(&s.watchdog, NULL, serve_watchdog_main, &s)) {
        fprintf(stderr, "infer: cannot start the connection watchdog\n");
        goto done;
    }
    s.watchdog_started = 1;
    {
        const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
        if (info) port = info->port;
    }
    /* on stdout: stderr stays one line where the load fails */
    printf("infer serve: http://%s%s%s:%d: loading %s (/health answers; /ready says 503 until it is loaded)\n",
           v6 ? "[" : "", host, v6 ? "]" : "", port, model);
    fflush(stdout);

    /* the load on a thread of its own: this one takes the signals meanwhile */
    memset(&load, 0, sizeof load);
    load.s = &s;
    load.model = model;
    load.draft = draft;
    load.template_file = template_file;
    load.mp = mp;
    load.cp = cp;
    if (pthread_create(&loader, NULL, load_main, &load)) {
        fprintf(stderr, "infer: cannot start the model's loader\n");
        goto done;
    }
    while (!__atomic_load_n(&load.done, __ATOMIC_ACQUIRE)) {
        if (!(sig = signal_wait(&sigs, 20))) continue;
        if (stop_sig) {
            fprintf(stderr, "infer serve: %s again: exiting at once\n", signal_name(sig));
            _exit(1);
        }
        stop_sig = sig;
        __atomic_store_n(&s.load_cancel, 1, __ATOMIC_RELEASE);
        fprintf(stderr, "infer serve: %s while loading: stopping\n", signal_name(sig));
    }
    pthread_join(loader, NULL);
    if (stop_sig) {
        rc = 0;
        goto done;
    }
    if (!load.ok) goto done;
    __atomic_store_n(&s.ready, 1, __ATOMIC_RELEASE);
    infer_model_describe(s.model, desc, sizeof desc, NULL, NULL);
    fprintf(stderr, "infer serve: %s, %d sequences of %d positions, chat template %s, tools %s%s\n", desc, s.n_slots,
            s.n_ctx, s.jinja ? (template_file ? template_file : "the model's own (Jinja)") : infer_chat_template_name(s.tmpl.kind),
            s.jinja && s.tool_fmt != INFER_TOOL_FORMAT_NONE ? infer_tool_format_name(s.tool_fmt) : "described, generic calls",
            s.think ? ", reasoning <think>" : "");
    if (s.draft_ctx) {
        infer_model_describe(s.draft_model, desc, sizeof desc, NULL, NULL);
        fprintf(stderr, "infer serve: draft model %s, %d sequences, up to %d draft tokens a pass\n", desc, s.n_slots,
                s.draft_n);
    }
    /* (the line scripts wait for: from here requests are served) */
    fprintf(stderr, "infer serve: listening on http://%s%s%s:%d%s; ready, loaded in %.2f s\n", v6 ? "[" : "", host,
            v6 ? "]" : "", port, s.api_key ? " (API key required)" : "", s.load_seconds);
    fflush(stderr);
    sigwait(&sigs, &sig);
    server_drain(&s, d, &listen_fd, sig, &sigs, drain_timeout);
    rc = 0;
done:
    __atomic_store_n(&s.stopping, 1, __ATOMIC_RELEASE);
    if (s.watchdog_started) pthread_join(s.watchdog, NULL);
    if (d) MHD_stop_daemon(d); /* its threads see stopping and end their requests */
    if (listen_fd != MHD_INVALID_SOCKET) close(listen_fd);
    if (s.worker) infer_worker_free(s.worker);
    if (s.embed_ctx) infer_context_free(s.embed_ctx);
    if (s.ctx) infer_context_free(s.ctx);
    if (s.model) infer_model_free(s.model);
    if (s.draft_ctx) infer_context_free(s.draft_ctx);
    if (s.draft_model) infer_model_free(s.draft_model);
    pthread_mutex_destroy(&s.mu);
    pthread_cond_destroy(&s.slot_freed);
    pthread_mutex_destroy(&s.embed_mu);
    pthread_mutex_destroy(&s.conn_mu);
    serve_metrics_destroy(&s.metrics);
    free(s.slot_busy);
    free(s.slots);
    free(s.jinja);
    return rc;
}

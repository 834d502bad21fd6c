/* npc - four characters of a game talk through one model while a 60 fps
   loop runs.

   One context of four sequences holds the four conversations; the replies
   decode together (each forward pass takes a token of every character that
   is talking). Each reply is constrained by a JSON schema, {"say": ...,
   "mood": ...}, and formatted with the model's chat template. Two ways to
   run the model:
     --budget MS   the game thread calls infer_context_step(ctx, MS) each
                   frame: the model runs inside the frame, for about MS
                   (at least one forward pass).
     --workers N   an infer_worker's N threads run it; the game thread only
                   starts requests and polls them (infer_request_done,
                   infer_request_text); --budget is then unused.
   Each frame also does --work MS of simulated game work (a busy loop) and
   then sleeps to the next frame. At the end it prints how long each frame
   spent inside the library (p50, p99, max over the frames) and each
   character's tokens per second.

     npc [-m MODEL] [--frames 1000] [--budget 4 | --workers 1] [--work 2]
         [-t THREADS] [-c CTX] [--seed S] [--device cpu|cuda|auto] [--quiet]
*/
#define _XOPEN_SOURCE 700 /* nanosleep, clock_gettime */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "infer.h"
#include "os.h"

#define N_NPC 4
#define FRAME_MS (1000.0 / 60.0)
#define MAX_MSGS 64

static const char *const names[N_NPC] = {"Mira", "Grok", "Elda", "Pip"};
static const char *const personas[N_NPC] = {
    "a cheerful baker who loves gossip",
    "a grumpy blacksmith who distrusts strangers",
    "an old librarian who speaks in riddles",
    "a curious child who asks many questions",
};
static const char *const player_lines[] = {
    "Good morning! What is new in the village?",
    "Have you seen the dragon that flew over the hills last night?",
    "Can you sell me something useful for my journey?",
    "What do you think of the mayor?",
    "Tell me a secret nobody else knows.",
    "Where can I find a place to sleep tonight?",
    "Do you know the way to the old castle?",
    "Goodbye, and thank you!",
};
#define N_LINES (int)(sizeof player_lines / sizeof player_lines[0])

static const char *const schema =
    "{\"type\":\"object\",\"properties\":{"
    "\"say\":{\"type\":\"string\",\"maxLength\":100},"
    "\"mood\":{\"enum\":[\"happy\",\"grumpy\",\"sad\",\"curious\",\"afraid\"]}},"
    "\"required\":[\"say\",\"mood\"]}";

typedef struct npc {
    infer_chat_message msgs[MAX_MSGS];
    char *owned[MAX_MSGS]; /* the texts of msgs this program allocated */
    int n_msgs, n_fed, reply_open;
    int positions;         /* what its sequence holds, as far as the replies tell */
    int next_line, wait_frames;
    infer_request *r;
    double started_ms;
    int tokens, replies, failed;
    double busy_ms;        /* time with a reply under way */
} npc;

typedef struct opts {
    const char *model;
    int frames, workers, threads, n_ctx, quiet;
    double budget, work;
    unsigned long long seed;
    infer_device device; /* auto unless --device */
} opts;

static double now_ms(void) { return os_now_ms(); }

static void sleep_until(double t) { os_sleep_ms(t - now_ms()); }

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int push(npc *n, const char *role, const char *text) {
    size_t len = strlen(text);
    char *copy = (char *)malloc(len + 1);
    if (!copy || n->n_msgs == MAX_MSGS) return free(copy), 0;
    memcpy(copy, text, len + 1);
    n->owned[n->n_msgs] = copy;
    n->msgs[n->n_msgs].role = role;
    n->msgs[n->n_msgs].content = copy;
    n->n_msgs++;
    return 1;
}

static void forget(npc *n, int from) {
    while (n->n_msgs > from) free(n->owned[--n->n_msgs]);
}

/* The text this turn adds to the character's sequence: the end of its last
   reply, the new messages, the assistant prompt. malloc'd. */
static char *turn_text(const npc *n, const infer_chat_template *t) {
    size_t ne = 0, nf = 0;
    char *s;
    if (n->reply_open && infer_chat_end_of_turn(t, NULL, 0, &ne, NULL) != INFER_OK) return NULL;
    if (infer_chat_format(t, n->msgs, n->n_msgs, n->n_fed, 1, NULL, 0, &nf, NULL) != INFER_OK) return NULL;
    if (!(s = (char *)malloc(ne + nf + 1))) return NULL;
    s[0] = 0;
    if (ne) infer_chat_end_of_turn(t, s, ne + 1, NULL, NULL);
    infer_chat_format(t, n->msgs, n->n_msgs, n->n_fed, 1, s + ne, nf + 1, NULL, NULL);
    return s;
}

/* The string value of "key" in a flat JSON object, unescaped into out
   (size bytes); 0 if there is none. Enough for the replies' schema. */
static int json_field(const char *json, const char *key, char *out, size_t size) {
    char pat[32];
    const char *p;
    size_t n = 0;
    snprintf(pat, sizeof pat, "\"%s\"", key);
    if (!(p = strstr(json, pat))) return 0;
    p += strlen(pat);
    while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r' || *p == ':') p++;
    if (*p++ != '"') return 0;
    for (; *p && *p != '"' && n + 1 < size; p++) {
        char ch = *p;
        if (ch == '\\' && p[1]) {
            p++;
            ch = *p == 'n' ? ' ' : *p == 't' ? ' ' : *p == 'u' ? '?' : *p;
            if (*p == 'u') p += strlen(p) >= 5 ? 4 : 0;
        }
        out[n++] = ch;
    }
    out[n] = 0;
    return 1;
}

static int parse(int argc, char **argv, opts *o) {
    int i;
    memset(o, 0, sizeof *o);
    o->model = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
    o->frames = 1000;
    o->budget = 4;
    o->work = 2;
    o->threads = 2;
    o->n_ctx = 1024;
    o->seed = 1;
    o->device = INFER_DEVICE_AUTO;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) {
            o->quiet = 1;
            continue;
        }
        if (!v) {
            fprintf(stderr, "npc: %s needs a value (or is unknown)\n", a);
            return 0;
        }
        i++;
        if (!strcmp(a, "-m")) o->model = v, end = (char *)v + strlen(v);
        else if (!strcmp(a, "--frames")) o->frames = (int)strtol(v, &end, 10);
        else if (!strcmp(a, "--workers")) o->workers = (int)strtol(v, &end, 10);
        else if (!strcmp(a, "--budget")) o->budget = strtod(v, &end);
        else if (!strcmp(a, "--work")) o->work = strtod(v, &end);
        else if (!strcmp(a, "-t")) o->threads = (int)strtol(v, &end, 10);
        else if (!strcmp(a, "-c")) o->n_ctx = (int)strtol(v, &end, 10);
        else if (!strcmp(a, "--seed")) o->seed = strtoull(v, &end, 10);
        else if (!strcmp(a, "--device")) {
            int d = infer_device_from_name(v);
            if (d < 0) {
                fprintf(stderr, "npc: bad value '%s' for --device (cpu, cuda or auto)\n", v);
                return 0;
            }
            o->device = (infer_device)d, end = (char *)v + strlen(v);
        }
        else {
            fprintf(stderr, "npc: unknown option %s\n", a);
            return 0;
        }
        if (!end || *end || o->frames < 1 || o->workers < 0 || o->threads < 1 || o->n_ctx < 256 || o->budget < 0 ||
            o->work < 0) {
            fprintf(stderr, "npc: bad value '%s' for %s\n", v, a);
            return 0;
        }
    }
    return 1;
}

int main(int argc, char **argv) {
    opts o;
    infer_error err;
    infer_model *m;
    os_init_main(&argc, &argv);
    infer_context *c;
    infer_context_params cp = infer_context_default_params();
    infer_model_params mp = infer_model_default_params();
    infer_worker *w = NULL;
    infer_chat_template tmpl;
    npc npcs[N_NPC];
    double *lib, t_run, total_lib = 0;
    int f, i, late = 0, rc = 0;
    if (!parse(argc, argv, &o)) return 1;
    mp.device = o.device;
    m = infer_model_load(o.model, &mp, &err);
    if (!m) {
        fprintf(stderr, "npc: %s\n", err.msg);
        return 1;
    }
    cp.n_seq = N_NPC;
    cp.n_ctx = o.n_ctx;
    cp.n_threads = o.threads;
    c = infer_context_new(m, &cp, &err);
    if (!c) {
        fprintf(stderr, "npc: %s\n", err.msg);
        infer_model_free(m);
        return 1;
    }
    if (o.workers && !(w = infer_worker_new(o.workers, &err))) {
        fprintf(stderr, "npc: %s\n", err.msg);
        infer_context_free(c);
        infer_model_free(m);
        return 1;
    }
    tmpl = infer_chat_template_detect(m);
    lib = (double *)calloc((size_t)o.frames, sizeof *lib);
    memset(npcs, 0, sizeof npcs);
    for (i = 0; i < N_NPC; i++) {
        char sys[512];
        snprintf(sys, sizeof sys,
                 "You are %s, %s, in the village of Oakvale. A traveller talks to you. Answer in character, in one "
                 "short sentence, as JSON: what you say in \"say\", your mood in \"mood\".",
                 names[i], personas[i]);
        push(&npcs[i], "system", sys);
        npcs[i].next_line = i; /* each starts at another line */
        npcs[i].wait_frames = i * 7;
    }
    printf("npc: %s, %d characters in one context (%d positions each), %s, %d frames at 60 fps, %.1f ms of game "
           "work a frame\n",
           o.model, N_NPC, infer_context_n_ctx(c),
           w ? "a background worker" : "stepped on the game thread", o.frames, o.work);
    if (w) printf("npc: %d worker thread(s), %d kernel thread(s) for the context\n", o.workers, o.threads);
    else printf("npc: %.1f ms budget a frame, %d kernel thread(s) for the context\n", o.budget, o.threads);
    fflush(stdout);

    t_run = now_ms();
    for (f = 0; f < o.frames; f++) {
        double frame0 = now_ms(), t, in_lib = 0;
        /* the game: start replies, read finished ones (library calls timed) */
        for (i = 0; i < N_NPC; i++) {
            npc *n = &npcs[i];
            if (!n->r) {
                infer_request_params p = infer_request_default_params();
                char *text;
                if (n->wait_frames-- > 0) continue;
                /* a conversation that nears the end of its sequence starts afresh */
                if (n->positions > infer_context_n_ctx(c) - 200) {
                    forget(n, 1);
                    n->n_fed = 0;
                    n->reply_open = 0;
                    n->positions = 0;
                    p.n_past = 0;
                }
                push(n, "user", player_lines[n->next_line++ % N_LINES]);
                text = turn_text(n, &tmpl);
                if (!text) {
                    fprintf(stderr, "npc: out of memory\n");
                    rc = 1;
                    goto end;
                }
                p.prompt = text;
                p.seq = i;
                p.n_predict = 96;
                p.json_schema = schema;
                p.sampling.temperature = 0.7f;
                p.sampling.seed = o.seed * 1000 + (unsigned long long)i * 100 + (unsigned long long)n->replies;
                t = now_ms();
                n->r = w ? infer_worker_start(w, c, &p, &err) : infer_request_start(c, &p, &err);
                in_lib += now_ms() - t;
                free(text);
                if (!n->r) {
                    fprintf(stderr, "npc: %s\n", err.msg);
                    rc = 1;
                    goto end;
                }
                n->n_fed = n->n_msgs;
                n->started_ms = now_ms();
            }
        }
        if (!w) {
            t = now_ms();
            infer_context_step(c, o.budget);
            in_lib += now_ms() - t;
        }
        for (i = 0; i < N_NPC; i++) {
            npc *n = &npcs[i];
            char reply[1024];
            int done, nt, np;
            infer_status st;
            if (!n->r) continue;
            t = now_ms();
            done = infer_request_done(n->r);
            if (done) {
                infer_request_text(n->r, 0, reply, sizeof reply);
                st = infer_request_status(n->r, &err);
                infer_request_tokens(n->r, NULL, 0, &nt, NULL);
                infer_request_prompt_tokens(n->r, NULL, 0, &np, NULL);
                infer_request_free(n->r);
            }
            in_lib += now_ms() - t;
            if (!done) continue;
            n->r = NULL;
            n->tokens += nt;
            n->replies++;
            n->busy_ms += now_ms() - n->started_ms;
            n->positions += np + nt;
            if (st != INFER_OK) {
                n->failed++;
                if (!o.quiet) printf("[frame %4d] %s: (no reply: %s)\n", f, names[i], err.msg);
                n->positions = infer_context_n_ctx(c); /* start afresh next time */
            } else if (!o.quiet) {
                char say[512], mood[64];
                if (json_field(reply, "say", say, sizeof say) && json_field(reply, "mood", mood, sizeof mood))
                    printf("[frame %4d] %s (%s): %s\n", f, names[i], mood, say);
                else
                    printf("[frame %4d] %s: %s (cut short)\n", f, names[i], reply);
            }
            fflush(stdout);
            push(n, "assistant", reply);
            n->n_fed = n->n_msgs;
            n->reply_open = 1;
            n->wait_frames = 20 + 10 * i; /* a pause, then the player speaks again */
        }
        lib[f] = in_lib;
        total_lib += in_lib;
        /* the rest of the frame: game work, then sleep to the next frame */
        t = now_ms();
        while (now_ms() - t < o.work) {}
        if (now_ms() - frame0 > FRAME_MS) late++;
        sleep_until(frame0 + FRAME_MS);
    }
    t_run = now_ms() - t_run;
    {
        double *sorted = (double *)malloc((size_t)o.frames * sizeof *sorted);
        if (sorted) {
            memcpy(sorted, lib, (size_t)o.frames * sizeof *sorted);
            qsort(sorted, (size_t)o.frames, sizeof *sorted, cmp_double);
            printf("\nlibrary time per frame over %d frames (%s): p50 %.3f ms, p99 %.3f ms, max %.3f ms, mean %.3f ms\n",
                   o.frames, w ? "polling a worker" : "infer_context_step", sorted[o.frames / 2],
                   sorted[(int)(o.frames * 0.99)], sorted[o.frames - 1], total_lib / o.frames);
            free(sorted);
        }
        printf("frames over 16.7 ms: %d; run %.1f s\n", late, t_run / 1e3);
        for (i = 0; i < N_NPC; i++)
            printf("  %-5s %3d replies (%d failed), %4d tokens: %.1f tokens/s over the run, %.1f while replying\n",
                   names[i], npcs[i].replies, npcs[i].failed, npcs[i].tokens, npcs[i].tokens * 1e3 / t_run,
                   npcs[i].busy_ms > 0 ? npcs[i].tokens * 1e3 / npcs[i].busy_ms : 0.0);
    }
end:
    for (i = 0; i < N_NPC; i++) {
        infer_request_free(npcs[i].r);
        forget(&npcs[i], 0);
    }
    infer_worker_free(w);
    free(lib);
    infer_context_free(c);
    infer_model_free(m);
    return rc;
}

/* long_run - a long chat on a small context that shifts: many more tokens
   than the context holds, turn after turn, through the request API.

       long_run MODEL [TOKENS (10000)] [N_CTX (256)] [THREADS (2)] [EVERY (1000)]

   Each turn is a user message in the model's chat format and a reply of up
   to 200 tokens with end-of-generation banned, so replies run to their
   limit; the context (INFER_FULL_POLICY_SHIFT, the first turn's positions kept)
   drops its older half whenever it fills. Every EVERY generated tokens it
   prints the tokens/s of that stretch and the resident memory. It fails
   (exit 1, one line) on any error, a sequence longer than the context, or
   memory that grows after the first stretch by more than 2 MiB; speed is
   printed, never asserted. Exit 77 (skipped) without the model. */
#define _XOPEN_SOURCE 700
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "infer.h"
#include "tests/status_calls.h"

#define REPLY 200

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

/* Resident memory in bytes, from /proc/self/statm (0 where it is absent). */
static long rss_bytes(void) {
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return 0;
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    fclose(f);
    return resident * sysconf(_SC_PAGESIZE);
}

static const char *topics[] = {"the sea", "a dragon", "the moon", "a small cat", "a red ball", "the forest"};

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : NULL;
    int target = argc > 2 ? atoi(argv[2]) : 10000, n_ctx = argc > 3 ? atoi(argv[3]) : 256;
    int threads = argc > 4 ? atoi(argv[4]) : 2, generated = 0, turn = 0, shifts = 0;
    int every = argc > 5 && atoi(argv[5]) > 0 ? atoi(argv[5]) : 1000, next_report = every; /* tokens between RSS samples */
    infer_model_params mp = infer_model_default_params();
    infer_context_params cp = infer_context_default_params();
    infer_model *m;
    infer_context *c;
    infer_chat_template tmpl;
    infer_error err;
    infer_token ban[8];
    float ban_bias[8];
    int n_ban = 0, t, nv, prev_past = 0;
    long rss_first = 0, rss_max = 0;
    double t_stretch;
    char prompt[512], end_of_turn[64];
    if (!path || target < 1 || n_ctx < 64) {
        fprintf(stderr, "usage: long_run MODEL [TOKENS] [N_CTX >= 64] [THREADS]\n");
        return 1;
    }
    if (access(path, R_OK) != 0) {
        printf("long_run: SKIPPED: %s is absent\n", path);
        return 77;
    }
    if (!(m = infer_model_load(path, &mp, &err))) {
        fprintf(stderr, "long_run: FAILED: %s\n", err.msg);
        return 1;
    }
    cp.n_ctx = n_ctx;
    cp.n_threads = threads;
    cp.full_policy = INFER_FULL_POLICY_SHIFT;
    cp.n_keep = 0; /* set below, once the first turn's length is known */
    if (!(c = infer_context_new(m, &cp, &err))) {
        fprintf(stderr, "long_run: FAILED: %s\n", err.msg);
        infer_model_free(m);
        return 1;
    }
    nv = infer_model_n_vocab(m);
    for (t = 0; t < nv && n_ban < 8; t++)
        if (infer_model_is_eog(m, t)) {
            ban[n_ban] = t;
            ban_bias[n_ban++] = -INFINITY;
        }
    tmpl = infer_chat_template_detect(m);
    if (sc_chat_end_of_turn(&tmpl, end_of_turn, sizeof end_of_turn) < 0) end_of_turn[0] = 0;
    t_stretch = now_s();
    while (generated < target) {
        infer_chat_message msg;
        infer_request_params rp = infer_request_default_params();
        infer_request *r;
        char text[300];
        int n_tok, len;
        snprintf(text, sizeof text, "Tell me a story about %s.", topics[turn % 6]);
        msg.role = "user";
        msg.content = text;
        /* a turn after the first opens by closing the last reply */
        len = snprintf(prompt, sizeof prompt, "%s", turn ? end_of_turn : "");
        infer_chat_format(&tmpl, &msg, 1, 0, 1, prompt + len, sizeof prompt - (size_t)len, NULL, NULL);
        rp.prompt = prompt;
        rp.n_predict = REPLY;
        rp.sampling.temperature = 0.8f;
        rp.sampling.seed = (uint64_t)turn + 1;
        rp.bias_ids = ban;
        rp.bias = ban_bias;
        rp.n_bias = n_ban;
        if (!(r = infer_request_start(c, &rp, &err))) {
            fprintf(stderr, "long_run: FAILED: turn %d: %s\n", turn, err.msg);
            return 1;
        }
        while (infer_context_step(c, 0) > 0) {
            int past = infer_seq_n_past(c, 0);
            if (past < prev_past) shifts++;
            prev_past = past;
            if (past > n_ctx) {
                fprintf(stderr, "long_run: FAILED: the sequence holds %d positions, the context %d\n", past, n_ctx);
                return 1;
            }
        }
        if (infer_request_status(r, &err) != INFER_OK) {
            fprintf(stderr, "long_run: FAILED: turn %d after %d tokens: %s\n", turn, generated, err.msg);
            return 1;
        }
        n_tok = sc_request_tokens(r, NULL, 0);
        infer_request_free(r);
        generated += n_tok;
        turn++;
        while (generated >= next_report) {
            double dt = now_s() - t_stretch;
            long rss = rss_bytes();
            if (!rss_first) rss_first = rss;
            if (rss > rss_max) rss_max = rss;
            printf("long_run: %6d tokens, turn %3d: %7.1f tokens/s over the last stretch, RSS %.1f MiB, %d shifts\n",
                   generated, turn, every / dt, rss / 1048576.0, shifts);
            fflush(stdout);
            t_stretch = now_s();
            next_report += every;
        }
    }
    infer_context_free(c);
    infer_model_free(m);
    printf("long_run: %d tokens in %d turns of a %d-position context, %d shifts; RSS %.1f MiB after the first %d "
           "tokens, at most %.1f MiB after\n",
           generated, turn, n_ctx, shifts, rss_first / 1048576.0, every, rss_max / 1048576.0);
    if (shifts < 1) {
        fprintf(stderr, "long_run: FAILED: the context never shifted\n");
        return 1;
    }
#if defined(__SANITIZE_ADDRESS__)
    /* AddressSanitizer holds freed memory in quarantine, so RSS grows by
       design there; LeakSanitizer checks for leaks instead */
    rss_max = rss_first;
#endif
    if (rss_max - rss_first > 2L << 20) {
        fprintf(stderr, "long_run: FAILED: memory grew by %.1f MiB over the run\n", (rss_max - rss_first) / 1048576.0);
        return 1;
    }
    return 0;
}

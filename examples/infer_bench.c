/* infer bench - speed in the llama-bench way: prompt processing of p tokens
   in one batch, and generation of n tokens one at a time, each repeated r
   times after a warm-up, reported as mean +/- stddev tokens/s. Also: time
   to first token, load time, peak RSS, model bytes and the memory bandwidth
   generation achieves (the bytes a token reads, the weights' and at depth
   the KV cache's, x tokens/s), and where it ran (--device cpu|cuda|auto:
   the device column; a GPU's name below the table). Generation's GB/s are
   also given as a share of the device's bandwidth: on a GPU what a copy
   kernel reaches there (infer_model_device_bandwidth), on the CPU what
   reading a 512 MiB buffer with as many threads reaches (measured after
   the runs, the best of 5).
   --parallel N generates N sequences together, one token of each per
   forward pass: the generation figure is then their aggregate.
   -d N (llama-bench's depth) measures both with N tokens already in the
   context (decoded first, untimed), where attention costs more.
   --lookup N adds speculative decoding's case: a paragraph rewritten with
   small changes (the model's chat format), n tokens generated greedily
   without speculation and with prompt lookup drafting up to N tokens,
   reported as tokens/s of each, the speed-up and the drafts' acceptance
   rate (a table after the other in md; on stderr with -o json|csv).
   --draft MODEL [--draft-n N] times the same reply with a draft model of
   the same vocabulary drafting N tokens a pass (default 4), in a context
   of its own: a row of that table too, alone or beside --lookup's. */
#define _XOPEN_SOURCE 700 /* clock_gettime (os.h) */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

static double now_ms(void) { return os_now_ms(); }

/* The CPU's read bandwidth: threads sum their shares of one buffer
   together (a barrier starts and ends each pass), the best of several
   passes. The threads wait at a gate until every one has started, so the
   barrier counts only those that did. */
typedef struct read_gate {
    os_mutex mu;
    os_cond cv;
    int open;
    os_barrier pass;
} read_gate;

typedef struct read_share {
    const uint64_t *p;
    size_t n;
    int passes;
    read_gate *gate;
    double *ms;     /* each pass's time, written by the first share's thread */
    uint64_t sum;   /* kept, so the reads are not optimised away */
} read_share;

static void read_worker(void *arg) {
    read_share *r = (read_share *)arg;
    int pass;
    os_mutex_lock(&r->gate->mu);
    while (!r->gate->open) os_cond_wait(&r->gate->cv, &r->gate->mu);
    os_mutex_unlock(&r->gate->mu);
    for (pass = 0; pass < r->passes; pass++) {
        uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        size_t i;
        double t0;
        os_barrier_wait(&r->gate->pass);
        t0 = now_ms();
        for (i = 0; i + 4 <= r->n; i += 4) s0 += r->p[i], s1 += r->p[i + 1], s2 += r->p[i + 2], s3 += r->p[i + 3];
        r->sum += s0 + s1 + s2 + s3;
        os_barrier_wait(&r->gate->pass); /* every share read: the pass's end */
        if (r->ms) r->ms[pass] = now_ms() - t0;
    }
}

/* GB/s with up to `threads` threads (fewer where one cannot be started),
   or 0 where the buffer cannot be had. */
static double cpu_read_gbs(int threads) {
    enum { PASSES = 5, MAX_THREADS = 256 };
    size_t words = ((size_t)512 << 20) / sizeof(uint64_t), per, i;
    uint64_t *buf = (uint64_t *)malloc(words * sizeof(uint64_t));
    read_share shares[MAX_THREADS];
    os_thread tid[MAX_THREADS];
    read_gate gate;
    double ms[PASSES], best = 0;
    int t, n = 1;
    if (!buf) return 0;
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    if (threads < 1) threads = 1;
    for (i = 0; i < words; i++) buf[i] = i; /* touched: the pages are real */
    per = words / (size_t)threads;
    os_mutex_init(&gate.mu);
    os_cond_init(&gate.cv);
    gate.open = 0;
    for (t = 0; t < threads; t++) {
        read_share *r = &shares[t];
        r->p = buf + (size_t)t * per, r->n = per, r->passes = PASSES, r->gate = &gate;
        r->ms = t ? NULL : ms, r->sum = 0;
    }
    for (t = 1; t < threads && os_thread_start(&tid[t], read_worker, &shares[t]); t++) n++;
    os_barrier_init(&gate.pass, n);
    os_mutex_lock(&gate.mu);
    gate.open = 1;
    os_cond_broadcast(&gate.cv);
    os_mutex_unlock(&gate.mu);
    read_worker(&shares[0]);
    for (t = 1; t < n; t++) os_thread_join(tid[t]);
    for (t = 0; t < PASSES; t++)
        if (best == 0 || ms[t] < best) best = ms[t];
    os_barrier_destroy(&gate.pass);
    os_cond_destroy(&gate.cv);
    os_mutex_destroy(&gate.mu);
    free(buf);
    return best > 0 ? (double)per * n * sizeof(uint64_t) / (best / 1000.0) / 1e9 : 0;
}

typedef struct bench_opts {
    const char *model, *output, *draft;
    int n_prompt, n_gen, reps, threads, parallel, depth, lookup, draft_n;
    infer_device device;
    infer_type kv_type;
} bench_opts;

typedef struct bench_result {
    int n_prompt, n_gen;
    double *samples; /* tokens/s of each repetition */
    double avg, stddev, ttft_ms;
} bench_result;

/* 1: parsed; 0: a bad command line (said on stderr); 2: --help was printed. */
static int parse_args(int argc, char **argv, bench_opts *o) {
    int i;
    o->model = NULL;
    o->output = "md";
    o->n_prompt = 128;
    o->n_gen = 64;
    o->reps = 5;
    o->threads = 2;
    o->parallel = 1;
    o->depth = 0;
    o->lookup = 0;
    o->draft = NULL;
    o->draft_n = 0;
    o->device = INFER_DEVICE_AUTO;
    o->kv_type = INFER_TYPE_F16;
    for (i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end;
        long n = 0;
        int is_num = 1;
        if (cli_flag_check(argc, argv, i, CLI_CMD_BENCH) < 0) return 0;
        if (cli_is_help(a)) {
            printf("usage: infer bench -m MODEL [options]\n");
            cli_print_options(stdout, CLI_CMD_BENCH);
            return 2;
        }
        if (!strcmp(a, "-m")) o->model = v, is_num = 0;
        else if (!strcmp(a, "--draft")) o->draft = v, is_num = 0;
        else if (!strcmp(a, "-o")) o->output = v, is_num = 0;
        else if (!strcmp(a, "--device")) {
            int d = infer_device_from_name(v);
            if (d < 0) {
                fprintf(stderr, "infer: bad value '%s' for --device (cpu, cuda or auto)\n", v);
                return 0;
            }
            o->device = (infer_device)d;
            is_num = 0;
        } else if (!strcmp(a, "--kv-type")) {
            if (strcmp(v, "f16") && strcmp(v, "q8_0") && strcmp(v, "q4_0")) {
                fprintf(stderr, "infer: bad value '%s' for --kv-type (f16, q8_0 or q4_0)\n", v);
                return 0;
            }
            o->kv_type = !strcmp(v, "q8_0") ? INFER_TYPE_Q8_0 : !strcmp(v, "q4_0") ? INFER_TYPE_Q4_0 : INFER_TYPE_F16;
            is_num = 0;
        }
        if (is_num) {
            errno = 0;
            n = strtol(v, &end, 10);
            if (errno || end == v || *end || n < 0 || n > 1000000 || (!strcmp(a, "-r") && n < 1) ||
                (!strcmp(a, "-t") && (n < 1 || n > 256)) || (!strcmp(a, "--parallel") && (n < 1 || n > 256)) ||
                (!strcmp(a, "--lookup") && n > 64) || (!strcmp(a, "--draft-n") && (n < 1 || n > 64))) {
                fprintf(stderr, "infer: bad value '%s' for %s\n", v, a);
                return 0;
            }
            if (!strcmp(a, "-p")) o->n_prompt = (int)n;
            else if (!strcmp(a, "-n")) o->n_gen = (int)n;
            else if (!strcmp(a, "-r")) o->reps = (int)n;
            else if (!strcmp(a, "--parallel")) o->parallel = (int)n;
            else if (!strcmp(a, "-d")) o->depth = (int)n;
            else if (!strcmp(a, "--lookup")) o->lookup = (int)n;
            else if (!strcmp(a, "--draft-n")) o->draft_n = (int)n;
            else if (!strcmp(a, "-t")) o->threads = (int)n;
            else { /* a row of the table that bench's code does not read */
                fprintf(stderr, "infer: bench has no code for %s\n", a);
                return 0;
            }
        }
        i++;
    }
    if (!o->model) {
        fprintf(stderr, "infer: no model given (-m MODEL)\n");
        return 0;
    }
    if (o->draft_n && !o->draft) {
        fprintf(stderr, "infer: --draft-n needs a draft model: --draft MODEL\n");
        return 0;
    }
    if (o->draft && !o->draft_n) o->draft_n = 4;
    if (strcmp(o->output, "md") && strcmp(o->output, "json") && strcmp(o->output, "csv")) {
        fprintf(stderr, "infer: bad value '%s' for -o (md, json or csv)\n", o->output);
        return 0;
    }
    return 1;
}

static void stats(bench_result *r, int n) {
    double s = 0, ss = 0;
    int i;
    for (i = 0; i < n; i++) s += r->samples[i];
    r->avg = s / n;
    for (i = 0; i < n; i++) ss += (r->samples[i] - r->avg) * (r->samples[i] - r->avg);
    r->stddev = n > 1 ? sqrt(ss / (n - 1)) : 0;
}

/* One repetition: a cache holding `depth` tokens (decoded untimed, copied
   to every sequence; decoded once, then each repetition cuts the cache
   back to them, which leaves the same keys as decoding them again; a
   recurrent model's state goes back only to its checkpoint, so after a
   generation run the depth is decoded again, untimed), then
   either p tokens in one batch or n
   tokens one by one (after a BOS where the depth is 0, as llama-bench
   does), in each of `parallel` sequences together. Returns tokens/s (all
   sequences'). */
static double run_once(infer_context *c, const infer_token *toks, int depth, int n_prompt, int n_gen, int parallel,
                       double *ttft, infer_error *err) {
    infer_token step[256];
    int seq[256], i, s;
    infer_batch b;
    double t0, t1;
    int have = depth && infer_seq_n_past(c, 0) >= depth, kept; /* the depth, from the last repetition */
    for (s = 0; s < parallel; s++) {
        infer_seq_truncate(c, s, have ? depth : 0, &kept, NULL), seq[s] = s;
        if (kept != (have ? depth : 0)) have = 0; /* a recurrent state keeps less: decoded again */
    }
    if (depth && !have) {
        for (s = 0; s < parallel; s++) infer_seq_truncate(c, s, 0, NULL, NULL);
        if (infer_decode(c, toks, depth, 0, err)) return -1;
        for (s = 1; s < parallel; s++)
            if (infer_seq_copy(c, 0, s, err)) return -1;
    }
    toks += depth;
    t0 = now_ms();
    if (n_prompt) {
        if (infer_decode(c, toks, n_prompt, 0, err)) return -1;
        t1 = now_ms();
        *ttft = t1 - t0;
        return n_prompt * 1000.0 / (t1 - t0);
    }
    memset(&b, 0, sizeof b);
    b.n = parallel, b.tokens = step, b.seq = seq;
    for (s = 0; s < parallel; s++) step[s] = toks[0];
    if (!depth && infer_decode_batch(c, &b, err)) return -1;
    t0 = now_ms();
    for (i = 0; i < n_gen; i++) {
        for (s = 0; s < parallel; s++) step[s] = toks[1 + (i + s) % n_gen];
        if (infer_decode_batch(c, &b, err)) return -1;
    }
    t1 = now_ms();
    return (double)n_gen * parallel * 1000.0 / (t1 - t0);
}

static const char *base_name(const char *p) {
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

/* --lookup and --draft: what speculation gains where a reply repeats its prompt. */
static const char *edit_request =
    "Rewrite this paragraph with small changes, fixing the spelling:\n\n"
    "The old lighthouse stood at the edge of the cliff for more then two hundred years. Every night the keeper "
    "climbed the narrow stairs, lit the great lamp and watched the ships pass safely through the dangerous waters. "
    "When the storms came, the light never failed, and the sailors in the harbour town told stories about the "
    "keeper who never slept. Travellers who visited the town always asked to see the lamp, and the keeper was "
    "happy to show them the brass gears, the thick glass and the small room where he wrote in his log every "
    "evening.";

/* The edit prompt's reply, o->n_gen tokens greedily, o->reps times (after
   a warm-up) with drafts of up to `lookup` tokens by prompt lookup, or with
   dm (non-NULL) drafting o->draft_n tokens in a context of its own: mean
   tokens/s into *tps (their spread into *sd), the drafts' acceptance into
   *acc (0..1, -1 with none drafted). 0 on failure (err set). */
static int bench_edit(infer_model *m, const bench_opts *o, int lookup, infer_model *dm, double *tps, double *sd,
                      double *acc, infer_error *err) {
    infer_context_params cp = infer_context_default_params();
    infer_chat_template tpl = infer_chat_template_detect(m);
    infer_chat_message msg = {"user", edit_request};
    char prompt[4096];
    infer_context *c, *dc = NULL;
    double s = 0, ss = 0, *v = (double *)calloc((size_t)o->reps, sizeof *v);
    int r, drafted = 0, accepted = 0;
    size_t n_prompt = 0;
    if (!v || infer_chat_format(&tpl, &msg, 1, 0, 1, prompt, sizeof prompt, &n_prompt, NULL) != INFER_OK ||
        n_prompt >= sizeof prompt) {
        free(v);
        snprintf(err->msg, sizeof err->msg, "%s", "out of memory, or the edit prompt does not fit");
        return 0;
    }
    cp.n_threads = o->threads;
    cp.kv_type = o->kv_type;
    cp.n_ctx = 1024 + o->n_gen;
    if (!(c = infer_context_new(m, &cp, err))) {
        free(v);
        return 0;
    }
    if (dm && !(dc = infer_context_new(dm, &cp, err))) { /* the draft's: as long as the model's */
        infer_context_free(c);
        free(v);
        return 0;
    }
    for (r = -1; r < o->reps; r++) { /* r = -1: the warm-up */
        infer_request_params p = infer_request_default_params();
        infer_request *q;
        infer_metrics mt;
        p.prompt = prompt;
        p.n_past = 0; /* afresh; the prompt's cache kept (cache_prompt): only the reply is timed anyway */
        p.n_predict = o->n_gen;
        p.sampling.temperature = 0;
        p.lookup = lookup;
        p.draft = dc; /* (its sequence 0 keeps the prompt too: the model's is cached) */
        p.draft_n = dc ? o->draft_n : 0;
        if (!(q = infer_request_start(c, &p, err))) break;
        while (infer_context_step(c, 0) > 0) {}
        if (infer_request_status(q, err) != INFER_OK) {
            infer_request_free(q);
            break;
        }
        mt = infer_request_metrics(q);
        infer_request_free(q);
        if (r < 0) continue;
        v[r] = mt.gen_tps;
        s += v[r];
        drafted += mt.n_draft_tokens;
        accepted += mt.n_draft_accepted;
    }
    infer_context_free(c);
    infer_context_free(dc);
    if (r < o->reps) {
        free(v);
        return 0;
    }
    *tps = s / o->reps;
    for (r = 0; r < o->reps; r++) ss += (v[r] - *tps) * (v[r] - *tps);
    *sd = o->reps > 1 ? sqrt(ss / (o->reps - 1)) : 0;
    *acc = drafted ? (double)accepted / drafted : -1;
    free(v);
    return 1;
}

/* The speculation table: the edit prompt's reply without speculation,
   with --lookup's prompt lookup and with --draft's model (dm), each that
   is asked for. */
static int bench_lookup(infer_model *m, infer_model *dm, const bench_opts *o, infer_error *err) {
    double tps[3], sd[3], acc[3];
    int i, n_gen = o->n_gen > 0 ? o->n_gen : 64;
    bench_opts q = *o;
    FILE *f = strcmp(o->output, "md") ? stderr : stdout;
    q.n_gen = n_gen;
    for (i = 0; i < 3; i++) {
        if ((i == 1 && !o->lookup) || (i == 2 && !dm)) continue;
        if (!bench_edit(m, &q, i == 1 ? o->lookup : 0, i == 2 ? dm : NULL, &tps[i], &sd[i], &acc[i], err)) return 0;
    }
    fprintf(f, "\n| model | test | speculation | t/s | acceptance | speed-up |\n"
               "| --- | --- | --- | ---: | ---: | ---: |\n");
    for (i = 0; i < 3; i++) {
        char a[32] = "-", how[160] = "none";
        if ((i == 1 && !o->lookup) || (i == 2 && !dm)) continue;
        if (i && acc[i] >= 0) snprintf(a, sizeof a, "%.1f%%", 100 * acc[i]);
        if (i == 1) snprintf(how, sizeof how, "lookup %d", o->lookup);
        if (i == 2) snprintf(how, sizeof how, "draft %s, %d", base_name(o->draft), o->draft_n);
        fprintf(f, "| %s | edit tg%d | %s | %.2f ± %.2f | %s | %.2fx |\n", base_name(o->model), n_gen, how, tps[i], sd[i],
                a, tps[0] > 0 ? tps[i] / tps[0] : 0);
    }
    if (o->lookup)
        fprintf(f, "\nprompt lookup (up to %d draft tokens) on a paragraph rewrite: %.2fx the tokens/s\n", o->lookup,
                tps[0] > 0 ? tps[1] / tps[0] : 0);
    if (dm)
        fprintf(f, "%sdraft model %s (%d draft tokens) on a paragraph rewrite: %.2fx the tokens/s\n", o->lookup ? "" : "\n",
                base_name(o->draft), o->draft_n, tps[0] > 0 ? tps[2] / tps[0] : 0);
    return 1;
}

int infer_cmd_bench(int argc, char **argv) {
    bench_opts o;
    infer_error err;
    infer_model *m, *dm = NULL;
    infer_context *c;
    infer_context_params cp = infer_context_default_params();
    infer_model_params mp = infer_model_default_params();
    bench_result res[2];
    const char *dev;
    infer_token *toks;
    double warm, load_ms, gbs, dev_gbs;
    int n_tests = 0, t, r, nv, n_tok;
    size_t model_bytes, peak;
    switch (parse_args(argc, argv, &o)) {
    case 0: return 1;
    case 2: return 0; /* --help */
    }
    mp.device = o.device;
    m = infer_model_load(o.model, &mp, &err);
    if (!m) {
        fprintf(stderr, "infer: %s\n", err.msg);
        return 1;
    }
    if (infer_model_warning(m)) fprintf(stderr, "infer: warning: %s\n", infer_model_warning(m));
    if (o.draft && !(dm = cli_load_draft(o.draft, o.device, m, o.threads, 0, o.kv_type, NULL))) {
        infer_model_free(m); /* --draft: refused before anything is timed */
        return 1;
    }
    dev = infer_device_name(infer_model_device(m));
    load_ms = infer_model_load_ms(m);
    model_bytes = infer_model_weight_bytes(m);
    nv = infer_model_n_vocab(m);
    n_tok = o.depth + (o.n_prompt > o.n_gen + 1 ? o.n_prompt : o.n_gen + 1);
    cp.n_threads = o.threads;
    cp.kv_type = o.kv_type;
    cp.n_ctx = n_tok + 1;
    cp.n_batch = o.n_prompt > o.parallel ? o.n_prompt : o.parallel;
    if (o.depth && cp.n_batch < 512) cp.n_batch = o.depth < 512 ? o.depth : 512; /* the depth decoded in batches */
    cp.n_seq = o.parallel;
    warm = now_ms();
    c = infer_context_new(m, &cp, &err);
    load_ms += now_ms() - warm; /* load includes a context: what a first reply waits for */
    toks = (infer_token *)malloc(sizeof *toks * (size_t)n_tok);
    if (!c || !toks) {
        fprintf(stderr, "infer: %s\n", c ? "out of memory" : err.msg);
        infer_context_free(c);
        infer_model_free(dm);
        infer_model_free(m);
        free(toks);
        return 1;
    }
    srand(1234);
    for (t = 0; t < n_tok; t++) toks[t] = (infer_token)(rand() % nv);
    if (infer_model_bos(m) >= 0) toks[0] = infer_model_bos(m);

    memset(res, 0, sizeof res);
    for (t = 0; t < 2; t++) {
        bench_result *br = &res[n_tests];
        int np = t == 0 ? o.n_prompt : 0, ng = t == 1 ? o.n_gen : 0;
        if (!np && !ng) continue;
        br->n_prompt = np;
        br->n_gen = ng;
        br->samples = (double *)calloc((size_t)o.reps, sizeof(double));
        if (run_once(c, toks, o.depth, np, ng, o.parallel, &warm, &err) < 0) goto fail; /* warm-up */
        for (r = 0; r < o.reps; r++) {
            double ttft = 0;
            br->samples[r] = run_once(c, toks, o.depth, np, ng, o.parallel, &ttft, &err);
            if (br->samples[r] < 0) goto fail;
            br->ttft_ms += ttft / o.reps;
        }
        stats(br, o.reps);
        n_tests++;
    }
    peak = infer_context_metrics(c).peak_rss_bytes;
    /* measured after the runs, never during them */
    dev_gbs = infer_model_device(m) == INFER_DEVICE_CPU ? cpu_read_gbs(o.threads) : infer_model_device_bandwidth(m);

    if (!strcmp(o.output, "json")) printf("[\n");
    else if (!strcmp(o.output, "csv"))
        printf("model_filename,model_size,n_threads,isa,device,n_prompt,n_gen,n_depth,n_parallel,avg_ts,stddev_ts,ttft_ms,"
               "load_ms,peak_rss,gen_gbs,device_gbs,gen_bw_share\n");
    else {
        printf("| model | size | threads | isa | device | test | t/s | GB/s | of bandwidth |\n");
        printf("| --- | ---: | ---: | --- | --- | ---: | ---: | ---: | ---: |\n");
    }
    for (t = 0; t < n_tests; t++) {
        bench_result *br = &res[t];
        char share[32] = "-", gbs_text[32] = "-";
        /* a pass reads the weights once, and each sequence's KV cache (at its
           middle position in the run) */
        gbs = br->n_gen ? br->avg / o.parallel *
                              ((double)model_bytes + (double)o.parallel * infer_context_kv_read_bytes(c, o.depth + br->n_gen / 2)) / 1e9
                        : 0;
        if (br->n_gen) snprintf(gbs_text, sizeof gbs_text, "%.2f", gbs);
        if (br->n_gen && dev_gbs > 0) snprintf(share, sizeof share, "%.6f", gbs / dev_gbs);
        if (!strcmp(o.output, "json")) {
            printf("  {\"model_filename\": \"%s\", \"model_size\": %zu, \"n_threads\": %d, \"isa\": \"%s\", "
                   "\"device\": \"%s\", \"device_name\": \"%s\", \"n_prompt\": %d, \"n_gen\": %d, "
                   "\"n_depth\": %d, \"n_parallel\": %d, \"avg_ts\": %.6f, \"stddev_ts\": %.6f, \"samples_ts\": [",
                   o.model, model_bytes, o.threads, infer_context_isa(c), dev, infer_model_device_name(m),
                   br->n_prompt, br->n_gen, o.depth, br->n_gen ? o.parallel : 1, br->avg, br->stddev);
            for (r = 0; r < o.reps; r++) printf(r ? ", %.6f" : "%.6f", br->samples[r]);
            /* device_gbs: the device's bandwidth (a GPU's copy kernel, the CPU's read); gen_bw_share:
               gen_gbs / device_gbs, null for a prompt row or where there is no device figure */
            printf("], \"ttft_ms\": %.3f, \"load_ms\": %.3f, \"peak_rss_bytes\": %zu, \"gen_gbs\": %.3f, "
                   "\"device_gbs\": %.3f, \"gen_bw_share\": %s}%s\n",
                   br->ttft_ms, load_ms, peak, gbs, dev_gbs, strcmp(share, "-") ? share : "null",
                   t + 1 < n_tests ? "," : "");
        } else if (!strcmp(o.output, "csv")) {
            printf("%s,%zu,%d,%s,%s,%d,%d,%d,%d,%.6f,%.6f,%.3f,%.3f,%zu,%.3f,%.3f,%s\n", o.model, model_bytes,
                   o.threads, infer_context_isa(c), dev, br->n_prompt, br->n_gen, o.depth, br->n_gen ? o.parallel : 1,
                   br->avg, br->stddev, br->ttft_ms, load_ms, peak, gbs, dev_gbs, strcmp(share, "-") ? share : "");
        } else {
            char test[32];
            if (br->n_prompt) snprintf(test, sizeof test, "pp%d", br->n_prompt);
            else if (o.parallel > 1) snprintf(test, sizeof test, "tg%d x%d", br->n_gen, o.parallel);
            else snprintf(test, sizeof test, "tg%d", br->n_gen);
            if (o.depth) snprintf(test + strlen(test), sizeof test - strlen(test), " @ d%d", o.depth);
            if (strcmp(share, "-")) snprintf(share, sizeof share, "%.1f%%", 100 * gbs / dev_gbs);
            printf("| %s | %.1f MiB | %d | %s | %s | %s | %.2f ± %.2f | %s | %s |\n", base_name(o.model),
                   model_bytes / 1048576.0, o.threads, infer_context_isa(c), dev, test, br->avg, br->stddev, gbs_text,
                   share);
        }
    }
    if (!strcmp(o.output, "json")) printf("]\n");
    if (!strcmp(o.output, "md")) {
        printf("\ndevice %s, load %.1f ms, peak RSS %.1f MiB", infer_model_device_name(m), load_ms, peak / 1048576.0);
        for (t = 0; t < n_tests; t++) {
            if (res[t].n_prompt) printf(", time to first token (pp%d) %.2f ms", res[t].n_prompt, res[t].ttft_ms);
            if (res[t].n_gen)
                printf(", generation reads %.2f GB/s",
                       res[t].avg / o.parallel *
                           ((double)model_bytes + (double)o.parallel * infer_context_kv_read_bytes(c, o.depth + res[t].n_gen / 2)) / 1e9);
        }
        if (dev_gbs > 0)
            printf(infer_model_device(m) == INFER_DEVICE_CPU ? ", reading memory reaches %.1f GB/s on this CPU"
                                                             : ", a copy kernel reaches %.1f GB/s on this GPU",
                   dev_gbs);
        printf("\n");
    }
    if ((o.lookup > 0 || dm) && !bench_lookup(m, dm, &o, &err)) goto fail;
    for (t = 0; t < n_tests; t++) free(res[t].samples);
    free(toks);
    infer_context_free(c);
    infer_model_free(dm);
    infer_model_free(m);
    return 0;
fail:
    fprintf(stderr, "infer: %s\n", err.msg);
    for (t = 0; t < 2; t++) free(res[t].samples);
    free(toks);
    infer_context_free(c);
    infer_model_free(dm);
    infer_model_free(m);
    return 1;
}

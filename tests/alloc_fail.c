/* alloc_fail - every allocation the library makes along load -> context ->
   decode -> generate -> chat -> quantize -> free is failed once, in turn,
   through the INFER_MALLOC/INFER_REALLOC hooks; each case must end in the
   API's error for it (INFER_ERR_NOMEM, or NULL / -1 where a function has no
   status) and leave nothing allocated. A plain program that compiles its
   own copy of the implementation (INFER_STATIC) with counting hooks:
     1. a clean pass counts the allocations N and records what it produced;
     2. for n = 1..N the pass runs again with allocation n failing. A step
        that fails must fail with NOMEM, and only once an allocation has
        failed; a pass that absorbs the failure must produce exactly what
        the clean pass did; afterwards the hooks' count of live blocks must
        be 0 (and LeakSanitizer, in the ASan build, finds no leak).
   The paths: stories260K (SentencePiece) through all the steps, and a
   vocabulary-only load plus tokenizing and detokenizing for each
   tokenizer kind of ../shared/tokenizer.
   Each case runs in a child process, so a crash fails that case (with the
   sanitizer's report) and the others still run; in an ASan build each
   child also asks LeakSanitizer. ALLOC_FAIL_ONLY=TEXT runs the paths whose
   name holds TEXT; ALLOC_FAIL_VERBOSE=1 names the absorbed cases.
   Exit 0 when every case holds, 1 with a line per failure, 77 (skipped)
   without ../shared.
       alloc_fail SHARED_DIR TMP_DIR */
#define _XOPEN_SOURCE 700
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#if defined(__SANITIZE_ADDRESS__)
#define ALLOC_FAIL_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ALLOC_FAIL_LSAN 1
#endif
#endif
#ifdef ALLOC_FAIL_LSAN
#include <sanitizer/lsan_interface.h>
#endif

static atomic_long hook_calls;   /* allocations asked for so far */
static atomic_long hook_fail_at; /* the one to fail (1-based), 0: none */
static atomic_long hook_failed;  /* allocations refused */
static atomic_long hook_live;    /* blocks handed out and not freed */

static void *hook_malloc(size_t n) {
    void *p;
    if (atomic_fetch_add(&hook_calls, 1) + 1 == atomic_load(&hook_fail_at)) {
        atomic_fetch_add(&hook_failed, 1);
        return NULL;
    }
    if ((p = malloc(n ? n : 1))) atomic_fetch_add(&hook_live, 1);
    return p;
}

static void *hook_realloc(void *p, size_t n) {
    void *q;
    if (atomic_fetch_add(&hook_calls, 1) + 1 == atomic_load(&hook_fail_at)) {
        atomic_fetch_add(&hook_failed, 1);
        return NULL;
    }
    if ((q = realloc(p, n ? n : 1)) && !p) atomic_fetch_add(&hook_live, 1);
    return q;
}

static void hook_free(void *p) {
    if (p) atomic_fetch_sub(&hook_live, 1);
    free(p);
}

#define INFER_MALLOC(sz) hook_malloc(sz)
#define INFER_REALLOC(p, sz) hook_realloc(p, sz)
#define INFER_FREE(p) hook_free(p)
#define INFER_STATIC
#define INFER_IMPLEMENTATION
#include "infer.h"
#include "tests/status_calls.h"

/* What a pass produced, compared between the clean pass and the others. */
typedef struct pass_output {
    char text[4096];
    size_t len;
} pass_output;

static void out_add(pass_output *o, const void *p, size_t n) {
    if (n > sizeof o->text - o->len) n = sizeof o->text - o->len;
    memcpy(o->text + o->len, p, n);
    o->len += n;
}

static int piece_to_output(const char *piece, int len, void *user) {
    out_add((pass_output *)user, piece, (size_t)len);
    return 0;
}

/* A step's failure: fine when an allocation was refused and the failure
   says so (status NOMEM, or the API's -1/NULL); else a bug, written to why. */
typedef struct pass_state {
    char why[512];
    int stopped; /* a step failed (as it should, or not) */
    int bad;
} pass_state;

static void step_failed(pass_state *ps, const char *step, infer_status st, const infer_error *err) {
    ps->stopped = 1;
    if (atomic_load(&hook_failed) == 0) {
        snprintf(ps->why, sizeof ps->why, "%s failed with no allocation refused: %s", step, err ? err->msg : "");
        ps->bad = 1;
    } else if (st != INFER_OK && st != INFER_ERR_NOMEM) {
        snprintf(ps->why, sizeof ps->why, "%s failed with status %d, not NOMEM: %s", step, (int)st,
                 err ? err->msg : "");
        ps->bad = 1;
    }
}

static const char grammar[] = "root ::= word (\" \" word)*\nword ::= [a-z]+\n";
static const char schema[] = "{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\"}}}";

/* load -> context -> decode -> generate (a grammar) -> chat (a template,
   a request with stop strings, top probabilities and a JSON schema) ->
   quantize -> free */
static void model_pass(const char *path, const char *quant_path, pass_output *o, pass_state *ps) {
    infer_model_params mp = infer_model_default_params();
    infer_context_params cp = infer_context_default_params();
    infer_model *m = NULL;
    infer_context *c = NULL;
    infer_sampler *s = NULL;
    infer_request *r = NULL;
    infer_error err;
    infer_status st;
    infer_token toks[64];
    int n;
    mp.device = INFER_DEVICE_CPU;
    if (!(m = infer_model_load(path, &mp, &err))) {
        step_failed(ps, "infer_model_load", err.code, &err);
        goto done;
    }
    cp.n_ctx = 96;
    cp.n_threads = 1; /* the allocations come in one order */
    cp.n_seq = 2;
    if (!(c = infer_context_new(m, &cp, &err))) {
        step_failed(ps, "infer_context_new", err.code, &err);
        goto done;
    }
    if (infer_tokenize(m, "Once upon a time", 16, toks, 64, 1, 0, &n, NULL) != INFER_OK) n = -1;
    if (n < 0) {
        step_failed(ps, "infer_tokenize", INFER_OK, NULL);
        goto done;
    }
    if ((st = infer_decode(c, toks, n, 0, &err)) != INFER_OK) {
        step_failed(ps, "infer_decode", st, &err);
        goto done;
    }
    out_add(o, infer_context_logits(c, -1), 4 * sizeof(float));
    infer_seq_truncate(c, 0, 0, NULL, NULL);
    {
        infer_sampler_params sp = infer_sampler_default_params();
        sp.temperature = 0;
        if (!(s = infer_sampler_new(&sp, infer_model_n_vocab(m), &err))) {
            step_failed(ps, "infer_sampler_new", err.code, &err);
            goto done;
        }
    }
    if ((st = infer_sampler_set_grammar(s, m, grammar, NULL, &err)) != INFER_OK) {
        step_failed(ps, "infer_sampler_set_grammar", st, &err);
        goto done;
    }
    if ((st = infer_generate(c, s, "Once upon a time", 12, piece_to_output, o, &err)) != INFER_OK) {
        step_failed(ps, "infer_generate", st, &err);
        goto done;
    }
    out_add(o, "|", 1);
    {
        infer_chat_template t = infer_chat_template_from_text(NULL, NULL, NULL);
        infer_chat_message msgs[2] = {{"system", "Tell a story."}, {"user", "A cat and a dog."}};
        infer_request_params rp = infer_request_default_params();
        static const char *const stops[] = {"\n\n", "The end"};
        char prompt[512];
        size_t got;
        if (sc_chat_format(&t, msgs, 2, 0, 1, prompt, sizeof prompt) < 0) {
            step_failed(ps, "infer_chat_format", INFER_OK, NULL);
            goto done;
        }
        out_add(o, prompt, strlen(prompt));
        { /* SmolLM3's header rewrites a long system message on the heap */
            infer_chat_template t3 = infer_chat_template_from_text("smollm3", NULL, NULL);
            char sys[700], text[2048];
            infer_chat_message m3[2] = {{"system", sys}, {"user", "Hi"}};
            memset(sys, 'a', 600);
            snprintf(sys + 600, sizeof sys - 600, " /think and more");
            snprintf(t3.date, sizeof t3.date, "1 January 2026");
            if (sc_chat_format(&t3, m3, 2, 0, 1, text, sizeof text) < 0) {
                step_failed(ps, "infer_chat_format (SmolLM3, a long system message)", INFER_OK, NULL);
                goto done;
            }
            out_add(o, text, strlen(text));
        }
        rp.prompt = prompt;
        rp.seq = 1;
        rp.n_predict = 10;
        rp.sampling.temperature = 0;
        rp.stop = stops;
        rp.n_stop = 2;
        rp.n_probs = 3;
        rp.json_schema = schema;
        if (!(r = infer_request_start(c, &rp, &err))) {
            step_failed(ps, "infer_request_start", err.code, &err);
            goto done;
        }
        while (infer_context_step(c, 0) > 0) {
        }
        if ((st = infer_request_status(r, &err)) != INFER_OK) {
            step_failed(ps, "a chat request", st, &err);
            goto done;
        }
        got = infer_request_text(r, 0, prompt, sizeof prompt);
        out_add(o, prompt, got < sizeof prompt ? got : sizeof prompt - 1);
    }
    out_add(o, "|", 1);
    {
        infer_quantize_params qp = infer_quantize_default_params();
        FILE *f;
        long size;
        qp.n_threads = 1;
        if ((st = infer_quantize(path, quant_path, INFER_QUANT_TARGET_Q8_0, &qp, &err)) != INFER_OK) {
            step_failed(ps, "infer_quantize", st, &err);
            goto done;
        }
        if (!(f = fopen(quant_path, "rb")) || fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0) {
            snprintf(ps->why, sizeof ps->why, "infer_quantize wrote no readable %s", quant_path);
            ps->bad = 1;
            if (f) fclose(f);
            goto done;
        }
        fclose(f);
        out_add(o, &size, sizeof size);
    }
done:
    if (r) infer_request_free(r);
    infer_sampler_free(s);
    infer_context_free(c);
    infer_model_free(m);
}

/* A vocabulary-only load, then text to tokens and back. */
static void vocab_pass(const char *path, pass_output *o, pass_state *ps) {
    static const char text[] = "Hello world! 3.14 tokenizers' \xc3\xa9t\xc3\xa9 <|endoftext|>   spaces\n\ttabs 12345";
    infer_model_params mp = infer_model_default_params();
    infer_model *m;
    infer_error err;
    infer_token toks[256];
    infer_detok d = {{0}, 0};
    char piece[256];
    int n, i, k;
    mp.vocab_only = 1;
    if (!(m = infer_model_load(path, &mp, &err))) {
        step_failed(ps, "infer_model_load (vocab only)", err.code, &err);
        return;
    }
    for (k = 0; k < 2; k++) { /* plain text, then special tokens parsed */
        if (infer_tokenize(m, text, sizeof text - 1, toks, 256, 1, k, &n, NULL) != INFER_OK) n = -1;
        if (n < 0) {
            step_failed(ps, "infer_tokenize", INFER_OK, NULL);
            break;
        }
        out_add(o, toks, (size_t)(n < 256 ? n : 256) * sizeof *toks);
        for (i = 0; i < n && i < 256; i++) out_add(o, piece, (size_t)sc_detok_push(&d, m, toks[i], piece, 256));
        out_add(o, piece, (size_t)sc_detok_flush(&d, piece, 256));
    }
    infer_model_free(m);
}

typedef struct path {
    const char *name;
    char file[1024];
    int vocab_only;
} path;

static int run(const path *p, const char *quant_path, pass_output *o, pass_state *ps) {
    memset(o, 0, sizeof *o);
    memset(ps, 0, sizeof *ps);
    if (p->vocab_only)
        vocab_pass(p->file, o, ps);
    else
        model_pass(p->file, quant_path, o, ps);
    return !ps->bad;
}

/* Case n of a path, in a child: 0 when the pass ended in the error, 2 when
   it absorbed the failure with the same output, 3 (a line printed) when
   neither or a block was left allocated. Anything else is a crash (a
   sanitizer's report exits 1). */
static int one_case(const path *p, const char *quant_path, const pass_output *clean, long n, long n_allocs) {
    static pass_output out;
    pass_state ps;
    char quant_own[1100];
    int absorbed = 0;
    snprintf(quant_own, sizeof quant_own, "%s.%ld", quant_path, n);
    atomic_store(&hook_calls, 0);
    atomic_store(&hook_failed, 0);
    atomic_store(&hook_fail_at, n);
    run(p, quant_own, &out, &ps);
    atomic_store(&hook_fail_at, 0);
    remove(quant_own);
    if (!ps.bad && !ps.stopped) {
        if (atomic_load(&hook_failed) == 0) {
            snprintf(ps.why, sizeof ps.why, "allocation %ld never came (the pass made %ld)", n, atomic_load(&hook_calls));
            ps.bad = 1;
        } else if (out.len != clean->len || memcmp(out.text, clean->text, clean->len) != 0) {
            snprintf(ps.why, sizeof ps.why, "the pass absorbed the failure but its output differs");
            ps.bad = 1;
        } else {
            absorbed = 1;
        }
    }
    if (!ps.bad && atomic_load(&hook_live) != 0) {
        snprintf(ps.why, sizeof ps.why, "%ld blocks left allocated", atomic_load(&hook_live));
        ps.bad = 1;
    }
    if (ps.bad) {
        printf("alloc_fail: FAILED: %s: allocation %ld of %ld: %s\n", p->name, n, n_allocs, ps.why);
        return 3;
    }
    return absorbed ? 2 : 0;
}

int main(int argc, char **argv) {
    static const char *vocabs[] = {"llama-spm", "gpt-2", "llama-bpe", "qwen2", "phi-3", "deepseek-coder", "mpt"};
    path paths[1 + sizeof vocabs / sizeof vocabs[0]];
    const char *shared = argc > 1 ? argv[1] : NULL, *tmp = argc > 2 ? argv[2] : "/tmp";
    char quant_path[1024];
    int n_paths = 0, i, failures = 0, max_failures = getenv("ALLOC_FAIL_MAX") ? atoi(getenv("ALLOC_FAIL_MAX")) : 20;
    long total_cases = 0;
    if (!shared) {
        fprintf(stderr, "usage: alloc_fail SHARED_DIR [TMP_DIR]\n");
        return 1;
    }
    paths[n_paths].name = "stories260K: load, context, decode, generate, chat, quantize, free";
    snprintf(paths[n_paths].file, sizeof paths[n_paths].file, "%s/models/stories260K.gguf", shared);
    paths[n_paths++].vocab_only = 0;
    for (i = 0; i < (int)(sizeof vocabs / sizeof vocabs[0]); i++) {
        paths[n_paths].name = vocabs[i];
        snprintf(paths[n_paths].file, sizeof paths[n_paths].file, "%s/tokenizer/ggml-vocab-%s.gguf", shared, vocabs[i]);
        paths[n_paths++].vocab_only = 1;
    }
    for (i = 0; i < n_paths; i++)
        if (access(paths[i].file, R_OK) != 0) {
            printf("alloc_fail: SKIPPED: %s is absent\n", paths[i].file);
            return 77;
        }
    snprintf(quant_path, sizeof quant_path, "%s/alloc_fail_%d.gguf", tmp, (int)getpid());
    for (i = 0; i < n_paths; i++) {
        static pass_output clean;
        pass_state ps;
        long n_allocs, n, absorbed = 0, refused = 0;
        if (getenv("ALLOC_FAIL_ONLY") && !strstr(paths[i].name, getenv("ALLOC_FAIL_ONLY"))) continue;
        atomic_store(&hook_fail_at, 0);
        atomic_store(&hook_calls, 0);
        atomic_store(&hook_failed, 0);
        if (!run(&paths[i], quant_path, &clean, &ps) || ps.stopped) {
            printf("alloc_fail: FAILED: %s: the clean pass failed: %s\n", paths[i].name, ps.why);
            failures++;
            continue;
        }
        n_allocs = atomic_load(&hook_calls);
        if (atomic_load(&hook_live) != 0) {
            printf("alloc_fail: FAILED: %s: the clean pass left %ld blocks\n", paths[i].name, atomic_load(&hook_live));
            failures++;
            continue;
        }
        /* each case in a child process, so that a crash fails that case
           (with the sanitizer's report) and the rest still run */
        for (n = 1; n <= n_allocs; n++) {
            int status = 0;
            pid_t pid;
            fflush(stdout);
            if ((pid = fork()) == 0) {
                int rc = one_case(&paths[i], quant_path, &clean, n, n_allocs);
#ifdef ALLOC_FAIL_LSAN
                /* (_exit skips LeakSanitizer's own check at exit) */
                if (__lsan_do_recoverable_leak_check()) {
                    printf("alloc_fail: FAILED: %s: allocation %ld of %ld: LeakSanitizer found a leak\n",
                           paths[i].name, n, n_allocs);
                    rc = 3;
                }
#endif
                fflush(stdout);
                _exit(rc);
            }
            if (pid < 0 || waitpid(pid, &status, 0) != pid) {
                printf("alloc_fail: FAILED: cannot run a child process\n");
                return 1;
            }
            if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
                refused++;
            else if (WIFEXITED(status) && WEXITSTATUS(status) == 2) {
                absorbed++;
                if (getenv("ALLOC_FAIL_VERBOSE")) printf("alloc_fail: %s: allocation %ld absorbed\n", paths[i].name, n);
            }
            else {
                if (!WIFEXITED(status) || WEXITSTATUS(status) != 3)
                    printf("alloc_fail: FAILED: %s: allocation %ld of %ld: the pass crashed (%s %d)\n", paths[i].name,
                           n, n_allocs, WIFSIGNALED(status) ? "signal" : "exit", WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
                if (++failures > max_failures) break;
            }
        }
        printf("alloc_fail: %s: %ld allocations, each failed once: %ld ended in the error, %ld absorbed with "
               "the same output\n",
               paths[i].name, n_allocs, refused, absorbed);
        total_cases += n_allocs;
        if (failures > max_failures) break;
    }
    remove(quant_path);
    printf("alloc_fail: %ld cases, %d failed\n", total_cases, failures);
    return failures ? 1 : 0;
}

/* platform_check - the platform layer (src/platform.h) on this OS, as a
   plain program (Criterion does not cross-build: this one runs under Wine
   too, tests/windows_check.py):
   - a pool of 2 runs its workers on two threads at once, sleeps when idle
     and wakes; its barrier holds over many phases; work items are handed
     out once each;
   - the CPU's count and features, and the kernels chosen from them;
   - a model file is mapped, not read; a directory is refused, as a file to
     read and as a state to write;
   - a UTF-8 path (its characters outside every ANSI code page) holds a
     model that loads and a state that is saved and loaded back;
   - the peak resident set is known.
       platform_check MODEL SCRATCH_DIR
   Exit 0 when all hold, 1 with a line saying what failed. */
#define INFER_STATIC
#define INFER_IMPLEMENTATION
#include "infer.h"
#include "../examples/os.h"

static int failures;

static void check(int ok, const char *what) {
    printf("%s: %s\n", ok ? "ok  " : "FAIL", what);
    if (!ok) failures++;
}

/* ---- the pool ---- */

typedef struct meet {
    int here[2];  /* each worker's flag, set when it runs */
    int both;     /* workers that saw the other's flag */
    int next;     /* work items handed out (infer__atomic_next) */
    int taken[4096];
    infer__pool *pool;
    int phases_ok;
} meet;

/* Each of two workers sets its flag and waits (2 s at most) for the
   other's: both can only see both flags where they run at once, on two
   threads. */
static void meet_task(void *arg, int ith, int nth) {
    meet *m = (meet *)arg;
    double t0 = os_now_ms();
    (void)nth;
    infer__atomic_store(&m->here[ith], 1, INFER__RELEASE);
    while (!infer__atomic_load(&m->here[1 - ith], INFER__ACQUIRE))
        if (os_now_ms() - t0 > 2000) return;
    infer__atomic_fetch_add(&m->both, 1, INFER__SEQ_CST);
}

static void items_task(void *arg, int ith, int nth) {
    meet *m = (meet *)arg;
    int i;
    (void)ith, (void)nth;
    while ((i = infer__atomic_next(&m->next)) < 4096) infer__atomic_fetch_add(&m->taken[i], 1, INFER__RELAXED);
}

/* 1000 phases: in each, every worker adds 1 to the phase's count, and after
   the barrier each reads it whole */
static int g_count[1000];
static void barrier_task(void *arg, int ith, int nth) {
    meet *m = (meet *)arg;
    int k, ok = 1;
    (void)ith;
    for (k = 0; k < 1000; k++) {
        infer__atomic_fetch_add(&g_count[k], 1, INFER__RELAXED);
        infer__pool_barrier(m->pool);
        ok &= infer__atomic_load(&g_count[k], INFER__RELAXED) == nth;
    }
    if (!ok) infer__atomic_store(&m->phases_ok, 0, INFER__RELAXED);
}

static void check_pool(void) {
    static meet m;
    infer__pool *p = infer__pool_new(2);
    int i, once = 1;
    check(p && infer__pool_size(p) == 2, "a pool of 2 has 2 workers");
    if (!p || infer__pool_size(p) != 2) return;
    m.pool = p;
    infer__pool_run(p, meet_task, &m);
    check(m.both == 2, "the pool's 2 workers run at once, on two threads");
    infer__pool_run(p, items_task, &m);
    for (i = 0; i < 4096; i++) once &= m.taken[i] == 1;
    check(once, "work items are handed out once each");
    m.phases_ok = 1;
    infer__pool_run(p, barrier_task, &m);
    check(m.phases_ok, "the pool's barrier holds over 1000 phases");
    /* idle long enough to sleep (about 65k spins), then woken */
    os_sleep_ms(300);
    m.here[0] = m.here[1] = m.both = 0;
    infer__pool_run(p, meet_task, &m);
    check(m.both == 2, "idle workers sleep and wake for the next op");
    infer__pool_free(p);
}

/* ---- files ---- */

static void check_files(const char *model, const char *dir) {
    infer__blob b, not_file;
    infer_error err;
    char path[2048], state[2048];
    infer_model *m;
    int ok = infer__blob_open(&b, model, &err);
    check(ok && b.kind == INFER__BLOB_MAPPED && b.size > 0, "a model file is mapped, not read");
#if defined(_WIN32)
    {
        /* the view is one of the file's: Windows says the pages are MEM_MAPPED */
        MEMORY_BASIC_INFORMATION mi;
        check(ok && VirtualQuery(b.data, &mi, sizeof mi) && mi.Type == MEM_MAPPED, "Windows reports the view as a file mapping");
    }
#endif
    check(!infer__blob_open(&not_file, dir, &err) && strstr(err.msg, "directory") != NULL, "a directory is refused as a file");
    printf("      (%s)\n", err.msg);
    check(!infer__file_write(dir, "x", 1, &err) && strstr(err.msg, "directory") != NULL, "a directory is refused as a state file");
    /* a name no ANSI code page spells: Cyrillic, CJK and an o with diaeresis */
    snprintf(path, sizeof path, "%s/\xd0\xbc\xd0\xbe\xd0\xb4\xd0\xb5\xd0\xbb\xd1\x8c-\xe6\xa8\xa1\xe5\x9e\x8b-m\xc3\xb6""del.gguf", dir);
    snprintf(state, sizeof state, "%s/\xe7\x8a\xb6\xe6\x80\x81-state.bin", dir);
    check(ok && infer__file_write(path, b.data, b.size, &err), "a model written to a UTF-8 path");
    if (ok) infer__blob_close(&b);
    m = infer_model_load(path, NULL, &err);
    check(m != NULL, "a model loads from a UTF-8 path");
    if (!m) printf("      (%s)\n", err.msg);
    if (m) {
        infer_context *c = infer_context_new(m, NULL, &err);
        infer_token t[2] = {1, 2};
        float first = 0;
        int same = 0;
        if (c && infer_decode(c, t, 2, 0, &err) == INFER_OK && infer_seq_state_save_file(c, 0, state, &err) == INFER_OK) {
            first = infer_context_logits(c, -1)[0];
            infer_seq_truncate(c, 0, 0, NULL, NULL);
            same = infer_seq_state_load_file(c, 0, state, &err) == INFER_OK && infer_seq_n_past(c, 0) == 2 &&
                   infer_seq_logits(c, 0)[0] == first;
        }
        check(same, "a state saved to a UTF-8 path loads back");
        if (!same) printf("      (%s)\n", err.msg);
        check(infer__peak_rss_bytes() > 0, "the peak resident set is known");
        printf("      (peak %.1f MiB)\n", infer__peak_rss_bytes() / 1048576.0);
        infer_context_free(c);
        infer_model_free(m);
    }
}

int main(int argc, char **argv) {
    infer__kernels k;
    infer_error err;
    os_init_main(&argc, &argv);
    if (argc < 3) {
        fprintf(stderr, "usage: platform_check MODEL SCRATCH_DIR\n");
        return 2;
    }
    {
        FILE *f = os_fopen(argv[1], "rb");
        if (!f) {
            printf("platform_check: SKIPPED: no %s (../shared absent?)\n", argv[1]);
            return 77;
        }
        fclose(f);
    }
    check_pool();
    printf("      cpus %d, avx2 %d, avx512 %d, vnni %d, bf16 %d, dotprod %d, i8mm %d\n", infer__cpu_count(),
           infer__cpu_has(INFER__CPU_AVX2), infer__cpu_has(INFER__CPU_AVX512), infer__cpu_has(INFER__CPU_AVX512_VNNI),
           infer__cpu_has(INFER__CPU_AVX512_BF16), infer__cpu_has(INFER__CPU_DOTPROD), infer__cpu_has(INFER__CPU_I8MM));
    check(infer__cpu_count() >= 1, "the CPU count is known");
    check(infer__kernels_select(&k, &err), "kernels are chosen for this CPU");
    printf("      (%s)\n", infer__isa_name(k.isa));
#if defined(__x86_64__) || defined(_M_X64)
    check(k.isa != INFER__ISA_AVX512 || infer__cpu_has(INFER__CPU_AVX512), "AVX-512 kernels only where the CPU has them");
    check(getenv("INFER_ISA") || k.isa == (infer__cpu_has(INFER__CPU_AVX512) ? INFER__ISA_AVX512
                                         : infer__cpu_has(INFER__CPU_AVX2)   ? INFER__ISA_AVX2
                                                                             : INFER__ISA_SCALAR),
          "the best kernels the CPU has are chosen");
#endif
    check_files(argv[1], argv[2]);
    if (failures) printf("platform_check: FAILED: %d checks\n", failures);
    else printf("platform_check: ok\n");
    return failures != 0;
}

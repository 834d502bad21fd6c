/* model_readonly - a loaded model is read-only: two threads ask one model on the (emulated) GPU its read-only questions at once, under ThreadSanitizer.
   The TSan build links it with the CUDA backend compiled for the CPU
   (tests/cuda_emu.h), so infer_model_device_bandwidth and the others take
   the GPU's path; TSan fails the run (exit 66) on any race between the
   threads. Each thread also checks it got what the main thread got.
   Exit 0 when all hold, 1 with a line saying what failed, 77 (skipped)
   without ../shared.
       model_readonly SHARED_DIR */
#define _XOPEN_SOURCE 700
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer.h"
#include "../examples/os.h" /* threads on POSIX and Windows */

#define ROUNDS 3

typedef struct answers {
    double bandwidth;
    char name[128], describe[256];
    size_t weight_bytes;
    int n_vocab;
} answers;

typedef struct job {
    const infer_model *m;
    answers got[ROUNDS];
} job;

static void ask(const infer_model *m, answers *a) {
    a->bandwidth = infer_model_device_bandwidth(m);
    snprintf(a->name, sizeof a->name, "%s", infer_model_device_name(m));
    infer_model_describe(m, a->describe, sizeof a->describe, NULL, NULL);
    a->weight_bytes = infer_model_weight_bytes(m);
    a->n_vocab = infer_model_n_vocab(m);
}

static void asker(void *arg) {
    job *j = (job *)arg;
    int r;
    for (r = 0; r < ROUNDS; r++) ask(j->m, &j->got[r]);
}

static int fail(const char *why) {
    fprintf(stderr, "model_readonly: FAILED: %s\n", why);
    return 1;
}

int main(int argc, char **argv) {
    char path[1024];
    infer_error err;
    infer_model_params mp = infer_model_default_params();
    infer_model *m;
    job jobs[2];
    os_thread th[2];
    answers alone;
    int i, r;
    os_init_main(&argc, &argv);
    if (argc < 2) return fail("usage: model_readonly SHARED_DIR");
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", argv[1]);
    mp.device = INFER_DEVICE_CUDA;
    m = infer_model_load(path, &mp, &err);
    if (!m) {
        fprintf(stderr, "model_readonly: SKIPPED: %s (../shared absent?)\n", err.msg);
        return 77;
    }
    if (infer_model_device(m) != INFER_DEVICE_CUDA) return fail("the model is not on the (emulated) GPU");
    memset(jobs, 0, sizeof jobs);
    for (i = 0; i < 2; i++) jobs[i].m = m;
    for (i = 0; i < 2; i++)
        if (!os_thread_start(&th[i], asker, &jobs[i])) return fail("a thread could not start");
    for (i = 0; i < 2; i++) os_thread_join(th[i]);
    ask(m, &alone);
    if (!(alone.bandwidth > 0)) return fail("no bandwidth measured on the GPU");
    for (i = 0; i < 2; i++)
        for (r = 0; r < ROUNDS; r++) {
            const answers *a = &jobs[i].got[r];
            if (a->bandwidth != alone.bandwidth || strcmp(a->name, alone.name) || strcmp(a->describe, alone.describe) ||
                a->weight_bytes != alone.weight_bytes || a->n_vocab != alone.n_vocab)
                return fail("a thread's answer differs from the main thread's");
        }
    printf("model_readonly: ok (two threads asked one GPU model %d times each: %.1f GB/s on %s)\n", ROUNDS,
           alone.bandwidth, alone.name);
    infer_model_free(m);
    return 0;
}

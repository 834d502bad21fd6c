/* infer quantize IN.gguf OUT.gguf TYPE [-t THREADS] [--allow-requantize]
   Writes IN's weights in another format (see infer_quantize in infer.h),
   one line per tensor on stdout, a summary at the end. */
#define _XOPEN_SOURCE 700 /* open, fstat (cli.h reads only regular files) */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

int infer_cmd_quantize(int argc, char **argv);

static void on_tensor(const char *name, int64_t i, int64_t n, infer_type from, infer_type to, size_t old_bytes,
                      size_t new_bytes, void *user) {
    size_t *totals = (size_t *)user;
    totals[0] += old_bytes;
    totals[1] += new_bytes;
    printf("[%4lld/%4lld] %-36s %-6s -> %-6s %10.3f MiB -> %10.3f MiB\n", (long long)i + 1, (long long)n, name,
           infer_type_name(from), infer_type_name(to), old_bytes / 1048576.0, new_bytes / 1048576.0);
}

static void list_targets(FILE *f) {
    int i;
    fprintf(f, "types:");
    for (i = 0; i < INFER_QUANT_TARGET_COUNT; i++) fprintf(f, " %s", infer_quant_target_name((infer_quant_target)i));
    fprintf(f, "\n");
}

int infer_cmd_quantize(int argc, char **argv) {
    const char *pos[3] = {NULL, NULL, NULL};
    int n_pos = 0, i, target;
    size_t totals[2] = {0, 0};
    infer_quantize_params qp = infer_quantize_default_params();
    infer_error err;
    for (i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] == '-' && a[1]) {
            int takes = cli_flag_check(argc, argv, i, CLI_CMD_QUANTIZE);
            char *end;
            long v;
            if (takes < 0) return 1;
            if (cli_is_help(a)) {
                printf("usage: infer quantize IN.gguf OUT.gguf TYPE [options]\n");
                cli_print_options(stdout, CLI_CMD_QUANTIZE);
                fputc('\n', stdout);
                list_targets(stdout);
                return 0;
            }
            if (!takes) { /* --allow-requantize */
                qp.allow_requantize = 1;
                continue;
            }
            errno = 0; /* -t, --threads */
            v = strtol(argv[++i], &end, 10);
            if (errno || end == argv[i] || *end || v < 1 || v > 256) {
                fprintf(stderr, "infer: bad value '%s' for %s\n", argv[i], a);
                return 1;
            }
            qp.n_threads = (int)v;
        } else if (n_pos < 3) {
            pos[n_pos++] = a;
        } else {
            fprintf(stderr, "infer: quantize takes IN.gguf OUT.gguf TYPE; extra argument '%s'\n", a);
            return 1;
        }
    }
    if (n_pos < 3) {
        fprintf(stderr, "infer: usage: infer quantize IN.gguf OUT.gguf TYPE [-t THREADS] [--allow-requantize]\n");
        return 1;
    }
    target = infer_quant_target_from_name(pos[2]);
    if (target < 0) {
        int k;
        fprintf(stderr, "infer: unknown quantization type '%s' (one of", pos[2]);
        for (k = 0; k < INFER_QUANT_TARGET_COUNT; k++) fprintf(stderr, " %s", infer_quant_target_name((infer_quant_target)k));
        fprintf(stderr, ")\n");
        return 1;
    }
    qp.progress = on_tensor;
    qp.user = totals;
    if (infer_quantize(pos[0], pos[1], (infer_quant_target)target, &qp, &err) != INFER_OK) {
        fflush(stdout);
        fprintf(stderr, "infer: %s\n", err.msg);
        return 1;
    }
    printf("%s: %.3f MiB -> %.3f MiB (%s)\n", pos[1], totals[0] / 1048576.0, totals[1] / 1048576.0,
           infer_quant_target_name((infer_quant_target)target));
    return 0;
}

/* main() for a harness outside libFuzzer: runs LLVMFuzzerTestOneInput on
   every file given, and on every file in each directory given, so that the
   regression inputs of tests/fuzz/regressions/ run in every build (gcc,
   Release, ASan) and not only in the clang fuzzing one. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* optional in a harness */
__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv);

static int replay_file(const char *path) {
    FILE *f = fopen(path, "rb");
    uint8_t *buf;
    long n;
    if (!f || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fprintf(stderr, "replay: cannot read %s\n", path);
        if (f) fclose(f);
        return 1;
    }
    /* exactly n bytes, as libFuzzer hands them (1 more so malloc(0) is never asked) */
    buf = (uint8_t *)malloc((size_t)n + 1);
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "replay: cannot read %s\n", path);
        fclose(f);
        free(buf);
        return 1;
    }
    fclose(f);
    fprintf(stderr, "replay: %s (%ld bytes)\n", path, n);
    LLVMFuzzerTestOneInput(buf, (size_t)n);
    free(buf);
    return 0;
}

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv) {
    int i, failed = 0, n_run = 0;
    if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
    for (i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "replay: %s does not exist\n", argv[i]);
            failed = 1;
        } else if (S_ISDIR(st.st_mode)) {
            /* in name order, so that a run is the same everywhere */
            DIR *d = opendir(argv[i]);
            struct dirent *e;
            char **names = NULL;
            size_t n = 0, k;
            while (d && (e = readdir(d)) != NULL) {
                if (e->d_name[0] == '.') continue;
                names = (char **)realloc(names, (n + 1) * sizeof *names);
                names[n] = (char *)malloc(strlen(argv[i]) + strlen(e->d_name) + 2);
                sprintf(names[n++], "%s/%s", argv[i], e->d_name);
            }
            if (d) closedir(d);
            if (n) qsort(names, n, sizeof *names, cmp_names);
            for (k = 0; k < n; k++) {
                failed |= replay_file(names[k]);
                n_run++;
                free(names[k]);
            }
            free(names);
        } else {
            failed |= replay_file(argv[i]);
            n_run++;
        }
    }
    fprintf(stderr, "replay: %d inputs, %s\n", n_run, failed ? "some unreadable" : "no crash");
    return failed;
}

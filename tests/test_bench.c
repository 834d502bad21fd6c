/* test_bench.c - `infer bench` works and reports what it promises (the
   figures themselves are measured, never asserted: speed is not a test). */
#define _XOPEN_SOURCE 700 /* mkdtemp */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

static char *bench(const char *args, int *status) {
    char cmd[2048], model[512];
    tu_shared_path(model, sizeof model, "models/stories260K.gguf");
    snprintf(cmd, sizeof cmd, "'%s' bench -m '%s' %s 2>/dev/null", INFER_CLI_PATH, model, args);
    return tu_run(cmd, status);
}

Test(bench, json_has_llama_bench_fields) {
    int st, i;
    char *out;
    tu_json *j;
    if (!tu_have_shared()) cr_skip_test("../shared is absent: no model to benchmark");
    out = bench("-p 16 -n 8 -r 3 -t 2 -o json", &st);
    cr_assert_eq(st, 0, "infer bench failed: %s", out);
    j = tu_json_parse(out);
    cr_assert_not_null(j, "not JSON: %s", out);
    cr_assert_eq(j->kind, TU_ARR);
    cr_assert_eq(j->n, 2, "one object for the prompt test, one for generation");
    for (i = 0; i < 2; i++) {
        const tu_json *o = &j->items[i], *s = tu_json_get(o, "samples_ts");
        cr_assert_str_eq(tu_json_get(o, "model_filename")->str + strlen(tu_json_get(o, "model_filename")->str) -
                             strlen("stories260K.gguf"),
                         "stories260K.gguf");
        cr_assert_eq((int)tu_json_get(o, "n_threads")->num, 2);
        cr_assert_eq((int)tu_json_get(o, "n_prompt")->num, i == 0 ? 16 : 0);
        cr_assert_eq((int)tu_json_get(o, "n_gen")->num, i == 0 ? 0 : 8);
        cr_assert_gt(tu_json_get(o, "avg_ts")->num, 0);
        cr_assert_geq(tu_json_get(o, "stddev_ts")->num, 0);
        cr_assert(s && s->kind == TU_ARR && s->n == 3, "three repetitions, three samples");
        cr_assert_gt(tu_json_get(o, "model_size")->num, 1e6);
        cr_assert_gt(tu_json_get(o, "peak_rss_bytes")->num, 0);
    }
    cr_assert_gt(tu_json_get(&j->items[0], "ttft_ms")->num, 0);
    cr_assert_gt(tu_json_get(&j->items[1], "gen_gbs")->num, 0);
    /* the device's bandwidth, measured (the CPU's read of a buffer), and generation's share of it */
    cr_assert_gt(tu_json_get(&j->items[1], "device_gbs")->num, 0.1);
    cr_assert_eq(tu_json_get(&j->items[1], "gen_bw_share")->kind, TU_NUM);
    {
        double share = tu_json_get(&j->items[1], "gen_bw_share")->num,
               want = tu_json_get(&j->items[1], "gen_gbs")->num / tu_json_get(&j->items[1], "device_gbs")->num;
        cr_assert(share > want * 0.98 - 1e-3 && share < want * 1.02 + 1e-3, "share %g, gen_gbs / device_gbs %g", share,
                  want);
    }
    cr_assert_eq(tu_json_get(&j->items[0], "gen_bw_share")->kind, TU_NULL, "a prompt row has no share");
    tu_json_free(j);
    free(out);
}

Test(bench, markdown_and_csv) {
    int st;
    char *out;
    if (!tu_have_shared()) cr_skip_test("../shared is absent: no model to benchmark");
    out = bench("-p 8 -n 4 -r 2", &st);
    cr_assert_eq(st, 0);
    cr_assert(strstr(out, "| pp8 |") && strstr(out, "| tg4 |"), "table rows missing: %s", out);
    free(out);
    out = bench("-p 8 -n 0 -r 2 -o csv", &st);
    cr_assert_eq(st, 0);
    cr_assert(strstr(out, "n_prompt,n_gen,n_depth,n_parallel,avg_ts") != NULL, "csv header missing: %s", out);
    cr_assert(strstr(out, ",8,0,") != NULL, "csv row for pp8 missing: %s", out);
    {
        /* -n 0: the header and the prompt's row, no generation row */
        int lines = 0;
        const char *p;
        for (p = out; *p; p++) lines += *p == '\n';
        cr_assert_eq(lines, 2, "-n 0 asked for no generation row: %s", out);
    }
    free(out);
}

/* --parallel N: N sequences generate together; the row says so */
Test(bench, parallel_sequences) {
    int st;
    char *out;
    tu_json *j;
    if (!tu_have_shared()) cr_skip_test("../shared is absent: no model to benchmark");
    out = bench("-p 0 -n 8 -r 2 --parallel 3", &st);
    cr_assert_eq(st, 0, "%s", out);
    cr_assert(strstr(out, "| tg8 x3 |"), "row missing: %s", out);
    free(out);
    out = bench("-p 0 -n 8 -r 2 --parallel 3 -o json", &st);
    cr_assert_eq(st, 0, "%s", out);
    j = tu_json_parse(out);
    cr_assert(j && j->kind == TU_ARR && j->n == 1, "%s", out);
    cr_assert_eq((int)tu_json_get(&j->items[0], "n_parallel")->num, 3);
    cr_assert_gt(tu_json_get(&j->items[0], "avg_ts")->num, 0);
    tu_json_free(j);
    free(out);
    out = bench("--parallel 0", &st);
    cr_assert_neq(st, 0, "--parallel 0 must be refused");
    free(out);
}

/* -d N: both tests with N tokens already in the context; the rows say so */
Test(bench, depth) {
    int st, i;
    char *out;
    tu_json *j;
    if (!tu_have_shared()) cr_skip_test("../shared is absent: no model to benchmark");
    out = bench("-p 8 -n 4 -r 2 -d 40", &st);
    cr_assert_eq(st, 0, "%s", out);
    cr_assert(strstr(out, "| pp8 @ d40 |") && strstr(out, "| tg4 @ d40 |"), "rows missing: %s", out);
    free(out);
    out = bench("-p 8 -n 4 -r 2 -d 40 --parallel 2 -o json", &st);
    cr_assert_eq(st, 0, "%s", out);
    j = tu_json_parse(out);
    cr_assert(j && j->kind == TU_ARR && j->n == 2, "%s", out);
    for (i = 0; i < 2; i++) {
        cr_assert_eq((int)tu_json_get(&j->items[i], "n_depth")->num, 40);
        cr_assert_gt(tu_json_get(&j->items[i], "avg_ts")->num, 0);
    }
    tu_json_free(j);
    free(out);
    out = bench("-d -1", &st);
    cr_assert_neq(st, 0, "-d -1 must be refused");
    free(out);
}

/* --draft: the paragraph rewrite with a draft model drafting, beside
   --lookup's row or alone, on bench/make_model.py's test-target and
   test-draft (random weights: little is accepted, so only that the rows
   are there and their figures parse is asserted); a draft model of another
   vocabulary is refused in one line. */
Test(bench, draft_model_rows) {
    char dir[64], cmd[4096], other[1024], *out, *row;
    int st = tu_make_draft_pair(dir, sizeof dir) ? 0 : 1;
    double tps, sd, acc, up;
    if (st != 0) {
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        free(tu_run(cmd, &st));
        cr_skip_test("bench/make_model.py needs numpy and gguf");
    }
    snprintf(cmd, sizeof cmd, "'%s' bench -m '%s/target.gguf' --draft '%s/draft.gguf' --draft-n 3 --lookup 4 "
             "-p 0 -n 12 -r 2 -t 2 2>&1", INFER_CLI_PATH, dir, dir);
    out = tu_run(cmd, &st);
    cr_assert_eq(st, 0, "%s", out);
    cr_assert(strstr(out, "| speculation | t/s | acceptance | speed-up |"), "no speculation table: %s", out);
    cr_assert(strstr(out, "| edit tg12 | none |") && strstr(out, "| edit tg12 | lookup 4 |"), "rows missing: %s", out);
    row = strstr(out, "| edit tg12 | draft draft.gguf, 3 |");
    cr_assert(row, "no draft model row: %s", out);
    cr_assert_eq(sscanf(row, "| edit tg12 | draft draft.gguf, 3 | %lf ± %lf | %lf%% | %lfx |", &tps, &sd, &acc, &up), 4,
                 "the draft row's figures: %s", row);
    cr_expect(tps > 0 && sd >= 0 && acc >= 0 && acc <= 100 && up > 0, "%s", row);
    cr_assert(strstr(out, "draft model draft.gguf (3 draft tokens) on a paragraph rewrite:"), "%s", out);
    free(out);
    /* alone: no lookup row */
    snprintf(cmd, sizeof cmd, "'%s' bench -m '%s/target.gguf' --draft '%s/draft.gguf' -p 0 -n 8 -r 1 -t 2 2>&1",
             INFER_CLI_PATH, dir, dir);
    out = tu_run(cmd, &st);
    cr_assert_eq(st, 0, "%s", out);
    cr_assert(strstr(out, "| draft draft.gguf, 4 |") && !strstr(out, "| lookup"), "%s", out);
    free(out);
    /* a draft of another vocabulary: SmolLM2's (49,152 tokens), where
       scripts/test.sh fetched it */
    snprintf(other, sizeof other, "%s/models/SmolLM2-135M-Instruct.Q4_1.gguf", INFER_SOURCE_DIR);
    if (access(other, R_OK) == 0) {
        snprintf(cmd, sizeof cmd, "'%s' bench -m '%s/target.gguf' --draft '%s' -p 0 -n 4 -r 1 2>&1", INFER_CLI_PATH,
                 dir, other);
        out = tu_run(cmd, &st);
        cr_expect_neq(st, 0, "a draft model of another vocabulary must be refused");
        cr_expect(strstr(out, "vocabulary") && strchr(out, '\n') == out + strlen(out) - 1, "not one line: %s", out);
        free(out);
    }
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    free(tu_run(cmd, &st));
}

Test(bench, bad_flags_fail_cleanly) {
    int st;
    char *out;
    if (!tu_have_shared()) cr_skip_test("../shared is absent: no model to benchmark");
    out = bench("-r 0", &st);
    cr_assert_neq(st, 0, "-r 0 must be refused");
    free(out);
    out = bench("-o xml", &st);
    cr_assert_neq(st, 0, "-o xml must be refused");
    free(out);
    out = bench("--bogus 1", &st);
    cr_assert_neq(st, 0);
    free(out);
}

/* bench_grammar.c - what a grammar costs in generation speed: the same
   chat prompt generated without a grammar, with a JSON schema's grammar,
   and with it and the top 5 probabilities asked for after every token
   (which makes the grammar's mask every time: its worst case), runs
   interleaved; tokens/s (sampling and decoding together) and the
   sampler's own time per token, as mean +- standard deviation over the
   runs.

       build/bench_grammar MODEL [runs=5] [tokens=128] [threads=2] [temp=1.0]
*/
#define _XOPEN_SOURCE 700 /* clock_gettime */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "infer.h"
#include "../examples/os.h"

static double now_ms(void) { return os_now_ms(); }

/* a long string, so a reply runs on for the tokens asked */
static const char *const SCHEMA =
    "{\"type\":\"object\",\"properties\":{\"title\":{\"type\":\"string\",\"maxLength\":80},"
    "\"mood\":{\"enum\":[\"happy\",\"sad\",\"scary\"]},\"story\":{\"type\":\"string\"},"
    "\"characters\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},"
    "\"age\":{\"type\":\"integer\"}},\"required\":[\"name\"]}}},\"required\":[\"title\",\"mood\",\"story\"]}";

static void stats(const double *x, int n, double *mean, double *sd) {
    int i;
    double s = 0, v = 0;
    for (i = 0; i < n; i++) s += x[i];
    *mean = s / n;
    for (i = 0; i < n; i++) v += (x[i] - *mean) * (x[i] - *mean);
    *sd = n > 1 ? sqrt(v / (n - 1)) : 0;
}

int main(int argc, char **argv) {
    int runs = argc > 2 ? atoi(argv[2]) : 5, n_tok = argc > 3 ? atoi(argv[3]) : 128;
    int threads = argc > 4 ? atoi(argv[4]) : 2;
    float temp = argc > 5 ? (float)atof(argv[5]) : 1.0f;
    infer_error err;
    infer_model *m;
    infer_context *c;
    infer_context_params cp = infer_context_default_params();
    infer_chat_template tmpl;
    infer_chat_message msgs[2];
    char prompt[2048], *gbnf;
    infer_token toks[1024];
    float *logits0;
    double tps[3][64], samp_us[3][64], ntoks[3][64], build_ms[64];
    int n_prompt, n_past, nv, r, mode, glen;
    size_t gsize = 0;
    if (argc < 2 || runs < 1 || runs > 64 || n_tok < 1) {
        fprintf(stderr, "usage: %s MODEL [runs=5 (max 64)] [tokens=128] [threads=2] [temp=1.0]\n", argv[0]);
        return 1;
    }
    m = infer_model_load(argv[1], NULL, &err);
    if (!m) return fprintf(stderr, "%s\n", err.msg), 1;
    cp.n_threads = threads;
    cp.n_ctx = 2048;
    c = infer_context_new(m, &cp, &err);
    if (!c) return fprintf(stderr, "%s\n", err.msg), 1;
    nv = infer_model_n_vocab(m);
    glen = infer_json_schema_to_grammar(SCHEMA, NULL, 0, &gsize, &err) == INFER_OK ? (int)gsize : -1;
    if (glen < 0) return fprintf(stderr, "%s\n", err.msg), 1;
    gbnf = (char *)malloc((size_t)glen + 1);
    infer_json_schema_to_grammar(SCHEMA, gbnf, (size_t)glen + 1, NULL, &err);
    tmpl = infer_chat_template_detect(m);
    msgs[0].role = "system";
    msgs[0].content = "You answer in JSON with a title, a mood, a long story and its characters.";
    msgs[1].role = "user";
    msgs[1].content = "Write a long story about a dragon who learns to bake bread.";
    infer_chat_format(&tmpl, msgs, 2, 0, 1, prompt, sizeof prompt, NULL, NULL);
    if (infer_tokenize(m, prompt, strlen(prompt), toks, 1024, infer_model_add_bos(m), 1, &n_prompt, NULL) != INFER_OK) n_prompt = -1;
    if (n_prompt <= 0 || n_prompt > 1024) return fprintf(stderr, "prompt too long\n"), 1;
    if (infer_decode(c, toks, n_prompt, 0, &err)) return fprintf(stderr, "%s\n", err.msg), 1;
    logits0 = (float *)malloc((size_t)nv * sizeof *logits0);
    memcpy(logits0, infer_context_logits(c, -1), (size_t)nv * sizeof *logits0);
    n_past = infer_seq_n_past(c, 0);
    for (r = 0; r < runs; r++)
        for (mode = 0; mode < 3; mode++) {
            infer_sampler_params sp = infer_sampler_default_params();
            infer_sampler *s;
            const float *logits = logits0;
            double t0, t1, ts = 0;
            int i;
            sp.temperature = temp;
            sp.seed = 100 + (uint64_t)r;
            s = infer_sampler_new(&sp, nv, NULL);
            if (mode) {
                t0 = now_ms();
                if (infer_sampler_set_grammar(s, m, gbnf, NULL, &err)) return fprintf(stderr, "%s\n", err.msg), 1;
                if (mode == 1) build_ms[r] = now_ms() - t0;
            }
            infer_seq_truncate(c, 0, n_past, NULL, NULL);
            t0 = now_ms();
            for (i = 0; i < n_tok; i++) {
                double a = now_ms();
                infer_token t = infer_sampler_sample(s, logits);
                if (mode == 2) {
                    infer_token_prob top[5];
                    infer_sampler_top_probs(s, top, 5, NULL, NULL);
                }
                if (t >= 0) infer_sampler_accept(s, t);
                ts += now_ms() - a;
                if (t < 0 || infer_model_is_eog(m, t)) break;
                if (infer_decode(c, &t, 1, 0, &err)) return fprintf(stderr, "%s\n", err.msg), 1;
                logits = infer_context_logits(c, -1);
            }
            t1 = now_ms();
            tps[mode][r] = i * 1000.0 / (t1 - t0);
            samp_us[mode][r] = i ? ts * 1000.0 / i : 0;
            ntoks[mode][r] = i;
            infer_sampler_free(s);
        }
    for (mode = 0; mode < 3; mode++) {
        static const char *const names[3] = {"no grammar", "json schema", "schema+probs"};
        double a, b, x, y, u, v;
        stats(tps[mode], runs, &a, &b);
        stats(samp_us[mode], runs, &x, &y);
        stats(ntoks[mode], runs, &u, &v);
        printf("%-14s %7.2f +- %5.2f tokens/s   sampler %7.1f +- %6.1f us/token   %5.1f tokens/run\n",
               names[mode], a, b, x, y, u);
    }
    {
        double a, b, g, h;
        stats(build_ms, runs, &a, &b);
        printf("set_grammar (parse + token trie) %.1f +- %.1f ms\n", a, b);
        stats(tps[0], runs, &g, &h);
        stats(tps[1], runs, &a, &b);
        printf("grammar cost: %.1f%% of tokens/s\n", 100.0 * (g - a) / g);
    }
    free(logits0);
    free(gbnf);
    infer_context_free(c);
    infer_model_free(m);
    return 0;
}

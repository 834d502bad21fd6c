#!/bin/sh
# The NEON kernels for real: cross-compiles for aarch64 (Debian's
# aarch64-linux-gnu-gcc, static) and runs under qemu-user on three CPU
# models, which must report these extensions (a tiny getauxval check in
# the self-test prints them):
#   -cpu max         dotprod and i8mm: sdot dot products, smmla prompt tiles
#   -cpu cortex-a76  dotprod only: sdot, prompts through the vec_dot loop
#   -cpu cortex-a53  neither: the plain NEON dot products, the vec_dot loop
#  1. tests/simd_selftest.c on all three: every NEON kernel (dot products,
#     and the smmla tiles where i8mm is there) against the scalar reference;
#  2. the forward pass with INFER_ISA=neon under -cpu max on every model in
#     ../shared/models and ../shared/arch, on each of its references, and on
#     Gemma 3 270M
#     where models/gemma-3-270m-q4_k_m.gguf has been fetched (python3
#     scripts/fetch_model.py gemma3; skipped, saying so, where it is absent).
#     The driver below checks as test_reference.c does, by
#     ../shared/README.md's rules: prompt tokens identical; the prompt's
#     logits in one batch and the greedy steps' one token at a time, each of
#     the reference's top-8 ids within the format's share of the position's
#     logit range; free-running greedy tokens identical up to llama.cpp's
#     first near-tie; every clear teacher-forced step chosen as llama.cpp
#     did; in an experts model, positions where two experts' routing
#     probabilities nearly tie are left out. A reference that fails under
#     NEON runs again with INFER_ISA=scalar in the same process, to tell a
#     NEON-only failure from one of the forward pass.
# Emulated vector arithmetic is slow: a 1891-token long reference costs 1
# to 3 minutes on 2 cores, p1 and p2 seconds, Gemma 3 270M's half a minute
# each. So of the long references three run by default: synth-256-f16's
# (llama), synth-gemma2-f16's (global layers far into the context, sliding
# windows, soft-capping; the least margin) and synth-gemma3-f16's (sliding
# windows whose ring the prompt's batches wrap, per-layer RoPE, q/k norms):
# about 8 minutes in all on a 2-core machine (every long reference: about
# 19). NEON_CHECK_LONG=all runs every one, NEON_CHECK_LONG="NAME..."
# those models', NEON_CHECK_LONG=none none. NEON_CHECK_GEMMA=0 leaves
# Gemma 3 270M out (its two references: about 270 s).
#  3. the same under the fallback CPUs, cortex-a76 and cortex-a53, in a
#     short form: only the models of ../shared/models in integer formats
#     (the float kernels are the same on every tier), with their short
#     references, about 30 s a CPU (NEON_CHECK_FALLBACK_MODELS="NAME..."
#     names others). The full form, every model as on max, long references
#     as NEON_CHECK_LONG says: NEON_CHECK_FALLBACK_FULL=1 (about 6 more
#     minutes a CPU with NEON_CHECK_LONG=none);
#     NEON_CHECK_FALLBACK_CPUS="" leaves the fallbacks out.
# Each model's first reference prints the paths its NEON context takes
# (sdot or plain dot products; the formats whose prompts run on smmla
# tiles). A summary line per CPU model and model gives its worst error.
# Exits 77 (CTest's skip) only when the cross compiler or qemu is absent;
# scripts/deps.sh installs them. NEON_CHECK_ONLY=substring checks only the
# models whose name contains it (the kernels still run); NEON_THREADS sets
# the workers (2).
#   usage: neon_check.sh SOURCE_DIR [SHARED_DIR]
set -e
src=$(cd "${1:-.}" && pwd)
shared=${2:-$src/../shared}
cc=aarch64-linux-gnu-gcc
qemu=qemu-aarch64
for tool in $cc $qemu; do
    if ! command -v $tool >/dev/null 2>&1; then
        echo "SKIPPED: $tool is not installed (sh scripts/deps.sh installs it)"
        exit 77
    fi
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
flags="-std=c99 -O2 -Wall -Wextra -pedantic -Werror -static -I$src -I$src/tests"
start=$(date +%s)

$cc $flags "$src/tests/simd_selftest.c" -o "$tmp/simd_selftest" -lm -lpthread
# each CPU model with the extensions it must report (a qemu that gave
# cortex-a76 i8mm, or max none, would leave a path unchecked)
for spec in max:yes:yes cortex-a76:yes:no cortex-a53:no:no; do
    cpu=${spec%%:*} want=${spec#*:}
    echo "== kernels under qemu-aarch64 -cpu $cpu"
    $qemu -cpu $cpu "$tmp/simd_selftest" | tee "$tmp/selftest.out"
    got="$(sed -n 's/^dotprod: \([a-z]*\).*/\1/p' "$tmp/selftest.out"):$(sed -n 's/^i8mm: \([a-z]*\).*/\1/p' "$tmp/selftest.out")"
    if [ "$got" != "$want" ]; then
        echo "FAIL: -cpu $cpu reports dotprod:i8mm $got, expected $want"
        exit 1
    fi
done

if [ ! -d "$shared/models" ]; then
    # the kernels above passed, but the forward pass was not checked: a skip
    echo "SKIPPED: no $shared/models (../shared): the forward-pass check did not run"
    exit 77
fi

cat > "$tmp/neon_ref.c" <<'C'
/* neon_ref [-s] [-n NEAR_TIE] MODEL TOL REF.json...: checks MODEL against
   llama.cpp's references as test_reference.c does, with INFER_ISA=neon;
   with -s also with INFER_ISA=scalar, comparing the two (always on a
   failure). Prints the kernel paths taken, a line per reference and
   "worst W" for the model; exits 1 if any reference fails. */
#define _POSIX_C_SOURCE 200112L /* setenv */
#include "infer_private.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define ROUTING_NEAR_TIE 2e-3f /* as test_reference.c */

typedef struct result {
    double worst;   /* share of the range, top-8 ids vs llama.cpp */
    int bad_logits, greedy_same, greedy_bad, forced, forced_bad, routed_ties, n_greedy, n_rows, nv;
    float *rows;    /* every position's logits, kept for the scalar comparison */
    char why[512];
} result;

static double range_of(const float *l, int nv) {
    float lo = l[0], hi = l[0];
    int j;
    for (j = 1; j < nv; j++) lo = fminf(lo, l[j]), hi = fmaxf(hi, l[j]);
    return hi - lo;
}

static void check_logits(result *r, const float *l, int nv, const tu_json *top, float tol, int pos) {
    double rng = range_of(l, nv);
    int k;
    for (k = 0; k < top->n; k++) {
        int id = (int)top->items[k].items[0].num;
        double want = top->items[k].items[1].num, d = fabs(l[id] - want) / rng;
        if (d > r->worst) r->worst = d;
        if (d > tol && !r->bad_logits++)
            snprintf(r->why, sizeof r->why, "position %d token %d: %.5f vs llama.cpp %.5f (%.3f%% of range)", pos,
                     id, l[id], want, 100 * d);
    }
}

static int argmax(const float *l, int nv) {
    int j, b = 0;
    for (j = 1; j < nv; j++)
        if (l[j] > l[b]) b = j;
    return b;
}

/* which kernels a NEON context runs for this model: the dot products
   (sdot or plain) and, for prompts, the smmla tiles by format or the
   vec_dot loop (or that a context matching llama.cpp left the tiles) */
static void print_paths(infer_model *m, const infer_context *c) {
    char tiles[256] = "", loop[256] = "";
    int t;
    for (t = 0; t < INFER_TYPE_COUNT; t++) {
        int64_t i, used = 0;
        for (i = 0; i < m->gguf->n_tensors; i++) used |= m->gguf->tensors[i].type == (infer_type)t && m->gguf->tensors[i].ne[1] > 1;
        if (!used || infer__traits((infer_type)t)->block_size == 1) continue;
        if (c->kern.gemm[t]) snprintf(tiles + strlen(tiles), sizeof tiles - strlen(tiles), " %s", infer_type_name((infer_type)t));
        else snprintf(loop + strlen(loop), sizeof loop - strlen(loop), " %s", infer_type_name((infer_type)t));
    }
    printf("  paths: dot products %s; prompts: smmla tiles for:%s; vec_dot loop for:%s%s\n",
           infer__cpu_has(INFER__CPU_DOTPROD) ? "sdot" : "plain NEON", *tiles ? tiles : " -", *loop ? loop : " -",
           c->match_llama && infer__cpu_has(INFER__CPU_I8MM) ? " (matches llama.cpp: 32-value formats leave the tiles)" : "");
}

/* lfm2's, qwen35's, gemma3n's and gemma4moe's greedy steps: logged by test_reference, not
   checked (llama.cpp of their commit does not reproduce them: see
   tests/test_reference.c) */
static int greedy_logits_logged;

/* One reference with the instruction set isa; 0 if it could not run. */
static int run(infer_model *m, const tu_json *ref, const char *isa, float tol, float near_tie, int keep, result *r) {
    const tu_json *prompt = tu_json_get(ref, "prompt"), *ptoks = tu_json_get(ref, "prompt_tokens"),
                  *gtoks = tu_json_get(ref, "greedy_tokens"), *ptop = tu_json_get(ref, "prompt_top_logits"),
                  *gtop = tu_json_get(ref, "greedy_top_logits"), *special = tu_json_get(ref, "parse_special");
    infer_context_params cp = infer_context_default_params();
    infer_context *c;
    infer_error err;
    infer_token *toks, *ours;
    const char *th = getenv("NEON_THREADS");
    int np, ng, n, i, s, nv = infer_model_n_vocab(m), tied = 0;
    memset(r, 0, sizeof *r);
    if (!prompt || !ptoks || !gtoks || !ptop || !gtop) return snprintf(r->why, sizeof r->why, "fields missing"), 0;
    np = ptoks->n, ng = gtoks->n;
    r->nv = nv, r->n_greedy = ng;
    toks = (infer_token *)malloc(sizeof *toks * (size_t)(np + ng + 8));
    ours = (infer_token *)malloc(sizeof *ours * (size_t)(np + 64));
    if (infer_tokenize(m, prompt->str, strlen(prompt->str), ours, np + 64, infer_model_add_bos(m),
                       special && special->kind == TU_BOOL && special->num != 0, &n, NULL) != INFER_OK) n = -1;
    for (i = 0; i < np; i++) toks[i] = (infer_token)ptoks->items[i].num;
    if (n != np || memcmp(ours, toks, sizeof *toks * (size_t)np)) {
        snprintf(r->why, sizeof r->why, "prompt tokens differ (%d tokens, llama.cpp %d)", n, np);
        free(toks), free(ours);
        return 0;
    }
    for (s = 0; s + 1 < ng; s++) toks[np + s] = (infer_token)gtoks->items[s].num;
    if (strcmp(infer__isa_name(m->cpu->kern.isa), isa)) { /* the model's kernels, chosen at its load */
        snprintf(r->why, sizeof r->why, "the model runs %s, not %s", infer__isa_name(m->cpu->kern.isa), isa);
        free(toks), free(ours);
        return 0;
    }
    cp.n_threads = th && atoi(th) > 0 ? atoi(th) : 2;
    cp.n_ctx = np + ng + 8;
    c = infer_context_new(m, &cp, &err);
    if (!c) {
        snprintf(r->why, sizeof r->why, "%s", err.msg);
        free(toks), free(ours);
        return 0;
    }
    if (keep == 2) print_paths(m, c);
    if (m->n_expert) {
        c->route.margin = (float *)malloc(sizeof(float) * (size_t)cp.n_ctx);
        for (i = 0; i < cp.n_ctx; i++) c->route.margin[i] = INFINITY;
    }
    if (keep) r->rows = (float *)malloc(sizeof(float) * (size_t)nv * (size_t)(np + ng));
    if (infer_decode(c, toks, np, 1, &err) != INFER_OK) goto fail;
    for (i = 0; i < np; i++) {
        const float *l = infer_context_logits(c, i);
        if (keep) memcpy(r->rows + (size_t)r->n_rows++ * nv, l, sizeof(float) * (size_t)nv);
        if (c->route.margin && c->route.margin[i] < ROUTING_NEAR_TIE) r->routed_ties++;
        else check_logits(r, l, nv, &ptop->items[i], tol, i);
    }
    for (s = 0; s < ng; s++) {
        const float *l = infer_context_logits(c, -1);
        const tu_json *top = &gtop->items[s];
        int want = (int)gtoks->items[s].num, best = argmax(l, nv);
        double gap = top->n >= 2 ? top->items[0].items[1].num - top->items[1].items[1].num : 1e9;
        if (s > 0 && keep) memcpy(r->rows + (size_t)r->n_rows++ * nv, l, sizeof(float) * (size_t)nv);
        if (c->route.margin && c->route.margin[np - 1 + s] < ROUTING_NEAR_TIE) {
            r->routed_ties++;
            if (!tied) tied = s + 1;
        } else {
            if (!greedy_logits_logged || s == 0) check_logits(r, l, nv, top, tol, np - 1 + s);
            if (!tied && gap < near_tie) tied = s + 1;
            if (!tied && best != want && !r->greedy_bad++) {
                tied = s + 1;
                snprintf(r->why, sizeof r->why, "greedy step %d chose %d, llama.cpp %d", s, best, want);
            }
            if (gap > fmax(near_tie, 2.0 * tol * range_of(l, nv))) {
                r->forced++;
                if (best != want && !r->forced_bad++ && !r->greedy_bad)
                    snprintf(r->why, sizeof r->why, "teacher-forced step %d chose %d, llama.cpp %d (gap %.3f)", s,
                             best, want, gap);
            }
        }
        if (s + 1 < ng && infer_decode(c, &want, 1, 0, &err) != INFER_OK) goto fail;
    }
    r->greedy_same = tied ? tied - 1 : ng;
    free(c->route.margin);
    c->route.margin = NULL;
    infer_context_free(c);
    free(toks), free(ours);
    return 1;
fail:
    snprintf(r->why, sizeof r->why, "decode: %s", err.msg);
    free(c->route.margin);
    c->route.margin = NULL;
    infer_context_free(c);
    free(toks), free(ours);
    return 0;
}

static int ok(const result *r) { return !r->bad_logits && !r->greedy_bad && !r->forced_bad; }

int main(int argc, char **argv) {
    infer_error err;
    infer_model *m, *ms = NULL;
    const char *model_path;
    float tol, near_tie = 0.1f;
    double worst = 0;
    int a = 1, scalar = 0, fails = 0, first = 1;
    while (a < argc && argv[a][0] == '-') {
        if (!strcmp(argv[a], "-s")) scalar = 1, a++;
        else if (!strcmp(argv[a], "-n") && a + 1 < argc) near_tie = (float)atof(argv[a + 1]), a += 2;
        else return fprintf(stderr, "neon_ref: unknown option %s\n", argv[a]), 2;
    }
    if (argc - a < 3) return fprintf(stderr, "usage: neon_ref [-s] [-n NEAR_TIE] MODEL TOL REF...\n"), 2;
    /* INFER_ISA is read when a model loads: a second copy runs scalar */
    setenv("INFER_ISA", "neon", 1);
    model_path = argv[a];
    greedy_logits_logged = strstr(model_path, "synth-lfm2") || strstr(model_path, "synth-qwen35") ||
                           strstr(model_path, "synth-gemma3n") || strstr(model_path, "synth-gemma4moe");
    m = infer_model_load(model_path, NULL, &err);
    if (!m) { /* 3: a valid model of an architecture or format this build does not run yet */
        printf("%s\n", err.msg);
        return err.code == INFER_ERR_UNSUPPORTED ? 3 : 1;
    }
    tol = (float)atof(argv[a + 1]);
    for (a += 2; a < argc; a++) {
        const char *name = strrchr(argv[a], '/') ? strrchr(argv[a], '/') + 1 : argv[a];
        char *text = tu_read_file(argv[a], NULL);
        tu_json *ref = text ? tu_json_parse(text) : NULL;
        result rn, rs;
        int ran, good, vs = scalar && !strstr(name, ".long.");
        free(text);
        if (!ref) {
            printf("%-34s cannot read or parse  FAIL\n", name);
            fails++;
            continue;
        }
        ran = run(m, ref, "neon", tol, near_tie, first ? 2 : 1, &rn);
        first = 0;
        good = ran && ok(&rn);
        if (ran && rn.worst > worst) worst = rn.worst;
        printf("%-34s neon: worst %.3f%% of range (limit %.1f%%), greedy same %d/%d steps, %d clear steps forced, "
               "%d routing near-ties", name, 100 * rn.worst, 100 * tol, rn.greedy_same, rn.n_greedy, rn.forced,
               rn.routed_ties);
        if (!good) vs = 1; /* is it NEON's? */
        if (ran && vs && !ms) {
            setenv("INFER_ISA", "scalar", 1);
            ms = infer_model_load(model_path, NULL, &err);
            if (!ms) printf("(scalar copy: %s) ", err.msg);
        }
        if (ran && vs && ms && run(ms, ref, "scalar", tol, near_tie, 1, &rs)) {
            double d = 0, rel = 0;
            size_t i, j;
            for (i = 0; i < (size_t)rn.n_rows && i < (size_t)rs.n_rows; i++) {
                double rng = range_of(rs.rows + i * rn.nv, rn.nv);
                for (j = 0; j < (size_t)rn.nv; j++) {
                    double e = fabs(rn.rows[i * rn.nv + j] - rs.rows[i * rn.nv + j]);
                    if (e > d) d = e;
                    if (e / rng > rel) rel = e / rng;
                }
            }
            printf("; vs scalar: max |diff| %.2e (%.3f%% of range)", d, 100 * rel);
            if (!good) printf("; scalar: worst %.3f%%, %s", 100 * rs.worst, ok(&rs) ? "passes (NEON only)" : "fails too");
            free(rs.rows);
        }
        printf("  %s\n", good ? "ok" : "FAIL");
        if (!good) printf("    %s\n", rn.why), fails++;
        fflush(stdout);
        free(rn.rows);
        tu_json_free(ref);
    }
    printf("worst %.3f%%\n", 100 * worst);
    infer_model_free(m);
    if (ms) infer_model_free(ms);
    return fails ? 1 : 0;
}
C
# (testutil.c, the tests' JSON reader, is not written for -pedantic)
$cc -std=c99 -O2 -DINFER_SHARED_DIR="\"$shared\"" -DINFER_SOURCE_DIR="\"$src\"" -I"$src" -c "$src/tests/testutil.c" -o "$tmp/testutil.o"
$cc $flags "$tmp/neon_ref.c" "$tmp/testutil.o" -o "$tmp/neon_ref" -lm -lpthread

# the format's tolerance (../shared/README.md), from the file name
tolerance() {
    case $1 in
        stories260K | *-f32) echo 0.001 ;;
        *-f16 | *-bf16) echo 0.003 ;;
        *-q8_0) echo 0.01 ;;
        *-q2_k | *-q3_k) echo 0.05 ;;
        *) echo 0.03 ;;
    esac
}

fails=0
summary=""
long_models=${NEON_CHECK_LONG-synth-256-f16 synth-gemma2-f16 synth-gemma3-f16}
check() { # MODEL_PATH [driver options]: the model's references
    model=$1
    shift
    name=$(basename "$model" .gguf)
    if [ -n "$NEON_CHECK_ONLY" ]; then
        case $name in *"$NEON_CHECK_ONLY"*) ;; *) return 0 ;; esac
    fi
    set -- "$@" "$model" "$(tolerance "$name")"
    n=0
    note=""
    for ref in "$shared"/reference/"$name".*.json; do
        [ -f "$ref" ] || continue
        case $ref in
            *.long.json)
                case " $long_models " in
                    *" all "* | *" $name "*) ;;
                    *) note=" (long reference left out)"; continue ;;
                esac ;;
        esac
        set -- "$@" "$ref"
        n=$((n + 1))
    done
    if [ $n = 0 ]; then
        echo "$name: no reference, skipped"
        return 0
    fi
    t0=$(date +%s)
    rc=0
    $qemu -cpu $cpu "$tmp/neon_ref" "$@" > "$tmp/out" || rc=$?
    if [ $rc = 0 ]; then st=ok
    elif [ $rc = 3 ]; then
        # an architecture (or weight format) infer.h does not run yet, as
        # on x86, where test_reference's list of models leaves it out
        echo "neon_check: $name: SKIPPED: not supported by this build: $(cat "$tmp/out")"
        summary="$summary$(printf '\n  %-12s %-26s %7s  %s' "$cpu" "$name" "" "not supported")"
        return 0
    else st=FAIL; fails=$((fails + 1)); fi
    grep -v '^worst ' "$tmp/out" || true
    summary="$summary$(printf '\n  %-12s %-26s %7s  %s (%ds)%s' "$cpu" "$name" \
        "$(sed -n 's/^worst //p' "$tmp/out")" $st $(($(date +%s) - t0)) "$note")"
}

cpu=max
echo "== forward pass under qemu-aarch64 -cpu max (sdot, smmla prompt tiles), INFER_ISA=neon against llama.cpp"
for model in "$shared"/models/*.gguf "$shared"/arch/*.gguf; do
    check "$model"
done
gemma=$src/models/gemma-3-270m-q4_k_m.gguf
if [ "${NEON_CHECK_GEMMA-1}" = 0 ]; then
    echo "gemma-3-270m-q4_k_m: left out (NEON_CHECK_GEMMA=0)"
elif [ -f "$gemma" ]; then
    # llama.cpp's own CPU paths for it pick different greedy tokens up to
    # 0.2 apart (../shared/README.md): its near-ties are wider
    check "$gemma" -n 0.2
else
    echo "gemma-3-270m-q4_k_m: $gemma is absent, skipped (python3 scripts/fetch_model.py gemma3 fetches it)"
fi
# The fallbacks: prompts through the vec_dot loop, with sdot (cortex-a76)
# and without (cortex-a53). The short form: only the models of
# ../shared/models in integer formats (the float kernels are the same on
# every tier), their short references.
if [ -n "${NEON_CHECK_FALLBACK_MODELS+set}" ]; then
    fallback_models=$NEON_CHECK_FALLBACK_MODELS
else
    fallback_models=
    for model in "$shared"/models/*.gguf; do
        name=$(basename "$model" .gguf)
        case $name in stories260K | *-f32 | *-f16 | *-bf16) ;; *) fallback_models="$fallback_models $name" ;; esac
    done
fi
for cpu in ${NEON_CHECK_FALLBACK_CPUS-cortex-a76 cortex-a53}; do
    if [ "${NEON_CHECK_FALLBACK_FULL-0}" = 1 ]; then
        echo "== forward pass under qemu-aarch64 -cpu $cpu, every model"
        for model in "$shared"/models/*.gguf "$shared"/arch/*.gguf; do
            check "$model"
        done
    else
        echo "== forward pass under qemu-aarch64 -cpu $cpu, short form:$fallback_models"
        for name in $fallback_models; do
            if [ -f "$shared/models/$name.gguf" ]; then
                check "$shared/models/$name.gguf"
            else
                echo "$name: not in $shared/models, skipped"
            fi
        done
    fi
done

echo "== worst error per CPU model and model under NEON (share of the logit range):$summary"
echo "(neon_check.sh took $(($(date +%s) - start)) s)"
[ $fails = 0 ] || { echo "$fails model(s) failed"; exit 1; }
echo "neon forward pass: ok"

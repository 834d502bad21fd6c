#!/bin/sh
# bench/gpu_vs_peer.sh - infer.h's CUDA backend against llama.cpp's on the
# same GPU and the same files, one markdown table.
#
# On the lent GPU machine, inside the packed tree. Here, first:
#     sh ../shared/tools/gpu-pack.sh LLAMA_CPP_SOURCE_DIR
# then the device tool's run, with carry [".gpu"]:
#     sh bench/gpu_vs_peer.sh
#
# What it does (each step skips what an earlier call on the same machine
# already did, so a call cut off by the time limit is simply made again):
#   1. builds infer with CUDA into build/ and llama-bench with CUDA into
#      /tmp/peer (both through .gpu/run.sh; llama.cpp never in this tree);
#   2. writes the benchmark shapes with bench/make_model.py into models/
#      (random weights, real shapes: TinyLlama-1.1B in F16, Q8_0, Q4_0 and
#      Q4_K_M, SmolLM-135M in F16 and Q4_0);
#   3. runs, on each file, `infer bench --device cuda -p 512 -n 128 -o json`
#      and `llama-bench -ngl 99 -p 512 -n 128 -fa 0,1 -o json`, REPS
#      repetitions each;
#   4. prints the table: pp512 and tg128 tokens/s, mean ± stddev, infer.h
#      against llama.cpp's better flash-attention setting, their ratio, and
#      generation's GB/s (weight bytes × tokens/s) with its share of the
#      bandwidth a copy kernel reaches on this GPU (infer bench's
#      device_gbs).
#
# Options:
#   -r N             repetitions of each test (default 5)
#   --prepare        steps 1 and 2 only (a first call, when time is short)
#   --table DIR      step 4 only, from the JSON files an earlier run left in DIR
# Environment: RUNS (the shape:format list below), RESULTS (where the JSON, logs and table.md go: $OUT/gpu-vs-peer
# when the device tool's $OUT is set, so they come back; else
# /tmp/gpu-vs-peer), MODELS (default models/), ARCH (default 90, as run.sh),
# LLAMA_BENCH (a llama-bench built with CUDA already: no peer build).
set -e

# shape:format, in the table's order (the environment's RUNS replaces them;
# a K-quant after its shape's F16, which it is quantized from)
RUNS=${RUNS:-"tinyllama-1.1b:f16 tinyllama-1.1b:q8_0 tinyllama-1.1b:q4_0 tinyllama-1.1b:q4_k_m smollm-135m:f16 smollm-135m:q4_0"}

reps=5
mode=all
table_dir=
while [ $# -gt 0 ]; do
    case "$1" in
        -r) [ $# -ge 2 ] || { echo "gpu_vs_peer: -r needs a number" >&2; exit 2; }; reps=$2; shift ;;
        --prepare) mode=prepare ;;
        --table) [ $# -ge 2 ] || { echo "gpu_vs_peer: --table needs a directory" >&2; exit 2; }; mode=table; table_dir=$2; shift ;;
        -h | --help) sed -n '2,/^set -e/p' "$0" | sed '$d'; exit 0 ;;
        *) echo "gpu_vs_peer: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
case "$reps" in '' | *[!0-9]* | 0) echo "gpu_vs_peer: bad -r '$reps' (a positive number)" >&2; exit 2 ;; esac

say() { echo "[gpu_vs_peer $(date +%H:%M:%S)] $*" >&2; }
die() { echo "gpu_vs_peer: $*" >&2; exit 1; }

command -v python3 >/dev/null 2>&1 || die "python3 is missing (the table is made with it)"

# The table, from infer-SHAPE-FORMAT.json and llama-SHAPE-FORMAT.json in $1.
print_table() {
    python3 - "$1" $RUNS <<'PY'
import json, math, os, sys

out_dir, runs = sys.argv[1], sys.argv[2:]
SHAPES = {"tinyllama-1.1b": "TinyLlama-1.1B", "smollm-135m": "SmolLM-135M",
          "llama-3.2-1b": "Llama-3.2-1B", "qwen2.5-0.5b": "Qwen2.5-0.5B"}


def load(path):
    """The file's rows (a JSON list), or (None, why)."""
    if not os.path.exists(path):
        return None, "missing"
    if os.path.getsize(path) == 0:
        return None, "empty: the run failed (its .log beside it says why)"
    try:
        with open(path) as f:
            rows = json.load(f)
    except (OSError, ValueError) as e:
        return None, "unreadable (%s)" % str(e).splitlines()[0][:80]
    if isinstance(rows, dict):
        rows = [rows]
    if not isinstance(rows, list) or not rows or not all(isinstance(r, dict) for r in rows):
        return None, "no benchmark rows"
    return rows, None


def test_of(row):
    p, n = int(row.get("n_prompt", 0)), int(row.get("n_gen", 0))
    if int(row.get("n_depth", 0) or 0):
        return None
    return "pp%d" % p if p and not n else "tg%d" % n if n and not p else None


def fa_of(row):
    # llama-bench wrote flash_attn as a bool until 2025, then as -1/0/1 (auto/off/on)
    v = row.get("flash_attn", 0)
    return {True: 1, False: 0}.get(v, v) if isinstance(v, bool) else int(v)


def cell(row):
    return "%.1f ± %.1f" % (row["avg_ts"], row["stddev_ts"]) if row else "n/a"


def ratio(a, b):
    return "%.2fx" % (a["avg_ts"] / b["avg_ts"]) if a and b and b["avg_ts"] > 0 else "n/a"


head = ["model", "format", "pp512 infer.h", "pp512 llama.cpp", "ratio", "tg128 infer.h", "tg128 llama.cpp",
        "ratio", "tg128 GB/s infer.h", "of copy bandwidth", "tg128 GB/s llama.cpp", "of copy bandwidth"]
lines = ["| " + " | ".join(head) + " |", "|---|---|" + "---:|" * (len(head) - 2)]
notes, gpus, peers, failed = [], set(), set(), 0
files = {run: (load(os.path.join(out_dir, "infer-%s-%s.json" % tuple(run.split(":")))),
               load(os.path.join(out_dir, "llama-%s-%s.json" % tuple(run.split(":")))))
         for run in runs}
# the copy kernel's GB/s (infer bench's device_gbs): the median over every file, for
# llama.cpp's share where infer.h's own row for that file is missing
copy_bw = sorted(float(r["device_gbs"]) for (rows, _), _l in files.values() for r in rows or []
                 if isinstance(r.get("device_gbs"), (int, float)) and r["device_gbs"] > 0)
median_bw = copy_bw[len(copy_bw) // 2] if copy_bw else 0.0
for run in runs:
    shape, fmt = run.split(":")
    (inf, why_i), (lla, why_l) = files[run]
    if why_i:
        notes.append("%s %s: infer bench output %s" % (shape, fmt, why_i))
        failed = 1
    if why_l:
        notes.append("%s %s: llama-bench output %s" % (shape, fmt, why_l))
        failed = 1
    ours, best = {}, {}
    for r in inf or []:
        t = test_of(r)
        if t:
            ours[t] = r
            gpus.add(r.get("device_name", "?"))
    for r in lla or []:
        t = test_of(r)
        if t and (t not in best or r["avg_ts"] > best[t]["avg_ts"]):
            best[t] = r
        if t:
            peers.add((r.get("build_commit", "?"), r.get("gpu_info", "?"), r.get("backends", "?")))
    pp_i, pp_l, tg_i, tg_l = ours.get("pp512"), best.get("pp512"), ours.get("tg128"), best.get("tg128")
    gbs_i = share_i = gbs_l = share_l = "-"
    if tg_i:
        g = float(tg_i.get("gen_gbs", 0) or tg_i["avg_ts"] * tg_i.get("model_size", 0) / 1e9)
        gbs_i = "%.1f" % g
        if tg_i.get("gen_bw_share") is not None:
            share_i = "%.0f%%" % (100 * float(tg_i["gen_bw_share"]))
    if tg_l:
        g = tg_l["avg_ts"] * float(tg_l.get("model_size", 0)) / 1e9
        gbs_l = "%.1f" % g
        bw = float(tg_i.get("device_gbs", 0) or 0) if tg_i else 0
        bw = bw or median_bw
        if bw > 0:
            share_l = "%.0f%%" % (100 * g / bw)

    def peer(r):
        return "%s (fa %d)" % (cell(r), fa_of(r)) if r else "n/a"

    lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
        SHAPES.get(shape, shape), fmt.upper(), cell(pp_i), peer(pp_l), ratio(pp_i, pp_l),
        cell(tg_i), peer(tg_l), ratio(tg_i, tg_l), gbs_i, share_i, gbs_l, share_l))
print("\n".join(lines))
print()
print("Tokens/s, mean ± stddev over the repetitions; llama.cpp's column is the better of -fa 0 and -fa 1 "
      "(which one in brackets); ratio = infer.h / llama.cpp.")
print("GB/s = the file's weight bytes × tokens/s (every weight, token embeddings included, counted read once "
      "per token); the share is of the bandwidth a copy kernel reaches on this GPU (infer bench's device_gbs).")
if gpus:
    print("GPU: %s; copy kernel %s%s." % (
        ", ".join(sorted(gpus)), "%.0f GB/s" % median_bw if copy_bw else "bandwidth unknown",
        " (median; %.0f to %.0f over the runs)" % (copy_bw[0], copy_bw[-1]) if len(set(copy_bw)) > 1 else ""))
for commit, gpu, backends in sorted(peers):
    print("llama.cpp: build %s, backends %s, %s." % (commit, backends, gpu))
for n in notes:
    print("- " + n)
sys.exit(failed)
PY
}

if [ "$mode" = table ]; then
    [ -d "$table_dir" ] || die "no such directory: $table_dir"
    print_table "$table_dir"
    exit $?
fi

# ---- what must be here ------------------------------------------------------
[ -f bench/make_model.py ] && [ -f infer.h ] || die "run this from the project's root (bench/make_model.py not found)"
[ -f .gpu/run.sh ] || die "no .gpu/run.sh: run 'sh ../shared/tools/gpu-pack.sh LLAMA_CPP_SOURCE_DIR' on the development machine first, then call the device tool with carry [\".gpu\"]"
[ -n "${LLAMA_BENCH:-}" ] || [ -f .gpu/peer.tgz ] || die "no .gpu/peer.tgz: gpu-pack.sh was run without a llama.cpp source dir (sh ../shared/tools/gpu-pack.sh LLAMA_CPP_SOURCE_DIR)"
ls .gpu/whl/*.whl >/dev/null 2>&1 || python3 -c 'import gguf' 2>/dev/null ||
    die "no gguf package: neither installed nor packed in .gpu/whl (gpu-pack.sh packs it)"
python3 -c 'import numpy' 2>/dev/null || die "python3 has no numpy (bench/make_model.py needs it)"
command -v cmake >/dev/null 2>&1 || die "cmake is missing"
command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ] || die "nvcc is missing: no CUDA toolkit on this machine"
if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi -L >/dev/null 2>&1 || die "nvidia-smi sees no GPU: run this on the lent GPU machine"
fi

results=${RESULTS:-${OUT:+$OUT/gpu-vs-peer}}
results=${results:-/tmp/gpu-vs-peer}
models=${MODELS:-models}
mkdir -p "$results" "$models"
export TARGETS=infer_cli # run.sh builds only the CLI

# ---- 1. infer with CUDA (run.sh: build/, once configured per machine) -------
say "building infer with CUDA (build/, log /tmp/gpu-build.log)"
sh .gpu/run.sh || die "the CUDA build of infer failed (above; /tmp/gpu-cmake.log, /tmp/gpu-build.log)"
[ -x build/infer ] || die "build/infer was not built"

# ---- llama-bench with CUDA, in the background while the models are made -----
llama_bench=${LLAMA_BENCH:-/tmp/peer/build/bin/llama-bench}
peer_pid=
if [ -x "$llama_bench" ]; then
    say "llama-bench already built: $llama_bench"
elif [ -n "${LLAMA_BENCH:-}" ]; then
    die "LLAMA_BENCH=$LLAMA_BENCH is not an executable"
else
    say "building llama-bench with CUDA into /tmp/peer (background; log $results/peer-build.log)"
    sh .gpu/run.sh peer >"$results/peer-build.log" 2>&1 &
    peer_pid=$!
fi

# ---- 2. the models --------------------------------------------------------------
for run in $RUNS; do
    shape=${run%%:*}
    fmt=${run#*:}
    f=$models/$shape-$fmt.gguf
    if [ -s "$f" ]; then
        say "have $f"
        continue
    fi
    say "making $f"
    # written under a temporary name, so that a cut-off call leaves no half file
    # (a K-quant is made from $models/$shape-f16.gguf, made first in RUNS)
    tmp=$models/$shape-$fmt.partial.gguf
    rm -f "$tmp"
    sh .gpu/run.sh python3 bench/make_model.py "$shape" "$fmt" -o "$tmp" --infer "$(pwd)/build/infer" >/dev/null ||
        die "bench/make_model.py $shape $fmt failed"
    mv "$tmp" "$f"
done

if [ -n "$peer_pid" ]; then
    say "waiting for the llama-bench build"
    wait "$peer_pid" || { tail -20 "$results/peer-build.log" >&2; die "building llama-bench failed (log above, /tmp/peer-build.log)"; }
fi
[ -x "$llama_bench" ] || die "no $llama_bench after the peer build (see $results/peer-build.log)"
if [ "$mode" = prepare ]; then
    say "prepared: build/infer, $llama_bench and the models in $models/"
    exit 0
fi

# ---- 3. the benchmarks -----------------------------------------------------
status=0
for run in $RUNS; do
    shape=${run%%:*}
    fmt=${run#*:}
    f=$models/$shape-$fmt.gguf
    say "infer bench --device cuda on $f"
    if ! build/infer bench -m "$f" --device cuda -p 512 -n 128 -r "$reps" -o json \
        >"$results/infer-$shape-$fmt.json" 2>"$results/infer-$shape-$fmt.log"; then
        cat "$results/infer-$shape-$fmt.log" >&2
        say "infer bench failed on $f (continuing)"
        status=1
    fi
    say "llama-bench on $f"
    if ! "$llama_bench" -m "$f" -ngl 99 -p 512 -n 128 -fa 0,1 -r "$reps" -o json \
        >"$results/llama-$shape-$fmt.json" 2>"$results/llama-$shape-$fmt.log"; then
        tail -5 "$results/llama-$shape-$fmt.log" >&2
        say "llama-bench failed on $f (continuing)"
        status=1
    fi
done

# ---- 4. the table -----------------------------------------------------------
say "results in $results"
print_table "$results" >"$results/table.md" || status=1
cat "$results/table.md"
exit $status

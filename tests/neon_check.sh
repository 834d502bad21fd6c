#!/bin/sh
# The NEON kernels for real: cross-compiles tests/simd_selftest.c and the
# infer tool for aarch64 (Debian's aarch64-linux-gnu-gcc, static) and runs
# them under qemu-user:
#  1. every NEON kernel against the scalar reference, on a CPU with the
#     dotprod extension (-cpu max) and on one without (-cpu cortex-a53);
#  2. the forward pass of the TinyStories-656K models (every format) and
#     the synth-256 K-quant and IQ4 models with
#     INFER_ISA=neon: teacher-forced logits against llama.cpp's reference
#     (the README's rule) and against INFER_ISA=scalar on the same binary.
# Exits 77 (CTest's skip) only when the cross compiler or qemu is absent;
# scripts/deps.sh installs them.
#   usage: neon_check.sh SOURCE_DIR [SHARED_DIR]
set -e
src=$(cd "${1:-.}" && pwd)
shared=${2:-$src/../shared}
cc=aarch64-linux-gnu-gcc
qemu=qemu-aarch64
for tool in $cc $qemu; do
    if ! command -v $tool >/dev/null 2>&1; then
        echo "SKIP: $tool is not installed (sh scripts/deps.sh installs it)"
        exit 77
    fi
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
flags="-std=c99 -O2 -Wall -Wextra -pedantic -Werror -static -I$src"

$cc $flags "$src/tests/simd_selftest.c" -o "$tmp/simd_selftest" -lm -lpthread
for cpu in max cortex-a53; do
    echo "== kernels under qemu-aarch64 -cpu $cpu"
    $qemu -cpu $cpu "$tmp/simd_selftest"
done

if [ ! -d "$shared/models" ]; then
    echo "no $shared/models: forward-pass check skipped"
    exit 0
fi
command -v python3 >/dev/null 2>&1 || { echo "no python3: forward-pass check skipped"; exit 0; }
# the CLI as CMake makes it: infer.c, its infer_*.c subcommands and the implementation
$cc $flags "$src/examples/infer.c" "$src"/examples/infer_*.c -o "$tmp/infer" -lm -lpthread
fails=0
for name in tinystories-656k-f32 tinystories-656k-f16 tinystories-656k-bf16 tinystories-656k-q8_0 \
    tinystories-656k-q4_0 tinystories-656k-q4_1 tinystories-656k-q5_0 tinystories-656k-q5_1 \
    synth-256-q4_k synth-256-q5_k synth-256-q6_k synth-256-q4_k_m synth-256-iq4_nl synth-256-q3_k synth-256-q2_k; do
    fmt=${name#*-*-}
    model="$shared/models/$name.gguf"
    ref="$shared/reference/$name.p1.json"
    [ -f "$model" ] && [ -f "$ref" ] || { echo "$name: no model or reference, skipped"; continue; }
    toks=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(" ".join(map(str, r["prompt_tokens"] + r["greedy_tokens"][:-1])))' "$ref")
    for isa in neon scalar; do
        INFER_ISA=$isa $qemu -cpu max "$tmp/infer" eval -m "$model" --tokens "$toks" --json > "$tmp/$name.$isa.json"
    done
    python3 - "$ref" "$tmp/$name.neon.json" "$tmp/$name.scalar.json" "$name" <<'PY' || fails=$((fails + 1))
import json, sys
ref, neon, scalar = (json.load(open(p)) for p in sys.argv[1:4])
name = sys.argv[4]
fmt = name.split("-")[-1] if not name.endswith("q4_k_m") else "q4_k_m"
tol = 0.01 if fmt in ("f32", "f16", "bf16", "q8_0") else 0.05 if fmt in ("q2_k", "q3_k") else 0.03
ln, ls = neon["logits"], scalar["logits"]
np_ = len(ref["prompt_tokens"])
worst = 0.0
rows = [(i, ref["prompt_top_logits"][i]) for i in range(np_)]
rows += [(np_ - 1 + s, top) for s, top in enumerate(ref["greedy_top_logits"]) if np_ - 1 + s < len(ln)]
for pos, top in rows:
    l = ln[pos]
    rng = max(l) - min(l)
    for tid, want in top:
        worst = max(worst, abs(l[tid] - want) / rng)
diff = max(abs(a - b) for ra, rb in zip(ln, ls) for a, b in zip(ra, rb))
ok = worst <= tol
print("%-22s neon vs llama.cpp: worst %.3f%% of range (limit %.0f%%); neon vs scalar: max |diff| %.2e over %d positions  %s"
      % (name, 100 * worst, 100 * tol, diff, len(ln), "ok" if ok else "FAIL"))
sys.exit(0 if ok else 1)
PY
done
[ $fails = 0 ] || { echo "$fails model(s) failed"; exit 1; }
echo "neon forward pass: ok"

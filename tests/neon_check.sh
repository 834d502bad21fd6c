#!/bin/sh
# The NEON kernels for real: cross-compiles tests/simd_selftest.c and the
# infer tool for aarch64 (Debian's aarch64-linux-gnu-gcc, static) and runs
# them under qemu-user:
#  1. every NEON kernel against the scalar reference, on a CPU with the
#     dotprod extension (-cpu max) and on one without (-cpu cortex-a53);
#  2. the forward pass of every model in ../shared/models on every one of
#     its references with INFER_ISA=neon: teacher-forced logits against
#     llama.cpp's (the README's rule), greedy choices up to the first
#     near-tie, and the logits against INFER_ISA=scalar on the same binary.
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
for model in "$shared"/models/*.gguf; do
  name=$(basename "$model" .gguf)
  for ref in "$shared"/reference/"$name".*.json; do
    [ -f "$ref" ] || { echo "$name: no reference, skipped"; continue; }
    toks=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(" ".join(map(str, r["prompt_tokens"] + r["greedy_tokens"][:-1])))' "$ref")
    for isa in neon scalar; do
        INFER_ISA=$isa $qemu -cpu max "$tmp/infer" eval -m "$model" --tokens "$toks" --json > "$tmp/$name.$isa.json"
    done
    python3 - "$ref" "$tmp/$name.neon.json" "$tmp/$name.scalar.json" "$name" <<'PY' || fails=$((fails + 1))
import json, os, sys
ref, neon, scalar = (json.load(open(p)) for p in sys.argv[1:4])
name = sys.argv[4]
fmt = "q4_k_m" if name.endswith("q4_k_m") else name.split("-")[-1].lower()
tol = 0.05 if fmt in ("q2_k", "q3_k") else 0.03 if fmt.startswith(("q4", "q5", "q6", "iq4")) else 0.01
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
# greedy: our choice equals llama.cpp's until its first near-tie
greedy_ok, steps = True, 0
for s, (tok, top) in enumerate(zip(ref["greedy_tokens"], ref["greedy_top_logits"])):
    if len(top) > 1 and top[0][1] - top[1][1] < 0.1:
        break
    l = ln[np_ - 1 + s]
    if max(range(len(l)), key=l.__getitem__) != tok:
        greedy_ok = False
        break
    steps += 1
diff = max(abs(a - b) for ra, rb in zip(ln, ls) for a, b in zip(ra, rb))
ok = worst <= tol and greedy_ok
print("%-34s neon vs llama.cpp: worst %.3f%% of range (limit %.0f%%), greedy same for %d steps%s; neon vs scalar: max |diff| %.2e  %s"
      % (os.path.basename(sys.argv[1]), 100 * worst, 100 * tol, steps, "" if greedy_ok else " THEN DIFFERS", diff,
         "ok" if ok else "FAIL"))
sys.exit(0 if ok else 1)
PY
  done
done
[ $fails = 0 ] || { echo "$fails model(s) failed"; exit 1; }
echo "neon forward pass: ok"

#!/bin/sh
# The CLI's run, chat and quantize under valgrind's memcheck on a tiny
# model: no invalid access, no use of uninitialised memory, no leak.
#     sh tests/valgrind_check.sh INFER MODEL
# Exit 77 (skipped) without valgrind or the model.
infer=$1 model=$2
command -v valgrind >/dev/null 2>&1 || { echo "valgrind_check: SKIPPED: valgrind is not installed"; exit 77; }
[ -f "$model" ] || { echo "valgrind_check: SKIPPED: $model is absent (../shared)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
printf 'Hello there\nTell me a story\n' >"$tmp/turns" # chat's two turns
# vg WHAT STDIN COMMAND...: memcheck; every error and every definite or
# indirect leak is exit status 99
vg() {
    what=$1 input=$2
    shift 2
    if valgrind --quiet --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect \
        --show-leak-kinds=definite,indirect "$@" >"$tmp/out" 2>"$tmp/err" <"$input"; then
        echo "valgrind_check: ok: $what"
    else
        echo "valgrind_check: FAILED: $what (exit $?):"
        cat "$tmp/err"
        fails=$((fails + 1))
    fi
}
vg "infer run" /dev/null "$infer" run -m "$model" -p "Once upon a time" -n 24 -t 2
vg "infer run --json (greedy)" /dev/null "$infer" run -m "$model" -p "Once upon a time" -n 8 --temp 0 --json -t 2
vg "infer quantize Q8_0" /dev/null "$infer" quantize "$model" "$tmp/q8.gguf" Q8_0 -t 2
vg "infer run on the quantized file" /dev/null "$infer" run -m "$tmp/q8.gguf" -p "One day" -n 8 -t 2
vg "infer chat (two turns)" "$tmp/turns" "$infer" chat -m "$model" -n 16 -t 2
[ $fails = 0 ]

#!/bin/sh
# Every file of src/ compiles by itself, as an editor, clangd or code
# navigation sees it: each .c and .h with only the headers it includes
# (infer.h pastes them all into one; this checks that no part leans on
# what happens to stand above it there). The list is whatever src/ holds.
# Fails on any error. Warnings are shown but not fatal: a part alone sees
# internal.h's declarations of static functions other parts define ("used
# but never defined"), which only the whole of infer.h resolves.
# Where an aarch64 cross compiler is installed, every file is checked with
# it too, so the NEON code is compiled rather than #ifdef'd away.
#     sh tests/standalone_check.sh [SOURCE_DIR] [CC]
src=${1:-.}
cc=${2:-${CC:-cc}}
flags="-std=c99 -fsyntax-only -Wall -Wno-unused-function -Werror=implicit-function-declaration -Werror=implicit-int"
compilers=$cc
command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 && compilers="$compilers aarch64-linux-gnu-gcc"
files=$(cd "$src" && ls src/*.c src/*.h) || exit 1
failed=
for c in $compilers; do
    for f in $files; do
        if out=$($c $flags -I"$src/src" "$src/$f" 2>&1); then
            echo "ok   $c $f"
            printf '%s\n' "$out" | grep -E '(error|warning):' | grep -v 'never defined\|not defined' | sed 's/^/     /'
        else
            echo "FAIL $c $f"
            printf '%s\n' "$out" | grep -E 'error:' | head -n 10 | sed 's/^/     /'
            failed="$failed $f"
        fi
    done
done
if [ -n "$failed" ]; then
    echo "do not compile by themselves:$(printf '%s\n' $failed | sort -u | tr '\n' ' ')"
    exit 1
fi
echo "all of src/ compiles file by file"

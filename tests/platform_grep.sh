#!/bin/sh
# The platform layer is the only part of src/ that knows the OS or the
# compiler: outside src/platform.h and src/platform.c no GCC builtin,
# attribute, __atomic call, GCC pragma (as #pragma, _Pragma or through
# INFER__PRAGMA: a warning silenced goes through a platform.h macro such as
# INFER__AVX512_INTRINSICS_BEGIN), OS or compiler test, or OS header.
# The one exception is src/infer_api.h, the public header, which must
# settle two things before anything (platform.h included) is seen: the
# API's linkage (INFERDEF: static's unused attribute, dllexport and
# dllimport, visibility), its deprecation mark (INFER_DEPRECATED: the
# deprecated attribute or declspec, for the old names kept one release)
# and POSIX's feature macro under -std=c99 (which must precede the first
# system header). Fails listing any other line.
#     sh tests/platform_grep.sh SOURCE_DIR
src=${1:-.}
pattern='\b__builtin_|__attribute__|\b__atomic_|#[[:space:]]*pragma[[:space:]]+GCC|\b_Pragma\b|\bINFER__PRAGMA\b|\b_WIN32\b|\b_MSC_VER\b|\b__GNUC__\b|\b__clang__\b|\b__APPLE__\b|\b__linux__\b|\b__MINGW32__\b|\bpthread_|<windows\.h>|<pthread\.h>|<unistd\.h>|<sys/|__declspec'
found=$(cd "$src" && grep -nE "$pattern" src/*.c src/*.h | grep -v '^src/platform\.[ch]:' |
    grep -v '^src/infer_api\.h:.*\(INFERDEF\|INFER_DEPRECATED\|defined(_MSC_VER)\|__declspec\|visibility\|_XOPEN_SOURCE\|defined(_WIN32)\|defined(__GNUC__)\|__CYGWIN__\)')
if [ -n "$found" ]; then
    echo "platform_grep: FAILED: OS or compiler specifics outside src/platform.h and src/platform.c:"
    printf '%s\n' "$found"
    exit 1
fi
echo "platform_grep: ok: OS and compiler specifics only in src/platform.[ch] (and infer_api.h's linkage, deprecation mark and feature macro)"

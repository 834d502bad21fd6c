#!/bin/sh
# amalgamate.py --line-directives: each #line N "src/FILE" marker is
# followed by line N of src/FILE (so errors and debuggers land in src/),
# and the header it writes still compiles as the implementation.
#     sh tests/line_directives_check.sh [SOURCE_DIR] [CC]
src=${1:-.}
cc=${2:-${CC:-cc}}
tmp=${TMPDIR:-/tmp}/line_directives.$$
mkdir -p "$tmp" || exit 1
trap 'rm -rf "$tmp"' EXIT
python3 "$src/amalgamate.py" --line-directives -o "$tmp/infer.h" || exit 1
# every marker, checked against the file it names
awk -v src="$src" '
    want { if ($0 != want_line) { printf "line_directives: %s:%d is not what follows its marker\n", file, n; bad = 1 }
           want = 0; checked++ }
    /^#line [0-9]+ "src\/[^"]+"$/ {
        n = $2; file = $3; gsub(/"/, "", file)
        want_line = ""; i = 0
        while ((getline l < (src "/" file)) > 0) if (++i == n) { want_line = l; break }
        close(src "/" file)
        if (i != n) { printf "line_directives: %s has no line %d\n", file, n; bad = 1 }
        want = 1; markers++ }
    END { if (markers < 50) { printf "line_directives: only %d markers\n", markers; bad = 1 }
          if (!bad) printf "%d markers, each followed by its src/ line\n", markers
          exit bad }' "$tmp/infer.h" || exit 1
printf '#define INFER_IMPLEMENTATION\n#include "infer.h"\n' > "$tmp/tu.c"
$cc -std=c99 -c -I"$tmp" "$tmp/tu.c" -o "$tmp/tu.o" || { echo "line_directives: the marked header does not compile"; exit 1; }
# the preprocessor, and so every diagnostic, places the code in src/
printf '#define INFER_IMPLEMENTATION\n#include "infer.h"\n' > "$tmp/where.c"
$cc -std=c99 -E -I"$tmp" "$tmp/where.c" | grep -q '^# [0-9]* "src/request.c"' ||
    { echo "line_directives: the preprocessor does not see src/request.c"; exit 1; }
echo "the marked header compiles and points at src/"

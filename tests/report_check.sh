#!/bin/sh
# bench/report.py on real results: a small `infer bench` of a tiny model at
# depths 0 and 16, and a second run at depth 0 that stands in both for a
# peer and for an earlier run, so every plot has data. The page must hold
# each plot's section with an SVG in it; a malformed input must give one
# line on stderr and exit status 1.
#     sh tests/report_check.sh PYTHON INFER SOURCE_DIR MODEL
set -e
python=$1 infer=$2 src=$3 model=$4
[ -f "$model" ] || { echo "report_check: SKIPPED: $model is absent (../shared)"; exit 77; }
"$python" -c "import matplotlib, numpy" 2>/dev/null ||
    { echo "report_check: FAILED: $python lacks matplotlib or numpy (sh scripts/deps.sh installs them)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# on the CPU, whatever the build's default device: the page's CPU ceiling is checked below
bench() { "$infer" bench -m "$model" -p 16 -n 8 -r 2 -t 2 -o json --device cpu "$@"; }
bench -d 0 >"$tmp/depth0.json"
bench -d 16 >"$tmp/depth16.json"
bench -d 0 >"$tmp/again.json"

"$python" "$src/bench/report.py" -o "$tmp/report.html" "$tmp/depth0.json" "$tmp/depth16.json" \
    --peer "$tmp/again.json" --peer-name "infer again" --history earlier="$tmp/again.json" >/dev/null
"$python" - "$tmp/report.html" <<'EOF'
import re, sys
page = open(sys.argv[1], encoding="utf-8").read()
for anchor in ("plot-tests", "plot-depth", "plot-ratio", "plot-bandwidth", "plot-history", "table"):
    found = re.search(r'<section id="%s">(.*?)</section>' % anchor, page, re.S)
    if not found:
        sys.exit(f"report_check: FAILED: the page has no section {anchor}")
    body = found.group(1)
    if anchor != "table" and ("<svg" not in body or 'class="no-data"' in body):
        sys.exit(f"report_check: FAILED: section {anchor} has no plot")
if "read bandwidth infer bench measured" not in page:
    sys.exit("report_check: FAILED: the page does not give infer bench's measured bandwidth as the ceiling")
EOF

# Malformed inputs: cut-off JSON, and JSON of the wrong shape.
printf '[{"model_filename": "m.gguf", "n_threads": ' >"$tmp/cut.json"
printf '{"rows": []}\n' >"$tmp/object.json"
for bad in cut.json object.json; do
    if "$python" "$src/bench/report.py" -o "$tmp/bad.html" "$tmp/$bad" 2>"$tmp/err" >/dev/null; then
        echo "report_check: FAILED: report.py accepted $bad"; exit 1
    else
        rc=$?
    fi
    [ "$rc" = 1 ] || { echo "report_check: FAILED: $bad: exit status $rc, not 1"; exit 1; }
    lines=$(wc -l <"$tmp/err")
    [ "$lines" = 1 ] && grep -q "^report.py: error: .*$bad" "$tmp/err" ||
        { echo "report_check: FAILED: $bad: expected one error line, got:"; cat "$tmp/err"; exit 1; }
done
echo "report_check: ok: every plot drawn from a real run; malformed input is one line and exit status 1"

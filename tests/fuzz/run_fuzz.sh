#!/bin/sh
# One bounded libFuzzer run of a harness, as CTest's fuzz_<harness>:
#   run_fuzz.sh FUZZER HARNESS SOURCE_DIR SHARED_DIR WORK_DIR SECONDS PYTHON
# on a fresh seed corpus (make_seeds.py) in WORK_DIR, with the harness's
# regression inputs of tests/fuzz/regressions/ read first. Exits non-zero
# on a crash, leak, time-out or memory limit (the input is left in WORK_DIR
# as crash-*, leak-*, ...); 77 where the harness needs ../shared and it is
# absent.
set -e
fuzzer=$1 harness=$2 src=$3 shared=$4 work=$5 seconds=$6 python=${7:-python3}
case $harness in
gguf | model_load | chat_template | jinja | toolcall) ;; # their seeds are the repository's
*)
    if [ ! -d "$shared" ]; then
        echo "fuzz_$harness: SKIPPED: $shared is absent (its vocabularies are there)"
        exit 77
    fi
    ;;
esac
rm -rf "$work"
mkdir -p "$work/corpus"
"$python" "$src/tests/fuzz/make_seeds.py" "$harness" "$work/seeds" "$src" "$shared"
# saved states are written by the harness itself, from its own model and contexts
[ "$harness" = state ] && INFER_FUZZ_STATE_SEEDS="$work/seeds" "$fuzzer"
# the longest input worth mutating: GGUF files' headers, short texts
case $harness in
gguf) max_len=65536 ;;
model_load | state) max_len=32768 ;;
chat_template | serve_request | jinja) max_len=8192 ;;
*) max_len=4096 ;;
esac
set -- "$work/corpus" "$work/seeds"
[ -d "$src/tests/fuzz/regressions/$harness" ] && set -- "$@" "$src/tests/fuzz/regressions/$harness"
case $harness in
gguf | model_load) set -- -dict="$src/tests/fuzz/gguf.dict" "$@" ;;
esac
# -timeout per input; RSS (and any one allocation) at most 2 GiB; a finding
# exits 1, not libFuzzer's default 77, which CTest takes for a skip
exec "$fuzzer" -error_exitcode=1 -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=$max_len -print_final_stats=1 \
    -artifact_prefix="$work/" "$@"

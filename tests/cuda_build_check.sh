#!/bin/sh
# cuda_build_check.sh - what the CUDA backend's object must look like, checked
# at build time (no GPU needed):
#   (a) nvcc compiles infer_cuda.cu warning-free for every architecture below
#       (--Werror all-warnings, host -Wall -Wextra, as CMakeLists.txt builds it);
#   (b) ptxas (-Xptxas -v) reports 0 bytes of spill stores and spill loads for
#       every kernel or device function whose mangled name contains one of
#       HOT_KERNELS (case-insensitive); spills elsewhere are listed, not failed;
#   (c) the prompt path uses tensor cores or cuBLAS: the SASS holds HMMA or IMMA
#       (or Hopper's HGMMA/IGMMA) instructions, or the object references
#       cublasGemmEx, cublasGemmStridedBatchedEx or cublasLt symbols. Without
#       cuobjdump the PTX is searched for the instructions that become them
#       (mma.sync, wmma.mma, wgmma.mma_async), and the output says so.
#
#   sh tests/cuda_build_check.sh SOURCE_DIR [NVCC] [ARCHS]
#
# ARCHS: more architectures, comma- or semicolon-separated as CMake's
# CMAKE_CUDA_ARCHITECTURES writes them (80 and 90 are always checked).
# CUDA_CHECK_SOURCE=FILE.cu checks another file (how this script's own checks
# were shown to fail and pass); CUOBJDUMP=PATH names the disassembler.
# Exit status: 0 all passed, 1 a check failed, 77 (ctest's skip) no nvcc.

# The kernels that must not spill: substrings of their mangled names.
HOT_KERNELS="k_matvec k_attention k_norm_rows k_qk_prepare k_quant_act k_act_q8 k_dequant_f16 k_residual k_act_mul"
# The cuBLAS entry points that run on tensor cores (nm -u of the object).
BLAS_SYMBOLS="cublasGemmEx cublasGemmStridedBatchedEx cublasLt"

src_dir=${1:?usage: cuda_build_check.sh SOURCE_DIR [NVCC] [ARCHS]}
nvcc=${2:-}
extra_archs=${3:-}
if [ -z "$nvcc" ]; then
    nvcc=$(command -v nvcc 2>/dev/null || true)
    [ -n "$nvcc" ] || { [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc; }
fi
if [ -z "$nvcc" ] || ! command -v "$nvcc" >/dev/null 2>&1; then
    echo "SKIP: nvcc not found (${nvcc:-none given}): nothing to check"
    exit 77
fi
file=${CUDA_CHECK_SOURCE:-$src_dir/infer_cuda.cu}
[ -f "$file" ] || { echo "FAIL: no such file: $file"; exit 1; }

cuobjdump=${CUOBJDUMP:-}
if [ -z "$cuobjdump" ]; then
    nvcc_dir=$(dirname "$(command -v "$nvcc")")
    if [ -x "$nvcc_dir/cuobjdump" ]; then cuobjdump=$nvcc_dir/cuobjdump
    else cuobjdump=$(command -v cuobjdump 2>/dev/null || true)
    fi
fi

# The architectures: sm_80, sm_90 and those CMake builds for ("90a", "86-real"
# and "90-virtual" count as 90a, 86 and 90; "native", "all" and "all-major"
# cannot be resolved here and are left out, saying so).
archs="80 90"
for a in $(echo "$extra_archs" | tr ',;' '  '); do
    a=${a%-real}
    a=${a%-virtual}
    case "$a" in
        [0-9]*) ;;
        *) echo "note: CMAKE_CUDA_ARCHITECTURES entry '$a' is not checked (only numbered ones)"; continue ;;
    esac
    case " $archs " in *" $a "*) ;; *) archs="$archs $a" ;; esac
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
hot_re=$(echo "$HOT_KERNELS" | tr -s ' ' '|')
tc_re='(HMMA|IMMA|HGMMA|IGMMA)'
blas_re=$(echo "$BLAS_SYMBOLS" | tr -s ' ' '|')
fail=0

echo "cuda_build_check: $file"
echo "nvcc: $nvcc ($("$nvcc" --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p' | head -1))"
echo "architectures: $(echo $archs | sed "s/\([0-9a-z][0-9a-z]*\)/sm_\1/g")"
echo "hot kernels (HOT_KERNELS): $HOT_KERNELS"
echo "disassembler: ${cuobjdump:-none (no cuobjdump: the PTX is searched instead of the SASS)}"

for arch in $archs; do
    num=${arch%a}
    obj=$tmp/sm_$arch.o
    log=$tmp/sm_$arch.log
    echo
    echo "== sm_$arch =="
    # As CMakeLists.txt compiles it (Release), plus -Xptxas -v.
    if "$nvcc" -std=c++17 -O3 -DNDEBUG -DINFER_CUDA -I"$src_dir" --Werror all-warnings -Xcompiler -Wall,-Wextra \
        -Xptxas -v -gencode "arch=compute_$arch,code=sm_$arch" -c "$file" -o "$obj" >"$log" 2>&1; then
        ok=1
    else
        ok=0
    fi

    # (a) no warning (a warning made an error shows as one too)
    warnings=$(grep -v '^ptxas info' "$log" | grep -i -E 'warning|error' || true)
    if [ $ok = 1 ] && [ -z "$warnings" ]; then
        echo "(a) PASS: nvcc printed no warning"
    else
        fail=1
        if [ $ok = 1 ]; then echo "(a) FAIL: nvcc printed warnings:"
        else echo "(a) FAIL: nvcc failed (warnings are errors here):"
        fi
        if [ -n "$warnings" ]; then echo "$warnings" | head -30 | sed 's/^/    /'
        else grep -v '^ptxas info' "$log" | head -30 | sed 's/^/    /'
        fi
        if [ $ok = 0 ]; then
            echo "(b) NOT RUN: no object for sm_$arch"
            echo "(c) NOT RUN: no object for sm_$arch"
            continue
        fi
    fi

    # (b) spills: ptxas says "Function properties for NAME" and, on a later
    # line, "N bytes stack frame, S bytes spill stores, L bytes spill loads".
    awk -v hot="$hot_re" '
        /Function properties for / { fn = $NF; next }
        /bytes spill stores/ && fn != "" {
            st = $0; sub(/ bytes spill stores.*/, "", st); sub(/.*, */, "", st)
            ld = $0; sub(/ bytes spill loads.*/, "", ld); sub(/.*, */, "", ld)
            print (tolower(fn) ~ tolower(hot) ? "hot" : "other"), fn, st + 0, ld + 0
            fn = ""
        }' "$log" >"$tmp/spills"
    n_hot=$(grep -c '^hot ' "$tmp/spills" || true)
    bad=$(awk '$1 == "hot" && ($3 > 0 || $4 > 0)' "$tmp/spills")
    if [ "$n_hot" = 0 ]; then
        fail=1
        echo "(b) FAIL: no kernel's name contains any of: $HOT_KERNELS (adjust HOT_KERNELS); functions found:"
        awk '{print "    " $2}' "$tmp/spills" | head -40
    elif [ -n "$bad" ]; then
        fail=1
        echo "(b) FAIL: hot kernels that spill ($n_hot hot function(s) checked):"
        echo "$bad" | awk '{printf "    %s: %d bytes spill stores, %d bytes spill loads\n", $2, $3, $4}'
    else
        echo "(b) PASS: $n_hot hot function(s), 0 bytes spill stores and loads in each:"
        awk '$1 == "hot" {print "    " $2}' "$tmp/spills"
    fi
    others=$(awk '$1 == "other" && ($3 > 0 || $4 > 0)' "$tmp/spills")
    [ -z "$others" ] || {
        echo "    (not hot, not failed) spills elsewhere:"
        echo "$others" | awk '{printf "    %s: %d bytes spill stores, %d bytes spill loads\n", $2, $3, $4}'
    }

    # (c) tensor cores (SASS, or PTX without cuobjdump) or cuBLAS
    if [ "$num" -lt 70 ] 2>/dev/null; then
        echo "(c) not required: sm_$arch has no tensor cores"
        continue
    fi
    sass_ok=0
    if [ -n "$cuobjdump" ]; then
        if "$cuobjdump" -sass "$obj" >"$tmp/sass" 2>"$tmp/sass.err"; then
            sass_ok=1
        else
            echo "    cuobjdump -sass failed, so the PTX is searched instead: $(grep -v '^$' "$tmp/sass.err" | head -1)"
        fi
    fi
    if [ $sass_ok = 1 ]; then
        what="SASS (cuobjdump -sass)"
        # "Function : NAME" heads each kernel's listing
        awk -v re="$tc_re" '
            /Function :/ { fn = $NF }
            {
                line = $0
                while (match(line, re)) {
                    op = substr(line, RSTART, RLENGTH); line = substr(line, RSTART + RLENGTH)
                    if (substr(line, 1, 1) ~ /[A-Z0-9_]/) continue
                    n[fn " " op]++
                }
            }
            END { for (k in n) print k, n[k] }' "$tmp/sass" | sort >"$tmp/tc"
    else
        what="PTX (mma.sync, wmma.mma, wgmma.mma_async: what becomes HMMA/IMMA/HGMMA)"
        "$nvcc" -std=c++17 -O3 -DNDEBUG -DINFER_CUDA -I"$src_dir" -arch="compute_$arch" -ptx "$file" \
            -o "$tmp/sm_$arch.ptx" >/dev/null 2>&1 || : >"$tmp/sm_$arch.ptx"
        awk '
            /^[ \t]*(\.(visible|weak|extern)[ \t]+)?\.(entry|func)[ \t]/ {
                fn = $0; gsub(/\(\.param[^)]*\)/, "", fn); sub(/\(.*/, "", fn); sub(/[ \t]+$/, "", fn); sub(/.*[ \t]/, "", fn)
            }
            /^[ \t]*(@!?%p[0-9]+[ \t]+)?(wgmma\.mma_async|wmma\.mma|mma\.sync)/ {
                ins = $0; sub(/^[ \t]*(@!?%p[0-9]+[ \t]+)?/, "", ins)
                if (ins ~ /^wgmma/) op = "wgmma"; else if (ins ~ /^wmma/) op = "wmma"; else op = "mma.sync"
                n[fn " " op]++
            }
            END { for (k in n) print k, n[k] }' "$tmp/sm_$arch.ptx" | sort >"$tmp/tc"
    fi
    nm -u "$obj" 2>/dev/null | awk '{print $NF}' | grep -E "$blas_re" | sort -u >"$tmp/blas" || true
    if [ -s "$tmp/tc" ] || [ -s "$tmp/blas" ]; then
        echo "(c) PASS: tensor cores or cuBLAS found"
    else
        fail=1
        echo "(c) FAIL: neither tensor cores nor cuBLAS: the prompt path runs on the CUDA cores"
    fi
    if [ -s "$tmp/tc" ]; then
        echo "    tensor-core instructions in the $what (function, instruction, count):"
        sed 's/^/    /' "$tmp/tc"
    else
        echo "    no tensor-core instruction in the $what"
    fi
    if [ -s "$tmp/blas" ]; then
        echo "    cuBLAS symbols referenced (nm -u): $(tr '\n' ' ' <"$tmp/blas")"
    else
        echo "    none of the cuBLAS symbols ($BLAS_SYMBOLS) referenced"
    fi
done

echo
if [ $fail = 0 ]; then
    echo "cuda_build_check: all checks passed"
    exit 0
fi
echo "cuda_build_check: FAILED (see above)"
exit 1

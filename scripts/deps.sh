#!/bin/sh
# Installs what building and testing infer.h needs, where it is missing:
# a C compiler, CMake, Python 3, stb_ds (libstb-dev), Criterion, pkg-config, for
# the NEON test an aarch64 cross compiler and qemu-user, and for the server
# libmicrohttpd, cJSON, curl, the openai package and nginx (in front of
# replicas); for the fuzzing harnesses clang with libFuzzer; for the
# WebAssembly build Emscripten, Node.js, Chromium, its chromedriver and
# selenium; for the C# binding Mono; for the Windows build MinGW-w64, Wine
# and its headers; for the Python binding pytest.
set -e
need=""
command -v cc >/dev/null 2>&1 || need="$need gcc"
command -v cmake >/dev/null 2>&1 || need="$need cmake"
command -v python3 >/dev/null 2>&1 || need="$need python3"
[ -f /usr/include/stb/stb_ds.h ] || need="$need libstb-dev"
[ -f /usr/include/criterion/criterion.h ] || need="$need libcriterion-dev"
[ -d /usr/share/unicode ] || need="$need unicode-data"
# the installed package's test builds with pkg-config too
command -v pkg-config >/dev/null 2>&1 || need="$need pkgconf"
# NEON kernels are tested cross-compiled for aarch64 and run under qemu-user
# (tests/neon_check.sh).
command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || need="$need gcc-aarch64-linux-gnu"
[ -f /usr/aarch64-linux-gnu/include/stdio.h ] || need="$need libc6-dev-arm64-cross"
command -v qemu-aarch64 >/dev/null 2>&1 || need="$need qemu-user"
# infer serve is built on libmicrohttpd and cJSON; its tests drive it with curl
# (and the openai package, below)
[ -f /usr/include/microhttpd.h ] || need="$need libmicrohttpd-dev"
[ -f /usr/include/cjson/cJSON.h ] || need="$need libcjson-dev"
command -v curl >/dev/null 2>&1 || need="$need curl"
# the CLI is run under valgrind's memcheck (tests/valgrind_check.sh)
command -v valgrind >/dev/null 2>&1 || need="$need valgrind"
# the fuzzing harnesses: clang with libFuzzer and its sanitizers
command -v clang >/dev/null 2>&1 || need="$need clang"
ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-*.a >/dev/null 2>&1 || need="$need libclang-rt-dev"
# the WebAssembly build (scripts/wasm.sh): Debian's Emscripten; its module
# is tested under Node.js and in headless Chromium driven through
# chromedriver (tests/node_check.mjs, tests/web_check.py)
command -v emcc >/dev/null 2>&1 || need="$need emscripten"
command -v node >/dev/null 2>&1 || command -v nodejs >/dev/null 2>&1 || need="$need nodejs"
command -v chromium >/dev/null 2>&1 || need="$need chromium"
[ -x /usr/bin/chromedriver ] || need="$need chromium-driver"
# the C# binding's test (bindings/csharp/test.sh): Debian's Mono, its
# compiler (mcs) and runtime; the binding needs only mscorlib, its tests
# System and System.Core, which come with them
command -v mcs >/dev/null 2>&1 || need="$need mono-mcs"
command -v mono >/dev/null 2>&1 || need="$need mono-runtime"
# the Windows build (cmake/mingw-w64.cmake) and its tests under Wine
# (tests/windows_check.py); Wine's Windows headers for the MSVC-mode
# compile (tests/msvc_check.sh)
command -v x86_64-w64-mingw32-gcc >/dev/null 2>&1 || need="$need gcc-mingw-w64-x86-64"
command -v wine >/dev/null 2>&1 || need="$need wine wine64"
[ -f /usr/include/wine/wine/windows/windows.h ] || need="$need libwine-dev"
if [ -n "$need" ]; then
    sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    echo "installing:$need"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $need >/dev/null
fi
# tests/server_replicas.py puts three servers behind nginx, which it runs
# unprivileged with a configuration of its own. Debian's package would also
# start nginx as a system service on port 80, and fail to install where
# that port is taken: a policy-rc.d that forbids every start (exit 101,
# which invoke-rc.d and deb-systemd-invoke both obey) holds it back while
# the package installs, and goes after, unless one was there already. On a
# systemd host the unit is disabled too, so that a reboot does not start it.
# (/usr/sbin is not on every user's PATH, hence the second test.)
if ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ]; then
    sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    echo "installing: nginx (not started as a service)"
    own_policy=""
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' | $sudo tee /usr/sbin/policy-rc.d >/dev/null
        $sudo chmod 755 /usr/sbin/policy-rc.d
        own_policy=1
    fi
    nginx_rc=0
    $sudo apt-get update -qq || nginx_rc=$?
    [ $nginx_rc != 0 ] || DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq nginx >/dev/null || nginx_rc=$?
    [ -z "$own_policy" ] || $sudo rm -f /usr/sbin/policy-rc.d
    [ $nginx_rc = 0 ] || exit $nginx_rc
    if [ -d /run/systemd/system ]; then
        $sudo systemctl disable --quiet nginx 2>/dev/null || true
    fi
    # a policy that was there before may have let the service start: it is
    # ours (nginx was absent), so it is stopped
    if [ -s /run/nginx.pid ]; then
        $sudo /usr/sbin/nginx -s stop 2>/dev/null || true
    fi
fi
# Python packages from PyPI, each where its module cannot be imported:
# pip_need "MODULES" "PACKAGES".
pip_need() {
    python3 -c "import $1" >/dev/null 2>&1 && return 0
    if ! python3 -m pip --version >/dev/null 2>&1; then
        sudo=""
        [ "$(id -u)" = 0 ] || sudo="sudo"
        $sudo apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3-pip >/dev/null
    fi
    echo "installing: $2 (pip)"
    python3 -m pip install --quiet $2 2>/dev/null ||
        python3 -m pip install --quiet --break-system-packages $2
}
# tests/check_quantized.py checks the quantizer's blocks with the gguf
# package (and numpy); the quantize test fails without them.
pip_need "numpy, gguf" "numpy gguf"
# the server's tests are clients of OpenAI's API through its own package
pip_need openai openai
# ... and tests/server_tools.py validates tool calls' arguments with jsonschema
pip_need jsonschema jsonschema
# ... and /v1/messages is tested with Anthropic's own package
pip_need anthropic anthropic
# tests/template_models_check.py renders each model's chat template with
# jinja2 itself, to compare with infer.h's interpreter
pip_need jinja2 jinja2
# bench/report.py draws its plots with matplotlib (bench_report fails
# without it)
pip_need matplotlib matplotlib
# tests/web_check.py drives Chromium with Selenium (Debian's chromedriver;
# Selenium Manager downloads nothing)
pip_need selenium selenium
# infer serve's /metrics is read with Prometheus' own parser (the Python
# client's text parser), so the format is checked by what scrapes it
pip_need prometheus_client prometheus_client
# the Python binding's tests (bindings/python, CTest python_binding) run
# under pytest; setuptools before 70.1 builds its wheel with the wheel package
pip_need pytest pytest
pip_need wheel wheel

#!/bin/sh
# Installs what building and testing infer.h needs, where it is missing:
# a C compiler, CMake, Python 3, stb_ds (libstb-dev) and Criterion.
set -e
need=""
command -v cc >/dev/null 2>&1 || need="$need gcc"
command -v cmake >/dev/null 2>&1 || need="$need cmake"
command -v python3 >/dev/null 2>&1 || need="$need python3"
[ -f /usr/include/stb/stb_ds.h ] || need="$need libstb-dev"
[ -f /usr/include/criterion/criterion.h ] || need="$need libcriterion-dev"
[ -d /usr/share/unicode ] || need="$need unicode-data"
if [ -n "$need" ]; then
    sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    echo "installing:$need"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $need >/dev/null
fi

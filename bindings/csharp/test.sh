#!/bin/sh
# The C# binding under Mono: Infer.cs compiled into Infer.dll, the tests
# (tests/InferTests.cs) and the 4-NPC sample against it with mcs, the tests
# run with mono against the shared library LIB (libinfer.so), then the
# sample for a few frames, stepped and with a worker. Exit 77 (skipped)
# where mcs or mono, ../shared or SmolLM2 is absent.
#     sh bindings/csharp/test.sh LIB INFER_CLI SHARED_DIR SMOLLM2 OUT_DIR
# (CTest: csharp_binding.)
set -e
[ $# = 5 ] || { echo "usage: test.sh LIB INFER_CLI SHARED_DIR SMOLLM2 OUT_DIR" >&2; exit 2; }
lib=$1 cli=$2 shared=$3 smollm2=$4 out=$5
for tool in mcs mono; do
    command -v $tool >/dev/null 2>&1 || { echo "csharp_binding: SKIPPED: $tool is not installed (scripts/deps.sh installs Mono)"; exit 77; }
done
[ -d "$shared" ] || { echo "csharp_binding: SKIPPED: $shared (../shared) is absent"; exit 77; }
[ -f "$smollm2" ] || { echo "csharp_binding: SKIPPED: $smollm2 is absent (scripts/test.sh fetches it)"; exit 77; }
[ -f "$lib" ] || { echo "csharp_binding: FAILED: $lib was not built"; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out/tmp"
rm -f "$out/tmp/"*
# -warnaserror: the binding compiles cleanly, as it must in a Unity project
mcs -nologo -warnaserror -target:library -out:"$out/Infer.dll" "$here/Infer.cs"
mcs -nologo -warnaserror -out:"$out/InferTests.exe" -r:"$out/Infer.dll" "$here/tests/InferTests.cs" "$here/samples/MiniJson.cs"
mcs -nologo -warnaserror -out:"$out/Npc.exe" -r:"$out/Infer.dll" "$here/samples/Npc.cs" "$here/samples/MiniJson.cs"
# Mono's DllImport("infer") finds libinfer.so through LD_LIBRARY_PATH
# (DYLD_LIBRARY_PATH on macOS); Infer.dll sits beside the programs, and
# MONO_PATH says so for any that do not
libdir=$(cd "$(dirname "$lib")" && pwd)
LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
DYLD_LIBRARY_PATH="$libdir${DYLD_LIBRARY_PATH:+:$DYLD_LIBRARY_PATH}"
MONO_PATH="$out"
export LD_LIBRARY_PATH DYLD_LIBRARY_PATH MONO_PATH
# a stand-in library of another ABI, which the binding must refuse
fake=""
mkdir -p "$out/fake"
if cc -shared -fPIC -o "$out/fake/libinfer.so" "$here/tests/fake_infer.c" 2>/dev/null; then fake="--fake-lib $out/fake"; fi
mono --debug "$out/InferTests.exe" --cli "$cli" --shared "$shared" --smollm2 "$smollm2" --tmp "$out/tmp" $fake
# the sample, stepped and with a worker, until each character has replied
# once (at most 30 s of frames): every reply must match the schema
mono --debug "$out/Npc.exe" -m "$smollm2" --frames 1800 --replies 1 --check
mono --debug "$out/Npc.exe" -m "$smollm2" --frames 1800 --replies 1 --worker --check --quiet
echo "csharp_binding: ok"

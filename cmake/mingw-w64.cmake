# Cross-compiling for 64-bit Windows with MinGW-w64 (Debian's
# gcc-mingw-w64-x86-64; scripts/deps.sh installs it, and Wine to run what
# it builds):
#   cmake -B build-win -DCMAKE_TOOLCHAIN_FILE=cmake/mingw-w64.cmake
# The programs link MinGW's runtime statically (CMakeLists.txt), so
# infer.exe needs no DLL beside it.
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)
set(CMAKE_C_COMPILER x86_64-w64-mingw32-gcc)
set(CMAKE_CXX_COMPILER x86_64-w64-mingw32-g++)
set(CMAKE_RC_COMPILER x86_64-w64-mingw32-windres)
# libraries and headers from the target's tree only; programs (python3,
# which makes infer.h) from the host
set(CMAKE_FIND_ROOT_PATH /usr/x86_64-w64-mingw32)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# programs the build runs (none but tests) under Wine
set(CMAKE_CROSSCOMPILING_EMULATOR wine)

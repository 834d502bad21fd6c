# Cross-compiling for 64-bit ARM Linux with Debian's aarch64-linux-gnu-gcc
# (apt install gcc-aarch64-linux-gnu; scripts/deps.sh installs it): the
# stand-in here for Android's NDK toolchain file, which the same
# CMakeLists.txt takes. Run the programs under qemu-aarch64 with
# QEMU_LD_PREFIX=/usr/aarch64-linux-gnu (or link them -static).
#   cmake -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
# libraries and headers from the target's tree only; programs (python3,
# which makes infer.h) from the host
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

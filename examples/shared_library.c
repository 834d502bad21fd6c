/* The translation unit of the shared library (infer.dll, libinfer.so,
   libinfer.dylib): the implementation with every API function exported,
   for programs and bindings that load a library (C#, Python). */
#define INFER_IMPLEMENTATION
#ifndef INFER_SHARED_BUILD
#define INFER_SHARED_BUILD /* CMake defines it; a build by hand may not */
#endif
#include "infer.h"

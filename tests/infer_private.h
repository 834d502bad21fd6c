/* infer_private.h - a private, static copy of infer.h's implementation, for
   tests and benchmarks that call its internal kernels (infer__traits,
   infer__kernels, ...). A file that includes this must not also call the
   linked library's extern functions; two static copies can coexist. */
#ifndef INFER_PRIVATE_H
#define INFER_PRIVATE_H
#define INFER_STATIC
#define INFER_IMPLEMENTATION
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function" /* internal helpers a file does not use */
#endif
#include "infer.h"
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
#endif

/* The one translation unit that compiles infer.h's implementation for the
   examples and tests. */
#define INFER_IMPLEMENTATION
#include "infer.h"

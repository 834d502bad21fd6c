/* quantize.c - writing a GGUF file with its weights in another format. */
#include "internal.h"

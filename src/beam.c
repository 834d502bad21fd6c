/* beam.c - beam search over the sequences of a context. */
#include "context.h"

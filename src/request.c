/* request.c - generation in steps: requests a game loop advances within a
   time budget, or a worker thread advances while the caller polls. */
#include "context.h"

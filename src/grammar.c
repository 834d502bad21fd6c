/* grammar.c - GBNF grammars (llama.cpp's format) and JSON schemas compiled
   to them: parsing, the matcher, and the mask of tokens that may come next. */
#include "internal.h"

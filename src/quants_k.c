/* quants_k.c - the K-quant and IQ4 formats (256-value super-blocks), plain C. */
#include "internal.h"

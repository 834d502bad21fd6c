/* test_internals.c - the tests that call infer.h's internals (through
   infer_private.h) as one program: the implementation is compiled once for
   all of them, not once per file (each such compile takes 30-60 s of a
   build's time). tests/CMakeLists.txt registers each file's tests as their
   own CTest entry, chosen by Criterion suite (--filter), and each file still
   compiles alone. A file-scope name that two files share is renamed here
   for the second one, by a macro around its #include. (test_files is not
   here: it builds the implementation without mmap.) */
#define _XOPEN_SOURCE 700
#include "infer_private.h"

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <dirent.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

#include "test_arch.c"

#include "test_attention.c"

#define g_rng gemm__g_rng
#include "test_gemm.c"
#undef g_rng

#define g_rng grammar__g_rng
#include "test_grammar.c"
#undef g_rng

#define put grammar_limits__put
#define compile_ok grammar_limits__compile_ok
#define load_vocab grammar_limits__load_vocab
#define text grammar_limits__text
#include "test_grammar_limits.c"
#undef put
#undef compile_ok
#undef load_vocab
#undef text

#define rng_next kernels__rng_next
#include "test_kernels.c"
#undef rng_next

#include "test_mathfn.c"

#define g_rng pack__g_rng
#define g_normal pack__g_normal
#define check pack__check
#include "test_pack.c"
#undef g_rng
#undef g_normal
#undef check

#define rng_state quants_k__rng_state
#define rng_next quants_k__rng_next
#define urand quants_k__urand
#define fmt quants_k__fmt
#define ref_value quants_k__ref_value
#define check_dot quants_k__check_dot
#include "test_quants_k.c"
#undef rng_state
#undef rng_next
#undef urand
#undef fmt
#undef ref_value
#undef check_dot

#define test_threads reference__test_threads
#include "test_reference.c"
#undef test_threads

#define match schema__match
#define expect_refused schema__expect_refused
#include "test_schema.c"
#undef match
#undef expect_refused

#include "test_sequence.c"

#include "test_speculate.c"

#define check simd__check
#include "test_simd.c"
#undef check

#undef MODEL
#define load state__load
#define ctx state__ctx
#include "test_state.c"
#undef load
#undef ctx

#define match toolgrammar__match
#define refused toolgrammar__refused
#include "test_toolgrammar.c"
#undef match
#undef refused

#define g_rng vecmath__g_rng
#define g_uniform vecmath__g_uniform
#include "test_vecmath.c"
#undef g_rng
#undef g_uniform

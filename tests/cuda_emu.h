/* cuda_emu.h - just enough of CUDA, on the CPU, to run infer_cuda.cu's
   kernels where there is no GPU (tests/cuda_emu.cpp compiles the .cu file
   as C++ with it; test_cuda_emu runs test_cuda.c against the result).

   Not a general emulator: one device, one block at a time, one host
   thread, deterministic. Every thread of a block is a fiber (ucontext for
   its stack, GCC's __builtin_setjmp/__builtin_longjmp to switch), run
   until it finishes or waits; a waiting thread hands on to the next
   runnable one. __syncthreads waits for the block's live threads; a warp
   shuffle, vote, __syncwarp or wmma::mma_sync for its warp's (both sides
   of every exchange), so divergence between warps works as on a GPU, and
   a barrier some threads never reach is reported, not hung.

   The fast path: per launch, the first block is run with fibers; if none
   of its threads waited, every later block of that launch runs its
   threads as plain calls, one after another, on the host
   stack (the order the fibers would have run them in anyway). A thread
   that then waits aborts with a message naming the kernel: the assumption
   is loud, never silently wrong. INFER_CUDA_EMU_NO_FAST_PATH=1 in the
   environment turns it off.

   __shared__ variables are statics (blocks run one after another, with or
   without the fast path). Host threads take turns at the one device: each
   runtime call and launch holds a process-wide lock. Streams run their work at once, except while
   capturing, when it is recorded into the graph that a graph launch
   replays (kernels, copies, memsets, cuBLAS calls, event records).
   Memory is host memory. Atomics are plain read-modify-writes (threads
   switch only where they wait). cuBLAS is a float triple loop (column
   major, as cuBLAS). wmma fragments hold the whole tile in every thread.

   Calls CUDA refuses are reported and abort rather than pass: blocks of
   more than 1024 threads or with y/z extents, more dynamic shared memory
   than the device has (or than 48 KiB without cudaFuncSetAttribute),
   synchronous calls (cudaMalloc, cudaFree, cudaMemcpy, cudaMemset,
   cudaStreamSynchronize, cudaDeviceSynchronize) while a stream captures
   a graph, cudaFree of a pointer cudaMalloc did not return, a wmma load
   or store off a 32-byte boundary or with a stride not a multiple of 16
   bytes, a shuffle or vote by a lane its mask leaves out. cuBLAS returns
   CUBLAS_STATUS_INVALID_VALUE / NOT_SUPPORTED where cuBLAS would.

   Counters for tests (infer_cuda_emu_counts, defined in cuda_emu.cpp):
   [0] kernels launched directly on a stream, [1] graph launches,
   [2] kernels run by graph launches, [3] cuBLAS GEMMs run (directly or
   by a graph), [4] memcpys run (cudaMemcpy, cudaMemcpyAsync,
   cudaMemcpy2D[Async], cudaMemcpyToSymbol; directly or by a graph). */
#ifndef INFER_CUDA_EMU_H
#define INFER_CUDA_EMU_H
#define INFER_CUDA_EMULATE 1
/* a fortified longjmp refuses to jump to another stack (must come before
   the first system header) */
#ifdef _FORTIFY_SOURCE
#undef _FORTIFY_SOURCE
#endif

#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include <functional>
#include <map>
#include <mutex>
#include <vector>

/* ---- the language ---- */
#define __global__
#define __device__
#define __host__
#define __constant__
#define __forceinline__ inline
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)
#define __shared__ static
#define INFER_DYNAMIC_SHARED(type, name) type *name = (type *)emu_dynamic_shared()

struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct emu_uint3 {
    unsigned x, y, z;
};
typedef emu_uint3 uint3;
static emu_uint3 emu_thread, emu_block;
static dim3 emu_block_dim, emu_grid_dim;
#define threadIdx emu_thread
#define blockIdx emu_block
#define blockDim emu_block_dim
#define gridDim emu_grid_dim
static const int warpSize = 32;

/* min and max as CUDA overloads them (global functions, not std's) */
#define EMU_MINMAX(T)                                          \
    static inline T min(T a, T b) { return a < b ? a : b; }   \
    static inline T max(T a, T b) { return a > b ? a : b; }
EMU_MINMAX(int)
EMU_MINMAX(unsigned)
EMU_MINMAX(long)
EMU_MINMAX(unsigned long)
EMU_MINMAX(long long)
EMU_MINMAX(unsigned long long)
#undef EMU_MINMAX
static inline float min(float a, float b) { return fminf(a, b); }
static inline float max(float a, float b) { return fmaxf(a, b); }
static inline double min(double a, double b) { return fmin(a, b); }
static inline double max(double a, double b) { return fmax(a, b); }
/* mixed signedness compares as unsigned, as CUDA's overloads do */
static inline unsigned min(int a, unsigned b) { return min((unsigned)a, b); }
static inline unsigned min(unsigned a, int b) { return min(a, (unsigned)b); }
static inline unsigned max(int a, unsigned b) { return max((unsigned)a, b); }
static inline unsigned max(unsigned a, int b) { return max(a, (unsigned)b); }

/* ---- bits and conversions ---- */
static inline unsigned __float_as_uint(float f) {
    unsigned u;
    memcpy(&u, &f, 4);
    return u;
}
static inline float __uint_as_float(unsigned u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline int __float_as_int(float f) {
    int i;
    memcpy(&i, &f, 4);
    return i;
}
static inline float __int_as_float(int i) {
    float f;
    memcpy(&f, &i, 4);
    return f;
}
/* float to int as the GPU does it: rounded as named, NaN to 0, saturated */
static inline int emu_f2i(float r) {
    if (r != r) return 0;
    if (r >= 2147483648.0f) return INT_MAX;
    if (r < -2147483648.0f) return INT_MIN;
    return (int)r;
}
static inline unsigned emu_f2u(float r) {
    if (r != r || r <= 0.0f) return 0;
    if (r >= 4294967296.0f) return UINT_MAX;
    return (unsigned)r;
}
static inline int __float2int_rn(float x) { return emu_f2i(nearbyintf(x)); } /* ties to even */
static inline int __float2int_rz(float x) { return emu_f2i(truncf(x)); }
static inline int __float2int_rd(float x) { return emu_f2i(floorf(x)); }
static inline int __float2int_ru(float x) { return emu_f2i(ceilf(x)); }
static inline unsigned __float2uint_rn(float x) { return emu_f2u(nearbyintf(x)); }
static inline unsigned __float2uint_rz(float x) { return emu_f2u(truncf(x)); }
static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline int __clz(int x) { return x ? __builtin_clz((unsigned)x) : 32; }
static inline unsigned __brev(unsigned x) {
    unsigned r = 0;
    for (int i = 0; i < 32; i++) r |= ((x >> i) & 1u) << (31 - i);
    return r;
}

/* ---- fast math intrinsics: the plain functions ----
   (those glibc's math.h declares itself, __expf and the like, are macros
   onto emu_ functions, as is rsqrtf, which a C library may someday
   declare) */
static inline float emu_expf(float x) { return expf(x); }
static inline float emu_exp10f(float x) { return powf(10.0f, x); }
static inline float emu_logf(float x) { return logf(x); }
static inline float emu_log2f(float x) { return log2f(x); }
static inline float emu_sinf(float x) { return sinf(x); }
static inline float emu_cosf(float x) { return cosf(x); }
static inline void emu_sincosf(float x, float *s, float *c) { *s = sinf(x), *c = cosf(x); }
static inline float emu_tanf(float x) { return tanf(x); }
static inline float emu_powf(float x, float y) { return powf(x, y); }
static inline float emu_rsqrtf(float x) { return 1.0f / sqrtf(x); }
#define __expf emu_expf
#define __exp10f emu_exp10f
#define __logf emu_logf
#define __log2f emu_log2f
#define __sinf emu_sinf
#define __cosf emu_cosf
#define __sincosf emu_sincosf
#define __tanf emu_tanf
#define __powf emu_powf
#define rsqrtf emu_rsqrtf
static inline float __fdividef(float a, float b) { return a / b; }
static inline float __frcp_rn(float x) { return 1.0f / x; }
static inline float __fsqrt_rn(float x) { return sqrtf(x); }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline float __saturatef(float x) { return x != x || x <= 0.0f ? 0.0f : x >= 1.0f ? 1.0f : x; }

/* ---- vector types (alignment as CUDA's) ---- */
struct __align__(8) int2 { int x, y; };
struct __align__(16) int4 { int x, y, z, w; };
struct __align__(8) uint2 { unsigned x, y; };
struct __align__(16) uint4 { unsigned x, y, z, w; };
struct __align__(8) float2 { float x, y; };
struct __align__(16) float4 { float x, y, z, w; };
struct __align__(4) char4 { signed char x, y, z, w; };
struct __align__(4) uchar4 { unsigned char x, y, z, w; };
struct __align__(4) short2 { short x, y; };
static inline int2 make_int2(int x, int y) { int2 r = {x, y}; return r; }
static inline int4 make_int4(int x, int y, int z, int w) { int4 r = {x, y, z, w}; return r; }
static inline uint2 make_uint2(unsigned x, unsigned y) { uint2 r = {x, y}; return r; }
static inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { uint4 r = {x, y, z, w}; return r; }
static inline float2 make_float2(float x, float y) { float2 r = {x, y}; return r; }
static inline float4 make_float4(float x, float y, float z, float w) { float4 r = {x, y, z, w}; return r; }
static inline char4 make_char4(signed char x, signed char y, signed char z, signed char w) {
    char4 r = {x, y, z, w};
    return r;
}
static inline uchar4 make_uchar4(unsigned char x, unsigned char y, unsigned char z, unsigned char w) {
    uchar4 r = {x, y, z, w};
    return r;
}
static inline short2 make_short2(short x, short y) { short2 r = {x, y}; return r; }

/* ---- half precision (IEEE binary16, round to nearest even) ----
   __half is a POD of its bits (arrays, memcpy, unions work); values go in
   and out through the functions below only (no implicit float
   conversions, so no ambiguous overloads). */
struct __half {
    unsigned short bits;
};
struct __align__(4) __half2 {
    __half x, y;
};
typedef __half half;
typedef __half2 half2;
static inline float __half2float(__half h) {
    unsigned s = (h.bits & 0x8000u) << 16, e = (h.bits >> 10) & 0x1f, m = h.bits & 0x3ff;
    if (e == 0x1f) return __uint_as_float(s | 0x7f800000u | m << 13);
    if (e == 0) return (s ? -1.0f : 1.0f) * ((float)m * (1.0f / 16777216.0f)); /* m 2^-24: exact */
    return __uint_as_float(s | (e + 112) << 23 | m << 13);
}
static inline __half __float2half_rn(float f) {
    unsigned u = __float_as_uint(f), s = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    __half h;
    if (a >= 0x7f800000u) { /* inf, nan */
        h.bits = (unsigned short)(s | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0));
    } else if (a >= 0x477ff000u) { /* rounds to >= 65520: inf */
        h.bits = (unsigned short)(s | 0x7c00u);
    } else if (a < 0x38800000u) { /* below the smallest normal: a multiple of 2^-24 */
        float q = nearbyintf(__uint_as_float(a) * 16777216.0f); /* ties to even */
        h.bits = (unsigned short)(s | (unsigned)q);
    } else {
        unsigned m = a + 0xfff + ((a >> 13) & 1); /* round the 13 dropped bits, ties to even */
        h.bits = (unsigned short)(s | ((m - 0x38000000u) >> 13));
    }
    return h;
}
static inline __half __float2half(float f) { return __float2half_rn(f); }
/* a double rounded once to half (the arithmetic below is done in double:
   exact for +, -, * of halves, so one rounding, as the GPU's) */
static inline __half __double2half(double d) {
    __half h;
    double a = fabs(d);
    unsigned s = signbit(d) ? 0x8000u : 0;
    if (a != a) {
        h.bits = 0x7fff;
    } else if (a >= 65520.0) { /* inf, or rounds to >= 65520 */
        h.bits = (unsigned short)(s | 0x7c00u);
    } else if (a < ldexp(1.0, -14)) { /* a multiple of 2^-24 */
        h.bits = (unsigned short)(s | (unsigned)nearbyint(ldexp(a, 24)));
    } else {
        int e;
        frexp(a, &e); /* a = f * 2^e, f in [0.5, 1): 11 bits are a * 2^(11 - e) */
        double q = nearbyint(ldexp(a, 11 - e)); /* 1024 .. 2048 */
        h.bits = (unsigned short)(s | (((unsigned)(e + 14) << 10) + ((unsigned)q - 1024))); /* 2048 carries */
    }
    return h;
}
static inline __half __ushort_as_half(unsigned short b) {
    __half h;
    h.bits = b;
    return h;
}
static inline unsigned short __half_as_ushort(__half h) { return h.bits; }
static inline __half __short_as_half(short b) { return __ushort_as_half((unsigned short)b); }
static inline short __half_as_short(__half h) { return (short)h.bits; }
static inline __half2 __halves2half2(__half lo, __half hi) {
    __half2 r;
    r.x = lo, r.y = hi;
    return r;
}
static inline __half2 __half2half2(__half h) { return __halves2half2(h, h); }
static inline __half2 __floats2half2_rn(float lo, float hi) {
    return __halves2half2(__float2half_rn(lo), __float2half_rn(hi));
}
static inline __half2 __float2half2_rn(float f) { return __floats2half2_rn(f, f); }
static inline __half2 __float22half2_rn(float2 f) { return __floats2half2_rn(f.x, f.y); }
static inline float2 __half22float2(__half2 h) { return make_float2(__half2float(h.x), __half2float(h.y)); }
static inline float __low2float(__half2 h) { return __half2float(h.x); }
static inline float __high2float(__half2 h) { return __half2float(h.y); }
static inline __half __low2half(__half2 h) { return h.x; }
static inline __half __high2half(__half2 h) { return h.y; }
static inline double emu_hd(__half h) { return (double)__half2float(h); }
static inline __half __hadd(__half a, __half b) { return __double2half(emu_hd(a) + emu_hd(b)); }
static inline __half __hsub(__half a, __half b) { return __double2half(emu_hd(a) - emu_hd(b)); }
static inline __half __hmul(__half a, __half b) { return __double2half(emu_hd(a) * emu_hd(b)); }
static inline __half __hdiv(__half a, __half b) { return __double2half(emu_hd(a) / emu_hd(b)); }
static inline __half __hfma(__half a, __half b, __half c) { return __double2half(fma(emu_hd(a), emu_hd(b), emu_hd(c))); }
static inline __half __hneg(__half a) { return __ushort_as_half((unsigned short)(a.bits ^ 0x8000u)); }
static inline __half __habs(__half a) { return __ushort_as_half((unsigned short)(a.bits & 0x7fffu)); }
static inline bool __hisnan(__half a) { return (a.bits & 0x7fffu) > 0x7c00u; }
static inline int __hisinf(__half a) { return (a.bits & 0x7fffu) == 0x7c00u ? (a.bits & 0x8000u ? -1 : 1) : 0; }
/* max/min: a NaN loses to a number (two NaNs: the canonical NaN), +0 > -0 */
static inline __half emu_hmaxmin(__half a, __half b, int want_max) {
    if (__hisnan(a) && __hisnan(b)) return __ushort_as_half(0x7fff);
    if (__hisnan(a)) return b;
    if (__hisnan(b)) return a;
    float fa = __half2float(a), fb = __half2float(b);
    if (fa == fb) return (a.bits & 0x8000u) == (want_max ? 0u : 0x8000u) ? a : b;
    return (fa > fb) == (want_max != 0) ? a : b;
}
static inline __half __hmax(__half a, __half b) { return emu_hmaxmin(a, b, 1); }
static inline __half __hmin(__half a, __half b) { return emu_hmaxmin(a, b, 0); }
static inline bool __heq(__half a, __half b) { return __half2float(a) == __half2float(b); }
static inline bool __hne(__half a, __half b) { return !__hisnan(a) && !__hisnan(b) && !__heq(a, b); }
static inline bool __hlt(__half a, __half b) { return __half2float(a) < __half2float(b); }
static inline bool __hle(__half a, __half b) { return __half2float(a) <= __half2float(b); }
static inline bool __hgt(__half a, __half b) { return __half2float(a) > __half2float(b); }
static inline bool __hge(__half a, __half b) { return __half2float(a) >= __half2float(b); }
static inline __half2 __hadd2(__half2 a, __half2 b) { return __halves2half2(__hadd(a.x, b.x), __hadd(a.y, b.y)); }
static inline __half2 __hsub2(__half2 a, __half2 b) { return __halves2half2(__hsub(a.x, b.x), __hsub(a.y, b.y)); }
static inline __half2 __hmul2(__half2 a, __half2 b) { return __halves2half2(__hmul(a.x, b.x), __hmul(a.y, b.y)); }
static inline __half2 __h2div(__half2 a, __half2 b) { return __halves2half2(__hdiv(a.x, b.x), __hdiv(a.y, b.y)); }
static inline __half2 __hfma2(__half2 a, __half2 b, __half2 c) {
    return __halves2half2(__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y));
}
static inline __half2 __hneg2(__half2 a) { return __halves2half2(__hneg(a.x), __hneg(a.y)); }
static inline __half2 __habs2(__half2 a) { return __halves2half2(__habs(a.x), __habs(a.y)); }
static inline __half2 __hmax2(__half2 a, __half2 b) { return __halves2half2(__hmax(a.x, b.x), __hmax(a.y, b.y)); }
static inline __half2 __hmin2(__half2 a, __half2 b) { return __halves2half2(__hmin(a.x, b.x), __hmin(a.y, b.y)); }

/* bfloat16: the top half of a float, round to nearest even (a NaN becomes
   the canonical 0x7fff, as cuda_bf16.h's) */
struct __nv_bfloat16 {
    unsigned short bits;
};
struct __align__(4) __nv_bfloat162 {
    __nv_bfloat16 x, y;
};
typedef __nv_bfloat16 nv_bfloat16;
typedef __nv_bfloat162 nv_bfloat162;
static inline float __bfloat162float(__nv_bfloat16 b) { return __uint_as_float((unsigned)b.bits << 16); }
static inline __nv_bfloat16 __float2bfloat16_rn(float f) {
    unsigned u = __float_as_uint(f);
    __nv_bfloat16 b;
    b.bits = f != f ? (unsigned short)0x7fff : (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    return b;
}
static inline __nv_bfloat16 __float2bfloat16(float f) { return __float2bfloat16_rn(f); }
static inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) {
    __nv_bfloat16 b;
    b.bits = u;
    return b;
}
static inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 b) { return b.bits; }
static inline __nv_bfloat162 __halves2bfloat162(__nv_bfloat16 lo, __nv_bfloat16 hi) {
    __nv_bfloat162 r;
    r.x = lo, r.y = hi;
    return r;
}
static inline __nv_bfloat162 __floats2bfloat162_rn(float lo, float hi) {
    return __halves2bfloat162(__float2bfloat16_rn(lo), __float2bfloat16_rn(hi));
}
static inline __nv_bfloat162 __float22bfloat162_rn(float2 f) { return __floats2bfloat162_rn(f.x, f.y); }
static inline float2 __bfloat1622float2(__nv_bfloat162 b) {
    return make_float2(__bfloat162float(b.x), __bfloat162float(b.y));
}
static inline float __low2float(__nv_bfloat162 b) { return __bfloat162float(b.x); }
static inline float __high2float(__nv_bfloat162 b) { return __bfloat162float(b.y); }

/* ---- integer and memory intrinsics ---- */
static inline int emu_sbyte(unsigned w, int i) {
    int v = (int)((w >> (8 * i)) & 0xffu);
    return v - ((v & 0x80) << 1);
}
/* four signed (unsigned) byte products summed into c, wrapping as the GPU's */
static inline int __dp4a(int a, int b, int c) {
    unsigned r = (unsigned)c;
    for (int i = 0; i < 4; i++) r += (unsigned)(emu_sbyte((unsigned)a, i) * emu_sbyte((unsigned)b, i));
    return (int)r;
}
static inline unsigned __dp4a(unsigned a, unsigned b, unsigned c) {
    for (int i = 0; i < 4; i++) c += ((a >> (8 * i)) & 0xffu) * ((b >> (8 * i)) & 0xffu);
    return c;
}
static inline int __dp4a(char4 a, char4 b, int c) {
    int ia, ib;
    memcpy(&ia, &a, 4), memcpy(&ib, &b, 4);
    return __dp4a(ia, ib, c);
}
static inline unsigned __dp4a(uchar4 a, uchar4 b, unsigned c) {
    unsigned ua, ub;
    memcpy(&ua, &a, 4), memcpy(&ub, &b, 4);
    return __dp4a(ua, ub, c);
}
template <typename T> static inline T __ldg(const T *p) { return *p; }
/* atomics: threads switch only where they wait, so a plain
   read-modify-write is atomic; each returns the old value */
#define EMU_ATOMIC(name, T, expr)             \
    static inline T name(T *p, T v) {        \
        T old = *p;                          \
        *p = (expr);                         \
        return old;                          \
    }
EMU_ATOMIC(atomicAdd, float, old + v)
EMU_ATOMIC(atomicAdd, double, old + v)
EMU_ATOMIC(atomicAdd, int, (int)((unsigned)old + (unsigned)v))
EMU_ATOMIC(atomicAdd, unsigned, old + v)
EMU_ATOMIC(atomicAdd, unsigned long long, old + v)
EMU_ATOMIC(atomicSub, int, (int)((unsigned)old - (unsigned)v))
EMU_ATOMIC(atomicSub, unsigned, old - v)
EMU_ATOMIC(atomicMax, int, old > v ? old : v)
EMU_ATOMIC(atomicMax, unsigned, old > v ? old : v)
EMU_ATOMIC(atomicMax, unsigned long long, old > v ? old : v)
EMU_ATOMIC(atomicMin, int, old < v ? old : v)
EMU_ATOMIC(atomicMin, unsigned, old < v ? old : v)
EMU_ATOMIC(atomicMin, unsigned long long, old < v ? old : v)
EMU_ATOMIC(atomicExch, int, v)
EMU_ATOMIC(atomicExch, unsigned, v)
EMU_ATOMIC(atomicExch, unsigned long long, v)
EMU_ATOMIC(atomicExch, float, v)
EMU_ATOMIC(atomicAnd, int, old & v)
EMU_ATOMIC(atomicAnd, unsigned, old & v)
EMU_ATOMIC(atomicOr, int, old | v)
EMU_ATOMIC(atomicOr, unsigned, old | v)
EMU_ATOMIC(atomicXor, int, old ^ v)
EMU_ATOMIC(atomicXor, unsigned, old ^ v)
#undef EMU_ATOMIC
#define EMU_ATOMIC_CAS(T)                                 \
    static inline T atomicCAS(T *p, T compare, T v) {    \
        T old = *p;                                      \
        if (old == compare) *p = v;                      \
        return old;                                      \
    }
EMU_ATOMIC_CAS(int)
EMU_ATOMIC_CAS(unsigned)
EMU_ATOMIC_CAS(unsigned long long)
#undef EMU_ATOMIC_CAS
static inline void __threadfence() {}
static inline void __threadfence_block() {}

/* ---- threads of a block as fibers ----
   A switch is GCC's __builtin_setjmp/__builtin_longjmp (a few registers,
   no signal mask, no unwinding: the hot path of the emulation); a
   fiber's first entry is setcontext onto its own stack.
   Under ThreadSanitizer (the TSan build's model_readonly_tsan) each fiber
   is a TSan fiber too, switched to before every jump (which orders the
   block's threads as the jumps do), and the functions that jump are not
   instrumented: a frame they entered would never be left. */
#if defined(__SANITIZE_THREAD__)
#define EMU_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define EMU_TSAN 1
#endif
#endif
#ifdef EMU_TSAN
extern "C" void *__tsan_get_current_fiber(void);
extern "C" void *__tsan_create_fiber(unsigned flags);
extern "C" void __tsan_switch_to_fiber(void *fiber, unsigned flags);
#define EMU_NO_TSAN __attribute__((no_sanitize_thread))
static void *emu_tsan_host; /* the host thread running the block */
#define EMU_TSAN_SWITCH(fiber) __tsan_switch_to_fiber(fiber, 0)
#else
#define EMU_NO_TSAN
#define EMU_TSAN_SWITCH(fiber) ((void)0)
#endif
enum { EMU_RUN, EMU_WARP_WAIT, EMU_BLOCK_WAIT, EMU_DONE };
struct emu_fiber {
    ucontext_t uc;
    void *jb[5]; /* __builtin_setjmp's buffer */
    int started;
    char *stack;
    void *tsan; /* its TSan fiber (EMU_TSAN) */
};
#define EMU_MAX_THREADS 1024
#define EMU_STACK (256 * 1024) /* wmma fragments are whole tiles: room for a few */
static emu_fiber emu_fibers[EMU_MAX_THREADS];
static unsigned char emu_state[EMU_MAX_THREADS]; /* each thread's EMU_RUN .. EMU_DONE */
static void *emu_sched[5];
static std::function<void()> *emu_body;
/* what each thread offers at a shuffle: two sets, taken in turn by a
   thread's successive shuffles (emu_turn), so one wait suffices (a thread
   writes a set again only after a later shuffle that every thread of its
   warp has reached, so after all have read it) */
static unsigned long long emu_slots[2][EMU_MAX_THREADS];
static unsigned char emu_turn[EMU_MAX_THREADS];
static unsigned emu_vote_slots[EMU_MAX_THREADS]; /* what each thread offers at a vote */
static std::vector<unsigned char> emu_shared_mem;
static int emu_plain;              /* 1 while a block's threads run as plain calls */
static int emu_waited;             /* a thread waited since the block began */
static const char *emu_kernel_name; /* the running kernel, as INFER_LAUNCH wrote it */

static unsigned char *emu_shared_base; /* emu_shared_mem's first 256-byte boundary, as a GPU's window */

static inline void *emu_dynamic_shared() { return emu_shared_base; }

/* (never in the function that set the buffer, as GCC requires) */
static __attribute__((noinline, noreturn)) EMU_NO_TSAN void emu_jump(void **jb) { __builtin_longjmp(jb, 1); }

/* Back to the scheduler (emu_pass) from a fiber. */
static __attribute__((noinline, noreturn)) EMU_NO_TSAN void emu_jump_sched() {
#ifdef EMU_TSAN
    EMU_TSAN_SWITCH(emu_tsan_host);
#endif
    emu_jump(emu_sched);
}

/* Runs thread t from where it stopped (its first entry: its stack). */
static __attribute__((noinline, noreturn)) EMU_NO_TSAN void emu_enter(int t) {
    emu_fiber *f = &emu_fibers[t];
    emu_thread.x = (unsigned)t;
    EMU_TSAN_SWITCH(f->tsan);
    if (!f->started) {
        f->started = 1;
        setcontext(&f->uc);
    }
    emu_jump(f->jb);
}

/* The running thread stops (its state already set) and the pass goes on
   with the next runnable thread after it, or back to the scheduler. */
static __attribute__((noinline)) void emu_yield() {
    int t = (int)emu_thread.x, n = (int)emu_block_dim.x, u = t + 1;
    while (u < n && emu_state[u] != EMU_RUN) u++;
    if (!__builtin_setjmp(emu_fibers[t].jb)) {
        if (u < n) emu_enter(u);
        emu_jump_sched();
    }
}

/* A fiber's whole life: run the kernel for a thread, park, and run it
   again for the next block when resumed (so a context is made once per
   fiber, not once per thread of every block). */
static __attribute__((noinline)) void emu_trampoline() {
    for (;;) {
        (*emu_body)();
        emu_state[emu_thread.x] = EMU_DONE;
        emu_yield();
    }
}

static __attribute__((noinline)) void emu_wait(int kind) {
    if (emu_plain) {
        fprintf(stderr,
                "cuda_emu: kernel %s waited in a block after its first block never did (block %u,%u,%u thread %u; "
                "the fast path runs such a kernel's later blocks without fibers: make the first block wait too, or "
                "set INFER_CUDA_EMU_NO_FAST_PATH=1)\n",
                emu_kernel_name ? emu_kernel_name : "?", emu_block.x, emu_block.y, emu_block.z, emu_thread.x);
        abort();
    }
    emu_waited = 1;
    emu_state[emu_thread.x] = (unsigned char)kind;
    emu_yield();
}

static inline void __syncthreads() { emu_wait(EMU_BLOCK_WAIT); }

static inline int emu_lane() { return (int)emu_thread.x & 31; }
static inline void emu_check_mask(unsigned mask, const char *what) {
    if (!(mask >> emu_lane() & 1u)) {
        fprintf(stderr, "cuda_emu: kernel %s: %s by lane %d with a mask (0x%08x) without it\n",
                emu_kernel_name ? emu_kernel_name : "?", what, emu_lane(), mask);
        abort();
    }
}

/* One warp exchange of up to 64 bits: every live thread of the warp
   offers v, waits for the others, and takes lane src's (0..31). */
static inline unsigned long long emu_exchange64(unsigned long long v, int src) {
    int tid = (int)emu_thread.x, turn = emu_turn[tid];
    emu_turn[tid] = (unsigned char)!turn;
    emu_slots[turn][tid] = v;
    emu_wait(EMU_WARP_WAIT);
    return emu_slots[turn][(tid & ~31) + (src & 31)];
}
static inline float emu_exchange(float v, int src) {
    return __uint_as_float((unsigned)emu_exchange64(__float_as_uint(v), src));
}
/* any type of up to 8 bytes */
template <typename T> static inline T emu_shfl(T v, int src) {
    unsigned long long w = 0;
    static_assert(sizeof(T) <= sizeof w, "a shuffle of more than 64 bits");
    memcpy(&w, &v, sizeof(T));
    w = emu_exchange64(w, src);
    memcpy(&v, &w, sizeof(T));
    return v;
}
/* The source lane as CUDA's shuffles pick it within segments of width
   lanes; out of the segment (above it for xor and down, below it for up):
   the thread's own value. */
static inline int emu_src_idx(int lane, int src, int width) { return (lane & ~(width - 1)) | (src & (width - 1)); }
static inline int emu_src_xor(int lane, int m, int width) {
    int j = lane ^ m;
    return j > ((lane & ~(width - 1)) | (width - 1)) ? lane : j;
}
static inline int emu_src_down(int lane, int d, int width) {
    int j = lane + d;
    return j > ((lane & ~(width - 1)) | (width - 1)) ? lane : j;
}
static inline int emu_src_up(int lane, int d, int width) {
    int j = lane - d;
    return j < (lane & ~(width - 1)) ? lane : j;
}
#define EMU_SHUFFLES(T)                                                                      \
    static inline T __shfl_sync(unsigned mask, T v, int src, int width = 32) {              \
        emu_check_mask(mask, "__shfl_sync");                                                 \
        return emu_shfl(v, emu_src_idx(emu_lane(), src, width));                             \
    }                                                                                        \
    static inline T __shfl_xor_sync(unsigned mask, T v, int m, int width = 32) {            \
        emu_check_mask(mask, "__shfl_xor_sync");                                             \
        return emu_shfl(v, emu_src_xor(emu_lane(), m, width));                               \
    }                                                                                        \
    static inline T __shfl_down_sync(unsigned mask, T v, unsigned d, int width = 32) {      \
        emu_check_mask(mask, "__shfl_down_sync");                                            \
        return emu_shfl(v, emu_src_down(emu_lane(), (int)(d > 32u ? 32u : d), width));       \
    }                                                                                        \
    static inline T __shfl_up_sync(unsigned mask, T v, unsigned d, int width = 32) {        \
        emu_check_mask(mask, "__shfl_up_sync");                                              \
        return emu_shfl(v, emu_src_up(emu_lane(), (int)(d > 32u ? 32u : d), width));         \
    }
EMU_SHUFFLES(float)
EMU_SHUFFLES(int)
EMU_SHUFFLES(unsigned)
EMU_SHUFFLES(long)
EMU_SHUFFLES(unsigned long)
EMU_SHUFFLES(long long)
EMU_SHUFFLES(unsigned long long)
EMU_SHUFFLES(double)
EMU_SHUFFLES(__half)
EMU_SHUFFLES(__half2)
EMU_SHUFFLES(__nv_bfloat16)
EMU_SHUFFLES(__nv_bfloat162)
#undef EMU_SHUFFLES

static inline void __syncwarp(unsigned mask = 0xffffffffu) {
    emu_check_mask(mask, "__syncwarp");
    emu_wait(EMU_WARP_WAIT);
}
/* A vote: the bits of pred of the warp's live threads in mask (members:
   those threads). */
static inline unsigned emu_vote(unsigned mask, int pred, unsigned *members, const char *what) {
    int tid = (int)emu_thread.x, base = tid & ~31, n = (int)emu_block_dim.x;
    unsigned r = 0, in = 0;
    emu_check_mask(mask, what);
    emu_vote_slots[tid] = pred != 0;
    emu_wait(EMU_WARP_WAIT);
    for (int l = 0; l < 32 && base + l < n; l++) {
        if (!(mask >> l & 1u) || emu_state[base + l] == EMU_DONE) continue;
        in |= 1u << l;
        if (emu_vote_slots[base + l]) r |= 1u << l;
    }
    emu_wait(EMU_WARP_WAIT); /* (all have read the slots, and none has left) */
    *members = in;
    return r;
}
static inline unsigned __ballot_sync(unsigned mask, int pred) {
    unsigned in;
    return emu_vote(mask, pred, &in, "__ballot_sync");
}
static inline int __any_sync(unsigned mask, int pred) {
    unsigned in;
    return emu_vote(mask, pred, &in, "__any_sync") != 0;
}
static inline int __all_sync(unsigned mask, int pred) {
    unsigned in;
    return emu_vote(mask, pred, &in, "__all_sync") == in;
}
/* __syncthreads with a vote over the block's live threads */
static inline int emu_block_vote(int pred, int what) {
    int tid = (int)emu_thread.x, n = (int)emu_block_dim.x, count = 0, live = 0;
    emu_vote_slots[tid] = pred != 0;
    emu_wait(EMU_BLOCK_WAIT);
    for (int t = 0; t < n; t++)
        if (emu_state[t] != EMU_DONE) live++, count += emu_vote_slots[t] != 0;
    emu_wait(EMU_BLOCK_WAIT);
    return what == 0 ? count : what == 1 ? count != 0 : count == live;
}
static inline int __syncthreads_count(int pred) { return emu_block_vote(pred, 0); }
static inline int __syncthreads_or(int pred) { return emu_block_vote(pred, 1); }
static inline int __syncthreads_and(int pred) { return emu_block_vote(pred, 2); }

/* One pass: each runnable thread, in order, runs until it finishes or
   waits, then hands on to the next (emu_yield); the last comes back here
   (its own frame: nothing here lives across the jumps). */
static __attribute__((noinline)) void emu_pass(int first) {
#ifdef EMU_TSAN
    emu_tsan_host = __tsan_get_current_fiber();
#endif
    if (!__builtin_setjmp(emu_sched)) emu_enter(first);
}

/* (its own frame: getcontext returns twice) The stack has an inaccessible
   page below it: an overflow faults instead of writing over the heap. */
static __attribute__((noinline)) void emu_fiber_init(emu_fiber *f) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    void *m = mmap(NULL, EMU_STACK + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) {
        fprintf(stderr, "cuda_emu: no memory for a thread's stack\n");
        abort();
    }
    mprotect(m, page, PROT_NONE);
    f->stack = (char *)m + page;
    getcontext(&f->uc);
    f->uc.uc_stack.ss_sp = f->stack;
    f->uc.uc_stack.ss_size = EMU_STACK;
    f->uc.uc_link = NULL; /* the trampoline never returns */
    makecontext(&f->uc, emu_trampoline, 0);
#ifdef EMU_TSAN
    f->tsan = __tsan_create_fiber(0);
#endif
}

/* Rounds: a pass (every runnable thread runs until it finishes or waits),
   then a warp whose live threads all wait at a warp wait goes on, and the
   block when all its live threads wait at __syncthreads. */
static inline void emu_run_block(int n) {
    for (int t = 0; t < n; t++) {
        if (!emu_fibers[t].stack) emu_fiber_init(&emu_fibers[t]);
        emu_state[t] = EMU_RUN;
        emu_turn[t] = 0;
    }
    for (;;) {
        int ran = 0, done = 0, released = 0, at_barrier = 0, first = 0;
        while (first < n && emu_state[first] != EMU_RUN) first++;
        if (first < n) {
            emu_thread.y = emu_thread.z = 0;
            ran = 1;
            emu_pass(first);
        }
        for (int w = 0; w < n; w += 32) {
            int live = 0, waiting = 0, end = w + 32 < n ? w + 32 : n;
            for (int t = w; t < end; t++) {
                int st = emu_state[t];
                done += st == EMU_DONE, live += st != EMU_DONE;
                waiting += st == EMU_WARP_WAIT, at_barrier += st == EMU_BLOCK_WAIT;
            }
            if (live && waiting == live) {
                for (int t = w; t < end; t++)
                    if (emu_state[t] == EMU_WARP_WAIT) emu_state[t] = EMU_RUN;
                released = 1;
            }
        }
        if (done == n) return;
        if (at_barrier && at_barrier == n - done) {
            for (int t = 0; t < n; t++)
                if (emu_state[t] == EMU_BLOCK_WAIT) emu_state[t] = EMU_RUN;
            released = 1;
        }
        if (!ran && !released) {
            fprintf(stderr, "cuda_emu: deadlock: threads wait at a barrier others never reach (kernel %s)\n",
                    emu_kernel_name ? emu_kernel_name : "?");
            abort();
        }
    }
}

/* The fast path's block: each thread a plain call, in thread order (the
   order fibers that never wait run in). */
static inline void emu_run_block_plain(int n) {
    emu_plain = 1;
    emu_thread.y = emu_thread.z = 0;
    for (int t = 0; t < n; t++) {
        emu_thread.x = (unsigned)t;
        (*emu_body)();
    }
    emu_plain = 0;
}

/* ---- tensor cores: nvcuda::wmma ----
   Emulated simply: every thread of the warp holds the whole tile (as
   elements of the fragment's type, row by row) and computes the whole
   product; a store from all 32 threads writes the same values. So a
   fragment's num_elements and x[] are the whole tile here, where on a GPU
   each thread holds a few elements in an unspecified layout: code may
   treat x[] elementwise (scale, convert, clamp every element) but must not
   depend on which element a thread holds. mma_sync waits for the warp, as
   the warp-collective it is. */
namespace nvcuda {
namespace wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };
template <typename Use, int M, int N, int K> struct emu_shape;
template <int M, int N, int K> struct emu_shape<matrix_a, M, N, K> {
    enum { rows = M, cols = K };
};
template <int M, int N, int K> struct emu_shape<matrix_b, M, N, K> {
    enum { rows = K, cols = N };
};
template <int M, int N, int K> struct emu_shape<accumulator, M, N, K> {
    enum { rows = M, cols = N };
};
template <typename Use, int M, int N, int K, typename T, typename Layout = void> struct fragment {
    enum { rows = emu_shape<Use, M, N, K>::rows, cols = emu_shape<Use, M, N, K>::cols };
    enum { num_elements = rows * cols }; /* the whole tile (see above) */
    typedef T element_type;
    typedef T storage_element_type;
    T x[num_elements]; /* row r, column c at x[r * cols + c] */
};
template <typename T> struct emu_identity {
    typedef T type;
};
static inline float emu_get(float v) { return v; }
static inline float emu_get(__half v) { return __half2float(v); }
static inline float emu_get(__nv_bfloat16 v) { return __bfloat162float(v); }
static inline void emu_set(float *d, float v) { *d = v; }
static inline void emu_set(__half *d, float v) { *d = __float2half_rn(v); }
static inline void emu_set(__nv_bfloat16 *d, float v) { *d = __float2bfloat16_rn(v); }

/* CUDA's rules for a load or store: the pointer 256-bit aligned, the
   stride a multiple of 16 bytes */
static inline void emu_check_tile(const void *p, unsigned ldm, size_t elem, const char *what) {
    if ((uintptr_t)p % 32 || (ldm * elem) % 16) {
        fprintf(stderr,
                "cuda_emu: kernel %s: wmma::%s at %p with ldm %u (CUDA wants the pointer 32-byte aligned and ldm a "
                "multiple of %d elements)\n",
                emu_kernel_name ? emu_kernel_name : "?", what, p, ldm, (int)(16 / elem));
        abort();
    }
}
template <typename Use, int M, int N, int K, typename T, typename L>
static inline void fill_fragment(fragment<Use, M, N, K, T, L> &f, const typename emu_identity<T>::type &v) {
    for (int i = 0; i < f.num_elements; i++) f.x[i] = v;
}
template <typename Use, int M, int N, int K, typename T>
static inline void load_matrix_sync(fragment<Use, M, N, K, T, row_major> &f, const typename emu_identity<T>::type *p,
                                    unsigned ldm) {
    emu_check_tile(p, ldm, sizeof(T), "load_matrix_sync");
    for (int r = 0; r < f.rows; r++)
        for (int c = 0; c < f.cols; c++) f.x[r * f.cols + c] = p[(size_t)r * ldm + c];
}
template <typename Use, int M, int N, int K, typename T>
static inline void load_matrix_sync(fragment<Use, M, N, K, T, col_major> &f, const typename emu_identity<T>::type *p,
                                    unsigned ldm) {
    emu_check_tile(p, ldm, sizeof(T), "load_matrix_sync");
    for (int r = 0; r < f.rows; r++)
        for (int c = 0; c < f.cols; c++) f.x[r * f.cols + c] = p[(size_t)c * ldm + r];
}
template <int M, int N, int K, typename T>
static inline void load_matrix_sync(fragment<accumulator, M, N, K, T, void> &f, const typename emu_identity<T>::type *p,
                                    unsigned ldm, layout_t layout) {
    emu_check_tile(p, ldm, sizeof(T), "load_matrix_sync");
    for (int r = 0; r < M; r++)
        for (int c = 0; c < N; c++)
            f.x[r * N + c] = layout == mem_row_major ? p[(size_t)r * ldm + c] : p[(size_t)c * ldm + r];
}
template <int M, int N, int K, typename T>
static inline void store_matrix_sync(typename emu_identity<T>::type *p, const fragment<accumulator, M, N, K, T, void> &f,
                                     unsigned ldm, layout_t layout) {
    emu_check_tile(p, ldm, sizeof(T), "store_matrix_sync");
    for (int r = 0; r < M; r++)
        for (int c = 0; c < N; c++)
            (layout == mem_row_major ? p[(size_t)r * ldm + c] : p[(size_t)c * ldm + r]) = f.x[r * N + c];
}
/* d = a b + c, in float (d may be c) */
template <int M, int N, int K, typename Td, typename Ta, typename La, typename Tb, typename Lb, typename Tc>
static inline void mma_sync(fragment<accumulator, M, N, K, Td, void> &d, const fragment<matrix_a, M, N, K, Ta, La> &a,
                            const fragment<matrix_b, M, N, K, Tb, Lb> &b, const fragment<accumulator, M, N, K, Tc, void> &c,
                            bool = false) {
    /* Every lane holds the whole tiles, the same ones: the product is made
       once per warp and the other lanes, finding the same inputs, copy it
       (a lane with other inputs makes its own). */
    static float last_in[EMU_MAX_THREADS / 32][3 * 32 * 32], last_out[EMU_MAX_THREADS / 32][32 * 32];
    static int last_n[EMU_MAX_THREADS / 32];
    float in[M * K + K * N + M * N], *af = in, *bf = in + M * K, t[M * N];
    int w = (int)threadIdx.x / 32, n_in = M * K + K * N + M * N;
    __syncwarp();
    for (int i = 0; i < M * K; i++) af[i] = emu_get(a.x[i]);
    for (int i = 0; i < K * N; i++) bf[i] = emu_get(b.x[i]);
    for (int i = 0; i < M * N; i++) in[M * K + K * N + i] = t[i] = emu_get(c.x[i]);
    if (n_in <= 3 * 32 * 32 && M * N <= 32 * 32 && last_n[w] == n_in && !memcmp(last_in[w], in, sizeof in)) {
        for (int i = 0; i < M * N; i++) emu_set(&d.x[i], last_out[w][i]);
        return;
    }
    for (int r = 0; r < M; r++) /* each t[r][col] = c + a[r][0] b[0][col] + a[r][1] b[1][col] + ..., in order */
        for (int l = 0; l < K; l++) {
            float ar = af[r * K + l];
            for (int col = 0; col < N; col++) t[r * N + col] += ar * bf[l * N + col];
        }
    if (n_in <= 3 * 32 * 32 && M * N <= 32 * 32) {
        memcpy(last_in[w], in, sizeof in);
        memcpy(last_out[w], t, sizeof t);
        last_n[w] = n_in;
    }
    for (int i = 0; i < M * N; i++) emu_set(&d.x[i], t[i]);
}
} /* namespace wmma */
} /* namespace nvcuda */

/* ---- the runtime ---- */
typedef int cudaError_t;
enum {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidPitchValue = 12,
    cudaErrorInvalidDevicePointer = 17
};
enum cudaMemcpyKind {
    cudaMemcpyHostToHost,
    cudaMemcpyHostToDevice,
    cudaMemcpyDeviceToHost,
    cudaMemcpyDeviceToDevice,
    cudaMemcpyDefault
};
enum { cudaStreamDefault = 0, cudaStreamNonBlocking = 1 };
enum { cudaEventDefault = 0, cudaEventBlockingSync = 1, cudaEventDisableTiming = 2 };
enum cudaStreamCaptureMode { cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal, cudaStreamCaptureModeRelaxed };
enum cudaStreamCaptureStatus { cudaStreamCaptureStatusNone, cudaStreamCaptureStatusActive, cudaStreamCaptureStatusInvalidated };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8, cudaFuncAttributePreferredSharedMemoryCarveout = 9 };
enum cudaDeviceAttr {
    cudaDevAttrMaxThreadsPerBlock = 1,
    cudaDevAttrMaxSharedMemoryPerBlock = 8,
    cudaDevAttrWarpSize = 10,
    cudaDevAttrMultiProcessorCount = 16,
    cudaDevAttrComputeCapabilityMajor = 75,
    cudaDevAttrComputeCapabilityMinor = 76,
    cudaDevAttrMaxSharedMemoryPerBlockOptin = 97
};
struct emu_stream {
    int capturing;
    cudaStreamCaptureMode mode;
    std::vector<std::function<void()> > ops;
};
struct emu_graph {
    std::vector<std::function<void()> > ops;
};
struct emu_event {
    double t;
    int recorded;
};
typedef emu_stream *cudaStream_t;
typedef emu_graph *cudaGraph_t;
typedef emu_graph *cudaGraphExec_t;
typedef emu_event *cudaEvent_t;

/* The emulated device: an A100-like part, compute capability 8.0 (what the
   emulation provides: dp4a, f16/bf16 wmma; not asynchronous copies or
   inline PTX). Its memory can be made smaller with
   INFER_CUDA_EMU_MEM_MB=n in the environment (to test running out). */
#define EMU_SHARED_DEFAULT (48 * 1024)
#define EMU_SHARED_OPTIN (163 * 1024)
struct cudaDeviceProp {
    char name[256];
    int major, minor;
    int multiProcessorCount;
    size_t totalGlobalMem;
    int memoryBusWidth;  /* bits */
    int memoryClockRate; /* kHz */
    size_t sharedMemPerBlock, sharedMemPerBlockOptin, sharedMemPerMultiprocessor;
    int warpSize, maxThreadsPerBlock, maxThreadsPerMultiProcessor, regsPerBlock, clockRate, l2CacheSize;
    size_t totalConstMem;
    int maxThreadsDim[3], maxGridSize[3];
};

enum { EMU_COUNT_KERNELS, EMU_COUNT_GRAPHS, EMU_COUNT_GRAPH_KERNELS, EMU_COUNT_CUBLAS, EMU_COUNT_MEMCPYS };
static long long emu_counts[5];
static int emu_in_graph;  /* a graph launch is running its work */
/* streams capturing in a mode that forbids synchronous calls: Global
   mode in any thread, ThreadLocal mode in the thread that captures */
static int emu_capturing;
static thread_local int emu_capturing_here;
extern "C" void infer_cuda_emu_counts(long long out[5]);
extern "C" void infer_cuda_emu_reset_counts(void);

static inline size_t emu_total_mem() {
    static size_t total;
    if (!total) {
        const char *e = getenv("INFER_CUDA_EMU_MEM_MB");
        total = e && atol(e) > 0 ? (size_t)atol(e) << 20 : (size_t)40 << 30;
    }
    return total;
}
struct emu_alloc {
    void *base;
    size_t n;
    int device;
};
static std::map<void *, emu_alloc> emu_allocs;
static size_t emu_allocated;

static inline void emu_no_capture(const char *what) {
    if (emu_capturing || emu_capturing_here) {
        fprintf(stderr, "cuda_emu: %s while a stream captures a graph (CUDA refuses it during capture)\n", what);
        abort();
    }
}

static inline const char *cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidPitchValue: return "invalid pitch argument";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    default: return "emulated error";
    }
}
static inline const char *cudaGetErrorName(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    default: return "cudaErrorUnknown";
    }
}
static inline cudaError_t cudaGetLastError() { return cudaSuccess; }
static inline cudaError_t cudaPeekAtLastError() { return cudaSuccess; }
static inline cudaError_t cudaGetDeviceCount(int *n) {
    *n = 1;
    return cudaSuccess;
}
static inline cudaError_t cudaSetDevice(int d) { return d == 0 ? cudaSuccess : cudaErrorInvalidValue; }
static inline cudaError_t cudaGetDevice(int *d) {
    *d = 0;
    return cudaSuccess;
}
static inline cudaError_t cudaRuntimeGetVersion(int *v) {
    *v = 12000;
    return cudaSuccess;
}
static inline cudaError_t cudaDriverGetVersion(int *v) {
    *v = 12000;
    return cudaSuccess;
}
static inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int d) {
    if (d != 0) return cudaErrorInvalidValue;
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "CPU emulation (tests/cuda_emu.h)");
    p->major = 8, p->minor = 0;
    p->multiProcessorCount = 108;
    p->totalGlobalMem = emu_total_mem();
    p->memoryBusWidth = 5120;
    p->memoryClockRate = 1215000;
    p->sharedMemPerBlock = EMU_SHARED_DEFAULT;
    p->sharedMemPerBlockOptin = EMU_SHARED_OPTIN;
    p->sharedMemPerMultiprocessor = 164 * 1024;
    p->warpSize = 32;
    p->maxThreadsPerBlock = EMU_MAX_THREADS;
    p->maxThreadsPerMultiProcessor = 2048;
    p->regsPerBlock = 65536;
    p->clockRate = 1410000;
    p->l2CacheSize = 40 * 1024 * 1024;
    p->totalConstMem = 64 * 1024;
    p->maxThreadsDim[0] = 1024, p->maxThreadsDim[1] = 1024, p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = INT_MAX, p->maxGridSize[1] = 65535, p->maxGridSize[2] = 65535;
    return cudaSuccess;
}
static inline cudaError_t cudaDeviceGetAttribute(int *v, cudaDeviceAttr a, int d) {
    cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, d)) return cudaErrorInvalidValue;
    switch (a) {
    case cudaDevAttrMaxThreadsPerBlock: *v = p.maxThreadsPerBlock; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *v = (int)p.sharedMemPerBlock; break;
    case cudaDevAttrWarpSize: *v = p.warpSize; break;
    case cudaDevAttrMultiProcessorCount: *v = p.multiProcessorCount; break;
    case cudaDevAttrComputeCapabilityMajor: *v = p.major; break;
    case cudaDevAttrComputeCapabilityMinor: *v = p.minor; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *v = (int)p.sharedMemPerBlockOptin; break;
    default: return cudaErrorInvalidValue;
    }
    return cudaSuccess;
}
static inline cudaError_t cudaDeviceSynchronize() {
    emu_no_capture("cudaDeviceSynchronize");
    return cudaSuccess;
}
static inline cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total) {
    *total = emu_total_mem();
    *free_bytes = *total - emu_allocated;
    return cudaSuccess;
}
/* Device memory: zeroed host memory, 256-byte aligned as cudaMalloc's,
   counted against the emulated device's size. */
/* One device for the whole process: host threads that use it (several
   contexts, a server's workers) take turns, each call or launch whole. */
static std::recursive_mutex emu_device_lock;
#define EMU_LOCKED std::lock_guard<std::recursive_mutex> emu_guard(emu_device_lock)

static inline cudaError_t emu_malloc(void **p, size_t n, int device) {
    EMU_LOCKED;
    *p = NULL;
    if (!n) return cudaSuccess;
    if (device && n > emu_total_mem() - emu_allocated) return cudaErrorMemoryAllocation;
    void *base = calloc(1, n + 256);
    if (!base) return cudaErrorMemoryAllocation;
    *p = (void *)(((uintptr_t)base + 255) & ~(uintptr_t)255);
    emu_alloc a = {base, n, device};
    emu_allocs[*p] = a;
    if (device) emu_allocated += n;
    return cudaSuccess;
}
static inline cudaError_t emu_free(void *p, int device, const char *what) {
    EMU_LOCKED;
    if (!p) return cudaSuccess;
    std::map<void *, emu_alloc>::iterator it = emu_allocs.find(p);
    if (it == emu_allocs.end() || it->second.device != device) {
        fprintf(stderr, "cuda_emu: %s(%p): not a pointer %s returned (freed twice?)\n", what, p,
                device ? "cudaMalloc" : "cudaMallocHost");
        abort();
    }
    if (device) emu_allocated -= it->second.n;
    free(it->second.base);
    emu_allocs.erase(it);
    return cudaSuccess;
}
static inline cudaError_t cudaMalloc(void **p, size_t n) {
    emu_no_capture("cudaMalloc");
    return emu_malloc(p, n, 1);
}
template <typename T> static inline cudaError_t cudaMalloc(T **p, size_t n) { return cudaMalloc((void **)p, n); }
static inline cudaError_t cudaFree(void *p) {
    emu_no_capture("cudaFree");
    return emu_free(p, 1, "cudaFree");
}
static inline cudaError_t cudaMallocHost(void **p, size_t n) { return emu_malloc(p, n, 0); }
template <typename T> static inline cudaError_t cudaMallocHost(T **p, size_t n) { return cudaMallocHost((void **)p, n); }
static inline cudaError_t cudaFreeHost(void *p) { return emu_free(p, 0, "cudaFreeHost"); }

static inline void emu_submit(cudaStream_t s, const std::function<void()> &op) {
    EMU_LOCKED;
    if (s && s->capturing) s->ops.push_back(op);
    else op();
}
/* (memmove: overlapping ranges as a device-to-device copy has them) */
static inline cudaError_t cudaMemcpy(void *d, const void *s, size_t n, cudaMemcpyKind) {
    EMU_LOCKED;
    emu_no_capture("cudaMemcpy");
    emu_counts[EMU_COUNT_MEMCPYS]++;
    if (n) memmove(d, s, n);
    return cudaSuccess;
}
static inline cudaError_t cudaMemcpyAsync(void *d, const void *src, size_t n, cudaMemcpyKind, cudaStream_t s = 0) {
    emu_submit(s, [=]() {
        emu_counts[EMU_COUNT_MEMCPYS]++;
        if (n) memmove(d, src, n);
    });
    return cudaSuccess;
}
static inline void emu_memcpy2d(void *d, size_t dpitch, const void *s, size_t spitch, size_t width, size_t height) {
    emu_counts[EMU_COUNT_MEMCPYS]++;
    for (size_t r = 0; r < height && width; r++) memmove((char *)d + r * dpitch, (const char *)s + r * spitch, width);
}
static inline cudaError_t cudaMemcpy2D(void *d, size_t dpitch, const void *s, size_t spitch, size_t width,
                                       size_t height, cudaMemcpyKind) {
    emu_no_capture("cudaMemcpy2D");
    if (width > dpitch || width > spitch) return cudaErrorInvalidPitchValue;
    emu_memcpy2d(d, dpitch, s, spitch, width, height);
    return cudaSuccess;
}
static inline cudaError_t cudaMemcpy2DAsync(void *d, size_t dpitch, const void *src, size_t spitch, size_t width,
                                            size_t height, cudaMemcpyKind, cudaStream_t s = 0) {
    if (width > dpitch || width > spitch) return cudaErrorInvalidPitchValue;
    emu_submit(s, [=]() { emu_memcpy2d(d, dpitch, src, spitch, width, height); });
    return cudaSuccess;
}
static inline cudaError_t cudaMemset(void *d, int value, size_t n) {
    EMU_LOCKED;
    emu_no_capture("cudaMemset");
    if (n) memset(d, value, n);
    return cudaSuccess;
}
static inline cudaError_t cudaMemsetAsync(void *d, int value, size_t n, cudaStream_t s = 0) {
    emu_submit(s, [=]() {
        if (n) memset(d, value, n);
    });
    return cudaSuccess;
}
/* __constant__ / __device__ variables are plain globals here */
template <typename T>
static inline cudaError_t cudaMemcpyToSymbol(const T &symbol, const void *src, size_t n, size_t offset = 0,
                                             cudaMemcpyKind = cudaMemcpyHostToDevice) {
    emu_no_capture("cudaMemcpyToSymbol");
    emu_counts[EMU_COUNT_MEMCPYS]++;
    memmove((char *)&symbol + offset, src, n);
    return cudaSuccess;
}
static inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned) {
    *s = new emu_stream();
    (*s)->capturing = 0;
    (*s)->mode = cudaStreamCaptureModeGlobal;
    return cudaSuccess;
}
static inline cudaError_t cudaStreamCreate(cudaStream_t *s) { return cudaStreamCreateWithFlags(s, cudaStreamDefault); }
static inline cudaError_t cudaStreamDestroy(cudaStream_t s) {
    if (s && s->capturing && s->mode == cudaStreamCaptureModeGlobal) emu_capturing--;
    if (s && s->capturing && s->mode == cudaStreamCaptureModeThreadLocal) emu_capturing_here--;
    delete s;
    return cudaSuccess;
}
static inline cudaError_t cudaStreamSynchronize(cudaStream_t) {
    emu_no_capture("cudaStreamSynchronize");
    return cudaSuccess;
}
static inline cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode) {
    if (!s || s->capturing) return cudaErrorInvalidValue; /* (the legacy stream cannot capture) */
    s->capturing = 1;
    s->mode = mode;
    s->ops.clear();
    if (mode == cudaStreamCaptureModeGlobal) emu_capturing++;
    if (mode == cudaStreamCaptureModeThreadLocal) emu_capturing_here++;
    return cudaSuccess;
}
static inline cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g) {
    if (!s || !s->capturing) return cudaErrorInvalidValue;
    *g = new emu_graph();
    (*g)->ops.swap(s->ops);
    s->capturing = 0;
    if (s->mode == cudaStreamCaptureModeGlobal) emu_capturing--;
    if (s->mode == cudaStreamCaptureModeThreadLocal) emu_capturing_here--;
    return cudaSuccess;
}
static inline cudaError_t cudaStreamIsCapturing(cudaStream_t s, cudaStreamCaptureStatus *st) {
    *st = s && s->capturing ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
    return cudaSuccess;
}
static inline cudaError_t cudaGraphInstantiate(cudaGraphExec_t *e, cudaGraph_t g, unsigned long long = 0) {
    *e = new emu_graph(*g);
    return cudaSuccess;
}
static inline cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *e, cudaGraph_t g, unsigned long long f = 0) {
    return cudaGraphInstantiate(e, g, f);
}
static inline cudaError_t cudaGraphLaunch(cudaGraphExec_t e, cudaStream_t s) {
    EMU_LOCKED;
    emu_submit(s, [=]() {
        int outer = emu_in_graph;
        emu_counts[EMU_COUNT_GRAPHS]++;
        emu_in_graph = 1;
        for (size_t i = 0; i < e->ops.size(); i++) e->ops[i]();
        emu_in_graph = outer;
    });
    return cudaSuccess;
}
static inline cudaError_t cudaGraphDestroy(cudaGraph_t g) {
    delete g;
    return cudaSuccess;
}
static inline cudaError_t cudaGraphExecDestroy(cudaGraphExec_t e) {
    delete e;
    return cudaSuccess;
}

/* events: the wall clock when the stream reaches the record */
static inline double emu_now_ms() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}
static inline cudaError_t cudaEventCreate(cudaEvent_t *e) {
    *e = new emu_event();
    (*e)->t = 0, (*e)->recorded = 0;
    return cudaSuccess;
}
static inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned) { return cudaEventCreate(e); }
static inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s = 0) {
    if (!e) return cudaErrorInvalidValue;
    emu_submit(s, [=]() {
        e->t = emu_now_ms();
        e->recorded = 1;
    });
    return cudaSuccess;
}
static inline cudaError_t cudaEventSynchronize(cudaEvent_t e) { return e ? cudaSuccess : cudaErrorInvalidValue; }
static inline cudaError_t cudaEventQuery(cudaEvent_t e) { return e ? cudaSuccess : cudaErrorInvalidValue; }
static inline cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b) {
    if (!a || !b || !a->recorded || !b->recorded) return cudaErrorInvalidValue;
    *ms = (float)(b->t - a->t);
    return cudaSuccess;
}
static inline cudaError_t cudaEventDestroy(cudaEvent_t e) {
    delete e;
    return cudaSuccess;
}
static inline cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t e, unsigned = 0) {
    return e ? cudaSuccess : cudaErrorInvalidValue;
}

/* The dynamic shared memory each kernel may take (cudaFuncSetAttribute):
   as on a GPU, more than 48 KiB needs it, and no kernel gets more than
   the device's opt-in limit. */
static std::map<void (*)(), size_t> emu_max_dynamic_shared;
template <typename F> static inline cudaError_t cudaFuncSetAttribute(F *func, cudaFuncAttribute attr, int value) {
    if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
        if (value < 0 || (size_t)value > EMU_SHARED_OPTIN) return cudaErrorInvalidValue;
        emu_max_dynamic_shared[reinterpret_cast<void (*)()>(func)] = (size_t)value;
    }
    return cudaSuccess;
}

/* INFER_LAUNCH(grid, block, shared, stream, kernel)(args...) */
static inline int emu_fast_path_enabled() {
    static int on = -1;
    if (on < 0) {
        const char *e = getenv("INFER_CUDA_EMU_NO_FAST_PATH");
        on = !(e && *e && strcmp(e, "0") != 0);
    }
    return on;
}
static inline void emu_run_grid(const char *name, void (*key)(), dim3 g, dim3 b, size_t sh, std::function<void()> *body) {
    /* per launch, not per kernel: one kernel may wait in one launch (a
       norm given) and not in another */
    int mode = 0;
    (void)key;
    emu_counts[emu_in_graph ? EMU_COUNT_GRAPH_KERNELS : EMU_COUNT_KERNELS]++;
    emu_shared_mem.assign(sh + 16 + 256, 0xAB); /* not zeroed on a GPU either */
    emu_shared_base = (unsigned char *)(((uintptr_t)emu_shared_mem.data() + 255) & ~(uintptr_t)255);
    emu_body = body;
    emu_kernel_name = name;
    emu_grid_dim = g;
    emu_block_dim = b;
    for (unsigned z = 0; z < g.z; z++)
        for (unsigned y = 0; y < g.y; y++)
            for (unsigned x = 0; x < g.x; x++) {
                emu_block.x = x, emu_block.y = y, emu_block.z = z;
                if (mode == 2) {
                    emu_run_block_plain((int)b.x);
                } else {
                    emu_waited = 0;
                    emu_run_block((int)b.x);
                    if (mode == 0) mode = emu_waited || !emu_fast_path_enabled() ? 1 : 2;
                }
            }
    emu_body = NULL;
    emu_kernel_name = NULL;
}
static inline void emu_check_launch(const char *name, void (*key)(), dim3 g, dim3 b, size_t sh) {
    if (b.x * b.y * b.z > EMU_MAX_THREADS || b.x == 0 || b.y != 1 || b.z != 1) {
        fprintf(stderr, "cuda_emu: kernel %s: blocks of %u x %u x %u threads are not emulated (1 to %d along x)\n", name,
                b.x, b.y, b.z, EMU_MAX_THREADS);
        abort();
    }
    if (g.x == 0 || g.y == 0 || g.z == 0 || g.y > 65535 || g.z > 65535) {
        fprintf(stderr, "cuda_emu: kernel %s: a grid of %u x %u x %u blocks (CUDA refuses it)\n", name, g.x, g.y, g.z);
        abort();
    }
    if (sh > EMU_SHARED_DEFAULT) {
        std::map<void (*)(), size_t>::iterator it = emu_max_dynamic_shared.find(key);
        size_t allowed = it == emu_max_dynamic_shared.end() ? EMU_SHARED_DEFAULT : it->second;
        if (sh > allowed) {
            fprintf(stderr,
                    "cuda_emu: kernel %s: %zu bytes of dynamic shared memory, above the %zu it may take "
                    "(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, n) raises it, up "
                    "to %d)\n",
                    name, sh, allowed, EMU_SHARED_OPTIN);
            abort();
        }
    }
}
template <typename... P> struct emu_launcher {
    const char *name;
    dim3 grid, block;
    size_t shared;
    cudaStream_t stream;
    void (*kernel)(P...);
    void operator()(P... args) const { /* (the kernel's own types: arguments convert as in a call) */
        dim3 g = grid, b = block;
        size_t sh = shared;
        void (*k)(P...) = kernel;
        void (*key)() = reinterpret_cast<void (*)()>(k);
        const char *nm = name;
        emu_check_launch(nm, key, g, b, sh);
        emu_submit(stream, [=]() {
            std::function<void()> body = [&]() { k(args...); };
            emu_run_grid(nm, key, g, b, sh, &body);
        });
    }
};
template <typename... P>
static emu_launcher<P...> emu_launch(dim3 g, dim3 b, size_t sh, cudaStream_t s, const char *name, void (*k)(P...)) {
    emu_launcher<P...> l;
    l.name = name, l.grid = g, l.block = b, l.shared = sh, l.stream = s, l.kernel = k;
    return l;
}
#define INFER_LAUNCH(grid, block, shared, stream, ...) emu_launch(grid, block, shared, stream, #__VA_ARGS__, __VA_ARGS__)

/* ---- cuBLAS (<cublas_v2.h>): GEMMs as float loops, column major ---- */
typedef enum {
    CUBLAS_STATUS_SUCCESS = 0,
    CUBLAS_STATUS_NOT_INITIALIZED = 1,
    CUBLAS_STATUS_ALLOC_FAILED = 3,
    CUBLAS_STATUS_INVALID_VALUE = 7,
    CUBLAS_STATUS_ARCH_MISMATCH = 8,
    CUBLAS_STATUS_MAPPING_ERROR = 11,
    CUBLAS_STATUS_EXECUTION_FAILED = 13,
    CUBLAS_STATUS_INTERNAL_ERROR = 14,
    CUBLAS_STATUS_NOT_SUPPORTED = 15,
    CUBLAS_STATUS_LICENSE_ERROR = 16
} cublasStatus_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 } cublasOperation_t;
typedef enum {
    CUBLAS_DEFAULT_MATH = 0,
    CUBLAS_TENSOR_OP_MATH = 1,
    CUBLAS_PEDANTIC_MATH = 2,
    CUBLAS_TF32_TENSOR_OP_MATH = 3
} cublasMath_t;
typedef enum cudaDataType_t {
    CUDA_R_32F = 0,
    CUDA_R_64F = 1,
    CUDA_R_16F = 2,
    CUDA_R_8I = 3,
    CUDA_R_32I = 10,
    CUDA_R_16BF = 14
} cudaDataType_t;
typedef cudaDataType_t cudaDataType;
typedef enum {
    CUBLAS_COMPUTE_16F = 64,
    CUBLAS_COMPUTE_16F_PEDANTIC = 65,
    CUBLAS_COMPUTE_32F = 68,
    CUBLAS_COMPUTE_32F_PEDANTIC = 69,
    CUBLAS_COMPUTE_32F_FAST_16F = 74,
    CUBLAS_COMPUTE_32F_FAST_16BF = 75,
    CUBLAS_COMPUTE_32F_FAST_TF32 = 77,
    CUBLAS_COMPUTE_64F = 70,
    CUBLAS_COMPUTE_32I = 72
} cublasComputeType_t;
typedef enum { CUBLAS_GEMM_DEFAULT = -1, CUBLAS_GEMM_DEFAULT_TENSOR_OP = 99 } cublasGemmAlgo_t;
struct emu_cublas {
    cudaStream_t stream;
    cublasMath_t math;
};
typedef emu_cublas *cublasHandle_t;

static inline cublasStatus_t cublasCreate(cublasHandle_t *h) {
    *h = new emu_cublas();
    (*h)->stream = 0, (*h)->math = CUBLAS_DEFAULT_MATH;
    return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasDestroy(cublasHandle_t h) {
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s) {
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    h->stream = s;
    return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasGetStream(cublasHandle_t h, cudaStream_t *s) {
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    *s = h->stream;
    return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t m) {
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    h->math = m; /* (no effect: float loops either way) */
    return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasSetWorkspace(cublasHandle_t h, void *, size_t) {
    return h ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_INITIALIZED;
}
static inline const char *cublasGetStatusName(cublasStatus_t s) {
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "CUBLAS_STATUS_INTERNAL_ERROR";
    }
}
static inline const char *cublasGetStatusString(cublasStatus_t s) {
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
    default: return "an internal operation failed";
    }
}

static inline size_t emu_type_size(cudaDataType_t t) { return t == CUDA_R_32F ? 4 : 2; }
static inline float emu_load(const void *p, cudaDataType_t t, size_t i) {
    switch (t) {
    case CUDA_R_16F: return __half2float(((const __half *)p)[i]);
    case CUDA_R_16BF: return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
    default: return ((const float *)p)[i];
    }
}
static inline void emu_store(void *p, cudaDataType_t t, size_t i, float v) {
    switch (t) {
    case CUDA_R_16F: ((__half *)p)[i] = __float2half_rn(v); break;
    case CUDA_R_16BF: ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v); break;
    default: ((float *)p)[i] = v;
    }
}
static inline float emu_dot(const float *a, const float *b, int k) {
    float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int l = 0;
    for (; l + 4 <= k; l += 4) {
        s0 += a[l] * b[l];
        s1 += a[l + 1] * b[l + 1];
        s2 += a[l + 2] * b[l + 2];
        s3 += a[l + 3] * b[l + 3];
    }
    for (; l < k; l++) s0 += a[l] * b[l];
    return (s0 + s1) + (s2 + s3);
}
/* C = alpha op(A) op(B) + beta C for one matrix: op(A) (m x k) and op(B)^T
   (n x k) first copied to float rows of k (rounded to the compute type's
   input precision for the FAST types), so each output is a dot product
   over contiguous memory. beta 0: C is not read (NaN there stays out). */
static inline void emu_gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha, const void *A,
                     cudaDataType_t at, int lda, const void *B, cudaDataType_t bt, int ldb, float beta, void *C,
                     cudaDataType_t ct, int ldc, cublasComputeType_t ctype, std::vector<float> &a,
                     std::vector<float> &b) {
    a.resize((size_t)m * k);
    b.resize((size_t)n * k);
    for (int l = 0; l < k; l++)
        for (int i = 0; i < m; i++)
            a[(size_t)i * k + l] = emu_load(A, at, ta == CUBLAS_OP_N ? i + (size_t)l * lda : l + (size_t)i * lda);
    for (int j = 0; j < n; j++)
        for (int l = 0; l < k; l++)
            b[(size_t)j * k + l] = emu_load(B, bt, tb == CUBLAS_OP_N ? l + (size_t)j * ldb : j + (size_t)l * ldb);
    if (ctype == CUBLAS_COMPUTE_32F_FAST_16F || ctype == CUBLAS_COMPUTE_32F_FAST_16BF ||
        ctype == CUBLAS_COMPUTE_32F_FAST_TF32) {
        std::vector<float> *v[2] = {&a, &b};
        for (int w = 0; w < 2; w++)
            for (size_t i = 0; i < v[w]->size(); i++) {
                float x = (*v[w])[i];
                if (ctype == CUBLAS_COMPUTE_32F_FAST_16F) x = __half2float(__float2half_rn(x));
                else if (ctype == CUBLAS_COMPUTE_32F_FAST_16BF) x = __bfloat162float(__float2bfloat16_rn(x));
                else if (x == x) x = __uint_as_float((__float_as_uint(x) + 0xfffu + ((__float_as_uint(x) >> 13) & 1u)) & ~0x1fffu);
                (*v[w])[i] = x;
            }
    }
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            size_t c = i + (size_t)j * ldc;
            float v = alpha * emu_dot(&a[(size_t)i * k], &b[(size_t)j * k], k);
            if (beta != 0.0f) v += beta * emu_load(C, ct, c);
            emu_store(C, ct, c, v);
        }
}
/* The checks cuBLAS makes (its statuses), and types it takes that the
   emulation lacks (those abort: a test must not pass for want of them). */
static inline cublasStatus_t emu_gemm_check(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                            int k, const void *alpha, cudaDataType_t at, int lda, cudaDataType_t bt,
                                            int ldb, const void *beta, cudaDataType_t ct, int ldc,
                                            cublasComputeType_t ctype, int batch) {
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    if ((ta != CUBLAS_OP_N && ta != CUBLAS_OP_T && ta != CUBLAS_OP_C) ||
        (tb != CUBLAS_OP_N && tb != CUBLAS_OP_T && tb != CUBLAS_OP_C) || m < 0 || n < 0 || k < 0 || batch < 0 ||
        !alpha || !beta || lda < max(1, ta == CUBLAS_OP_N ? m : k) || ldb < max(1, tb == CUBLAS_OP_N ? k : n) ||
        ldc < max(1, m))
        return CUBLAS_STATUS_INVALID_VALUE;
    int f32 = at == CUDA_R_32F && bt == CUDA_R_32F && ct == CUDA_R_32F;
    switch (ctype) {
    case CUBLAS_COMPUTE_32F:
    case CUBLAS_COMPUTE_32F_PEDANTIC:
        if (f32 || (at == bt && (at == CUDA_R_16F || at == CUDA_R_16BF) && (ct == at || ct == CUDA_R_32F)))
            return CUBLAS_STATUS_SUCCESS;
        if (at == CUDA_R_8I && bt == CUDA_R_8I && ct == CUDA_R_32F) break;
        return CUBLAS_STATUS_NOT_SUPPORTED;
    case CUBLAS_COMPUTE_32F_FAST_16F:
    case CUBLAS_COMPUTE_32F_FAST_16BF:
    case CUBLAS_COMPUTE_32F_FAST_TF32: return f32 ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_SUPPORTED;
    case CUBLAS_COMPUTE_16F:
    case CUBLAS_COMPUTE_16F_PEDANTIC:
    case CUBLAS_COMPUTE_64F:
    case CUBLAS_COMPUTE_32I: break;
    default: return CUBLAS_STATUS_INVALID_VALUE;
    }
    fprintf(stderr, "cuda_emu: cuBLAS GEMM with compute type %d and types %d, %d, %d is not emulated\n", (int)ctype,
            (int)at, (int)bt, (int)ct);
    abort();
}
static inline cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
                                                        int m, int n, int k, const void *alpha, const void *A,
                                                        cudaDataType_t at, int lda, long long sa, const void *B,
                                                        cudaDataType_t bt, int ldb, long long sb, const void *beta,
                                                        void *C, cudaDataType_t ct, int ldc, long long sc, int batch,
                                                        cublasComputeType_t ctype, cublasGemmAlgo_t) {
    cublasStatus_t st = emu_gemm_check(h, ta, tb, m, n, k, alpha, at, lda, bt, ldb, beta, ct, ldc, ctype, batch);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    float al = *(const float *)alpha, be = *(const float *)beta; /* host scalars: read at the call */
    emu_submit(h->stream, [=]() {
        std::vector<float> a, b;
        emu_counts[EMU_COUNT_CUBLAS]++;
        if (!m || !n) return;
        for (int i = 0; i < batch; i++)
            emu_gemm(ta, tb, m, n, k, al, (const char *)A + (ptrdiff_t)(i * sa) * (ptrdiff_t)emu_type_size(at), at,
                     lda, (const char *)B + (ptrdiff_t)(i * sb) * (ptrdiff_t)emu_type_size(bt), bt, ldb, be,
                     (char *)C + (ptrdiff_t)(i * sc) * (ptrdiff_t)emu_type_size(ct), ct, ldc, ctype, a, b);
    });
    return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                          int k, const void *alpha, const void *A, cudaDataType_t at, int lda,
                                          const void *B, cudaDataType_t bt, int ldb, const void *beta, void *C,
                                          cudaDataType_t ct, int ldc, cublasComputeType_t ctype, cublasGemmAlgo_t algo) {
    return cublasGemmStridedBatchedEx(h, ta, tb, m, n, k, alpha, A, at, lda, 0, B, bt, ldb, 0, beta, C, ct, ldc, 0, 1,
                                      ctype, algo);
}
static inline cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                         int k, const float *alpha, const float *A, int lda, const float *B, int ldb,
                                         const float *beta, float *C, int ldc) {
    return cublasGemmEx(h, ta, tb, m, n, k, alpha, A, CUDA_R_32F, lda, B, CUDA_R_32F, ldb, beta, C, CUDA_R_32F, ldc,
                        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

#endif

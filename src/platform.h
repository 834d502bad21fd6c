/* platform.h - the one place that knows the OS and the compiler: system
   headers, attributes and pragmas, atomics, threads and locks, the CPU's
   count and features, files by UTF-8 path, mapping, time and memory, each
   behind one name (platform.c has the bodies). Windows (MSVC, clang-cl,
   MinGW-w64) and POSIX (Linux, Android, macOS, Emscripten). No other part
   of the implementation tests _WIN32, _MSC_VER or __GNUC__.

   Two compiler families are told apart. GNU: GCC and clang, also clang-cl,
   for attributes (clang needs target attributes for intrinsics, whatever
   its driver). MSVC: _MSC_VER, clang-cl included, for builtins, atomics
   and CPU features, so that clang in MSVC mode compiles the branches cl.exe
   takes (the only MSVC-like compiler on Linux). */
#ifndef INFER_PLATFORM_H
#define INFER_PLATFORM_H
#include "infer_api.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

/* ---- which compiler, which OS ---- */
#if defined(__GNUC__) || defined(__clang__)
#define INFER__GNU 1
#endif
#if defined(_MSC_VER)
#define INFER__MSVC 1
#endif
#if defined(_WIN32)
#define INFER__WINDOWS 1
#endif

#if defined(INFER__WINDOWS)
/* the slim windows.h: no min/max macros, GDI, RPC or OLE, whose names
   (small, interface, near, ERROR) would reach the user's file too */
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#ifndef NOMINMAX
#define NOMINMAX
#endif
#ifndef NOGDI
#define NOGDI
#endif
#include <windows.h>
#include <process.h> /* _beginthreadex */
#include <psapi.h>   /* K32GetProcessMemoryInfo, in kernel32 itself */
#else
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(__linux__) || defined(__ANDROID__)
#include <sys/auxv.h> /* getauxval: the ARM kernels' features */
#endif
#if defined(__APPLE__)
#include <sys/sysctl.h>
#endif
#endif
#if defined(__EMSCRIPTEN_PTHREADS__)
#include <emscripten/threading.h>
#endif
#if defined(INFER__MSVC)
#include <intrin.h>
#endif

/* ---- attributes ---- */
#if defined(INFER__GNU)
#define INFER__UNUSED __attribute__((unused))
#if defined(__MINGW_PRINTF_FORMAT)
/* MinGW: the C library's printf (gnu_printf with its ANSI stdio, the
   -std=c99 default, where %zu works; else Microsoft's) */
#define INFER__PRINTF(f, a) __attribute__((format(__MINGW_PRINTF_FORMAT, f, a)))
#else
#define INFER__PRINTF(f, a) __attribute__((format(printf, f, a)))
#endif
#define INFER__NORETURN __attribute__((noreturn))
#define INFER__FORCE_INLINE static inline __attribute__((always_inline, unused))
#elif defined(INFER__MSVC)
#define INFER__UNUSED
#define INFER__PRINTF(f, a)
#define INFER__NORETURN __declspec(noreturn)
#define INFER__FORCE_INLINE static __forceinline
#else
#define INFER__UNUSED
#define INFER__PRINTF(f, a)
#define INFER__NORETURN
#define INFER__FORCE_INLINE static inline
#endif

/* A loop unrolled n times, where the compiler takes the hint (GCC and
   clang; MSVC has no such pragma for C). */
#define INFER__PRAGMA(x) _Pragma(#x)
#if defined(INFER__GNU)
#define INFER__UNROLL(n) INFER__PRAGMA(GCC unroll n)
#else
#define INFER__UNROLL(n)
#endif

/* Around stb_ds's implementation: its own warnings silenced. */
#if defined(INFER__GNU)
#define INFER__THIRD_PARTY_BEGIN                                                                                   \
    INFER__PRAGMA(GCC diagnostic push)                                                                             \
    INFER__PRAGMA(GCC diagnostic ignored "-Wsign-compare")                                                         \
    INFER__PRAGMA(GCC diagnostic ignored "-Wunused-function") INFER__PRAGMA(GCC diagnostic ignored "-Wpedantic")
#define INFER__THIRD_PARTY_END INFER__PRAGMA(GCC diagnostic pop)
#elif defined(INFER__MSVC)
#define INFER__THIRD_PARTY_BEGIN __pragma(warning(push)) __pragma(warning(disable : 4018 4244 4267 4505 4702))
#define INFER__THIRD_PARTY_END __pragma(warning(pop))
#else
#define INFER__THIRD_PARTY_BEGIN
#define INFER__THIRD_PARTY_END
#endif

/* Around the AVX-512 kernels: GCC 12's avx512fintrin.h passes a
   deliberately uninitialised _mm512_undefined_* value as the unused source
   of a masked builtin, and once an intrinsic is inlined into a kernel,
   -Wmaybe-uninitialized and -Wuninitialized flag it (hundreds of false
   positives at -O2 in a C++ build; GCC bug 105593). Only there, and only
   for GCC: clang's headers give no such warning. */
#if defined(__GNUC__) && !defined(__clang__)
#define INFER__AVX512_INTRINSICS_BEGIN                                                                             \
    INFER__PRAGMA(GCC diagnostic push)                                                                             \
    INFER__PRAGMA(GCC diagnostic ignored "-Wmaybe-uninitialized")                                                  \
    INFER__PRAGMA(GCC diagnostic ignored "-Wuninitialized")
#define INFER__AVX512_INTRINSICS_END INFER__PRAGMA(GCC diagnostic pop)
#else
#define INFER__AVX512_INTRINSICS_BEGIN
#define INFER__AVX512_INTRINSICS_END
#endif

/* ---- floating point as written ----
   mathfn.c's functions must round every step as written: a multiply and
   add fused into one rounding (FMA contraction) gives other bits. GCC
   contracts across statements in GNU modes on a CPU with FMA (not under
   -std=c99): its functions go between INFER__EXACT_FP_BEGIN and _END.
   clang contracts within an expression, unless told per block:
   INFER__EXACT_FP opens each function's body. MSVC's pragma lasts to the
   end of the file (off is its default anyway). */
#if defined(__clang__)
#define INFER__EXACT_FP _Pragma("STDC FP_CONTRACT OFF")
#else
#define INFER__EXACT_FP
#endif
#if defined(__GNUC__) && !defined(__clang__) && defined(__FP_FAST_FMA) && !defined(__STRICT_ANSI__)
#define INFER__EXACT_FP_BEGIN _Pragma("GCC push_options") _Pragma("GCC optimize(\"fp-contract=off\")")
#define INFER__EXACT_FP_END _Pragma("GCC pop_options")
#elif defined(INFER__MSVC) && !defined(__clang__)
#define INFER__EXACT_FP_BEGIN __pragma(fp_contract(off))
#define INFER__EXACT_FP_END
#else
#define INFER__EXACT_FP_BEGIN
#define INFER__EXACT_FP_END
#endif
/* The CPU's fused multiply-add, where the compiler targets one: one
   rounding, as C99's fmaf (infer__fmaf does it in software elsewhere) */
#if defined(INFER__GNU) && defined(__FP_FAST_FMAF)
#define INFER__HW_FMAF(x, y, z) __builtin_fmaf(x, y, z)
#endif

/* ---- vector instruction sets: which this compiler can build ----
   The kernels are compiled for every set the compiler knows and chosen at
   run time by infer__cpu_has (cpu.c), so the build needs no -m flags. GCC
   and clang need each function marked with its target (INFER__TARGET);
   MSVC compiles every intrinsic anywhere and needs none. */
#if (defined(__x86_64__) || defined(__i386__) || defined(_M_X64) || defined(_M_IX86)) &&                         \
    (defined(INFER__GNU) || defined(INFER__MSVC))
#define INFER__HAVE_X86 1
#endif
#if (defined(__aarch64__) && defined(INFER__GNU)) || (defined(_M_ARM64) && defined(INFER__MSVC))
#define INFER__HAVE_NEON 1
#endif

/* Under ThreadSanitizer the kernels go uninstrumented: each reads shared
   weights and writes rows its own thread owns, and instrumented they make a
   token about 300 times slower (SmolLM2 at 1.6 s a token), too slow for the
   server's test. The hand-offs between threads (threads.c) stay checked. */
#if defined(__SANITIZE_THREAD__)
#define INFER__NO_TSAN no_sanitize_thread,
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define INFER__NO_TSAN no_sanitize("thread"),
#endif
#endif
#ifndef INFER__NO_TSAN
#define INFER__NO_TSAN
#endif

/* A kernel for instruction set isa ("avx2,fma,f16c"), and a helper inlined
   into such kernels. */
#if defined(INFER__GNU)
#define INFER__TARGET(isa) __attribute__((target(isa), INFER__NO_TSAN unused))
#define INFER__TARGET_INLINE(isa) static inline __attribute__((target(isa), INFER__NO_TSAN always_inline, unused))
#else
#define INFER__TARGET(isa)
#define INFER__TARGET_INLINE(isa) INFER__FORCE_INLINE
#endif

/* NEON's optional extensions: dotprod (sdot) and i8mm (smmla). A function
   using them is marked with these where the baseline lacks them. Older
   clang (before 16) declares their intrinsics only for a file that targets
   them as a whole, so there its builtins stand in (allowed inside a
   function with the target attribute). */
#if defined(INFER__HAVE_NEON)
#if defined(__ARM_FEATURE_DOTPROD) || !defined(INFER__GNU)
#define INFER__TARGET_DOTPROD INFER__UNUSED
#elif defined(__clang__)
#define INFER__TARGET_DOTPROD __attribute__((target("dotprod"), unused))
#else
#define INFER__TARGET_DOTPROD __attribute__((target("arch=armv8.2-a+dotprod"), unused))
#endif
#if defined(__ARM_FEATURE_MATMUL_INT8) || !defined(INFER__GNU)
#define INFER__TARGET_I8MM INFER__UNUSED
#elif defined(__clang__)
#define INFER__TARGET_I8MM __attribute__((target("i8mm"), unused))
#elif defined(__ARM_FEATURE_DOTPROD)
/* a baseline of Armv8.2 or later: add i8mm to it (naming an older arch
   here would make this function's target less than the helpers') */
#define INFER__TARGET_I8MM __attribute__((target("+i8mm"), unused))
#else
#define INFER__TARGET_I8MM __attribute__((target("arch=armv8.2-a+dotprod+i8mm"), unused))
#endif
#if defined(__clang__) && !defined(__ARM_FEATURE_DOTPROD) && __clang_major__ < 16
#define INFER__NEON_SDOT(acc, a, b) ((int32x4_t)__builtin_neon_vdotq_v((int8x16_t)(acc), (int8x16_t)(a), (int8x16_t)(b), 34))
#else
#define INFER__NEON_SDOT(acc, a, b) vdotq_s32((acc), (a), (b))
#endif
#if defined(__clang__) && !defined(__ARM_FEATURE_MATMUL_INT8) && __clang_major__ < 16
#define INFER__NEON_MMLA(acc, a, b) ((int32x4_t)__builtin_neon_vmmlaq_v((int8x16_t)(acc), (int8x16_t)(a), (int8x16_t)(b), 34))
#else
#define INFER__NEON_MMLA(acc, a, b) vmmlaq_s32((acc), (a), (b))
#endif
#endif

/* What the CPU can run (and the OS saves the registers of): the x86
   features by cpuid and XCR0, ARM's by the kernel's hwcaps (Linux,
   Android), sysctl (Apple) or IsProcessorFeaturePresent (Windows). */
typedef enum infer__cpu_feature {
    INFER__CPU_AVX2, /* with FMA and F16C */
    INFER__CPU_AVX512, /* F, BW, VL and DQ */
    INFER__CPU_AVX512_VNNI,
    INFER__CPU_AVX512_BF16,
    INFER__CPU_DOTPROD, /* ARM's sdot */
    INFER__CPU_I8MM     /* ARM's smmla */
} infer__cpu_feature;
static int infer__cpu_has(infer__cpu_feature f);
/* Logical processors this process may run on (at least 1). */
static int infer__cpu_count(void);

/* The index of the lowest set bit of a non-zero x. */
#if defined(INFER__MSVC)
INFER__FORCE_INLINE int infer__ctz(unsigned x) {
    unsigned long i;
    _BitScanForward(&i, x);
    return (int)i;
}
#elif defined(INFER__GNU)
INFER__FORCE_INLINE int infer__ctz(unsigned x) { return __builtin_ctz(x); }
#else
INFER__FORCE_INLINE int infer__ctz(unsigned x) {
    int i = 0;
    while (!(x & 1u)) x >>= 1, i++;
    return i;
}
#endif

/* ---- atomics on int ----
   The orders are C11's. With MSVC: on x86 and x64 every aligned load
   acquires and every store releases already (a compiler barrier keeps the
   order), interlocked operations are full barriers; on ARM64 a barrier
   (dmb) follows an acquiring load and precedes a releasing store.
   Compilers with neither (and no threads) get plain accesses. */
enum { INFER__RELAXED, INFER__ACQUIRE, INFER__RELEASE, INFER__SEQ_CST };
#if defined(INFER__MSVC)
#define INFER__ATOMICS 1
INFER__FORCE_INLINE int infer__atomic_load(const int *p, int order) {
#if defined(_M_ARM64)
    /* a load, then a barrier (dmb ish: 0xB) so nothing later moves above it */
    int v = __iso_volatile_load32((const volatile __int32 *)p);
    if (order != INFER__RELAXED) __dmb(0xB);
    return v;
#else
    int v = __iso_volatile_load32((const volatile __int32 *)p);
    (void)order;
    _ReadWriteBarrier();
    return v;
#endif
}
INFER__FORCE_INLINE void infer__atomic_store(int *p, int v, int order) {
    if (order == INFER__SEQ_CST) {
        InterlockedExchange((volatile long *)p, v);
        return;
    }
#if defined(_M_ARM64)
    if (order != INFER__RELAXED) __dmb(0xB); /* nothing earlier moves below the store */
#else
    _ReadWriteBarrier();
#endif
    __iso_volatile_store32((volatile __int32 *)p, v);
}
/* adds v; returns the value before */
INFER__FORCE_INLINE int infer__atomic_fetch_add(int *p, int v, int order) {
    (void)order;
    return (int)InterlockedExchangeAdd((volatile long *)p, v);
}
#elif defined(INFER__GNU)
#define INFER__ATOMICS 1
/* each order its own builtin call: the switch folds away where the order
   is a constant, which it always is here */
INFER__FORCE_INLINE int infer__atomic_load(const int *p, int order) {
    switch (order) {
    case INFER__RELAXED: return __atomic_load_n(p, __ATOMIC_RELAXED);
    case INFER__ACQUIRE: return __atomic_load_n(p, __ATOMIC_ACQUIRE);
    default: return __atomic_load_n(p, __ATOMIC_SEQ_CST);
    }
}
INFER__FORCE_INLINE void infer__atomic_store(int *p, int v, int order) {
    switch (order) {
    case INFER__RELAXED: __atomic_store_n(p, v, __ATOMIC_RELAXED); break;
    case INFER__RELEASE: __atomic_store_n(p, v, __ATOMIC_RELEASE); break;
    default: __atomic_store_n(p, v, __ATOMIC_SEQ_CST); break;
    }
}
INFER__FORCE_INLINE int infer__atomic_fetch_add(int *p, int v, int order) {
    switch (order) {
    case INFER__RELAXED: return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
    case INFER__ACQUIRE: return __atomic_fetch_add(p, v, __ATOMIC_ACQUIRE);
    case INFER__RELEASE: return __atomic_fetch_add(p, v, __ATOMIC_RELEASE);
    default: return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
    }
}
#else
INFER__FORCE_INLINE int infer__atomic_load(const int *p, int order) { return (void)order, *p; }
INFER__FORCE_INLINE void infer__atomic_store(int *p, int v, int order) { (void)order, *p = v; }
INFER__FORCE_INLINE int infer__atomic_fetch_add(int *p, int v, int order) {
    int old = *p;
    (void)order;
    *p = (int)((unsigned)old + (unsigned)v);
    return old;
}
#endif

/* A spinning thread's hint to the core (pause, yield), and giving up the
   rest of its time slice. */
#if defined(INFER__MSVC) && (defined(_M_X64) || defined(_M_IX86))
#define INFER__CPU_RELAX() _mm_pause()
#elif defined(INFER__MSVC) && defined(_M_ARM64)
#define INFER__CPU_RELAX() __yield()
#elif defined(INFER__GNU) && (defined(__x86_64__) || defined(__i386__))
#define INFER__CPU_RELAX() __builtin_ia32_pause()
#elif defined(INFER__GNU) && defined(__aarch64__)
#define INFER__CPU_RELAX() __asm__ __volatile__("yield")
#else
#define INFER__CPU_RELAX() ((void)0)
#endif
static void infer__thread_yield(void);

/* ---- threads and locks ----
   INFER__THREADS: threads can be made (Win32 or POSIX threads, and atomics
   to hand work between them); without, everything runs on the caller's. */
#if defined(INFER__WINDOWS) && defined(INFER__ATOMICS)
#define INFER__THREADS 1
typedef HANDLE infer__thread;
typedef SRWLOCK infer__mutex;
typedef CONDITION_VARIABLE infer__cond;
#elif !defined(INFER__WINDOWS) && defined(INFER__ATOMICS)
#define INFER__THREADS 1
typedef pthread_t infer__thread;
typedef pthread_mutex_t infer__mutex;
typedef pthread_cond_t infer__cond;
#else
#define INFER__THREADS 0
typedef int infer__thread;
typedef int infer__mutex;
typedef int infer__cond;
#endif
/* Starts fn(arg) on a new thread: 1, or 0 where it could not. */
static int infer__thread_start(infer__thread *t, void (*fn)(void *), void *arg);
static void infer__thread_join(infer__thread t);
static void infer__mutex_init(infer__mutex *m);
static void infer__mutex_destroy(infer__mutex *m);
static void infer__mutex_lock(infer__mutex *m);
static void infer__mutex_unlock(infer__mutex *m);
static void infer__cond_init(infer__cond *c);
static void infer__cond_destroy(infer__cond *c);
static void infer__cond_wait(infer__cond *c, infer__mutex *m);
static void infer__cond_broadcast(infer__cond *c);

/* Sleeping until a word changes: the thread pool's idle workers. A futex
   where the platform's condition variable is not to be trusted
   (Emscripten's, see platform.c), else a lock and a condition variable. */
typedef struct infer__waiter {
    infer__mutex mu;
    infer__cond cv;
} infer__waiter;
static void infer__waiter_init(infer__waiter *w);
static void infer__waiter_destroy(infer__waiter *w);
/* Returns once *word (read with sequential consistency) is not seen. */
static void infer__waiter_wait(infer__waiter *w, int *word, int seen);
/* Wakes every waiter; call after changing *word. */
static void infer__waiter_wake(infer__waiter *w, int *word);

/* ---- time and memory ---- */
/* A monotonic clock in milliseconds. */
static double infer__now_ms(void);
/* The local time of t, as localtime_r (0 where it cannot be had). */
static int infer__local_time(time_t t, struct tm *out);
/* The process's peak resident set (working set on Windows), 0 if unknown. */
static size_t infer__peak_rss_bytes(void);
/* Asks for huge pages behind [p, p + len) where the OS has them on request
   (Linux's transparent huge pages on "madvise"). */
static void infer__advise_huge(void *p, size_t len);
/* Zeroed memory for a large buffer read in long strides (the KV cache),
   with the huge pages inside it asked for before it is first touched. */
static void *infer__calloc_huge(size_t bytes);

/* ---- files: paths are UTF-8 everywhere ---- */
/* A file's bytes: mapped, read into memory, or borrowed from the caller. */
typedef struct infer__blob {
    const uint8_t *data;
    size_t size;
    int kind; /* INFER__BLOB_* */
} infer__blob;
enum { INFER__BLOB_BORROWED, INFER__BLOB_MAPPED, INFER__BLOB_HEAP };
/* A model or state file, whole: mapped (read with INFER_NO_MMAP). Only a
   regular file is read: a FIFO, a device or a directory is refused before
   a byte is read, as its size says nothing. */
static int infer__blob_open(infer__blob *b, const char *path, infer_error *err);
static void infer__blob_close(infer__blob *b);
/* Lets the pages of [p, p + len) of a mapped file go from this process's
   memory (they come back from the file if read again): for weights whose
   reader is a repacked copy. Nothing for memory the blob does not map. */
static void infer__blob_forget(const infer__blob *b, const void *p, size_t len);
/* fopen by a UTF-8 path. */
static FILE *infer__fopen(const char *path, const char *mode);
/* Writes n bytes as the whole of the regular file at path (made or
   emptied first); a FIFO, a device or a directory is refused without
   waiting for a reader. 1, or 0 with err set. */
static int infer__file_write(const char *path, const void *data, size_t n, infer_error *err);
/* 1 where both paths name one existing file (a link or another spelling
   of it included). */
static int infer__same_file(const char *a, const char *b);

#endif /* INFER_PLATFORM_H */

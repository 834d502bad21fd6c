/* platform.c - the bodies of platform.h's calls, one branch per OS (and
   per compiler where the CPU is asked). */
#include "internal.h"

/* ---- the CPU ------------------------------------------------------------ */

#if defined(INFER__HAVE_X86)
#if defined(INFER__GNU) && !defined(INFER__MSVC)
#include <cpuid.h>
#endif
/* cpuid leaf, subleaf: eax, ebx, ecx, edx into r */
static void infer__cpuid(unsigned leaf, unsigned sub, unsigned r[4]) {
#if defined(INFER__MSVC)
    int v[4];
    __cpuidex(v, (int)leaf, (int)sub);
    r[0] = (unsigned)v[0], r[1] = (unsigned)v[1], r[2] = (unsigned)v[2], r[3] = (unsigned)v[3];
#else
    __cpuid_count(leaf, sub, r[0], r[1], r[2], r[3]);
#endif
}
/* XCR0: the register state the OS saves (bits 1-2 SSE and AVX, 5-7
   AVX-512's); only to be read where cpuid says OSXSAVE */
static uint64_t infer__xcr0(void) {
#if defined(INFER__MSVC)
    return (uint64_t)_xgetbv(0);
#else
    unsigned lo, hi;
    __asm__ __volatile__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
#endif
}
#endif

static int infer__cpu_has(infer__cpu_feature f) {
#if defined(INFER__HAVE_X86)
    unsigned r1[4], r7[4], r71[4] = {0, 0, 0, 0}, max;
    uint64_t xcr0;
    int avx, avx512;
    infer__cpuid(0, 0, r1);
    max = r1[0];
    if (max < 7) return 0;
    infer__cpuid(1, 0, r1);
    if (!(r1[2] & (1u << 27))) return 0; /* OSXSAVE: no XCR0, no AVX */
    xcr0 = infer__xcr0();
    infer__cpuid(7, 0, r7);
    if (r7[0] >= 1) infer__cpuid(7, 1, r71);
    avx = (xcr0 & 0x6) == 0x6 && (r1[2] & (1u << 28)) && (r1[2] & (1u << 12)) && (r1[2] & (1u << 29)) &&
          (r7[1] & (1u << 5)); /* AVX, FMA, F16C, AVX2 */
    avx512 = avx && (xcr0 & 0xe6) == 0xe6 && (r7[1] & (1u << 16)) && (r7[1] & (1u << 17)) &&
             (r7[1] & (1u << 30)) && (r7[1] & (1u << 31)); /* F, DQ, BW, VL */
    switch (f) {
    case INFER__CPU_AVX2: return avx;
    case INFER__CPU_AVX512: return avx512;
    case INFER__CPU_AVX512_VNNI: return avx512 && (r7[2] & (1u << 11));
    case INFER__CPU_AVX512_BF16: return avx512 && (r71[0] & (1u << 5));
    default: return 0;
    }
#elif defined(INFER__HAVE_NEON)
#if defined(__linux__) || defined(__ANDROID__)
    /* HWCAP_ASIMDDP, and AT_HWCAP2's HWCAP2_I8MM (older headers lack the names) */
    if (f == INFER__CPU_DOTPROD) return (getauxval(16 /* AT_HWCAP */) & (1ul << 20)) != 0;
    if (f == INFER__CPU_I8MM) return (getauxval(26 /* AT_HWCAP2 */) & (1ul << 13)) != 0;
    return 0;
#elif defined(__APPLE__)
    int on = 0;
    size_t n = sizeof on;
    if (f == INFER__CPU_DOTPROD) return sysctlbyname("hw.optional.arm.FEAT_DotProd", &on, &n, NULL, 0) == 0 && on;
    if (f == INFER__CPU_I8MM) return sysctlbyname("hw.optional.arm.FEAT_I8MM", &on, &n, NULL, 0) == 0 && on;
    return 0;
#elif defined(INFER__WINDOWS) && defined(PF_ARM_V82_DP_INSTRUCTIONS_AVAILABLE)
    if (f == INFER__CPU_DOTPROD) return IsProcessorFeaturePresent(PF_ARM_V82_DP_INSTRUCTIONS_AVAILABLE) != 0;
#if defined(__ARM_FEATURE_MATMUL_INT8)
    if (f == INFER__CPU_I8MM) return 1;
#endif
    return 0;
#else
    /* what the compiler was told the CPU has */
#if defined(__ARM_FEATURE_DOTPROD)
    if (f == INFER__CPU_DOTPROD) return 1;
#endif
#if defined(__ARM_FEATURE_MATMUL_INT8)
    if (f == INFER__CPU_I8MM) return 1;
#endif
    return 0;
#endif
#else
    (void)f;
    return 0;
#endif
}

static int infer__cpu_count(void) {
#if defined(INFER__WINDOWS)
    DWORD n = GetActiveProcessorCount(ALL_PROCESSOR_GROUPS);
    return n > 0 ? (int)INFER__MIN(n, 1024) : 1;
#elif defined(_SC_NPROCESSORS_ONLN)
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)INFER__MIN(n, 1024) : 1;
#else
    return 1;
#endif
}

/* ---- threads and locks --------------------------------------------------- */

static void infer__thread_yield(void) {
#if defined(INFER__WINDOWS)
    SwitchToThread();
#elif INFER__THREADS
    sched_yield();
#endif
}

#if INFER__THREADS
/* what a new thread runs: the function and its argument, handed over on
   the heap (each OS calls its own signature) */
typedef struct infer__thread_start_arg {
    void (*fn)(void *);
    void *arg;
} infer__thread_start_arg;
#if defined(INFER__WINDOWS)
static unsigned __stdcall infer__thread_main(void *v) {
#else
static void *infer__thread_main(void *v) {
#endif
    infer__thread_start_arg a = *(infer__thread_start_arg *)v;
    INFER_FREE(v);
    a.fn(a.arg);
    return 0;
}
#endif

static int infer__thread_start(infer__thread *t, void (*fn)(void *), void *arg) {
#if INFER__THREADS
    infer__thread_start_arg *a = (infer__thread_start_arg *)INFER_MALLOC(sizeof *a);
    if (!a) return 0;
    a->fn = fn;
    a->arg = arg;
#if defined(INFER__WINDOWS)
    /* _beginthreadex rather than CreateThread: the C runtime's per-thread
       state is set up (and freed) with the thread */
    *t = (HANDLE)_beginthreadex(NULL, 0, infer__thread_main, a, 0, NULL);
    if (*t) return 1;
#else
    if (pthread_create(t, NULL, infer__thread_main, a) == 0) return 1;
#endif
    INFER_FREE(a);
    return 0;
#else
    (void)t, (void)fn, (void)arg;
    return 0;
#endif
}

static void infer__thread_join(infer__thread t) {
#if defined(INFER__WINDOWS) && INFER__THREADS
    WaitForSingleObject(t, INFINITE);
    CloseHandle(t);
#elif INFER__THREADS
    pthread_join(t, NULL);
#else
    (void)t;
#endif
}

#if defined(INFER__WINDOWS) && INFER__THREADS
/* Slim reader/writer locks (exclusive only) and condition variables: no
   handle to close, no allocation, no library beyond kernel32 */
static void infer__mutex_init(infer__mutex *m) { InitializeSRWLock(m); }
static void infer__mutex_destroy(infer__mutex *m) { (void)m; }
static void infer__mutex_lock(infer__mutex *m) { AcquireSRWLockExclusive(m); }
static void infer__mutex_unlock(infer__mutex *m) { ReleaseSRWLockExclusive(m); }
static void infer__cond_init(infer__cond *c) { InitializeConditionVariable(c); }
static void infer__cond_destroy(infer__cond *c) { (void)c; }
static void infer__cond_wait(infer__cond *c, infer__mutex *m) { SleepConditionVariableSRW(c, m, INFINITE, 0); }
static void infer__cond_broadcast(infer__cond *c) { WakeAllConditionVariable(c); }
#elif INFER__THREADS
static void infer__mutex_init(infer__mutex *m) { pthread_mutex_init(m, NULL); }
static void infer__mutex_destroy(infer__mutex *m) { pthread_mutex_destroy(m); }
static void infer__mutex_lock(infer__mutex *m) { pthread_mutex_lock(m); }
static void infer__mutex_unlock(infer__mutex *m) { pthread_mutex_unlock(m); }
static void infer__cond_init(infer__cond *c) { pthread_cond_init(c, NULL); }
static void infer__cond_destroy(infer__cond *c) { pthread_cond_destroy(c); }
static void infer__cond_wait(infer__cond *c, infer__mutex *m) { pthread_cond_wait(c, m); }
static void infer__cond_broadcast(infer__cond *c) { pthread_cond_broadcast(c); }
#else
/* one thread: nothing to lock, and a wait would wait for ever */
static void infer__mutex_init(infer__mutex *m) { *m = 0; }
static void infer__mutex_destroy(infer__mutex *m) { (void)m; }
static void infer__mutex_lock(infer__mutex *m) { (void)m; }
static void infer__mutex_unlock(infer__mutex *m) { (void)m; }
static void infer__cond_init(infer__cond *c) { *c = 0; }
static void infer__cond_destroy(infer__cond *c) { (void)c; }
static void infer__cond_wait(infer__cond *c, infer__mutex *m) { (void)c, (void)m; }
static void infer__cond_broadcast(infer__cond *c) { (void)c; }
#endif

/* Emscripten 3.1's condition variable (musl's, over its futex) was seen
   to miss wake-ups: a worker then slept out its 100 ms slice, and a token
   of stories260K took 300 ms on two threads. There waiters wait on the
   word itself (Atomics.wait) and wakers wake by it (Atomics.notify). */
static void infer__waiter_init(infer__waiter *w) {
    infer__mutex_init(&w->mu);
    infer__cond_init(&w->cv);
}
static void infer__waiter_destroy(infer__waiter *w) {
    infer__mutex_destroy(&w->mu);
    infer__cond_destroy(&w->cv);
}
static void infer__waiter_wait(infer__waiter *w, int *word, int seen) {
#if defined(__EMSCRIPTEN_PTHREADS__)
    (void)w;
    while (infer__atomic_load(word, INFER__SEQ_CST) == seen)
        emscripten_futex_wait(word, (uint32_t)seen, INFINITY); /* returns at once if it moved on */
#else
    infer__mutex_lock(&w->mu);
    while (infer__atomic_load(word, INFER__SEQ_CST) == seen) infer__cond_wait(&w->cv, &w->mu);
    infer__mutex_unlock(&w->mu);
#endif
}
static void infer__waiter_wake(infer__waiter *w, int *word) {
#if defined(__EMSCRIPTEN_PTHREADS__)
    (void)w;
    emscripten_futex_wake(word, INT_MAX);
#else
    /* under the lock: a waiter between its check and its sleep holds it */
    (void)word;
    infer__mutex_lock(&w->mu);
    infer__cond_broadcast(&w->cv);
    infer__mutex_unlock(&w->mu);
#endif
}

/* ---- time and memory ----------------------------------------------------- */

static double infer__now_ms(void) {
#if defined(INFER__WINDOWS)
    LARGE_INTEGER f, c;
    QueryPerformanceFrequency(&f);
    QueryPerformanceCounter(&c);
    return 1000.0 * (double)c.QuadPart / (double)f.QuadPart;
#else
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000.0 + ts.tv_nsec / 1e6;
#endif
}

static int infer__local_time(time_t t, struct tm *out) {
#if defined(INFER__WINDOWS)
    return localtime_s(out, &t) == 0;
#else
    return localtime_r(&t, out) != NULL;
#endif
}

static size_t infer__peak_rss_bytes(void) {
#if defined(INFER__WINDOWS)
    PROCESS_MEMORY_COUNTERS pmc;
    memset(&pmc, 0, sizeof pmc);
    pmc.cb = sizeof pmc;
    if (!K32GetProcessMemoryInfo(GetCurrentProcess(), &pmc, sizeof pmc)) return 0;
    return (size_t)pmc.PeakWorkingSetSize;
#elif defined(__EMSCRIPTEN__)
    return 0;
#else
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
#if defined(__APPLE__)
    return (size_t)ru.ru_maxrss;
#else
    return (size_t)ru.ru_maxrss * 1024;
#endif
#endif
}

#if defined(__linux__) && !defined(INFER_NO_MMAP) && !defined(MADV_DONTNEED)
/* strict C99 hides madvise; this is Linux's declaration and value */
#define MADV_DONTNEED 4
#ifdef __cplusplus
extern "C" int madvise(void *addr, size_t len, int advice);
#else
int madvise(void *addr, size_t len, int advice);
#endif
#endif

static void infer__advise_huge(void *p, size_t len) {
#if defined(__linux__) && !defined(INFER_NO_MMAP)
    madvise(p, len, 14 /* MADV_HUGEPAGE */);
#else
    /* Windows' large pages need a privilege (SeLockMemoryPrivilege) that a
       game's user does not have; macOS has no such request */
    (void)p, (void)len;
#endif
}

static void *infer__calloc_huge(size_t bytes) {
    const uintptr_t huge = (uintptr_t)2 << 20;
    uint8_t *p = (uint8_t *)INFER_MALLOC(bytes ? bytes : 1);
    uintptr_t lo, hi;
    if (!p) return NULL;
    lo = ((uintptr_t)p + huge - 1) / huge * huge;
    hi = ((uintptr_t)p + bytes) / huge * huge;
    if (hi > lo) infer__advise_huge((void *)lo, (size_t)(hi - lo));
    memset(p, 0, bytes);
    return p;
}

/* ---- files --------------------------------------------------------------- */

#if defined(INFER__WINDOWS)
/* A UTF-8 path as the wide string the W calls take, on the heap; NULL
   where it is not UTF-8 or memory ran out. */
static wchar_t *infer__wide_path(const char *path) {
    int n = MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, path, -1, NULL, 0);
    wchar_t *w;
    if (n <= 0) return NULL;
    w = (wchar_t *)INFER_MALLOC((size_t)n * sizeof *w);
    if (w && MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, path, -1, w, n) != n) {
        INFER_FREE(w);
        w = NULL;
    }
    return w;
}

/* The reason for GetLastError's code, in the words strerror gives on
   POSIX (so that a message reads the same on every OS). */
static const char *infer__win_reason(DWORD e) {
    switch (e) {
    case ERROR_FILE_NOT_FOUND:
    case ERROR_PATH_NOT_FOUND:
    case ERROR_INVALID_NAME:
    case ERROR_BAD_NETPATH: return "No such file or directory";
    case ERROR_ACCESS_DENIED:
    case ERROR_SHARING_VIOLATION:
    case ERROR_LOCK_VIOLATION: return "Permission denied";
    case ERROR_NOT_ENOUGH_MEMORY:
    case ERROR_OUTOFMEMORY:
    case ERROR_COMMITMENT_LIMIT: return "Cannot allocate memory";
    case ERROR_DISK_FULL:
    case ERROR_HANDLE_DISK_FULL: return "No space left on device";
    case ERROR_FILENAME_EXCED_RANGE: return "File name too long";
    default: return "Input/output error";
    }
}

/* The file at a wide path, opened for reading with its kind checked:
   INVALID_HANDLE_VALUE and err set where it cannot be read or is not a
   regular file. */
static HANDLE infer__win_open_regular(const wchar_t *w, const char *path, infer_error *err) {
    DWORD attr = GetFileAttributesW(w);
    HANDLE h;
    if (attr != INVALID_FILE_ATTRIBUTES && (attr & FILE_ATTRIBUTE_DIRECTORY)) {
        infer__set_error(err, INFER_ERR_IO, "%s is a directory, not a regular file", path);
        return INVALID_HANDLE_VALUE;
    }
    /* others may read it, rename it or delete it meanwhile, as on POSIX */
    h = CreateFileW(w, GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_DELETE, NULL, OPEN_EXISTING,
                    FILE_ATTRIBUTE_NORMAL, NULL);
    if (h == INVALID_HANDLE_VALUE) {
        infer__set_error(err, INFER_ERR_IO, "cannot open %s: %s", path, infer__win_reason(GetLastError()));
        return h;
    }
    if (GetFileType(h) != FILE_TYPE_DISK) {
        CloseHandle(h);
        infer__set_error(err, INFER_ERR_IO, "%s is a device or a pipe, not a regular file", path);
        return INVALID_HANDLE_VALUE;
    }
    return h;
}
#else
/* What a file of mode m is, for an error that says why it is refused. */
static const char *infer__file_kind(unsigned m) {
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    return "a special file";
}
#endif

/* A file being read, as each OS holds one: opened (a regular file only,
   with its size), mapped whole, read in pieces (INFER_NO_MMAP), closed.
   blob_open below is the same on every OS over these. */
#if defined(INFER__WINDOWS)
typedef HANDLE infer__fd;
static int infer__fd_open(const char *path, infer__fd *fd, uint64_t *size, infer_error *err) {
    wchar_t *w = infer__wide_path(path);
    LARGE_INTEGER n;
    if (!w) {
        infer__set_error(err, INFER_ERR_IO, "cannot open %s: the path is not UTF-8 (or memory ran out)", path);
        return 0;
    }
    *fd = infer__win_open_regular(w, path, err);
    INFER_FREE(w);
    if (*fd == INVALID_HANDLE_VALUE) return 0;
    if (!GetFileSizeEx(*fd, &n) || n.QuadPart < 0) {
        infer__set_error(err, INFER_ERR_IO, "cannot read %s: %s", path, infer__win_reason(GetLastError()));
        CloseHandle(*fd);
        return 0;
    }
    *size = (uint64_t)n.QuadPart;
    return 1;
}
static void infer__fd_close(infer__fd fd) { CloseHandle(fd); }
/* the view keeps the mapping, and the mapping the file, open */
INFER__UNUSED static void *infer__fd_map(infer__fd fd, size_t size, const char *path, infer_error *err) {
    HANDLE map = CreateFileMappingW(fd, NULL, PAGE_READONLY, 0, 0, NULL);
    void *p = map ? MapViewOfFile(map, FILE_MAP_READ, 0, 0, 0) : NULL;
    DWORD e = GetLastError();
    (void)size;
    if (map) CloseHandle(map);
    if (!p) infer__set_error(err, INFER_ERR_IO, "cannot map %s: %s", path, infer__win_reason(e));
    return p;
}
static void infer__unmap(const void *p, size_t size) {
    (void)size;
    UnmapViewOfFile(p);
}
/* bytes read (ReadFile takes under 4 GiB at a time), 0 at the end, -1 on an error */
INFER__UNUSED static long long infer__fd_read(infer__fd fd, void *buf, size_t n) {
    DWORD r = 0;
    if (!ReadFile(fd, buf, (DWORD)INFER__MIN(n, (size_t)1 << 30), &r, NULL)) return -1;
    return (long long)r;
}
#else
typedef int infer__fd;
static int infer__fd_open(const char *path, infer__fd *fd, uint64_t *size, infer_error *err) {
    struct stat st;
    /* O_NONBLOCK: opening a FIFO would otherwise wait for a writer (and
       changes nothing for a regular file) */
    *fd = open(path, O_RDONLY | O_NONBLOCK);
    if (*fd < 0) {
        infer__set_error(err, INFER_ERR_IO, "cannot open %s: %s", path, strerror(errno));
        return 0;
    }
    if (fstat(*fd, &st) != 0) {
        infer__set_error(err, INFER_ERR_IO, "cannot read %s: %s", path, strerror(errno));
        close(*fd);
        return 0;
    }
    if (!S_ISREG(st.st_mode)) {
        infer__set_error(err, INFER_ERR_IO, "%s is %s, not a regular file", path, infer__file_kind((unsigned)st.st_mode));
        close(*fd);
        return 0;
    }
    *size = (uint64_t)st.st_size;
    return 1;
}
static void infer__fd_close(infer__fd fd) { close(fd); }
INFER__UNUSED static void *infer__fd_map(infer__fd fd, size_t size, const char *path, infer_error *err) {
#if !defined(INFER_NO_MMAP)
    void *p = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
    if (p != MAP_FAILED) return p;
    infer__set_error(err, INFER_ERR_IO, "cannot map %s: %s", path, strerror(errno));
#else
    (void)fd, (void)size, (void)path, (void)err;
#endif
    return NULL;
}
static void infer__unmap(const void *p, size_t size) {
#if !defined(INFER_NO_MMAP)
    munmap((void *)p, size);
#else
    (void)p, (void)size;
#endif
}
INFER__UNUSED static long long infer__fd_read(infer__fd fd, void *buf, size_t n) {
    ssize_t r;
    do r = read(fd, buf, n);
    while (r < 0 && errno == EINTR);
    return (long long)r;
}
#endif

static int infer__blob_open(infer__blob *b, const char *path, infer_error *err) {
    infer__fd fd;
    uint64_t size;
    memset(b, 0, sizeof *b);
    if (!infer__fd_open(path, &fd, &size, err)) return 0;
    if (size > (uint64_t)SIZE_MAX) {
        infer__fd_close(fd);
        infer__set_error(err, INFER_ERR_IO, "%s is too large to map on this machine", path);
        return 0;
    }
    b->size = (size_t)size;
    if (b->size == 0) { /* nothing to map (Windows refuses a mapping of 0 bytes) */
        infer__fd_close(fd);
        b->data = (const uint8_t *)"";
        return 1;
    }
#if !defined(INFER_NO_MMAP)
    b->data = (const uint8_t *)infer__fd_map(fd, b->size, path, err);
    infer__fd_close(fd);
    if (!b->data) return 0;
    b->kind = INFER__BLOB_MAPPED;
    return 1;
#else
    {
        size_t got = 0;
        long long r = 1;
        b->data = (const uint8_t *)INFER_MALLOC(b->size);
        if (!b->data) {
            infer__fd_close(fd);
            infer__set_error(err, INFER_ERR_NOMEM, "out of memory reading %s", path);
            return 0;
        }
        while (got < b->size && (r = infer__fd_read(fd, (uint8_t *)b->data + got, b->size - got)) > 0) got += (size_t)r;
        infer__fd_close(fd);
        if (got != b->size) {
            INFER_FREE((void *)b->data);
            b->data = NULL;
            infer__set_error(err, INFER_ERR_IO, "cannot read %s (it changed while being read?)", path);
            return 0;
        }
        b->kind = INFER__BLOB_HEAP;
        return 1;
    }
#endif
}

static void infer__blob_close(infer__blob *b) {
    if (b->kind == INFER__BLOB_MAPPED) infer__unmap(b->data, b->size);
    if (b->kind == INFER__BLOB_HEAP) INFER_FREE((void *)b->data);
    memset(b, 0, sizeof *b);
}

static void infer__blob_forget(const infer__blob *b, const void *p, size_t len) {
#if !defined(INFER_NO_MMAP) && (defined(MADV_DONTNEED) || defined(INFER__WINDOWS))
#if defined(INFER__WINDOWS)
    uintptr_t page = 4096;
#else
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
#endif
    uintptr_t lo = ((uintptr_t)p + page - 1) / page * page, hi = ((uintptr_t)p + len) / page * page;
    uintptr_t start = (uintptr_t)b->data, at = (uintptr_t)p;
    if (b->kind != INFER__BLOB_MAPPED || at < start || len > b->size || at - start > b->size - len || hi <= lo) return;
#if defined(INFER__WINDOWS)
    /* unlocking pages that are not locked takes them out of the working
       set (and fails, as documented, with ERROR_NOT_LOCKED) */
    VirtualUnlock((void *)lo, hi - lo);
#else
    madvise((void *)lo, hi - lo, MADV_DONTNEED);
#endif
#else
    (void)b, (void)p, (void)len;
#endif
}

static FILE *infer__fopen(const char *path, const char *mode) {
#if defined(INFER__WINDOWS)
    wchar_t *w = infer__wide_path(path), wmode[8];
    FILE *f = NULL;
    size_t i;
    for (i = 0; mode[i] && i + 1 < sizeof wmode / sizeof wmode[0]; i++) wmode[i] = (wchar_t)(unsigned char)mode[i];
    wmode[i] = 0;
    if (w) f = _wfopen(w, wmode);
    INFER_FREE(w);
    return f;
#else
    return fopen(path, mode);
#endif
}

static int infer__file_write(const char *path, const void *data, size_t n, infer_error *err) {
#if defined(INFER__WINDOWS)
    wchar_t *w = infer__wide_path(path);
    DWORD attr;
    HANDLE h;
    size_t done = 0;
    int ok;
    if (!w) {
        infer__set_error(err, INFER_ERR_IO, "cannot write %s: the path is not UTF-8 (or memory ran out)", path);
        return 0;
    }
    attr = GetFileAttributesW(w);
    if (attr != INVALID_FILE_ATTRIBUTES && (attr & FILE_ATTRIBUTE_DIRECTORY)) {
        INFER_FREE(w);
        infer__set_error(err, INFER_ERR_IO, "cannot write %s: it is a directory, not a regular file", path);
        return 0;
    }
    /* OPEN_ALWAYS, then the type, then truncation: a device or pipe name
       (NUL, \\.\pipe\...) is opened but refused before a byte goes to it */
    h = CreateFileW(w, GENERIC_WRITE, 0, NULL, OPEN_ALWAYS, FILE_ATTRIBUTE_NORMAL, NULL);
    INFER_FREE(w);
    if (h == INVALID_HANDLE_VALUE) {
        infer__set_error(err, INFER_ERR_IO, "cannot write %s: %s", path, infer__win_reason(GetLastError()));
        return 0;
    }
    if (GetFileType(h) != FILE_TYPE_DISK) {
        CloseHandle(h);
        infer__set_error(err, INFER_ERR_IO, "cannot write %s: it is a device or a pipe, not a regular file", path);
        return 0;
    }
    ok = SetEndOfFile(h) != 0; /* at offset 0: emptied */
    while (ok && done < n) {
        DWORD want = (DWORD)INFER__MIN(n - done, (size_t)1 << 30), wrote = 0;
        ok = WriteFile(h, (const uint8_t *)data + done, want, &wrote, NULL) && wrote > 0;
        done += wrote;
    }
    if (!ok) infer__set_error(err, INFER_ERR_IO, "cannot write %s: %s", path, infer__win_reason(GetLastError()));
    if (!CloseHandle(h) && ok) {
        ok = 0;
        infer__set_error(err, INFER_ERR_IO, "cannot write %s: %s", path, infer__win_reason(GetLastError()));
    }
    return ok;
#else
    /* O_NONBLOCK so that a FIFO without a reader fails at once rather than
       waits, fstat to refuse one with a reader (or a device) before writing */
    struct stat st;
    size_t done = 0;
    int fd, ok;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        infer__set_error(err, INFER_ERR_IO, "cannot write %s: it is %s, not a regular file", path,
                         infer__file_kind((unsigned)st.st_mode));
        return 0;
    }
    errno = 0;
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NONBLOCK, 0666);
    ok = fd >= 0 && fstat(fd, &st) == 0;
    if (ok && !S_ISREG(st.st_mode)) ok = 0, errno = 0; /* it became one since the stat */
    while (ok && done < n) {
        ssize_t wr = write(fd, (const uint8_t *)data + done, n - done);
        if (wr < 0 && errno == EINTR) continue;
        if (wr <= 0) ok = 0;
        else done += (size_t)wr;
    }
    if (fd >= 0 && close(fd) != 0) ok = 0;
    if (!ok) infer__set_error(err, INFER_ERR_IO, "cannot write %s: %s", path, errno ? strerror(errno) : "not a regular file");
    return ok;
#endif
}

static int infer__same_file(const char *a, const char *b) {
#if defined(INFER__WINDOWS)
    /* the volume and the file's index on it, as st_dev and st_ino */
    BY_HANDLE_FILE_INFORMATION ia, ib;
    HANDLE h[2] = {INVALID_HANDLE_VALUE, INVALID_HANDLE_VALUE};
    const char *p[2];
    int i, same = 0;
    p[0] = a, p[1] = b;
    for (i = 0; i < 2; i++) {
        wchar_t *w = infer__wide_path(p[i]);
        if (w)
            h[i] = CreateFileW(w, 0, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, NULL, OPEN_EXISTING,
                               FILE_FLAG_BACKUP_SEMANTICS, NULL);
        INFER_FREE(w);
    }
    if (h[0] != INVALID_HANDLE_VALUE && h[1] != INVALID_HANDLE_VALUE && GetFileInformationByHandle(h[0], &ia) &&
        GetFileInformationByHandle(h[1], &ib))
        same = ia.dwVolumeSerialNumber == ib.dwVolumeSerialNumber && ia.nFileIndexHigh == ib.nFileIndexHigh &&
               ia.nFileIndexLow == ib.nFileIndexLow;
    for (i = 0; i < 2; i++)
        if (h[i] != INVALID_HANDLE_VALUE) CloseHandle(h[i]);
    return same;
#else
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
#endif
}

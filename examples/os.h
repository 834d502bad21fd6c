/* os.h - the few OS calls the example programs make themselves (the
   library has its own, in its platform layer): a clock, sleeping, threads
   with a lock and a barrier, whether a stream is a terminal, UTF-8 command
   lines and paths, and binary standard streams. POSIX and Windows. The
   including file defines _XOPEN_SOURCE 700 before any header, for POSIX's
   names under -std=c99. */
#ifndef INFER_EXAMPLES_OS_H
#define INFER_EXAMPLES_OS_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(_WIN32)
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <windows.h>
#include <fcntl.h>
#include <io.h>
#include <process.h>
#include <shellapi.h>
#include <sys/stat.h>
#else
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

#if defined(__GNUC__) || defined(__clang__)
#define OS_MAYBE_UNUSED __attribute__((unused)) /* a program uses some of them */
#else
#define OS_MAYBE_UNUSED
#endif

/* A monotonic clock, in milliseconds. */
static OS_MAYBE_UNUSED double os_now_ms(void) {
#if defined(_WIN32)
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

static OS_MAYBE_UNUSED void os_sleep_ms(double ms) {
    if (ms <= 0) return;
#if defined(_WIN32)
    Sleep((DWORD)(ms + 0.5));
#else
    {
        struct timespec ts;
        ts.tv_sec = (time_t)(ms / 1e3);
        ts.tv_nsec = (long)((ms - ts.tv_sec * 1e3) * 1e6);
        nanosleep(&ts, NULL);
    }
#endif
}

/* 1 where file descriptor fd (0, 1, 2) is a terminal or console. */
static OS_MAYBE_UNUSED int os_isatty(int fd) {
#if defined(_WIN32)
    return _isatty(fd) != 0;
#else
    return isatty(fd);
#endif
}

/* ---- threads: start and join, a lock with a condition, a barrier ---- */
#if defined(_WIN32)
typedef HANDLE os_thread;
typedef SRWLOCK os_mutex;
typedef CONDITION_VARIABLE os_cond;
#else
typedef pthread_t os_thread;
typedef pthread_mutex_t os_mutex;
typedef pthread_cond_t os_cond;
#endif
typedef struct os_thread_arg {
    void (*fn)(void *);
    void *arg;
} os_thread_arg;
#if defined(_WIN32)
static unsigned __stdcall os_thread_main(void *v) {
#else
static void *os_thread_main(void *v) {
#endif
    os_thread_arg a = *(os_thread_arg *)v;
    free(v);
    a.fn(a.arg);
    return 0;
}
/* Starts fn(arg) on a thread of its own: 1, or 0 where none could start. */
static OS_MAYBE_UNUSED int os_thread_start(os_thread *t, void (*fn)(void *), void *arg) {
    os_thread_arg *a = (os_thread_arg *)malloc(sizeof *a);
    if (!a) return 0;
    a->fn = fn, a->arg = arg;
#if defined(_WIN32)
    if ((*t = (HANDLE)_beginthreadex(NULL, 0, os_thread_main, a, 0, NULL)) != 0) return 1;
#else
    if (pthread_create(t, NULL, os_thread_main, a) == 0) return 1;
#endif
    free(a);
    return 0;
}
static OS_MAYBE_UNUSED void os_thread_join(os_thread t) {
#if defined(_WIN32)
    WaitForSingleObject(t, INFINITE);
    CloseHandle(t);
#else
    pthread_join(t, NULL);
#endif
}
static OS_MAYBE_UNUSED void os_mutex_init(os_mutex *m) {
#if defined(_WIN32)
    InitializeSRWLock(m);
#else
    pthread_mutex_init(m, NULL);
#endif
}
static OS_MAYBE_UNUSED void os_mutex_destroy(os_mutex *m) {
#if defined(_WIN32)
    (void)m;
#else
    pthread_mutex_destroy(m);
#endif
}
static OS_MAYBE_UNUSED void os_mutex_lock(os_mutex *m) {
#if defined(_WIN32)
    AcquireSRWLockExclusive(m);
#else
    pthread_mutex_lock(m);
#endif
}
static OS_MAYBE_UNUSED void os_mutex_unlock(os_mutex *m) {
#if defined(_WIN32)
    ReleaseSRWLockExclusive(m);
#else
    pthread_mutex_unlock(m);
#endif
}
static OS_MAYBE_UNUSED void os_cond_init(os_cond *c) {
#if defined(_WIN32)
    InitializeConditionVariable(c);
#else
    pthread_cond_init(c, NULL);
#endif
}
static OS_MAYBE_UNUSED void os_cond_destroy(os_cond *c) {
#if defined(_WIN32)
    (void)c;
#else
    pthread_cond_destroy(c);
#endif
}
static OS_MAYBE_UNUSED void os_cond_wait(os_cond *c, os_mutex *m) {
#if defined(_WIN32)
    SleepConditionVariableSRW(c, m, INFINITE, 0);
#else
    pthread_cond_wait(c, m);
#endif
}
static OS_MAYBE_UNUSED void os_cond_broadcast(os_cond *c) {
#if defined(_WIN32)
    WakeAllConditionVariable(c);
#else
    pthread_cond_broadcast(c);
#endif
}

/* n threads meet: os_barrier_wait returns once all n have called it. */
typedef struct os_barrier {
    os_mutex mu;
    os_cond cv;
    int n, count;
    unsigned phase;
} os_barrier;
static OS_MAYBE_UNUSED void os_barrier_init(os_barrier *b, int n) {
    os_mutex_init(&b->mu);
    os_cond_init(&b->cv);
    b->n = n, b->count = 0, b->phase = 0;
}
static OS_MAYBE_UNUSED void os_barrier_destroy(os_barrier *b) {
    os_cond_destroy(&b->cv);
    os_mutex_destroy(&b->mu);
}
static OS_MAYBE_UNUSED void os_barrier_wait(os_barrier *b) {
    unsigned phase;
    os_mutex_lock(&b->mu);
    phase = b->phase;
    if (++b->count == b->n) {
        b->count = 0;
        b->phase++;
        os_cond_broadcast(&b->cv);
    } else {
        while (phase == b->phase) os_cond_wait(&b->cv, &b->mu);
    }
    os_mutex_unlock(&b->mu);
}

/* ---- files and command lines in UTF-8 ---- */
#if defined(_WIN32)
/* s (UTF-8) as a wide string, malloc'd; NULL if it is not UTF-8 */
static OS_MAYBE_UNUSED wchar_t *os_wide(const char *s) {
    int n = MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, s, -1, NULL, 0);
    wchar_t *w = n > 0 ? (wchar_t *)malloc((size_t)n * sizeof *w) : NULL;
    if (w && MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, s, -1, w, n) != n) free(w), w = NULL;
    return w;
}
#endif

/* fopen by a UTF-8 path (Windows' fopen takes the ANSI code page's). */
static OS_MAYBE_UNUSED FILE *os_fopen(const char *path, const char *mode) {
#if defined(_WIN32)
    wchar_t *w = os_wide(path), *wm = os_wide(mode);
    FILE *f = w && wm ? _wfopen(w, wm) : NULL;
    free(w), free(wm);
    return f;
#else
    return fopen(path, mode);
#endif
}

/* Why the path, which exists, is no regular file ("a directory"), or NULL
   when it is one or cannot be looked at (opening it then says why). */
static OS_MAYBE_UNUSED const char *os_not_regular(const char *path) {
#if defined(_WIN32)
    wchar_t *w = os_wide(path);
    struct _stat64 st;
    int r = w ? _wstat64(w, &st) : -1;
    free(w);
    if (r != 0 || (st.st_mode & _S_IFMT) == _S_IFREG) return NULL;
    return (st.st_mode & _S_IFMT) == _S_IFDIR ? "a directory" : "a device";
#else
    struct stat st;
    if (stat(path, &st) != 0 || S_ISREG(st.st_mode)) return NULL;
    return S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISCHR(st.st_mode) ? "a character device"
                                                                                                      : "not a regular file";
#endif
}

/* At the top of main: on Windows, argv again in UTF-8 (from the wide
   command line; the C runtime's is in the ANSI code page, which cannot
   spell most names), stdout and stderr binary (bytes out as the model
   made them, "\n" not "\r\n", as on POSIX), and a console's code pages
   UTF-8. stdin stays text: a console's lines end "\r\n", which text mode
   reads as "\n". Elsewhere nothing. The new argv lives until the program
   ends. */
static OS_MAYBE_UNUSED void os_init_main(int *argc, char ***argv) {
#if defined(_WIN32)
    int n = 0, i;
    wchar_t **w = CommandLineToArgvW(GetCommandLineW(), &n);
    char **a = w ? (char **)calloc((size_t)n + 1, sizeof *a) : NULL;
    for (i = 0; a && i < n; i++) {
        int len = WideCharToMultiByte(CP_UTF8, 0, w[i], -1, NULL, 0, NULL, NULL);
        if (len <= 0 || !(a[i] = (char *)malloc((size_t)len))) break;
        WideCharToMultiByte(CP_UTF8, 0, w[i], -1, a[i], len, NULL, NULL);
    }
    if (a && i == n) *argc = n, *argv = a; /* else the runtime's, as they were */
    if (w) LocalFree(w);
    _setmode(_fileno(stdout), _O_BINARY);
    _setmode(_fileno(stderr), _O_BINARY);
    SetConsoleOutputCP(CP_UTF8);
    SetConsoleCP(CP_UTF8);
#else
    (void)argc, (void)argv;
#endif
}

#endif /* INFER_EXAMPLES_OS_H */

/* util.c - errors, allocation, clocks, half-precision conversion, file mapping. */
#include "internal.h"

INFERDEF const char *infer_version(void) { return INFER_VERSION; }

static void infer__set_error(infer_error *err, infer_status code, const char *fmt, ...) {
    va_list ap;
    if (!err) return;
    err->code = code;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    /* names from a file may hold any byte: keep the message one printable line */
    {
        char *p;
        for (p = err->msg; *p; p++)
            if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
    }
}

static void *infer__calloc(size_t n, size_t size) {
    void *p;
    if (size && n > SIZE_MAX / size) return NULL;
    p = INFER_MALLOC(n * size > 0 ? n * size : 1);
    if (p) memset(p, 0, n * size);
    return p;
}

static char *infer__strndup(const char *s, size_t n) {
    char *p = (char *)INFER_MALLOC(n + 1);
    if (!p) return NULL;
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

static uint64_t infer__fnv(uint64_t h, const void *p, size_t n) {
    const uint8_t *b = (const uint8_t *)p;
    size_t i;
    for (i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static int infer__arr_reserve(void **a, size_t elem_size, size_t capacity) {
    stbds_array_header *h = *a ? stbds_header(*a) : NULL;
    size_t cap = h ? h->capacity : 0;
    if (capacity <= cap) return 1;
    /* stb_ds's growth: double, at least 4 */
    cap = INFER__MAX(INFER__MAX(capacity, 2 * cap), 4);
    if (cap > (SIZE_MAX - sizeof *h) / elem_size) return 0;
    h = (stbds_array_header *)INFER_REALLOC(h, cap * elem_size + sizeof *h);
    if (!h) return 0;
    if (!*a) h->length = 0, h->hash_table = NULL, h->temp = 0;
    h->capacity = cap;
    *a = h + 1;
    return 1;
}

static double infer__now_ms(void) {
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

static size_t infer__peak_rss_bytes(void) {
#if defined(_WIN32)
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

/* IEEE half and bfloat16 conversions, bit-exact with round-to-nearest-even
   (what the F16C instructions and llama.cpp's converters give). */
static float infer__bits_to_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static uint32_t infer__f32_to_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* Branch-free: shift the half's exponent and mantissa into float position
   and rescale by 2^112 (which also rebiases the exponent); subnormal halves
   are instead built as 0.5 + m * 2^-24 scaled up, minus 0.5. */
static float infer__fp16_to_fp32(uint16_t h) {
    uint32_t w = (uint32_t)h << 16, sign = w & 0x80000000u, two_w = w + w;
    float normal = infer__bits_to_f32((two_w >> 4) + (0xe0u << 23)) * 1.925929944387236e-34f; /* 2^-112 */
    float subnormal = infer__bits_to_f32((two_w >> 17) | (126u << 23)) - 0.5f;
    uint32_t bits = two_w < (1u << 27) ? infer__f32_to_bits(subnormal) : infer__f32_to_bits(normal);
    return infer__bits_to_f32(sign | bits);
}

static uint16_t infer__fp32_to_fp16(float f) {
    uint32_t u = infer__f32_to_bits(f);
    uint32_t sign = (u >> 16) & 0x8000;
    uint32_t a = u & 0x7fffffff;
    if (a >= 0x7f800000u) /* inf or nan */
        return (uint16_t)(sign | 0x7c00 | (a > 0x7f800000u ? 0x200 : 0));
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* rounds to inf */
    if (a < 0x38800000u) {
        /* result is subnormal or zero: scale so the float adder rounds for us */
        float v = infer__bits_to_f32(a) * 16777216.0f; /* 2^24 */
        uint32_t m = (uint32_t)lrintf(v);
        return (uint16_t)(sign | m);
    }
    {
        uint32_t mant_odd = (a >> 13) & 1;
        a += 0xfff + mant_odd; /* round to nearest even */
        return (uint16_t)(sign | (((a >> 13) - (112u << 10)) & 0x7fff));
    }
}

static float infer__bf16_to_fp32(uint16_t h) { return infer__bits_to_f32((uint32_t)h << 16); }

static uint16_t infer__fp32_to_bf16(float f) {
    uint32_t u = infer__f32_to_bits(f);
    if ((u & 0x7fffffff) > 0x7f800000u) return (uint16_t)((u >> 16) | 64); /* quiet nan */
    return (uint16_t)((u + (0x7fff + ((u >> 16) & 1))) >> 16);
}

/* ---- a file's bytes ---------------------------------------------------- */

#if defined(_WIN32)
#include <sys/stat.h>
#endif

/* What a file of mode m is, for an error that says why it is refused. */
#if !defined(_WIN32)
static const char *infer__file_kind(unsigned m) {
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    return "a special file";
}
#endif

/* A model or state file, whole: mapped, or read (INFER_NO_MMAP, Windows).
   Only a regular file is read: a FIFO, a device (/dev/zero) or a
   directory is refused before a byte is read, as its size says nothing. */
static int infer__blob_open(infer__blob *b, const char *path, infer_error *err) {
    memset(b, 0, sizeof *b);
#if !defined(_WIN32)
    {
        struct stat st;
        /* O_NONBLOCK: opening a FIFO would otherwise wait for a writer */
        int fd = open(path, O_RDONLY | O_NONBLOCK);
        if (fd < 0) {
            infer__set_error(err, INFER_ERR_IO, "cannot open %s: %s", path, strerror(errno));
            return 0;
        }
        if (fstat(fd, &st) != 0) {
            infer__set_error(err, INFER_ERR_IO, "cannot read %s: %s", path, strerror(errno));
            close(fd);
            return 0;
        }
        if (!S_ISREG(st.st_mode)) {
            infer__set_error(err, INFER_ERR_IO, "%s is %s, not a regular file", path, infer__file_kind((unsigned)st.st_mode));
            close(fd);
            return 0;
        }
        if ((uint64_t)st.st_size > (uint64_t)SIZE_MAX) {
            close(fd);
            infer__set_error(err, INFER_ERR_IO, "%s is too large to map on this machine", path);
            return 0;
        }
        b->size = (size_t)st.st_size;
        if (b->size == 0) {
            close(fd);
            b->data = (const uint8_t *)"";
            return 1;
        }
#if !defined(INFER_NO_MMAP)
        {
            void *p = mmap(NULL, b->size, PROT_READ, MAP_SHARED, fd, 0);
            close(fd);
            if (p == MAP_FAILED) {
                infer__set_error(err, INFER_ERR_IO, "cannot map %s: %s", path, strerror(errno));
                return 0;
            }
            b->data = (const uint8_t *)p;
            b->kind = 1;
            return 1;
        }
#else
        size_t got = 0;
        b->data = (const uint8_t *)INFER_MALLOC(b->size);
        if (!b->data) {
            close(fd);
            infer__set_error(err, INFER_ERR_NOMEM, "out of memory reading %s", path);
            return 0;
        }
        /* a regular file: O_NONBLOCK changes nothing for it */
        while (got < b->size) {
            ssize_t r = read(fd, (uint8_t *)b->data + got, b->size - got);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) break;
            got += (size_t)r;
        }
        close(fd);
        if (got != b->size) {
            INFER_FREE((void *)b->data);
            b->data = NULL;
            infer__set_error(err, INFER_ERR_IO, "cannot read %s (it changed while being read?)", path);
            return 0;
        }
        b->kind = 2;
        return 1;
#endif
    }
#else
    {
        struct _stat64 st;
        FILE *f;
        long sz;
        if (_stat64(path, &st) != 0) {
            infer__set_error(err, INFER_ERR_IO, "cannot open %s: %s", path, strerror(errno));
            return 0;
        }
        if ((st.st_mode & _S_IFMT) != _S_IFREG) {
            infer__set_error(err, INFER_ERR_IO, "%s is %s, not a regular file", path,
                             (st.st_mode & _S_IFMT) == _S_IFDIR ? "a directory" : "a device");
            return 0;
        }
        f = fopen(path, "rb");
        if (!f) {
            infer__set_error(err, INFER_ERR_IO, "cannot open %s: %s", path, strerror(errno));
            return 0;
        }
        if (fseek(f, 0, SEEK_END) != 0 || (sz = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
            fclose(f);
            infer__set_error(err, INFER_ERR_IO, "cannot read %s", path);
            return 0;
        }
        b->data = (const uint8_t *)INFER_MALLOC((size_t)sz ? (size_t)sz : 1);
        if (!b->data) {
            fclose(f);
            infer__set_error(err, INFER_ERR_NOMEM, "out of memory reading %s", path);
            return 0;
        }
        if (fread((void *)b->data, 1, (size_t)sz, f) != (size_t)sz) {
            fclose(f);
            INFER_FREE((void *)b->data);
            b->data = NULL;
            infer__set_error(err, INFER_ERR_IO, "cannot read %s", path);
            return 0;
        }
        fclose(f);
        b->size = (size_t)sz;
        b->kind = 2;
        return 1;
    }
#endif
}

static void infer__blob_close(infer__blob *b) {
#if !defined(_WIN32) && !defined(INFER_NO_MMAP)
    if (b->kind == 1) munmap((void *)b->data, b->size);
#endif
    if (b->kind == 2) INFER_FREE((void *)b->data);
    memset(b, 0, sizeof *b);
}

/* Lets the pages of [p, p + len) of a mapped file go from this process's
   memory (they come back from the page cache if read again): for weights
   whose reader is a repacked copy. Nothing for memory the blob does not map
   (a caller may have pointed a tensor elsewhere). */
#if defined(__linux__) && !defined(INFER_NO_MMAP) && !defined(MADV_DONTNEED)
/* strict C99 hides madvise; this is Linux's declaration and value */
#define MADV_DONTNEED 4
#ifdef __cplusplus
extern "C" int madvise(void *addr, size_t len, int advice);
#else
int madvise(void *addr, size_t len, int advice);
#endif
#endif
static void infer__blob_forget(const infer__blob *b, const void *p, size_t len) {
#if defined(MADV_DONTNEED) && !defined(INFER_NO_MMAP)
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), lo = ((uintptr_t)p + page - 1) / page * page;
    uintptr_t hi = ((uintptr_t)p + len) / page * page;
    uintptr_t start = (uintptr_t)b->data, at = (uintptr_t)p;
    if (b->kind == 1 && at >= start && len <= b->size && at - start <= b->size - len && hi > lo)
        madvise((void *)lo, hi - lo, MADV_DONTNEED);
#else
    (void)b, (void)p, (void)len;
#endif
}

/* Asks for huge pages behind [p, p + len) (Linux's transparent huge pages,
   where they are on "madvise"): fewer TLB misses when weights stream by. */
static void infer__advise_huge(void *p, size_t len) {
#if defined(__linux__) && !defined(INFER_NO_MMAP)
    madvise(p, len, 14 /* MADV_HUGEPAGE */);
#else
    (void)p, (void)len;
#endif
}

/* Zeroed memory for a large buffer read in long strides (the KV cache):
   the whole huge pages inside it are asked for before it is first touched,
   so the OS can back them so (a head's keys are a few lines in every 4 KiB
   page; with small pages each costs a TLB miss). */
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


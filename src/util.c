/* util.c - errors, allocation, hashing, stb_ds growth, half-precision conversion. */
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

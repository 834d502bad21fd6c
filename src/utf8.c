/* utf8.c - UTF-8 for every part: lead bytes, strict and lenient decoding,
   encoding, and text cleaned of invalid bytes (for JSON). */
#include "internal.h"

/* Strict: the continuation bytes lead byte b needs (0 for ASCII), or -1 for
   a byte that cannot start a character. *lo..*hi is the range of the first
   continuation byte (so no overlong forms, surrogates or values past
   U+10FFFF ever decode); *bits holds b's value bits. */
static int infer__utf8_lead(unsigned b, int *lo, int *hi, uint32_t *bits) {
    *lo = 0x80, *hi = 0xBF;
    if (b < 0x80) return *bits = b, 0;
    if (b >= 0xC2 && b <= 0xDF) return *bits = b & 0x1F, 1;
    if (b >= 0xE0 && b <= 0xEF) {
        if (b == 0xE0) *lo = 0xA0; /* overlong */
        if (b == 0xED) *hi = 0x9F; /* surrogates */
        return *bits = b & 0x0F, 2;
    }
    if (b >= 0xF0 && b <= 0xF4) {
        if (b == 0xF0) *lo = 0x90; /* overlong */
        if (b == 0xF4) *hi = 0x8F; /* past U+10FFFF */
        return *bits = b & 0x07, 3;
    }
    return -1;
}

/* Strict: the length of the valid character at s (n bytes there), its code
   point in *cp; 0 when it is invalid or cut short. A NUL-terminated string
   may pass n = 4: its NUL stops the check, being no continuation byte. */
static int infer__utf8_next(const char *s, size_t n, uint32_t *cp) {
    const unsigned char *u = (const unsigned char *)s;
    int lo, hi, need, i;
    uint32_t c;
    if (n == 0 || (need = infer__utf8_lead(u[0], &lo, &hi, &c)) < 0 || (size_t)need >= n) return 0;
    for (i = 1; i <= need; i++) {
        if (u[i] < (i == 1 ? lo : 0x80) || u[i] > (i == 1 ? hi : 0xBF)) return 0;
        c = c << 6 | (u[i] & 0x3F);
    }
    *cp = c;
    return need + 1;
}

/* Length of the UTF-8 sequence a lead byte announces (llama.cpp's
   unicode_len_utf8: continuation and invalid bytes count as 1). */
static size_t infer__utf8_len(unsigned char c) {
    static const unsigned char lookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return lookup[c >> 4];
}

/* Decodes one code point at s[*i]; an invalid sequence yields U+FFFD and
   consumes one byte, as llama.cpp's unicode_cpts_from_utf8. */
static uint32_t infer__utf8_decode(const unsigned char *s, size_t n, size_t *i) {
    size_t k = *i;
    unsigned c = s[k];
    uint32_t cp;
    size_t need, j;
    if (c < 0x80) {
        *i = k + 1;
        return c;
    }
    if ((c & 0xe0) == 0xc0) need = 1, cp = c & 0x1f;
    else if ((c & 0xf0) == 0xe0) need = 2, cp = c & 0x0f;
    else if ((c & 0xf8) == 0xf0) need = 3, cp = c & 0x07;
    else need = 0, cp = 0;
    if (need == 0 || k + need >= n) {
        *i = k + 1;
        return 0xfffd;
    }
    for (j = 1; j <= need; j++) {
        if ((s[k + j] & 0xc0) != 0x80) {
            *i = k + 1;
            return 0xfffd;
        }
        cp = (cp << 6) | (s[k + j] & 0x3f);
    }
    /* llama.cpp would throw re-encoding these; treat them as invalid */
    if (cp > 0x10ffff) {
        *i = k + 1;
        return 0xfffd;
    }
    *i = k + need + 1;
    return cp;
}

static size_t infer__utf8_encode(uint32_t cp, char *out) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

INFERDEF size_t infer_utf8_clean(const char *s, size_t n, char *out) {
    char *o = out;
    size_t i = 0;
    while (i < n) {
        uint32_t cp;
        int len = infer__utf8_next(s + i, n - i, &cp);
        if (len > 0 && cp != 0) {
            memcpy(o, s + i, (size_t)len);
            o += len;
            i += (size_t)len;
        } else {
            memcpy(o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        }
    }
    *o = 0;
    return (size_t)(o - out);
}

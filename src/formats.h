/* formats.h - the weight formats, described once: ggml's block layouts (byte for byte), each GGUF type's name and sizes, IQ4's grid, and the helpers that unpack their packed fields, for the CPU's kernels and the GPU's alike.

   quants.c, quants_k.c and the SIMD kernels read blocks through these
   structs; infer_cuda.cu (nvcc) reads the same structs and helpers in its
   decoders, so a field's place is written here and nowhere else. Helpers
   the GPU calls too are INFER__HD (host and device under nvcc).

   Visible with INFER_IMPLEMENTATION and also, alone, with
   INFER_BACKEND_INTERFACE (how infer_cuda.cu includes infer.h). */
#if (defined(INFER_IMPLEMENTATION) || defined(INFER_BACKEND_INTERFACE)) && !defined(INFER_FORMATS_H_INCLUDED)
#define INFER_FORMATS_H_INCLUDED
#include "infer_api.h"

#ifdef __CUDACC__ /* a function both the CPU's code and the GPU's kernels call */
#define INFER__HD __host__ __device__
/* a table the GPU's kernels read too: in its constant memory */
#define INFER__TABLE __constant__
#else
#define INFER__HD
#define INFER__TABLE
#endif

/* ---- 32-value formats (quants.c) ---- */

#define INFER__QK 32

typedef struct { uint16_t d; uint8_t qs[16]; } infer__block_q4_0; /* x = d * (q - 8) */
typedef struct { uint16_t d, m; uint8_t qs[16]; } infer__block_q4_1; /* x = d * q + m */
typedef struct { uint16_t d; uint8_t qh[4]; uint8_t qs[16]; } infer__block_q5_0; /* x = d * (q - 16) */
typedef struct { uint16_t d, m; uint8_t qh[4]; uint8_t qs[16]; } infer__block_q5_1; /* x = d * q + m */
typedef struct { uint16_t d; int8_t qs[32]; } infer__block_q8_0; /* x = d * q */
typedef struct { uint16_t d, s; int8_t qs[32]; } infer__block_q8_1; /* s = d * sum(qs) */
/* In the 4- and 5-bit ones value j is the low nibble of qs[j], value
   j + 16 the high one. */

/* The fifth bit of value j sits in bit j of the 32-bit qh. */
INFER__HD static inline uint32_t infer__qh(const uint8_t qh[4]) {
    return (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
}

/* ---- 256-value formats and IQ4 (quants_k.c) ---- */

#define INFER__QK_K 256

/* 2 bits per value; 16 sub-blocks of 16 with a 4-bit scale and 4-bit min
   each; x = d * scale * q - dmin * min */
typedef struct {
    uint8_t scales[16]; /* low nibble scale, high nibble min */
    uint8_t qs[64];     /* value 32*k + l of each 128: bits 2k.. of qs[l] */
    uint16_t d, dmin;
} infer__block_q2_K;

/* 3 bits per value (2 in qs, the third in hmask); 16 sub-blocks of 16 with
   6-bit signed scales (offset 32); x = d * (scale - 32) * (q - 4) */
typedef struct {
    uint8_t hmask[32];  /* bit k of hmask[l]: third bit of value 32*k + l */
    uint8_t qs[64];
    uint8_t scales[12]; /* 16 six-bit scales, packed */
    uint16_t d;
} infer__block_q3_K;

/* 4 bits per value; 8 sub-blocks of 32 with 6-bit scale and min;
   x = d * scale * q - dmin * min */
typedef struct {
    uint16_t d, dmin;
    uint8_t scales[12]; /* 8 six-bit scales and 8 six-bit mins, packed */
    uint8_t qs[128];    /* in each 64: low nibbles the first 32, high nibbles the next */
} infer__block_q4_K;

/* Q4_K plus a fifth bit per value in qh */
typedef struct {
    uint16_t d, dmin;
    uint8_t scales[12];
    uint8_t qh[32];     /* bit k of qh[l]: fifth bit of value 32*k + l */
    uint8_t qs[128];
} infer__block_q5_K;

/* 6 bits per value (4 in ql, 2 in qh); 16 sub-blocks of 16 with int8
   scales; x = d * scale * (q - 32) */
typedef struct {
    uint8_t ql[128];
    uint8_t qh[64];
    int8_t scales[16];
    uint16_t d;
} infer__block_q6_K;

/* the activations the 256-value formats are dotted with */
typedef struct {
    float d;
    int8_t qs[256];
    int16_t bsums[16]; /* sum of each 16 consecutive qs */
} infer__block_q8_K;

/* 4-bit indices into infer__iq4nl_values; x = d * values[q] */
typedef struct {
    uint16_t d;
    uint8_t qs[16]; /* value j in the low nibble of qs[j], j + 16 in the high */
} infer__block_iq4_nl;

/* IQ4_NL's grid in 8 sub-blocks of 32 with 6-bit scales (offset 32);
   x = d * (scale - 32) * values[q] */
typedef struct {
    uint16_t d;
    uint16_t scales_h;   /* high 2 bits of sub-block scale k at bits 2k.. */
    uint8_t scales_l[4]; /* low 4 bits: sub-block 2i low nibble, 2i+1 high */
    uint8_t qs[128];     /* sub-block k's 16 bytes, nibbles as IQ4_NL's */
} infer__block_iq4_xs;

/* MXFP4 (OCP microscaling FP4): 4-bit E2M1 codes with one E8M0 exponent
   per 32; x = infer__e8m0_half(e) * infer__mxfp4_values[q] */
typedef struct {
    uint8_t e;      /* the block's power of two, biased by 127 */
    uint8_t qs[16]; /* value j in the low nibble of qs[j], j + 16 in the high */
} infer__block_mxfp4;

/* E2M1's values doubled (so they are integers for int8 products); the
   scale below is halved to match */
static INFER__TABLE const int8_t infer__mxfp4_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* 2^(e-128), i.e. half of E8M0's 2^(e-127), as ggml has it: the float whose
   exponent field is e - 1, and for e = 0 and 1 the subnormals 2^-128 and
   2^-127 (written as bits, so that no float rounding is involved) */
INFER__HD static inline float infer__e8m0_half(uint8_t e) {
    union { uint32_t u; float f; } v;
    v.u = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    return v.f;
}

/* IQ4_NL's and IQ4_XS's grid: the value of each 4-bit index */
static INFER__TABLE const int8_t infer__iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                                            1,    13,   25,  38,  53,  69,  89,  113};

/* Q4_K/Q5_K sub-block j's 6-bit scale and min from the 12 packed bytes:
   j < 4 in the low 6 bits of bytes j and j+4; j >= 4 in the nibbles of
   byte j+4 with their top 2 bits in the spare bits of bytes j-4 and j. */
INFER__HD static inline void infer__scale_min_k4(int j, const uint8_t *q, uint8_t *d, uint8_t *m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* Q3_K sub-block j's scale (offset removed): low 4 bits in a nibble of the
   first 8 bytes, high 2 bits in bytes 8..11. */
INFER__HD static inline int infer__scale_q3_K(int j, const uint8_t *s) {
    int lo = j < 8 ? s[j] & 0xF : s[j - 8] >> 4;
    int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (lo | hi << 4) - 32;
}

/* value 128h + 32k + l (k = 0..3, l < 32) of a Q6_K block, 0..63 */
INFER__HD static inline int infer__q6_K_q(const infer__block_q6_K *x, int h, int k, int l) {
    const uint8_t *ql = x->ql + 64 * h, *qh = x->qh + 32 * h;
    int lo = k < 2 ? ql[32 * k + l] & 0xF : ql[32 * (k - 2) + l] >> 4;
    return lo | ((qh[l] >> (2 * k)) & 3) << 4;
}

/* IQ4_XS sub-block k's scale (offset removed) */
INFER__HD static inline int infer__iq4_xs_scale(const infer__block_iq4_xs *x, int k) {
    return (((x->scales_l[k / 2] >> (4 * (k % 2))) & 0xF) | ((x->scales_h >> (2 * k)) & 3) << 4) - 32;
}

/* ---- every GGUF type's name, values per block and bytes per block ----
   INFER__FORMAT_<type> for the tables that list types (infer__format_of
   below, quants.c's with its kernels); UNASSIGNED for the numbers GGUF
   gives no type. */
#define INFER__FORMAT_UNASSIGNED NULL, 0, 0
#define INFER__FORMAT_F32 "F32", 1, 4
#define INFER__FORMAT_F16 "F16", 1, 2
#define INFER__FORMAT_BF16 "BF16", 1, 2
#define INFER__FORMAT_Q4_0 "Q4_0", INFER__QK, sizeof(infer__block_q4_0)
#define INFER__FORMAT_Q4_1 "Q4_1", INFER__QK, sizeof(infer__block_q4_1)
#define INFER__FORMAT_Q5_0 "Q5_0", INFER__QK, sizeof(infer__block_q5_0)
#define INFER__FORMAT_Q5_1 "Q5_1", INFER__QK, sizeof(infer__block_q5_1)
#define INFER__FORMAT_Q8_0 "Q8_0", INFER__QK, sizeof(infer__block_q8_0)
#define INFER__FORMAT_Q8_1 "Q8_1", INFER__QK, sizeof(infer__block_q8_1)
#define INFER__FORMAT_Q2_K "Q2_K", INFER__QK_K, sizeof(infer__block_q2_K)
#define INFER__FORMAT_Q3_K "Q3_K", INFER__QK_K, sizeof(infer__block_q3_K)
#define INFER__FORMAT_Q4_K "Q4_K", INFER__QK_K, sizeof(infer__block_q4_K)
#define INFER__FORMAT_Q5_K "Q5_K", INFER__QK_K, sizeof(infer__block_q5_K)
#define INFER__FORMAT_Q6_K "Q6_K", INFER__QK_K, sizeof(infer__block_q6_K)
#define INFER__FORMAT_Q8_K "Q8_K", INFER__QK_K, sizeof(infer__block_q8_K)
#define INFER__FORMAT_IQ4_NL "IQ4_NL", INFER__QK, sizeof(infer__block_iq4_nl)
#define INFER__FORMAT_IQ4_XS "IQ4_XS", INFER__QK_K, sizeof(infer__block_iq4_xs)
#define INFER__FORMAT_MXFP4 "MXFP4", INFER__QK, sizeof(infer__block_mxfp4)
/* types without a kernel here: their sizes, so that any file's tensor
   table can be read */
#define INFER__FORMAT_IQ2_XXS "IQ2_XXS", 256, 66
#define INFER__FORMAT_IQ2_XS "IQ2_XS", 256, 74
#define INFER__FORMAT_IQ3_XXS "IQ3_XXS", 256, 98
#define INFER__FORMAT_IQ1_S "IQ1_S", 256, 50
#define INFER__FORMAT_IQ3_S "IQ3_S", 256, 110
#define INFER__FORMAT_IQ2_S "IQ2_S", 256, 82
#define INFER__FORMAT_I8 "I8", 1, 1
#define INFER__FORMAT_I16 "I16", 1, 2
#define INFER__FORMAT_I32 "I32", 1, 4
#define INFER__FORMAT_I64 "I64", 1, 8
#define INFER__FORMAT_F64 "F64", 1, 8
#define INFER__FORMAT_IQ1_M "IQ1_M", 256, 56
#define INFER__FORMAT_TQ1_0 "TQ1_0", 256, 54
#define INFER__FORMAT_TQ2_0 "TQ2_0", 256, 66

typedef struct infer__format {
    const char *name; /* NULL: no such type */
    int block_size;   /* values per block */
    int type_size;    /* bytes per block */
} infer__format;

/* Type t's name and sizes (name NULL where GGUF has no type t). */
static inline infer__format infer__format_of(infer_type t) {
    static const infer__format table[] = {
        /* 0 */ {INFER__FORMAT_F32}, {INFER__FORMAT_F16}, {INFER__FORMAT_Q4_0}, {INFER__FORMAT_Q4_1},
        /* 4 */ {INFER__FORMAT_UNASSIGNED}, {INFER__FORMAT_UNASSIGNED}, {INFER__FORMAT_Q5_0}, {INFER__FORMAT_Q5_1},
        /* 8 */ {INFER__FORMAT_Q8_0}, {INFER__FORMAT_Q8_1}, {INFER__FORMAT_Q2_K}, {INFER__FORMAT_Q3_K},
        /* 12 */ {INFER__FORMAT_Q4_K}, {INFER__FORMAT_Q5_K}, {INFER__FORMAT_Q6_K}, {INFER__FORMAT_Q8_K},
        /* 16 */ {INFER__FORMAT_IQ2_XXS}, {INFER__FORMAT_IQ2_XS}, {INFER__FORMAT_IQ3_XXS}, {INFER__FORMAT_IQ1_S},
        /* 20 */ {INFER__FORMAT_IQ4_NL}, {INFER__FORMAT_IQ3_S}, {INFER__FORMAT_IQ2_S}, {INFER__FORMAT_IQ4_XS},
        /* 24 */ {INFER__FORMAT_I8}, {INFER__FORMAT_I16}, {INFER__FORMAT_I32}, {INFER__FORMAT_I64},
        /* 28 */ {INFER__FORMAT_F64}, {INFER__FORMAT_IQ1_M}, {INFER__FORMAT_BF16}, {INFER__FORMAT_UNASSIGNED},
        /* 32 */ {INFER__FORMAT_UNASSIGNED}, {INFER__FORMAT_UNASSIGNED}, {INFER__FORMAT_TQ1_0}, {INFER__FORMAT_TQ2_0},
        /* 36 */ {INFER__FORMAT_UNASSIGNED}, {INFER__FORMAT_UNASSIGNED}, {INFER__FORMAT_UNASSIGNED}, {INFER__FORMAT_MXFP4},
    };
    static const infer__format none = {INFER__FORMAT_UNASSIGNED};
    return (unsigned)t < sizeof table / sizeof table[0] ? table[t] : none;
}

#endif /* INFER_FORMATS_H_INCLUDED */

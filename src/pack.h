/* pack.h - the packed weight layouts (16 rows a vector) pack.c writes and the AVX-512 kernels read: sizes, offsets, packers. */
#ifndef INFER_PACK_H
#define INFER_PACK_H
#include "internal.h"
#include "quants.h"

/* Rows go in groups of INFER__PACK_ROWS (16): one 64-byte vector holds 4
   consecutive k-values (bytes) of each of the 16 rows, so a kernel loads a
   vector of weights once and dots it with one broadcast 4-byte word per
   token (dpbusd), for a tile of 16 rows x several tokens. A packed matrix
   is a run of groups of equal size, each a multiple of 64 bytes; rows past
   the matrix's last in the last group are zero (scales too), so a kernel
   may read the whole group.

   Q4_0 (nb = n / 32 blocks), per group, pairs of blocks (576 bytes each,
   the last one's second block zero when nb is odd), each:
     qs[2][4][16][4]   block, word j, row r: the row's qs[4j .. 4j+3]
                       unchanged (low nibbles: values 4j.., high: 16+4j..)
     d[2][16]          fp16 scales
   Q8_0, the same with 1088-byte pairs:
     qs[2][8][16][4]   block, word j, row r: qs[4j .. 4j+3] + 128 (u8),
                       so dpbusd's unsigned side is the weights
     d[2][16]
   Scales next to their quants keep a group one sequential stream (a
   separate scale array made a second stream, which cost bandwidth).
   The kernels take the offsets back per token and block: -8 * sum(x) for
   Q4_0, -128 * sum(x) for Q8_0, so every integer sum is the vec_dot one. */

#define INFER__PACK_ALIGN(v) (((v) + 63) & ~(size_t)63)

static size_t infer__pack_groups(int64_t rows) {
    return (size_t)((rows + INFER__PACK_ROWS - 1) / INFER__PACK_ROWS);
}

/* Q4_0/Q8_0 with qbytes (16, 32) of quants per row and block: bytes of a
   pair of blocks, of a group, and where block b's quants and scales start */
#define INFER__PACK_PAIR(qbytes) (2 * INFER__PACK_ROWS * (size_t)(qbytes) + 2 * INFER__PACK_ROWS * 2)
static size_t infer__pack_group_bytes(int64_t n, int qbytes) {
    return (size_t)((n / 32 + 1) / 2) * INFER__PACK_PAIR(qbytes);
}
static size_t infer__pack_q_at(int64_t b, int qbytes) {
    return (size_t)(b / 2) * INFER__PACK_PAIR(qbytes) + (size_t)(b % 2) * INFER__PACK_ROWS * (size_t)qbytes;
}
static size_t infer__pack_d_at(int64_t b, int qbytes) {
    return (size_t)(b / 2) * INFER__PACK_PAIR(qbytes) + 2 * INFER__PACK_ROWS * (size_t)qbytes + (size_t)(b % 2) * INFER__PACK_ROWS * 2;
}

INFER__UNUSED static size_t infer__pack_q4_0_size(int64_t n, int64_t rows) {
    return infer__pack_groups(rows) * infer__pack_group_bytes(n, 16);
}
INFER__UNUSED static size_t infer__pack_q8_0_size(int64_t n, int64_t rows) {
    return infer__pack_groups(rows) * infer__pack_group_bytes(n, 32);
}

/* Q5_0, per group and block, 352 bytes:
     qs[4][16][4]   word j, row r: the row's qs[4j .. 4j+3] (as Q4_0)
     hb[8]          (at 256) 64-bit masks, one per llama.cpp lane l (values
                    4l .. 4l+3: lanes 0-3 the low nibbles of words 0-3,
                    lanes 4-7 their high nibbles): bit 4r + i is the fifth
                    bit of value 4l + i of row r, for a masked add of 16
     d[16]          (at 320) fp16 scales
   Values count from 0 (0..31); the kernels take 16 * sum(x) back. */
#define INFER__PACK_Q5_0_BLOCK 352
static size_t infer__pack_q5_0_group_bytes(int64_t n) {
    return INFER__PACK_ALIGN((size_t)(n / 32) * INFER__PACK_Q5_0_BLOCK);
}
INFER__UNUSED static size_t infer__pack_q5_0_size(int64_t n, int64_t rows) {
    return infer__pack_groups(rows) * infer__pack_q5_0_group_bytes(n);
}

/* Q4_1 and Q5_1 (activations Q8_1), per group and block: Q4_0's or
   Q5_0's layout with the fp16 mins after the scales:
     Q4_1 (320 bytes): qs at 0, d[16] at 256, m[16] at 288
     Q5_1 (384 bytes): qs at 0, hb[8] at 256, d[16] at 320, m[16] at 352
   The values count from 0 as the format's do; m * s_x adds the rest. */
#define INFER__PACK_Q4_1_BLOCK 320
#define INFER__PACK_Q5_1_BLOCK 384
static size_t infer__pack_q_1_group_bytes(int64_t n, int q5) {
    return INFER__PACK_ALIGN((size_t)(n / 32) * (q5 ? INFER__PACK_Q5_1_BLOCK : INFER__PACK_Q4_1_BLOCK));
}
INFER__UNUSED static size_t infer__pack_q4_1_size(int64_t n, int64_t rows) {
    return infer__pack_groups(rows) * infer__pack_q_1_group_bytes(n, 0);
}
INFER__UNUSED static size_t infer__pack_q5_1_size(int64_t n, int64_t rows) {
    return infer__pack_groups(rows) * infer__pack_q_1_group_bytes(n, 1);
}

/* Q4_K (nb = n / 256 blocks), per group and block, 2496 bytes:
     sc[8][16]        sub-block scales (6-bit, u8)
     mins[4][16][2]   int16 pairs (min 2k, min 2k+1) per row, for dpwssd
                      against pairs of activation sums (at 128)
     d[16], dmin[16]  fp16 (at 384, 416)
     qs[4][8][16][4]  (at 448) chunk c (64 values), word j, row r: the
                      row's qs[32c + 4j .. +3] (low nibbles: sub-block 2c,
                      values 64c + 4j..; high: sub-block 2c+1, +32)
   Q6_K, per group and block, 3392 bytes (the rows' own size, padded):
     sc[16][16]       sub-block scales, int8
     d[16]            fp16 (at 256), then padding to 320
     per sub-block j (16 values: words 4j .. 4j+3 of 4 values), at
     320 + 192j, 3 vectors:
       lo[16][4]      row r byte i: low 4 bits of value 16j + i, and of
                      16j + 4 + i in the high nibble
       lo2[16][4]     the same for values 16j + 8 + i and 16j + 12 + i
       hi[16][4]      top 2 bits of value 16j + 4w + i at bits 2w, 2w+1
   In both, what a block needs first comes first, so the reads go up
   through a group as the hardware prefetcher likes (scales after the
   quants cost Q4_K half its bandwidth for one token).
   The kernels add -32 * sum(x) per Q6_K sub-block from the activations'
   bsums (Q8_K has them), as the u8 values carry +32. */
#define INFER__PACK_Q4_K_BLOCK 2496
#define INFER__PACK_Q6_K_BLOCK 3392

INFER__UNUSED static size_t infer__pack_q4_K_size(int64_t n, int64_t rows) {
    return infer__pack_groups(rows) * (size_t)(n / INFER__QK_K) * INFER__PACK_Q4_K_BLOCK;
}
INFER__UNUSED static size_t infer__pack_q6_K_size(int64_t n, int64_t rows) {
    return infer__pack_groups(rows) * (size_t)(n / INFER__QK_K) * INFER__PACK_Q6_K_BLOCK;
}

/* F16, per group: w[n][16], value k of the 16 rows (fp16) in 32 bytes;
   the group padded to a multiple of 64 bytes */
INFER__UNUSED static size_t infer__pack_f16_size(int64_t n, int64_t rows) {
    return infer__pack_groups(rows) * INFER__PACK_ALIGN((size_t)n * INFER__PACK_ROWS * 2);
}

/* BF16, per group: w[(n + 1) / 2][16][2], the pair of values 2p, 2p + 1 of
   each row in one 32-bit lane (dpbf16ps's operand); an odd n's last pair
   ends in a zero; the group padded to a multiple of 64 bytes */
INFER__UNUSED static size_t infer__pack_bf16_size(int64_t n, int64_t rows) {
    return infer__pack_groups(rows) * INFER__PACK_ALIGN((size_t)((n + 1) / 2) * INFER__PACK_ROWS * 4);
}

/* The packers (pack.c), as infer__pack_fn: rows [0, rows) of n values, row r
   at w + r * w_stride, into dst (the size above). */
static void infer__pack_q4_0(const void *w, size_t w_stride, int64_t n, int64_t rows, void *dst);
static void infer__pack_q8_0(const void *w, size_t w_stride, int64_t n, int64_t rows, void *dst);
static void infer__pack_q5_0(const void *w, size_t w_stride, int64_t n, int64_t rows, void *dst);
static void infer__pack_q4_1(const void *w, size_t w_stride, int64_t n, int64_t rows, void *dst);
static void infer__pack_q5_1(const void *w, size_t w_stride, int64_t n, int64_t rows, void *dst);
static void infer__pack_q4_K(const void *w, size_t w_stride, int64_t n, int64_t rows, void *dst);
static void infer__pack_q6_K(const void *w, size_t w_stride, int64_t n, int64_t rows, void *dst);
static void infer__pack_f16(const void *w, size_t w_stride, int64_t n, int64_t rows, void *dst);
static void infer__pack_bf16(const void *w, size_t w_stride, int64_t n, int64_t rows, void *dst);

#endif /* INFER_PACK_H */

/* record.c - TFRecord framing
 * (docs/formats.md#event-files-records-and-checksums): CRC-32C, masking,
 * parsing one record and producing the writer's header and footer bytes. */
#include "format/record.h"

#include <pthread.h>
#include <string.h>

/* CRC-32C reflected polynomial (normal form 0x1EDC6F41). */
#define CRC32C_POLY 0x82F63B78u
#define CRC_MASK_DELTA 0xA282EAD8u

/* Slicing-by-8 tables: crc_table[0] is the classic byte-at-a-time table,
 * crc_table[k][b] is the CRC of byte b followed by k zero bytes.  Built once
 * at first use; pthread_once makes that safe from any thread. */
static uint32_t crc_table[8][256];
static pthread_once_t crc_table_once = PTHREAD_ONCE_INIT;

static void crc_table_build(void) {
  for (uint32_t b = 0; b < 256; b++) {
    uint32_t c = b;
    for (int k = 0; k < 8; k++)
      c = (c & 1) ? (c >> 1) ^ CRC32C_POLY : c >> 1;
    crc_table[0][b] = c;
  }
  for (int k = 1; k < 8; k++)
    for (uint32_t b = 0; b < 256; b++) {
      uint32_t prev = crc_table[k - 1][b];
      crc_table[k][b] = (prev >> 8) ^ crc_table[0][prev & 0xFF];
    }
}

static uint32_t crc_update(uint32_t crc, const uint8_t *p, size_t n) {
  while (n >= 8) {
    uint32_t lo = crc ^ smr_le32(p);
    uint32_t hi = smr_le32(p + 4);
    crc = crc_table[7][lo & 0xFF] ^ crc_table[6][(lo >> 8) & 0xFF] ^
          crc_table[5][(lo >> 16) & 0xFF] ^ crc_table[4][lo >> 24] ^
          crc_table[3][hi & 0xFF] ^ crc_table[2][(hi >> 8) & 0xFF] ^
          crc_table[1][(hi >> 16) & 0xFF] ^ crc_table[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n--)
    crc = crc_table[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
  return crc;
}

#if defined(__x86_64__) && defined(__GNUC__)
/* GCC and clang (both define __GNUC__) on x86-64: SSE4.2's crc32
 * instruction computes this very CRC (Castagnoli, reflected), 8 bytes an
 * instruction: several times the table's speed, which shows on a
 * TensorBoard file's million small records.  The target attribute
 * compiles only this function for SSE4.2; it is chosen only when the CPU
 * says it has the instruction (crc_choose). */
#define SMR_CRC_INSTRUCTION 1
__attribute__((target("sse4.2"))) static uint32_t
crc_update_sse42(uint32_t crc, const uint8_t *p, size_t n) {
  uint64_t c = crc;
  while (n >= 8) {
    uint64_t v;
    memcpy(&v, p, 8); /* x86 is little-endian: the bytes in order */
    c = __builtin_ia32_crc32di(c, v);
    p += 8;
    n -= 8;
  }
  uint32_t c32 = (uint32_t)c;
  while (n--)
    c32 = __builtin_ia32_crc32qi(c32, *p++);
  return c32;
}

/* Three chains at once.  One crc32 instruction chain is bound by the
 * instruction's latency (3 cycles for 8 bytes here), yet the CPU can start
 * one every cycle: three independent chains over three consecutive blocks
 * of a long buffer run about three times as fast.  The blocks' CRCs are
 * then joined: the CRC register of A followed by B is the register of A
 * carried over |B| zero bytes, xor B's register started from 0 (the CRC is
 * linear), and "carried over L zero bytes" is a fixed linear map of the 32
 * register bits, tabulated per byte of the register (crc_zeros_build).
 * Adler's crc32c.c and Linux's crc32c-intel join their blocks the same
 * way.  CRC_LONG blocks for long buffers, CRC_SHORT ones for the rest. */
#define CRC_LONG 8192
#define CRC_SHORT 256
static uint32_t crc_long_zeros[4][256], crc_short_zeros[4][256];

/* tab[k][b]: the register b << 8k carried over `len` zero bytes. */
__attribute__((target("sse4.2"))) static void
crc_zeros_build(uint32_t tab[4][256], size_t len) {
  static const uint8_t zeros[CRC_LONG];
  uint32_t bit[32];
  for (int i = 0; i < 32; i++)
    bit[i] = crc_update_sse42(1u << i, zeros, len);
  for (int k = 0; k < 4; k++)
    for (uint32_t b = 0; b < 256; b++) {
      uint32_t v = 0;
      for (int j = 0; j < 8; j++)
        if (b & (1u << j))
          v ^= bit[8 * k + j];
      tab[k][b] = v;
    }
}

static uint32_t crc_zeros_apply(const uint32_t tab[4][256], uint32_t c) {
  return tab[0][c & 0xFF] ^ tab[1][(c >> 8) & 0xFF] ^ tab[2][(c >> 16) & 0xFF] ^
         tab[3][c >> 24];
}

/* Blocks of `len` bytes, three at a time, while 3 * len bytes remain. */
__attribute__((target("sse4.2"))) static uint32_t
crc_blocks3(uint32_t crc, const uint8_t **pp, size_t *np, size_t len,
            const uint32_t zeros[4][256]) {
  const uint8_t *p = *pp;
  size_t n = *np;
  while (n >= 3 * len) {
    uint64_t c0 = crc, c1 = 0, c2 = 0;
    for (const uint8_t *end = p + len; p < end; p += 8) {
      uint64_t a, b, c;
      memcpy(&a, p, 8);
      memcpy(&b, p + len, 8);
      memcpy(&c, p + 2 * len, 8);
      c0 = __builtin_ia32_crc32di(c0, a);
      c1 = __builtin_ia32_crc32di(c1, b);
      c2 = __builtin_ia32_crc32di(c2, c);
    }
    crc = crc_zeros_apply(zeros, (uint32_t)c0) ^ (uint32_t)c1;
    crc = crc_zeros_apply(zeros, crc) ^ (uint32_t)c2;
    p += 2 * len;
    n -= 3 * len;
  }
  *pp = p;
  *np = n;
  return crc;
}

__attribute__((target("sse4.2"))) static uint32_t
crc_update_sse42_3way(uint32_t crc, const uint8_t *p, size_t n) {
  if (n >= 3 * CRC_SHORT) { /* short buffers (a record's length) go straight */
    crc = crc_blocks3(crc, &p, &n, CRC_LONG, crc_long_zeros);
    crc = crc_blocks3(crc, &p, &n, CRC_SHORT, crc_short_zeros);
  }
  return crc_update_sse42(crc, p, n);
}
#endif

static uint32_t (*crc_impl)(uint32_t, const uint8_t *, size_t) = crc_update;

static void crc_choose(void) {
  crc_table_build();
#ifdef SMR_CRC_INSTRUCTION
  __builtin_cpu_init();
  if (__builtin_cpu_supports("sse4.2")) {
    crc_zeros_build(crc_long_zeros, CRC_LONG);
    crc_zeros_build(crc_short_zeros, CRC_SHORT);
    crc_impl = crc_update_sse42_3way;
  }
#endif
}

uint32_t smr_crc32c(const void *buf, size_t n) {
  return smr_crc32c_extend(0, buf, n);
}

uint32_t smr_crc32c_extend(uint32_t crc, const void *buf, size_t n) {
  pthread_once(&crc_table_once, crc_choose);
  /* undo the final xor, continue, redo it */
  return crc_impl(crc ^ 0xFFFFFFFFu, buf, n) ^ 0xFFFFFFFFu;
}

uint32_t smr_crc32c_table_extend(uint32_t crc, const void *buf, size_t n) {
  pthread_once(&crc_table_once, crc_choose);
  return crc_update(crc ^ 0xFFFFFFFFu, buf, n) ^ 0xFFFFFFFFu;
}

uint32_t smr_crc_mask(uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + CRC_MASK_DELTA;
}

static uint32_t masked_crc(const uint8_t *p, size_t n) {
  return smr_crc_mask(smr_crc32c(p, n));
}

int smr_record_parse(const uint8_t *buf, size_t n, const char *file,
                     uint64_t base_offset, const uint8_t **payload,
                     uint64_t *payload_len, smr_error *err) {
  int64_t at = (int64_t)base_offset;
  if (n < SMR_RECORD_HEADER)
    return smr_error_set(err, SMR_ERR_INCOMPLETE, file, at,
                         "truncated record: header needs %d bytes, only %zu "
                         "are there",
                         SMR_RECORD_HEADER, n);
  uint64_t len = smr_le64(buf);
  uint32_t len_crc = smr_le32(buf + 8);
  uint32_t want_len_crc = masked_crc(buf, 8);
  if (len_crc != want_len_crc)
    return smr_error_set(err, SMR_ERR_FORMAT, file, at + 8,
                         "length checksum mismatch: found 0x%08X, expected "
                         "0x%08X (masked CRC32C of the length field)",
                         len_crc, want_len_crc);
  /* Compare without computing len + 16, which could overflow. */
  size_t body = n - SMR_RECORD_HEADER;
  if (body < SMR_RECORD_FOOTER || len > body - SMR_RECORD_FOOTER)
    return smr_error_set(err, SMR_ERR_INCOMPLETE, file, at,
                         "truncated record: it claims %llu payload bytes "
                         "(%llu with framing), only %zu bytes are there",
                         (unsigned long long)len,
                         (unsigned long long)len + SMR_RECORD_OVERHEAD, n);
  const uint8_t *data = buf + SMR_RECORD_HEADER;
  uint32_t found = smr_le32(data + len);
  if (found != SMR_SMDEBUG_DATA_CRC) {
    uint32_t real = masked_crc(data, (size_t)len);
    if (found != real)
      return smr_error_set(
          err, SMR_ERR_FORMAT, file, at + SMR_RECORD_HEADER + (int64_t)len,
          "payload checksum mismatch: found 0x%08X, expected 0x%08X or "
          "0x%08X",
          found, SMR_SMDEBUG_DATA_CRC, real);
  }
  *payload = data;
  *payload_len = len;
  return SMR_OK;
}

void smr_record_header(uint8_t hdr[SMR_RECORD_HEADER], uint64_t len) {
  smr_put_le64(hdr, len);
  smr_put_le32(hdr + 8, masked_crc(hdr, 8));
}

void smr_record_footer(uint8_t ftr[SMR_RECORD_FOOTER], const uint8_t *payload,
                       size_t len, int real_crc) {
  smr_put_le32(ftr, real_crc ? masked_crc(payload, len) : SMR_SMDEBUG_DATA_CRC);
}

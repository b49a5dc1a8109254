/* test_record.c - CRC-32C, masking and TFRecord framing
 * (docs/formats.md#event-files-records-and-checksums). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "format/record.h"
#include "unit.h"

/* The 74-byte payload of the worked example (docs/formats.md#a-worked-example).
 */
static const uint8_t example_payload[74] = {
    0x09, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xf0, 0x3f, 0x10, 0x03,
    0x2a, 0x3d, 0x0a, 0x3b, 0x0a, 0x04, 0x6c, 0x6f, 0x73, 0x73, 0x42,
    0x16, 0x08, 0x01, 0x12, 0x0c, 0x12, 0x0a, 0x08, 0x01, 0x12, 0x06,
    0x6c, 0x6f, 0x73, 0x73, 0x5f, 0x31, 0x22, 0x04, 0x00, 0x00, 0x00,
    0x3f, 0x4a, 0x1b, 0x0a, 0x0e, 0x0a, 0x09, 0x6d, 0x6f, 0x64, 0x65,
    0x5f, 0x73, 0x74, 0x65, 0x70, 0x12, 0x01, 0x33, 0x0a, 0x09, 0x0a,
    0x04, 0x6d, 0x6f, 0x64, 0x65, 0x12, 0x01, 0x31};

/* Build header + payload + footer into a fresh buffer of 16 + n bytes. */
static uint8_t *make_record(const uint8_t *payload, size_t n, int real_crc) {
  uint8_t *rec = malloc(n + SMR_RECORD_OVERHEAD);
  smr_record_header(rec, n);
  if (n)
    memcpy(rec + SMR_RECORD_HEADER, payload, n);
  smr_record_footer(rec + SMR_RECORD_HEADER + n, payload, n, real_crc);
  return rec;
}

static void test_crc_check_value(void) {
  CHECK_EQ_INT(smr_crc32c("123456789", 9), 0xE3069283u);
  CHECK_EQ_INT(smr_crc32c("", 0), 0u);
  /* The same bytes at every alignment and split give the same CRC (the
   * slicing loop and the byte loop must agree). */
  uint8_t buf[64];
  for (int i = 0; i < 64; i++)
    buf[i] = (uint8_t)(i * 37 + 11);
  uint32_t ref = smr_crc32c(buf + 1, 50);
  uint8_t copy[64];
  memcpy(copy + 3, buf + 1, 50);
  CHECK_EQ_INT(smr_crc32c(copy + 3, 50), ref);
}

/* smr_crc32c_extend: a payload checksummed piece by piece (the writer's
 * pieces, docs/formats.md) gets the CRC of the whole, at every split. */
static void test_crc_extend(void) {
  uint8_t buf[200];
  for (int i = 0; i < 200; i++)
    buf[i] = (uint8_t)(i * 91 + 7);
  uint32_t whole = smr_crc32c(buf, sizeof buf);
  CHECK_EQ_INT(smr_crc32c_extend(0, buf, sizeof buf), whole);
  CHECK_EQ_INT(smr_crc32c_extend(smr_crc32c("123", 3), "456789", 6),
               0xE3069283u);
  int bad = 0;
  for (size_t a = 0; a <= sizeof buf; a++)
    for (size_t b = a; b <= sizeof buf; b += 13) {
      uint32_t c = smr_crc32c(buf, a);
      c = smr_crc32c_extend(c, buf + a, b - a);
      c = smr_crc32c_extend(c, buf + b, sizeof buf - b);
      bad += c != whole;
    }
  CHECK_EQ_INT(bad, 0);
  CHECK_EQ_INT(smr_crc32c_extend(whole, buf, 0), whole);
}

/* Whichever way this CPU computes the CRC (SSE4.2's instruction or the
 * table), it agrees with the table at every length and alignment. */
static void test_crc_paths_agree(void) {
  static uint8_t buf[4096 + 16];
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (size_t i = 0; i < sizeof buf; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    buf[i] = (uint8_t)x;
  }
  int bad = 0, n = 0;
  for (size_t off = 0; off < 16; off++)
    for (size_t len = 0; len <= 4096; len += len < 64 ? 1 : 61, n++)
      bad += smr_crc32c_extend(0x12345678u, buf + off, len) !=
             smr_crc32c_table_extend(0x12345678u, buf + off, len);
  CHECK_EQ_INT(bad, 0);
  CHECK(n > 1000);
  CHECK_EQ_INT(smr_crc32c_table_extend(0, "123456789", 9), 0xE3069283u);
}

/* Long buffers, where the instruction path runs three chains over blocks
 * of 256 and 8192 bytes and joins them: every length around the block
 * sizes' multiples agrees with the table, and a known CRC of 64 KiB of
 * zeros and of 0xFF bytes (crcmod's crc-32c, reflected, xor-out). */
static void test_crc_long_paths_agree(void) {
  size_t cap = 3 * 8192 * 3 + 3 * 256 * 2 + 64;
  uint8_t *buf = malloc(cap + 16);
  uint64_t x = 0x243F6A8885A308D3ull;
  for (size_t i = 0; i < cap + 16; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    buf[i] = (uint8_t)x;
  }
  static const size_t base[] = {3 * 256,      3 * 256 * 2,
                                3 * 8192,     3 * 8192 + 3 * 256,
                                3 * 8192 * 2, 3 * 8192 * 3 + 3 * 256 * 2};
  int bad = 0, n = 0;
  for (size_t b = 0; b < sizeof base / sizeof *base; b++)
    for (size_t d = 0; d < 24; d++)
      for (size_t off = 0; off < 16; off += 5, n++) {
        size_t len = base[b] - 12 + d;
        bad += smr_crc32c_extend(0xDEADBEEFu, buf + off, len) !=
               smr_crc32c_table_extend(0xDEADBEEFu, buf + off, len);
      }
  CHECK_EQ_INT(bad, 0);
  CHECK(n > 400);
  memset(buf, 0, 65536);
  CHECK_EQ_INT(smr_crc32c(buf, 65536), smr_crc32c_table_extend(0, buf, 65536));
  CHECK_EQ_INT(smr_crc32c(buf, 32), 0x8A9136AAu); /* RFC 3720 B.4 */
  memset(buf, 0xFF, 65536);
  CHECK_EQ_INT(smr_crc32c(buf, 32), 0x62A8AB43u); /* RFC 3720 B.4 */
  CHECK_EQ_INT(smr_crc32c(buf, 65536), smr_crc32c_table_extend(0, buf, 65536));
  free(buf);
}

static void test_mask_smdebug_constant(void) {
  /* smdebug's footer: masked CRC32C of the ASCII bytes "0x12345678". */
  CHECK_EQ_INT(smr_crc_mask(smr_crc32c("0x12345678", 10)),
               SMR_SMDEBUG_DATA_CRC);
}

static void test_masked_length_table(void) {
  static const struct {
    uint64_t len;
    uint32_t masked;
    uint8_t disk[4];
  } rows[] = {
      {0, 0x07980329u, {0x29, 0x03, 0x98, 0x07}},
      {1, 0x41DE7501u, {0x01, 0x75, 0xDE, 0x41}},
      {10, 0x3ABFA3AEu, {0xAE, 0xA3, 0xBF, 0x3A}},
      {74, 0xB0DB77AFu, {0xAF, 0x77, 0xDB, 0xB0}},
      {100, 0xDF1C5F43u, {0x43, 0x5F, 0x1C, 0xDF}},
  };
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    uint8_t len_bytes[8];
    smr_put_le64(len_bytes, rows[i].len);
    CHECK_EQ_INT(smr_crc_mask(smr_crc32c(len_bytes, 8)), rows[i].masked);
    uint8_t hdr[SMR_RECORD_HEADER];
    smr_record_header(hdr, rows[i].len);
    CHECK(memcmp(hdr, len_bytes, 8) == 0);
    CHECK(memcmp(hdr + 8, rows[i].disk, 4) == 0);
  }
}

static void test_worked_example_record(void) {
  static const uint8_t head[12] = {0x4a, 0, 0,    0,    0,    0,
                                   0,    0, 0xaf, 0x77, 0xdb, 0xb0};
  static const uint8_t foot[4] = {0xb3, 0xc0, 0x2d, 0x06};
  uint8_t *rec = make_record(example_payload, 74, 0);
  CHECK(memcmp(rec, head, 12) == 0);
  CHECK(memcmp(rec + 86, foot, 4) == 0);

  const uint8_t *payload = NULL;
  uint64_t plen = 0;
  smr_error err;
  smr_error_clear(&err);
  CHECK_EQ_INT(smr_record_parse(rec, 90, "f", 0, &payload, &plen, &err),
               SMR_OK);
  CHECK_EQ_INT(plen, 74);
  CHECK(payload == rec + 12);
  free(rec);
}

static void test_two_records_back_to_back(void) {
  uint8_t buf[180];
  uint8_t *a = make_record(example_payload, 74, 0);
  uint8_t *b = make_record(example_payload, 74, 1);
  memcpy(buf, a, 90);
  memcpy(buf + 90, b, 90);
  const uint8_t *p;
  uint64_t plen;
  smr_error err;
  CHECK_EQ_INT(smr_record_parse(buf, 180, "f", 0, &p, &plen, &err), SMR_OK);
  CHECK_EQ_INT(plen, 74);
  CHECK_EQ_INT(smr_record_parse(buf + 90, 90, "f", 90, &p, &plen, &err),
               SMR_OK);
  CHECK(p == buf + 102);
  free(a);
  free(b);
}

static void test_truncated(void) {
  uint8_t *rec = make_record(example_payload, 74, 0);
  const uint8_t *p;
  uint64_t plen;
  smr_error err;
  /* Shorter than the header. */
  CHECK_EQ_INT(smr_record_parse(rec, 5, "f", 100, &p, &plen, &err),
               SMR_ERR_INCOMPLETE);
  CHECK_EQ_INT(err.offset, 100);
  CHECK(strstr(err.msg, "12") && strstr(err.msg, "5"));
  CHECK_EQ_INT(smr_record_parse(rec, 0, "f", 0, &p, &plen, &err),
               SMR_ERR_INCOMPLETE);
  /* Header complete, payload or footer cut short. */
  for (size_t n = 12; n < 90; n++) {
    CHECK_EQ_INT(smr_record_parse(rec, n, "f", 7, &p, &plen, &err),
                 SMR_ERR_INCOMPLETE);
  }
  CHECK_EQ_INT(smr_record_parse(rec, 89, "f", 7, &p, &plen, &err),
               SMR_ERR_INCOMPLETE);
  CHECK(strstr(err.msg, "74") && strstr(err.msg, "89"));
  CHECK_STR(err.file, "f");
  CHECK_EQ_INT(err.offset, 7);
  free(rec);
}

static void test_huge_length_is_incomplete_not_allocated(void) {
  uint8_t hdr[SMR_RECORD_HEADER + 8];
  memset(hdr, 0, sizeof hdr);
  smr_record_header(hdr, UINT64_MAX - 3);
  const uint8_t *p;
  uint64_t plen;
  smr_error err;
  CHECK_EQ_INT(smr_record_parse(hdr, sizeof hdr, "f", 0, &p, &plen, &err),
               SMR_ERR_INCOMPLETE);
  smr_record_header(hdr, 1ull << 40);
  CHECK_EQ_INT(smr_record_parse(hdr, sizeof hdr, "f", 0, &p, &plen, &err),
               SMR_ERR_INCOMPLETE);
}

static void test_length_crc_flip(void) {
  uint8_t *rec = make_record(example_payload, 74, 0);
  const uint8_t *p;
  uint64_t plen;
  smr_error err;
  rec[9] ^= 0x01;
  CHECK_EQ_INT(smr_record_parse(rec, 90, "f", 1000, &p, &plen, &err),
               SMR_ERR_FORMAT);
  CHECK_EQ_INT(err.offset, 1008);
  rec[9] ^= 0x01;
  rec[0] ^= 0x02; /* the length itself: its CRC no longer matches */
  CHECK_EQ_INT(smr_record_parse(rec, 90, "f", 0, &p, &plen, &err),
               SMR_ERR_FORMAT);
  CHECK(strstr(err.msg, "length") != NULL);
  free(rec);
}

static void test_footer_variants(void) {
  const uint8_t *p;
  uint64_t plen;
  smr_error err;
  /* Real masked CRC accepted. */
  uint8_t *rec = make_record(example_payload, 74, 1);
  uint32_t real = smr_crc_mask(smr_crc32c(example_payload, 74));
  CHECK_EQ_INT(smr_le32(rec + 86), real);
  CHECK_EQ_INT(smr_record_parse(rec, 90, "f", 0, &p, &plen, &err), SMR_OK);
  /* Payload flipped under a real CRC: mismatch. */
  rec[50] ^= 0x10;
  CHECK_EQ_INT(smr_record_parse(rec, 90, "f", 20, &p, &plen, &err),
               SMR_ERR_FORMAT);
  CHECK_EQ_INT(err.offset, 20 + 86);
  CHECK(strstr(err.msg, "payload checksum mismatch: found 0x") != NULL);
  CHECK(strstr(err.msg, "expected 0x062DC0B3 or 0x") != NULL);
  free(rec);
  /* Constant footer with flipped payload is accepted (no checksum). */
  rec = make_record(example_payload, 74, 0);
  rec[50] ^= 0x10;
  CHECK_EQ_INT(smr_record_parse(rec, 90, "f", 0, &p, &plen, &err), SMR_OK);
  /* Any other footer value is rejected. */
  rec[86] ^= 0x01;
  CHECK_EQ_INT(smr_record_parse(rec, 90, "f", 0, &p, &plen, &err),
               SMR_ERR_FORMAT);
  free(rec);
}

static void test_empty_payload(void) {
  uint8_t *rec = make_record(NULL, 0, 1);
  const uint8_t *p;
  uint64_t plen = 99;
  smr_error err;
  CHECK_EQ_INT(smr_record_parse(rec, 16, "f", 0, &p, &plen, &err), SMR_OK);
  CHECK_EQ_INT(plen, 0);
  free(rec);
}

/* Walks the records of a corrupt fixture's step-1 event file; returns the
 * status of the first record that fails (SMR_OK if none) with its error. */
static int walk_fixture(const char *cname, smr_error *err) {
  char path[512];
  snprintf(path, sizeof path,
           "tests/fixtures/corrupt/%s/events/000000000001/"
           "000000000001_worker_0.tfevents",
           cname);
  char *buf;
  size_t len;
  if (smr_read_file(path, 1 << 20, &buf, &len, err) != SMR_OK)
    return 99;
  size_t off = 0;
  int rc = SMR_OK;
  while (off < len && rc == SMR_OK) {
    const uint8_t *p;
    uint64_t plen;
    rc = smr_record_parse((uint8_t *)buf + off, len - off, "f", off, &p, &plen,
                          err);
    if (rc == SMR_OK)
      off += (size_t)plen + SMR_RECORD_OVERHEAD;
  }
  free(buf);
  return rc;
}

static void test_corrupt_fixtures(void) {
  smr_error err;
  CHECK_EQ_INT(walk_fixture("huge_length_field", &err), SMR_ERR_INCOMPLETE);
  CHECK_EQ_INT(err.offset, 78);
  CHECK(strstr(err.msg, "1152921504606846976") != NULL);
  CHECK_EQ_INT(walk_fixture("truncated_record", &err), SMR_ERR_INCOMPLETE);
  CHECK_EQ_INT(err.offset, 78);
  CHECK_EQ_INT(walk_fixture("length_crc_mismatch", &err), SMR_ERR_FORMAT);
  CHECK_EQ_INT(err.offset, 86);
  CHECK_EQ_INT(walk_fixture("data_crc_mismatch", &err), SMR_ERR_FORMAT);
  CHECK_EQ_INT(err.offset, 205);
  CHECK(strstr(err.msg, "found 0x5C779AE9, expected 0x062DC0B3 or "
                        "0xDBADCB1A") != NULL);
  CHECK_EQ_INT(walk_fixture("payload_flip_real_crc", &err), SMR_ERR_FORMAT);
  CHECK_EQ_INT(err.offset, 205);
  /* A flipped byte under smdebug's constant footer frames fine. */
  CHECK_EQ_INT(walk_fixture("payload_byte_flipped", &err), SMR_OK);
  CHECK_EQ_INT(walk_fixture("empty_event_file", &err), SMR_OK);
}

int main(void) {
  TEST_RUN(test_crc_check_value);
  TEST_RUN(test_crc_extend);
  TEST_RUN(test_crc_paths_agree);
  TEST_RUN(test_crc_long_paths_agree);
  TEST_RUN(test_mask_smdebug_constant);
  TEST_RUN(test_masked_length_table);
  TEST_RUN(test_worked_example_record);
  TEST_RUN(test_two_records_back_to_back);
  TEST_RUN(test_truncated);
  TEST_RUN(test_huge_length_is_incomplete_not_allocated);
  TEST_RUN(test_length_crc_flip);
  TEST_RUN(test_footer_variants);
  TEST_RUN(test_empty_payload);
  TEST_RUN(test_corrupt_fixtures);
  return TEST_REPORT("test_record");
}

/* record.h - TFRecord framing of event files
 * (docs/formats.md#event-files-records-and-checksums).
 *
 * A record is: u64 LE payload length, u32 masked CRC32C of those 8 bytes,
 * the payload, u32 payload checksum (smdebug's constant or the masked
 * CRC32C of the payload).  This module only frames bytes; it does not know
 * protobuf. */
#ifndef SMR_RECORD_H
#define SMR_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "base/common.h"

#define SMR_RECORD_HEADER 12
#define SMR_RECORD_FOOTER 4
#define SMR_RECORD_OVERHEAD 16
/* masked CRC32C of the ASCII bytes "0x12345678": smdebug's default footer */
#define SMR_SMDEBUG_DATA_CRC 0x062DC0B3u

/* CRC-32C (Castagnoli) of `n` bytes: init 0xFFFFFFFF, final xor. */
uint32_t smr_crc32c(const void *buf, size_t n);
/* The CRC-32C of a buffer's concatenation with `n` more bytes, given the
 * buffer's CRC-32C `crc` (0 for an empty buffer): a payload handed over in
 * pieces gets the same checksum as in one (smr_crc32c(ab) ==
 * smr_crc32c_extend(smr_crc32c(a), b)). */
uint32_t smr_crc32c_extend(uint32_t crc, const void *buf, size_t n);
/* The same computed by the portable table whatever the CPU offers: what
 * test_record holds the instruction path to. */
uint32_t smr_crc32c_table_extend(uint32_t crc, const void *buf, size_t n);
/* TFRecord masking of a CRC. */
uint32_t smr_crc_mask(uint32_t crc);

/* Parse the record that starts at buf[0].  `n` bytes are available.
 * On SMR_OK: *payload points inside buf, *payload_len is its length and the
 * record occupies *payload_len + 16 bytes.
 * Errors (err->file = file, err->offset = base_offset + position):
 *   SMR_ERR_INCOMPLETE  fewer bytes than the header or the record claims
 *                       (a file still being written, or truncated)
 *   SMR_ERR_FORMAT      length CRC or payload checksum mismatch */
int smr_record_parse(const uint8_t *buf, size_t n, const char *file,
                     uint64_t base_offset, const uint8_t **payload,
                     uint64_t *payload_len, smr_error *err);

/* Writer side: the 12 header bytes for a payload of `len` bytes, and the 4
 * footer bytes (real masked CRC32C when real_crc != 0, else smdebug's
 * constant). */
void smr_record_header(uint8_t hdr[SMR_RECORD_HEADER], uint64_t len);
void smr_record_footer(uint8_t ftr[SMR_RECORD_FOOTER], const uint8_t *payload,
                       size_t len, int real_crc);

#endif

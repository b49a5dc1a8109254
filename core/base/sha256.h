/* sha256.h - SHA-256 (FIPS 180-4), used to fingerprint tensor bytes the way
 * the golden fixtures do.  Incremental (init/update/final) and one-shot. */
#ifndef SMR_SHA256_H
#define SMR_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct smr_sha256 {
  uint32_t state[8];
  uint64_t total; /* bytes hashed so far */
  uint8_t block[64];
  size_t used; /* bytes waiting in `block` */
} smr_sha256;

void smr_sha256_init(smr_sha256 *c);
void smr_sha256_update(smr_sha256 *c, const void *data, size_t n);
/* Finish: 32-byte digest.  `c` must be re-initialised before reuse. */
void smr_sha256_final(smr_sha256 *c, uint8_t digest[32]);
/* Finish with 64 lowercase hex digits and a NUL. */
void smr_sha256_final_hex(smr_sha256 *c, char hex[65]);
/* One-shot: hex digest of `n` bytes. */
void smr_sha256_hex(const void *data, size_t n, char hex[65]);

#endif

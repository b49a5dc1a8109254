/* sha256.c - SHA-256 as specified in FIPS 180-4 (sections 4.1.2, 4.2.2,
 * 5.1.1, 5.3.3 and 6.2). */
#include "base/sha256.h"

#include <string.h>

/* First 32 bits of the fractional parts of the cube roots of the first 64
 * primes (FIPS 180-4 4.2.2). */
static const uint32_t round_constants[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1,
    0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
    0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
    0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
    0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
    0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
    0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
    0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

static uint32_t rotr(uint32_t x, unsigned n) {
  return (x >> n) | (x << (32 - n));
}

static uint32_t load_be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
         (uint32_t)p[3];
}

static void store_be32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24);
  p[1] = (uint8_t)(v >> 16);
  p[2] = (uint8_t)(v >> 8);
  p[3] = (uint8_t)v;
}

/* Message schedule W0..W63 of one 512-bit block (6.2.2 step 1). */
static void expand_schedule(const uint8_t *block, uint32_t w[64]) {
  for (int t = 0; t < 16; t++)
    w[t] = load_be32(block + 4 * t);
  for (int t = 16; t < 64; t++) {
    uint32_t s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
    uint32_t s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
    w[t] = w[t - 16] + s0 + w[t - 7] + s1;
  }
}

/* Process one block (6.2.2 steps 2-4). */
static void compress(uint32_t state[8], const uint8_t *block) {
  uint32_t w[64];
  expand_schedule(block, w);
  uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
  uint32_t e = state[4], f = state[5], g = state[6], h = state[7];
  for (int t = 0; t < 64; t++) {
    uint32_t big_s1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
    uint32_t ch = (e & f) ^ (~e & g);
    uint32_t t1 = h + big_s1 + ch + round_constants[t] + w[t];
    uint32_t big_s0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
    uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
    uint32_t t2 = big_s0 + maj;
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  state[0] += a;
  state[1] += b;
  state[2] += c;
  state[3] += d;
  state[4] += e;
  state[5] += f;
  state[6] += g;
  state[7] += h;
}

void smr_sha256_init(smr_sha256 *c) {
  /* Initial hash value H(0) (5.3.3). */
  static const uint32_t initial[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372,
                                      0xa54ff53a, 0x510e527f, 0x9b05688c,
                                      0x1f83d9ab, 0x5be0cd19};
  memcpy(c->state, initial, sizeof initial);
  c->total = 0;
  c->used = 0;
}

void smr_sha256_update(smr_sha256 *c, const void *data, size_t n) {
  const uint8_t *p = data;
  if (n == 0)
    return; /* `data` may be NULL then */
  c->total += n;
  if (c->used > 0) {
    size_t take = 64 - c->used < n ? 64 - c->used : n;
    memcpy(c->block + c->used, p, take);
    c->used += take;
    p += take;
    n -= take;
    if (c->used < 64)
      return;
    compress(c->state, c->block);
    c->used = 0;
  }
  for (; n >= 64; p += 64, n -= 64)
    compress(c->state, p);
  if (n > 0)
    memcpy(c->block, p, n);
  c->used = n;
}

void smr_sha256_final(smr_sha256 *c, uint8_t digest[32]) {
  /* Padding (5.1.1): a 1 bit, zeros to 56 mod 64 bytes, then the message
   * length in bits as a 64-bit big-endian integer. */
  uint64_t bits = c->total * 8;
  c->block[c->used++] = 0x80;
  if (c->used > 56) {
    memset(c->block + c->used, 0, 64 - c->used);
    compress(c->state, c->block);
    c->used = 0;
  }
  memset(c->block + c->used, 0, 56 - c->used);
  store_be32(c->block + 56, (uint32_t)(bits >> 32));
  store_be32(c->block + 60, (uint32_t)bits);
  compress(c->state, c->block);
  for (int i = 0; i < 8; i++)
    store_be32(digest + 4 * i, c->state[i]);
}

void smr_sha256_final_hex(smr_sha256 *c, char hex[65]) {
  static const char digits[] = "0123456789abcdef";
  uint8_t digest[32];
  smr_sha256_final(c, digest);
  for (int i = 0; i < 32; i++) {
    hex[2 * i] = digits[digest[i] >> 4];
    hex[2 * i + 1] = digits[digest[i] & 15];
  }
  hex[64] = '\0';
}

void smr_sha256_hex(const void *data, size_t n, char hex[65]) {
  smr_sha256 c;
  smr_sha256_init(&c);
  smr_sha256_update(&c, data, n);
  smr_sha256_final_hex(&c, hex);
}

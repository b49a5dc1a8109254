/* tb_encode.h - TensorBoard event records for the benchmarks (tb_bench.c,
 * live_latency.c): one add_scalar Event per record, encoded field by field
 * as PyTorch's SummaryWriter writes it (docs/tensorboard.md#the-bytes),
 * framed with a real masked CRC32C.  A header of static functions: each
 * benchmark is one .c file linked with the library. */
#ifndef SMR_BENCH_TB_ENCODE_H
#define SMR_BENCH_TB_ENCODE_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "format/record.h"

static size_t put_varint(uint8_t *p, uint64_t v) {
  size_t n = 0;
  do {
    p[n++] = (uint8_t)((v & 0x7F) | (v > 0x7F ? 0x80 : 0));
    v >>= 7;
  } while (v);
  return n;
}

/* Event{wall_time, step, summary{value{tag, simple_value}}} */
static size_t scalar_event(uint8_t *p, double wall, int64_t step,
                           const char *tag, float x) {
  uint8_t value[256], summary[300];
  size_t tl = strlen(tag), n = 0;
  value[n++] = 0x0A;
  n += put_varint(value + n, tl);
  memcpy(value + n, tag, tl);
  n += tl;
  value[n++] = 0x15;
  memcpy(value + n, &x, 4);
  n += 4;
  size_t s = 0;
  summary[s++] = 0x0A;
  s += put_varint(summary + s, n);
  memcpy(summary + s, value, n);
  s += n;
  size_t e = 0;
  p[e++] = 0x09;
  memcpy(p + e, &wall, 8);
  e += 8;
  if (step) {
    p[e++] = 0x10;
    e += put_varint(p + e, (uint64_t)step);
  }
  p[e++] = 0x2A;
  e += put_varint(p + e, s);
  memcpy(p + e, summary, s);
  return e + s;
}

static void put_record(FILE *f, const uint8_t *payload, size_t n) {
  uint8_t hdr[SMR_RECORD_HEADER], ftr[SMR_RECORD_FOOTER];
  smr_record_header(hdr, n);
  smr_record_footer(ftr, payload, n, 1);
  fwrite(hdr, 1, sizeof hdr, f);
  fwrite(payload, 1, n, f);
  fwrite(ftr, 1, sizeof ftr, f);
}

/* The first record of every event file: Event{wall_time 0,
 * file_version "brain.Event:2"}. */
static void put_version_record(FILE *f) {
  static const uint8_t version[] = {0x09, 0,    0,   0,   0,   0,   0,   0,
                                    0,    0x1A, 13,  'b', 'r', 'a', 'i', 'n',
                                    '.',  'E',  'v', 'e', 'n', 't', ':', '2'};
  put_record(f, version, sizeof version);
}

#endif

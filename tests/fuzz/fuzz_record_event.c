/* fuzz_record_event.c - libFuzzer target for the byte layer of event files:
 * the input is walked as a sequence of TFRecord records with
 * smr_record_parse, and every payload is decoded with smr_event_decode and
 * with smr_event_decode_borrow, which must agree (status and bytes), and
 * from every prefix length with smr_event_decode_head, which must agree
 * with the full decode whenever it succeeds (the head's elements are the
 * value's first ones, everything else equal).
 * A record that fails to frame ends the walk, as it does for a reader (the
 * rest of the file cannot be located). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "format/dtype.h"
#include "format/event.h"
#include "format/record.h"
#include "format/tensor.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Every prefix length n of the payload: a head decode that succeeds
 * agrees with the full (borrowed) decode b of status brc. */
static void heads_agree(const uint8_t *payload, size_t len, int brc,
                        const smr_tensor *b, const char *bname) {
  for (size_t n = 0; n <= len; n++) {
    uint64_t at, dlen;
    if (!smr_event_head_locate(payload, n, len, &at, &dlen))
      continue;
    if (at > n || dlen == 0 || at + dlen > len)
      abort(); /* a location outside what it was given */
    smr_tensor h;
    smr_error err;
    char *hname = NULL;
    size_t tl = len - (size_t)(at + dlen);
    if (smr_event_decode_head(payload, n, payload + at + dlen, tl, len, "f", 0,
                              &h, &hname, &err) != SMR_OK) {
      if (hname || h.owner_)
        abort(); /* a failure that keeps something */
      continue;
    }
    size_t size = smr_dtype_size(h.dtype);
    uint64_t have = size ? (n - at) / size : 0;
    uint64_t want = have < (uint64_t)b->count ? have : (uint64_t)b->count;
    if (brc != SMR_OK || !hname || !bname || strcmp(hname, bname) != 0 ||
        h.dtype != b->dtype || h.stored_dtype != b->stored_dtype ||
        h.ndim != b->ndim || memcmp(h.shape, b->shape, sizeof h.shape) != 0 ||
        (uint64_t)h.count != want || h.nbytes != h.count * size ||
        memcmp(h.data, b->data, h.nbytes) != 0 || h.step != b->step ||
        memcmp(&h.wall_time, &b->wall_time, sizeof h.wall_time) != 0 ||
        h.mode != b->mode || h.mode_step != b->mode_step)
      abort(); /* the head decode says what the full one does not */
    smr_tensor_release(&h);
    free(hname);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  size_t off = 0;
  while (off < size) {
    const uint8_t *payload;
    uint64_t len;
    smr_error err;
    if (smr_record_parse(data + off, size - off, "fuzz.tfevents", off, &payload,
                         &len, &err) != SMR_OK)
      break;
    smr_tensor t, b;
    char *name = NULL;
    int rc = smr_event_decode(payload, (size_t)len, "fuzz.tfevents", off, &t,
                              &name, &err);
    char *bname = NULL;
    int brc = smr_event_decode_borrow(payload, (size_t)len, "fuzz.tfevents",
                                      off, &b, &bname, &err);
    if (rc != brc ||
        (rc == SMR_OK && (t.count != b.count || t.nbytes != b.nbytes ||
                          memcmp(t.data, b.data, t.nbytes) != 0)))
      abort(); /* the two decoders disagree */
    heads_agree(payload, (size_t)len, brc, &b, bname);
    free(bname);
    if (rc == SMR_OK) {
      smr_tensor_release(&t);
      smr_tensor_release(&b);
    }
    free(name);
    off += (size_t)len + SMR_RECORD_OVERHEAD;
  }
  return 0;
}

/* fuzz_record_event.c - libFuzzer target for the byte layer of event files:
 * the input is walked as a sequence of TFRecord records with
 * smr_record_parse, and every payload is decoded with smr_event_decode and
 * with smr_event_decode_borrow, which must agree (status and bytes).
 * A record that fails to frame ends the walk, as it does for a reader (the
 * rest of the file cannot be located). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "format/event.h"
#include "format/record.h"
#include "format/tensor.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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
    int brc = smr_event_decode_borrow(payload, (size_t)len, "fuzz.tfevents",
                                      off, &b, NULL, &err);
    if (rc != brc ||
        (rc == SMR_OK && (t.count != b.count || t.nbytes != b.nbytes ||
                          memcmp(t.data, b.data, t.nbytes) != 0)))
      abort(); /* the two decoders disagree */
    if (rc == SMR_OK) {
      smr_tensor_release(&t);
      smr_tensor_release(&b);
    }
    free(name);
    off += (size_t)len + SMR_RECORD_OVERHEAD;
  }
  return 0;
}

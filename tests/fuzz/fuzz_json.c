/* fuzz_json.c - libFuzzer target for the JSON model's parser
 * (base/json.h), which reads back the reports ProfilerReport's sub-rules
 * write.  Whatever parses must write and parse back to the same text, in
 * both styles; whatever does not must say where, inside the input.  A
 * kept member (checked on its text, not built) writes what its tree
 * would, and fails where the tree fails. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "smrules/json.h"

/* Our own output must read back, and be a fixed point from the second
 * writing on (the first may replace bytes that are not UTF-8 by U+FFFD's
 * escape, which reads back as the character itself). */
static char *write_read(const char *text, smr_json_style style) {
  smr_json_error err;
  smr_json *v = smr_json_parse(text, strlen(text), NULL, &err);
  if (!v)
    abort();
  char *again = smr_json_text(v, style);
  smr_json_free(v);
  return again;
}

static void round_trip(const smr_json *v, smr_json_style style) {
  char *t1 = smr_json_text(v, style);
  char *t2 = write_read(t1, style);
  char *t3 = write_read(t2, style);
  if (strcmp(t2, t3) != 0)
    abort();
  free(t1);
  free(t2);
  free(t3);
}

/* Every member of every object is found by its key (the last of a key),
 * by a scan or, from 16 members on, through the hashed index. */
static void lookups(const smr_json *v) {
  if (smr_json_type_of(v) == SMR_JSON_OBJ)
    for (size_t i = 0; i < smr_json_len(v); i++) {
      const char *k = smr_json_key(smr_json_at(v, i));
      const smr_json *found = smr_json_get(v, k);
      if (!found || strcmp(smr_json_key(found), k) != 0)
        abort();
    }
  for (size_t i = 0; i < smr_json_len(v); i++)
    lookups(smr_json_at(v, i));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* an exact-size heap copy, so ASan catches any read past `size` */
  char *copy = malloc(size ? size : 1);
  if (!copy)
    return 0;
  memcpy(copy, data, size);
  smr_json_limits lim = {.max_bytes = 1 << 20,
                         .max_depth = 32,
                         .keep_member = "k",
                         .keep_style = SMR_JSON_SPACED};
  smr_json_error err;
  bool keep = size & 1; /* a kept member is text in the spaced style */
  smr_json *v = smr_json_parse(copy, size, keep ? &lim : NULL, &err);
  if (!v && err.offset > size)
    abort();  /* an error names a place in the input */
  if (keep) { /* a kept member writes what its tree would */
    smr_json_limits tree_lim = lim;
    tree_lim.keep_member = NULL;
    smr_json_error tree_err;
    smr_json *t = smr_json_parse(copy, size, &tree_lim, &tree_err);
    if (!v != !t || (!v && tree_err.offset != err.offset))
      abort();
    if (v) {
      char *a = smr_json_text(v, SMR_JSON_SPACED);
      char *b = smr_json_text(t, SMR_JSON_SPACED);
      if (strcmp(a, b) != 0)
        abort();
      free(a);
      free(b);
    }
    smr_json_free(t);
  }
  if (v) {
    lookups(v);
    if (!keep)
      round_trip(v, SMR_JSON_COMPACT);
    round_trip(v, SMR_JSON_SPACED);
    smr_json_free(v);
  }
  free(copy);
  return 0;
}

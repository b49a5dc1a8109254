/* fuzz_s3_xml.c - libFuzzer target for the S3 answers smrules parses: a
 * ListObjectsV2 page (keys with entities, sizes, timestamps, continuation
 * tokens) and an <Error> body.  Every key must come out as a non-empty
 * string without NUL; every failure must explain itself. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "source/s3.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* an exact-size heap copy, so ASan catches any read past `size` */
  char *copy = malloc(size ? size : 1);
  if (!copy)
    return 0;
  memcpy(copy, data, size);
  smr_s3_objects o = {0};
  bool truncated = false;
  char *token = NULL;
  smr_error err;
  smr_error_clear(&err);
  int rc = smr_s3_parse_list(copy, size, &o, &truncated, &token, &err);
  if (rc != SMR_OK && err.msg[0] == '\0')
    abort();
  for (size_t i = 0; rc == SMR_OK && i < o.n; i++)
    if (!o.v[i].key[0] || o.v[i].size < 0)
      abort();
  free(token);
  smr_s3_objects_free(&o);
  char code[64], msg[128];
  smr_s3_parse_error(copy, size, code, sizeof code, msg, sizeof msg);
  free(copy);
  return 0;
}

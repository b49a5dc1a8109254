/* fuzz_metrics_request.c - libFuzzer target for the /metrics listener's
 * request parsing: any bytes as a request's line and headers.  The answer
 * is always a complete HTTP/1.1 status line, and 200 only for GET or HEAD
 * of /metrics. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "metrics/metrics_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static smr_metrics *m;
  if (!m) {
    smr_metrics_opts o = {.job = "fuzz"};
    smr_error err;
    if (smr_metrics_start(&o, &m, &err) != SMR_OK)
      abort();
  }
  /* an exact-size heap copy, so ASan catches any read past `size` */
  char *copy = malloc(size ? size : 1);
  if (!copy)
    return 0;
  memcpy(copy, data, size);
  char *a = smr_metrics_answer(m, copy, size);
  if (strncmp(a, "HTTP/1.1 ", 9) != 0)
    abort();
  bool ok = !strncmp(a + 9, "200", 3);
  if (ok &&
      !(size >= 4 && (!memcmp(copy, "GET /metrics", size < 12 ? size : 12) ||
                      !memcmp(copy, "HEAD /metrics", size < 13 ? size : 13))))
    abort();
  free(a);
  free(copy);
  return 0;
}

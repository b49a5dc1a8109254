/* fuzz_index.c - libFuzzer target for the JSON side of a trial: the input
 * is parsed as an index file, as a collections file, and (NUL-terminated)
 * as an index/event/collections file name.  Whatever parses must also
 * serialize and parse back to the same structure. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/path.h"
#include "format/index.h"

static void fuzz_index_file(const char *data, size_t size) {
  smr_index ix;
  smr_error err;
  if (smr_index_parse(data, size, "fuzz.json", &ix, &err) != SMR_OK)
    return;
  if (ix.event_file_problem) {
    /* an unsafe event_file_name is kept out of the index (its values cannot
     * be read), so there is nothing to round-trip */
    smr_index_free(&ix);
    return;
  }
  char *json = smr_index_to_json(&ix);
  smr_index back;
  if (smr_index_parse(json, strlen(json), "fuzz2.json", &back, &err) !=
          SMR_OK ||
      back.n_tensors != ix.n_tensors || back.n_shapes != ix.n_shapes)
    abort(); /* our own output must read back */
  char *again = smr_index_to_json(&back);
  if (strcmp(json, again) != 0)
    abort();
  free(again);
  free(json);
  smr_index_free(&back);
  smr_index_free(&ix);
}

static void fuzz_collections_file(const char *data, size_t size) {
  smr_collections c;
  smr_error err;
  if (smr_collections_parse(data, size, "fuzz.json", &c, &err) != SMR_OK)
    return;
  char *json = smr_collections_to_json(&c);
  smr_collections back;
  if (smr_collections_parse(json, strlen(json), "fuzz2.json", &back, &err) !=
      SMR_OK)
    abort();
  char *again = smr_collections_to_json(&back);
  if (strcmp(json, again) != 0)
    abort();
  free(again);
  free(json);
  smr_collections_free(&back);
  smr_collections_free(&c);
}

static void fuzz_names(const char *data, size_t size) {
  char *s = malloc(size + 1);
  if (!s)
    return;
  memcpy(s, data, size);
  s[size] = '\0';
  int64_t step;
  char *worker = NULL;
  if (smr_parse_step_worker(s, &step, &worker) == SMR_OK)
    free(worker);
  free(smr_parse_collections_worker(s));
  (void)smr_path_is_safe(s);
  (void)smr_mode_from_name(s);
  char *base = NULL;
  int red;
  bool abs;
  if (smr_reduction_name_parse(s, &base, &red, &abs))
    free(base);
  free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* an exact-size heap copy, so ASan catches any read past `size` */
  char *copy = malloc(size ? size : 1);
  if (!copy)
    return 0;
  memcpy(copy, data, size);
  fuzz_index_file(copy, size);
  fuzz_collections_file(copy, size);
  fuzz_names(copy, size);
  free(copy);
  return 0;
}

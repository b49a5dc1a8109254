/* jsonw.h - a small streaming JSON writer (commas and escaping handled),
 * with the number conventions of the project: doubles in shortest
 * round-trip form, non-finite doubles as null (Decision F15). */
#ifndef SMR_JSONW_H
#define SMR_JSONW_H

#include <stdbool.h>
#include <stdint.h>

#include "base/common.h"

#define SMR_JW_MAX_DEPTH 64

typedef struct smr_jw {
  smr_buf out;
  int depth;
  bool need_comma[SMR_JW_MAX_DEPTH];
  bool after_key;
} smr_jw;

void smr_jw_obj(smr_jw *w);
void smr_jw_obj_end(smr_jw *w);
void smr_jw_arr(smr_jw *w);
void smr_jw_arr_end(smr_jw *w);
void smr_jw_key(smr_jw *w, const char *k);
void smr_jw_str(smr_jw *w, const char *s);
void smr_jw_strn(smr_jw *w, const char *s, size_t n);
void smr_jw_int(smr_jw *w, int64_t v);
void smr_jw_double(smr_jw *w, double v);
void smr_jw_bool(smr_jw *w, bool v);
void smr_jw_null(smr_jw *w);
/* Pre-encoded JSON text as one value. */
void smr_jw_raw(smr_jw *w, const char *json);
/* Take the text (caller frees) and reset the writer. */
char *smr_jw_finish(smr_jw *w);

#endif

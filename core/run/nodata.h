/* nodata.h - why a rule evaluated nothing: what its parameters asked the
 * trial for (collections, regexes, tensor names), what of it the trial
 * has, with did-you-mean, and what the trial holds instead.  Works from
 * the parameters the host parsed (any kind of rule: C plugin, Lua, ...),
 * so a rule gets it without code of its own
 * (docs/rule-semantics.md#rules-that-evaluate-nothing). */
#ifndef SMR_NODATA_H
#define SMR_NODATA_H

#include "base/common.h"
#include "base/jsonw.h"
#include "config/params.h"
#include "trial/trial.h"

/* What one rule selected and what the trial has.  `table`/`settings`: a
 * plugin's parameter table and parsed settings (exact values), or NULL
 * (a Lua rule: the "name:value" lines of `params` are read, list items
 * split at commas). */
typedef struct smr_nodata {
  smr_strv lines; /* human sentences, one per line */
  char *json;     /* {"looked_for":[...],"trial_has":{...}} */
} smr_nodata;

void smr_nodata_describe(smr_trial *t, const smrules_param *table,
                         const void *settings, const smr_params *params,
                         smr_nodata *out);
void smr_nodata_free(smr_nodata *d);

#endif

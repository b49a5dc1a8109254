/* regex.c - Python-compatible regular expressions on top of PCRE2.
 *
 * Python's `re` and PCRE share the syntax smdebug data uses (look-ahead,
 * look-behind, named groups, \d \w \s).  Patterns are compiled as UTF-8 with
 * Unicode properties (Python str patterns are Unicode), and matched
 * unanchored, which is re.search.  A compiled pattern is immutable and each
 * match uses its own match data, so one pattern can be shared by threads. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "base/regex.h"

#include <stdlib.h>
#include <string.h>

#include <pcre2.h>

struct smr_regex {
  pcre2_code *code;
};

/* Subjects that are not valid UTF-8 (tensor names come from files) must
 * not make matching fail outright when the library can cope with them. */
#ifdef PCRE2_MATCH_INVALID_UTF
#define SMR_PCRE2_INVALID_UTF PCRE2_MATCH_INVALID_UTF
#else
#define SMR_PCRE2_INVALID_UTF 0
#endif

int smr_regex_compile(const char *pattern, smr_regex **out, smr_error *err) {
  *out = NULL;
  if (!pattern)
    return smr_error_set(err, SMR_ERR_USAGE, NULL, -1,
                         "no regular expression given");
  int code_err = 0;
  PCRE2_SIZE off = 0;
  uint32_t opts = PCRE2_UTF | PCRE2_UCP | SMR_PCRE2_INVALID_UTF;
  pcre2_code *code = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED,
                                   opts, &code_err, &off, NULL);
  if (!code) {
    PCRE2_UCHAR msg[256];
    if (pcre2_get_error_message(code_err, msg, sizeof msg) < 0)
      strcpy((char *)msg, "unknown error");
    return smr_error_set(err, SMR_ERR_USAGE, NULL, (int64_t)off,
                         "invalid regular expression '%.200s': %s at "
                         "offset %zu",
                         pattern, (const char *)msg, (size_t)off);
  }
  /* JIT is only a speed-up: without it (unsupported CPU, no executable
   * memory) the interpreter gives the same answers. */
  (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  smr_regex *re = smr_xmalloc(sizeof *re);
  re->code = code;
  *out = re;
  return SMR_OK;
}

/* Every match runs under a bound: a catastrophic pattern (a Lua rule's,
 * or one from rules.yaml) against a name from the trial stops after this
 * much backtracking instead of running for minutes. */
#define MATCH_LIMIT 1000000u
#define DEPTH_LIMIT 10000u

static pcre2_match_context *bounded_context(void) {
  pcre2_match_context *mc = pcre2_match_context_create(NULL);
  if (mc) {
    pcre2_set_match_limit(mc, MATCH_LIMIT);
    pcre2_set_depth_limit(mc, DEPTH_LIMIT);
  }
  return mc;
}

bool smr_regex_search(const smr_regex *re, const char *subject) {
  if (!re || !subject)
    return false;
  pcre2_match_data *md = pcre2_match_data_create(1, NULL);
  pcre2_match_context *mc = md ? bounded_context() : NULL;
  if (!mc) {
    pcre2_match_data_free(md);
    return false;
  }
  int rc =
      pcre2_match(re->code, (PCRE2_SPTR)subject, strlen(subject), 0, 0, md, mc);
  pcre2_match_context_free(mc);
  pcre2_match_data_free(md);
  /* rc < 0: no match, or an error such as the match limit; both mean the
   * name is not selected. */
  return rc >= 0;
}

/* The first limit of a metered search: plain patterns over tensor names
 * need a few steps (JIT) to a few dozen (interpreter). */
#define METER_FIRST_LIMIT 16u
#define METER_GROWTH 4u

/* One attempt under `limit` steps: 1 match, 0 no match or an error that
 * is not the match limit, -1 the match limit reached. */
static int attempt(const smr_regex *re, const char *subject, size_t len,
                   pcre2_match_data *md, pcre2_match_context *mc,
                   uint64_t limit) {
  pcre2_set_match_limit(mc, (uint32_t)limit);
  int rc = pcre2_match(re->code, (PCRE2_SPTR)subject, len, 0, 0, md, mc);
  return rc >= 0 ? 1 : rc == PCRE2_ERROR_MATCHLIMIT ? -1 : 0;
}

bool smr_regex_search_metered(const smr_regex *re, const char *subject,
                              smr_regex_meter *m) {
  if (!m)
    return smr_regex_search(re, subject);
  if (!re || !subject || m->exhausted)
    return false;
  pcre2_match_data *md = pcre2_match_data_create(1, NULL);
  pcre2_match_context *mc = md ? bounded_context() : NULL;
  if (!mc) {
    pcre2_match_data_free(md);
    return false;
  }
  size_t len = strlen(subject);
  int found = 0;
  for (uint64_t limit = METER_FIRST_LIMIT;; limit *= METER_GROWTH) {
    uint64_t left = m->budget > m->spent ? m->budget - m->spent : 0;
    uint64_t cap = limit < MATCH_LIMIT ? limit : MATCH_LIMIT;
    bool short_of_budget = cap > left;
    if (short_of_budget)
      cap = left;
    found = cap ? attempt(re, subject, len, md, mc, cap) : -1;
    m->spent += cap;
    if (found >= 0)
      break;
    if (short_of_budget) {
      m->exhausted = true;
      break;
    }
    if (cap == MATCH_LIMIT) /* as smr_regex_search: not selected */
      break;
  }
  pcre2_match_context_free(mc);
  pcre2_match_data_free(md);
  return found > 0;
}

void smr_regex_free(smr_regex *re) {
  if (!re)
    return;
  pcre2_code_free(re->code);
  free(re);
}

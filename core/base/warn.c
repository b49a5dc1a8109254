/* warn.c - rate-limited, deduplicated lines on stderr (warn.h). */
#include "base/warn.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "base/text.h"

#define MAX_KINDS 64 /* the 64th holds every later kind */
/* Hidden warnings are told apart by a 64-bit hash of kind and text, in a
 * table of at most HIDDEN_SLOTS (512 KB); once it is 3/4 full, every
 * further warning is counted, repeats included, and the count says so. */
#define HIDDEN_SLOTS (1u << 16)

typedef struct kind {
  char *name;
  size_t shown, hidden;
  smr_strv said; /* warnings shown (at most per_kind): repeats are hidden */
  char *example; /* the first hidden text, for the summary */
  bool rough;    /* hidden may count repeats (the table was full) */
} kind;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static kind kinds[MAX_KINDS];
static size_t nkinds, total_shown, total_hidden;
static bool at_exit;
static uint64_t *hidden_seen; /* 0: free slot */
static size_t nhidden_seen;

/* FNV-1a of kind, a separator and text; never 0. */
static uint64_t text_hash(const char *k, const char *text) {
  uint64_t h = 1469598103934665603ULL;
  for (const char *p = k; *p; p++)
    h = (h ^ (unsigned char)*p) * 1099511628211ULL;
  h = (h ^ 0xff) * 1099511628211ULL;
  for (const char *p = text; *p; p++)
    h = (h ^ (unsigned char)*p) * 1099511628211ULL;
  return h ? h : 1;
}

/* Whether (kind, text) was hidden before; remembers it.  -1: cannot
 * tell (the table is full). */
static int hidden_before(const char *k, const char *text) {
  if (nhidden_seen >= HIDDEN_SLOTS / 4 * 3)
    return -1;
  if (!hidden_seen)
    hidden_seen = smr_xcalloc(HIDDEN_SLOTS, sizeof *hidden_seen);
  uint64_t h = text_hash(k, text);
  for (size_t i = h & (HIDDEN_SLOTS - 1);; i = (i + 1) & (HIDDEN_SLOTS - 1)) {
    if (hidden_seen[i] == h)
      return 1;
    if (!hidden_seen[i]) {
      hidden_seen[i] = h;
      nhidden_seen++;
      return 0;
    }
  }
}

static kind *find_kind(const char *name) {
  for (size_t i = 0; i < nkinds; i++)
    if (!strcmp(kinds[i].name, name))
      return &kinds[i];
  if (nkinds == MAX_KINDS)
    return &kinds[MAX_KINDS - 1];
  kinds[nkinds].name = smr_xstrdup(nkinds == MAX_KINDS - 1 ? "other" : name);
  return &kinds[nkinds++];
}

static void summary_locked(void) {
  for (size_t i = 0; i < nkinds; i++) {
    kind *k = &kinds[i];
    if (k->hidden) {
      char *ex = smr_term_safe(k->example ? k->example : "");
      fprintf(stderr,
              "smrules: %zu more line%s of the kind \"%s\" not shown%s, "
              "such as: %.300s\n",
              k->hidden, k->hidden == 1 ? "" : "s", k->name,
              k->rough ? " (repeats included)" : "", ex);
      free(ex);
    }
    free(k->name);
    free(k->example);
    smr_strv_free(&k->said);
  }
  memset(kinds, 0, sizeof kinds);
  nkinds = total_shown = total_hidden = nhidden_seen = 0;
  free(hidden_seen);
  hidden_seen = NULL;
}

void smr_warn_summary(void) {
  pthread_mutex_lock(&mu);
  summary_locked();
  pthread_mutex_unlock(&mu);
}

static void summary_at_exit(void) {
  /* another thread may still hold the lock at exit: then say nothing
   * rather than wait */
  if (pthread_mutex_trylock(&mu) != 0)
    return;
  summary_locked();
  pthread_mutex_unlock(&mu);
}

static bool say(const char *kname, size_t per_kind, bool dedup,
                const char *prefix, const char *fmt, va_list ap) {
  char text[2048];
  vsnprintf(text, sizeof text, fmt, ap);
  pthread_mutex_lock(&mu);
  kind *k = find_kind(kname);
  if (dedup && smr_strv_contains(&k->said, text)) { /* said already */
    pthread_mutex_unlock(&mu);
    return false;
  }
  bool show = k->shown < per_kind && total_shown < SMR_WARN_TOTAL;
  int before = show || !dedup ? 0 : hidden_before(k->name, text);
  if (before > 0) { /* hidden already: counted once */
    pthread_mutex_unlock(&mu);
    return false;
  }
  if (before < 0)
    k->rough = true;
  if (show) {
    k->shown++;
    total_shown++;
    if (dedup)
      smr_strv_push(&k->said, text);
    char *safe = smr_term_safe(text);
    fprintf(stderr, "smrules: %s%s\n", prefix, safe);
    free(safe);
  } else {
    if (!k->hidden++)
      k->example = smr_xstrdup(text);
    total_hidden++;
    if (!at_exit) {
      at_exit = true;
      atexit(summary_at_exit);
    }
  }
  pthread_mutex_unlock(&mu);
  return show;
}

bool smr_say_limited(const char *kind_name, size_t per_kind, const char *fmt,
                     ...) {
  va_list ap;
  va_start(ap, fmt);
  bool r = say(kind_name, per_kind, false, "", fmt, ap);
  va_end(ap);
  return r;
}

bool smr_warn(const char *kind_name, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  bool r = say(kind_name, SMR_WARN_PER_KIND, true, "warning: ", fmt, ap);
  va_end(ap);
  return r;
}

size_t smr_warn_suppressed(void) {
  pthread_mutex_lock(&mu);
  size_t n = total_hidden;
  pthread_mutex_unlock(&mu);
  return n;
}

/* locate.c - from a location string ("s3://bucket/prefix" or a local
 * directory) to the kind of source that reads it (source_kind.h), and
 * what can be asked of a location before a source is opened. */
#include <string.h>

#include "source/source.h"
#include "source/source_kind.h"

/* The kinds of source, by scheme.  A new kind: source_<kind>.c exporting
 * an smr_source_kind, and one line here (before the local disk, which
 * takes every location no scheme names). */
static const smr_source_kind *const kinds[] = {
    &smr_source_kind_s3,
    &smr_source_kind_local,
};

static const smr_source_kind *kind_of(const char *location) {
  const smr_source_kind *fallback = NULL;
  for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
    const char *s = kinds[i]->scheme;
    if (!s && !fallback)
      fallback = kinds[i];
    else if (s && location && strncmp(location, s, strlen(s)) == 0)
      return kinds[i];
  }
  return fallback;
}

int smr_source_open(const char *location, smr_source **out, smr_error *err) {
  return kind_of(location)->open(location, out, err);
}

bool smr_location_is_remote(const char *location) {
  return kind_of(location)->remote;
}

bool smr_location_has(const char *location, const char *sub) {
  return kind_of(location)->location_has(location, sub);
}

char *smr_location_state_dir(const char *location) {
  return kind_of(location)->state_dir(location);
}

bool smr_source_configure(const char *setting, const char *value) {
  bool known = false;
  for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
    if (kinds[i]->configure)
      known |= kinds[i]->configure(setting, value);
  return known;
}

void smr_source_set_endpoint(const char *url) {
  smr_source_configure("s3-endpoint", url);
}

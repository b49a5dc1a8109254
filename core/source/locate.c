/* locate.c - from a location string ("s3://bucket/prefix" or a local
 * directory) to the source that reads it, and what can be asked of a
 * location before a source is opened. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "source/source.h"
#include "source/source_s3.h"

int smr_source_open(const char *location, smr_source **out, smr_error *err) {
  if (smr_is_s3_location(location))
    return smr_source_s3_open(location, out, err);
  return smr_source_local_open(location, out, err);
}

bool smr_location_is_remote(const char *location) {
  return smr_is_s3_location(location);
}

bool smr_location_has(const char *location, const char *sub) {
  if (smr_is_s3_location(location))
    return smr_s3_location_has(location, sub);
  char *path = smr_xasprintf("%s/%s", location, sub);
  struct stat st;
  bool has = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
  free(path);
  return has;
}

char *smr_location_state_dir(const char *location) {
  if (smr_is_s3_location(location))
    return smr_s3_cache_dir(location);
  return smr_xstrdup(location);
}

void smr_source_set_endpoint(const char *url) {
  smr_s3_set_endpoint(url);
}

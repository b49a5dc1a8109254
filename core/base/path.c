/* path.c - relative paths that stay inside their base directory. */
#include "base/path.h"

#include <string.h>

bool smr_path_is_safe(const char *rel) {
  if (!rel || !rel[0] || rel[0] == '/' || strchr(rel, '\\'))
    return false;
  const char *p = rel;
  while (*p) {
    const char *slash = strchr(p, '/');
    size_t n = slash ? (size_t)(slash - p) : strlen(p);
    if (n == 2 && p[0] == '.' && p[1] == '.')
      return false;
    p += n;
    if (*p == '/')
      p++;
  }
  return true;
}

/* mode.c - smdebug's modes by name and number (docs/formats.md, modes). */
#include "format/mode.h"

#include <ctype.h>
#include <stddef.h>
#include <string.h>

static const char *const mode_names[] = {NULL, "TRAIN", "EVAL", "PREDICT",
                                         "GLOBAL"};

int smr_mode_from_name(const char *name) {
  if (!name)
    return 0;
  while (isspace((unsigned char)*name))
    name++;
  size_t n = strlen(name);
  while (n > 0 && isspace((unsigned char)name[n - 1]))
    n--;
  if (n > 9 && strncmp(name, "ModeKeys.", 9) == 0) {
    name += 9;
    n -= 9;
  }
  if (n == 1 && name[0] >= '1' && name[0] <= '4')
    return name[0] - '0';
  for (int m = SMR_MODE_TRAIN; m <= SMR_MODE_GLOBAL; m++)
    if (strlen(mode_names[m]) == n && strncmp(name, mode_names[m], n) == 0)
      return m;
  return 0;
}

const char *smr_mode_name(int mode) {
  if (mode < SMR_MODE_TRAIN || mode > SMR_MODE_GLOBAL)
    return "?";
  return mode_names[mode];
}

/* path.h - checks on relative paths named by untrusted files (an index
 * entry's event file, a listing's key) before anything is opened. */
#ifndef SMR_PATH_H
#define SMR_PATH_H

#include <stdbool.h>

/* True when `rel` is a relative path that cannot leave its base directory:
 * not empty, not absolute, no ".." component, no NUL, no backslash tricks. */
bool smr_path_is_safe(const char *rel);

#endif

/* procfile.h - reading a small kernel text file (/proc/stat, /proc/meminfo,
 * ...) again and again through one open descriptor and one buffer, so a
 * sample costs a pread and no allocation. */
#ifndef SMR_MON_PROCFILE_H
#define SMR_MON_PROCFILE_H

#include <stddef.h>

typedef struct smr_procfile {
  const char *path;
  int fd; /* -1 when the file could not be opened */
  char *buf;
  size_t cap;
} smr_procfile;

/* Open `path` (kept as given, not copied).  Returns 0, or -1 when the file
 * cannot be opened (the sampler then leaves that metric out). */
int smr_procfile_open(smr_procfile *f, const char *path);
/* The whole file, NUL-terminated (valid until the next read); NULL on a
 * read error or a file larger than 4 MiB. */
const char *smr_procfile_read(smr_procfile *f);
void smr_procfile_close(smr_procfile *f);

#endif

/* source_kind.h - private to core/source/: a kind of source (local disk,
 * S3, ...) as locate.c registers it.  Each source_<kind>.c exports one
 * smr_source_kind; locate.c's table lists them, and every location
 * function of source.h asks the kind the location names.  A new kind of
 * source is its file and one line in that table. */
#ifndef SMR_SOURCE_KIND_H
#define SMR_SOURCE_KIND_H

#include <stdbool.h>

#include "base/common.h"
#include "source/source.h"

typedef struct smr_source_kind {
  const char *name; /* "s3", "local" */
  /* The prefix of the locations of this kind ("s3://"); NULL: every
   * location no other kind claims (the local disk, last in the table). */
  const char *scheme;
  bool remote; /* smr_location_is_remote, and its sources' ops->remote */
  int (*open)(const char *location, smr_source **out, smr_error *err);
  /* Whether location/<sub> holds anything (false on errors). */
  bool (*location_has)(const char *location, const char *sub);
  /* Where smrules keeps its own files about a trial of this kind (a
   * malloc'd path; NULL when it cannot be created). */
  char *(*state_dir)(const char *location);
  /* Optional: a setting given before sources are opened (from the
   * command line, e.g. "s3-endpoint"); true when it is this kind's. */
  bool (*configure)(const char *setting, const char *value);
} smr_source_kind;

extern const smr_source_kind smr_source_kind_local; /* source_local.c */
extern const smr_source_kind smr_source_kind_s3;    /* source_s3.c */

#endif

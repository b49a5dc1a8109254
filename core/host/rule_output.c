/* rule_output.c - the files a rule writes (api->output_dir,
 * api->write_output): its own folder, by default
 * <trial>/rule-output/<instance>, made and written without following a
 * link planted below the trial (base/safefs.h). */
#include <unistd.h>

#include "base/safefs.h"
#include "host/host_int.h"

/* Opens the instance's folder into *fd, made step by step without
 * following a link below the trial (base/safefs.h); SMRULES_ERR, with the
 * rule failed and the reason given, when that cannot be done.  Walked
 * again on every call: a link planted since the last one is refused. */
static int open_output_dir(smrules_ctx *c, int *fd) {
  if (c->parent) { /* the rule running it writes its report (subrule.c) */
    smr_ctx_failf(c, "a rule run by %s writes no files of its own",
                  c->parent->name);
    return SMRULES_ERR;
  }
  if (!c->output_dir)
    c->output_dir =
        smr_xasprintf("%s/rule-output/%s", smr_trial_root(c->trial), c->name);
  smr_error e;
  smr_error_clear(&e);
  if (smr_safe_dir_open(c->output_dir, smr_trial_root(c->trial), true, fd,
                        &e) != SMR_OK) {
    char msg[SMR_ERR_FILE_MAX + SMR_ERR_MSG_MAX + 16];
    smr_error_format(&e, msg, sizeof msg);
    smr_ctx_failf(c, "output folder: %s", msg);
    return SMRULES_ERR;
  }
  return SMRULES_NO_TRIGGER;
}

const char *smr_ctx_output_dir(smrules_ctx *c) {
  if (!c->output_dir_made) {
    int fd;
    if (open_output_dir(c, &fd) != SMRULES_NO_TRIGGER)
      return NULL;
    close(fd);
    c->output_dir_made = true;
  }
  return c->output_dir;
}

/* The plugin names a file below its folder; the host makes the folders
 * and replaces the file itself, so no link the trial's writer planted
 * there (a folder or the file) is followed (base/safefs.h). */
int smr_ctx_write_output(smrules_ctx *c, const char *relpath, const void *data,
                         size_t len) {
  if (!data && len) {
    smr_ctx_failf(c, "write_output: no data for %zu bytes", len);
    return SMRULES_ERR;
  }
  int fd;
  if (open_output_dir(c, &fd) != SMRULES_NO_TRIGGER)
    return SMRULES_ERR;
  smr_error e;
  smr_error_clear(&e);
  int rc = smr_safe_write_below(fd, relpath, data, len, c->output_dir, &e);
  close(fd);
  if (rc != SMR_OK) {
    char msg[SMR_ERR_FILE_MAX + SMR_ERR_MSG_MAX + 16];
    smr_error_format(&e, msg, sizeof msg);
    smr_ctx_failf(c, "cannot write %s", msg);
    return SMRULES_ERR;
  }
  return SMRULES_NO_TRIGGER;
}

/* mode.h - smdebug's modes (ModeKeys): TRAIN, EVAL, PREDICT and GLOBAL,
 * the mode of a step in the index files and of every mode-relative step
 * number a rule asks for. */
#ifndef SMR_MODE_H
#define SMR_MODE_H

enum {
  SMR_MODE_TRAIN = 1,
  SMR_MODE_EVAL = 2,
  SMR_MODE_PREDICT = 3,
  SMR_MODE_GLOBAL = 4
};
/* "TRAIN" etc., surrounding whitespace ignored; also accepts "ModeKeys.TRAIN"
 * and numeric strings "1".."4".  Returns 0 when unknown. */
int smr_mode_from_name(const char *name);
const char *smr_mode_name(int mode); /* "TRAIN", ..., "GLOBAL"; "?" */

#endif

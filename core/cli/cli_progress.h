/* cli_progress.h - a progress line on a terminal while `smrules run`
 * evaluates offline: steps done/total, rate and ETA on stderr, redrawn in
 * place by a thread, cleared at the end. */
#ifndef SMR_CLI_PROGRESS_H
#define SMR_CLI_PROGRESS_H

#include "run/runner.h"

typedef struct smr_cli_progress smr_cli_progress;

/* NULL (nothing shown) when stderr is not a terminal. */
smr_cli_progress *smr_cli_progress_start(smr_runner *r);
/* Draw the last state, clear the line, stop the thread. */
void smr_cli_progress_stop(smr_cli_progress *p);

#endif

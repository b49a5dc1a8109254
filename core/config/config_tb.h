/* config_tb.h - rules.yaml `tensorboard:` as the settings a TensorBoard
 * trial is opened with (docs/tensorboard.md#settings). */
#ifndef SMR_CONFIG_TB_H
#define SMR_CONFIG_TB_H

#include "config/config.h"
#include "trial/tb_trial.h"

/* The settings of `c` (the defaults where a key is absent).  The word
 * lists are allocated; free them with smr_config_tb_free.  SMR_ERR_USAGE
 * (with the YAML position) for a `losses` regex that does not compile. */
int smr_config_tb_settings(const smr_config *c, smr_tb_settings *out,
                           smr_error *err);
void smr_config_tb_free(smr_tb_settings *s);

#endif

/* plugin.h - finding and loading rule plugins (shared objects) and
 * checking their registration against the ABI this host speaks. */
#ifndef SMR_PLUGIN_H
#define SMR_PLUGIN_H

#include "base/common.h"
#include "smrules/smrules.h"

typedef struct smr_plugin {
  void *handle;
  /* The registration, always a whole smrules_rule of this host: a plugin
   * built against an older smrules.h registers fewer members, which read
   * as absent (NULL/0) here. */
  const smrules_rule *reg;
  smrules_rule reg_copy; /* what reg points to */
  char *path;
} smr_plugin;

/* dlopen `path`, call its smrules_plugin_init with the host API and check
 * the registration: API version, struct size (from SMRULES_RULE_MIN_SIZE
 * to this host's sizeof(smrules_rule)), name, callbacks, and the
 * parameter table (types known, fields inside settings_size). */
int smr_plugin_load(const char *path, smr_plugin **out, smr_error *err);
void smr_plugin_unload(smr_plugin *p);

/* Directories searched for plugins, in order: $SMRULES_PLUGIN_PATH
 * (colon-separated), <dir of the executable>/plugins (the build tree),
 * <dir of the executable>/../lib/smrules/plugins (an installed tree). */
void smr_plugin_dirs(smr_strv *out);
/* Every loadable plugin in the search path (first one wins per name),
 * sorted by rule name.  Plugins that fail to load are skipped. */
int smr_plugin_all(smr_plugin ***out, size_t *n);
void smr_plugin_all_free(smr_plugin **v, size_t n);
/* The plugin registering rule `name` (SageMaker's name). */
int smr_plugin_find(const char *name, smr_plugin **out, smr_error *err);

#endif

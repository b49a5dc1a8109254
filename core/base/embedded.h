/* embedded.h - files compiled into the binary at build time: every
 * JSON schema, Lua helper and default rule set (see the Makefile rule for
 * build/gen/embedded.c), so the binary never depends on finding its data
 * files at run time. */
#ifndef SMR_EMBEDDED_H
#define SMR_EMBEDDED_H

#include <stddef.h>

/* Contents of "schemas/rules.schema.json", "lua/smrules.lua", ... (path
 * relative to the repository), NUL-terminated; NULL when absent. */
const char *smr_embedded(const char *path, size_t *len);

#endif

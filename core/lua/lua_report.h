/* lua_report.h - the `report` table of a Lua rule (violations, details,
 * datapoints) and its log function.  Internal to the Lua rule runtime. */
#ifndef SMR_LUA_REPORT_H
#define SMR_LUA_REPORT_H

#include <lua.h>

/* Define the global `report` (inside smr_lua_bind_open). */
void smr_lua_report_open(lua_State *L);

/* lua_CFunction log(level, ...): the arguments through tostring,
 * tab-separated as print does, to api->log at `level` (0 debug .. 3
 * error). */
int smr_lua_log(lua_State *L);

#endif

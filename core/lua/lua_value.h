/* lua_value.h - tensor values as Lua userdata: a view over the host's
 * decoded tensor (no copy into Lua), with element access, shape, dtype,
 * reductions and statistics.  Internal to the Lua rule runtime. */
#ifndef SMR_LUA_VALUE_H
#define SMR_LUA_VALUE_H

#include <lua.h>

#include "format/tensor.h"
#include "trial/trial.h"

/* Create the value metatable (inside smr_lua_bind_open). */
void smr_lua_value_open(lua_State *L);

/* Push an empty value object named by the string at `name_idx` and hand
 * out its tensor and location for the trial to fill.  The object owns
 * nothing until smr_lua_value_ready(); if filling fails, just raise. */
void smr_lua_value_push(lua_State *L, int name_idx, smr_tensor **t,
                        smr_value_loc **loc);
/* The value at `idx` was filled: it now owns the tensor, whose memory
 * counts against the rule's limit (raises the memory-limit error when it
 * does not fit) and whose reading is charged to the budget. */
void smr_lua_value_ready(lua_State *L, int idx);

/* Push the table v:stats() returns; without `sums` only its counts
 * (count, finite, nan, inf, pinf, ninf, zeros, has_finite: t:counts()). */
void smr_lua_push_stats(lua_State *L, const smr_stats *s, bool sums);

#endif

-- smrules.lua - helpers loaded into every rule's sandbox before the rule
-- script (see docs/lua-api.md).  The host runs this chunk with its
-- internals as the only argument; it defines the globals `log`, `print`
-- and `smrules`.  Everything else the rule sees (`trial`, `report`,
-- `params`) comes from the host directly.
local internal = ...
local host_log = internal.log
local unavailable_kind = internal.unavailable_kind
local error_kind = internal.error_kind
local the_trial = trial
local pack, unpack = table.pack, table.unpack

-- log(...) logs at info level; log.debug/info/warning/error pick a level.
-- Arguments are converted with tostring and separated by tabs, as print.
local LEVELS = { debug = 0, info = 1, warning = 2, warn = 2, error = 3 }
log = setmetatable({}, {
  __call = function(_, ...) host_log(1, ...) end,
})
for name, level in pairs(LEVELS) do
  log[name] = function(...) host_log(level, ...) end
end
print = log.info

smrules = {
  version = "1",
  -- invoke_at_step may return this: nothing was evaluated at the step
  SKIPPED = internal.SKIPPED,
  MODES = { "TRAIN", "EVAL", "PREDICT", "GLOBAL" },
}

-- The kind of an error object raised by the host ("TensorUnavailableForStep",
-- "StepUnavailable", "FormatError", ...), nil for any other error value.
function smrules.error_kind(err)
  return error_kind(err)
end

-- The kind when `err` says that data is unavailable (one of
-- TensorUnavailableForStep, TensorUnavailable, StepUnavailable,
-- StepNotYetAvailable, NoMoreData), else nil.
function smrules.is_unavailable(err)
  return unavailable_kind(err)
end

-- Call f(...).  When it raises TensorUnavailableForStep or
-- TensorUnavailable, return nil and the kind; every other error (including
-- StepUnavailable, which concerns the whole step) propagates.
function smrules.try(f, ...)
  local r = pack(pcall(f, ...))
  if r[1] then
    return unpack(r, 2, r.n)
  end
  local kind = unavailable_kind(r[2])
  if kind == "TensorUnavailableForStep" or kind == "TensorUnavailable" then
    return nil, kind
  end
  error(r[2], 0)
end

local function as_tensor(x)
  if type(x) == "string" then
    return smrules.try(the_trial.tensor, the_trial, x)
  end
  return x
end

-- Iterator over the tensors of `names` (names or tensor objects) that have
-- something at `step`: for t, v in smrules.values_at(names, step, opts)
-- gives each tensor and its value; tensors without a value at the step are
-- skipped (docs/rule-semantics.md#steps-modes-and-missing-data).  `opts` as for t:value.
function smrules.values_at(names, step, opts)
  local i = 0
  return function()
    while true do
      i = i + 1
      local x = names[i]
      if x == nil then
        return nil
      end
      local t = as_tensor(x)
      local v = t and smrules.try(t.value, t, step, opts)
      if v ~= nil then
        return t, v
      end
    end
  end
end

-- Same for a reduction: for t, r, saved in smrules.reductions_at(names,
-- step, "mean", {abs = true}) gives each tensor, the reduction (the saved
-- one when present, else computed) and whether it was saved.
function smrules.reductions_at(names, step, reduction, opts)
  local i = 0
  return function()
    while true do
      i = i + 1
      local x = names[i]
      if x == nil then
        return nil
      end
      local t = as_tensor(x)
      if t then
        local r, saved = smrules.try(t.reduction_value, t, step, reduction, opts)
        if r ~= nil then
          return t, r, saved
        end
      end
    end
  end
end

-- Tensor objects for trial:tensor_names(opts).
function smrules.tensors(opts)
  local list = {}
  for i, name in ipairs(the_trial:tensor_names(opts)) do
    list[i] = the_trial:tensor(name)
  end
  return list
end

function smrules.isnan(x)
  return x ~= x
end

function smrules.isinf(x)
  return x == math.huge or x == -math.huge
end

function smrules.isfinite(x)
  return x == x and x ~= math.huge and x ~= -math.huge
end

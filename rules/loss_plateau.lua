-- loss_plateau.lua - fires when the TRAIN loss has not improved on its best
-- value by at least `min_delta` for `patience` evaluated TRAIN steps.
-- Shows state kept across steps (and across runs: save_state/load_state)
-- and a summary written by finish().
--
-- Parameters:
--   patience   (integer, default 5)
--   min_delta  (number, default 0)  improvement needed to reset the wait
--   tensor     (string, optional)   loss tensor; default: the first member
--                                   of the `losses` collection

local patience, min_delta, loss_name
local best, best_step, wait = math.huge, nil, 0
local fired_steps = 0

function init(p)
  patience = math.tointeger(p.patience or 5)
  min_delta = tonumber(p.min_delta or 0)
  if not patience or patience < 1 then
    error("parameter 'patience' must be an integer >= 1")
  end
  loss_name = p.tensor
end

local function loss_tensor()
  local name = loss_name or trial:tensor_names{ collection = "losses" }[1]
  return name and trial:tensor(name)
end

function invoke_at_step(step)
  local mode = trial:mode(step)
  if mode ~= "TRAIN" then
    return smrules.SKIPPED
  end
  local t = loss_tensor()
  if not t then
    return smrules.SKIPPED
  end
  -- raises TensorUnavailableForStep when the loss was not saved: the
  -- runner then counts the step as not evaluated
  local loss = t:value(step):mean()
  report.datapoints(1)
  if loss < best - min_delta then
    best, best_step, wait = loss, step, 0
    return false
  end
  wait = wait + 1
  if wait < patience then
    return false
  end
  report.violation{ tensor = t.name, loss = loss, best = best, best_step = best_step, steps_without_improvement = wait }
  fired_steps = fired_steps + 1
  return true
end

function finish()
  if best_step then
    report.details{ best_loss = best, best_step = best_step, plateau_steps = fired_steps }
  end
end

-- Kept for the next run over the same trial (docs/lua-api.md, "Resuming"):
-- it continues after the last evaluated step instead of starting over.
function save_state()
  return { best = best, best_step = best_step, wait = wait, fired_steps = fired_steps }
end

function load_state(s)
  best, best_step, wait, fired_steps = s.best, s.best_step, s.wait, s.fired_steps
end

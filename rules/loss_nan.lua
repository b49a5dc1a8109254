-- loss_nan.lua - fires when a loss is NaN or infinite.
--
-- Parameters:
--   collection  (string, optional)  default "losses"
--   regex       (string or list, optional)  extra tensors to watch
--
-- Reports each loss tensor with its NaN and infinity counts.

local selection

function init(p)
  selection = { collection = p.collection or "losses", regex = p.regex }
end

function invoke_at_step(step)
  local evaluated, fired = 0, false
  for t, v in smrules.values_at(trial:tensor_names(selection), step) do
    evaluated = evaluated + 1
    local nan, inf = v:count_nan(), v:count_inf()
    if nan + inf > 0 then
      report.violation{ tensor = t.name, nan = nan, inf = inf, size = #v }
      fired = true
    end
  end
  if evaluated == 0 then
    return smrules.SKIPPED
  end
  report.datapoints(evaluated)
  return fired
end

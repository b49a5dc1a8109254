-- gradient_mean_abs.lua - fires when the mean absolute value of any tensor
-- of the `gradients` collection exceeds params.threshold.
--
-- Parameters (declared, so that rules.yaml is checked against them):
-- @param threshold float default=1.0 -- mean |gradient| above which to fire
-- @param collection string default=gradients -- the collection to watch
--
-- Each offending tensor is reported as a violation {tensor, abs_mean}, as
-- the C plugin examples/plugin/gradient_mean_abs.c does.  A step at which
-- no gradient was saved (e.g. an EVAL step) is not evaluated.  NaN never
-- exceeds a threshold; rules/loss_nan.lua watches for NaN.

local threshold, collection

function init(p)
  threshold = tonumber(p.threshold or 1.0)
  if threshold == nil then
    error("parameter 'threshold' must be a number")
  end
  collection = p.collection or "gradients"
end

function invoke_at_step(step)
  -- selected per step: in a live trial, tensors appear as training runs
  local names = trial:tensor_names{ collection = collection }
  local evaluated, fired = 0, false
  for t, mean_abs in smrules.reductions_at(names, step, "mean", { abs = true }) do
    evaluated = evaluated + 1
    if mean_abs > threshold then
      report.violation{ tensor = t.name, abs_mean = mean_abs }
      fired = true
    end
  end
  if evaluated == 0 then
    return smrules.SKIPPED
  end
  report.datapoints(evaluated)
  return fired
end

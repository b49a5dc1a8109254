# smdebug's other form: the pre-1.0.5 signature (other_trials before
# action_str, passed by keyword), set_required_tensors and req_tensors,
# smdebug's module paths, self.logger and a Details report.
import numpy as np

from smdebug.core.modes import ModeKeys
from smdebug.exceptions import TensorUnavailableForStep
from smdebug.rules import Rule


class GradientMeanAbsRequired(Rule):
    def __init__(self, base_trial, threshold="1.0", other_trials=None):
        super().__init__(base_trial, other_trials=other_trials, action_str="")
        self.threshold = float(threshold)
        self.names = self.base_trial.tensor_names(collection="gradients")

    def set_required_tensors(self, step):
        for name in self.names:
            if step in self.base_trial.tensor(name).steps():
                self.req_tensors.add(name, steps=[step])
        if not list(self.req_tensors.get_names()):
            raise TensorUnavailableForStep("gradients", step, ModeKeys.GLOBAL)

    def invoke_at_step(self, step):
        fired = []
        for t in self.req_tensors.get():
            v = t.value(step)
            m = float(np.abs(v.astype(np.float64)).mean())
            if m > self.threshold:
                fired.append(t.name)
        if fired:
            self.report["Details"]["last_trigger"] = {"step": step, "tensors": sorted(fired)}
            self.logger.warning("step %d: %d gradients above %g", step, len(fired), self.threshold)
        return bool(fired)

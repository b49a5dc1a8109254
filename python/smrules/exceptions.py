"""smdebug's exceptions, under smdebug's names (smdebug.exceptions), raised
where smdebug's trial API raises them (docs/python.md)."""

from smrules.modes import ModeKeys


class StepUnavailable(Exception):
    """The step was not saved (the trial has gone past it)."""

    def __init__(self, step, mode=ModeKeys.GLOBAL):
        super().__init__(step, mode)
        self.step, self.mode = step, mode

    def __str__(self):
        return f"Step {self.step} of mode {self.mode} is not available as it was not saved"


class StepNotYetAvailable(Exception):
    """The step has not been written yet; it may still come."""

    def __init__(self, step, mode=ModeKeys.GLOBAL):
        super().__init__(step, mode)
        self.step, self.mode = step, mode

    def __str__(self):
        return f"Step {self.step} of mode {self.mode} not available yet"


class NoMoreData(Exception):
    """Training ended before the step asked for."""


class TensorUnavailableForStep(Exception):
    """The step exists but this tensor was not saved at it."""

    def __init__(self, tname, step, mode=ModeKeys.GLOBAL, has_reductions=False):
        super().__init__(tname, step, mode, has_reductions)
        self.tname, self.step, self.mode = tname, step, mode
        self.has_reductions = has_reductions

    def __str__(self):
        msg = (f"Value for tensor {self.tname} is not available for step {self.step} "
               f"with mode {self.mode.name if isinstance(self.mode, ModeKeys) else self.mode} "
               "as it was not saved.")
        if self.has_reductions:
            msg += " This tensor has reductions saved for this step. You might want to query for the reductions."
        return msg


class TensorUnavailable(Exception):
    """No tensor of this name was ever saved."""

    def __init__(self, tname):
        super().__init__(tname)
        self.tname = tname

    def __str__(self):
        return f"Tensor {self.tname} was not saved."


class ShapeUnavailableForStep(Exception):
    def __init__(self, tname, step, mode=ModeKeys.GLOBAL):
        super().__init__(tname, step, mode)
        self.tname, self.step, self.mode = tname, step, mode

    def __str__(self):
        return f"Shape for tensor {self.tname} is not available for step {self.step} with mode {self.mode}"


class InvalidWorker(Exception):
    def __init__(self, worker):
        super().__init__(worker)
        self.worker = worker

    def __str__(self):
        return f"Invalid Worker: {self.worker}"


class MissingCollectionFiles(Exception):
    def __str__(self):
        return "Training job has ended. All the collection files could not be loaded"


class RuleEvaluationConditionMet(Exception):
    """Raised by a rule when its condition holds at a step (smdebug's)."""

    def __init__(self, rule_name, step, end_of_rule=False):
        super().__init__(rule_name, step, end_of_rule)
        self.rule_name, self.step, self.end_of_rule = rule_name, step, end_of_rule

    def __str__(self):
        return f"Evaluation of the rule {self.rule_name} at step {self.step} resulted in the condition being met"

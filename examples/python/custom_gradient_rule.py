# A SageMaker Debugger custom rule, written as SageMaker's documentation
# writes them: it fires when the mean absolute value of any tensor of the
# gradients collection exceeds `threshold`.  smrules runs it unchanged:
#
#   rules:
#     - python: custom_gradient_rule.py
#       class: CustomGradientRule
#       parameters: {threshold: "1.0"}
#
# (docs/python.md, "Custom rules in Python").
from smdebug.rules.rule import Rule


class CustomGradientRule(Rule):
    def __init__(self, base_trial, threshold=10.0):
        super().__init__(base_trial)
        self.threshold = float(threshold)

    def invoke_at_step(self, step):
        for tname in self.base_trial.tensor_names(collection="gradients"):
            t = self.base_trial.tensor(tname)
            abs_mean = t.reduction_value(step, "mean", abs=True)
            if abs_mean > self.threshold:
                return True
        return False

# A rule of smdebug 1.0.5 and later that names its actions in code
# (action_str, positionally): smrules says which rules.yaml actions those
# are; the trigger itself is the same.
from smdebug.rules.rule import Rule

ACTIONS = ('[{"name": "StopTraining", "training_job_prefix": "my-job"},'
           ' {"name": "email", "endpoint": "ml-team@example.com"}]')


class LossAbove(Rule):
    def __init__(self, base_trial, threshold="1e6"):
        super().__init__(base_trial, ACTIONS)
        self.threshold = float(threshold)

    def invoke_at_step(self, step):
        for name in self.base_trial.tensor_names(collection="losses"):
            if self.base_trial.tensor(name).value(step).max() > self.threshold:
                return True
        return False

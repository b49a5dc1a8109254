"""smdebug's custom-rule API (smdebug.rules) over smrules' trial API
(docs/python.md, "Custom rules in Python").

A SageMaker custom rule is a class deriving Rule with invoke_at_step(step)
returning True when its condition holds.  The same class runs

- in a notebook or a script: invoke_rule(MyRule(create_trial(path)), ...);
- in `smrules run`, named by a `python:` entry of rules.yaml, where smrules'
  invocation loop, statuses and actions drive it (smrules._rule_host).

The names are smdebug's: Rule, RequiredTensors, invoke_rule, Actions and
RuleEvaluationConditionMet (smrules.exceptions)."""

import json
import logging

from smrules.exceptions import (
    NoMoreData,
    RuleEvaluationConditionMet,
    StepUnavailable,
    TensorUnavailable,
    TensorUnavailableForStep,
)

__all__ = ["Rule", "RequiredTensors", "RequiredTensorsForTrial", "Actions", "invoke_rule",
           "get_logger", "RuleEvaluationConditionMet"]

_LOG_NAME = "smrules.rules"


def get_logger(name=_LOG_NAME):
    """The logger rules use (smdebug.core.logger.get_logger): messages at
    INFO and above go to stderr, or into smrules' log under `smrules run`."""
    log = logging.getLogger(name)
    if not log.handlers and not logging.getLogger().handlers:
        h = logging.StreamHandler()
        h.setFormatter(logging.Formatter("[%(asctime)s %(levelname)s %(name)s] %(message)s"))
        log.addHandler(h)
        log.setLevel(logging.INFO)
        log.propagate = False
    return log


# ---------------------------------------------------------------- actions

ALLOWED_ACTIONS = ["stoptraining", "sms", "email"]

# smdebug's action names -> smrules' action kinds (docs/actions.md)
_SMRULES_ACTION = {"stoptraining": "StopTraining", "email": "Email", "sms": "SMS"}


class Actions:
    """smdebug's action_str: a JSON object or list of objects
    {"name": "stoptraining", "training_job_prefix": ...}, {"name": "email"
    or "sms", "endpoint": ...}.  smdebug called SageMaker and SNS itself;
    smrules takes actions in `smrules run` (rules.yaml's `actions:`, to which
    these map: .smrules_actions), so invoke() here only records and logs
    that the rule asked for them."""

    def __init__(self, actions_str="", rule_name=""):
        self.rule_name = rule_name
        self._actions = []  # [{"name": ..., ...}] as smdebug accepted them
        self.invoked = 0
        text = actions_str.strip() if isinstance(actions_str, str) else ""
        if text:
            self._register(text)

    def _register(self, text):
        log = get_logger()
        try:
            doc = json.loads(text.lower())  # smdebug lower-cased the whole string
        except ValueError as e:
            raise ValueError(f"action_str is not JSON ({e}): {text[:200]!r}") from None
        items = [doc] if isinstance(doc, dict) else doc if isinstance(doc, list) else None
        if items is None:
            log.warning("action_str %r: expected an object or a list of objects; no action", text)
            return
        for a in items:
            if not isinstance(a, dict) or "name" not in a:
                log.warning("action %r: expected an object with a name; skipped", a)
                continue
            name = a["name"]
            if name == "stoptraining" and "training_job_prefix" not in a:
                log.warning("action stoptraining needs 'training_job_prefix'; skipped (as smdebug)")
                continue
            if name in ("sms", "email") and "endpoint" not in a:
                log.warning("action %s needs 'endpoint'; skipped (as smdebug)", name)
                continue
            if name not in ALLOWED_ACTIONS:
                log.warning("action %s is not supported; allowed: %s", name, ALLOWED_ACTIONS)
                continue
            self._actions.append(dict(a))

    @property
    def smrules_actions(self):
        """The same actions as rules.yaml entries: "StopTraining",
        {"Email": address}, {"SMS": number}."""
        out = []
        for a in self._actions:
            kind = _SMRULES_ACTION[a["name"]]
            out.append(kind if kind == "StopTraining" else {kind: a["endpoint"]})
        return out

    def invoke(self, message=""):
        self.invoked += 1
        if self._actions:
            get_logger().info("rule %s fired: actions %s are smrules run's to take (rules.yaml)",
                              self.rule_name, json.dumps(self.smrules_actions))


# -------------------------------------------------------- required tensors

class RequiredTensorsForTrial:
    """The tensors and steps a rule declared for one trial
    (set_required_tensors), read before invoke_at_step."""

    def __init__(self, trial):
        self.trial = trial
        self._tensor_steps = {}
        self._tensors = {}

    def _add_steps(self, name, steps):
        self._tensor_steps.setdefault(name, []).extend(int(s) for s in steps)
        if name not in self._tensors:
            self._tensors[name] = self.trial.tensor(name)

    def add(self, name, steps, should_match_regex=False):
        if should_match_regex:
            for n in self.trial.tensor_names(regex=[name]):
                self._add_steps(n, steps)
        else:
            if not self.trial.has_tensor(name):
                raise TensorUnavailable(name)
            self._add_steps(name, steps)

    def get_tensor_steps(self, name):
        return self._tensor_steps[name]

    def get_names(self):
        return self._tensor_steps.keys()

    def get(self):
        return self._tensors.values()

    def clear(self):
        self._tensor_steps.clear()
        self._tensors.clear()

    def fetch(self):
        """Wait for the steps, then read every value in one bulk read: a
        missing one raises what Tensor.value raises (as smdebug's fetch)."""
        steps = sorted({s for v in self._tensor_steps.values() for s in v})
        if not steps:
            return
        self.trial.wait_for_steps(steps)
        got = self.trial.get_tensors(self._tensor_steps)
        for name, want in self._tensor_steps.items():
            have = got.get(name, {})
            for s in want:
                if s not in have:
                    self._tensors[name].value(s)  # raises smdebug's exception


class RequiredTensors:
    """Required tensors per trial (Rule.req_tensors): add(name, steps,
    trial=None, should_match_regex=False), get(trial=None), ..."""

    def __init__(self, base_trial, other_trials):
        self.base_trial = base_trial
        self._per_trial = {base_trial: RequiredTensorsForTrial(base_trial)}
        for t in other_trials or []:
            self._per_trial[t] = RequiredTensorsForTrial(t)

    def _of(self, trial):
        return self._per_trial[self.base_trial if trial is None else trial]

    def add(self, name, steps, trial=None, should_match_regex=False):
        self._of(trial).add(name, steps, should_match_regex=should_match_regex)

    def get_tensor_steps(self, name, trial=None):
        return self._of(trial).get_tensor_steps(name)

    def get_names(self, trial=None):
        return self._of(trial).get_names()

    def get(self, trial=None):
        return self._of(trial).get()

    def clear(self):
        for r in self._per_trial.values():
            r.clear()

    def fetch(self):
        for r in self._per_trial.values():
            r.fetch()


# -------------------------------------------------------------- the rule

def _split_init_args(args, kwargs):
    """Rule.__init__'s arguments after base_trial, in either signature smdebug
    has had: (other_trials=None, action_str="") before 1.0.5 and
    (action_str, other_trials=None) after.  Positionally, a string is the
    action string and a list (or None) the other trials."""
    other_trials = kwargs.pop("other_trials", None)
    action_str = kwargs.pop("action_str", "")
    if kwargs:
        raise TypeError(f"Rule.__init__() got unexpected keyword arguments {sorted(kwargs)}")
    if len(args) > 2:
        raise TypeError(f"Rule.__init__() takes at most 3 positional arguments ({len(args) + 1} given)")
    for a in args:
        if isinstance(a, str):
            action_str = a
        elif a is None or isinstance(a, (list, tuple)):
            other_trials = a
        else:
            raise TypeError(f"Rule.__init__(): expected an action string or a list of trials, got {a!r}")
    return other_trials, action_str


class Rule:
    """The base of a custom rule (smdebug.rules.Rule).  Subclasses define
    invoke_at_step(step) -> bool and may define set_required_tensors(step)."""

    def __init__(self, base_trial, *args, **kwargs):
        other_trials, action_str = _split_init_args(args, dict(kwargs))
        self.base_trial = base_trial
        self.other_trials = list(other_trials) if other_trials is not None else None
        self.trials = [base_trial] + (self.other_trials or [])
        self.req_tensors = RequiredTensors(self.base_trial, self.other_trials)
        self.logger = get_logger()
        self.rule_name = self.__class__.__name__
        self.action_str = action_str or ""
        self._actions = Actions(self.action_str, rule_name=self.rule_name)
        self.report = {"RuleTriggered": 0, "Violations": 0, "Details": {}, "Datapoints": 0,
                       "RuleParameters": ""}

    def set_required_tensors(self, step):
        pass

    def invoke_at_step(self, step):
        raise NotImplementedError(f"{self.__class__.__name__} must define invoke_at_step(self, step)")

    def invoke(self, step):
        """One step as smdebug's Rule.invoke: wait for the step, read the
        required tensors, invoke_at_step; True raises
        RuleEvaluationConditionMet after the actions."""
        self.base_trial.wait_for_steps([step])
        self.req_tensors.clear()
        self.set_required_tensors(step)
        self.req_tensors.fetch()
        if self.invoke_at_step(step):
            self._actions.invoke()
            raise RuleEvaluationConditionMet(self.rule_name, step)


def invoke_rule(rule_obj, start_step=0, end_step=None, raise_eval_cond=False):
    """smdebug's loop: rule_obj.invoke(step) for step = start_step, ... up to
    end_step (exclusive; None: until the trial ends, which raises NoMoreData
    as in smdebug).  Steps without the data are skipped; a met condition
    raises RuleEvaluationConditionMet when raise_eval_cond, else the loop
    goes on (and ends when the exception says end_of_rule).  Returns the
    steps at which the condition held (smdebug returned None)."""
    log = get_logger()
    step = start_step if start_step is not None else 0
    triggered = []
    log.info("Started execution of rule %s at step %s", type(rule_obj).__name__, step)
    while end_step is None or step < end_step:
        try:
            rule_obj.invoke(step)
        except (TensorUnavailableForStep, StepUnavailable, TensorUnavailable) as e:
            log.debug(str(e))
        except RuleEvaluationConditionMet as e:
            triggered.append(step)
            if raise_eval_cond:
                raise
            log.debug(str(e))
            if e.end_of_rule:
                break
        step += 1
    log.info("Ended execution of rule %s at end_step %s", type(rule_obj).__name__, step - 1)
    return triggered


# NoMoreData is smdebug's end of an unbounded invoke_rule
_ = NoMoreData

#!/usr/bin/env python3
"""Python custom rules (docs/python.md, "Custom rules in Python"), end to
end through the CLI and through invoke_rule:

- parity: a SageMaker custom rule as SageMaker's documentation writes it
  (examples/python/custom_gradient_rule.py: `from smdebug.rules.rule import
  Rule`, `super().__init__(base_trial)`, parameters as strings) and one in
  smdebug's other form (the pre-1.0.5 signature with other_trials,
  set_required_tensors, req_tensors, smdebug.core.modes,
  smdebug.exceptions, a Details report) run by `smrules run` with
  `python:` entries trigger at the same steps, evaluate and skip the same
  steps as the Lua rule rules/gradient_mean_abs.lua, with no smdebug
  installed;
- the notebook: the same rule class given to invoke_rule (with
  smrules.compat, the import lines unchanged) triggers at the same steps;
  raise_eval_cond raises RuleEvaluationConditionMet at the first; an
  unbounded invoke_rule ends in NoMoreData, as smdebug's documentation
  says;
- failures: an exception at import, in __init__ and in invoke_at_step, and
  an interpreter killed by SIGSEGV, are each that rule's Error with the
  traceback (file, line, exception) in result.json and report.json, while a
  built-in rule and a printing Python rule of the same run finish
  normally; configuration mistakes (a missing file, `class:` without
  `python:`, a list parameter, an unknown class) are clear;
- the rules' processes start and load at once, before the trial is open
  (two rules whose imports wait for each other both load), and none
  outlives the run;
- a rule's process imports only what it uses (no NumPy for a rule that
  does not ask for it, nor importlib.resources, pathlib, tempfile, typing
  through importlib.abc: 29 modules, ~20 ms of every rule's start);
- a rule that never answers is stopped by the hang guard
  (SMRULES_PYTHON_TIMEOUT) and is its Error;
- SMRULES_SMDEBUG=real leaves `import smdebug` to an installed smdebug;
- smdebug's action_str is named as the rules.yaml actions it maps to;
- a Python rule stops a launched trainer: StopTraining sends SIGTERM once.

The rules run in Debian's /usr/bin/python3 (numpy); this script needs only
the standard library."""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import lib  # noqa: E402
import pylib  # noqa: E402

RULES = os.path.join(HERE, "pyrules")
EXAMPLE = os.path.join(lib.ROOT, "examples", "python", "custom_gradient_rule.py")
LUA = os.path.join(lib.ROOT, "rules", "gradient_mean_abs.lua")
TRIALS = ["exploding_mse_high_lr", "vanishing_gradient_sigmoid", "healthy_mlp_digits"]
THRESHOLDS = [1.0, 1e-3]
STANDIN = [sys.executable, os.path.join(HERE, "standin_trainer.py")]


def env():
    """smrules finds the interpreter and the package as a user's would be
    told to (SMRULES_PYTHON, SMRULES_PYTHONPATH), with no smdebug."""
    e = dict(os.environ)
    e["SMRULES_PYTHON"] = pylib.PYTHON
    e["SMRULES_PYTHONPATH"] = pylib.PYTHONPATH
    e.pop("SMRULES_SMDEBUG", None)
    return e


def run(args, timeout=None):
    p = subprocess.run([lib.SMRULES] + [str(a) for a in args], capture_output=True,
                       timeout=timeout or lib.TIMEOUT * 3, env=env(), cwd=lib.ROOT,
                       stdin=subprocess.DEVNULL)
    return lib.Result(args, p.returncode, p.stdout.decode("utf-8", "replace"),
                      p.stderr.decode("utf-8", "replace"))


def run_rules(trial, yaml_text, tmp, name="rules.yaml"):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write(yaml_text)
    out = os.path.join(tmp, "out-" + name)
    shutil.rmtree(out, ignore_errors=True)
    r = run(["run", "--trial", trial, "--rules", path, "--json", "--fresh", "--output", out])
    try:
        r.obj = json.loads(r.out)
    except ValueError:
        r.obj = None
    r.outdir = out
    return r


def by_name(obj):
    return {r["name"]: r for r in (obj or {}).get("rules", [])}


def test_parity(c, tmp):
    req = os.path.join(RULES, "required_tensors_rule.py")
    for name in TRIALS:
        trial = os.path.join(lib.FIXTURES, "trials", name)
        for th in THRESHOLDS:
            yaml_text = ("rules:\n"
                         "  - lua: %s\n    name: lua\n    parameters: {threshold: %r}\n"
                         "  - python: %s\n    class: CustomGradientRule\n"
                         "    parameters: {threshold: \"%r\"}\n"
                         "  - python: %s\n    name: required\n"
                         "    parameters: {threshold: %r}\n"
                         % (LUA, th, EXAMPLE, th, req, th))
            r = run_rules(trial, yaml_text, tmp)
            sc = c.scope("parity %s threshold %g" % (name, th), r)
            if not sc.process():
                continue
            got = by_name(r.obj)
            lua = got.get("lua", {})
            for rule in ("CustomGradientRule", "required"):
                g = got.get(rule, {})
                sc.ok(g.get("status") not in (None, "Error"), "%s ran" % rule,
                      lib.short(g.get("message")))
                for k in ("status", "triggered_steps", "evaluated_steps", "skipped_steps"):
                    sc.eq("%s %s as the Lua rule's" % (rule, k), g.get(k), lua.get(k))
            want = lua.get("triggered_steps") or []
            rep = lib.load_json(os.path.join(r.outdir, "required", "report.json")) \
                if os.path.exists(os.path.join(r.outdir, "required", "report.json")) else {}
            det = (rep.get("Details") or {}).get("last_trigger")
            if want:
                sc.eq("self.report's Details reach report.json (last trigger)",
                      (det or {}).get("step"), want[-1])
                sc.ok("gradients above" in r.err, "self.logger's lines are in smrules' log",
                      lib.short(r.err, 300))
            else:
                sc.eq("no Details without a trigger", det, None)
            c.ok(name != "healthy_mlp_digits" or th != 1.0 or not want,
                 "healthy trial has no trigger at threshold 1")


NOTEBOOK = r"""
import json, sys
import smrules.compat  # smdebug's names: the lines below are a notebook's
from smdebug.trials import create_trial
from smdebug.rules.rule_invoker import invoke_rule
from smdebug.exceptions import NoMoreData, RuleEvaluationConditionMet
import importlib.util
spec = importlib.util.spec_from_file_location("r", sys.argv[1])
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
trial = create_trial(sys.argv[2])
out = {}
last = trial.steps()[-1]
out["steps"] = invoke_rule(m.CustomGradientRule(trial, threshold=sys.argv[3]), start_step=0,
                           end_step=last + 1)
try:
    invoke_rule(m.CustomGradientRule(trial, threshold=sys.argv[3]), raise_eval_cond=True)
    out["first"] = None
except RuleEvaluationConditionMet as e:
    out["first"] = e.step
except NoMoreData:
    out["first"] = "NoMoreData"
try:
    invoke_rule(m.CustomGradientRule(trial, threshold=sys.argv[3]), start_step=0, end_step=None)
    out["unbounded"] = "returned"
except NoMoreData:
    out["unbounded"] = "NoMoreData"
spec = importlib.util.spec_from_file_location("q", sys.argv[4])
q = importlib.util.module_from_spec(spec); spec.loader.exec_module(q)
out["required"] = invoke_rule(q.GradientMeanAbsRequired(trial, threshold=sys.argv[3]),
                              end_step=last + 1)
# Rule.__init__ in both of smdebug's signatures
from smdebug.rules import Rule
other = create_trial(sys.argv[2])
A = '{"name": "stoptraining", "training_job_prefix": "j"}'
forms = {"old kw": dict(other_trials=[other], action_str=A), "new positional": (A, [other]),
         "old positional": ([other], A), "bare": ()}
sig = {}
for k, a in forms.items():
    r = Rule(trial, **a) if isinstance(a, dict) else Rule(trial, *a)
    sig[k] = [r.other_trials == ([other] if k != "bare" else None),
              r.trials == ([trial, other] if k != "bare" else [trial]),
              r._actions.smrules_actions == (["StopTraining"] if k != "bare" else [])]
out["signatures"] = sig
try:
    import smdebug.pytorch
    out["pytorch"] = "imported"
except ImportError as e:
    out["pytorch"] = str(e)
try:
    import smdebug as real
    out["smdebug_file"] = getattr(real, "__file__", None)
except ImportError:
    out["smdebug_file"] = "missing"
print(json.dumps(out))
"""


def test_notebook(c, tmp):
    sc = c.scope("notebook")
    rc, _, _ = pylib.run_py("import smdebug")
    for name in TRIALS[:2]:
        trial = os.path.join(lib.FIXTURES, "trials", name)
        for th in THRESHOLDS:
            r = run_rules(trial, "rules:\n  - python: %s\n    class: CustomGradientRule\n"
                          "    parameters: {threshold: \"%r\"}\n" % (EXAMPLE, th), tmp)
            want = (by_name(r.obj).get("CustomGradientRule") or {}).get("triggered_steps")
            r2 = run_rules(trial, "rules:\n  - python: %s\n    name: required\n"
                           "    parameters: {threshold: %r}\n"
                           % (os.path.join(RULES, "required_tensors_rule.py"), th), tmp,
                           name="req.yaml")
            want_req = (by_name(r2.obj).get("required") or {}).get("triggered_steps")
            rc, out, err = pylib.run_py(NOTEBOOK, [EXAMPLE, trial, repr(th),
                                                   os.path.join(RULES, "required_tensors_rule.py")])
            s = c.scope("notebook %s threshold %g" % (name, th))
            if not s.ok(rc == 0, "the notebook runs", err[-800:]):
                continue
            got = json.loads(out.strip().splitlines()[-1])
            s.ok(want is not None, "smrules run gave triggered steps", lib.short(r.out))
            s.eq("invoke_rule triggers where smrules run does", got["steps"], want)
            s.eq("the req_tensors rule too", got["required"], want_req)
            s.eq("Rule.__init__'s signatures", got["signatures"],
                 {k: [True, True, True] for k in ("old kw", "new positional",
                                                  "old positional", "bare")})
            s.eq("raise_eval_cond raises at the first trigger", got["first"],
                 want[0] if want else "NoMoreData")
            s.eq("an unbounded invoke_rule ends in NoMoreData", got["unbounded"], "NoMoreData")
            s.ok("smdebug.pytorch" in got["pytorch"] and "docs/python.md" in got["pytorch"],
                 "an smdebug module smrules does not provide is a clear ImportError",
                 got["pytorch"])
            s.eq("no real smdebug was used", got["smdebug_file"], None)
    sc.ok(True, "notebook cases ran")


def test_failures(c, tmp):
    fail = os.path.join(RULES, "failing_rules.py")
    imp = os.path.join(RULES, "import_error_rule.py")
    trial = os.path.join(lib.FIXTURES, "trials", "exploding_mse_high_lr")
    yaml_text = ("rules:\n"
                 "  - python: %s\n    name: at_import\n"
                 "  - python: %s\n    class: FailsInInit\n"
                 "  - python: %s\n    class: FailsAtStep\n    parameters: {at: 4}\n"
                 "  - python: %s\n    class: CrashesInterpreter\n"
                 "  - rule: ExplodingTensor\n"
                 "  - python: %s\n    class: Prints\n    parameters: {word: 12}\n"
                 % (imp, fail, fail, fail, fail))
    r = run_rules(trial, yaml_text, tmp)
    sc = c.scope("failures", r)
    if not sc.process():
        return
    sc.eq("exit 5 (a rule failed)", r.rc, 5)
    got = by_name(r.obj)
    def line_of(path, text):
        with open(path) as f:
            return next(i for i, ln in enumerate(f, 1) if text in ln)
    want = {
        "at_import": ["Traceback", "import_error_rule.py\", line %d"
                      % line_of(imp, "import module_that_does_not_exist"),
                      "ModuleNotFoundError: No module named 'module_that_does_not_exist'"],
        "FailsInInit": ["Traceback", "failing_rules.py\", line %d, in __init__"
                        % line_of(fail, 'raise ValueError("bad configuration'),
                        "ValueError: bad configuration in __init__"],
        "FailsAtStep": ["step 4", "Traceback", "in invoke_at_step",
                        "in helper_that_divides", "ZeroDivisionError: division by zero"],
        "CrashesInterpreter": ["step 0", "Python process was killed by signal 11"],
    }
    for rule, parts in want.items():
        g = got.get(rule, {})
        sc.eq("%s status" % rule, g.get("status"), "Error")
        msg = g.get("message") or ""
        for p in parts:
            sc.ok(p in msg, "%s message has %r" % (rule, p), lib.short(msg, 600))
        res = os.path.join(r.outdir, rule, "result.json")
        rj = lib.load_json(res) if os.path.exists(res) else {}
        sc.ok(parts[-1] in json.dumps(rj), "%s: result.json has the traceback" % rule,
              lib.short(rj, 400))
    sc.eq("FailsAtStep evaluated the steps before (0, 2)",
          got.get("FailsAtStep", {}).get("evaluated_steps"), 2)
    sc.eq("the built-in rule of the same run", got.get("ExplodingTensor", {}).get("status"),
          "IssuesFound")
    p = got.get("Prints", {})
    sc.eq("a healthy Python rule of the same run", p.get("status"), "NoIssuesFound")
    sc.ok("12 at step 0" in r.err, "its print() reaches smrules' log, the parameter a string",
          lib.short(r.err, 400))
    sc.ok("about to crash at step 0" in r.err, "the crashing rule's print before the crash",
          lib.short(r.err, 400))

    # the same failure through invoke_rule: the exception reaches the caller
    rc, out, err = pylib.run_py(
        "import sys, smrules.compat, importlib.util\n"
        "from smrules.trials import create_trial\nfrom smrules.rules import invoke_rule\n"
        "s = importlib.util.spec_from_file_location('f', sys.argv[1])\n"
        "m = importlib.util.module_from_spec(s); s.loader.exec_module(m)\n"
        "invoke_rule(m.FailsAtStep(create_trial(sys.argv[2])), end_step=10)\n", [fail, trial])
    sc.ok(rc != 0 and "ZeroDivisionError" in err, "invoke_rule raises the rule's exception",
          err[-300:])


def test_hang(c, tmp):
    """A rule that never answers is stopped by the per-call hang guard
    (SMRULES_PYTHON_TIMEOUT, 600 s by default; 1 s here) and is that rule's
    Error; the run ends and the other rules' results stand."""
    fail = os.path.join(RULES, "failing_rules.py")
    trial = os.path.join(lib.FIXTURES, "trials", "exploding_mse_high_lr")
    path = os.path.join(tmp, "hang.yaml")
    with open(path, "w") as f:
        f.write("rules:\n  - python: %s\n    class: Hangs\n  - rule: ExplodingTensor\n" % fail)
    e = env()
    e["SMRULES_PYTHON_TIMEOUT"] = "1"
    args = ["run", "--trial", trial, "--rules", path, "--json", "--fresh", "--output",
            os.path.join(tmp, "out-hang")]
    p = subprocess.run([lib.SMRULES] + args, capture_output=True, timeout=lib.TIMEOUT * 3,
                       env=e, cwd=lib.ROOT, stdin=subprocess.DEVNULL)
    r = lib.Result(args, p.returncode, p.stdout.decode(), p.stderr.decode())
    sc = c.scope("hang guard", r)
    if not sc.process():
        return
    got = by_name(r.obj)
    h = got.get("Hangs", {})
    sc.eq("status", h.get("status"), "Error")
    sc.ok("step 0: the Python process took longer than 1 s and was stopped"
          in (h.get("message") or ""), "the message says so", h.get("message"))
    sc.eq("nothing evaluated", h.get("evaluated_steps"), 0)
    sc.eq("the other rule", got.get("ExplodingTensor", {}).get("status"), "IssuesFound")


def test_loads_at_once(c, tmp):
    """Each python: rule's process is started and sent its load before the
    C trial is opened (core/host/rule_python.c, smr_python_prestart), so
    the rules load at once, beside the trial's open: two rules whose
    imports wait for each other both load (loaded one after the other, the
    first waits for the second until its hang guard, then says so).  The
    processes are gone when smrules exits."""
    meet = os.path.join(tmp, "meet")
    shutil.rmtree(meet, ignore_errors=True)
    os.makedirs(meet)
    src = os.path.join(RULES, "meeting_rule.py")
    for side in "ab":
        shutil.copy(src, os.path.join(meet, "meeting_rule_%s.py" % side))
    path = os.path.join(tmp, "meet.yaml")
    with open(path, "w") as f:
        f.write("rules:\n" + "".join("  - python: %s\n    class: Meeting\n    name: Meet%s\n"
                                     % (os.path.join(meet, "meeting_rule_%s.py" % s), s.upper())
                                     for s in "ab"))
    e = env()
    e["MEET_DIR"] = meet
    trial = os.path.join(lib.FIXTURES, "trials", "exploding_mse_high_lr")
    args = ["run", "--trial", trial, "--rules", path, "--json", "--fresh", "--output",
            os.path.join(tmp, "out-meet")]
    p = subprocess.run([lib.SMRULES] + args, capture_output=True, timeout=lib.TIMEOUT * 3,
                       env=e, cwd=lib.ROOT, stdin=subprocess.DEVNULL)
    r = lib.Result(args, p.returncode, p.stdout.decode(), p.stderr.decode())
    sc = c.scope("python rules load at once", r)
    if not sc.process():
        return
    got = by_name(r.obj)
    sc.eq("both rules ran", [got.get(n, {}).get("status") for n in ("MeetA", "MeetB")],
          ["NoIssuesFound", "NoIssuesFound"])
    met = {}
    for side in "ab":
        try:
            with open(os.path.join(meet, side + ".met")) as f:
                met[side] = f.read().split()
        except OSError as ex:
            met[side] = [str(ex)]
    sc.eq("each import met the other's", [met[s][0] for s in "ab"], ["yes", "yes"])
    alive = []
    for s in "ab":
        pid = int(met[s][1]) if len(met[s]) > 1 and met[s][1].isdigit() else 0
        try:
            if pid:
                os.kill(pid, 0)
                alive.append(pid)
        except ProcessLookupError:
            pass
    sc.eq("no rule process outlives the run", alive, [])


def test_start_imports(c, tmp):
    """What a python: rule's process imports before the rule's own imports
    (smrules._rule_host, smrules.compat) and with smdebug's rule and trial
    names: nothing heavy it does not use."""
    code = ("import sys, smrules._rule_host, smrules.compat\n"
            "from smdebug.rules.rule import Rule\n"
            "from smdebug.trials import create_trial\n"
            "print(' '.join(sorted(m for m in ('numpy', 'importlib.resources', 'importlib.abc', "
            "'pathlib', 'tempfile', 'typing') if m in sys.modules)))\n")
    e = env()
    e["PYTHONPATH"] = pylib.PYTHONPATH
    p = subprocess.run([pylib.PYTHON, "-c", code], capture_output=True, env=e,
                       timeout=lib.TIMEOUT, stdin=subprocess.DEVNULL)
    c.ok(p.returncode == 0, "a rule process's imports run", p.stderr.decode()[-1500:])
    c.ok(p.stdout.decode().split() == [], "a rule process imports no module it does not use",
         p.stdout.decode())


FAKE_SMDEBUG_RULE = """class Rule:
    def __init__(self, base_trial, action_str="", other_trials=None):
        self.base_trial = base_trial

    def invoke(self, step):
        print("the installed smdebug's Rule.invoke at step", step)
        self.invoke_at_step(step)
"""


def test_real_smdebug(c, tmp):
    """SMRULES_SMDEBUG=real leaves `import smdebug` to an installed smdebug
    (here a stand-in package on PYTHONPATH); without it, smrules' names win
    even when one is installed."""
    fake = os.path.join(tmp, "site")
    os.makedirs(os.path.join(fake, "smdebug", "rules"), exist_ok=True)
    for rel, text in (("smdebug/__init__.py", ""), ("smdebug/rules/__init__.py", ""),
                      ("smdebug/rules/rule.py", FAKE_SMDEBUG_RULE)):
        with open(os.path.join(fake, rel), "w") as f:
            f.write(text)
    trial = os.path.join(lib.FIXTURES, "trials", "healthy_mlp_digits")
    path = os.path.join(tmp, "real.yaml")
    with open(path, "w") as f:
        f.write("rules:\n  - python: %s\n    parameters: {threshold: \"1e30\"}\n" % EXAMPLE)
    for real in (True, False):
        e = env()
        e["PYTHONPATH"] = fake
        if real:
            e["SMRULES_SMDEBUG"] = "real"
        args = ["run", "--trial", trial, "--rules", path, "--json", "--fresh", "--output",
                os.path.join(tmp, "out-real")]
        p = subprocess.run([lib.SMRULES] + args, capture_output=True, timeout=lib.TIMEOUT * 3,
                           env=e, cwd=lib.ROOT, stdin=subprocess.DEVNULL)
        r = lib.Result(args, p.returncode, p.stdout.decode(), p.stderr.decode())
        sc = c.scope("SMRULES_SMDEBUG=%s" % ("real" if real else "unset"), r)
        if not sc.process():
            continue
        sc.eq("the rule ran", by_name(json.loads(r.out)).get("custom_gradient_rule", {}).get(
            "status"), "NoIssuesFound")
        sc.eq("the installed smdebug's Rule was used" if real else "smrules' Rule was used",
              "the installed smdebug's Rule.invoke at step 0" in r.err, real)


def test_config_errors(c, tmp):
    trial = os.path.join(lib.FIXTURES, "trials", "exploding_mse_high_lr")
    cases = [
        ("missing file", "rules:\n  - python: nowhere.py\n",
         ["line 2, column 13", "python rule 'nowhere.py' not found"]),
        ("class without python", "rules:\n  - rule: ExplodingTensor\n    class: X\n",
         ["line 3, column 12", "'class' names the class of a 'python' rule"]),
        ("list parameter", "rules:\n  - python: %s\n    parameters: {threshold: [1, 2]}\n"
         % EXAMPLE, ["line 3", "SageMaker passes a custom rule's parameters as strings"]),
    ]
    for label, text, parts in cases:
        r = run_rules(trial, text, tmp, name="cfg.yaml")
        sc = c.scope("config: " + label, r)
        if not sc.process(want_json=False):
            continue
        sc.eq("exit 2", r.rc, 2)
        for p in parts:
            sc.ok(p in r.err, "message has %r" % p, lib.short(r.err, 400))
    r = run_rules(trial, "rules:\n  - python: %s\n    class: NoSuchRule\n"
                  % os.path.join(RULES, "failing_rules.py"), tmp, name="cls.yaml")
    sc = c.scope("config: unknown class", r)
    if sc.process():
        g = by_name(r.obj).get("NoSuchRule", {})
        sc.eq("Error", g.get("status"), "Error")
        sc.ok("defines no class NoSuchRule (its rule classes: CrashesInterpreter, FailsAtStep"
              in (g.get("message") or ""), "names the classes it has", g.get("message"))


def test_action_str(c, tmp):
    """smdebug's action_str maps to rules.yaml's actions: smrules names them
    when rules.yaml gives the rule none, and says nothing when it does."""
    rule = os.path.join(RULES, "action_str_rule.py")
    trial = os.path.join(lib.FIXTURES, "trials", "exploding_mse_high_lr")
    want = 'add \'actions: ["StopTraining",{"Email":"ml-team@example.com"}]\''
    r = run_rules(trial, "rules:\n  - python: %s\n" % rule, tmp, name="act.yaml")
    sc = c.scope("action_str", r)
    if sc.process():
        sc.eq("the rule triggers", by_name(r.obj).get("action_str_rule", {}).get("status"),
              "IssuesFound")
        sc.ok(want in r.err, "smrules names the rules.yaml actions of its action_str",
              lib.short(r.err, 500))
    r = run_rules(trial, "actions:\n  Email: {sendmail: [/bin/true]}\nrules:\n"
                  "  - python: %s\n    actions: [{Email: ml-team@example.com}]\n" % rule,
                  tmp, name="act2.yaml")
    sc = c.scope("action_str with actions in rules.yaml", r)
    if sc.process():
        sc.ok("action_str" not in r.err, "no warning when rules.yaml lists actions",
              lib.short(r.err, 500))
        acts = (r.obj or {}).get("actions") or []
        sc.eq("the Email action ran once", [a.get("action") for a in acts], ["Email"])


STOP_RULE = """from smdebug.rules.rule import Rule


class StopWhenExploding(Rule):
    def __init__(self, base_trial, threshold):
        super().__init__(base_trial)
        self.threshold = float(threshold)

    def invoke_at_step(self, step):
        for name in self.base_trial.tensor_names(collection="losses"):
            if self.base_trial.tensor(name).value(step).max() > self.threshold:
                return True
        return False
"""


def test_stop_training(c, tmp):
    source = os.path.join(lib.FIXTURES, "trials", "exploding_mse_high_lr")
    # the first step whose loss exceeds the threshold, from the trial API
    rc, out, err = pylib.run_py(
        "import sys\nfrom smrules.trials import create_trial\n"
        "t = create_trial(sys.argv[1])\nn = t.tensor_names(collection='losses')\n"
        "print(min(s for s in t.steps() if any(t.tensor(x).value(s).max() > 1e6 "
        "for x in n if s in t.tensor(x).steps())))\n", [source])
    sc = c.scope("StopTraining from a Python rule")
    if not sc.ok(rc == 0, "the trial API finds the first exploding step", err[-300:]):
        return
    first = int(out.split()[-1])
    last = lib.load_json(os.path.join(source, "EXPECT.json")).get("steps") or []
    rule = os.path.join(tmp, "stop_rule.py")
    with open(rule, "w") as f:
        f.write(STOP_RULE)
    rules = os.path.join(tmp, "stop.yaml")
    with open(rules, "w") as f:
        f.write("rules:\n  - python: %s\n    parameters: {threshold: 1e6}\n"
                "    actions: [StopTraining]\n" % rule)
    trial, log = os.path.join(tmp, "live-trial"), os.path.join(tmp, "trainer.log")
    # the trainer hangs after its last step: only StopTraining ends it
    hang = max(first + 2, 4)
    args = ["run", "--trial", trial, "--rules", rules, "--json", "--output",
            os.path.join(tmp, "stop-out"), "--"] + STANDIN + \
        ["--source", source, "--out", trial, "--hang-after", hang, "--log", log]
    try:
        p = subprocess.run([lib.SMRULES] + [str(a) for a in args], capture_output=True,
                           timeout=lib.TIMEOUT * 3, env=env(), cwd=lib.ROOT,
                           stdin=subprocess.DEVNULL)
        r = lib.Result(args, p.returncode, p.stdout.decode(), p.stderr.decode())
    except subprocess.TimeoutExpired as e:
        r = lib.Result(args, lib.TIMEOUT_RC, (e.stdout or b"").decode(),
                       (e.stderr or b"").decode())
    sc = c.scope("StopTraining from a Python rule", r)
    if not sc.process():
        return
    sc.eq("exit 1 (issues found, training stopped)", r.rc, 1)
    got = by_name(r.obj).get("stop_rule", {})
    sc.eq("status", got.get("status"), "IssuesFound")
    sc.eq("first trigger", got.get("first_trigger_step"), first)
    t = (r.obj or {}).get("training") or {}
    sc.eq("training.signal", t.get("signal"), "SIGTERM")
    sc.eq("training.stopped_by", t.get("stopped_by"), "stop_rule")
    acts = [a for a in (r.obj or {}).get("actions") or [] if a.get("action") == "StopTraining"]
    sc.ok(len(acts) == 1 and acts[0].get("outcome") == "ok", "StopTraining ran once, ok",
          lib.short(acts))
    with open(log) as f:
        sigs = [ln.split() for ln in f if ln.startswith("signal")]
    sc.ok(sigs and sigs[0][1] == "SIGTERM", "the trainer got SIGTERM", str(sigs))
    _ = last


def main():
    c = lib.Checker("test_python_rules")
    why = pylib.package_problem()
    if why:
        c.ok(False, "the Python package (make python)", why)
        return c.finish()
    tmp = tempfile.mkdtemp(prefix="smrules-pyrules-")
    try:
        for t in (test_parity, test_notebook, test_failures, test_loads_at_once,
                  test_start_imports, test_hang,
                  test_real_smdebug,
                  test_config_errors,
                  test_action_str, test_stop_training):
            if lib.CASE_FILTER and lib.CASE_FILTER not in t.__name__:
                continue
            t(c, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return c.finish()


if __name__ == "__main__":
    _ = signal
    sys.exit(main())

"""The Python side of a `python:` rule under `smrules run` (the C side is
core/host/rule_python.c; docs/python.md says why a process of its own).

    python3 -m smrules._rule_host FD

FD is a socket to smrules.  Each message is one line of JSON.  smrules
sends {"op": "load", "file", "class", "params", "trial", "rule"}, then
{"op": "step", "step": N} per step and {"op": "finish"}; this process
answers each with {"status": S, "message"?, "details"?, "actions"?}, where S
is one of the statuses of smrules.h (0 no trigger, 1 triggered, -1 error,
-10.. the data statuses), after any number of {"log": level, "msg": text}
lines: what the rule prints or logs.  It ends at the end of its input."""

import faulthandler
import importlib.util
import json
import logging
import os
import socket
import sys
import traceback

# smrules.h's statuses
NO_TRIGGER, TRIGGERED, ERR = 0, 1, -1
STEP_UNAVAILABLE, STEP_NOT_YET, TENSOR_UNAVAILABLE_FOR_STEP = -10, -11, -12
TENSOR_UNAVAILABLE, NO_MORE_DATA = -13, -14

MAX_MESSAGE = 1900  # smrules keeps 2 KB of a failure message: the end of it


class Channel:
    def __init__(self, fd):
        self.sock = socket.socket(fileno=fd)
        self.rfile = self.sock.makefile("rb")

    def send(self, obj):
        data = (json.dumps(obj, default=_plain, allow_nan=True) + "\n").encode()
        self.sock.sendall(data)

    def receive(self):
        line = self.rfile.readline()
        if not line:
            return None
        return json.loads(line)


def _plain(v):
    """JSON for what rules put in their report: NumPy scalars and arrays,
    sets, anything else as its str()."""
    if hasattr(v, "tolist"):
        return v.tolist()
    if isinstance(v, (set, frozenset, tuple)):
        return list(v)
    return str(v)


class LogStream:
    """sys.stdout and sys.stderr of the rule: each line to smrules' log."""

    def __init__(self, chan, level):
        self.chan, self.level, self.buf = chan, level, ""

    def write(self, s):
        self.buf += str(s)
        while "\n" in self.buf:
            line, self.buf = self.buf.split("\n", 1)
            self.chan.send({"log": self.level, "msg": line, "print": True})
        return len(s)

    def flush(self):
        if self.buf:
            self.chan.send({"log": self.level, "msg": self.buf, "print": True})
            self.buf = ""

    def isatty(self):
        return False


class LogHandler(logging.Handler):
    def __init__(self, chan):
        super().__init__(logging.INFO)
        self.chan = chan

    def emit(self, record):
        level = 3 if record.levelno >= logging.ERROR else 2 if record.levelno >= logging.WARNING \
            else 1 if record.levelno >= logging.INFO else 0
        try:
            self.chan.send({"log": level, "msg": self.format(record)})
        except OSError:
            pass


def _traceback(e, skip_host=True):
    """The traceback of a rule's exception, without this module's frames;
    its end when long (the exception line matters most)."""
    tb = e.__traceback__
    while skip_host and tb is not None and tb.tb_frame.f_code.co_filename == __file__:
        tb = tb.tb_next
    frames = [f for f in traceback.extract_tb(tb) if not f.filename.startswith("<frozen ")]
    text = "".join(["Traceback (most recent call last):\n"]
                   + traceback.format_list(frames)
                   + traceback.format_exception_only(type(e), e)).rstrip()
    if len(text) > MAX_MESSAGE:
        text = "..." + text[-MAX_MESSAGE:]
    return text


def _load(msg):
    """The rule instance, as SageMaker's rule container makes it:
    RuleClass(base_trial, **parameters) with every value a string."""
    from smrules.rules import Rule
    from smrules.trials import create_trial

    path = msg["file"]
    stem = os.path.splitext(os.path.basename(path))[0]
    folder = os.path.dirname(os.path.abspath(path))
    if folder not in sys.path:
        sys.path.insert(0, folder)  # the rule's own helper modules
    spec = importlib.util.spec_from_file_location(stem if stem.isidentifier() else "rule", path)
    if spec is None:
        raise ImportError(f"{path} cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    cls_name = msg.get("class")
    if cls_name:
        cls = getattr(module, cls_name, None)
        if not isinstance(cls, type):
            found = _rule_classes(module, Rule)
            raise LookupError(f"{path} defines no class {cls_name}"
                              + (f" (its rule classes: {', '.join(found)})" if found else ""))
    else:
        found = _rule_classes(module, Rule)
        if len(found) != 1:
            raise LookupError(f"{path} defines {len(found)} rule classes"
                              + (f" ({', '.join(found)})" if found else "")
                              + ": name the one to run with class: in rules.yaml")
        cls = getattr(module, found[0])
    trial = create_trial(msg["trial"])
    trial._wait = False  # the run's loop waits (trials.py)
    rule = cls(trial, **{k: str(v) for k, v in (msg.get("params") or {}).items()})
    if not hasattr(rule, "invoke"):
        raise TypeError(f"{cls.__name__} is not a rule: it has no invoke(step) "
                        "(derive it from smdebug.rules.Rule)")
    return rule, trial


def _rule_classes(module, base):
    """Names of the Rule subclasses the module itself defines."""
    out = []
    for name, v in vars(module).items():
        if isinstance(v, type) and v.__module__ == module.__name__:
            if issubclass(v, base) or any(b.__name__ == "Rule" for b in v.__mro__[1:]):
                out.append(name)
    return sorted(out)


def _details(rule):
    rep = getattr(rule, "report", None)
    det = rep.get("Details") if isinstance(rep, dict) else None
    return det if isinstance(det, dict) and det else None


def _step(rule, trial, step, done):
    """One step: a status and, for an error, the traceback."""
    from smrules import exceptions as X
    from smrules.trials import StepState

    if done:
        return NO_MORE_DATA, None, True
    try:
        if trial.has_passed_step(step) is not StepState.AVAILABLE:
            trial.refresh_data()  # smrules saw the step: read what it read
        rule.invoke(step)
        return NO_TRIGGER, None, False
    except X.RuleEvaluationConditionMet as e:
        return TRIGGERED, None, bool(getattr(e, "end_of_rule", False))
    except X.TensorUnavailableForStep as e:
        return TENSOR_UNAVAILABLE_FOR_STEP, str(e), False
    except X.StepUnavailable as e:
        return STEP_UNAVAILABLE, str(e), False
    except X.TensorUnavailable as e:
        return TENSOR_UNAVAILABLE, str(e), False
    except X.StepNotYetAvailable as e:
        return STEP_NOT_YET, str(e), False
    except X.NoMoreData as e:
        return NO_MORE_DATA, str(e), True
    except Exception as e:  # noqa: BLE001 - the rule's error is its status
        return ERR, _traceback(e), False


def main(argv):
    chan = Channel(int(argv[1]))
    # a crash in an extension module prints the Python stack on smrules'
    # stderr before the process dies
    faulthandler.enable(file=sys.__stderr__)
    sys.stdout = LogStream(chan, 1)
    sys.stderr = LogStream(chan, 2)
    root = logging.getLogger()
    root.addHandler(LogHandler(chan))
    root.setLevel(logging.INFO)
    if os.environ.get("SMRULES_SMDEBUG", "") != "real":
        import smrules.compat  # noqa: F401 - smdebug's names for the rule's imports
    rule = trial = None
    done = False
    while True:
        msg = chan.receive()
        if msg is None:
            return 0
        op = msg.get("op")
        if op == "load":
            try:
                rule, trial = _load(msg)
                reply = {"status": NO_TRIGGER}
                acts = getattr(getattr(rule, "_actions", None), "smrules_actions", None)
                if acts:
                    reply["actions"] = acts
            except BaseException as e:  # noqa: BLE001 - SystemExit at import too
                rule = None
                reply = {"status": ERR, "message": _traceback(e)}
        elif rule is None:
            reply = {"status": ERR, "message": "the rule was not loaded"}
        elif op == "step":
            sys.stdout.flush()
            status, message, done = _step(rule, trial, int(msg["step"]), done)
            reply = {"status": status}
            if message:
                reply["message"] = message
        elif op == "finish":
            reply = {"status": NO_TRIGGER}
        else:
            reply = {"status": ERR, "message": f"unknown request {op!r}"}
        sys.stdout.flush()
        sys.stderr.flush()
        if rule is not None:
            d = _details(rule)
            if d:
                reply["details"] = d
        chan.send(reply)


if __name__ == "__main__":
    sys.exit(main(sys.argv))

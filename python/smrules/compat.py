"""smdebug's module names for smrules' compatible versions, so that a custom
rule or a notebook written for smdebug runs without its import lines
changed (docs/python.md, "Custom rules in Python").

    import smrules.compat          # once; then:
    from smdebug.rules.rule import Rule
    from smdebug.trials import create_trial

`smrules run` does this before it loads a `python:` rule, unless
SMRULES_SMDEBUG=real asks for the real smdebug (which must then be
installed).  Only the modules below exist; any other smdebug module (the
hooks, the profiler) is an ImportError that says so."""

import importlib
import importlib.machinery
import sys
import types

# smdebug module -> (smrules module, names; None: all public names)
_MODULES = {
    "smdebug": ("smrules.modes", ("modes",)),
    "smdebug.rules": ("smrules.rules", ("Rule", "invoke_rule", "RequiredTensors",
                                        "RequiredTensorsForTrial")),
    "smdebug.rules.rule": ("smrules.rules", ("Rule", "RequiredTensors", "Actions",
                                             "RuleEvaluationConditionMet", "get_logger")),
    "smdebug.rules.rule_invoker": ("smrules.rules", ("invoke_rule",)),
    "smdebug.rules.req_tensors": ("smrules.rules", ("RequiredTensors", "RequiredTensorsForTrial")),
    "smdebug.rules.action": ("smrules.rules", ("Actions",)),
    "smdebug.rules.action.action": ("smrules.rules", ("Actions", "ALLOWED_ACTIONS")),
    "smdebug.trials": ("smrules.trials", ("create_trial", "Trial")),
    "smdebug.trials.utils": ("smrules.trials", ("create_trial",)),
    "smdebug.trials.trial": ("smrules.trials", ("Trial",)),
    "smdebug.core": ("smrules.modes", ()),
    "smdebug.core.modes": ("smrules.modes", None),
    "smdebug.core.tensor": ("smrules.trials", ("Tensor", "StepState")),
    "smdebug.core.collection": ("smrules.trials", ("Collection",)),
    "smdebug.core.logger": ("smrules.rules", ("get_logger",)),
    "smdebug.exceptions": ("smrules.exceptions", None),
    "smdebug.analysis": ("smrules.modes", ()),
    "smdebug.analysis.utils": ("smrules.compat", ("no_refresh",)),
}

# packages: modules with submodules in the table
_PACKAGES = {n.rsplit(".", 1)[0] for n in _MODULES if "." in n}


class no_refresh:
    """smdebug.analysis.utils.no_refresh: smrules' trials refresh only when
    asked (refresh_data, wait_for_steps), so this changes nothing."""

    def __init__(self, trials):
        self.trials = trials

    def __enter__(self):
        return self.trials

    def __exit__(self, *exc):
        return False


# The import system asks a finder for find_spec and a loader for
# create_module and exec_module, nothing more: the classes do not derive
# importlib.abc's, whose import pulls in importlib.resources, pathlib,
# tempfile and typing (19 ms of a python: rule's start; the C rule's whole
# run is 0.2 s).
class _Loader:
    def create_module(self, spec):
        return types.ModuleType(spec.name)

    def exec_module(self, module):
        target_name, names = _MODULES[module.__name__]
        target = importlib.import_module(target_name)
        if names is None:
            names = [n for n in dir(target) if not n.startswith("_")]
        for n in names:
            if n == "modes" and target_name == "smrules.modes":
                module.modes = target.ModeKeys
            else:
                setattr(module, n, getattr(target, n))
        module.__doc__ = f"smdebug's {module.__name__} as smrules provides it ({target_name})"


class _Finder:
    def find_spec(self, fullname, path=None, target=None):
        if fullname != "smdebug" and not fullname.startswith("smdebug."):
            return None
        if fullname not in _MODULES:
            raise ModuleNotFoundError(
                f"No module named {fullname!r}: smrules provides smdebug's rule and trial API "
                f"only ({', '.join(sorted(_MODULES))}); see docs/python.md", name=fullname)
        spec = importlib.machinery.ModuleSpec(fullname, _LOADER,
                                              is_package=fullname in _PACKAGES)
        if fullname in _PACKAGES:
            spec.submodule_search_locations = []
        return spec


_LOADER = _Loader()
_FINDER = _Finder()


def install():
    """Make `import smdebug...` resolve to smrules (idempotent)."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)


def uninstall():
    if _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)
    for n in list(sys.modules):
        if (n == "smdebug" or n.startswith("smdebug.")) and \
                getattr(sys.modules[n], "__loader__", None) is _LOADER:
            del sys.modules[n]


install()

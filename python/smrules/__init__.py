"""smrules from Python.

    smrules.torch     Hook: smdebug's PyTorch hook, writing trials through
                      the smrules C writer (docs/python.md)
    smrules.trials    create_trial: smdebug's trial API over the C reader
    smrules.exceptions  smdebug's exceptions (TensorUnavailableForStep, ...)
    smrules.modes     ModeKeys (TRAIN, EVAL, PREDICT, GLOBAL)
    smrules._core     the C library (the writer and the trial reader)

Python rules (smrules.rules) come as their own module beside these.
"""
__version__ = "0.1.0"  # SMRULES_VERSION (tests/cli/test_version.py)

from smrules.modes import ModeKeys  # noqa: E402,F401

modes = ModeKeys

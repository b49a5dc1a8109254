"""smrules from Python.

    smrules.torch     Hook: smdebug's PyTorch hook, writing trials through
                      the smrules C writer (docs/python.md)
    smrules.modes     ModeKeys (TRAIN, EVAL, PREDICT, GLOBAL)
    smrules._core     the C library (the writer today)

The trial API (smrules.trials) and Python rules (smrules.rules) of
docs/python.md come as their own modules beside these.
"""
__version__ = "0.1.0"

from smrules.modes import ModeKeys  # noqa: E402,F401

modes = ModeKeys

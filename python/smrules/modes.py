"""smdebug's modes: the values are those stored in index files and event
metadata (docs/formats.md), so ModeKeys.TRAIN.value is what a reader sees."""
from enum import Enum


class ModeKeys(Enum):
    TRAIN = 1
    EVAL = 2
    PREDICT = 3
    GLOBAL = 4


TRAIN = ModeKeys.TRAIN
EVAL = ModeKeys.EVAL
PREDICT = ModeKeys.PREDICT
GLOBAL = ModeKeys.GLOBAL
ALLOWED_MODES = tuple(ModeKeys)


def mode_of(value):
    """A ModeKeys from a ModeKeys, its name ("TRAIN", "modes.TRAIN") or its
    number; ValueError otherwise."""
    if isinstance(value, ModeKeys):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return ModeKeys(value)
    if isinstance(value, str):
        name = value.strip().split(".")[-1].upper()
        if name in ModeKeys.__members__:
            return ModeKeys[name]
    raise ValueError(
        f"invalid mode {value!r}: expected one of {', '.join(m.name for m in ModeKeys)}"
    )

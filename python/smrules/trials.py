"""smdebug's trial API over the smrules C reader (docs/python.md, "Read a
trial from Python"): a notebook written for smdebug ports by changing its
import line to `from smrules.trials import create_trial`.

The reading, the catalog of steps and tensors, the availability answers and
the reductions are the C library's (core/trial/trial.h), the same the
`smrules` command and its rules use; this module gives them smdebug's names,
argument conventions and exceptions."""

import enum
import os
import time

from smrules import _core
from smrules.exceptions import (
    InvalidWorker,
    NoMoreData,
    StepNotYetAvailable,
    StepUnavailable,
    TensorUnavailable,
    TensorUnavailableForStep,
)
from smrules.modes import ModeKeys, mode_of

__all__ = ["create_trial", "Trial", "Tensor", "Collection", "StepState"]


# core/format/tensor.h's smr_reduction order (the bits of tensor_steps)
_REDUCTIONS = ("min", "max", "mean", "std", "variance", "sum", "prod", "l1", "l2")


class StepState(enum.Enum):
    """Trial.has_passed_step's answer (smdebug.core.tensor.StepState)."""

    UNAVAILABLE = 0
    AVAILABLE = 1
    NOT_YET_AVAILABLE = 2


_STATE_OF = {0: StepState.AVAILABLE, 1: StepState.NOT_YET_AVAILABLE, 2: StepState.UNAVAILABLE}


def create_trial(path, name=None, range_steps=None, check=False, index_mode=True, cache=False):
    """A Trial over the trial folder `path` (a local folder or s3://bucket/
    prefix, read as `smrules` reads it).  `range_steps=(start, end)` keeps
    the global steps start <= step < end (end None: no end).  `check`,
    `index_mode` and `cache` are smdebug's and accepted for compatibility:
    smrules always reads through the index files."""
    return Trial(path, name=name, range_steps=range_steps)


def _mode(mode):
    return mode_of(mode)


def _raise(exc, name, step, mode, worker=None):
    """_core.Unavailable(status, message) as smdebug's exception."""
    status = exc.args[0]
    if status == _core.STEP_UNAVAILABLE:
        raise StepUnavailable(step, mode) from None
    if status == _core.STEP_NOT_YET:
        raise StepNotYetAvailable(step, mode) from None
    if status == _core.NO_MORE_DATA:
        raise NoMoreData(exc.args[1]) from None
    if status == _core.TENSOR_UNAVAILABLE:
        raise TensorUnavailable(name) from None
    if status == _core.TENSOR_UNAVAILABLE_FOR_STEP:
        raise TensorUnavailableForStep(name, step, mode) from None
    if status == _core.INVALID_WORKER:
        raise InvalidWorker(worker) from None
    raise exc


# Imported when first needed, not with the module: a scan of reductions
# (reduction_value, get_reductions, a python: rule) needs no NumPy, and
# importing it is most of a short scan's start (about 0.1 s of CPU);
# logging, glob, json and re are needed by few calls.
np = None
_DTYPES = {}  # dtype name -> little-endian np.dtype (made once, not per value)


def _array(value):
    """(dtype name, shape, bytes | list of str) -> a read-only ndarray."""
    global np
    if np is None:
        import numpy as np
    dtype, shape, data = value
    if isinstance(data, list):  # strings
        a = np.array(data, dtype=object if not data else None).reshape(shape)
        a.flags.writeable = False
        return a
    dt = _DTYPES.get(dtype)
    if dt is None:
        dt = _DTYPES[dtype] = np.dtype(dtype).newbyteorder("<")
    # read-only: the buffer (bytes, or a _core.Value) is
    return np.frombuffer(data, dtype=dt).reshape(shape)


def idle_core(load1, cores):
    """Whether a machine of `cores` usable cores at 1-minute load average
    `load1` has a core idle beside this process: load1 + 1 <= cores."""
    return cores >= 2 and load1 + 1 <= cores


# CPU pressure (Linux's PSI): the share of the last 10 s in which a task
# that could run waited for a CPU.  Below this, no one is waiting: a core
# is free for a reader thread.
PRESSURE_FILE = "/proc/pressure/cpu"
PRESSURE_IDLE_PCT = 20.0


def idle_by_pressure(some_avg10, cores):
    """Whether a machine of `cores` usable cores whose CPU pressure (`some
    avg10`, percent) is `some_avg10` has a core to spare: tasks rarely
    wait for one."""
    return cores >= 2 and some_avg10 < PRESSURE_IDLE_PCT


def _cpu_pressure():
    """`some avg10` of PRESSURE_FILE, None without one (kernels before
    4.20, PSI turned off)."""
    try:
        with open(PRESSURE_FILE, "rb") as f:
            for line in f.read().decode("ascii", "replace").splitlines():
                if line.startswith("some "):
                    for field in line.split()[1:]:
                        if field.startswith("avg10="):
                            return float(field[6:])
    except (OSError, ValueError):
        pass
    return None


def read_ahead_default():
    """Whether a new Trial reads ahead: SMRULES_READ_AHEAD=1 on, =0 off,
    else when a core is idle: by the CPU pressure where the kernel gives it
    (idle_by_pressure), else by the 1-minute load average (idle_core on
    /proc/loadavg), with this process's CPUs.  Reading ahead puts a second
    core to work beside the caller's; on a machine with none idle the
    values' trips between cores and the hand-overs cost more than the
    overlap gives (bench 11: at load 4 on 2 cores, +22% CPU and +12% wall
    for a value() scan).  The pressure answers for the last 10 s and
    counts only tasks kept waiting, so a machine whose load average a
    finished job or this program's own threads raised still counts as
    idle."""
    v = os.environ.get("SMRULES_READ_AHEAD", "")
    if v in ("0", "1"):
        return v == "1"
    try:
        cores = len(os.sched_getaffinity(0))
    except (OSError, AttributeError):
        return False
    some = _cpu_pressure()
    if some is not None:
        return idle_by_pressure(some, cores)
    try:
        with open("/proc/loadavg", "rb") as f:
            load1 = float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return False
    return idle_core(load1, cores)


class Collection:
    """A collection as the trial holds it: `name`, `include_regex` (the
    regexes of the collections files), `tensor_names` (the saved tensors in
    it, as smdebug's reader reports them: the names listed in the file plus
    every saved tensor matching one of the regexes)."""

    def __init__(self, name, include_regex, tensor_names):
        self.name = name
        self.include_regex = list(include_regex)
        self.tensor_names = set(tensor_names)

    def __repr__(self):
        return f"<Collection {self.name!r}: {len(self.tensor_names)} tensors>"


class Trial:
    """Use create_trial().  Reads nothing into the trial folder: the catalog
    of steps is kept in memory."""

    def __init__(self, path, name=None, range_steps=None):
        self.path = str(path)
        self.name = name if name is not None else os.path.basename(self.path.rstrip("/"))
        if range_steps is not None:
            start, end = range_steps
            if start is None or start < 0 or (end is not None and end < start):
                raise ValueError(f"range_steps {range_steps!r}: expected (start, end) with 0 <= start <= end")
            self.range_steps = (int(start), None if end is None else int(end))
        else:
            self.range_steps = None
        # Values and reductions read ahead on a thread of the library's
        # when a core is idle (docs/python.md, "Reads ahead")
        ahead = read_ahead_default()
        self._t = _core.Trial(self.path, read_ahead=ahead, reduce_ahead=ahead)
        self._tensors = {}
        # smdebug's attributes that rules touch (analysis.utils.no_refresh,
        # RequiredTensorsForTrial's logger)
        self.dynamic_refresh = True
        self._logger = None
        # Under `smrules run` (smrules._rule_host) a step not yet written
        # raises StepNotYetAvailable instead of blocking: the run's loop
        # waits for it and invokes the rule again.
        self._wait = True
        self._load_info()

    @property
    def logger(self):
        if self._logger is None:
            import logging
            self._logger = logging.getLogger("smrules.trials")
        return self._logger

    @logger.setter
    def logger(self, value):
        self._logger = value

    # ---- the trial ----
    def _load_info(self):
        self._info = self._t.info()

    def refresh_data(self):
        """Read what was written since (new steps, the end marker)."""
        self._t.refresh()
        self._load_info()

    @property
    def last_complete_step(self):
        """The last global step every worker has written (-1: none)."""
        return self._info["last_complete_step"]

    @property
    def num_workers(self):
        return self._info["num_workers"]

    @property
    def loaded_all_steps(self):
        return self._info["loaded_all_steps"]

    def workers(self):
        return list(self._info["workers"])

    def _in_range(self, step):
        if self.range_steps is None:
            return True
        start, end = self.range_steps
        return step >= start and (end is None or step < end)

    def _global_in_range(self, step, mode):
        if self.range_steps is None:
            return True
        if mode is not ModeKeys.GLOBAL:
            step = self._t.global_step(mode.value, step)
            if step is None:
                return True  # the reader answers for unknown steps
        return self._in_range(step)

    def steps(self, mode=ModeKeys.GLOBAL, show_incomplete_steps=False):
        """Steps of `mode` (global steps for GLOBAL, else mode steps); only
        complete ones (every worker wrote them) unless show_incomplete_steps."""
        mode = _mode(mode)
        steps = self._t.steps(mode.value, bool(show_incomplete_steps))
        return [s for s in steps if self._global_in_range(s, mode)]

    def modes(self):
        """The modes that have steps (TRAIN, EVAL, PREDICT; GLOBAL is not
        listed, as in smdebug)."""
        return [ModeKeys(m) for m in self._t.modes() if m != ModeKeys.GLOBAL.value]

    def mode(self, global_step):
        """The mode of a global step (StepUnavailable when unknown)."""
        got = self._t.step_mode(int(global_step))
        if got is None:
            raise StepUnavailable(global_step, ModeKeys.GLOBAL)
        return ModeKeys(got[0])

    def mode_step(self, global_step):
        got = self._t.step_mode(int(global_step))
        if got is None:
            raise StepUnavailable(global_step, ModeKeys.GLOBAL)
        return got[1]

    def global_step(self, mode, mode_step):
        mode = _mode(mode)
        if mode is ModeKeys.GLOBAL:
            return int(mode_step)
        got = self._t.global_step(mode.value, int(mode_step))
        if got is None:
            raise StepUnavailable(mode_step, mode)
        return got

    def has_passed_step(self, step, mode=ModeKeys.GLOBAL):
        return _STATE_OF[self._t.has_passed_step(int(step), _mode(mode).value)]

    def wait_for_steps(self, required_steps, mode=ModeKeys.GLOBAL, poll_interval=1.0):
        """Block until every step of `required_steps` is available, reading
        new index files every `poll_interval` seconds (smdebug: 5).  A step
        the trial went past raises StepUnavailable; a step after the last
        one of a trial whose training ended raises NoMoreData (smdebug's
        wait_for_steps: the end of an unbounded invoke_rule).  Under
        `smrules run` a step not yet written raises StepNotYetAvailable
        instead of blocking (the run waits and calls again)."""
        mode = _mode(mode)
        for step in required_steps:
            while True:
                state = self.has_passed_step(step, mode)
                if state is StepState.AVAILABLE:
                    break
                if state is StepState.UNAVAILABLE and not self._past_the_end(step, mode):
                    raise StepUnavailable(step, mode)
                if self.loaded_all_steps:
                    last = self.steps(mode)
                    raise NoMoreData(f"Looking for step {step} of mode {mode.name} and reached the "
                                     f"end of training; the last step is {last[-1] if last else -1}")
                if not self._wait:
                    raise StepNotYetAvailable(step, mode)
                time.sleep(poll_interval)
                self.refresh_data()

    def _past_the_end(self, step, mode):
        """A step after the last one of a trial whose training ended: smdebug
        calls it NOT_YET_AVAILABLE and wait_for_steps raises NoMoreData
        (the end of an unbounded invoke_rule)."""
        if not self.loaded_all_steps:
            return False
        steps = self._t.steps(mode.value, True)
        return not steps or step > steps[-1]

    # ---- collections ----
    def _collection_regexes(self):
        """include_regex per collection, from the local collections files
        (a remote trial's regexes are not fetched: empty lists)."""
        import glob
        import json
        out = {}
        for f in sorted(glob.glob(os.path.join(self.path, "collections", "*", "*_collections.json"))):
            try:
                with open(f, "rb") as fh:
                    doc = json.loads(fh.read(16 << 20))
            except (OSError, ValueError):
                continue
            colls = doc.get("collections") if isinstance(doc, dict) else None
            if not isinstance(colls, dict):
                continue
            for name, c in colls.items():
                rx = c.get("include_regex") if isinstance(c, dict) else None
                if isinstance(rx, list):
                    have = out.setdefault(name, [])
                    have += [r for r in rx if isinstance(r, str) and r not in have]
        return out

    def collections(self):
        """{name: Collection} of every collection in the collections files."""
        regexes = self._collection_regexes()
        return {n: Collection(n, regexes.get(n, []), self._t.collection_members(n))
                for n in self._t.collection_names()}

    def collection(self, name):
        """One collection; KeyError when the trial has none of that name."""
        name = getattr(name, "name", name)
        if name not in self._t.collection_names():
            raise KeyError(f"no collection {name!r} in this trial")
        return Collection(name, self._collection_regexes().get(name, []),
                          self._t.collection_members(name))

    # ---- tensors ----
    def tensor_names(self, show_prefixed_tensors=False, *, step=None, mode=ModeKeys.GLOBAL,
                     regex=None, collection=None):
        """Sorted names of the saved tensors, narrowed by `regex` (a string
        or a list, searched anywhere in the name) or `collection` (a name or
        a Collection) — not both: ValueError — and by `step` (of `mode`) or
        `mode` (tensors with a step in it).  No match: []."""
        if regex is not None and collection is not None:
            raise ValueError("Only one of `regex` or `collection` can be passed to this method")
        mode = _mode(mode)
        if regex is not None:
            import re
            regexes = [regex] if isinstance(regex, str) else list(regex)
            for r in regexes:
                re.compile(r)  # a clear error for a bad pattern, Python's
            names = self._t.tensor_names(regexes)
        elif collection is not None:
            cname = getattr(collection, "name", collection)
            names = sorted(self._t.collection_members(cname))
        else:
            names = self._t.tensor_names()
        if step is None and mode is ModeKeys.GLOBAL and self.range_steps is None:
            return names
        keep = []
        for n in names:
            # a step asked for by number counts even while incomplete, as
            # in smdebug
            steps = self.tensor(n).steps(mode, show_incomplete_steps=step is not None)
            if (step is None and steps) or (step is not None and int(step) in steps):
                keep.append(n)
        return keep

    def has_tensor(self, name):
        return self._t.has_tensor(name)

    def tensor(self, name):
        """The Tensor of that name (TensorUnavailable when never saved)."""
        t = self._tensors.get(name)
        if t is None:
            if not self._t.has_tensor(name):
                raise TensorUnavailable(name)
            t = self._tensors[name] = Tensor(self, name)
        return t

    def _wanted(self, wanted, mode, worker):
        """The arguments of the bulk reads (get_tensors, get_reductions,
        iter_tensors) as _core takes them: the mode as a ModeKeys and the
        (name, step, mode, worker) items of {name: [steps]} in the order
        given, steps outside the trial's range left out; a tensor never
        saved raises TensorUnavailable."""
        mode = _mode(mode)
        items = []
        for name, steps in wanted.items():
            if not self._t.has_tensor(name):
                raise TensorUnavailable(name)
            for s in steps:
                if self._global_in_range(int(s), mode):
                    items.append((name, int(s), mode.value, worker))
        return mode, items

    def get_tensors(self, wanted, mode=ModeKeys.GLOBAL, worker=None):
        """Bulk read: {name: [steps]} -> {name: {step: ndarray}}, every value
        read and decoded in one call with the GIL released.  A value that is
        not there is left out (a tensor never saved: TensorUnavailable)."""
        _, items = self._wanted(wanted, mode, worker)
        out = {name: {} for name in wanted}
        for (name, step, _, _), got in zip(items, self._t.read_many(items)):
            if len(got) == 3:
                out[name][step] = _array(got)
        return out

    def get_reductions(self, wanted, reduction_name, mode=ModeKeys.GLOBAL, worker=None,
                       abs=False):
        """The bulk reduction: {name: [steps]} -> {name: {step: value}}, each
        as Tensor.reduction_value gives it (the saved reduction, else
        computed: the same bits), all of them read and reduced in one call
        without the GIL, over every core.  Values that are not there are
        left out; a tensor never saved raises TensorUnavailable."""
        _, items = self._wanted(wanted, mode, worker)
        out = {name: {} for name in wanted}
        got = self._t.reductions(items, str(reduction_name), bool(abs))
        for (name, step, _, _), r in zip(items, got):
            if isinstance(r[0], float):
                out[name][step] = r[0]
        return out

    def iter_tensors(self, wanted, mode=ModeKeys.GLOBAL, worker=None):
        """The bulk read as a stream: (step, name, ndarray) for every value of
        {name: [steps]}, step by step (steps ascending, names in the order
        given), each read with the GIL released (and read ahead on a thread
        of the library's while the caller works on the value in hand, when
        a core is idle or with SMRULES_READ_AHEAD=1: docs/python.md).  Only a few MiB of
        values are in memory besides the ones the caller keeps, so a scan
        over a trial far larger than memory keeps one tensor (get_tensors
        keeps them all).  A value that is not there is left out; a tensor
        never saved raises TensorUnavailable first."""
        mode, wanted_items = self._wanted(wanted, mode, worker)
        by_step = {}
        for name, step, _, _ in wanted_items:
            by_step.setdefault(step, []).append(name)
        items = [(name, step, mode.value, worker)
                 for step in sorted(by_step) for name in by_step[step]]
        for (name, step, _, _), got in zip(items, self._t.stream(items)):
            if len(got) == 3:
                yield step, name, _array(got)

    def close(self):
        self._t.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"<smrules Trial {self.name!r} at {self.path!r}>"


class Tensor:
    """One tensor of a trial (smdebug.core.tensor.Tensor)."""

    def __init__(self, trial, name):
        self.trial = trial
        self.name = name

    def _check_step(self, step, mode):
        if not self.trial._global_in_range(step, mode):
            raise StepUnavailable(step, mode)

    def steps(self, mode=ModeKeys.GLOBAL, show_incomplete_steps=False):
        mode = _mode(mode)
        steps = self.trial._t.tensor_step_list(self.name, mode.value, bool(show_incomplete_steps))
        return [s for s in steps if self.trial._global_in_range(s, mode)]

    def workers(self, step_num, mode=ModeKeys.GLOBAL):
        """The workers that saved this tensor at the step."""
        mode = _mode(mode)
        idx = 0 if mode is ModeKeys.GLOBAL else 2
        ws = sorted({e[3] for e in self.trial._t.tensor_steps(self.name)
                     if e[idx] == step_num and (mode is ModeKeys.GLOBAL or e[1] == mode.value)})
        if not ws:
            self.value(step_num, mode)  # raises what smdebug raises
        return ws

    def value(self, step_num, mode=ModeKeys.GLOBAL, worker=None):
        """The value at the step as a read-only NumPy array (worker None:
        the first worker, by name, that saved it)."""
        mode = _mode(mode)
        step_num = int(step_num)
        self._check_step(step_num, mode)
        try:
            got = self.trial._t.value(self.name, step_num, mode.value, worker)
        except _core.Unavailable as e:
            _raise(e, self.name, step_num, mode, worker)
        return _array(got)

    def prev_steps(self, step, n, mode=ModeKeys.GLOBAL):
        """The last n steps of the tensor before `step` (smdebug's)."""
        steps = [s for s in self.steps(mode) if s < step]
        return steps[-n:] if n > 0 else []

    def reduction_values(self, step_num, mode=ModeKeys.GLOBAL, worker=None):
        """{(reduction name, abs): value} of the reductions the hook saved
        at the step (smdebug's); {} when it saved none."""
        mode = _mode(mode)
        step_num = int(step_num)
        idx = 0 if mode is ModeKeys.GLOBAL else 2
        rows = [e for e in self.trial._t.tensor_steps(self.name)
                if e[idx] == step_num and (mode is ModeKeys.GLOBAL or e[1] == mode.value)]
        if not rows:
            self.value(step_num, mode)  # raises what smdebug raises
        if worker is None:
            worker = min(e[3] for e in rows)
        bits = 0
        for e in rows:
            if e[3] == worker:
                bits |= e[5]
        out = {}
        for i, name in enumerate(_REDUCTIONS):
            for a in (False, True):
                if bits & (1 << (i * 2 + a)):
                    out[(name, a)] = self.reduction_value(step_num, name, mode, worker, abs=a)
        return out

    def values(self, mode=ModeKeys.GLOBAL, worker=None):
        """{step: ndarray} over every step of the mode, in one bulk read."""
        mode = _mode(mode)
        got = self.trial.get_tensors({self.name: self.steps(mode)}, mode=mode, worker=worker)
        return got[self.name]

    def reduction_value(self, step_num, reduction_name, mode=ModeKeys.GLOBAL, worker=None, abs=False):
        """A reduction (min, max, mean, std, variance, sum, prod, l1, l2) of
        the value, |value| when abs: the saved one when the hook saved it,
        else computed from the value, as the C rule host does."""
        mode = _mode(mode)
        step_num = int(step_num)
        self._check_step(step_num, mode)
        try:
            v, _saved = self.trial._t.reduction(self.name, step_num, mode.value,
                                                str(reduction_name), bool(abs), worker)
        except _core.Unavailable as e:
            _raise(e, self.name, step_num, mode, worker)
        return v

    def shape(self, step_num, mode=ModeKeys.GLOBAL, worker=None):
        """The saved shape, else the value's shape, as a tuple."""
        mode = _mode(mode)
        step_num = int(step_num)
        self._check_step(step_num, mode)
        try:
            return self.trial._t.shape(self.name, step_num, mode.value, worker)
        except _core.Unavailable as e:
            _raise(e, self.name, step_num, mode, worker)

    def __repr__(self):
        return f"<Tensor {self.name!r}>"

"""smrules.torch.Hook: smdebug's PyTorch hook (same constructor, methods,
tensor names, collections, steps and files), written for current PyTorch
and through the smrules C writer.  docs/python.md lists what it saves and
every difference from smdebug's hook.

The step logic, as smdebug's:
- a step begins at each forward pass of a registered top module (its
  forward pre-hook): the previous step is closed, the global step and the
  current mode's step advance by one (both start at 0);
- a step saves when a collection being saved wants it (its SaveConfig for
  the current mode and mode step); EVAL and PREDICT steps never save
  gradients;
- on a saving step: parameters when the forward pass begins
  (<ModelClass>_<param path>: the values this step's gradients belong to),
  every module's outputs and inputs a collection matches
  (<module path>_output_<i>, _input_<i>; a loss module is named by its
  class), gradients as param.grad holds them after the backward pass
  (gradient/<ModelClass>_<param>).
On a step that saves nothing the hooks return after one test.  Tensors are
copied off the device once, when due, and handed to the writer thread."""

import atexit
import os
import re
import signal
import sys
import threading
import time
import warnings

import torch

from smrules import _core
from smrules.collection import SCALAR_COLLECTIONS, Collection, CollectionKeys, pytorch_collections
from smrules.config import ReductionConfig, SaveConfig, SaveConfigMode, read_hook_json
from smrules.modes import ModeKeys, mode_of
from smrules.torch.writer_thread import WriterThread

DEFAULT_WORKER_NAME = "worker_0"
DEFAULT_INCLUDE_COLLECTIONS = [CollectionKeys.LOSSES]
GRADIENT_PREFIX = "gradient/"
SCALAR_PREFIX = "scalar/"
INPUT_SUFFIX = "_input_"
OUTPUT_SUFFIX = "_output_"
# The writer queue's bound; SMRULES_HOOK_QUEUE_MB overrides it.
DEFAULT_QUEUE_BYTES = 256 << 20
EXIT_STATUS_SIGTERM = 143  # 128 + SIGTERM, what a shell reports for it


class HookError(RuntimeError):
    pass


def _flatten(xs):
    out = []
    for x in xs if isinstance(xs, (list, tuple, set)) else [xs]:
        if isinstance(x, (list, tuple, set)):
            out.extend(_flatten(x))
        else:
            out.append(x)
    return out


def _dist():
    d = getattr(torch, "distributed", None)
    if d is not None and d.is_available() and d.is_initialized():
        return d
    return None


def _is_compiled(module):
    # torch.compile returns an OptimizedModule wrapping the original in
    # _orig_mod (torch._dynamo); hooks registered on it or inside it would
    # break the compiled graph or be traced away.
    return type(module).__name__ == "OptimizedModule" and hasattr(module, "_orig_mod")


class Hook:
    """Hook(out_dir, export_tensorboard=False, tensorboard_dir=None,
    dry_run=False, reduction_config=None, save_config=None,
    include_regex=None, include_collections=None, save_all=False,
    include_workers="one") -- smdebug.pytorch.Hook's arguments."""

    def __init__(self, out_dir=None, export_tensorboard=False, tensorboard_dir=None,
                 dry_run=False, reduction_config=None, save_config=None, include_regex=None,
                 include_collections=None, save_all=False, include_workers="one"):
        if out_dir is None:
            raise ValueError("smrules hook: out_dir is required (the trial folder to write)")
        out_dir = os.fspath(out_dir)
        if out_dir.startswith("s3://"):
            raise ValueError(
                f"smrules hook: out_dir {out_dir}: the hook writes local folders only; write "
                "locally and copy the folder (smrules reads s3:// trials)")
        self.out_dir = os.path.abspath(os.path.expanduser(out_dir))
        self._check_out_dir()
        if include_workers not in ("one", "all"):
            raise ValueError(f'include_workers={include_workers!r} must be "one" or "all"')
        self.export_tensorboard = bool(export_tensorboard)
        self.tensorboard_dir = tensorboard_dir
        if export_tensorboard or tensorboard_dir:
            warnings.warn("smrules hook: TensorBoard summaries are not written (export_tensorboard"
                          " and tensorboard_dir are ignored); smrules reads the trial itself",
                          stacklevel=2)
        self.dry_run = bool(dry_run)
        self.save_all_workers = include_workers == "all"
        self.chief_worker = DEFAULT_WORKER_NAME
        self.save_config = SaveConfig.parse(save_config).merged_with(None)
        self.reduction_config = reduction_config or ReductionConfig(save_raw_tensor=True)
        if not isinstance(self.reduction_config, ReductionConfig):
            raise TypeError("reduction_config must be a ReductionConfig")
        self.collection_manager = pytorch_collections()
        inc = DEFAULT_INCLUDE_COLLECTIONS if include_collections is None else _flatten(
            include_collections)
        self.include_collections = list(dict.fromkeys(list(inc) + DEFAULT_INCLUDE_COLLECTIONS))
        self.include_regex = include_regex
        if include_regex is not None:
            self.collection_manager.get(CollectionKeys.DEFAULT).include(include_regex)
            if CollectionKeys.DEFAULT not in self.include_collections:
                self.include_collections.append(CollectionKeys.DEFAULT)
        self.save_all = bool(save_all)
        if self.save_all:
            self.collection_manager.get(CollectionKeys.ALL).include(".*")
            if CollectionKeys.ALL not in self.include_collections:
                self.include_collections.append(CollectionKeys.ALL)

        self.step = -1
        self.mode = ModeKeys.GLOBAL
        self.mode_steps = {ModeKeys.GLOBAL: -1}
        self.last_saved_step = None
        self.worker = None
        self.num_workers = 1
        self.prepared_collections = False
        self._collections_to_save = []
        self._colls_for_step = None  # None: not computed for this step
        self._tensor_colls = {}
        # name -> what a saving step does with the tensor (_plan), for the
        # collections due in _plans_for: the same at every step of a run
        # saved with one configuration, so the per-tensor work is done once
        self._plans = {}
        self._plans_for = None
        self._names_in_step = {}
        self._step_mode = (ModeKeys.GLOBAL, -1)
        self._step_open = False  # a step_begin was queued for the current step
        self._custom = {}
        self._custom_used = False  # save_tensor was called (see _rehook)
        self._scalars = []
        self._module_names = {}
        self._model_names = {}  # top module -> class name (parameter prefix)
        # top module -> [(saved name, owner module, attribute, parameter)]:
        # its parameters, found once (see _parameters_of)
        self._params = {}
        self._param_lists = {}  # top module -> (its _params entry, names, parameters)
        self._handles = []
        # Forward hooks on submodules (module -> handle).  The first saving
        # step notes which of them produced a tensor some collection matches
        # (_probe); at the next step the others lose their hook (_prune):
        # a tensor's collections are decided when its name is first seen,
        # so a module none of whose names matched will never save, and its
        # hook would run Python at every call for nothing.
        self._sub_hooks = {}
        self._probe = {}  # module -> produced a name a collection matches
        self._probing = True  # until the first saving step has been probed
        self._unhooked = []  # modules whose forward hook was removed
        self._grad_params = []  # (parameter, "gradient/<name>")
        self._grad_order = []  # indexes in _grad_params, as autograd reached them
        self._grads_queued = self._grads_saved = False
        self._exported = None  # the collections JSON last written
        self._closed = False
        self._failed = False  # the writer failed: nothing more is saved
        self._busy = 0
        # held around the hooks' state changes (see _Busy); one object,
        # reused: it keeps no state of its own, so it nests
        self._busy_guard = _Busy(self)
        self._term_pending = False
        self._stop_at_step = False
        self._pid = os.getpid()
        self._writer = None
        self._lock = threading.RLock()
        mb = os.environ.get("SMRULES_HOOK_QUEUE_MB")
        self._queue_bytes = int(mb) << 20 if mb else DEFAULT_QUEUE_BYTES
        self._install_sigterm()
        # A strong reference, as smdebug's: a hook the script dropped still
        # closes its trial at exit.
        atexit.register(self._close_at_exit)

    # ---------------------------------------------------------- creation

    @classmethod
    def create_from_json_file(cls, json_file_path=None):
        """A hook from SageMaker's hook configuration (the file a SageMaker
        job gives its container, /opt/ml/input/config/debughookconfig.json,
        or $SMDEBUG_CONFIG_FILE_PATH, or `json_file_path`); None when no
        path is given and neither exists, as smdebug returns."""
        args = read_hook_json(json_file_path)
        if args is None:
            return None
        collections = args.pop("collections")
        hook = cls(**args)
        for name, params, modes in collections:
            c = hook.get_collection(name)
            c.save_config = SaveConfig(mode_save_configs={
                m: SaveConfigMode.from_dict(v) for m, v in modes.items()})
            if "reductions" in params:
                c.reduction_config = ReductionConfig.from_dict(params)
            if "include_regex" in params:
                from smrules.config import split
                c.include(split(params["include_regex"]))
            if "save_histogram" in params:
                from smrules.config import parse_bool
                c.save_histogram = parse_bool(params["save_histogram"], True)
        return hook

    def _check_out_dir(self):
        if os.path.exists(self.out_dir) and not os.path.isdir(self.out_dir):
            raise HookError(f"smrules hook: out_dir {self.out_dir} is not a folder")
        if os.path.exists(os.path.join(self.out_dir, "training_job_end.ts")):
            raise HookError(f"smrules hook: {self.out_dir} holds a finished trial "
                            "(training_job_end.ts): choose a new out_dir")

    def _check_worker_files(self):
        """At the first step, once the worker is known: a folder already
        holding this worker's steps is another run's trial; refused rather
        than mixed.  (Other workers of this run may have written by then.)"""
        suffix = f"_{self.worker}.json"
        index = os.path.join(self.out_dir, "index")
        try:
            folders = [e.path for e in os.scandir(index) if e.is_dir()]
        except OSError:
            return
        for folder in folders:
            try:
                with os.scandir(folder) as it:
                    if any(e.name.endswith(suffix) for e in it):
                        raise HookError(
                            f"smrules hook: {self.out_dir} already holds a trial with steps of "
                            f"{self.worker} ({os.path.relpath(folder, self.out_dir)}/): choose a "
                            "new out_dir or remove the old trial")
            except OSError:
                continue

    # ---------------------------------------------------------- collections

    def get_collection(self, name, create=True):
        return self.collection_manager.get(name, create=create)

    def get_collections(self):
        return self.collection_manager.collections

    def add_collection(self, collection):
        if not isinstance(collection, Collection):
            raise TypeError("add_collection expects a smrules Collection")
        self.collection_manager.add(collection)

    def _prepare_collections(self):
        defaults = ("all", "default", "weights", "biases", "gradients", "losses")
        for name, c in self.collection_manager.collections.items():
            for module, (inputs, outputs) in c.modules.items():
                mname = self._module_names.get(module)
                if mname is None:
                    raise HookError(f"collection {name}: add_module_tensors names a module "
                                    "that was not registered with register_module")
                if inputs:
                    c.include(re.escape(mname) + INPUT_SUFFIX)
                if outputs:
                    c.include(re.escape(mname) + OUTPUT_SUFFIX)
            c.modules = {}
            if name not in defaults and not c.include_regex and not c.tensor_names:
                raise HookError(f"collection {name} has neither include_regex nor tensor names")
        save = []
        for name, c in self.collection_manager.collections.items():
            if CollectionKeys.ALL in self.include_collections or name in self.include_collections:
                save.append(c)
            if c.save_config is None:
                c.save_config = self.save_config
            else:
                c.save_config = SaveConfig.parse(c.save_config).merged_with(self.save_config)
            if name in SCALAR_COLLECTIONS:  # as smdebug: no histograms, no reductions
                c.save_histogram = False
                c.reduction_config = ReductionConfig(save_raw_tensor=True)
            elif c.reduction_config is None:
                c.reduction_config = self.reduction_config
        self._collections_to_save = save
        self.prepared_collections = True

    def _collections_for_step(self):
        if self._colls_for_step is None:
            colls = []
            mode = self.mode
            ms = self.mode_steps[mode]
            no_grads = mode in (ModeKeys.EVAL, ModeKeys.PREDICT)
            for c in self._collections_to_save:
                if no_grads and c.name in (CollectionKeys.GRADIENTS,
                                           CollectionKeys.OPTIMIZER_VARIABLES):
                    continue
                # c.save_config.should_save_step(mode, ms), two calls fewer
                # a collection a step (mode is a ModeKeys already)
                scm = c.save_config.mode_save_configs.get(mode)
                if (scm or _DEFAULT_SAVE).should_save_step(ms):
                    colls.append(c)
            self._colls_for_step = colls if self._writes() else []
            # (a step that saves nothing keeps them for the next that saves)
            if self._colls_for_step and self._colls_for_step != self._plans_for:
                self._plans = {}
                self._plans_for = self._colls_for_step
        return self._colls_for_step

    def _collections_with_tensor(self, name):
        colls = self._tensor_colls.get(name)
        if colls is None:
            colls = []
            for c in self._collections_to_save:
                if c.has_tensor_name(name):
                    colls.append(c)
                elif c.matches(name):
                    c.add_tensor_name(name)
                    colls.append(c)
            self._tensor_colls[name] = colls
        return colls

    # ---------------------------------------------------------- workers

    def _setup_worker(self):
        d = _dist()
        if d is not None:
            self.worker = f"worker_{d.get_rank()}"
            self.num_workers = d.get_world_size()
        else:
            self.worker = DEFAULT_WORKER_NAME
            self.num_workers = 1

    def _writes(self):
        return not self.dry_run and not self._failed and (
            self.save_all_workers or self.worker == self.chief_worker)

    def _check_writer(self):
        """A failed writer (a full disk, a folder made unwritable) stops the
        saving, not the training: said once on stderr, as smdebug's error
        handling does."""
        if self._writer is not None and self._writer.error is not None and not self._failed:
            self._failed = True
            self._colls_for_step = []
            print(f"smrules hook: writing the trial {self.out_dir} failed: "
                  f"{self._writer.error}; the hook saves nothing more, training goes on "
                  "(the steps written before stay complete)", file=sys.stderr, flush=True)

    def _writer_thread(self):
        if self._writer is None:
            self._writer = WriterThread(self.out_dir, self.worker, self._queue_bytes)
        return self._writer

    # ---------------------------------------------------------- registering

    def register_module(self, module):
        """Hooks on `module` and every submodule: a step begins with each
        forward pass of `module`; outputs (and inputs) of submodules and
        the gradients of its parameters are saved when due."""
        if not isinstance(module, torch.nn.Module):
            raise TypeError(f"Module type {module.__class__.__name__} must be type torch.nn.Module")
        if _is_compiled(module):
            raise HookError(
                "smrules hook: this module is wrapped by torch.compile.  Register the original "
                "module (model._orig_mod) and train it uncompiled while the hook is attached: "
                "the hook's Python callbacks on every layer would break the compiled graph into "
                "pieces or be compiled away.  Do not compile a module after registering it.")
        for name, sub in module.named_modules():
            if sub in self._module_names:
                raise HookError(f"module {name or module._get_name()} is registered twice")
            self._module_names[sub] = name
        top = module._get_name()
        self._module_names[module] = top
        self._model_names[module] = top
        self._handles.append(module.register_forward_pre_hook(self._forward_pre_hook))
        for sub in module.modules():
            handle = sub.register_forward_hook(self._forward_hook)
            if sub is module:  # the top module's hook stays (see _prune)
                self._handles.append(handle)
            else:
                self._sub_hooks[sub] = handle
        self._params[module] = self._find_parameters(module, top)
        for pname, param in module.named_parameters():
            if param.requires_grad:
                self._handles.append(self._grad_hook(param, top + "_" + pname))

    @staticmethod
    def _find_parameters(module, top):
        out = []
        for mname, sub in module.named_modules():
            for attr, param in sub._parameters.items():
                if param is not None:
                    out.append((top + "_" + (mname + "." if mname else "") + attr, sub, attr,
                                param))
        # named_parameters() lists a parameter shared by two modules once
        seen, unique = set(), []
        for entry in out:
            if id(entry[3]) not in seen:
                seen.add(id(entry[3]))
                unique.append(entry)
        return unique

    def _parameters_of(self, module):
        """The (name, parameter) pairs module.named_parameters() gives,
        without walking the module tree at every step: found at
        registration, and found again if a parameter was replaced since
        (module.fc.weight = nn.Parameter(...))."""
        params = self._params.get(module)
        if params is None or any(owner._parameters.get(attr) is not p
                                 for _, owner, attr, p in params):
            params = self._params[module] = self._find_parameters(
                module, self._model_names.get(module, module._get_name()))
        return params

    def _parameter_lists(self, module):
        """_parameters_of(module) as (names, parameters) for _save_pairs,
        made again only when the parameters were found again."""
        params = self._parameters_of(module)
        lists = self._param_lists.get(module)
        if lists is None or lists[0] is not params:
            lists = self._param_lists[module] = (
                params, tuple(e[0] for e in params), tuple(e[3] for e in params))
        return lists[1], lists[2]

    def _prune(self):
        """After the first saving step: submodules whose inputs and outputs
        no collection matched lose their forward hook (see _sub_hooks)."""
        self._probing = False
        probe, self._probe = self._probe, {}
        if self._custom_used:
            return
        for sub, matched in probe.items():
            handle = self._sub_hooks.pop(sub, None)
            if handle is None:
                continue
            if matched:
                self._sub_hooks[sub] = handle
            else:
                handle.remove()
                self._unhooked.append(sub)

    def _rehook(self):
        """save_tensor adds collections later: every submodule gets its
        forward hook back, and none is removed again."""
        self._custom_used = True
        for sub in self._unhooked:
            self._sub_hooks[sub] = sub.register_forward_hook(self._forward_hook)
        self._unhooked = []

    def register_hook(self, module):
        self.register_module(module)

    def register_loss(self, loss_module):
        """The loss module's output is saved as <LossClass>_output_0 (the
        `losses` collection, saved by default)."""
        if not isinstance(loss_module, torch.nn.Module):
            raise TypeError(f"loss_module={loss_module!r} must be a torch.nn.Module "
                            "(e.g. torch.nn.CrossEntropyLoss())")
        self._module_names[loss_module] = loss_module._get_name()
        self._handles.append(loss_module.register_forward_hook(self._forward_hook))

    def _grad_hook(self, param, pname):
        """Gradients are saved as param.grad holds them once the whole
        backward pass is done: the value the optimizer uses, all-reduced
        under DistributedDataParallel (whose reducer writes param.grad in
        its own end-of-backward callback).  A tensor hook on the parameter
        only notices that a backward pass of a saving step is running and
        queues, once, an end-of-backward callback that queues the saving
        callback, so that it runs after DDP's.  It also notes the order in
        which autograd reached the parameters: the gradients are written in
        that order, smdebug's (its tensor hooks wrote them as they fired)."""
        index = len(self._grad_params)
        self._grad_params.append((param, GRADIENT_PREFIX + pname))

        def on_grad(grad):
            if not self._colls_for_step:
                return
            self._grad_order.append(index)
            if not self._grads_queued:
                self._grads_queued = True
                engine = torch.autograd.Variable._execution_engine
                engine.queue_callback(lambda: engine.queue_callback(self._save_grads))
        return param.register_hook(on_grad)

    def _save_grads(self):
        if self._grads_saved or not self._colls_for_step or self._closed:
            return
        self._grads_saved = True
        with self._busy_guard:
            order = list(dict.fromkeys(self._grad_order))  # first arrival
            seen = set(order)
            order += [i for i in range(len(self._grad_params)) if i not in seen]
            names, grads = [], []
            for i in order:
                param, name = self._grad_params[i]
                grad = param.grad
                if grad is not None:
                    names.append(name)
                    grads.append(grad)
            self._save_pairs(names, grads)
            self._flush_custom()

    # ---------------------------------------------------------- hooks

    def _forward_pre_hook(self, module, inputs):
        if self._closed:
            return
        with self._busy_guard:
            if self.worker is None:
                self._setup_worker()
                if self._writes():
                    self._check_worker_files()
            self._end_step()
            self._check_writer()
            if self._stop_at_step:  # SIGTERM: the step in hand is complete
                raise SystemExit(EXIT_STATUS_SIGTERM)
            if not self.prepared_collections:
                self._prepare_collections()
            self.step += 1
            self.mode_steps[self.mode] = self.mode_steps.get(self.mode, -1) + 1
            if self.mode != ModeKeys.GLOBAL:
                self.mode_steps[ModeKeys.GLOBAL] = self.step
            self._names_in_step = {}
            self._grads_queued = self._grads_saved = False
            self._grad_order = []
            self._step_mode = (self.mode, self.mode_steps[self.mode])
            self._colls_for_step = None
            if self._probing and self._probe:  # the first saving step was probed
                self._prune()
            if self._collections_for_step():
                # param itself, not param.data (one tensor object fewer):
                # the copy detaches it
                self._save_pairs(*self._parameter_lists(module))
            if self.last_saved_step is not None and self._exported is None:
                self._export_collections()

    def _forward_hook(self, module, inputs, outputs):
        if not self._colls_for_step or self._closed:
            return
        with self._busy_guard:
            name = self._module_names.get(module)
            if name is None:
                return
            self._write_all(name, inputs, INPUT_SUFFIX)
            self._write_all(name, outputs, OUTPUT_SUFFIX)
            self._flush_custom()
            self.last_saved_step = self.step
            if self._probing and module in self._sub_hooks and not self._probe.get(module):
                self._probe[module] = self._names_match(name)

    def _names_match(self, module_name):
        """Whether a name this module produced in this step (inputs and
        outputs) belongs to a collection being saved."""
        for suffix in (INPUT_SUFFIX, OUTPUT_SUFFIX):
            key = module_name + suffix
            for i in range(self._names_in_step.get(key, 0)):
                if self._collections_with_tensor(key + str(i)):
                    return True
        return False

    def _write_all(self, module_name, value, suffix):
        key = module_name + suffix
        idx = self._names_in_step.get(key, 0)
        if isinstance(value, torch.Tensor):  # the usual output: one tensor
            self._names_in_step[key] = idx + 1
            self._save_pairs((key + str(idx),), (value,))
            return
        names, values = [], []
        self._names_in_step[key] = self._gather(key, value, idx, names, values)
        self._save_pairs(names, values)

    def _gather(self, key, value, idx, names, values):
        """The tensors in `value` (nested lists and tuples), named key<i>
        from i = idx on, appended to names and values; the next index."""
        if isinstance(value, torch.Tensor):
            names.append(key + str(idx))
            values.append(value)
            return idx + 1
        if isinstance(value, (list, tuple)):
            for v in value:
                idx = self._gather(key, v, idx, names, values)
        return idx

    # ---------------------------------------------------------- saving

    def _plan_of(self, name):
        plan = self._plans.get(name, _NO_PLAN)
        if plan is _NO_PLAN:  # first seen with these collections due
            due = self._colls_for_step or ()
            colls = [c for c in self._collections_with_tensor(name) if c in due]
            plan = self._plans[name] = _plan(colls) if colls else None
        return plan

    def _save_pairs(self, names, values):
        """Save values[i] (a tensor or None) as names[i], in order.  Runs of
        tensors saved whole with no reductions (plan _RAW, nearly all) go
        to the writer in one call each (put_raws: copied in C, no Python
        per tensor); the others one by one (_write_planned)."""
        plans, start = self._plans, 0
        for i, name in enumerate(names):
            plan = plans.get(name, _NO_PLAN)
            if plan is _NO_PLAN:
                plan = self._plan_of(name)
            if plan is not _RAW:
                if start < i:
                    self._put_raws(names[start:i], values[start:i])
                if plan is not None:
                    self._write_planned(name, values[i], plan)
                start = i + 1
        if start == 0:
            self._put_raws(names, values)
        elif start < len(names):
            self._put_raws(names[start:], values[start:])

    def _put_raws(self, names, values):
        if not values:
            return
        w = self._writer or self._writer_thread()
        if self._step_open:
            w.put_raws(names, values, time.time())
        else:  # the step's begin goes before its first tensor saved, if any
            mode, mode_step = self._step_mode  # as the step began
            self._step_open = w.put_raws(names, values, time.time(),
                                         ("begin", self.step, mode.value, mode_step))

    def _write_tensor(self, name, value, colls):
        self._write_planned(name, value, _plan(colls))

    def _write_planned(self, name, value, plan):
        if value is None:
            return
        raw, shape, reductions = plan
        numel = value.numel()
        if numel == 0 and not shape:
            return  # smdebug saves nothing of an empty tensor
        if not self._step_open:
            self._begin_step_if_needed()
        w = self._writer or self._writer_thread()
        if shape:
            w.put(("shape", name, tuple(value.shape)))
        if not raw and not reductions or numel == 0:
            return
        # The one copy: off the device, detached from autograd, and not
        # sharing memory with a tensor training will change in place.
        w.put_copy(name, value, time.time(), raw, reductions)

    def _begin_step_if_needed(self):
        if not self._step_open:
            mode, mode_step = self._step_mode  # as the step began
            self._writer_thread().put(("begin", self.step, mode.value, mode_step))
            self._step_open = True

    def _end_step(self):
        # save_tensor values belong to the step in which they were given
        if self._colls_for_step:
            self._flush_custom()
        self._custom = {}
        self._flush_scalars()
        if self._step_open:
            self._writer.put(("end",))
            self._step_open = False

    def record_tensor_value(self, tensor_name, tensor_value):
        """A value computed outside any registered module (a functional loss,
        F.mse_loss(...)): saved as <tensor_name>_output_0 when a collection
        matches and the step saves, as smdebug does."""
        if not isinstance(tensor_value, torch.Tensor):
            raise TypeError(f"tensor_value={tensor_value!r} must be a torch.Tensor")
        if not self._colls_for_step or self._closed:
            return
        with self._busy_guard:
            self._write_all(tensor_name, tensor_value, OUTPUT_SUFFIX)
            self.last_saved_step = self.step

    def save_tensor(self, tensor_name, tensor_value, collections_to_write=CollectionKeys.DEFAULT):
        """Save a tensor of your own (torch.Tensor, NumPy array, number) in
        the given collection(s), at the current step if it saves."""
        value = _as_tensor(tensor_value)
        if value is None:
            warnings.warn(f"smrules hook: {tensor_name}: the value could not be turned into a "
                          "tensor; not saved", stacklevel=2)
            return
        if isinstance(collections_to_write, str):
            collections_to_write = [collections_to_write]
        if not self._custom_used:
            self._rehook()
        for cname in collections_to_write:
            self._custom[tensor_name] = (value, cname)

    def _flush_custom(self):
        if not self._custom:
            return
        custom, self._custom = self._custom, {}
        for name, (value, cname) in custom.items():
            c = self.collection_manager.get(cname)
            if c.reduction_config is None:
                c.reduction_config = self.reduction_config
            if c.save_config is None:
                c.save_config = self.save_config
            c.add_tensor_name(name)
            self._tensor_colls.pop(name, None)
            self._plans = {}  # the collections may have changed
            if c not in self._collections_to_save:
                self._collections_to_save.append(c)
            if self._colls_for_step and c.reduction_config.save_raw_tensor and self._writes():
                self._write_tensor(name, value, [ReductionOnlyRaw])

    def save_scalar(self, name, value, sm_metric=False, timestamp=None):
        """Save a scalar as scalar/<name> at the current step (every step,
        whatever the save configs say, as smdebug does)."""
        v = _as_tensor(value)
        if v is None or v.numel() != 1:
            raise TypeError(f"scalar/{name} has a non-scalar value of type {type(value).__name__}")
        self._scalars.append((SCALAR_PREFIX + name, v, timestamp))

    def _flush_scalars(self):
        if not self._scalars or self.step < 0:
            return
        scalars, self._scalars = self._scalars, []
        if not self._writes():
            return
        self._begin_step_if_needed()
        for name, v, ts in scalars:
            w = self._writer_thread()
            w.put_copy(name, v, ts if ts is not None else time.time(), True, ())

    def set_mode(self, mode):
        """modes.TRAIN, EVAL, PREDICT or GLOBAL: the steps that follow
        count in this mode (from 0 the first time)."""
        try:
            mode = mode_of(mode)
        except ValueError:
            raise ValueError(f"Invalid mode {mode}. Valid modes are "
                             f"{','.join(m.name for m in ModeKeys)}.") from None
        self.mode = mode
        self.mode_steps.setdefault(mode, -1)
        self._colls_for_step = None if self.step >= 0 else self._colls_for_step

    # ---------------------------------------------------------- files

    def _export_collections(self):
        if not self._writes():
            self._exported = ""
            return
        n = self.num_workers if self.save_all_workers else 1
        text = self.collection_manager.to_json(n)
        if text != self._exported:
            self._writer_thread().put(("collections", text))
            self._exported = text

    def close(self):
        """Finish: the last step's files, the collections file, then
        training_job_end.ts, all on disk when close() returns."""
        self._close()
        if self._term_pending:  # a SIGTERM came while closing
            self._term_pending = False
            raise SystemExit(EXIT_STATUS_SIGTERM)

    def _close(self):
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._busy += 1
            try:
                if self.worker is None:
                    self._setup_worker()
                if not self.prepared_collections:
                    self._prepare_collections()
                self._end_step()
                if self._writes():
                    self._export_collections()
                if not self.dry_run and not self._failed:
                    self._writer_thread().put(("end_marker",))
                if self._writer is not None:
                    self._writer.close()
                    self._check_writer()
                if self._failed:  # nothing more will come: say so if it can be said
                    try:
                        _core.write_end_marker(self.out_dir)
                    except OSError as e:
                        print(f"smrules hook: {e}", file=sys.stderr)
            finally:
                self._busy -= 1
                for h in self._handles + list(self._sub_hooks.values()):
                    h.remove()
                self._handles = []
                self._sub_hooks = {}
                self._unhooked = []

    def _close_at_exit(self):
        if os.getpid() != self._pid:  # a forked child (a DataLoader worker)
            return
        try:
            self._close()
        except Exception as e:  # at exit there is nobody left to raise to
            print(f"smrules hook: {e}", file=sys.stderr)

    # ---------------------------------------------------------- SIGTERM

    def _install_sigterm(self):
        _HOOKS.append(self)
        _install_sigterm_handler()


    def __repr__(self):
        return (f"<smrules.torch.Hook out_dir={self.out_dir} step={self.step} "
                f"mode={self.mode.name} worker={self.worker}>")


# Every hook of the process, for the SIGTERM handler (atexit keeps them
# alive anyway).
_HOOKS = []
_handler_installed = False


def _install_sigterm_handler():
    """StopTraining sends SIGTERM.  Python's default is to die at once,
    which would leave the step in hand unwritten and no end marker.  Here
    the step in hand finishes: at the next step's start the hook raises
    SystemExit(143), and the exit closes the trial (last step, collections,
    end marker).  With no step under way (before the first, after close(),
    no module registered) or at a second SIGTERM the script exits at once,
    at a point where the hook's own state is whole.  A handler the script
    installed itself is left alone."""
    global _handler_installed
    if _handler_installed or threading.current_thread() is not threading.main_thread():
        return
    try:
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return
        signal.signal(signal.SIGTERM, _on_sigterm)
        _handler_installed = True
    except (ValueError, OSError):
        pass


def _on_sigterm(signum, frame):
    waiting = [h for h in _HOOKS if h._model_names and not h._closed and h.step >= 0]
    if waiting and not any(h._stop_at_step for h in waiting):
        for h in waiting:
            h._stop_at_step = True
        return
    busy = [h for h in _HOOKS if h._busy]
    if busy:
        busy[0]._term_pending = True
        return
    raise SystemExit(EXIT_STATUS_SIGTERM)


class _Busy:
    """While the hook changes its state, a SIGTERM is held until the change
    is complete, then raised as SystemExit."""

    def __init__(self, hook):
        self.hook = hook

    def __enter__(self):
        self.hook._busy += 1

    def __exit__(self, *exc):
        self.hook._busy -= 1
        if self.hook._busy == 0 and self.hook._term_pending:
            self.hook._term_pending = False
            raise SystemExit(EXIT_STATUS_SIGTERM)
        return False


_NO_PLAN = object()
_DEFAULT_SAVE = SaveConfigMode()  # SaveConfig.get_save_config's for a mode set to None


def _plan(colls):
    """What saving a tensor of these collections does: (whole, shape only,
    reductions in smdebug's order)."""
    raw = any(c.reduction_config.save_raw_tensor for c in colls)
    shape = any(c.reduction_config.save_shape for c in colls)
    reductions = []
    for c in colls:
        if c.name in SCALAR_COLLECTIONS:
            continue
        for pair in c.reduction_config.wanted():
            if pair not in reductions:
                reductions.append(pair)
    if raw and not shape and not reductions:
        return _RAW  # one object: _save_pairs tests it by identity
    return raw, shape, tuple(reductions)


_RAW = (True, False, ())  # saved whole, nothing else (see _save_pairs)


class _RawOnly:
    """The reduction settings of a tensor given to save_tensor: saved whole."""
    name = "custom"
    reduction_config = ReductionConfig(save_raw_tensor=True)


ReductionOnlyRaw = _RawOnly()


def _as_tensor(value):
    if isinstance(value, torch.Tensor):
        return value
    try:
        import numpy as np
        if isinstance(value, np.ndarray):
            return torch.from_numpy(np.ascontiguousarray(value))
        if np.isscalar(value) and not isinstance(value, (str, bytes)):
            return torch.from_numpy(np.array([value]))
        if isinstance(value, (list, tuple)):
            return torch.from_numpy(np.asarray(value))
    except (TypeError, ValueError):
        return None
    return None

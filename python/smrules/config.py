"""smdebug's SaveConfig, SaveConfigMode and ReductionConfig, with smdebug's
arguments, defaults and JSON forms (they go into the collections file), and
the reading of SageMaker's hook configuration JSON (debughookconfig.json).
Framework-independent: the PyTorch hook uses them, other hooks may."""

import json
import os

from smrules.modes import ModeKeys, mode_of

DEFAULT_SAVE_INTERVAL = 500
ALLOWED_REDUCTIONS = ("min", "max", "mean", "std", "variance", "sum", "prod")
ALLOWED_NORMS = ("l1", "l2")
# Where SageMaker puts the hook configuration in a training container, and
# the variable that moves it (smdebug's names).
CONFIG_FILE_PATH_ENV = "SMDEBUG_CONFIG_FILE_PATH"
DEFAULT_CONFIG_FILE_PATH = "/opt/ml/input/config/debughookconfig.json"
DEFAULT_SAGEMAKER_OUTDIR = "/opt/ml/output/tensors"
TENSORBOARD_CONFIG_FILE_PATH_ENV = "TENSORBOARD_CONFIG_FILE_PATH"
DEFAULT_TENSORBOARD_CONFIG_FILE = "/opt/ml/input/config/tensorboardoutputconfig.json"


def _int(value, what):
    try:
        if isinstance(value, bool):
            raise ValueError
        return int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what}={value!r} must be an integer") from None


class SaveConfigMode:
    """When one mode saves: every save_interval-th step of the mode (counted
    from 0, as smdebug does: step % save_interval == 0) within
    [start_step, end_step), and every step listed in save_steps."""

    def __init__(self, save_interval=None, start_step=None, end_step=None, save_steps=None):
        self.save_interval = DEFAULT_SAVE_INTERVAL if save_interval is None else _int(
            save_interval, "save_interval")
        if self.save_interval <= 0:
            raise ValueError(f"save_interval={self.save_interval} must be positive")
        self.start_step = 0 if start_step is None else _int(start_step, "start_step")
        self.end_step = None if end_step is None else _int(end_step, "end_step")
        if save_steps is None:
            save_steps = []
        if isinstance(save_steps, (str, bytes)) or not hasattr(save_steps, "__iter__"):
            raise ValueError(f"save_steps={save_steps!r} must be a list of integers")
        self.save_steps = [_int(s, "save_steps") for s in save_steps]
        self._save_steps = frozenset(self.save_steps)

    def should_save_step(self, step):
        if step in self._save_steps:
            return True
        if step < self.start_step or (self.end_step is not None and step >= self.end_step):
            return False
        return step % self.save_interval == 0

    def to_json_dict(self):
        return {"save_interval": self.save_interval, "save_steps": self.save_steps,
                "start_step": self.start_step, "end_step": self.end_step}

    @classmethod
    def from_dict(cls, params):
        if params is None:
            return None
        if not isinstance(params, dict):
            raise ValueError(f"save config {params!r} is not a dict")
        return cls(save_interval=params.get("save_interval"), start_step=params.get("start_step"),
                   end_step=params.get("end_step"), save_steps=params.get("save_steps"))

    def __eq__(self, other):
        return isinstance(other, SaveConfigMode) and self.to_json_dict() == other.to_json_dict()

    def __repr__(self):
        return ("<class SaveConfig: save_interval=%s, save_steps=%s, start_step=%s, end_step=%s>"
                % (self.save_interval, self.save_steps, self.start_step, self.end_step))


class SaveConfig:
    """A SaveConfigMode per mode.  SaveConfig(save_interval=..., ...) gives
    every mode the same; SaveConfig(mode_save_configs={modes.TRAIN:
    SaveConfigMode(...), ...}) one per mode, the modes left out taking the
    hook's (a collection's) or smdebug's default."""

    def __init__(self, mode_save_configs=None, save_interval=None, start_step=None,
                 end_step=None, save_steps=None):
        if mode_save_configs is None:
            self.mode_save_configs = {
                m: SaveConfigMode(save_interval, start_step, end_step, save_steps)
                for m in ModeKeys}
        else:
            if not isinstance(mode_save_configs, dict):
                raise ValueError("mode_save_configs must be a dict of mode: SaveConfigMode")
            configs = {}
            for key, value in mode_save_configs.items():
                mode = mode_of(key)
                if isinstance(value, dict):
                    value = SaveConfigMode.from_dict(value)
                if value is not None and not isinstance(value, SaveConfigMode):
                    raise ValueError(f"save config of {mode.name} must be a SaveConfigMode")
                configs[mode] = value
            self.mode_save_configs = {m: configs.get(m) for m in ModeKeys}

    def get_save_config(self, mode):
        return self.mode_save_configs[mode_of(mode)] or SaveConfigMode()

    def set_save_config(self, mode, save_config_mode):
        if not isinstance(save_config_mode, SaveConfigMode):
            raise ValueError("save_config_mode must be a SaveConfigMode")
        self.mode_save_configs[mode_of(mode)] = save_config_mode

    def should_save_step(self, mode, step):
        return self.get_save_config(mode).should_save_step(step)

    def merged_with(self, default):
        """A copy whose missing modes come from `default` (then smdebug's
        default SaveConfigMode)."""
        out = SaveConfig(mode_save_configs=dict(self.mode_save_configs))
        for m in ModeKeys:
            if out.mode_save_configs[m] is None:
                d = default.mode_save_configs.get(m) if default else None
                out.mode_save_configs[m] = d if d is not None else SaveConfigMode()
        return out

    def to_json_dict(self):
        return {m.name: (c.to_json_dict() if c else None) for m, c in self.mode_save_configs.items()}

    @classmethod
    def parse(cls, obj):
        if obj is None:
            return cls()
        if isinstance(obj, SaveConfig):
            return obj
        if isinstance(obj, SaveConfigMode):
            return cls(mode_save_configs={m: obj for m in ModeKeys})
        if isinstance(obj, dict):
            return cls(mode_save_configs=obj)
        raise ValueError(f"save_config={obj!r} must be a SaveConfig, SaveConfigMode or dict")

    def __eq__(self, other):
        return isinstance(other, SaveConfig) and self.to_json_dict() == other.to_json_dict()

    def __repr__(self):
        return f"<class SaveConfig: {self.mode_save_configs}>"


class ReductionConfig:
    """Which reductions of a tensor to save (smdebug's names: reductions
    min max mean std variance sum prod, norms l1 l2, each also of the
    absolute values), and whether the tensor itself is saved too."""

    def __init__(self, reductions=None, abs_reductions=None, norms=None, abs_norms=None,
                 save_raw_tensor=False, save_shape=False):
        self.reductions = list(reductions or [])
        self.abs_reductions = list(abs_reductions or [])
        self.norms = list(norms or [])
        self.abs_norms = list(abs_norms or [])
        self.save_raw_tensor = bool(save_raw_tensor)
        self.save_shape = bool(save_shape)
        for what, names, allowed in (("reductions", self.reductions, ALLOWED_REDUCTIONS),
                                     ("abs_reductions", self.abs_reductions, ALLOWED_REDUCTIONS),
                                     ("norms", self.norms, ALLOWED_NORMS),
                                     ("abs_norms", self.abs_norms, ALLOWED_NORMS)):
            bad = [n for n in names if n not in allowed]
            if bad:
                raise ValueError(f"{what} can only be one of {','.join(allowed)}: not {bad}")

    def wanted(self):
        """(reduction, abs) pairs in smdebug's order of writing."""
        out = [(r, False) for r in self.reductions + self.norms]
        out += [(r, True) for r in self.abs_reductions + self.abs_norms]
        return out

    def to_json_dict(self):
        names = list(self.reductions) + [f"{n}_norm" for n in self.norms]
        names += [f"abs_{r}" for r in self.abs_reductions]
        names += [f"abs_{n}_norm" for n in self.abs_norms]
        return {"save_raw_tensor": self.save_raw_tensor, "reductions": ",".join(names),
                "save_shape": self.save_shape}

    @classmethod
    def from_dict(cls, params):
        """smdebug's flat form: {"reductions": "min,abs_l2_norm", "save_raw_tensor": ...}."""
        if params is None:
            return None
        if not isinstance(params, dict):
            raise ValueError(f"reduction config {params!r} is not a dict")
        reductions, norms, abs_reductions, abs_norms = [], [], [], []
        for red in split(params.get("reductions", "")):
            if not red:
                continue
            if red.startswith("abs_"):
                (abs_norms if red.endswith("_norm") else abs_reductions).append(red.split("_")[1])
            elif red.endswith("_norm"):
                norms.append(red.split("_")[0])
            else:
                reductions.append(red)
        return cls(reductions=reductions, abs_reductions=abs_reductions, norms=norms,
                   abs_norms=abs_norms, save_raw_tensor=parse_bool(params.get("save_raw_tensor"), False),
                   save_shape=parse_bool(params.get("save_shape"), False))

    def __eq__(self, other):
        return isinstance(other, ReductionConfig) and self.to_json_dict() == other.to_json_dict()

    def __repr__(self):
        return f"<class ReductionConfig: {self.to_json_dict()}>"


def split(text):
    """"a, b,c" -> ["a", "b", "c"]; a list is kept."""
    if isinstance(text, (list, tuple)):
        return [str(x).strip() for x in text]
    return [x.strip() for x in str(text).split(",")] if text not in (None, "") else []


def parse_bool(value, default):
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "1", "yes"):
        return True
    if isinstance(value, str) and value.strip().lower() in ("false", "0", "no", ""):
        return False
    if isinstance(value, int):
        return bool(value)
    raise ValueError(f"{value!r} is not a boolean")


# ---- SageMaker's hook configuration JSON ----

_MODE_PREFIX = {None: "", ModeKeys.TRAIN: "train.", ModeKeys.EVAL: "eval.",
                ModeKeys.PREDICT: "predict.", ModeKeys.GLOBAL: "global."}


def _save_params(params, mode):
    prefix = _MODE_PREFIX[mode]
    mine = {k[len(prefix):]: v for k, v in params.items() if k.startswith(prefix)}
    out = {}
    for key in ("save_interval", "start_step", "end_step"):
        if key in mine:
            out[key] = mine[key]
    if "save_steps" in mine:
        out["save_steps"] = [_int(x, "save_steps") for x in split(mine["save_steps"])]
    return out


def save_config_modes(params, base=None):
    """{mode: dict} from flat keys (save_interval, train.save_interval, ...);
    a mode's own keys win over the plain ones, which win over `base`."""
    plain = _save_params(params, None)
    out = {}
    for m in ModeKeys:
        d = dict(base[m]) if base else {}
        d.update(plain)
        d.update(_save_params(params, m))
        out[m] = d
    return out


def read_hook_json(path=None):
    """The hook configuration as a dict of Hook arguments plus
    "collections": [(name, params)].  `path` None: $SMDEBUG_CONFIG_FILE_PATH,
    else SageMaker's /opt/ml/input/config/debughookconfig.json; None is
    returned when neither is given and that file does not exist."""
    if path is None:
        path = os.environ.get(CONFIG_FILE_PATH_ENV)
        if path is None:
            if not os.path.exists(DEFAULT_CONFIG_FILE_PATH):
                return None
            path = DEFAULT_CONFIG_FILE_PATH
    with open(path, encoding="utf-8") as f:
        try:
            d = json.load(f)
        except ValueError as e:
            raise ValueError(f"{path}: not JSON: {e}") from None
    if not isinstance(d, dict):
        raise ValueError(f"{path}: the hook configuration must be a JSON object")
    hp = d.get("HookParameters") or {}
    if not isinstance(hp, dict):
        raise ValueError(f"{path}: HookParameters must be an object")
    base_modes = save_config_modes(hp)
    args = {
        "out_dir": d.get("LocalPath", DEFAULT_SAGEMAKER_OUTDIR),
        "save_config": SaveConfig(mode_save_configs={
            m: SaveConfigMode.from_dict(v) for m, v in base_modes.items()}),
        "reduction_config": ReductionConfig.from_dict(hp) if "reductions" in hp else None,
        "save_all": parse_bool(hp.get("save_all"), False),
        "include_regex": split(hp["include_regex"]) if "include_regex" in hp else None,
        "include_workers": hp.get("include_workers", "one"),
        "export_tensorboard": parse_bool(hp.get("export_tensorboard"), False),
        "tensorboard_dir": hp.get("tensorboard_dir"),
    }
    collections = []
    configs = d.get("CollectionConfigurations")
    if configs is not None:
        if not isinstance(configs, list):
            raise ValueError(f"{path}: CollectionConfigurations must be a list")
        for c in configs:
            if not isinstance(c, dict) or "CollectionName" not in c:
                raise ValueError(f"{path}: each of CollectionConfigurations needs a CollectionName")
            params = c.get("CollectionParameters") or {}
            if not isinstance(params, dict):
                raise ValueError(f"{path}: CollectionParameters of {c['CollectionName']} must be an object")
            collections.append((c["CollectionName"], params, save_config_modes(params, base_modes)))
        args["include_collections"] = [name for name, _, _ in collections]
    args["collections"] = collections
    return args

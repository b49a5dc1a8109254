"""Collections as smdebug keeps them: a name, regexes matched anywhere in a
tensor name (re.search), the names matched so far, and optional save and
reduction configs of their own; the manager writes them as smdebug's
collections file (docs/formats.md)."""

import json
import re

from smrules.config import ReductionConfig, SaveConfig


class CollectionKeys:
    DEFAULT = "default"
    ALL = "all"
    INPUTS = "inputs"
    OUTPUTS = "outputs"
    WEIGHTS = "weights"
    GRADIENTS = "gradients"
    LOSSES = "losses"
    BIASES = "biases"
    LAYERS = "layers"
    SM_METRICS = "sm_metrics"
    OPTIMIZER_VARIABLES = "optimizer_variables"
    METRICS = "metrics"


# Collections whose tensors are saved whole, never reduced (smdebug's
# SCALAR_COLLECTIONS).
SCALAR_COLLECTIONS = {CollectionKeys.LOSSES, CollectionKeys.METRICS, CollectionKeys.SM_METRICS,
                      "feature_importance", "average_shap"}


class Collection:
    def __init__(self, name, include_regex=None, tensor_names=None, reduction_config=None,
                 save_config=None, save_histogram=True):
        self.name = name
        self.include_regex = []
        self._compiled = []
        self.include(include_regex or [])
        self._tensor_names = set(tensor_names or [])
        self.reduction_config = reduction_config
        self.save_config = save_config
        self.save_histogram = save_histogram
        # PyTorch: module -> (inputs, outputs), from add_module_tensors
        self.modules = {}

    def include(self, regex):
        """Add a regex (or a list of them); a bad regex fails here, not
        during training."""
        if isinstance(regex, (list, tuple)):
            for r in regex:
                self.include(r)
            return
        if not isinstance(regex, str):
            raise TypeError(f"include_regex must be str or list of str, not {type(regex).__name__}")
        try:
            self._compiled.append(re.compile(regex))
        except re.error as e:
            raise ValueError(f"collection {self.name}: bad regex {regex!r}: {e}") from None
        self.include_regex.append(regex)

    def matches(self, tensor_name):
        return any(rx.search(tensor_name) for rx in self._compiled)

    def add_module_tensors(self, module, inputs=False, outputs=True):
        self.modules[module] = (inputs, outputs)

    @property
    def tensor_names(self):
        return self._tensor_names

    def add_tensor_name(self, name):
        self._tensor_names.add(name)

    def has_tensor_name(self, name):
        return name in self._tensor_names

    def to_json_dict(self):
        return {
            "name": self.name,
            "include_regex": list(self.include_regex),
            "tensor_names": sorted(self._tensor_names),
            "reduction_config": self.reduction_config.to_json_dict() if self.reduction_config else None,
            "save_config": self.save_config.to_json_dict() if self.save_config else None,
            "save_histogram": self.save_histogram,
        }

    def __repr__(self):
        return f"<Collection {self.name}: include_regex={self.include_regex}>"


class CollectionManager:
    def __init__(self):
        self.collections = {}

    def get(self, name, create=True):
        if name not in self.collections:
            if not create:
                raise KeyError(f"no collection named {name!r}")
            self.collections[name] = Collection(name)
        return self.collections[name]

    def add(self, collection):
        if not isinstance(collection, Collection):
            raise TypeError("add expects a Collection")
        self.collections[collection.name] = collection

    def to_json(self, num_workers):
        return json.dumps({
            "collections": {n: c.to_json_dict() for n, c in self.collections.items()},
            "_meta": {"num_workers": num_workers},
        })


def pytorch_collections():
    """smdebug's default PyTorch collections and their regexes."""
    cm = CollectionManager()
    for name in (CollectionKeys.ALL, CollectionKeys.DEFAULT, CollectionKeys.WEIGHTS,
                 CollectionKeys.BIASES, CollectionKeys.GRADIENTS, CollectionKeys.LOSSES):
        cm.get(name)
    cm.get(CollectionKeys.WEIGHTS).include("^(?!gradient).*weight")
    cm.get(CollectionKeys.BIASES).include("^(?!gradient).*bias")
    cm.get(CollectionKeys.GRADIENTS).include("^gradient")
    cm.get(CollectionKeys.LOSSES).include("[Ll]oss_(?!input).*output")
    return cm


__all__ = ["Collection", "CollectionKeys", "CollectionManager", "ReductionConfig", "SaveConfig",
           "pytorch_collections"]

"""smdebug's PyTorch hook, maintained: `import smrules.torch as smd` where a
script had `import smdebug.pytorch as smd`.

    hook = smd.Hook(out_dir="./debug-output",
                    save_config=smd.SaveConfig(save_interval=10),
                    include_collections=["weights", "gradients", "losses"])
    hook.register_module(model)
    hook.register_loss(loss_fn)

docs/python.md#write-a-trial-from-pytorch says what it saves."""

from smrules import modes
from smrules.collection import Collection, CollectionKeys
from smrules.config import ReductionConfig, SaveConfig, SaveConfigMode
from smrules.modes import ModeKeys
from smrules.torch.hook import Hook, HookError

__all__ = ["Hook", "HookError", "SaveConfig", "SaveConfigMode", "ReductionConfig", "Collection",
           "CollectionKeys", "ModeKeys", "modes"]

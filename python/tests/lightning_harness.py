"""Makes Debian's torch 1.13 importable by pytorch-lightning 1.9, for the tests only: the package
never does this. Import it before Lightning.

1. torch.distributed.fsdp does not import on Python 3.11: a dataclass in
   torch.distributed._shard.sharded_tensor.metadata has an instance of another dataclass as a field
   default, which Python 3.11 refuses ("mutable default ... use default_factory"); torch fixed it
   after 1.13. Lightning imports fsdp at start-up. It is imported here once with dataclasses' check
   relaxed: such a default becomes a default_factory that copies it.
2. Debian's torch calls itself "1.13.0a0", which Lightning's version checks read as older than
   1.13.0 and so take for 1.12. It is the 1.13.0 release's code, so the version is given as such.
"""

import copy
import dataclasses

import torch

_original_get_field = dataclasses._get_field


def _unhashable_instance(value):
    return dataclasses.is_dataclass(value) and not isinstance(value, type) and type(value).__hash__ is None


def _lenient_get_field(cls, name, annotation, *args):
    default = cls.__dict__.get(name, dataclasses.MISSING)
    if isinstance(default, dataclasses.Field) and _unhashable_instance(default.default):
        default.default_factory = lambda d=default.default: copy.deepcopy(d)
        default.default = dataclasses.MISSING
    elif _unhashable_instance(default):
        setattr(cls, name, dataclasses.field(default_factory=lambda d=default: copy.deepcopy(d)))
    return _original_get_field(cls, name, annotation, *args)


dataclasses._get_field = _lenient_get_field
try:
    import torch.distributed.fsdp  # noqa: F401
finally:
    dataclasses._get_field = _original_get_field

if torch.__version__.startswith("1.13.0a0"):
    torch.__version__ = "1.13.0"

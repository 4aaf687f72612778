"""tensorcom: batches of tensors over ZeroMQ, in the tenbin format.

The C++ library (tensorcom._tensorcom) does the work; this package gives it
the API of NVlabs' Python tensorcom:

    import tensorcom
    for images, labels in tensorcom.Connection("zsub://127.0.0.1:7880", converters="torch"):
        ...

Received arrays are zero-copy views of the received message, which lives as
long as any of them. tensorcom.tenbin encodes and decodes the format;
tensorcom.zcom is the reference's module of that name (`from tensorcom import
zcom, tenbin` code runs unchanged, see docs/python.md);
tensorcom.TensorcomDataset (needs torch) is a torch IterableDataset;
tensorcom.rank_urls picks a data-parallel rank's servers;
Connection.state_dict()/load_state_dict() and tensorcom.merge_state_dicts
save and resume an epoch part-way (tensorcom.resume);
tensorcom.imaging has torchvision's transforms on encoded images, for any
DataLoader, and tensorcom.collate (needs torch) a collate_fn that hands
batches to the main process in reused shared memory; tensorcom.atomic
replaces files whole or not at all.

Names are imported when first used (PEP 562), so that the pure-Python
modules (tensorcom.resume and its command, tensorcom.atomic) do not load
the C++ extension: `python3 -m tensorcom.resume` starts quickly and runs
where the extension cannot load.
"""

import importlib
from typing import TYPE_CHECKING, Any, Dict, List

if TYPE_CHECKING:
    from . import atomic, connection, converters, imaging, ranks, receipts, resume, tenbin, zcom  # noqa: F401
    from ._tensorcom import (  # noqa: F401
        ArgumentError,
        Error,
        FormatError,
        ImageError,
        IoError,
        Statistics,
        TimeoutError,
        TransportError,
        UnavailableError,
        UrlError,
    )
    from .connection import Connection  # noqa: F401
    from .converters import converter_table, listify, tonumpy, totorch, transform_with  # noqa: F401
    from .dataset import TensorcomDataset  # noqa: F401
    from .ranks import rank_urls  # noqa: F401
    from .resume import merge_state_dicts  # noqa: F401

__all__ = [
    "Connection", "TensorcomDataset", "imaging", "tenbin", "zcom", "converter_table", "tonumpy", "totorch",
    "transform_with", "listify", "rank_urls", "resume", "merge_state_dicts",
    "Error", "FormatError", "ImageError", "ArgumentError", "IoError", "UrlError", "TransportError", "TimeoutError",
    "UnavailableError", "Statistics",
]

_EXTENSION_NAMES = ("ArgumentError", "Error", "FormatError", "ImageError", "IoError", "Statistics", "TimeoutError",
                    "TransportError", "UnavailableError", "UrlError")

# Each name the package offers -> the module that defines it. TensorcomDataset
# needs torch, so torch is imported only by those who ask for it.
_HOMES: Dict[str, str] = {
    **{name: "._tensorcom" for name in _EXTENSION_NAMES},
    "Connection": ".connection",
    **{name: ".converters" for name in ("converter_table", "listify", "tonumpy", "totorch", "transform_with")},
    "TensorcomDataset": ".dataset",
    "rank_urls": ".ranks",
    "merge_state_dicts": ".resume",
}

# Submodules that `import tensorcom` made attributes of the package.
_SUBMODULES = frozenset(
    ("atomic", "connection", "converters", "imaging", "ranks", "receipts", "resume", "tenbin", "zcom")
)


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)  # the import makes it an attribute
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'tensorcom' has no attribute {name!r}")
    value = getattr(importlib.import_module(home, __name__), name)
    globals()[name] = value  # asked once
    return value


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(_HOMES) | _SUBMODULES)

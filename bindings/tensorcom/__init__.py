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
batches to the main process in reused shared memory.
"""

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
from . import imaging, resume, tenbin, zcom  # noqa: F401
from .connection import Connection  # noqa: F401
from .converters import converter_table, listify, tonumpy, totorch, transform_with  # noqa: F401
from .ranks import rank_urls  # noqa: F401
from .resume import merge_state_dicts  # noqa: F401

__all__ = [
    "Connection", "TensorcomDataset", "imaging", "tenbin", "zcom", "converter_table", "tonumpy", "totorch", "transform_with",
    "listify", "rank_urls", "resume", "merge_state_dicts",
    "Error", "FormatError", "ImageError", "ArgumentError", "IoError", "UrlError", "TransportError", "TimeoutError",
    "UnavailableError", "Statistics",
]


def __getattr__(name):
    # torch is imported only by those who ask for it.
    if name == "TensorcomDataset":
        from .dataset import TensorcomDataset
        return TensorcomDataset
    raise AttributeError(f"module 'tensorcom' has no attribute {name!r}")

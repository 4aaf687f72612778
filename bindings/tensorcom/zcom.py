"""tensorcom.zcom: the reference's module of that name, for code written
against it (`from tensorcom import zcom`): Connection, Statistics, the
converters (tonumpy, totorch, converter_table), transform_with, listify,
estimate_bytes, schemes, tenbin, zconnect, default_context and
TensorcomDataset, backed by the C++ library. docs/python.md lists where
they differ from the reference.
"""

from typing import Any, Optional, Sequence, Union

import numpy as np

from . import tenbin  # noqa: F401
from ._tensorcom import Statistics  # noqa: F401
from .connection import Connection  # noqa: F401
from .converters import converter_table, listify, tonumpy, totorch, transform_with  # noqa: F401

# ZeroMQ's socket type numbers (zmq.PUB, zmq.SUB, zmq.PULL, zmq.PUSH).
_PUB, _SUB, _PULL, _PUSH = 1, 2, 7, 8

# scheme -> (ZeroMQ socket type, whether it binds), as the reference's table;
# the C++ URL parser (url.h) is what Connections use.
schemes = dict(
    zpush=(_PUSH, False),
    zpull=(_PULL, True),
    zpub=(_PUB, True),
    zsub=(_SUB, False),
    zrpush=(_PUSH, True),
    zrpull=(_PULL, False),
    zrpub=(_PUB, False),
    zrsub=(_SUB, True),
)


def estimate_bytes(a: Any) -> int:
    """Bytes of a received item, as the reference counts them for its statistics."""
    if isinstance(a, (bytearray, str)):
        return len(a)
    if isinstance(a, np.ndarray):
        return a.nbytes
    return 8


def zconnect(url: Union[str, Sequence[str]], topic: Optional[str] = None, **options: Any) -> Connection:
    """A Connection on url (a str or a list), subscribed to topic for SUB;
    options are Connection's."""
    connection = Connection(None, **options)
    connection.connect(url, topic=topic)
    return connection


def __getattr__(name: str) -> Any:
    # torch and pyzmq are imported only by those who ask for them.
    if name == "TensorcomDataset":
        from .dataset import TensorcomDataset
        return TensorcomDataset
    if name == "default_context":
        # Connections keep their ZeroMQ context in C++; code that makes its
        # own pyzmq sockets gets pyzmq's shared context.
        import zmq
        return zmq.Context.instance()
    raise AttributeError(f"module 'tensorcom.zcom' has no attribute {name!r}")

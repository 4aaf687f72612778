"""TensorcomDataset: batches from tensorcom URLs as a torch IterableDataset.

Needs torch: the package imports this module only when
tensorcom.TensorcomDataset is asked for.
"""

import os
import warnings
from typing import Any, Dict, Iterator, Mapping, Optional, Sequence, Union

import torch

from . import _tensorcom
from ._tensorcom import ArgumentError
from .connection import Connection
from .ranks import rank_urls
from .resume import ConsumedBatches


def _shares(urls, expand_braces):
    """Whether DataLoader workers can split the batches: every URL is a PULL
    that connects, so each worker's socket is one more peer the servers'
    PUSH sockets deal batches to in turn."""
    kinds = _tensorcom.endpoint_kinds([urls] if isinstance(urls, str) else list(urls), expand_braces)
    return all(kind == "PULL" and not binds for kind, binds, _ in kinds)


_warned = False


def _warn_once(message):
    global _warned
    if not _warned:
        _warned = True
        warnings.warn(message, RuntimeWarning, stacklevel=3)


def _check_urls(urls):
    """Refuses at construction what Connection would refuse only when iterated."""
    if isinstance(urls, str):
        return
    if not isinstance(urls, (list, tuple)) or not urls or not all(isinstance(u, str) for u in urls):
        raise ArgumentError(f"TensorcomDataset: urls must be a URL or a non-empty list of them, not {urls!r}")


class TensorcomDataset(torch.utils.data.IterableDataset):
    """Batches from tensorcom URLs as a torch IterableDataset (the reference's
    TensorcomDataset(urls, length)).

    Each iteration yields `length` items, each what Connection.recv() returns:
    by default a list of NumPy arrays (connection_options such as
    converters="torch" or timeout= go to the Connection). The batches come
    batched: use DataLoader(dataset, batch_size=None). len() is `length`, the
    number of batches a DataLoader gets per epoch, whatever its workers:

    - every URL a connecting PULL (zrpull://): each worker connects, and the
      servers deal batches to the workers in turn; worker i of n yields its
      share of length (length // n, one more for the first length % n).
    - anything else (SUB, or a binding URL): only worker 0 connects and
      yields all `length`; the others yield nothing (warned once). Over
      PUB/SUB each subscriber would get every batch, so n workers would
      yield each batch n times; a bound address can be bound once.

    rank, world: this process is data-parallel rank `rank` of `world` (as
    DistributedSampler's rank and num_replicas): it connects only to its
    share of the servers, rank_urls(urls, rank, world), so that no sample
    reaches two ranks. Give both or neither; with --epoch-batches K on every
    server, length = servers per rank x K is one epoch (docs/deploy.md).

    The connection is opened in the process that iterates, and kept for the
    next epoch.

    by_epoch=True: each `for` loop over the dataset yields exactly one
    epoch of the servers' batches (Connection.iter_epoch: every stream's
    batches of that epoch, however many), and `length` only answers len().
    servers: how many server streams this process reads (iter_epoch's
    servers=; default one a URL).

    Resuming: state_dict() and load_state_dict() are the connection's (a
    token loaded before the connection exists is applied when it is made).
    They see the batches of this process only: use DataLoader num_workers=0
    (the batches come batched, so workers add little), as worker processes'
    connections are not visible from the main process; state_dict() raises
    ArgumentError if this process never received a batch and no token was
    loaded (with workers, the case it can tell).
    """

    def __init__(self, urls: Union[str, Sequence[str]], length: int = 1000000, rank: Optional[int] = None,
                 world: Optional[int] = None, *, by_epoch: bool = False, servers: Optional[int] = None,
                 **connection_options: Any) -> None:
        super().__init__()
        if (rank is None) != (world is None):
            raise ArgumentError("TensorcomDataset: give rank and world together, or neither")
        _check_urls(urls)
        if isinstance(length, bool) or not isinstance(length, int) or length < 0:
            raise ArgumentError(f"TensorcomDataset: length must be a whole number of batches >= 0, not {length!r}")
        if rank is not None and world is not None:  # both or neither, checked above
            urls = rank_urls(urls, rank, world, not connection_options.get("noexpand", False))
        if servers is not None and (type(servers) is not int or servers < 1):
            raise ArgumentError(f"TensorcomDataset: servers must be a whole number >= 1, not {servers!r}")
        self.urls = urls
        self.length = length
        self.by_epoch = bool(by_epoch)
        self.servers = servers
        self.connection_options = connection_options
        self.con: Optional[Connection] = None
        self._pid: Optional[int] = None
        self._token: Optional[ConsumedBatches] = None  # loaded before the connection was made

    def connection(self) -> Connection:
        if self.con is None or self._pid != os.getpid():
            con = Connection(self.urls, **self.connection_options)
            if self._token is not None:
                con.load_state_dict(self._token.state_dict())
            self.con, self._pid, self._token = con, os.getpid(), None
        return self.con

    def state_dict(self) -> Dict[str, Any]:
        """The connection's resume token (Connection.state_dict)."""
        if self.con is None or self._pid != os.getpid():
            if self._token is not None:
                return self._token.state_dict()
            raise ArgumentError("TensorcomDataset.state_dict(): no batch was received in this process; with "
                                "DataLoader num_workers > 0 the workers receive them and their progress is not "
                                "seen here: use num_workers=0 to resume")
        return self.con.state_dict()

    def load_state_dict(self, token: Mapping[str, Any]) -> None:
        """Loads a resume token into the connection (Connection.load_state_dict),
        now if it exists, else when it is made."""
        if self.con is None or self._pid != os.getpid():
            loaded = ConsumedBatches()
            loaded.load_state_dict(token)  # refused now, not at the first batch
            self._token = loaded
        else:
            self.con.load_state_dict(token)

    def _share(self):
        """How many items this process yields."""
        info = torch.utils.data.get_worker_info()
        if info is None or info.num_workers <= 1:
            return self.length
        if _shares(self.urls, not self.connection_options.get("noexpand", False)):
            return self.length // info.num_workers + (1 if info.id < self.length % info.num_workers else 0)
        if info.id == 0:
            _warn_once(f"TensorcomDataset: {self.urls} cannot be split over {info.num_workers} DataLoader workers "
                       "(every subscriber gets every batch; a bound address is bound once): worker 0 receives "
                       "all batches, the others none. Serve with PUSH and connect with zrpull:// to share.")
            return self.length
        return 0

    def __iter__(self) -> Iterator[Any]:
        if self.by_epoch:
            if self._share() == 0:
                return
            yield from self.connection().iter_epoch(self.servers)
            return
        share = self._share()
        if share == 0:
            return
        connection = self.connection()
        for _ in range(share):
            yield connection.recv()

    def __len__(self) -> int:
        return self.length

    def close(self) -> None:
        if self.con is not None:
            self.con.close()
            self.con = None

    def __getstate__(self):
        state = dict(self.__dict__)
        state["con"], state["_pid"] = None, None  # sockets do not travel to workers
        return state

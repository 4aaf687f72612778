"""TensorcomDataset: batches from tensorcom URLs as a torch IterableDataset.

Needs torch: the package imports this module only when
tensorcom.TensorcomDataset is asked for.
"""

import os

import torch

from .connection import Connection


class TensorcomDataset(torch.utils.data.IterableDataset):
    """Batches from tensorcom URLs as a torch IterableDataset.

    Each iteration yields one epoch: `epoch` batches (or `total`, if given and
    smaller), converted by `converters` ("torch" by default). Batches are
    already batched: use DataLoader(dataset, batch_size=None). The connection
    is opened in the process that iterates (a DataLoader worker gets its own);
    with PUB/SUB every subscriber sees every batch, so use one worker (or
    num_workers=0) unless the servers PUSH.
    """

    def __init__(self, urls, epoch=100000, converters="torch", **connection_options):
        super().__init__()
        self.urls = urls
        self.epoch = epoch
        self.converters = converters
        self.connection_options = connection_options
        self._connection = None
        self._pid = None

    def connection(self):
        if self._connection is None or self._pid != os.getpid():
            self._connection = Connection(self.urls, epoch=self.epoch, converters=self.converters,
                                          **self.connection_options)
            self._pid = os.getpid()
        return self._connection

    def __iter__(self):
        connection = self.connection()
        count = self.epoch if connection.total < 0 else min(self.epoch, connection.total)
        for _ in range(count):
            yield connection.recv()

    def __len__(self):
        return self.epoch

    def close(self):
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_connection"], state["_pid"] = None, None  # sockets do not travel to workers
        return state

"""Where tensorcom.imaging's transforms draw from: a Generator hands each
image (or batch) a (seed, sequence) pair, as the augmentation servers number
their samples (re-exported by tensorcom.imaging)."""

from __future__ import annotations

import os
import sys
import threading
from typing import Optional, Tuple, Union

import numpy as np

__all__ = ["Generator", "GeneratorLike"]

# A generator argument: a Generator, a seed, or None (the default one).
GeneratorLike = Union["Generator", int, None]


class Generator:
    """Where a transform's crops and flips come from: image n of a stream
    draws from the generator seeded by (seed, n), as the servers' sample n.

    seed=None: when torch is loaded, each image's seed is drawn from torch's
    generator, as torchvision's transforms draw their parameters (so
    torch.manual_seed repeats them, and DataLoader gives each worker of each
    epoch its own); else a random stream, re-drawn after a fork.
    seed=int: that stream; inside a DataLoader worker, mixed with the
    worker's torch seed, so that workers and epochs differ and a run seeded
    with torch.manual_seed repeats."""

    def __init__(self, seed: Optional[int] = None) -> None:
        self._requested = _checked_seed(seed)
        self._lock = threading.Lock()
        self._key = None  # what the stream was started from
        self._seed = 0
        self._sequence = 0

    def manual_seed(self, seed: Optional[int]) -> Generator:
        """Restarts the stream from seed (as torch.Generator.manual_seed)."""
        seed = _checked_seed(seed)
        with self._lock:
            self._requested, self._key = seed, None
        return self

    def _stream_key(self):
        # The stream restarts whenever this changes: after a fork, and in a
        # DataLoader worker when its torch seed does (a new epoch's workers).
        return os.getpid(), _torch_seed() if _worker_id() is not None else None

    def draw(self) -> Tuple[int, int]:
        """The next image's (seed, sequence)."""
        if self._requested is None:
            torch = sys.modules.get("torch")
            if torch is not None:
                return int(torch.randint(-2**63, 2**63 - 1, (), dtype=torch.int64)) % 2**64, 0
        with self._lock:
            key = self._stream_key()
            if key != self._key:
                self._key, self._sequence = key, 0
                self._seed = self._start_seed(key[1])
            pair = (self._seed, self._sequence)
            self._sequence += 1
            return pair

    def _start_seed(self, torch_seed):
        if self._requested is None:
            return int.from_bytes(os.urandom(8), "little")
        if torch_seed is None:
            return self._requested
        return (self._requested * 0x9E3779B97F4A7C15 + torch_seed + 1) % 2**64

    # Pickled (a DataLoader's spawn or forkserver workers, deepcopy): the
    # seed and the stream's place go along, so a copy in this process goes
    # on where the original was, and one in another process restarts as
    # after a fork. The module's default generator stays the default of the
    # process that loads it.
    def __reduce__(self):
        if self is _default_generator:
            return _the_default_generator, ()
        with self._lock:
            state = (self._key, self._seed, self._sequence)
        return Generator, (self._requested,), state

    def __setstate__(self, state):
        self._key, self._seed, self._sequence = state


def _checked_seed(seed):
    if seed is not None and not (isinstance(seed, (int, np.integer)) and 0 <= seed < 2**64):
        raise ValueError(f"seed must be an int in [0, 2**64), not {seed!r}")
    return None if seed is None else int(seed)


def _torch_seed():
    torch = sys.modules.get("torch")
    return None if torch is None else int(torch.initial_seed()) % 2**64


def _worker_id():
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    info = torch.utils.data.get_worker_info()
    return None if info is None else int(info.id)


_default_generator = Generator()


def _the_default_generator():
    return _default_generator


def _generator(generator):
    if generator is None:
        return _default_generator
    if isinstance(generator, Generator):
        return generator
    return Generator(generator)

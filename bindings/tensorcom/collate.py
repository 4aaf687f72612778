"""A DataLoader collate_fn that hands batches from the workers to the main
process through shared memory reused from batch to batch.

torch's default collate stacks each batch into fresh shared memory: every
page of every batch is faulted in twice, once in the worker that writes it
and once in the main process that reads it, and the mapping is made and
torn down again for each batch. Where page faults are dear (many virtual
machines) that costs as much as decoding the images. SharedRingCollate
stacks batches into a small ring of shared-memory slots per worker that
both processes keep mapped, so after the first few batches no page is
faulted in again:

    from tensorcom.collate import SharedRingCollate
    loader = DataLoader(dataset, batch_size=256, num_workers=8, collate_fn=SharedRingCollate())

Batches are what default_collate makes (the same structure, values, shapes
and dtypes; tuples become lists, as there); tensors and NumPy arrays of at
least min_bytes per batch travel through the ring, the rest as torch sends
them.

Nothing is overwritten while the main process can still see it: a slot
goes back to its worker only when the last tensor over it (the batch, and
every view or slice of it) is freed in the main process. A worker that
finds no free slot makes another, up to max_slots, and past that collates
as torch does; so a training loop that keeps batches costs what it costs
with the default collate, never a corrupted batch. Mapped memory is at most
max_slots batches a worker, in each of the two processes; a worker's slots
are freed when both it and the tensors over them are gone.

The main process maps a worker's slots for as long as the DataLoader
keeps that worker (the iterator's, or a persistent_workers DataLoader's):
once the iterator is gone, so are its workers' mappings, but for those
under tensors still alive, which go with the last of them. Workers killed
mid-epoch are no exception.

Without workers (num_workers=0), and where there is no memfd_create (it is
Linux's), the collate is default_collate's.
"""
import mmap
import multiprocessing.process
import multiprocessing.util
import os
import secrets
import threading
import weakref
from collections.abc import Mapping, Sequence
from typing import Any, Dict
from multiprocessing.reduction import DupFd, ForkingPickler

import numpy as np
import torch
from torch.utils.data import default_collate, get_worker_info

from ._tensorcom import stack_planar

__all__ = ["SharedRingCollate"]

_FREE, _HELD = 0, 1
_CLOSED_BYTE = 0  # control byte 0: the worker has exited; byte 1 + k: slot k's state


class SharedRingCollate:
    """collate_fn=SharedRingCollate(): default_collate's batches, sent
    through shared memory that each worker reuses (see the module's text).

    max_slots: slots a worker may hold at once (each the size of the
    largest batch it has carried); past them, batches go as torch sends
    them. min_bytes: smaller stacked tensors (labels, say) go as torch
    sends them too. Picklable, so it works with every multiprocessing
    context (fork, spawn, forkserver)."""

    def __init__(self, max_slots: int = 8, min_bytes: int = 64 * 1024) -> None:
        if not 1 <= max_slots <= 255:
            raise ValueError(f"max_slots {max_slots}: expected 1 to 255")
        if min_bytes < 1:
            raise ValueError(f"min_bytes {min_bytes}: expected at least 1")
        self.max_slots, self.min_bytes = max_slots, min_bytes

    def __call__(self, batch: Sequence[Any]) -> Any:
        if get_worker_info() is None or not hasattr(os, "memfd_create"):  # memfd: Linux
            return default_collate(batch)
        return self._collate(batch, _worker_ring(self.max_slots))

    def _collate(self, batch, ring):
        elem = batch[0]
        if isinstance(elem, np.ndarray) and elem.dtype.kind in "biufc?":
            batch = [torch.as_tensor(a) for a in batch]
            elem = batch[0]
        if isinstance(elem, torch.Tensor):
            stacked = self._stack_in_ring(batch, ring)
            return stacked if stacked is not None else default_collate(batch)
        if isinstance(elem, Mapping):
            fields = {key: self._collate([sample[key] for sample in batch], ring) for key in elem}
            mapping_type: Any = type(elem)  # a concrete class, which takes a dict
            try:
                return mapping_type(fields)  # an OrderedDict stays one, as default_collate keeps it
            except TypeError:
                return fields
        if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # a namedtuple stays one
            return type(elem)(*(self._collate(list(field), ring) for field in zip(*batch)))
        if isinstance(elem, Sequence) and not isinstance(elem, (str, bytes)):
            if any(len(sample) != len(elem) for sample in batch):
                return default_collate(batch)  # its error names the problem
            return [self._collate(list(field), ring) for field in zip(*batch)]
        return default_collate(batch)

    def _stack_in_ring(self, tensors, ring):
        """tensors stacked into a free slot of ring, or None where they go
        as torch sends them."""
        first = tensors[0]
        if first.device.type != "cpu" or first.is_sparse or first.requires_grad:
            return None
        if any(t.shape != first.shape or t.dtype != first.dtype for t in tensors):
            return None  # default_collate stacks them or says why not
        shape = (len(tensors),) + tuple(first.shape)
        nbytes = first.element_size() * first.numel() * len(tensors)
        if nbytes < self.min_bytes:
            return None
        slot = ring.acquire(nbytes)
        if slot is None:
            return None
        try:
            out = torch.frombuffer(slot.memory, dtype=first.dtype, count=first.numel() * len(tensors)).view(shape)
            _stack(tensors, out)
        except BaseException:
            ring.release(slot.index)
            raise
        batch = out.as_subclass(_RingTensor)
        batch._tensorcom_slot = (ring, slot)
        batch._tensorcom_sent = []  # [True] once pickled for the main process
        ring.watch(batch, slot)
        return batch


def _stack(tensors, out):
    """torch.stack(tensors, out=out); CHW uint8 views of HWC images (what
    PILToTensor makes) are laid out by one C++ pass, where torch copies
    them element by element at a fraction of memory speed."""
    if all(_is_hwc_view(t) for t in tensors):
        stack_planar([t.permute(1, 2, 0).numpy() for t in tensors], out.numpy())
    else:
        torch.stack(tensors, 0, out=out)


def _is_hwc_view(tensor):
    return (tensor.dtype == torch.uint8 and tensor.dim() == 3 and tensor.shape[0] > 1
            and tensor.permute(1, 2, 0).is_contiguous())


class _RingTensor(torch.Tensor):
    """A batch stacked into a worker's slot. Pickled for the main process
    as the slot's address, not its bytes. Operations on it give plain
    tensors, so nothing else takes that path."""

    __torch_function__ = torch._C._disabled_torch_function_impl


class _Slot:
    """One shared-memory batch buffer of a worker: a memfd mapped there."""

    def __init__(self, index, capacity, generation):
        self.index, self.capacity, self.generation = index, capacity, generation
        self.fd = os.memfd_create(f"tensorcom-batch-{index}", os.MFD_CLOEXEC)
        try:
            os.ftruncate(self.fd, capacity)
            self.memory = mmap.mmap(self.fd, capacity)
        except BaseException:
            os.close(self.fd)
            raise
        self.announced = False  # the main process has been sent the fd
        weakref.finalize(self, os.close, self.fd)


class _WorkerRing:
    """A worker's slots, and the control bytes both processes map: one
    byte a slot, _HELD from when a batch is stacked into it until the main
    process frees every tensor over it."""

    def __init__(self, max_slots):
        self.pid = os.getpid()
        self.id = (self.pid, secrets.token_hex(8))
        self.max_slots = max_slots
        self.control_fd = os.memfd_create("tensorcom-batch-control", os.MFD_CLOEXEC)
        os.ftruncate(self.control_fd, 1 + max_slots)
        self.control = mmap.mmap(self.control_fd, 1 + max_slots)
        self.control_announced = False
        self.slots = []
        self.lock = threading.Lock()  # batches are pickled on the queue's feeder thread
        # After the result queue's own exit handler (-5): its last batches are sent by then.
        multiprocessing.util.Finalize(self, _WorkerRing.close, args=(self.control,), exitpriority=-10)

    @staticmethod
    def close(control):
        control[_CLOSED_BYTE] = 1

    def acquire(self, nbytes):
        """A free slot of at least nbytes, marked held; None when every
        one of max_slots slots is held."""
        with self.lock:
            free = [s for s in self.slots if self.control[1 + s.index] == _FREE]
            fitting = [s for s in free if s.capacity >= nbytes]
            if fitting:
                slot = min(fitting, key=lambda s: s.capacity)
            elif free:  # a free slot too small for this batch: replaced by a larger one
                old = max(free, key=lambda s: s.capacity)
                try:
                    slot = self.slots[old.index] = _Slot(old.index, nbytes, old.generation + 1)
                except OSError:
                    return None
            elif len(self.slots) < self.max_slots:
                try:
                    slot = _Slot(len(self.slots), nbytes, 0)
                except OSError:  # out of memory or descriptors: this batch goes as torch sends it
                    return None
                self.slots.append(slot)
            else:
                return None
            self.control[1 + slot.index] = _HELD
            return slot

    def release(self, index):
        self.control[1 + index] = _FREE

    def watch(self, batch, slot):
        """Frees slot if batch is dropped in this worker without being sent."""
        weakref.finalize(batch, self._release_unsent, batch._tensorcom_sent, slot.index)

    def _release_unsent(self, sent, index):
        if not sent and os.getpid() == self.pid:
            self.release(index)

    def address(self, slot):
        """What the main process needs to map slot: fds it has not been sent."""
        with self.lock:
            control_fd = None if self.control_announced else DupFd(self.control_fd)
            slot_fd = None if slot.announced else DupFd(slot.fd)
            self.control_announced = slot.announced = True
        return control_fd, slot_fd


_worker_state: Dict[int, _WorkerRing] = {}  # pid -> _WorkerRing of the worker process with that pid


def _worker_ring(max_slots):
    pid = os.getpid()
    ring = _worker_state.get(pid)
    if ring is None:
        _worker_state.clear()  # a forked parent's ring is its own: never written here
        ring = _worker_state[pid] = _WorkerRing(max_slots)
    return ring


def _reduce_ring_tensor(tensor):
    info = getattr(tensor, "_tensorcom_slot", None)
    if info is None:  # not one of ours: as torch sends any tensor
        from torch.multiprocessing.reductions import reduce_tensor
        return reduce_tensor(tensor.as_subclass(torch.Tensor))
    ring, slot = info
    tensor._tensorcom_sent.append(True)
    control_fd, slot_fd = ring.address(slot)
    nbytes = tensor.numel() * tensor.element_size()
    return _rebuild_in_main, (ring.id, slot.index, slot.generation, tensor.dtype, tuple(tensor.shape), nbytes,
                              control_fd, slot_fd)


ForkingPickler.register(_RingTensor, _reduce_ring_tensor)


class _MainRing:
    """The main process's mappings of one worker's control bytes and slots."""

    def __init__(self, ring_id, control):
        self.id, self.control = ring_id, control
        self.slots = {}  # index -> (generation, mmap)
        # Once dropped from _main_rings the ring holds no descriptor or
        # mapping but through tensors still over its slots (each mmap closes
        # its own with the last of them). It is dropped with its worker's
        # Process object, which the DataLoader's iterator keeps until it has
        # shut the worker down, killed or not; where there is none (a worker
        # already reaped), when a new ring comes and finds this one finished.
        process = _worker_process(ring_id[0])
        if process is not None:
            weakref.finalize(process, _drop_main_ring, ring_id)

    def finished(self):
        """Its worker has exited: no batch will come from it again."""
        if self.control[_CLOSED_BYTE]:
            return True
        try:
            os.kill(self.id[0], 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            pass
        return False


# ring id -> _MainRing. Rings are dropped by finalizers that run in
# whichever thread, and under whatever lock, frees a worker's Process: they
# pop without _main_lock, and readers iterate over copies.
_main_rings: Dict[Any, _MainRing] = {}
_main_lock = threading.Lock()  # batches are unpickled on the pin-memory thread too


def _drop_main_ring(ring_id):
    _main_rings.pop(ring_id, None)


def _worker_process(pid):
    """This process's multiprocessing.Process of the child with that pid, or
    None. Read from the set multiprocessing keeps until it reaps a child:
    active_children() would reap exited workers, and torch's SIGCHLD handler
    names a killed worker only while it is not reaped."""
    children = getattr(multiprocessing.process, "_children", None)
    for process in list(children or ()):
        if process.pid == pid:
            return process
    return None


def _map(dup_fd):
    fd = dup_fd.detach()
    try:
        return mmap.mmap(fd, 0)
    finally:
        os.close(fd)


def _rebuild_in_main(ring_id, index, generation, dtype, shape, nbytes, control_fd, slot_fd):
    with _main_lock:
        ring = _main_rings.get(ring_id)
        if ring is None:
            if control_fd is None:
                raise RuntimeError(f"tensorcom.collate: a batch from worker {ring_id[0]}'s ring, which this "
                                   "process has not been sent (was the batch pickled twice or out of order?)")
            for old in list(_main_rings.values()):
                if old.finished():
                    _drop_main_ring(old.id)  # its tensors still alive keep their own mappings
            ring = _MainRing(ring_id, _map(control_fd))
            _main_rings[ring_id] = ring
        if slot_fd is not None:
            ring.slots[index] = (generation, _map(slot_fd))
        mapped = ring.slots.get(index)
        if mapped is None or mapped[0] != generation:
            raise RuntimeError(f"tensorcom.collate: slot {index} generation {generation} of worker "
                               f"{ring_id[0]}'s ring was never sent to this process")
        memory = mapped[1]
    view = np.frombuffer(memory, np.uint8, nbytes)
    pid = os.getpid()
    weakref.finalize(view, _release_in_main, ring.control, index, pid)
    # frombuffer keeps view alive as long as any tensor over the batch is, and
    # view's finalizer hands the slot back to the worker once none is.
    return torch.frombuffer(view, dtype=dtype).view(shape)


def _release_in_main(control, index, pid):
    if os.getpid() == pid:  # never from a child forked while the batch was alive
        control[1 + index] = _FREE

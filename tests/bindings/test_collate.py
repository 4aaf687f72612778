"""tensorcom.collate.SharedRingCollate in real DataLoaders (worker
processes, fork and spawn): the batches default_collate makes, in shared
memory that is reused but never overwritten while the main process can
still see it, and freed when the workers are gone. Also
_tensorcom.stack_planar, which lays out HWC images as CHW planes.
Skipped without torch."""

import gc
import os
import signal
from collections import OrderedDict, namedtuple

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader, Dataset, default_collate  # noqa: E402

from tensorcom import _tensorcom  # noqa: E402
from tensorcom import collate  # noqa: E402
from tensorcom.collate import SharedRingCollate  # noqa: E402

Pair = namedtuple("Pair", "left right")


def image(i):
    """Sample i's image: a CHW uint8 view of HWC memory, as PILToTensor gives."""
    hwc = (np.arange(40 * 50 * 3, dtype=np.uint32).reshape(40, 50, 3) * 7 + i * 13) % 251
    return torch.from_numpy(hwc.astype(np.uint8)).permute(2, 0, 1)


class Samples(Dataset):
    """Samples of every kind default_collate handles: images, labels,
    arrays, dicts, namedtuples and strings."""

    def __len__(self):
        return 70

    def __getitem__(self, i):
        return (image(i), i, OrderedDict(depth=torch.full((30, 30), float(i)), name=f"s{i}"),
                Pair(np.full((64, 64), i, np.int16), torch.tensor([i, -i])))


class Images(Dataset):
    """(image(i), i): a 64-image batch is 384 KB, over min_bytes."""

    def __init__(self, count=256):
        self.count = count

    def __len__(self):
        return self.count

    def __getitem__(self, i):
        return image(i), i


def same(a, b):
    """a and b the same batch structure with equal values and types."""
    assert type(a) is type(b), (type(a), type(b))
    if isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    elif isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            same(a[key], b[key])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            same(x, y)
    else:
        assert a == b


def check_images(batch, labels):
    for picture, label in zip(batch, labels.tolist()):
        assert torch.equal(picture, image(label)), f"sample {label}'s pixels changed"


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_batches_are_default_collates(context):
    kwargs = dict(batch_size=16, num_workers=2, multiprocessing_context=context)
    want = list(DataLoader(Samples(), **kwargs))
    got = list(DataLoader(Samples(), collate_fn=SharedRingCollate(min_bytes=1024), **kwargs))
    assert len(got) == len(want) == 5  # the last batch holds 6
    for g, w in zip(got, want):
        same(g, w)
        assert g[0].is_contiguous()


def test_without_workers_it_is_default_collate():
    batch = [Samples()[i] for i in range(4)]
    same(SharedRingCollate()(batch), default_collate(batch))


def test_slots_are_reused_batch_after_batch():
    loader = DataLoader(Images(), batch_size=64, num_workers=1, persistent_workers=True,
                        collate_fn=SharedRingCollate(max_slots=4))
    for _ in range(2):
        addresses = set()
        for batch, labels in loader:
            check_images(batch, labels)
            addresses.add(batch.untyped_storage().data_ptr() if hasattr(batch, "untyped_storage")
                          else batch.storage().data_ptr())
            del batch
        assert len(addresses) <= 4, "each batch in memory of its own: the ring is not reused"


def test_batches_kept_by_the_loop_are_never_overwritten():
    # max_slots=3 with every third batch kept: the worker runs out of free
    # slots and sends the rest as torch does.
    loader = DataLoader(Images(600), batch_size=8, num_workers=2,
                        collate_fn=SharedRingCollate(max_slots=3, min_bytes=1024))
    kept, slices = [], []
    for n, (batch, labels) in enumerate(loader):
        if n % 3 == 0:
            kept.append((batch, labels))
        elif n % 3 == 1:
            slices.append((batch[2:5, 1], labels[2:5]))  # a view keeps its batch's slot too
    for batch, labels in kept:
        check_images(batch, labels)
    for part, labels in slices:
        for plane, label in zip(part, labels.tolist()):
            assert torch.equal(plane, image(label)[1])


def test_a_changed_batch_size_grows_the_slots():
    class Sizes(Dataset):
        def __len__(self):
            return 10

        def __getitem__(self, i):
            return torch.full((i + 1, 128, 128), i, dtype=torch.uint8)

    loader = DataLoader(Sizes(), batch_size=1, num_workers=1, collate_fn=SharedRingCollate(max_slots=2))
    for i, batch in enumerate(loader):
        assert batch.shape == (1, i + 1, 128, 128) and bool((batch == i).all())


def test_unequal_shapes_fail_as_default_collate_fails():
    batch = [torch.zeros(3, 4, 4), torch.zeros(3, 5, 4)]
    with pytest.raises(RuntimeError) as default_error:
        default_collate(batch)
    loader = DataLoader([batch[0], batch[1]], batch_size=2, num_workers=1, collate_fn=SharedRingCollate(min_bytes=1))
    with pytest.raises(RuntimeError) as ring_error:
        next(iter(loader))
    assert str(default_error.value).splitlines()[0] in str(ring_error.value)


def ring_mappings():
    """This process's mappings of workers' slots and control bytes."""
    with open("/proc/self/maps") as maps:
        return sum("tensorcom-batch" in line for line in maps)


def test_memory_of_finished_workers_is_freed():
    before = ring_mappings()
    loader = DataLoader(Images(128), batch_size=32, num_workers=2, collate_fn=SharedRingCollate())
    counts = []
    for _ in range(5):  # new workers each epoch
        for batch, labels in loader:
            check_images(batch, labels)
        del batch, labels
        gc.collect()
        counts.append(ring_mappings() - before)
    # One epoch's workers' mappings are dropped when the next epoch's arrive.
    assert max(counts) <= 2 * 2 * (8 + 1), counts
    assert counts[-1] <= counts[1], counts


def memfds_held():
    """This process's descriptors and mappings of workers' memfds."""
    descriptors = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            descriptors += os.readlink(f"/proc/self/fd/{fd}").startswith("/memfd:tensorcom-")
        except OSError:  # the descriptor listdir read /proc/self/fd with, closed since
            pass
    return {"descriptors": descriptors, "mappings": ring_mappings()}


class Pids(Dataset):
    """(image(i), the pid of the worker that loads sample i)."""

    def __len__(self):
        return 256

    def __getitem__(self, i):
        return image(i), os.getpid()


def test_killed_workers_leave_no_shared_memory_behind():
    kept = []
    for n in range(10):
        # timeout: a batch that never comes fails the test in seconds, not hangs it.
        loader = DataLoader(Pids(), batch_size=16, num_workers=2, timeout=10, collate_fn=SharedRingCollate())
        batches, seen, error = iter(loader), [], None
        try:
            for batch, pids in batches:
                kept.append((batch, len(seen) * 16))
                seen.append(int(pids[0]))
                if len(seen) == 4:  # from each worker in turn: one killed, or both
                    for pid in sorted(set(seen))[:1 + n % 2]:
                        os.kill(pid, signal.SIGKILL)
                        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)  # dead, left for torch to reap
        except RuntimeError as failure:  # torch's, for the killed worker
            error = str(failure)
        assert error is not None and "DataLoader worker" in error, error
        del loader, batches, batch, pids
    gc.collect()
    for batch, first in kept:  # the batches held stay as they came, their loaders gone
        check_images(batch, torch.arange(first, first + 16))
    assert memfds_held()["mappings"] > 0
    del kept, batch
    gc.collect()
    assert memfds_held() == {"descriptors": 0, "mappings": 0}


def test_finished_loaders_leave_no_shared_memory_behind():
    for _ in range(10):
        loader = DataLoader(Images(128), batch_size=32, num_workers=2, timeout=10, collate_fn=SharedRingCollate())
        for batch, labels in loader:
            check_images(batch, labels)
    gc.collect()
    assert memfds_held()["mappings"] > 0  # the last batch: its slot stays mapped while it is alive
    check_images(batch, labels)
    del loader, batch, labels
    gc.collect()
    assert memfds_held() == {"descriptors": 0, "mappings": 0}


def test_a_slot_that_cannot_be_made_sends_the_batch_as_torch_does(monkeypatch):
    ring = collate._WorkerRing(2)
    first = ring.acquire(1000)
    assert first is not None and first.capacity == 1000

    def no_memory(*args):
        raise OSError(12, "Cannot allocate memory")

    monkeypatch.setattr(collate.os, "memfd_create", no_memory)
    assert ring.acquire(1000) is None  # a new slot: refused, not raised
    ring.release(first.index)
    assert ring.acquire(5000) is None  # a larger one in place of the free slot: the same
    assert ring.acquire(1000) is first


def test_a_batch_from_a_ring_never_sent_is_refused_by_name():
    # What the main process gets when a message skipped the one that carried
    # the ring's descriptors (a message pickled twice or out of order).
    ring_id = (os.getpid(), "feedfacefeedface")
    with pytest.raises(RuntimeError, match=f"worker {os.getpid()}'s ring, which this process has not been sent"):
        collate._rebuild_in_main(ring_id, 0, 0, torch.uint8, (1, 4), 4, None, None)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="max_slots"):
        SharedRingCollate(max_slots=0)
    with pytest.raises(ValueError, match="min_bytes"):
        SharedRingCollate(min_bytes=0)


def test_stack_planar_lays_out_hwc_images_as_chw():
    images = [np.random.default_rng(i).integers(0, 256, (7, 9, 3), dtype=np.uint8) for i in range(4)]
    out = np.zeros((4, 3, 7, 9), np.uint8)
    _tensorcom.stack_planar(images, out)
    assert np.array_equal(out, np.stack(images).transpose(0, 3, 1, 2))


@pytest.mark.parametrize("images, out, message", [
    ([np.zeros((7, 9, 3), np.uint8)], np.zeros((2, 3, 7, 9), np.uint8), "1 images for 2 places"),
    ([np.zeros((7, 8, 3), np.uint8)], np.zeros((1, 3, 7, 9), np.uint8), "7x8x3 for places of 7x9x3"),
    ([np.zeros((7, 9, 3), np.float32)], np.zeros((1, 3, 7, 9), np.uint8), "uint8"),
    ([np.zeros((7, 9, 3), np.int8)], np.zeros((1, 3, 7, 9), np.uint8), "uint8"),
    ([np.zeros((9, 7, 3), np.uint8).transpose(1, 0, 2)], np.zeros((1, 3, 7, 9), np.uint8), "C-contiguous"),
    ([np.zeros((7, 9, 3), np.uint8)], np.zeros((1, 3, 7, 9), np.uint8)[:, :, :, ::-1], "C-contiguous"),
    ([np.zeros((7, 9, 3), np.uint8)], np.frombuffer(bytes(189), np.uint8).reshape(1, 3, 7, 9), "read-only|writable"),
])
def test_stack_planar_refuses_what_it_cannot_fill(images, out, message):
    with pytest.raises(Exception, match=message):
        _tensorcom.stack_planar(images, out)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="pin_memory needs CUDA")
def test_pinned_batches_are_copies_and_free_their_slots():
    loader = DataLoader(Images(512), batch_size=32, num_workers=2, pin_memory=True,
                        collate_fn=SharedRingCollate(max_slots=3))
    kept = []
    for batch, labels in loader:
        assert batch.is_pinned()
        kept.append((batch, labels))  # the pinned copies: the slots under them are free again
    for batch, labels in kept:
        check_images(batch, labels)
    assert len(kept) == 16

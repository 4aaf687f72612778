"""PyTorch support: the "torch" and "torch_cuda" converters.

"torch": each numpy array becomes a CPU tensor sharing its memory
(torch.from_numpy); images (B,H,W,3|4) or (H,W,3|4) are permuted to (B,C,H,W)
or (C,H,W), a view whose memory is channels-last, so nothing is copied. As the
reference does, floats become float32 and 16/32/64-bit integers int64 (these
conversions copy; uint8 images and float32 stay zero-copy).

"torch_cuda": the same on the GPU. For now it uses torch's own machinery: the
array is copied once into pinned host memory from torch's caching host
allocator, then uploaded with a non-blocking copy on a side stream that the
current stream waits for (so the upload overlaps work already queued). The
C++ GPU feeder will replace this path.
"""

import numpy as np
import torch

from ._tensorcom import UnavailableError

# Integer dtypes torch cannot view (or the reference widens): read as int64.
_WIDEN = {np.dtype(t) for t in ("int16", "uint16", "int32", "uint32", "uint64")}
_FLOATS = {np.dtype(t) for t in ("float16", "float64")}


def _cpu_tensor(a):
    """A CPU tensor viewing a (a copy only where torch has no such dtype)."""
    if a.dtype in (np.dtype("uint16"), np.dtype("uint32"), np.dtype("uint64")):
        a = a.astype(np.int64)
    elif not a.flags.writeable:
        a = a.copy()  # torch tensors are writable; viewing read-only memory would be a lie
    return torch.from_numpy(a)


def _target_dtype(np_dtype, dtype):
    if dtype is not None:
        return getattr(torch, dtype) if isinstance(dtype, str) else dtype
    if np_dtype in _FLOATS:
        return torch.float32
    if np_dtype in _WIDEN:
        return torch.int64
    return None


def to_chw(t):
    """(B,H,W,C) -> (B,C,H,W) and (H,W,C) -> (C,H,W) for C in 3, 4, as views."""
    if t.ndim == 4 and t.shape[3] in (3, 4):
        return t.permute(0, 3, 1, 2)
    if t.ndim == 3 and t.shape[2] in (3, 4):
        return t.permute(2, 0, 1)
    return t


class TorchConverter:
    """numpy array -> CPU torch tensor (see the module's doc); anything else passes."""

    def __init__(self, dtype=None, transpose=True):
        self.dtype = dtype
        self.transpose = transpose

    def __call__(self, a):
        if not isinstance(a, np.ndarray):
            return a
        t = _cpu_tensor(a)
        target = _target_dtype(a.dtype, self.dtype)
        if target is not None and t.dtype != target:
            t = t.to(target)
        return to_chw(t) if self.transpose else t


class CudaConverter:
    """numpy array -> CUDA tensor through pinned memory and a side stream (see the module's doc)."""

    def __init__(self, device="cuda", dtype=None, transpose=True):
        self.device = torch.device(device)
        self.dtype = dtype
        self.transpose = transpose
        self._stream = None

    def __call__(self, a):
        if not isinstance(a, np.ndarray):
            return a
        if not torch.cuda.is_available():
            raise UnavailableError("the torch_cuda converter needs CUDA, and torch.cuda is not available")
        if self._stream is None:
            self._stream = torch.cuda.Stream(self.device)
        source = _cpu_tensor(a)
        pinned = torch.empty(source.shape, dtype=source.dtype, pin_memory=True)
        pinned.copy_(source)
        current = torch.cuda.current_stream(self.device)
        with torch.cuda.stream(self._stream):
            out = pinned.to(self.device, non_blocking=True)
        # The consumer's stream waits on the GPU, not the host; the caching
        # allocators keep pinned and out alive until the streams are done.
        current.wait_stream(self._stream)
        out.record_stream(current)
        target = _target_dtype(a.dtype, self.dtype)
        if target is not None and out.dtype != target:
            out = out.to(target)
        return to_chw(out) if self.transpose else out

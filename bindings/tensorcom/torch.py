"""PyTorch support: the "torch" and "torch_cuda" converters.

"torch": each numpy array becomes a CPU tensor sharing its memory
(torch.from_numpy); images (B,H,W,3|4) or (H,W,3|4) are permuted to (B,C,H,W)
or (C,H,W), a view whose memory is channels-last, so nothing is copied. As the
reference does, floats become float32 and 16/32/64-bit integers int64 (these
conversions copy; uint8 images and float32 stay zero-copy).

"torch_cuda" (and a Connection's device="cuda" or "cuda:N"): the same tensors
on the GPU. A Connection whose only converter is a torch_cuda one receives
through tensorcom's C++ GPU feeder (tensorcom._GpuFeeder, gpu_feeder.h): a
thread of its own takes each batch from the connection, copies it once into
pinned memory and on to a pool of device buffers on a stream of its own,
`prefetch` batches ahead. Each batch arrives as tensorcom.DeviceTensor objects
that torch.from_dlpack takes without a copy, so a uint8 image tensor is the
feeder's own memory (dtype changes, as above, make new tensors on the GPU).
The stream current at recv() (or iteration) waits on the GPU, not the host,
for the copy, and is recorded as the batch's reader: the buffer goes back to
the pool once every tensor of the batch is gone, and is refilled only after
the work queued on that stream by then. Work on another stream must be
ordered after the current one (torch.cuda.Stream.wait_stream) or keep the
tensors until it is done. normalize= has the feeder turn uint8 (B,H,W,C)
images into normalized floats (B,C,H,W) in one kernel.

Where the feeder cannot be used the converter uploads each array itself: the
array is copied once into pinned host memory from torch's caching host
allocator, then uploaded with a non-blocking copy on a side stream that the
current stream waits for. That happens when tensorcom was built without CUDA
(tensorcom._tensorcom.gpu_feeding_available() is False), when the
Connection has batch_transforms or several converters, and when the converter
is called on arrays directly. Without torch.cuda it raises UnavailableError.
"""

from typing import Any, Dict, Optional

import numpy as np
import torch

from . import _tensorcom
from ._tensorcom import ArgumentError, DeviceTensor, UnavailableError

# Integer dtypes torch cannot view (or the reference widens): read as int64.
_WIDEN = {np.dtype(t) for t in ("int16", "uint16", "int32", "uint32", "uint64")}
_FLOATS = {np.dtype(t) for t in ("float16", "float64")}
# What the feeder's unsigned integers become: int64 holding the same value
# (uint64 wraps, as numpy's astype does), made from a signed view of the bits.
_UNSIGNED_MASKS = {"uint16": 0xFFFF, "uint32": 0xFFFFFFFF, "uint64": None}
# normalize=True: ImageNet's mean and std, as the feeder's ImageConversion.
_IMAGENET = dict(mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))


def _cpu_tensor(a):
    """A CPU tensor viewing a (a copy only where torch has no such dtype)."""
    if a.dtype in (np.dtype("uint16"), np.dtype("uint32"), np.dtype("uint64")):
        a = a.astype(np.int64)
    elif not a.flags.writeable:
        a = a.copy()  # torch tensors are writable; viewing read-only memory would be a lie
    return torch.from_numpy(a)


def _torch_dtype(dtype):
    return getattr(torch, dtype) if isinstance(dtype, str) else dtype


def _target_dtype(np_dtype, dtype):
    if dtype is not None:
        return _torch_dtype(dtype)
    if np_dtype in _FLOATS:
        return torch.float32
    if np_dtype in _WIDEN:
        return torch.int64
    return None


def to_chw(t: Any) -> Any:
    """(B,H,W,C) -> (B,C,H,W) and (H,W,C) -> (C,H,W) for C in 3, 4, as views."""
    if t.ndim == 4 and t.shape[3] in (3, 4):
        return t.permute(0, 3, 1, 2)
    if t.ndim == 3 and t.shape[2] in (3, 4):
        return t.permute(2, 0, 1)
    return t


class TorchConverter:
    """numpy array -> CPU torch tensor (see the module's doc); anything else passes."""

    def __init__(self, dtype: Any = None, transpose: bool = True) -> None:
        self.dtype = dtype
        self.transpose = transpose

    def __call__(self, a: Any) -> Any:
        if not isinstance(a, np.ndarray):
            return a
        t = _cpu_tensor(a)
        target = _target_dtype(a.dtype, self.dtype)
        if target is not None and t.dtype != target:
            t = t.to(target)
        return to_chw(t) if self.transpose else t


def _feeder_conversion(normalize):
    """The _GpuFeeder arguments of a normalize= (None, False, True or a dict)."""
    if not normalize:
        return {}
    spec: Dict[str, Any] = dict(_IMAGENET, tensor=0, dtype="float32")
    if isinstance(normalize, dict):
        unknown = set(normalize) - set(spec)
        if unknown:
            raise ArgumentError(f"normalize: unknown keys {sorted(unknown)} (tensor, dtype, mean, std)")
        spec.update(normalize)
    elif normalize is not True:
        raise ArgumentError(f"normalize is True, False or a dict (tensor, dtype, mean, std), not {normalize!r}")
    dtype = str(spec["dtype"]).removeprefix("torch.")  # "float16" or torch.float16
    return dict(convert_tensor=int(spec["tensor"]), convert_dtype=dtype, mean=[float(x) for x in spec["mean"]],
                std=[float(x) for x in spec["std"]])


class CudaConverter:
    """numpy array or tensorcom.DeviceTensor -> CUDA tensor (see the module's doc).

    device     "cuda" (the current device) or "cuda:N"
    dtype      the tensors' dtype (default: floats float32, wider integers int64)
    transpose  images (B,H,W,3|4) and (H,W,3|4) as channels-first views
    normalize  feeder only: True converts tensor 0, uint8 (B,H,W,C), to
               float32 (B,C,H,W) as (x / 255 - mean) / std with ImageNet's
               mean and std; a dict may set tensor, dtype ("float32",
               "float16", "bfloat16"), mean and std
    prefetch   feeder only: batches copied ahead (prefetch + 1 device buffers)
    """

    def __init__(self, device: Any = "cuda", dtype: Any = None, transpose: bool = True, normalize: Any = None,
                 prefetch: int = 2) -> None:
        self.device = torch.device(device)
        self.dtype = dtype
        self.transpose = transpose
        self.normalize = normalize
        self.prefetch = prefetch
        self._conversion = _feeder_conversion(normalize)  # checked now, not at the first batch
        self._stream = None

    def gpu_feeder_options(self) -> Optional[Dict[str, Any]]:
        """The arguments of a tensorcom._GpuFeeder that receives for this
        converter, or None where the feeder cannot be used (no CUDA in
        tensorcom's build, or none in torch)."""
        if not torch.cuda.is_available() or not _tensorcom.gpu_feeding_available():
            return None
        index = self.device.index if self.device.index is not None else torch.cuda.current_device()
        return dict(device=index, prefetch=self.prefetch, **self._conversion)

    def __call__(self, a: Any) -> Any:
        if type(a) is DeviceTensor:
            return self._from_feeder(a)
        if not isinstance(a, np.ndarray):
            return a
        if not torch.cuda.is_available():
            raise UnavailableError("the torch_cuda converter needs CUDA, and torch.cuda is not available")
        if self.normalize:
            raise UnavailableError("normalize= needs tensorcom's GPU feeder: a Connection whose only converter this "
                                   "is, without batch_transforms, in a build of tensorcom with CUDA")
        return self._upload(a)

    def _from_feeder(self, a):
        """The feeder's tensor as a torch tensor, without a copy where the dtype stays."""
        # from_dlpack makes the current stream wait for the batch and read it.
        if a.dtype in _UNSIGNED_MASKS:
            t = _widened(torch.from_dlpack(a.signed_view()), _UNSIGNED_MASKS[a.dtype])
        else:
            t = torch.from_dlpack(a)
        if a.converted:
            return t if self.dtype is None else t.to(_torch_dtype(self.dtype))
        target = _target_dtype(np.dtype(a.dtype) if a.dtype != "bfloat16" else None, self.dtype)
        if target is not None and t.dtype != target:
            t = t.to(target)
        return to_chw(t) if self.transpose else t

    def _upload(self, a):
        """The fallback: a's copy in pinned memory, uploaded on a side stream."""
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


def _widened(signed, mask):
    """int64 values of unsigned integers whose bits `signed` holds as signed ones."""
    wide = signed.to(torch.int64)
    return wide if mask is None else wide.bitwise_and_(mask)

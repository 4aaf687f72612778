"""Converters: what a Connection applies to each received array, as the
reference's `converters=` argument.

A converter is a callable taking one array and returning anything, or None
(leave the array alone). A Connection's converters= is one of them, a list
of them (applied round-robin over the batch's arrays, transform_with), or a
name from converter_table. tonumpy and totorch make them, as the reference's
zcom.tonumpy and zcom.totorch.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from ._tensorcom import ArgumentError

# What a converter is: a callable taking one array.
Converter = Callable[[Any], Any]


def _torch_support():
    """tensorcom.torch, imported on first use: torch is optional."""
    from . import torch
    return torch


def _is_torch_tensor(a):
    return type(a).__module__.startswith("torch") and hasattr(a, "detach")


class NumpyConverter:
    """torch tensor -> numpy array, images (C,H,W) and (B,C,H,W) with C in 3, 4
    permuted to channels-last (H,W,C), (B,H,W,C); anything else passes."""

    def __init__(self, dtype: Any = None, transpose: bool = True) -> None:
        self.dtype = dtype
        self.transpose = transpose

    def __call__(self, a: Any) -> Any:
        if not _is_torch_tensor(a):
            return a
        if self.transpose and a.ndim == 3 and a.shape[0] in (3, 4):
            a = a.permute(1, 2, 0)
        elif self.transpose and a.ndim == 4 and a.shape[1] in (3, 4):
            a = a.permute(0, 2, 3, 1)
        out = a.detach().cpu().numpy()
        return out if self.dtype is None else out.astype(self.dtype)


def tonumpy(dtype: Any = None, transpose: bool = True) -> NumpyConverter:
    """A converter from torch tensors to numpy arrays (the reference's tonumpy)."""
    return NumpyConverter(dtype=dtype, transpose=transpose)


def totorch(dtype: Any = None, device: Any = "cpu", transpose: bool = True, normalize: Any = None,
            prefetch: int = 2) -> Converter:
    """A converter from numpy arrays to torch tensors on device (the reference's
    totorch): floats become float32 and wider integers int64 unless dtype says
    otherwise; images (H,W,C), (B,H,W,C) with C in 3, 4 become channels-first.
    On a CUDA device a Connection receives through the C++ GPU feeder, which
    normalize= and prefetch= configure (tensorcom.torch.CudaConverter)."""
    torch = _torch_support()
    if str(device) == "cpu":
        if normalize:
            raise ArgumentError("normalize= is done by the GPU feeder: give device=\"cuda\"")
        return torch.TorchConverter(dtype=dtype, transpose=transpose)
    return torch.CudaConverter(device=device, dtype=dtype, transpose=transpose, normalize=normalize, prefetch=prefetch)


def device_converter(device: Any) -> Converter:
    """The converter for a Connection's device=: torch tensors on that device."""
    name = str(device)
    if name == "cpu" or name.startswith("cuda"):
        return totorch(device=name)
    raise ArgumentError(f"unknown device {device!r} (cpu, cuda or cuda:N)")


# Name -> factory. Each Connection that names a converter gets one of its
# own (the CUDA one keeps a stream).
_factories: Dict[str, Callable[[], Converter]] = {
    "numpy": tonumpy,
    "torch": totorch,
    "torch_cuda": lambda: totorch(device="cuda"),
}


class ConverterTable(Mapping[str, Converter]):
    """name -> converter, as the reference's converter_table: "numpy", "torch",
    "torch_cuda". Each is made on first lookup, so torch is imported only by
    those who ask for a torch converter."""

    def __init__(self, factories: Mapping[str, Callable[[], Converter]]) -> None:
        self._factories = factories
        self._made: Dict[str, Converter] = {}

    def __getitem__(self, name: str) -> Converter:
        if name not in self._made:
            self._made[name] = self._factories[name]()
        return self._made[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._factories)

    def __len__(self) -> int:
        return len(self._factories)


converter_table = ConverterTable(_factories)


def listify(x: Any) -> Optional[Union[List[Any], Tuple[Any, ...]]]:
    """None for None, a list or tuple as is, [x] for anything else."""
    if x is None:
        return None
    if isinstance(x, (list, tuple)):
        return x
    return [x]


def make_converters(spec: Any) -> Optional[List[Optional[Converter]]]:
    """The converters for a `converters=` argument: None, or a list of callables and Nones."""
    items = listify(spec)
    if items is None:
        return None
    out: List[Optional[Converter]] = []
    for item in items:
        if isinstance(item, str):
            factory = _factories.get(item)
            if factory is None:
                raise ArgumentError(f"unknown converter {item!r} (known: {', '.join(sorted(_factories))})")
            out.append(factory())
        elif item is None or callable(item):
            out.append(item)
        else:
            raise ArgumentError(f"a converter is a name, a callable or None, not {item!r}")
    return out


def transform_with(sample: Sequence[Any], transformers: Optional[Sequence[Optional[Converter]]]) -> Any:
    """Applies transformers[i % len(transformers)] to sample[i] (None: unchanged)."""
    if not transformers:
        return sample
    result = list(sample)
    for i, value in enumerate(result):
        f = transformers[i % len(transformers)]
        if f is not None:
            result[i] = f(value)
    return result
